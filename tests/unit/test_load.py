"""The loader: where every value and key stands, and the bounds that keep hostile YAML cheap."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from compiler.read import screen
from compiler.read.axolotl import ConfigError, read_config
from compiler.read.load import Mark, load_source
from compiler.read.screen import MAX_DEPTH, MAX_VALUES
from tests.support.memory import traced_peak

HEAD = "version: 1\nid: r\n"


def load(tmp_path: Path, text: str | bytes):
    path = tmp_path / "run.yaml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return load_source(path)


def test_values_keys_and_raw_text_are_recorded_where_they_stand(tmp_path):
    source, problems = load(tmp_path, HEAD + "runtime:\n  kind: docker\n"
                                             "steps: [{name: a, run: [x, &v 3.10]}]\n")

    assert problems == []
    assert source.values[("runtime", "kind")] == Mark(4, 9)
    assert source.keys[("runtime", "kind")] == Mark(4, 3)
    assert source.values[("steps", 0, "run", 1)] == Mark(5, 28)  # at its anchor
    assert source.raw[("steps", 0, "run", 1)] == "3.10"  # without it
    assert source.mark(("steps", 0, "run", 7)) == Mark(5, 24)  # nearest parent


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_windows_and_old_mac_line_ends_count_lines_alike(tmp_path, newline):
    source, problems = load(tmp_path, (HEAD + "runtime:\n  kind: docker\n").replace(
        "\n", newline))

    assert problems == []
    assert source.values[("runtime", "kind")] == Mark(4, 9)


def test_an_empty_value_is_located_on_its_key_s_line_not_on_a_later_one(tmp_path):
    source, _ = load(tmp_path, HEAD + "env:\n  A:\n\n\n  B:  # later\n")

    assert source.values[("env", "A")] == Mark(4, 5)
    assert source.values[("env", "B")] == Mark(7, 14)  # after the comment


def test_aliases_expand_to_plain_copies(tmp_path):
    source, problems = load(tmp_path, HEAD + "x-args: &args [--epochs, '3']\n"
                                             "steps:\n  - {name: a, run: *args}\n"
                                             "  - {name: b, run: *args}\n")

    assert problems == []
    first, second = (step["run"] for step in source.data["steps"])
    assert first == second == ["--epochs", "3"] and first is not second


def test_reusing_an_anchor_name_is_valid_yaml_and_quiet(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        source, problems = load(tmp_path, HEAD + "x-a: &v a\nx-b: &v b\nx-c: *v\n")

    assert problems == []
    assert source.data["x-c"] == "b"


def test_a_date_stays_the_text_it_was_written_as(tmp_path):
    source, problems = load(tmp_path, HEAD + "description: 2024-01-01\n")

    assert (problems, source.data["description"]) == ([], "2024-01-01")


def nested(depth: int) -> str:
    """A run file whose data is `depth` collections deep, the root mapping included."""
    return HEAD + "x-deep: " + "[" * (depth - 1) + "]" * (depth - 1) + "\n"


def test_nesting_up_to_the_limit_is_read(tmp_path):
    assert load(tmp_path, nested(MAX_DEPTH))[1] == []


def test_nesting_past_the_limit_is_refused_before_anything_recurses(tmp_path):
    (problem,) = load(tmp_path, nested(MAX_DEPTH + 1))[1]
    assert "nesting is deeper than 32 levels" in problem.message
    (problem,) = load(tmp_path, HEAD + "x: " + "[" * 100_000)[1]
    assert "nesting is deeper than 32 levels" in problem.message


def test_a_long_alias_chain_is_refused_where_it_gets_too_deep(tmp_path):
    lines = [HEAD.rstrip("\n"), "x-0: &c0 [end]"]
    lines += [f"x-{i}: &c{i} [*c{i - 1}]" for i in range(1, 100)]

    (problem,) = load(tmp_path, "\n".join(lines) + "\n")[1]

    assert (problem.line, problem.message) == (
        34, "nesting is deeper than 32 levels once aliases are expanded")


@pytest.mark.parametrize(("text", "line", "column"), [
    ("x-a: &a [*a]\n", 3, 6),
    ("x-a: &a {b: [1, *a]}\n", 3, 13),
    ("x-a: &a\n  b: *a\n", 3, 6),
])
def test_an_alias_inside_its_own_anchor_is_refused_where_it_is(tmp_path, text, line, column):
    (problem,) = load(tmp_path, HEAD + text)[1]

    assert (problem.line, problem.column) == (line, column)
    assert problem.message == "an alias refers to the value that contains it"


def alias_bomb(levels: int, width: int = 9) -> str:
    lines = [HEAD.rstrip("\n"), "x-0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    lines += [f"x-{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]"
              for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [9, 60])
def test_an_alias_bomb_is_refused_sizing_each_collection_once_in_under_50_mb(
        tmp_path, monkeypatch, levels):
    # Expanded, 9**60 values: refused having sized each collection of the text once (and
    # looked up again at each alias), never walking the expansion, whatever the machine's
    # speed.
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb(levels))
    sized = []
    real_size = screen._Measure._size
    monkeypatch.setattr(screen._Measure, "_size",
                        lambda measure, node, outer: (sized.append(id(node)),
                                                      real_size(measure, node, outer))[1])

    _, problems = load_source(path)
    _, peak = traced_peak(lambda: load_source(path))

    (problem,) = problems
    assert problem.message.startswith(f"aliases expand this to more than {MAX_VALUES:,} values")
    # Each collection sized by one call, and looked up by at most one more at each alias.
    assert len(sized) <= len(set(sized)) + path.read_text().count("*")
    assert peak < 50 * 1024 * 1024


def test_aliases_of_long_text_are_bounded_by_characters_as_well(tmp_path):
    text = HEAD + f"x-t: &t {'a' * 100_000}\nx-u: [" + ", ".join(["*t"] * 30) + "]\n"

    (problem,) = load(tmp_path, text)[1]

    assert (problem.line, problem.message) == (
        4, "aliases expand this to more than 10,000 values or 2,097,152 characters")


def test_a_file_reads_alike_after_one_that_declares_yaml_1_1(tmp_path):
    text = "a\n...\nb\n"
    alone = load(tmp_path, text)[1]
    load(tmp_path, "%YAML 1.1\n---\na: 1\n")

    assert load(tmp_path, text)[1] == alone
    assert alone[0].message == "file holds more than one YAML document"


def test_a_file_of_too_many_values_stops_early(tmp_path):
    (problem,) = load(tmp_path, HEAD + "x: [" + "1," * 500_000 + "1]\n")[1]

    assert problem.message.startswith("file holds more than 10,000 values")


def test_a_file_of_exactly_1_mib_is_read(tmp_path):
    text = HEAD + "description: "
    text += "a" * (1024 * 1024 - len(text) - 1) + "\n"

    assert load(tmp_path, text)[1] == []


def test_an_embedded_config_nested_too_deep_is_a_clean_error():
    with pytest.raises(ConfigError, match="nesting is deeper than 32 levels"):
        read_config("a: " + "[" * 5000 + "]" * 5000 + "\n")


def test_a_tab_after_a_lone_carriage_return_is_said_at_its_line(tmp_path):
    # ruamel counts a lone CR as a line break: the tab is on line 3, which a split at LF
    # alone did not have.
    (problem,) = load(tmp_path, "\r# a\n\t")[1]

    assert (problem.line, problem.column, problem.message) == (
        3, 1, "a tab is used for indentation")
