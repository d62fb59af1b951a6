"""The accepting side: values that look dangerous but are legal compile, and reach the script
as exactly the words the run file gave. (That the shells then pass them on byte for byte is
tested with real shells in the job tests.)"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.conftest import compile_text

LEGAL_VALUES = [
    "it's", '"double"', "a'b\"c", "'", "$(touch pwned)", "`touch pwned`", "a; rm -rf /",
    "a && b || c | d > e < f", "(sub)", "line1\nline2", "trailing\n", "\nleading", "-rf",
    "--help", "-", "a~b", "x/~/y", "~", "~/x", "日本語", "naïve café", "emoji 🚀", "*", "?",
    "[ab]", "{a,b}", "!event", "!!", "#comment", "a #b", "back\\slash", "\\\nx", "tab\there",
    "=ls", "A=b", "", " ", "$HOME", "${x:-y}", "$1", "%1", "^x", "OBC_EOF",
    "time", "if", "done",
]

IDS = [json.dumps(value, ensure_ascii=True) for value in LEGAL_VALUES]


def yaml_string(value: str) -> str:
    """`value` as a YAML double-quoted scalar (a JSON string is one)."""
    return json.dumps(value, ensure_ascii=False)


def run_file(kind: str, args: list[str], env: dict[str, str]) -> str:
    lines = ["version: 1", "id: legal", f"runtime: {{kind: {kind}}}", "steps:",
             "  - name: a", "    run:", "      - prog"]
    lines += [f"      - {yaml_string(arg)}" for arg in args]
    lines += ["env:"] * bool(env) + [f"  {name}: {yaml_string(value)}"
                                     for name, value in env.items()]
    return "\n".join(lines) + "\n"


def words_at(script: str, start: str) -> list[str]:
    """The words of the shell command on the first line that holds `start`, and on the lines
    it continues on because a quote is still open (a trailing `\\` continues it anyway)."""
    lines = script.split("\n")
    first = next(i for i, line in enumerate(lines) if start in line)
    for end in range(first + 1, len(lines) + 1):
        command = "\n".join(lines[first:end]).removesuffix(" \\")
        try:
            return shlex.split(command)
        except ValueError:  # the quote is closed on a later line
            continue
    raise AssertionError(f"no complete command starting with {start!r}")


@pytest.mark.parametrize("kind", ["docker", "podman", "native"])
def test_dangerous_looking_arguments_reach_the_step_line_as_the_same_words(kind, tmp_path):
    script = compile_text(tmp_path, run_file(kind, LEGAL_VALUES, {"V": "x"}))

    assert words_at(script, "obc_step 1 a ") == ["obc_step", "1", "a", "prog", *LEGAL_VALUES]


@pytest.mark.parametrize("value", LEGAL_VALUES, ids=IDS)
@pytest.mark.parametrize("kind", ["docker", "native"])
def test_dangerous_looking_env_values_reach_the_script_as_one_word(kind, value, tmp_path):
    script = compile_text(tmp_path, run_file(kind, ["x"], {"MY_VALUE": value}))

    assert words_at(script, "MY_VALUE=")[-1] == f"MY_VALUE={value}"


def test_a_description_of_any_text_compiles(tmp_path):
    description = "\n".join(LEGAL_VALUES)
    text = run_file("docker", ["x"], {}).replace(
        "id: legal\n", f"id: legal\ndescription: {yaml_string(description)}\n")

    compile_text(tmp_path, text)


def test_an_argument_of_exactly_131071_bytes_compiles(tmp_path: Path):
    biggest = "é" * 65_535 + "a"  # two bytes each: 131,071 bytes in all

    script = compile_text(tmp_path, run_file("docker", [biggest], {}))

    assert words_at(script, "obc_step 1 a ") == ["obc_step", "1", "a", "prog", biggest]


def test_a_native_job_may_use_colons_and_commas_in_its_folders(tmp_path):
    text = run_file("native", ["x"], {}) + "paths: {run_dir: '/runs/a:b,c', cache_dir: /c:d}\n"

    compile_text(tmp_path, text)
