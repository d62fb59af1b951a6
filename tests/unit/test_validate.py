"""Validation: the schema's patterns mean the whole ASCII string, and jsonschema's errors become
one short message each, at the place to fix."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from compiler.core.diagnostics import Diagnostic, did_you_mean, field_path
from compiler.core.resources import run_schema
from compiler.core.text import visible
from compiler.read.load import load_source
from compiler.validate.validate import _validator, validate


def patterns(schema: Any, where: str = "") -> list[tuple[str, str, Any]]:
    """Every `pattern` of the schema, where it is, and the examples given beside it."""
    found = []
    if isinstance(schema, dict):
        if "pattern" in schema:
            found.append((where, schema["pattern"], schema.get("examples")))
        for key, value in schema.items():
            found += patterns(value, f"{where}/{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            found += patterns(value, f"{where}/{i}")
    return found


# A value each pattern accepts, for those the schema gives no string example of.
SAMPLES = {
    "/properties/runtime/properties/gpus/oneOf/1/items/oneOf/1": "GPU-1a2b",
    "/properties/runtime/properties/mounts/items/properties/source": "~/data",
    "/properties/runtime/properties/mounts/items/properties/target": "/data",
    "/properties/runtime/properties/extra_args/items": "--network=host",
    "/properties/steps/items/properties/name": "train1",
    "/properties/slurm/properties/extra/items": "--exclusive",
    "/definitions/path": "/srv/run1",
    "/definitions/name": "HF_TOKEN1",
}


def pattern_cases() -> list[Any]:
    cases = []
    for where, pattern, examples in patterns(run_schema()):
        strings = [e for e in examples or () if isinstance(e, str)]
        sample = strings[0] if strings else SAMPLES.get(where)
        cases.append(pytest.param(where, pattern, sample, id=where))
    return cases


def matches(pattern: str, value: str) -> bool:
    checker = type(_validator())({"pattern": pattern})
    return checker.is_valid(value)


# Patterns that take any text on purpose: an engine option's value may hold a newline.
ANY_TEXT = {"/properties/runtime/properties/extra_args/items"}


@pytest.mark.parametrize(("where", "pattern", "sample"), pattern_cases())
def test_every_pattern_matches_the_whole_string_in_ascii(where, pattern, sample):
    assert sample is not None, "give the pattern an example, or a sample here"
    assert matches(pattern, sample)
    assert matches(pattern, sample) == bool(re.fullmatch(pattern, sample, re.ASCII))
    if where not in ANY_TEXT:
        # jsonschema's own `pattern` searches: '^x$' would accept 'x\n'.
        assert not matches(pattern, sample + "\n")
        assert not matches(pattern, "\n" + sample)
    if "[^" not in pattern and where not in ANY_TEXT:
        # Python's \d and \w take digits and letters of any script.
        assert not matches(pattern, sample + "\u0661")  # ARABIC-INDIC DIGIT ONE
        assert not matches(pattern, sample + "\uff41")  # FULLWIDTH LATIN SMALL LETTER A
        assert not matches(pattern, sample + "\u0430")  # CYRILLIC SMALL LETTER A


@pytest.mark.parametrize(("word", "suggestion"), [
    ("dokcer", "; did you mean 'docker'?"),
    ("Docker", "; did you mean 'docker'?"),
    ("natve", "; did you mean 'native'?"),
    ("kubernetes", ""),
    ("d", ""),
])
def test_did_you_mean_names_only_a_close_spelling(word, suggestion):
    assert did_you_mean(word, ["docker", "podman", "native"]) == suggestion


@pytest.mark.parametrize(("path", "text"), [
    (("runtime", "kind"), "runtime.kind"),
    (("steps", 1, "run", 0), "steps[1].run[0]"),
    (("env", "HF_HOME"), "env.HF_HOME"),
    (("files", "plugins/a.py"), 'files["plugins/a.py"]'),
    (("files", "a b"), 'files["a b"]'),
    (("env", "A\n"), 'env["A\\n"]'),
    (("env", "A١"), 'env["A\\u0661"]'),
    ((), ""),
])
def test_field_paths_are_one_unambiguous_line(path, text):
    assert field_path(path) == text


def test_visible_escapes_what_would_move_the_cursor():
    assert visible("a\x1b[2J\r\nb\u2028\x85c\té") == "a\\x1b[2J\\r\\nb\\u2028\\x85c\\té"


@pytest.mark.parametrize(("text", "shown"), [
    # The review's (F17): printable to Python, shown as nothing by a terminal.
    ("rm\u034f -rf", "rm\\u034f -rf"), ("a\u3164b\u115f\u17b5", "a\\u3164b\\u115f\\u17b5"),
    ("\u2800x", "\\u2800x"), ("ok\ufe0f\U0001d173", "ok\\ufe0f\\U0001d173"),
    ("\U000e0fff\U0001bca3", "\\U000e0fff\\U0001bca3"), ("é ü ✓ 日本", "é ü ✓ 日本"),
])
def test_visible_escapes_default_ignorable_and_blank_looking_characters(text, shown):
    assert visible(text) == shown


def test_a_diagnostic_shows_every_invisible_character_escaped():
    # diagnostics and the header once had an escaper each: this one let U+202E through.
    problem = Diagnostic("r.yaml", 1, 1, "env.A", "got 'a\u202eb\u034f'", "not \u2800")
    assert problem.text() == ("r.yaml:1:1: error: env.A: got 'a\\u202eb\\u034f'\n"
                              "  hint: not \\u2800")


def problems_of(tmp_path: Path, text: str) -> list[str]:
    """What validation says about a run file that loads, without the file and position."""
    path = tmp_path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    source, problems = load_source(path)
    assert problems == []
    return [d.text().split(" error: ", 1)[1] for d in validate(source)]


BASE = "version: 1\nid: r\nruntime: {kind: docker}\n"


def test_one_of_is_explained_through_the_branch_that_fits(tmp_path):
    # gpus is `all | none` or a list: a misspelt word is explained as a word, not as
    # "is not valid under any of the given schemas".
    assert problems_of(tmp_path, "version: 1\nid: r\nruntime: {kind: docker, gpus: nonee}\n"
                              "steps: [{name: a, run: [x]}]\n") == [
        "runtime.gpus: 'nonee' is not one of all, none; did you mean 'none'?"]
    assert problems_of(tmp_path, BASE + "steps: [{name: a, run: [x]}]\n"
                                     "secrets: [{nmae: A}]\n") == [
        "secrets[0].nmae: unknown key 'nmae' in secrets[0]; did you mean 'name'?"]


def test_when_no_branch_fits_every_type_is_named_once(tmp_path):
    assert problems_of(tmp_path, BASE + "trainer: {axolotl: {config: [a]}}\n") == [
        "trainer.axolotl.config: expected a string or a mapping, got a list\n"
        "  hint: config takes a path to a YAML file or an inline mapping"]


def test_several_unknown_keys_are_reported_one_by_one(tmp_path):
    assert problems_of(tmp_path, BASE + "steps: [{name: a, run: [x]}]\nstep: 1\nenvs: {}\n") == [
        "step: unknown key 'step'; did you mean 'steps'?",
        "envs: unknown key 'envs'; did you mean 'env'?"]


def test_a_misspelt_required_key_is_one_problem_not_two(tmp_path):
    assert problems_of(tmp_path, "version: 1\nid: r\nruntme: {kind: docker}\n"
                              "steps: [{name: a, run: [x]}]\n") == [
        "runtme: unknown key 'runtme'; did you mean 'runtime'?"]


def test_schema_and_rule_problems_of_one_file_come_together_in_order(tmp_path):
    assert problems_of(tmp_path, BASE + "steps: [{name: a, run: [x]}]\nenv:\n  PS4: x\n"
                                     "  A: [1]\n") == [
        "env.PS4: 'PS4' cannot be set by a run file: it is expanded on every traced line, "
        "which can run commands",
        "env.A: expected a string, an integer or a mapping, got a list\n"
        "  hint: an env value is a string, an integer, or {value: ..., secret: false}"]
