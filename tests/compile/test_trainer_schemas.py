"""A run's Axolotl config is checked at compile time against the schema made from Axolotl's own
models for the release the run names (docs/trainers.md, "Axolotl's config, checked"): unknown
keys, wrong types and adapters fail compile, located in the config; the examples and the configs
real Axolotl and TRL train with pass every stored schema of their trainer; and the stored
schemas are what tools/trainer_schemas.py makes from the installed Axolotl, TRL and
LLaMA-Factory (TRL's mistakes: test_trl_config.py; LLaMA-Factory's: test_llamafactory.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from compiler.core.resources import data_dir, trainer_schema, trainer_schema_versions
from compiler.model.trainers import TRAINER_KINDS
from compiler.pipeline.pipeline import compile_files
from compiler.read.axolotl import config_place, read_config
from compiler.read.load import display_name, load_source
from compiler.validate import fastschema, trainer_config
from tests.conftest import REPO
from tests.support import llamafactory
from tests.support.axolotl import TinyModel, lora_config
from tests.support.trl import TinySft, sft_config
from tools.trainer_schemas import axolotl_schema, dump, llamafactory_schema, trl_schema

RUN_FILE = """\
version: 1
id: ckpt
runtime: {kind: native}
trainer:
  axolotl:
    config: axolotl.yaml
"""
CONFIG = """\
base_model: NousResearch/Llama-3.2-1B
adapter: lora
lora_r: 16
learning_rate: 0.0002
datasets:
  - path: tatsu-lab/alpaca
    type: alpaca
"""

# The examples: (a line of CONFIG, its replacement, line:col, what compile says).
MISTAKES = [
    ("learning_rate: 0.0002", "learning_rat: 0.0002", "4:1",
     "learning_rat: not a key of Axolotl 0.19's config; did you mean 'learning_rate'?"),
    ("adapter: lora", "adapter: lroa", "2:10",
     "adapter: 'lroa' is not one of lora, qlora, llama-adapter; did you mean 'lora'?"),
    ("lora_r: 16", "lora_r: four", "3:9",
     "lora_r: expected an integer or null, got the string 'four'"),
    ("    type: alpaca",
     "    type: alpaca\ndynamic_checkpoint: {enabled: true, check_interval: often}", "8:53",
     "dynamic_checkpoint.check_interval: expected an integer, got the string 'often'"),
    ("lora_r: 16", "rl: dpoo", "3:5", "rl: 'dpoo' is not one of dpo, gdpo, grpo, ipo, "
     "orpo, kto, simpo, ebft; did you mean 'dpo'?"),
    ("lora_r: 16", "chat_template: chatmll", "3:16", "chat_template: expected one of alpaca, "),
]


def _compile(folder: Path, config: str, run_file: str = RUN_FILE) -> list[str]:
    (folder / "axolotl.yaml").write_text(config, encoding="utf-8")
    (folder / "run.yaml").write_text(run_file, encoding="utf-8")
    return [d.text() for d in compile_files([folder / "run.yaml"]).diagnostics]


def test_a_config_axolotl_takes_compiles(tmp_path: Path):
    assert _compile(tmp_path, CONFIG) == []


@pytest.mark.parametrize(("line", "mistake", "where", "message"), MISTAKES,
                         ids=[m[1] for m in MISTAKES])
def test_a_config_file_axolotl_rejects_fails_compile_located_in_it(
        tmp_path: Path, line: str, mistake: str, where: str, message: str):
    (found,) = _compile(tmp_path, CONFIG.replace(line, mistake))
    run_file, config = display_name(tmp_path / "run.yaml"), display_name(tmp_path / "axolotl.yaml")
    assert found.startswith(f"{run_file}:6:13: error: trainer.axolotl.config: "
                            f"{config}:{where}: {message}")


@pytest.mark.parametrize(("line", "mistake", "where", "message"), MISTAKES,
                         ids=[m[1] for m in MISTAKES])
def test_an_inline_config_axolotl_rejects_fails_compile_at_its_value(
        tmp_path: Path, line: str, mistake: str, where: str, message: str):
    inline = "".join(f"      {row}\n" for row in CONFIG.replace(line, mistake).splitlines())
    run_file = RUN_FILE.replace(" axolotl.yaml\n", "\n") + inline
    (found,) = _compile(tmp_path, "", run_file)
    row, column = map(int, where.split(":"))
    key, _, said = message.partition(": ")
    # The inline config starts on line 7, six columns in; an unknown key is shown at the key.
    assert found.startswith(f"{display_name(tmp_path / 'run.yaml')}:{row + 6}:"
                            f"{1 + 6 if 'not a key' in said else column + 6}: error: "
                            f"trainer.axolotl.config.{key}: {said}")


def test_every_mistake_is_reported_at_once(tmp_path: Path):
    config = CONFIG
    for line, mistake, _, _ in MISTAKES[:4]:  # each on a line of its own
        config = config.replace(line, mistake)
    assert len(_compile(tmp_path, config)) == 4


def _with(line: str) -> str:
    """CONFIG with `line`'s keys given these values instead."""
    keys = {row.split(":")[0] for row in line.splitlines()}
    return "".join(row + "\n" for row in CONFIG.splitlines() if row.split(":")[0] not in keys) \
        + line + "\n"


@pytest.mark.parametrize("config", [
    "learning_rate: 2e-5",  # YAML 1.1 (Axolotl's) reads it as a string; pydantic a number
    'lora_r: "16"', "bf16: yes", "load_in_8bit: 1", "lora_r: 16.0",
    # A plugin brings keys and adapters of its own.
    "plugins: [my_plugin.MyPlugin]\nmy_plugin_key: 3\nadapter: my-adapter",
    "adapter:", 'adapter: ""', "ddp_timeout: 1800",
], ids=repr)
def test_what_pydantic_reads_as_the_right_type_passes(tmp_path: Path, config: str):
    assert _compile(tmp_path, _with(config)) == []


def test_a_plugin_does_not_make_a_wrong_type_right(tmp_path: Path):
    config = _with("lora_r: four\nplugins: [p.P]")
    (found,) = _compile(tmp_path, config)
    assert "lora_r: expected an integer or null, got the string 'four'" in found


def test_the_run_file_names_the_release_the_config_is_checked_against(tmp_path: Path):
    run_file = RUN_FILE + '    version: "0.19"\n'
    assert _compile(tmp_path, CONFIG, run_file) == []
    (found,) = _compile(tmp_path, CONFIG, RUN_FILE + '    version: "0.7"\n')
    assert found == (f"{display_name(tmp_path / 'run.yaml')}:7:14: error: "
                     "trainer.axolotl.version: obc has no schema of Axolotl 0.7\n"
                     f"  hint: obc checks the configs of Axolotl "
                     f"{', '.join(trainer_schema_versions('axolotl'))}")


@pytest.mark.parametrize(("version", "unknown"), [
    ("0.19", ["context_parallel", "expert_parallel_size"]),
    ("0.20", ["expert_parallel_size"]),
    ("0.21", []),
])
def test_a_built_in_plugin_s_keys_pass_from_the_release_that_loads_it_for_every_config(
        tmp_path: Path, version: str, unknown: list[str]):
    # Axolotl registers its built-in plugins for every config, `plugins:` or not, and takes
    # their keys: from 0.20 context parallelism's, from 0.21 expert parallelism's too.
    config = _with("context_parallel: {size: 2}\nexpert_parallel_size: 2")
    found = _compile(tmp_path, config, RUN_FILE + f'    version: "{version}"\n')
    assert [key for key in ("context_parallel", "expert_parallel_size")
            if any(f"{key}: not a key of Axolotl {version}'s config" in line
                   for line in found)] == unknown
    assert len(found) == len(unknown)


def test_an_unknown_key_of_the_default_release_says_how_to_name_another(tmp_path: Path):
    # A job whose image or venv has another Axolotl than the default release must be told
    # that the key may be one of that release's, and how to say which release it has.
    (tmp_path / "default").mkdir()
    (found,) = _compile(tmp_path / "default", _with("expert_parallel_size: 2"))
    assert "expert_parallel_size: not a key of Axolotl 0.19's config" in found
    assert "obc checks against Axolotl 0.19 unless trainer.axolotl.version names another " \
        "release (0.19, 0.20, 0.21): name the one your image or venv has" in found
    (tmp_path / "named").mkdir()
    (named,) = _compile(tmp_path / "named", _with("expert_parallel_size: 2"),
                        RUN_FILE + '    version: "0.20"\n')
    assert "not a key of Axolotl 0.20's config" in named
    assert "unless trainer.axolotl.version" not in named


def _example_configs() -> list[tuple[str, str, dict]]:
    """Every trainer config of the examples, inline or in a file of its own, with its
    trainer."""
    configs = []
    for path in sorted((REPO / "examples").glob("*.yaml")):
        trainer = load_source(path)[0].data.get("trainer", {})
        # Only the trainers with a config in their record have a stored schema
        # (docs/trainers.md).
        for name in trainer.keys() & TRAINER_KINDS.keys():
            if TRAINER_KINDS[name].config_field is None:
                continue
            config = trainer[name]["config"]
            if isinstance(config, dict):
                configs.append((name, display_name(path), config))
            else:
                file = path.parent / config
                configs.append((name, display_name(file),
                                read_config(file.read_text(encoding="utf-8"))))
    # The configs real Axolotl, TRL and LLaMA-Factory train with in tests/axolotl, tests/trl
    # and tests/llamafactory.
    configs.append(("axolotl", "tests/axolotl.py", lora_config(TinyModel(Path("/tiny")))))
    configs.append(("trl", "tests/trl.py", sft_config(TinySft(Path("/tiny"), Path("/data")))))
    configs.append(("llamafactory", "tests/llamafactory.py", llamafactory.lora_config(
        llamafactory.TinyFactory(Path("/tiny"), Path("/data")))))
    return list({(trainer, name): (trainer, name, config)
                 for trainer, name, config in configs}.values())


@pytest.mark.parametrize(("trainer", "version", "name", "config"), [
    (trainer, version, name, config) for trainer, name, config in _example_configs()
    for version in trainer_schema_versions(trainer)], ids=lambda x: str(x)[:30])
def test_every_stored_schema_takes_every_example_config(trainer: str, version: str, name: str,
                                                        config: dict):
    schema = trainer_schema(trainer, version)
    assert fastschema.is_valid(schema, config), name  # and so without importing jsonschema
    assert list(trainer_config._validator(trainer, version).iter_errors(config)) == []


def test_every_example_compiles():
    result = compile_files(sorted((REPO / "examples").glob("*.yaml")))
    assert [d.text() for d in result.diagnostics] == []


def test_a_config_place_locates_keys_and_values():
    where = config_place(load_source(REPO / "examples" / "docker-qlora.yaml")[0],
                         "a: 1\nb:\n  - c: x\n", "c.yaml")
    assert where.problem(("b", 0, "c"), "m", None).message == "c.yaml:3:8: b[0].c: m"
    assert where.problem(("b", 0, "c"), "m", None, key=True).message == "c.yaml:3:5: b[0].c: m"


@pytest.mark.slow  # imports Axolotl, in its venvs
def test_the_stored_schemas_are_what_the_script_makes_from_the_installed_axolotls(
        axolotl_venv: Path, axolotl_newest_venv: Path):
    # The oldest release obc supports and the newest (docs/trainers.md says how 0.20's was
    # made, which has no venv here).
    for venv in (axolotl_venv, axolotl_newest_venv):
        version, schema = axolotl_schema(venv)
        stored = data_dir("schemas") / "trainers" / f"axolotl-{version}.json"
        assert stored.read_text(encoding="utf-8") == dump(schema), \
            f"python3 -m tools.trainer_schemas axolotl {venv}"
        assert json.loads(dump(schema)) == schema


@pytest.mark.slow  # imports TRL, in its venv
def test_the_stored_schema_is_what_the_script_makes_from_the_installed_trl(trl_venv: Path):
    version, schema = trl_schema(trl_venv)
    stored = data_dir("schemas") / "trainers" / f"trl-{version}.json"
    assert stored.read_text(encoding="utf-8") == dump(schema), \
        f"python3 -m tools.trainer_schemas trl {trl_venv}"
    assert json.loads(dump(schema)) == schema


@pytest.mark.slow  # imports LLaMA-Factory, in its venv
def test_the_stored_schema_is_what_the_script_makes_from_the_installed_llamafactory(
        llamafactory_venv: Path):
    version, schema = llamafactory_schema(llamafactory_venv)
    stored = data_dir("schemas") / "trainers" / f"llamafactory-{version}.json"
    assert stored.read_text(encoding="utf-8") == dump(schema), \
        f"python3 -m tools.trainer_schemas llamafactory {llamafactory_venv}"
    assert json.loads(dump(schema)) == schema


# Values that a config's keys may wrongly or rightly get, and keys to add: each trainer's
# own, misspelt ones, and (Axolotl) a plugin list that lifts the check of keys and adapters.
VALUES = [True, False, None, 0, 1, 2.5, "4", "2e-5", "yes", "", "lora", "lroa", "auto",
          "chatml", "dpo", "cosine", "steps", [], {}, ["x"], [{"path": "d", "type": "alpaca"}],
          {"enabled": True, "check_interval": 2}, {"check_interval": "x"}]
KEYS = {"axolotl": ["adapter", "lora_r", "learning_rat", "bf16", "rl", "chat_template",
                    "plugins", "dynamic_checkpoint", "datasets", "val_set_size",
                    "micro_batch_size"],
        "trl": ["lora_r", "learning_rat", "use_peft", "lr_scheduler_type", "report_to",
                "lora_target_modules", "num_processes", "save_strategy", "datasets", "env"],
        "llamafactory": ["lora_rank", "learning_rat", "finetuning_type", "stage", "report_to",
                         "lr_scheduler_type", "do_train", "template", "save_strategy"]}


@settings(derandomize=True, database=None, max_examples=600, deadline=None)
@given(example=st.sampled_from([(trainer, config)
                                for trainer, _, config in _example_configs()]),
       data=st.data())
def test_what_fastschema_takes_the_trainer_s_schema_takes(example: tuple, data: st.DataObject):
    """fastschema's yes spares a compile jsonschema's import, so it must never be wrong."""
    trainer, config = example
    changes = data.draw(st.lists(st.tuples(st.sampled_from(KEYS[trainer]),
                                           st.sampled_from(VALUES)), max_size=3))
    config = {**config, **{key: copy.deepcopy(value) for key, value in changes}}
    version = trainer_schema_versions(trainer)[-1]
    errors = list(trainer_config._validator(trainer, version).iter_errors(config))
    event(f"{trainer} valid: {not errors}")
    if fastschema.is_valid(trainer_schema(trainer, version), config):
        assert errors == []
