"""What obc tells the user: located problems (values) and fatal conditions (exceptions).

A problem in a run file is a `Diagnostic`, collected and reported with all the others. An
`ObcError` means obc cannot go on at all (a bad command line, an unreadable file, no
shellcheck) and ends the run with exit code 2.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class Diagnostic:
    """One problem, at a 1-based line and column of a file, in the field `field`."""

    file: str
    line: int
    column: int
    field: str
    message: str
    hint: str | None = None

    def text(self) -> str:
        """Return the diagnostic in the `FILE:LINE:COL: error: FIELD: message` form."""
        where = f"{self.file}:{self.line}:{self.column}: error: "
        what = f"{self.field}: {self.message}" if self.field else self.message
        return where + what + (f"\n  hint: {self.hint}" if self.hint else "")


class ObcError(Exception):
    """A condition that stops obc as a whole: bad usage or a broken environment (exit 2)."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return "; did you mean 'x'?" for the closest of `choices`, or "" if none is close."""
    # 0.7 rather than difflib's 0.6: a weak suggestion is worse than none (flit #36).
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.7)
    return f"; did you mean '{close[0]}'?" if close else ""


def field_path(path: Iterable[str | int]) -> str:
    """Return a field path such as `steps[1].run[0]` for the keys and indexes in `path`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
