"""Script shapes: a job's script with each value replaced by a placeholder that keeps what can
matter to shellcheck, so that one shellcheck run stands for every script of that shape.

The shape is the same templates rendered with another `Printer`, so it follows any change to
them. Text the templates write themselves stays as written (a function name in command
position, say); text that holds a value of the job gets a placeholder, which keeps its
quoting, every character that is not an ASCII letter or digit (quotes, `$`, backslashes,
`~`, blanks, newlines, non-ASCII), the case of each run of letters, and which values are
equal; words of letters only, and option-like words, stay as written (a command's or an
option's name can matter). Comments and quoted here-document bodies, which shellcheck reads
only for directives and end tokens, become one placeholder line; a body line shellcheck
could take for the end token keeps the body as written, and a script whose comments read as
directives other than its shape's has no shape. A shape with findings says nothing: the
scripts it stands for are then checked themselves.
"""

from __future__ import annotations

import dataclasses
import re
import string
from collections.abc import Iterable, Iterator
from functools import cache, lru_cache

from ..core import shell
from ..core.shell import ShellText
from ..model.job import Job
from .meaning import field_names
from .render import Printer, render_twice

# A comment that shellcheck reads as a directive (Parser.hs, `readAnnotationPrefix`).
_DIRECTIVE = re.compile("#[ \t\u00a0\u200b]*shellcheck[^\n]*")
# Kept as written: letters only (a command or step name), or an option such as `--rm`.
_AS_WRITTEN = re.compile("-*[A-Za-z]*")
_NUMBER = re.compile("0|[1-9][0-9]{0,17}")
# A value's skeleton (_variants): each ASCII letter or digit as its kind, `A`, `a` or `0`,
# then each run of one kind cut to its first character, with no function called for each run.
_KINDS = str.maketrans(string.ascii_uppercase + string.ascii_lowercase + string.digits,
                       "A" * 26 + "a" * 26 + "0" * 10)
_RUN_REST = re.compile("(?<=A)A+|(?<=a)a+|(?<=0)0+")
_KIND = re.compile("[Aa0]")
_LETTERS = {"A": string.ascii_uppercase, "a": string.ascii_lowercase}


# Each distinct shape this process has made, as one object: a thousand scripts have a few
# shapes, and their results (pickled together from a worker) then hold one copy, not 20 KB
# each. With it, the directives in it, searched for once, not in every script's shape.
_SHAPES: dict[str, tuple[str, list[str]]] = {}


def script_and_shape(job: Job) -> tuple[str, str | None]:
    """Return the script of `job` and its shape, in one render; None for the shape if no
    shape can stand for the script."""
    text, shape = render_twice(job, shape_printer(job))
    shape, directives = _known(shape)
    if directives != _DIRECTIVE.findall(text):
        return text, None
    return text, shape


def _known(shape: str) -> tuple[str, list[str]]:
    """Return the one object of `shape` this process keeps, and the directives in it."""
    known = _SHAPES.get(shape)
    if known is None:
        known = _SHAPES[shape] = (shape, _DIRECTIVE.findall(shape))
    return known


def shape_printer(job: Job) -> ShapePrinter:
    """The printer that writes the shape of `job`'s script."""
    # The hashes the model derives (the training inputs) are values too, of letters and
    # digits only: each distinct one gets a placeholder of its own, whatever its digits.
    inputs = job.training_inputs
    hashes = (inputs, *(inputs + job.step_inputs_suffix(step) for step in job.steps))
    return ShapePrinter(job_strings(job), hashes)


class ShapePrinter(Printer):
    """Writes placeholders; one printer per script, so equal values get equal placeholders."""

    def __init__(self, values: Iterable[str], hashes: Iterable[str] = ()) -> None:
        # The job's own strings: text that holds none of them is the templates' own.
        self.values = {value for value in values if value}
        self.placeholders = {value: f"sha256:h{n}"
                             for n, value in enumerate(dict.fromkeys(hashes))}
        self.taken: set[str] = set(self.placeholders.values())
        self.numbers: dict[int, str] = {}
        # Each word as written, once: a script writes over a quarter of its words again.
        self.words: dict[str, ShellText] = {}

    def word(self, value: str) -> ShellText:
        if value not in self.words:
            self.words[value] = self._word(value)
        return self.words[value]

    def _word(self, value: str) -> ShellText:
        placeholder = self._placeholder(value)
        if shell.quote(value) == value:
            return ShellText(placeholder)
        return ShellText("'" + placeholder.replace("'", "'\\''") + "'")

    def number(self, value: int) -> str:
        # Equal numbers stay equal, and each stays on its side of 255 (`exit 256` is a
        # finding, `exit 255` is not).
        if value not in self.numbers:
            small = sum(0 <= n <= 255 for n in self.numbers)
            if not 0 <= value <= 255:
                self.numbers[value] = str(256 + len(self.numbers))
            else:  # past 256 small numbers (never, in a job), as written
                self.numbers[value] = str(small if small <= 255 else value)
        return self.numbers[value]

    def comment(self, lines: list[str]) -> ShellText:
        return ShellText("# v")

    def sbatch(self, job_slurm: object) -> ShellText:
        return ShellText("# v")

    def heredoc(self, body: str) -> ShellText:
        # Sound only for a quoted here-document (`<<'EOF'`), whose body shellcheck reads as
        # one literal; obc writes no other kind.
        delimiter = shell.heredoc_delimiter(body)
        if delimiter is None or any(shell.looks_like_end_token(line, delimiter)
                                    for line in body.split("\n")):
            return super().heredoc(body)
        return super().heredoc("v")

    def _placeholder(self, value: str) -> str:
        if _NUMBER.fullmatch(value):
            return self.number(int(value))
        if value in self.placeholders:
            return self.placeholders[value]
        if _AS_WRITTEN.fullmatch(value) or not self._holds_a_value(value):
            chosen = value  # a name, or the templates' own text
        else:
            chosen = next(candidate for candidate in _variants(value)
                          if candidate not in self.taken)
        self.placeholders[value] = chosen
        self.taken.add(chosen)
        return chosen

    def _holds_a_value(self, value: str) -> bool:
        """Whether `value` holds one of the job's strings (most words are one, whole)."""
        return value in self.values or any(map(value.__contains__, self.values))


def job_strings(job: Job) -> set[str]:
    """Return every string a job holds, however deep (found without a generator for each
    value it holds: there are hundreds)."""
    found: set[str] = set()
    _add_strings(job, found)
    return found


def _add_strings(value: object, found: set[str]) -> None:
    if isinstance(value, str):
        found.add(value)
    elif isinstance(value, tuple | list):
        for item in value:
            _add_strings(item, found)
    elif isinstance(value, dict):
        for key, item in value.items():
            _add_strings(key, found)
            _add_strings(item, found)
    else:
        for name in _record_fields(type(value)):
            _add_strings(getattr(value, name), found)


@cache  # by class: asked of every value of every job
def _record_fields(cls: type) -> tuple[str, ...]:
    """The fields of a dataclass, in which a job holds strings; none for any other value."""
    return field_names(cls) if dataclasses.is_dataclass(cls) else ()


def _variants(value: str) -> Iterator[str]:
    """Yield placeholders for `value`: its runs of letters and digits shrunk to one `A`, `a`
    or `0`, then the same with its first run changed, for values that only look alike."""
    skeleton = _skeleton(value)
    yield skeleton
    first = _KIND.search(skeleton)  # its first run, now one character
    if first is None:
        return
    start, end = first.span()
    number = 1
    while True:
        yield skeleton[:start] + _nth(first.group(), number) + skeleton[end:]
        number += 1


@lru_cache(maxsize=4096)  # most values are in other jobs too: an image, a step's name
def _skeleton(value: str) -> str:
    """Return `value` with each run of ASCII letters or digits shrunk to one `A`, `a` or `0`."""
    return _RUN_REST.sub("", value.translate(_KINDS))


def _nth(kind: str, number: int) -> str:
    """Return the `number`-th distinct run of this kind: 1 → b, 26 → ba for letters."""
    if kind == "0":
        return str(number)
    digits, alphabet = "", _LETTERS[kind]
    while True:
        number, rest = divmod(number, 26)
        digits = alphabet[rest] + digits
        if number == 0:
            return digits
