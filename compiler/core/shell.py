"""The one way a value becomes POSIX shell text.

`quote` turns any string into a single shell word that every POSIX shell reads back byte for
byte. Everything else here builds on it and returns `ShellText`, the marker the templates
accept without quoting again (see render.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from functools import lru_cache

# Words made only of these characters mean the same quoted or not, in every shell we target.
# `=` is left out (a first word `A=b` is an assignment, and zsh expands a leading `=`), and so
# are `~ { } * ? [ ] !` and everything else a shell may expand. Spelled out, not as ranges:
# the script's own quoting function uses the same list in a `case` pattern, where a range's
# meaning depends on the locale.
PLAIN_CHARS = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+:,./-"
)
_PLAIN_WORD = re.compile("[" + re.escape(PLAIN_CHARS) + "]+")

# Reserved words of POSIX sh and of the shells we run under (bash, zsh, ksh93, mksh): one of
# these as a command's first word would be parsed as syntax, so it is always quoted.
RESERVED_WORDS = frozenset((
    "case", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if", "in",
    "select", "then", "time", "until", "while", "coproc", "foreach", "repeat", "end",
    "nocorrect", "noglob",
))


# The first line of each part of obc's runtime library in a script (templates/lib/*.sh): a
# script's job part is what comes before the first (render/library.py, check/parts.py).
LIBRARY_SECTION = re.compile(r"^# --- obc's library: (\w+) -*$", re.MULTILINE)


class ShellText(str):
    """Text that is already valid shell: quoted words, or fragments obc wrote itself."""

    __slots__ = ()


@lru_cache(maxsize=4096)  # a batch writes most words in every script, and each in its shape
def quote(value: str) -> ShellText:
    """Return `value` as one shell word: plain when that is unambiguous, else single-quoted."""
    if _PLAIN_WORD.fullmatch(value) and value not in RESERVED_WORDS:
        return ShellText(value)
    return ShellText("'" + value.replace("'", "'\\''") + "'")


Quote = Callable[[str], ShellText]


def join_words(words: list[str] | tuple[str, ...], quote_word: Quote = quote) -> ShellText:
    """Return `words` as one command line, each word quoted."""
    return ShellText(" ".join(quote_word(word) for word in words))


# `${NAME}` in a path: expanded where the job runs (docs/running.md, "Paths
# where the job runs").
PATH_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def shell_path(path: str, quote_word: Quote = quote) -> ShellText:
    """Return a path as one shell word: a leading `~` becomes `$HOME` and each `${NAME}` the
    variable, expanded where the job runs (`-` keeps `set -u` quiet when preflight is about
    to report it unset); everything else is quoted."""
    if path == "~" or path.startswith("~/"):
        path = "${HOME}" + path[1:]
    parts = []
    for i, part in enumerate(PATH_VARIABLE.split(path)):
        if i % 2:
            parts.append(f'"${{{part}-}}"')
        elif part:
            parts.append(quote_word(part))
    return ShellText("".join(parts) or "''")


def path_variables(path: str | None) -> tuple[str, ...]:
    """Return the variables a path needs where the job runs, HOME for a leading `~`."""
    if path is None:
        return ()
    home = ("HOME",) if path == "~" or path.startswith("~/") else ()
    return tuple(dict.fromkeys((*home, *PATH_VARIABLE.findall(path))))


def expanded_path(path: str, environ: Mapping[str, str]) -> str:
    """Return a path as the job's shell expands it (shell_path): a leading `~` is HOME, each
    `${NAME}` the variable; KeyError names the first variable `environ` does not set."""
    missing = [name for name in path_variables(path) if name not in environ]
    if missing:
        raise KeyError(missing[0])
    if path == "~" or path.startswith("~/"):
        path = environ["HOME"] + path[1:]
    return PATH_VARIABLE.sub(lambda match: environ[match.group(1)], path)


def sourced_path(path: str, quote_word: Quote = quote) -> ShellText:
    """Return a path for `.`: one without a `/` would be searched on PATH, so a relative
    path is written `./path`, from the directory the job starts in."""
    relative = not path.startswith(("/", "~", "${"))
    return shell_path("./" + path if relative else path, quote_word)


# shellcheck's blanks (`linewhitespace`: space, tab, and two it reads as a space).
_BLANKS = " \t\xa0\u200b"


def looks_like_end_token(line: str, delimiter: str) -> bool:
    """Whether shellcheck takes a here-document line for the end token, or for an attempt at
    it: blanks, the delimiter, then nothing, a blank, or one of `)#;>|&` (ShellCheck 0.11.0,
    Parser.hs, `readDocLines.checkEnd`: SC1039, SC1118-SC1122). Shells end the document only
    at the exact line, but shellcheck reports the others, whatever the body means."""
    rest = line.lstrip(_BLANKS)
    if not rest.startswith(delimiter):
        return False
    after = rest[len(delimiter):]
    return after == "" or after[0] in _BLANKS + ")#;>|&"


def heredoc_delimiter(body: str) -> str | None:
    """Return a here-document delimiter that every shell reads `body` under intact, or None
    when none of obc's candidates can (a body built to defeat all of them)."""
    lines = body.split("\n")
    for start in _DELIMITER_STARTS:
        delimiter = start + "OBC_EOF"
        if all(_reads_intact(line, delimiter) for line in lines):
            return delimiter
    return None


# Tried in turn as a delimiter's first character, after the plain "OBC_EOF".
_DELIMITER_STARTS = ("", *"ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba9876543210")


def _reads_intact(line: str, delimiter: str) -> bool:
    """Whether a body line survives a here-document with this delimiter, in every shell, and
    shellcheck reads it as a body line.

    A line equal to the delimiter would end the document. And dash 0.5.12 drops a byte of a
    line that begins like the delimiter and goes on with a non-ASCII character ("OBé" with
    OBC_EOF comes out as "OB\xa9").
    """
    if looks_like_end_token(line, delimiter):
        return False
    if not line.startswith(delimiter[0]):  # most lines: nothing in common
        return True
    common = len(os.path.commonprefix([line, delimiter]))
    return common in (0, len(line)) or line[common].isascii()
