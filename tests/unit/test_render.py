"""The render stage: quoting is enforced by the template engine, not by care."""

from __future__ import annotations

import shlex

import jinja2
import pytest

from compiler.core.shell import ShellText, quote
from compiler.render import render
from compiler.render.render import UnquotedValueError
from tests.conftest import compile_text


def render_string(source: str, **values) -> str:
    return render._environment().from_string(source).render(**values)


@pytest.mark.parametrize("value", ["plain", "it's", "$(id)", "a b", "", "time", "=ls", "x\ny"])
def test_every_interpolated_string_comes_out_as_one_quoted_word(value):
    out = render_string("echo {{ v }}", v=value)
    assert shlex.split(out) == ["echo", value]


@pytest.mark.parametrize("value", [None, ["a"], {"a": 1}, True, 1.5, object()])
def test_a_value_without_a_shell_form_fails_loudly(value):
    with pytest.raises(UnquotedValueError):
        render_string("echo {{ v }}", v=value)


@pytest.mark.parametrize(("template", "word"), [
    ("{{ v | forceescape }}", "$(touch PWNED)"),
    ("{{ v | string }}", "$(touch PWNED)"),
    ("{{ v ~ '' }}", "$(touch PWNED)"),
    ("{{ 'x ' ~ v }}", "x $(touch PWNED)"),
    ("{{ v | lower }}", "$(touch pwned)"),
])
def test_no_jinja_trick_lets_a_value_out_unquoted(template, word):
    assert shlex.split(render_string(template, v="$(touch PWNED)")) == [word]


def test_the_html_safe_filter_does_not_exist():
    with pytest.raises(jinja2.TemplateAssertionError):
        render_string("{{ v | safe }}", v="x")


def test_raw_shell_text_is_only_what_obc_filters_return():
    assert render_string("{{ v }}", v=ShellText('"$HOME"')) == '"$HOME"'
    assert render_string("{{ p | path }}", p="~/a b") == '"${HOME-}"\'/a b\''
    with pytest.raises(UnquotedValueError):
        render_string("{{ n | expansion }}", n="A;rm")


def test_an_undefined_name_in_a_template_is_an_error():
    with pytest.raises((jinja2.UndefinedError, UnquotedValueError)):
        render_string("{{ nope }}")


def test_a_newline_in_a_value_cannot_escape_the_header_comments(tmp_path):
    text = compile_text(tmp_path, """\
version: 1
id: c1
description: "first\\ntouch PWNED\\n"
runtime: {kind: docker}
steps: [{name: s, run: [x, "a\\ntouch PWNED2"]}]
""")
    # The header: comment lines, then the summary as a quoted here-document of comment lines.
    top, summary = text.split("\nPS4='+ '\n", 1)[0], text.split("<<'OBC_EOF'\n", 1)[1]
    assert top.startswith("#!/bin/sh\n")
    assert all(line.startswith("#") for line in top.splitlines())
    assert all(line.startswith("#") for line in summary.split("\nOBC_EOF\n", 1)[0].splitlines())
    assert "# | touch PWNED" in summary.splitlines()  # the description, fenced


def test_quote_leaves_plain_words_bare_and_quotes_everything_else():
    assert quote("axolotl.yaml") == "axolotl.yaml"
    assert quote("nvidia.com/gpu=all") == "'nvidia.com/gpu=all'"
    assert quote("it's") == "'it'\\''s'"
    assert quote("if") == "'if'"
