"""An inline Axolotl config is embedded as YAML that Axolotl's reader (PyYAML, YAML 1.1)
reads back to the same values: strings YAML 1.1 would read otherwise ('yes', 'on', '1e-5'),
floats, and characters that are line breaks to YAML 1.1 only (NEL, U+2028, U+2029)."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import event, given, settings
from hypothesis import strategies as st

from compiler.normalise import trainer
from compiler.normalise.trainer import dump_config

FRAGMENTS = ["a", "yes", "on", "No", "null", "~", "1e-5", "0x1F", "010", "1_000", "3.10",
             "2001-12-14", ": ", "#", "'", '"', "\\", " ", "\n", "\t", "\x85", "\u2028",
             "\u2029", "é", "日本", "\U0001F600", "-", "[", "{", "*a", "&a", "!x", "%"]
TEXT = st.lists(st.sampled_from(FRAGMENTS), max_size=5).map("".join)
SCALAR = st.one_of(TEXT, st.booleans(), st.none(), st.integers(-(2**40), 2**40),
                   st.floats(allow_nan=False, allow_infinity=False))
KEY = st.from_regex(r"[a-z_]{1,12}", fullmatch=True)
CONFIG = st.dictionaries(KEY, st.recursive(
    SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEY, inner, max_size=3),
    max_leaves=8), min_size=1, max_size=6)


@pytest.mark.slow
@settings(derandomize=True, database=None, max_examples=400, deadline=None)
@given(config=CONFIG)
def test_axolotl_reads_the_embedded_config_back_to_the_same_values(config):
    text = dump_config(config)
    event("ASCII" if text.isascii() else "not ASCII")
    assert text.startswith("%YAML 1.1\n")
    assert yaml.safe_load(text) == config


def test_line_breaks_of_yaml_1_1_only_are_escaped():
    text = dump_config({"a": "x\x85y\u2028z", "b": "é"})
    assert text.isascii() and "\\N" in text and "\\L" in text
    assert yaml.safe_load(text) == {"a": "x\x85y\u2028z", "b": "é"}
    assert dump_config({"b": "é 日本"}) == "%YAML 1.1\n---\nb: é 日本\n"


def test_a_config_that_runs_share_is_dumped_once(monkeypatch):
    dumps = []
    real = trainer._dump
    monkeypatch.setattr(trainer, "_dump", lambda *a, **k: dumps.append(a) or real(*a, **k))
    shared = {"base_model": "m", "learning_rate": 0.0002, "dump-once-test": [1, {"a": None}]}
    assert trainer.dump_config(shared) == trainer.dump_config(dict(shared))
    assert len(dumps) == 1


def test_configs_that_only_json_tells_apart_are_dumped_each_as_it_is():
    # Equal in Python (1 == 1.0 == True), not in YAML: each is dumped as its own.
    texts = [trainer.dump_config({"seed": value}) for value in (1, 1.0, True, "1")]
    assert texts == ["%YAML 1.1\n---\nseed: 1\n", "%YAML 1.1\n---\nseed: 1.0\n",
                     "%YAML 1.1\n---\nseed: true\n", "%YAML 1.1\n---\nseed: '1'\n"]
    assert trainer.dump_config({"b": 1, "a": 2}) != trainer.dump_config({"a": 2, "b": 1})
