"""notify: whom the job tells what becomes of it (docs/notify.md), and on which events."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, NamedTuple

Event = Literal["started", "step_failed", "requeued", "done", "gave_up"]
# Every event, in the order a job meets them (the schema's enum, docs/notify.md's table).
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
            return url_parts(self.url).host
        return f"the host in ${self.url_secret}"

    @property
    def target(self) -> str:
        """What hears the events, for people: the URL, or the variable that holds it."""
        return self.url if self.url is not None else f"the URL in ${self.url_secret}"

# How long one notification may take: curl's --max-time; a command is stopped (KILL, all it
# started) a second after.
NOTIFY_SECONDS = 5


class UrlParts(NamedTuple):
    """An http(s) URL's parts (RFC 3986), as far as obc reads them: the authority (with any
    user and password), its host, the path, and the query's `name=value` pairs."""

    authority: str
    host: str
    path: str
    query: tuple[tuple[str, str], ...]


# (urllib is not imported: only lock may import what opens a network connection.)
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)([^?#]*)(?:\?([^#]*))?")


def url_parts(url: str) -> UrlParts:
    """The parts of `url`, an http(s) URL the schema has let through."""
    match = _URL.match(url)
    authority, path, query = match.groups("") if match else ("", url, "")
    host = authority.rpartition("@")[2]
    host = host[1:].partition("]")[0] if host.startswith("[") else host.partition(":")[0]
    pairs = tuple((name, value) for name, _, value in
                  (pair.partition("=") for pair in query.split("&") if pair))
    return UrlParts(authority, host, path, pairs)
