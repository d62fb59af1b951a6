"""notify: whom the job tells what becomes of it (docs/notify.md), and on which events."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

Event = Literal["started", "step_failed", "requeued", "done", "gave_up"]
# Every event, in the order a job meets them (the schema's enum, README's table).
EVENTS: tuple[Event, ...] = ("started", "step_failed", "requeued", "done", "gave_up")


@dataclass(frozen=True, slots=True)
class Notify:
    """On each of `events`, run `command` with the event's JSON on its stdin, or POST that
    JSON with curl to `url`, or to the URL in the environment variable `url_secret` where
    the job runs (a webhook that holds a token: its value never exists at compile time)."""

    events: tuple[Event, ...]
    command: tuple[str, ...] = ()
    url: str | None = None
    url_secret: str | None = None

    @property
    def posts(self) -> bool:
        """Whether the events are POSTed to a URL (else a command hears them)."""
        return self.url is not None or self.url_secret is not None

    @property
    def host(self) -> str:
        """Where the POSTs go, for people: the URL's host, or `the host in $NAME`."""
        if self.url is not None:
            return urlsplit(self.url).hostname or self.url
        return f"the host in ${self.url_secret}"

    @property
    def target(self) -> str:
        """What hears the events, for people: the URL, or the variable that holds it."""
        return self.url if self.url is not None else f"the URL in ${self.url_secret}"

# How long one notification may take: curl's --max-time; a command is stopped (KILL, all it
# started) a second after.
NOTIFY_SECONDS = 5
