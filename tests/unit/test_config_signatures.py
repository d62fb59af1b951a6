"""The keys that tell a trainer's config from the others' (model/trainers.py
CONFIG_SIGNATURES, which `obc init` reads) are held to the trainers' own schemas, of every
release obc has, so that a new release cannot make one of them shared unnoticed."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.core.resources import trainer_schema, trainer_schema_versions
from compiler.init.run_file import run_id
from compiler.model.trainers import AXOLOTL, CONFIG_SIGNATURES, TRAINER_NAMES, TRL

SIGNATURES = {signature.trainer: signature for signature in CONFIG_SIGNATURES}


def schema_keys(trainer: str) -> set[str]:
    """Every top-level key of `trainer`'s config, in any release obc has a schema of."""
    return {key for version in trainer_schema_versions(trainer)
            for key in trainer_schema(trainer, version)["properties"]}


def test_every_trainer_with_a_config_has_a_signature():
    assert list(SIGNATURES) == [name for name in TRAINER_NAMES if name != "torchrun"]


@pytest.mark.parametrize(("trainer", "other"), [(AXOLOTL.name, TRL.name),
                                                (TRL.name, AXOLOTL.name)])
def test_a_signature_key_is_its_trainers_and_not_the_others(trainer, other):
    keys = set(SIGNATURES[trainer].keys)
    assert keys <= schema_keys(trainer)
    assert keys.isdisjoint(schema_keys(other))


def test_llamafactorys_keys_are_in_neither_schema():
    keys = set(SIGNATURES["llamafactory"].keys)
    assert keys.isdisjoint(schema_keys(AXOLOTL.name) | schema_keys(TRL.name))


@pytest.mark.parametrize(("name", "expected"), [
    ("llama3-qlora.yaml", "llama3-qlora"),
    ("Llama 3 ü #1.yaml", "llama-3-u-1"),
    ("_Hidden..yml", "hidden"),
    ("日本.yaml", "run"),
    (f"{'x' * 80}.yaml", "x" * 63),
])
def test_a_run_id_is_made_of_the_configs_name(name, expected):
    assert run_id(Path(name)) == expected
