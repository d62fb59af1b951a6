"""`runtime.extra_args`: engine options that would undo what the job promises about its
container: that a step ends when its container does, that a stop signal stops it, and that
the container is named overbrainer-<id> and removed.

Options that only change what runs inside (`--network=host`, `--network=none`, `--init`) or
that the job does not rely on (`--sig-proxy=false`: it stops a container with `engine stop`,
not through the client) stay legal.
"""

from __future__ import annotations

from collections.abc import Iterator

from .common import Problem, get

# Long options by the reason they cannot be given; docker and podman (pflag) take no
# abbreviations, and a boolean one also as --option=true.
_REFUSED = {
    "detach": "the step would return at once while its container runs on: the job would "
              "go on (and say done) without it, and a signal would no longer stop it",
    "name": "the job finds, stops and removes its container by the name overbrainer-<id>",
    "replace": "podman would remove a running container of the same job instead of "
               "refusing to start (exit 4)",
}
_KEEPS_CONTAINER = ("a stopped container would be left behind, and the next run refuses to "
                    "start beside it (exit 4)")
# pflag's false values, for --rm=false.
_FALSE = ("0", "f", "F", "false", "FALSE", "False")
# Shorthands that take a value: in a group such as -it, the rest of the word after one of
# these is its value, not more flags (docker run and podman run alike).
_SHORT_WITH_VALUE = "acehlmpuvw"


def check(data: dict) -> Iterator[Problem]:
    extra = get(data, "runtime", "extra_args")
    for i, arg in enumerate(extra if isinstance(extra, list) else ()):
        reason = _breaks_the_job(arg) if isinstance(arg, str) else None
        if reason:
            yield Problem(("runtime", "extra_args", i), f"{arg.partition('=')[0]}: {reason}")


def _breaks_the_job(arg: str) -> str | None:
    name, equals, value = arg.removeprefix("--").partition("=")
    if arg.startswith("--"):
        if name == "rm" and equals and value in _FALSE:
            return _KEEPS_CONTAINER
        if name in _REFUSED and not (name != "name" and equals and value in _FALSE):
            return _REFUSED[name]
    elif arg.startswith("-") and "d" in _short_flags(arg[1:]):
        return _REFUSED["detach"]
    return None


def _short_flags(group: str) -> str:
    """Return the flags of a shorthand group: `-dit` is -d -i -t, `-ed` is -e with value d."""
    for i, flag in enumerate(group):
        if flag in _SHORT_WITH_VALUE:
            return group[: i + 1]
    return group
