"""Whether a script's embedded library is exactly what obc released, from the script alone.

The header names each part the script embeds by its sha256 and the obc version that wrote it;
templates/lib/released.json holds the sha256 of every part of every release. A script passes
when its parts are those its header names, in that order, each as released, and nothing but
the plan record follows its one `obc_main ${1+"$@"}`. The job part above the library is not
judged here: that is what the admin reads (and `obc compile --check` holds it to its run
file).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.text import visible
from ..render.library import MAIN_CALL, EmbeddedLibrary, read_library, released_parts


@dataclass(frozen=True, slots=True)
class Verdict:
    """What `obc verify` found in one script: its obc version and parts, and each problem;
    for a script that starts others (scripts.py), the job.sh scripts it starts and what
    its verdict says when it holds."""

    version: str | None
    parts: tuple[str, ...]
    problems: tuple[str, ...]
    started: tuple[str, ...] = ()
    summary: str | None = None

    @property
    def verified(self) -> bool:
        return not self.problems


def verify_text(text: str) -> Verdict:
    """Judge a script's library from its text."""
    library = read_library(text)
    if library is None:
        return Verdict(None, (), ("its header names no library (a script of obc 0.2 or "
                                  "older, or not one obc wrote)",))
    return Verdict(library.version, tuple(name for name, _ in library.embedded),
                   tuple(_problems(library)))


def _problems(library: EmbeddedLibrary) -> list[str]:
    released = released_parts().get(library.version)
    problems = []
    if released is None:
        problems.append(f"obc {visible(library.version)} is not a release this obc knows "
                        f"(templates/lib/released.json)")
    if [name for name, _ in library.named] != [name for name, _ in library.embedded]:
        problems.append(f"the header names the parts {_names(library.named)} but the script "
                        f"embeds {_names(library.embedded)}")
    for name, digest in library.embedded:
        if name in library.edited:
            problems.append(f"part {name} is not the text its header names (edited)")
        if released is not None and released.get(name) != digest:
            problems.append(f"part {name} is not obc {library.version}'s")
    if not library.has_main:
        problems.append(f"it has no {MAIN_CALL} line")
    problems += [f"after {MAIN_CALL}: {visible(line)}" for line in library.after]
    return problems


def _names(parts: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(visible(name) for name, _ in parts) or "none"


def format_verdict(verdict: Verdict) -> str:
    """One line: `verified: obc 0.3.0's library, 11 parts as released`, or why not."""
    if verdict.verified:
        return "verified: " + (verdict.summary or f"obc {verdict.version}'s library, "
                                                  f"{len(verdict.parts)} parts as released")
    return "NOT verified: " + "; ".join(verdict.problems)
