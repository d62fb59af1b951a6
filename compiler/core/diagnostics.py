"""What obc tells the user: located problems (values) and fatal conditions (exceptions).

A problem in a run file is a `Diagnostic`, collected and reported with all the others. An
`ObcError` means obc cannot go on at all (a bad command line, an unreadable file, no
shellcheck) and ends the run with exit code 2.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .text import quoted, visible


@dataclass(frozen=True, slots=True, order=True)
class Diagnostic:
    """One problem, at a 1-based line and column of a file, in the field `field`."""

    file: str
    line: int
    column: int
    field: str
    message: str
    hint: str | None = None

    def text(self, severity: str = "error") -> str:
        """Return the diagnostic in the `FILE:LINE:COL: error: FIELD: message` form (or a
        warning's, which does not fail the command)."""
        where = f"{self.file}:{self.line}:{self.column}: {severity}: "
        what = f"{self.field}: {self.message}" if self.field else self.message
        # One line on a terminal: text from a run file must not move the cursor, recolour
        # it or hide in it.
        return visible(where + what) + (f"\n  hint: {visible(self.hint)}" if self.hint else "")


class ObcError(Exception):
    """A condition that stops obc as a whole: bad usage or a broken environment (exit 2)."""


def closest(word: str, choices: Iterable[str]) -> str | None:
    """Return the one of `choices` that `word` is most likely a misspelling of, if any."""
    # 0.7 rather than difflib's 0.6: a weak suggestion is worse than none (flit #36).
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.7)
    return close[0] if close else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return "; did you mean 'x'?" for the closest of `choices`, or "" if none is close."""
    close = closest(word, choices)
    return f"; did you mean '{close}'?" if close else ""


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


def field_path(path: Iterable[str | int]) -> str:
    """Return a field path such as `steps[1].run[0]` for the keys and indexes in `path`.

    Keys that are not plain words are written as JSON strings (`files["a/b.py"]`), so that a
    path is one unambiguous line whatever the run file holds.
    """
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out


def show(value: Any, limit: int = 60) -> str:
    """Return a short, one-line rendering of a value for a message: strings in quotes, every
    character that does not show as itself escaped."""
    text = quoted(value) if isinstance(value, str) else visible(str(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_value(value: Any) -> str:
    """Describe a YAML value by what YAML made of it: `the number 3.1`, `a list`."""
    if value is None:
        return "null (an empty value)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {show(value)}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"the string {show(value)}"
