"""The one way a value becomes POSIX shell text.

`quote` turns any string into a single shell word that every POSIX shell reads back byte for
byte. Everything else here builds on it and returns `ShellText`, the marker the templates
accept without quoting again (see render.py).
"""

from __future__ import annotations

import re

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
RESERVED_WORDS = frozenset(
    "case do done elif else esac fi for function if in select then time until while "
    "coproc foreach repeat end nocorrect noglob".split()
)


class ShellText(str):
    """Text that is already valid shell: quoted words, or fragments obc wrote itself."""

    __slots__ = ()


def quote(value: str) -> ShellText:
    """Return `value` as one shell word: plain when that is unambiguous, else single-quoted."""
    if _PLAIN_WORD.fullmatch(value) and value not in RESERVED_WORDS:
        return ShellText(value)
    return ShellText("'" + value.replace("'", "'\\''") + "'")


def join_words(words: list[str] | tuple[str, ...]) -> ShellText:
    """Return `words` as one command line, each word quoted."""
    return ShellText(" ".join(quote(word) for word in words))


def shell_path(path: str) -> ShellText:
    """Return a path as a shell word, with a leading `~` expanded to `$HOME` where it runs."""
    if path == "~":
        return ShellText('"$HOME"')
    if path.startswith("~/"):
        rest = path[2:]
        return ShellText('"$HOME"' + ("/" + quote(rest) if rest else "/"))
    return quote(path)


def heredoc_delimiter(body: str, base: str = "OBC_EOF") -> str:
    """Return a here-document delimiter that no line of `body` equals."""
    lines = set(body.split("\n"))
    delimiter, n = base, 0
    while delimiter in lines:
        n += 1
        delimiter = f"{base}_{n}"
    return delimiter
