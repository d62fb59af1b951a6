"""shell.py: the one quoting function, checked against a shell parser as an oracle."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from compiler.core.shell import heredoc_delimiter, join_words, shell_path

TEXT = st.text(st.characters(exclude_characters="\0"))


@settings(derandomize=True, max_examples=500)
@given(st.lists(TEXT))
@example(["", "'", "'\\''", "=ls", "FOO=bar", "time", "-rf", "~", "*", "{a,b}", "\n", "a\\"])
def test_a_quoted_command_line_splits_back_into_its_words(words):
    assert shlex.split(join_words(words)) == words


def test_home_relative_paths_and_variables_expand_where_the_job_runs():
    assert shell_path("~/a b") == '"${HOME-}"\'/a b\''
    assert shell_path("~") == '"${HOME-}"'
    assert shell_path("~/") == '"${HOME-}"/'
    assert shell_path("${SCRATCH}/runs/${RUN}") == '"${SCRATCH-}"/runs/"${RUN-}"'
    assert shell_path("/x/it's ${A}") == "'/x/it'\\''s '\"${A-}\""
    assert shell_path("/abs") == "/abs"
    assert shell_path("rel/dir") == "rel/dir"
    assert shell_path("a/~b") == "'a/~b'"


def test_a_heredoc_delimiter_never_equals_a_line_of_the_body():
    assert heredoc_delimiter("a\nb\n") == "OBC_EOF"
    assert heredoc_delimiter("OBC_EOF\nZOBC_EOF\n") == "YOBC_EOF"
    assert heredoc_delimiter("".join(f"{c}é\n" for c in "OZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqp"
                                     "onmlkjihgfedcba9876543210")) is None
    assert heredoc_delimiter("OBC_EOFX\nOBC_EOF-x\n") == "OBC_EOF"


@pytest.mark.parametrize("line", [
    "OBC_EOF ", " OBC_EOF", "\tOBC_EOF", "OBC_EOF x", "OBC_EOF)", "OBC_EOF#", "OBC_EOF;",
    "OBC_EOF>", "OBC_EOF|", "OBC_EOF&", "\u00a0OBC_EOF", "OBC_EOF\u200b"])
def test_a_heredoc_delimiter_is_never_what_shellcheck_takes_for_an_end_token(line):
    # Shells end the document only at the exact line; shellcheck reports these (SC1039,
    # SC1118-SC1122) whatever the body means, so obc picks another delimiter.
    assert heredoc_delimiter(f"a\n{line}\nb\n") == "ZOBC_EOF"


def test_a_heredoc_delimiter_avoids_the_dash_multibyte_bug():
    # dash 0.5.12 drops a byte of a line that starts like the delimiter and goes on with a
    # non-ASCII character; lines that only share ASCII with it are fine.
    assert heredoc_delimiter("Oé\n") == "ZOBC_EOF"
    assert heredoc_delimiter("OBC\nOBC_x\né\n") == "OBC_EOF"
    assert heredoc_delimiter("Oé\nZé\n") == "YOBC_EOF"
