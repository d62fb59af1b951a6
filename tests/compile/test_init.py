"""`obc init CONFIG…`: a commented run file beside each trainer config, for the trainer its
keys name, which compiles as it is (docs/command-line.md, "Your first run file: obc init"); it
asks nothing and never writes over a file."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from compiler.cli.main import EXIT_INVALID, EXIT_OK
from compiler.model.defaults import DEFAULT_IMAGE
from tests.conftest import REPO

CONFIGS = {"axolotl": "examples/configs/llama3-qlora.yaml",
           "trl": "examples/configs/trl-sft.yaml",
           "llamafactory": "examples/llamafactory/lora-sft.yaml"}

AXOLOTL_RUN_FILE = f"""\
# yaml-language-server: $schema=../schemas/run.schema.json
# The run file of Axolotl's config llama3-qlora.yaml, as obc init wrote it: it compiles as
# it is. Compile it into out/llama3-qlora/job.sh and see what the job would do (it runs in
# ~/overbrainer/runs/llama3-qlora):
#   obc compile llama3-qlora.run.yaml -o out
#   sh out/llama3-qlora/job.sh --dry-run
version: 1
id: llama3-qlora
runtime:
  # Where the steps run: docker or podman, in a container of `image` (by default
  # {DEFAULT_IMAGE},
  # which has Axolotl); apptainer or enroot, from an `image` file; or native, from `venv:
  # PATH` or else PATH.
  kind: docker
  # Without slurm: (which picks them), the GPUs the steps see: all (the default), none, or a
  # list of device ids:
  # gpus: [0, 1]
trainer:
  axolotl:
    config: llama3-qlora.yaml
# The names of the secrets the job takes from your environment (their values stay there):
# secrets: [HF_TOKEN]
# To submit it with `sbatch out/llama3-qlora/job.sh`, the Slurm resources it asks for:
# slurm:
#   partition: gpu
#   time: "24:00:00"
#   gpus_per_node: 8
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git work tree (its top is where the schema's copy goes) with a configs/ folder,
    which is the working directory."""
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    (root / "configs").mkdir()
    monkeypatch.chdir(root)
    return root


def config_of(project: Path, trainer: str, name: str | None = None) -> Path:
    """The example config of `trainer`, copied into the project's configs/ as `name`."""
    source = REPO / CONFIGS[trainer]
    return Path(shutil.copy(source, project / "configs" / (name or source.name)))


def compiles(obc, run_file: Path) -> None:
    """The run file compiles, and the script it compiled to is what compile writes."""
    written = obc("compile", str(run_file), "-o", "out")
    assert written.code == EXIT_OK, written.stderr
    checked = obc("compile", str(run_file), "-o", "out", "--check")
    assert checked.code == EXIT_OK, checked.stderr


def uncommented(text: str, key: str) -> str:
    """The run file with its commented-out example of `key` (and the lines inside it) in."""
    lines, inside = [], None
    for line in text.splitlines(keepends=True):
        example = re.match(rf"( *)# ({key}:.*)", line, re.DOTALL)
        if example:
            inside = example.group(1)
            lines.append(inside + example.group(2))
        elif inside is not None and line.startswith(f"{inside}#   "):
            lines.append(inside + line[len(inside) + 2:])
        else:
            inside = None
            lines.append(line)
    return "".join(lines)


def test_an_axolotl_config_gets_this_run_file(obc, project):
    config_of(project, "axolotl")
    outcome = obc("init", "configs/llama3-qlora.yaml")
    assert outcome.code == EXIT_OK, outcome.stderr
    assert (project / "configs/llama3-qlora.run.yaml").read_text() == AXOLOTL_RUN_FILE
    assert outcome.stderr == ("obc: wrote configs/llama3-qlora.run.yaml for Axolotl; compile "
                              "it: obc compile configs/llama3-qlora.run.yaml -o out\n")


@pytest.mark.parametrize("trainer", CONFIGS)
def test_each_trainers_config_gets_a_run_file_that_compiles_as_it_is(obc, project, trainer):
    config = config_of(project, trainer)
    assert obc("init", str(config)).code == EXIT_OK
    run_file = config.with_name(config.stem + ".run.yaml")
    data = YAML(typ="safe").load(run_file.read_text())
    assert data["trainer"] == {trainer: {"config": config.name}}
    assert data["runtime"] == {"kind": "docker" if trainer == "axolotl" else "native"}
    compiles(obc, run_file)


@pytest.mark.parametrize(("trainer", "examples"), [("axolotl", ("gpus",)),
                                                   ("axolotl", ("secrets", "slurm")),
                                                   ("trl", ("venv", "gpus", "secrets"))])
def test_its_commented_examples_compile_when_uncommented(obc, project, trainer, examples):
    config = config_of(project, trainer)
    assert obc("init", str(config)).code == EXIT_OK
    run_file = config.with_name(config.stem + ".run.yaml")
    text = run_file.read_text()
    for key in examples:
        text = uncommented(text, key)
    run_file.write_text(text)
    data = YAML(typ="safe").load(text)
    assert set(examples) <= set(data) | set(data["runtime"])
    compiles(obc, run_file)


def test_a_run_file_that_is_there_is_never_replaced(obc, project):
    config = config_of(project, "axolotl")
    run_file = project / "configs/llama3-qlora.run.yaml"
    run_file.write_text("mine\n")
    outcome = obc("init", str(config))
    assert outcome.code == EXIT_INVALID
    assert outcome.stderr == (
        "configs/llama3-qlora.run.yaml:1:1: error: exists; obc init never replaces a file\n"
        "  hint: edit it, or move it away and run obc init again\n"
        "obc: no run file written\n")
    assert run_file.read_text() == "mine\n"


def test_a_dangling_link_where_the_run_file_goes_is_left_alone(obc, project):
    config = config_of(project, "trl")
    (project / "configs/trl-sft.run.yaml").symlink_to(project / "elsewhere.yaml")
    assert obc("init", str(config)).code == EXIT_INVALID
    assert not (project / "elsewhere.yaml").exists()


def test_one_config_that_cannot_have_its_run_file_stops_them_all(obc, project):
    configs = [config_of(project, "axolotl"), config_of(project, "trl")]
    (project / "configs/trl-sft.run.yaml").write_text("mine\n")
    assert obc("init", *map(str, configs)).code == EXIT_INVALID
    assert sorted(path.name for path in (project / "configs").iterdir()) == \
        ["llama3-qlora.yaml", "trl-sft.run.yaml", "trl-sft.yaml"]


def test_two_configs_of_one_run_file_are_refused(obc, project):
    configs = [config_of(project, "axolotl", "a.yaml"), config_of(project, "axolotl", "a.yml")]
    outcome = obc("init", *map(str, configs))
    assert outcome.code == EXIT_INVALID
    assert outcome.stderr.count("is the run file of two of the configs given") == 2
    assert not (project / "configs/a.run.yaml").exists()


@pytest.mark.parametrize(("config", "message"), [
    ("base_model: m\nstage: sft\ntemplate: llama3\n",
     "has keys of several trainers' configs (Axolotl's base_model; LLaMA-Factory's stage, "
     "template), so obc init cannot tell which trainer reads it"),
    ("use_peft: true\nsequence_len: 512\n",
     "has keys of several trainers' configs (Axolotl's sequence_len; TRL's use_peft), so obc "
     "init cannot tell which trainer reads it"),
    ("learning_rate: 0.1\n",
     "has none of the keys that tell a trainer's config (Axolotl's base_model, "
     "micro_batch_size, num_epochs, sequence_len; TRL's dataset_name, dataset_text_field, "
     "use_peft; LLaMA-Factory's stage, finetuning_type, template, cutoff_len), so obc init "
     "cannot tell which trainer reads it"),
])
def test_a_config_of_several_trainers_or_none_is_refused_naming_them(obc, project, config,
                                                                     message):
    (project / "configs/c.yaml").write_text(config)
    outcome = obc("init", "configs/c.yaml")
    assert outcome.code == EXIT_INVALID
    assert outcome.stderr.splitlines()[0] == f"configs/c.yaml:1:1: error: {message}"
    assert not (project / "configs/c.run.yaml").exists()


@pytest.mark.parametrize(("config", "problem"), [
    ("- a list\n", "configs/c.yaml:1:1: error: does not hold a YAML mapping"),
    ("a: 1\na: 2\n", "configs/c.yaml:2:1: error: duplicate key 'a'"),
    (None, "configs/c.yaml:1:1: error: cannot be read: "),
])
def test_a_config_that_cannot_be_read_is_an_error_in_it(obc, project, config, problem):
    if config is not None:
        (project / "configs/c.yaml").write_text(config)
    outcome = obc("init", "configs/c.yaml")
    assert outcome.code == EXIT_INVALID
    assert outcome.stderr.startswith(problem)


def test_a_name_that_is_not_utf8_is_refused(obc, project):
    config = Path(shutil.copy(REPO / CONFIGS["trl"],
                              project / "configs" / os.fsdecode(b"sft\xff.yaml")))
    outcome = obc("init", str(config))
    assert outcome.code == EXIT_INVALID
    assert "has a name that is not UTF-8 text, which a run file cannot name" in outcome.stderr
    assert sorted(os.listdir(project / "configs")) == [config.name]


def test_a_name_with_spaces_and_unicode_is_quoted_and_compiles(obc, project):
    folder = project / "my runs ü"
    folder.mkdir()
    config = Path(shutil.copy(REPO / CONFIGS["axolotl"], folder / "Llama ü #1: test.yaml"))
    assert obc("init", str(config)).code == EXIT_OK
    run_file = folder / "Llama ü #1: test.run.yaml"
    text = run_file.read_text()
    assert "#   obc compile 'Llama ü #1: test.run.yaml' -o out\n" in text
    data = YAML(typ="safe").load(text)
    assert (data["id"], data["trainer"]["axolotl"]["config"]) == \
        ("llama-u-1-test", "Llama ü #1: test.yaml")
    compiles(obc, run_file)


def test_the_same_config_gives_the_same_bytes_from_anywhere(obc, project, tmp_path):
    config = config_of(project, "trl")
    run_file = project / "configs/trl-sft.run.yaml"
    written = []
    for where, name in ((project, "configs/trl-sft.yaml"), (project / "configs", "trl-sft.yaml"),
                        (tmp_path, str(config))):
        os.chdir(where)
        assert obc("init", name).code == EXIT_OK
        written.append(run_file.read_bytes())
        run_file.unlink()
    other = tmp_path / "other"
    shutil.copytree(project, other)
    assert obc("init", str(other / "configs/trl-sft.yaml")).code == EXIT_OK
    written.append((other / "configs/trl-sft.run.yaml").read_bytes())
    assert len(set(written)) == 1
