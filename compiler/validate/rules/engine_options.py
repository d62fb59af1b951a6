"""`runtime.extra_args`: engine options that the engine reads as whole options of its `run`
(compiler/model/engine_args.py), none of which would undo what the job promises about its
container: that it is made from the billed image, that a step ends when its container does,
that a stop signal stops it, and that the container is named overbrainer-<id> and removed.

Options that only change what runs inside (`--network=host`, `--network=none`, `--init`) or
that the job does not rely on (`--sig-proxy=false`: it stops a container with `engine stop`,
not through the client) stay legal.
"""

from __future__ import annotations

from collections.abc import Iterator

from ...model.engine_args import FALSE, TABLES, Option, OptionError, read_options
from .common import Problem, get

# Options by the reason they cannot be given, whatever their value but false.
_REFUSED = {
    "detach": "the step would return at once while its container runs on: the job would "
              "go on (and say done) without it, and a signal would no longer stop it",
    "replace": "podman would remove a running container of the same job instead of "
               "refusing to start (exit 4)",
    "rootfs": "podman would read the image as a folder to use as the root filesystem",
    "help": "the engine would print its help and run nothing, and the step would pass",
}
_NAMED = "the job finds, stops and removes its container by the name overbrainer-<id>"
_KEEPS_CONTAINER = ("a stopped container would be left behind, and the next run refuses to "
                    "start beside it (exit 4)")


def check(data: dict) -> Iterator[Problem]:
    engine = get(data, "runtime", "kind")
    extra = get(data, "runtime", "extra_args")
    if not isinstance(engine, str) or engine not in TABLES or not isinstance(extra, list):
        return  # the runtime rules say where extra_args applies
    for i, word in enumerate(extra):
        if not isinstance(word, str) or not word.startswith("-"):
            continue  # the schema says an option starts with '-'
        try:
            options = read_options(engine, word)
        except OptionError as error:
            yield Problem(("runtime", "extra_args", i), str(error))
            continue
        reason = next(filter(None, map(_breaks_the_job, options)), None)
        if reason:
            yield Problem(("runtime", "extra_args", i), f"{word.partition('=')[0]}: {reason}")


def _breaks_the_job(option: Option) -> str | None:
    if option.name == "name":
        return _NAMED
    if option.name == "rm":
        return _KEEPS_CONTAINER if option.value in FALSE else None
    if option.name in _REFUSED and option.value not in FALSE:
        return _REFUSED[option.name]
    return None
