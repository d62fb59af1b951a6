"""notify: a command or a URL, and a URL that holds no credential (docs/notify.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ...core.diagnostics import show
from ...model.notify import url_parts
from .common import Problem, get
from .names import SHELL_NAMES, credential_value, looks_like_credential

# A path part or query value that looks like a token: long, of letters and digits mixed
# (Slack's and Discord's webhooks hold theirs in the path).
_TOKEN_LIKE = re.compile(r"(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,}")
_SECRET_FORM = "read it from the environment where the job runs: url: {secret: NAME}"


def check(data: dict) -> Iterator[Problem]:
    notify = data.get("notify")
    if not isinstance(notify, dict):
        return
    if ("command" in notify) == ("url" in notify):
        yield Problem(("notify",), "notify needs either command or url, not both nor neither")
    url = notify.get("url")
    if isinstance(url, str):
        why = _credential_in(url)
        if why:
            yield Problem(("notify", "url"), f"this URL {why}; it would be written into the "
                          "script", _SECRET_FORM)
    secret = get(notify, "url", "secret")
    if isinstance(secret, str) and (secret in SHELL_NAMES or secret.upper().startswith("OBC_")):
        yield Problem(("notify", "url", "secret"),
                      f"{show(secret)} cannot hold notify's URL: the job script needs it")


def _credential_in(url: str) -> str | None:
    """What in `url` looks like a credential, if anything: a user or password, a query
    parameter named like a credential, or a value that looks like a token."""
    parts = url_parts(url)
    if "@" in parts.authority:
        return "holds a user or password"
    for name, value in parts.query:
        if looks_like_credential(name) or name.lower() in ("sig", "signature", "auth", "key"):
            return f"has the query parameter {show(name)}, which looks like a credential"
        if credential_value(value) or _TOKEN_LIKE.fullmatch(value):
            return "has a query value that looks like a token"
    if credential_value(parts.path) or any(_TOKEN_LIKE.fullmatch(part)
                                           for part in parts.path.split("/")):
        return "has a path that looks like it holds a token"
    return None
