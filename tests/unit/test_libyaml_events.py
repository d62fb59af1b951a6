"""libyaml composes a run file for ruamel only where the two read it alike: the same nodes, tags
and marks, and so the same data, positions and diagnostics (compiler/read/libyaml_events.py)."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
from _pytest.mark.structures import ParameterSet
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.read import libyaml_events, screen
from compiler.read.libyaml_events import compose_alike, is_read_alike
from compiler.read.load import Source, parse_source
from compiler.read.screen import MAX_DEPTH, MAX_VALUES, LoadError
from tests.compile import test_stages
from tests.compile.diagnostics import (
    test_accepting,
    test_corpus,
    test_corpus_hostile,
    test_corpus_runtimes,
    test_corpus_sweep,
    test_health_rules,
    test_job_rules,
)
from tests.compile.diagnostics.corpus import Case

ROOT = Path(__file__).resolve().parents[2]
BUDGET = settings(derandomize=True, database=None, deadline=None, max_examples=1000,
                  suppress_health_check=[HealthCheck.too_slow])

# What YAML 1.1 (libyaml) and 1.2 (ruamel) read otherwise, and what libyaml marks otherwise.
KNOWN_DIFFERENCES = ["\t", "\r", "\r\n", "\x85", "\u2028", "\u2029", "\ufeff", "? ", "?",
                     "{? a: b}", "&a ", "&a.b ", "*a", "*a.b", "!", "!!str ", "! ", "%YAML 1.1\n",
                     "%TAG ! x\n", "%", "@", "`", ": # c\n", ":\n", "- # c\n"]
SCALARS = ["a", "key", "x1", "é", "ü x", "\U0001d11e", "😀 z", "1", "0777", "0o17", "yes", "on",
           "No", "1:20", "-1", "+2", "3.10", "1e3", ".inf", ".NaN", "~", "null", "true", "0x1F",
           "2001-12-14", "1_000", "a b", "a#b", "a:b", "a-b", "-a", "http://h/p", "'q'",
           "'it''s'", "''", '""', '"d\\n"', '"\\t"', '"\\x41\\u00e9"', '"é"', '"a\\\nb"',
           "[a, b]", "[]", "{}", "{a: 1, b: [c]}", "[a, {b: c}]", "'a\n  b'", '"a\n\n  b"',
           "a\n  b", "a\n\n   b c", "[a,\n  b]", "{a: b,\n c: d}", '{"a":b}', "x ", '"\\ "',
           "--- a", "a\n...\n", "a\n---\nb"]
# Every escape of a double-quoted string, and some that are none.
SCALARS += [f'"x\\{escape}y"' for escape in [*"0abtnvfre \"/\\N_LP", "x41", "u263A", "U0001F600",
                                             "x", "q", "'", "uD800"]]
BLOCK_HEADERS = ["|", ">", "|-", ">-", "|+", ">+", "|2", ">1-"]
PIECES = [*KNOWN_DIFFERENCES, ":", ": ", "-", "- ", " ", "  ", "\n", "#", " # c", ",", "[", "]",
          "{", "}", "'", '"', "\\", "---", "...", "|", ">", "é", "\n  ", "\n- "]
# The documents' parts, built once: a strategy made anew on each draw has Hypothesis work out
# its properties (a sampled_from's label hashes every element) anew, most of a draw's time.
INDENT_WIDTHS = st.sampled_from([2, 4])
LEADS = st.sampled_from(["key: ", "k2: ", "- ", "é: ", '"q k": ', "a b: "])
LINE_KINDS = st.sampled_from(["scalar", "scalar", "block", "nested", "comment"])
BLOCK_BODIES = st.lists(st.sampled_from(["x", "  y", "", "z z", "# no"]), min_size=1,
                        max_size=3)
BLOCK_INDENTS = st.sampled_from([1, 2])
ANY_BLOCK_HEADER = st.sampled_from(BLOCK_HEADERS)
ANY_SCALAR = st.sampled_from(SCALARS)
COMMENTS = st.sampled_from(["", " # c", "  #x"])
ANY_PIECE = st.sampled_from(PIECES)


@st.composite
def documents(draw: st.DrawFn, depth: int = 0) -> str:
    """A block YAML document: mappings, lists, scalars, block scalars and comments."""
    indent = " " * draw(INDENT_WIDTHS) * depth
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        lead = draw(LEADS)
        kind = draw(LINE_KINDS)
        if kind == "nested" and depth < 3:
            lines.append(f"{indent}{lead.rstrip()}\n{draw(DOCUMENTS[depth + 1])}")
        elif kind == "block":
            body = draw(BLOCK_BODIES)
            inner = indent + " " * draw(BLOCK_INDENTS)
            text = "".join(f"{inner}{line}\n" if line else "\n" for line in body)
            lines.append(f"{indent}{lead}{draw(ANY_BLOCK_HEADER)}\n{text}")
        elif kind == "comment":
            lines.append(f"{indent}# {draw(ANY_SCALAR)}\n")
        else:
            comment = draw(COMMENTS)
            lines.append(f"{indent}{lead}{draw(ANY_SCALAR)}{comment}\n")
    return "".join(lines)


DOCUMENTS = [documents(depth) for depth in range(4)]  # by depth, built once


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A document with pieces inserted or replaced, around what 1.1 and 1.2 read otherwise."""
    text = draw(DOCUMENTS[0])
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 2))
        text = text[:at] + draw(ANY_PIECE) + text[at + cut:]
    return text


def composed_by_libyaml(text: str):
    return compose_alike(text, screen._resolver(None), max_depth=MAX_DEPTH,
                         max_values=MAX_VALUES)


def described(node) -> tuple:
    """All of a node that screen.py and load.py read: its kind, tag, value and marks."""
    marks = tuple((m.index, m.line, m.column) for m in (node.start_mark, node.end_mark))
    if node.id == "scalar":
        return node.id, node.tag, node.value, marks
    children = [n for pair in node.value for n in pair] if node.id == "mapping" else node.value
    return node.id, node.tag, [described(child) for child in children], marks


def loaded(data: bytes) -> tuple:
    source, problems = parse_source(Source("run.yaml", Path()), data)
    return repr(source.data), source.values, source.keys, source.raw, problems


def loaded_by_ruamel(data: bytes) -> tuple:
    with mock.patch.object(screen, "compose_alike", return_value=None):
        return loaded(data)


def assert_composed_alike(text: str) -> None:
    """libyaml's nodes of `text`, where it composes them, are ruamel's."""
    node = composed_by_libyaml(text)
    if node is not None:
        assert described(node) == described(screen._compose_by_ruamel(text)[0])


def assert_read_alike(text: str) -> None:
    """libyaml's nodes of `text`, where it composes them, are ruamel's, and the file loads to
    the same data, positions and diagnostics either way."""
    assert_composed_alike(text)
    assert loaded(text.encode()) == loaded_by_ruamel(text.encode())


@BUDGET
@given(st.one_of(documents(), mutated(),
                 st.lists(st.sampled_from(PIECES + SCALARS), max_size=12).map(
                     lambda pieces: "".join(pieces) + "\n")))
def test_libyaml_composes_ruamels_nodes_for_every_text_it_reads(text):
    assert_read_alike(text)


@pytest.mark.parametrize("text", [
    "a: 1\n", "a: é\nbé: [x, \"ü\", \U0001d11e]\nc: 😀 x  # é\n", "a: 'it''s'\nb: |\n  x\n\n  y\n",
    "- [a, {b: c}]\n- \"x\\ty\"\n", "a: W&B\nb: x@y\nc: '%x'\nd: a?b\n",
    f"long: {'x' * 300}\nlong number: {'1' * 300}\n",  # past the tags kept in the cache
])
def test_libyaml_reads_the_common_texts(text):
    assert composed_by_libyaml(text) is not None
    assert_read_alike(text)


def yaml_12_printable(code: int) -> bool:
    """YAML 1.2's c-printable (its production 1)."""
    return code in (0x09, 0x0A, 0x0D, 0x85) or 0x20 <= code <= 0x7E or \
        0xA0 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or 0x10000 <= code <= 0x10FFFF


# Printable in both YAMLs, but a separator or line break in 1.1 and not in 1.2 (tab, CR, NEL,
# LS, PS), or a mark 1.1 reads otherwise in the text (BOM).
READ_OTHERWISE = (0x09, 0x0D, 0x85, 0x2028, 0x2029, 0xFEFF)


def test_libyaml_reads_every_printable_character_both_yamls_read_alike_and_no_other():
    # After a non-blank, where only `#` is an indicator libyaml is not given.
    assert [code for code in range(0x110000)
            if is_read_alike(f"a{chr(code)}\n") != (yaml_12_printable(code) and
                                                      code not in (*READ_OTHERWISE, 0x23))] \
        == []


@pytest.mark.parametrize("text", KNOWN_DIFFERENCES)
def test_what_yaml_1_1_reads_otherwise_is_left_to_ruamel(text):
    assert composed_by_libyaml(f"a: 1\nb: x{text}y\nc: {text}\n{text}d: 2\n") is None


def test_an_empty_value_is_left_to_ruamel_which_marks_it_at_the_next_token():
    assert is_read_alike("a:\nb: 1\n")
    assert composed_by_libyaml("a:\nb: 1\n") is None


@pytest.mark.parametrize("text", [
    "[" + "a, " * MAX_VALUES + "]\n",
    "[" * MAX_DEPTH + "a" + "]" * MAX_DEPTH + "\n",
    "[" * 100_000 + "\n",  # libyaml's composer recurses in C: stopped at the screen's depth
    "a\n---\nb\n",
    "# a comment only\n",
])
def test_what_the_screen_refuses_or_finds_empty_is_left_to_ruamel(text):
    assert composed_by_libyaml(text) is None
    with pytest.raises(LoadError):
        screen.compose(text)


def test_libyaml_composes_up_to_the_screens_bounds():
    assert composed_by_libyaml("[" + "a, " * (MAX_VALUES - 1) + "]\n") is not None
    assert composed_by_libyaml("[" * (MAX_DEPTH - 1) + "a" + "]" * (MAX_DEPTH - 1) + "\n")


def corpus_texts() -> list[bytes]:
    """Every run file of examples/ and of the corpora of bad run files."""
    texts = [path.read_bytes() for path in sorted((ROOT / "examples").rglob("*.yaml"))]
    for module in (test_corpus, test_corpus_hostile, test_corpus_runtimes, test_corpus_sweep,
                   test_health_rules, test_job_rules, test_accepting, test_stages):
        for value in vars(module).values():
            for param in value if isinstance(value, list) else ():
                if isinstance(param, ParameterSet) and isinstance(param.values[0], Case):
                    text = param.values[0].text
                    texts.append(text if isinstance(text, bytes) else text.encode())
    return texts


def test_every_corpus_file_loads_alike_both_ways():
    texts = corpus_texts()

    assert [loaded(data) for data in texts] == [loaded_by_ruamel(data) for data in texts]
    read_by_libyaml = [data for data in texts
                       if composed_by_libyaml(data.decode(errors="replace")) is not None]
    assert len(texts) > 400 and len(read_by_libyaml) > len(texts) / 2


def test_every_corpus_file_that_libyaml_composes_has_ruamels_nodes():
    for data in corpus_texts():
        assert_composed_alike(data.decode(errors="replace"))


def test_without_libyaml_every_text_is_ruamels(monkeypatch):
    monkeypatch.setattr(libyaml_events, "CParser", None)

    assert composed_by_libyaml("a: 1\n") is None
    assert loaded(b"version: 1\nid: r\n")[0] == "{'version': 1, 'id': 'r'}"
