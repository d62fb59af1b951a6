"""One escaper of invisible characters (compiler/core/text.py): every message that shows a
value shows each character that does not show as itself as an escape, by one list."""

from __future__ import annotations

import pytest

from compiler.core.diagnostics import show
from compiler.core.text import is_invisible, quoted, visible
from compiler.read.lockfile import read_lock

# Invisible to a reader but printable to Python (a letter, a symbol), so repr keeps them.
PRINTABLE_YET_INVISIBLE = ["\u3164", "\u2800", "\u115f", "\U0001d159"]


@pytest.mark.parametrize("char", PRINTABLE_YET_INVISIBLE)
def test_show_escapes_what_text_calls_invisible(char):
    assert char.isprintable() and is_invisible(char)
    shown = show(f"a{char}b")
    assert char not in shown
    assert ascii(char)[1:-1] in shown


@pytest.mark.parametrize("value", ["plain", "it's", 'say "hi"', "tab\there", "é", "\u202e", 3])
def test_quoted_is_repr_with_every_invisible_character_escaped(value):
    assert quoted(value) == visible(repr(value))
    assert quoted(value) == repr(value)  # nothing repr leaves unseen here


@pytest.mark.parametrize("line", ["ubuntu\u3164 sha256:0", "ubuntu\u3164@sha256:0 sha256:0"])
def test_a_lock_line_that_hides_a_character_is_shown_with_it_escaped(tmp_path, line):
    path = tmp_path / "obc.lock"
    path.write_text(f"{line}\n", encoding="utf-8")
    _, (problem,) = read_lock(path)
    assert "\\u3164" in problem.message and "\u3164" not in problem.message
