"""A job's script checked in its two parts: the job part (its header and the job, and the
plan record after the library) and obc's runtime library (its parts and the `obc_main`
call), each followed or preceded by a summary of the other. The library is the same text in
every script of one obc version with those parts, so its check is found in the cache; only
the job part, about a tenth of the script, is new for each shape.

shellcheck's findings on a line depend on the rest of the script only through names: which
variables are assigned and read, which functions are defined, called with arguments or
without, and always exit (names.py), and the directives before its first command, which
hold for the whole file. The summary of a part says that in a few lines of shell:

    NAME='' NAME=''             the variables it assigns, every one (a misspelt name is
                                told by its likeness to the names assigned)
    : "$NAME" "$1"              those it reads that the other part assigns, and the
                                arguments its top level reads
    FUNCTION() {                each function the other part calls, or that leads to one
      : "$1"                    of the other's: the arguments it reads,
      [ "$$" = 0 ] || OTHER x   the calls it makes, with an argument if the call has any
      exit                      (`$$` keeps each reachable), up to where it always exits
    }
    [ "$$" = 0 ] || FUNCTION x  the top level's calls, and `exit` if it always exits

Findings on the summary's lines are the other check's to make, and dropped; those on the
part's own lines are mapped back to the script's lines. Where shellcheck's reachability
analysis of a long script differs from that of a short one (a call that never returns, seen
through another), a part can find more or less than the whole: a shape with any finding
in its parts therefore has its scripts checked whole (shellcheck.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..core.shell import LIBRARY_SECTION
from .names import Body, Names, exiting, names_of

# The lines after the last command: blank, or comments.
_TRAILING_COMMENTS = re.compile(r"(?<=\n)(?:[ \t]*(?:#[^\n]*)?\n)*[ \t]*(?:#[^\n]*)?\Z")
# A directive before the script's first command holds for the whole file (shellcheck's
# Parser.hs), the library too.
_DIRECTIVE_PREFIX = "# shellcheck "


@dataclass(frozen=True, slots=True)
class Part:
    """A text to check for one part of a script, and the script's line (1-based) of each of
    its lines: None for a line of the summary."""

    text: str
    lines: tuple[int | None, ...]


def split(text: str) -> tuple[Part, Part] | None:
    """Return the two texts that check `text` in parts, the job part's and the library's;
    None for a script that embeds no library."""
    match = LIBRARY_SECTION.search(text)
    if match is None:
        return None
    job, rest = text[:match.start()], text[match.start():]
    # The plan record and the blank lines after the last command are the job's.
    end = _TRAILING_COMMENTS.search(rest)
    library, record = (rest[:end.start()], rest[end.start():]) if end else (rest, "")
    job_names, library_names = names_of(job), _library_names(library)
    exits = exiting({**job_names.functions, **library_names.functions})
    first, last = job.count("\n") + 1, (job + library).count("\n") + 1
    library += "" if library.endswith("\n") else "\n"  # a script without a last newline
    return (
        _assemble([(job, 1), (summary(library_names, job_names, exits), None),
                   (record, last)]),
        _assemble([("#!/bin/sh\n" + _file_wide(job), None),
                   (summary(job_names, library_names, exits), None), (library, first)]))


@lru_cache(maxsize=64)
def _library_names(library: str) -> Names:
    """The library's names: the same text in every script of a version with its parts."""
    return names_of(library)


def summary(part: Names, other: Names, exits: set[str]) -> str:
    """The lines of shell that tell shellcheck, checking `other`, what `part` does with
    names (see the module's docstring); `exits` are the script's functions that always
    exit."""
    theirs = set(other.functions)
    called = {name for body in other.bodies() for name, _ in body.calls
              if name in part.functions}
    # and those `other` defines too: the one defined last is the one called.
    kept = called | _reaching(part, theirs) | (set(part.functions) & theirs)
    lines = [" ".join(f"{name}=''" for name in part.assigned())] if part.assigned() else []
    assigned = other.assigned()
    read = [f'"${name}"' for body in part.bodies() for name in body.read if name in assigned]
    read += [f'"${name}"' for name in part.top.positional]
    lines += [": " + " ".join(dict.fromkeys(read))] if read else []
    for name, body in part.functions.items():
        if name in kept:
            inside = [*([": " + " ".join(f'"${p}"' for p in body.positional)]
                        if body.positional else []), *_steps(body, kept | theirs, exits)]
            lines += [f"{name}() {{", *(f"  {line}" for line in inside or [":"]), "}"]
    # The calls with arguments of a function `other` calls: shellcheck tells a call
    # without (SC2119) only when no call has any.
    lines += dict.fromkeys(_call(name, True) for body in part.bodies()
                           for name, arguments in body.calls if arguments and name in called)
    # A script that can run past its end may be sourced: shellcheck then takes every
    # function for invoked (SC2329); so the top level's `exit` is kept.
    lines += _steps(part.top, kept | theirs, exits)
    return "".join(line + "\n" for line in lines)


def _reaching(part: Names, targets: set[str]) -> set[str]:
    """The functions of `part` from which a call of `targets` can be reached."""
    found: set[str] = set()
    while True:
        more = {name for name, body in part.functions.items()
                if any(call in targets or call in found for call, _ in body.calls)}
        if more == found:
            return found
        found = more


def _steps(body: Body, functions: set[str], exits: set[str]) -> list[str]:
    """The calls of `functions` in `body`, up to the statement where it exits, if any."""
    lines: dict[str, None] = {}
    for word, arguments in body.steps:
        if arguments is None and (word == "exit" or word in exits):
            return [*lines, "exit"]
        if arguments is not None and word in functions:
            lines.setdefault(_call(word, arguments))
    return list(lines)


def _call(name: str, arguments: bool) -> str:
    return f'[ "$$" = 0 ] || {name}{" x" if arguments else ""}'


def _file_wide(job: str) -> str:
    """The directives of the job part before its first command."""
    found = []
    for line in job.split("\n"):
        if line.startswith(_DIRECTIVE_PREFIX):
            found.append(line + "\n")
        elif line.strip() and not line.startswith("#"):
            break
    return "".join(found)


def _assemble(pieces: list[tuple[str, int | None]]) -> Part:
    """One text of `pieces`, each a text and the script's line of its first line (None: not
    the script's)."""
    lines: list[int | None] = []
    for text, first in pieces:
        count = text.count("\n") + (not text.endswith("\n"))
        lines += [None] * count if first is None else range(first, first + count)
    return Part("".join(pieces_text for pieces_text, _ in pieces), tuple(lines))
