"""libyaml reads a run file for ruamel only where the two read it alike: the same events, the
same marks, and so the same data, positions and diagnostics (compiler/read/libyaml_events.py)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from _pytest.mark.structures import ParameterSet
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.read import libyaml_events, screen
from compiler.read.libyaml_events import is_read_alike, read_events
from compiler.read.load import Source, parse_source
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


@st.composite
def documents(draw: st.DrawFn, depth: int = 0) -> str:
    """A block YAML document: mappings, lists, scalars, block scalars and comments."""
    indent = " " * draw(st.sampled_from([2, 4])) * depth
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        lead = draw(st.sampled_from(["key: ", "k2: ", "- ", "é: ", '"q k": ', "a b: "]))
        kind = draw(st.sampled_from(["scalar", "scalar", "block", "nested", "comment"]))
        if kind == "nested" and depth < 3:
            lines.append(f"{indent}{lead.rstrip()}\n{draw(documents(depth + 1))}")
        elif kind == "block":
            body = draw(st.lists(st.sampled_from(["x", "  y", "", "z z", "# no"]), min_size=1,
                                 max_size=3))
            inner = indent + " " * draw(st.sampled_from([1, 2]))
            text = "".join(f"{inner}{line}\n" if line else "\n" for line in body)
            lines.append(f"{indent}{lead}{draw(st.sampled_from(BLOCK_HEADERS))}\n{text}")
        elif kind == "comment":
            lines.append(f"{indent}# {draw(st.sampled_from(SCALARS))}\n")
        else:
            comment = draw(st.sampled_from(["", " # c", "  #x"]))
            lines.append(f"{indent}{lead}{draw(st.sampled_from(SCALARS))}{comment}\n")
    return "".join(lines)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A document with pieces inserted or replaced, around what 1.1 and 1.2 read otherwise."""
    text = draw(documents())
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 2))
        text = text[:at] + draw(st.sampled_from(PIECES)) + text[at + cut:]
    return text


def ruamel_events(text: str) -> list:
    with contextlib.closing(screen._parser().parse(io.StringIO(text))) as parsed:
        return list(parsed)


def described(event) -> tuple:
    """All an event says that the Composer, the screen and load.py read (not its comments,
    which ruamel keeps on some events even when it reads safely, and only its round trip
    reads)."""
    marks = tuple((m.index, m.line, m.column) for m in (event.start_mark, event.end_mark))
    attributes = ("value", "style", "implicit", "anchor", "tag", "flow_style", "explicit",
                  "version", "tags")
    return (type(event), *(getattr(event, name, None) for name in attributes), marks)


def assert_read_alike(text: str) -> None:
    events = read_events(text)
    if events is not None:
        assert [described(e) for e in events] == [described(e) for e in ruamel_events(text)]


@BUDGET
@given(st.one_of(documents(), mutated(),
                 st.lists(st.sampled_from(PIECES + SCALARS), max_size=12).map(
                     lambda pieces: "".join(pieces) + "\n")))
def test_libyaml_gives_ruamels_events_for_every_text_it_reads(text):
    assert_read_alike(text)


@pytest.mark.parametrize("text", [
    "a: 1\n", "a: é\nbé: [x, \"ü\", \U0001d11e]\nc: 😀 x  # é\n", "a: 'it''s'\nb: |\n  x\n\n  y\n",
    "- [a, {b: c}]\n- \"x\\ty\"\n", "a: W&B\nb: x@y\nc: '%x'\nd: a?b\n",
])
def test_libyaml_reads_the_common_texts(text):
    events = read_events(text)

    assert events is not None
    assert [described(e) for e in events] == [described(e) for e in ruamel_events(text)]


@pytest.mark.parametrize("text", KNOWN_DIFFERENCES)
def test_what_yaml_1_1_reads_otherwise_is_left_to_ruamel(text):
    assert read_events(f"a: 1\nb: x{text}y\nc: {text}\n{text}d: 2\n") is None


def test_an_empty_value_is_left_to_ruamel_which_marks_it_at_the_next_token():
    assert is_read_alike("a:\nb: 1\n")
    assert read_events("a:\nb: 1\n") is None


def test_more_events_than_a_run_file_may_hold_are_left_to_ruamel():
    assert read_events("[" + "a, " * libyaml_events.MAX_EVENTS + "]\n") is None


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


def loaded(data: bytes) -> tuple:
    source, problems = parse_source(Source("run.yaml", Path()), data)
    return repr(source.data), source.values, source.keys, source.raw, problems


def test_every_corpus_file_loads_alike_both_ways(monkeypatch):
    texts = corpus_texts()
    fast = [loaded(data) for data in texts]
    monkeypatch.setattr(screen, "read_events", lambda text: None)

    assert [loaded(data) for data in texts] == fast
    read_by_libyaml = [data for data in texts if read_events(data.decode(errors="replace"))]
    assert len(texts) > 400 and len(read_by_libyaml) > len(texts) / 2


def test_without_libyaml_every_text_is_ruamels(monkeypatch):
    monkeypatch.setattr(libyaml_events, "CParser", None)

    assert read_events("a: 1\n") is None
    assert loaded(b"version: 1\nid: r\n")[0] == "{'version': 1, 'id': 'r'}"
