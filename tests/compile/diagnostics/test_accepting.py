"""The accepting side: values that look dangerous but are legal compile, and reach the script
as exactly the words the run file gave. (That the shells then pass them on byte for byte is
tested with real shells in the job tests.)"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.conftest import allow_sbatch, compile_text

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
    """The words of the shell command on the first line that holds `start` (the header's
    comments aside), and on the lines it continues on because a quote is still open (a
    trailing `\\` continues it anyway)."""
    lines = script.split("\n")
    first = next(i for i, line in enumerate(lines)
                 if start in line and not line.startswith("#"))
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


@pytest.mark.slow  # a compile, shellcheck included, for each of ~90 values
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


BIDI = "\u202e\u2066\u200b\ufeff\u2028"


def test_an_inline_config_and_extension_keys_keep_invisible_characters_exactly(tmp_path):
    """They are not script text: an inline config is an embedded file's content, which
    Axolotl reads back exactly; an extension key is ignored."""
    text = ("version: 1\nid: legal\nruntime: {kind: docker}\n"
            f"x-note: {yaml_string(BIDI)}\n"
            f"trainer:\n  axolotl:\n    config: {{wandb_name: {yaml_string(BIDI)}}}\n")

    script = compile_text(tmp_path, text)

    body = script.split("axolotl.yaml <<'OBC_EOF'\n", 1)[1].split("\nOBC_EOF\n", 1)[0]
    config = YAML(typ="safe", pure=True).load(body)
    assert config.pop("dynamic_checkpoint")["enabled"]  # checkpoint.on_signal's
    assert config == {"wandb_name": BIDI}


def test_an_embedded_file_keeps_invisible_characters_exactly(tmp_path):
    (tmp_path / "notes.txt").write_text(f"a{BIDI}b\n", encoding="utf-8")

    script = compile_text(tmp_path, run_file("native", ["x"], {}) + "files: {n.txt: notes.txt}\n")

    assert f"\na{BIDI}b\nOBC_EOF" in script


@pytest.mark.parametrize(("options", "passed"), [
    (["--network=none"], "--network=none"), (["--network=host"], "--network=host"),
    (["--sig-proxy=false"], "--sig-proxy=false"), (["--detach=false"], "--detach=false"),
    (["--rm"], "--rm"), (["--rm=true"], "--rm=true"), (["-it"], "--interactive --tty"),
    (["-ed=1"], "--env=d=1"), (["--replace=false"], "--replace=false"),
    (["-d=false"], "--detach=false"), (["--init", "--pull=never"], "--init --pull=never")])
def test_engine_options_that_keep_the_jobs_promises_are_legal(options, passed, tmp_path):
    # Each is passed whole, as the engine reads it: -it is --interactive --tty.
    text = run_file("podman", ["x"], {}).replace(
        "{kind: podman}", f"{{kind: podman, extra_args: {json.dumps(options)}}}")

    before_the_image = compile_text(tmp_path, text).split(" \\\n    -- ")[0].rsplit("\n", 1)[1]
    assert shlex.split(before_the_image) == passed.split()


def test_sbatch_options_written_in_full_are_legal(tmp_path):
    extra = ["--exclusive", "--mail-type=END,FAIL", "--comment=ticket-4711",
             "--tres-per-task=cpu:1", "--extra=x", "--container=c"]
    text = run_file("native", ["x"], {}) + f"slurm: {{time: 90, nodes: 2, gpus_per_node: 8, " \
        f"output: /logs/%x-%j.out, extra: {json.dumps(extra)}}}\n"
    # Beyond obc's allow-list, a site policy allows these.
    allow_sbatch(tmp_path, "exclusive", "tres-per-task", "extra", "container")

    script = compile_text(tmp_path, text)

    assert all(f"#SBATCH {option}\n" in script for option in extra)
    assert "#SBATCH --time=90\n#SBATCH --nodes=2\n" in script


def test_mount_targets_beside_the_jobs_own_are_legal(tmp_path):
    targets = ["/workspace/runs", "/workspace/run/data", "/workspace/hf-cache2", "/workspace"]
    mounts = ", ".join(f"{{source: /d{i}, target: {t}}}" for i, t in enumerate(targets))
    text = run_file("docker", ["x"], {}).replace(
        "{kind: docker}", f"{{kind: docker, mounts: [{mounts}]}}")

    script = compile_text(tmp_path, text)

    assert all(f"/d{i}:{target}" in script for i, target in enumerate(targets))


def test_embedded_files_side_by_side_in_folders_are_legal(tmp_path):
    (tmp_path / "x.txt").write_text("x\n")
    names = ["a", "ab/c", "b/c", "b/d", "b/e/f", "é" * 119]  # 238 bytes: the longest name

    script = compile_text(tmp_path, run_file("native", ["x"], {}) + "files:\n" +
                          "".join(f"  {name}: x.txt\n" for name in names))

    assert all(f'obc_write_file {name} ' in script for name in names[:-1])
