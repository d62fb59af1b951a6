"""The markers select the tests by what they need beyond Python (docs/tests.md): a test is
marked by its folder, and by any fixture it asks for that starts a real engine, the Slurm
cluster or real Axolotl, so that deselecting the needs leaves only tests that need nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FOLDER_NEEDS, REPO

# The quick command of docs/tests.md selects these, but for the slow ones.
NOTHING = "not shells and not engines and not slurm and not axolotl and not trl and " \
    "not llamafactory and not packaging and not browser"
NEEDS = set(FOLDER_NEEDS.values())

# Prints each collected test's id and markers, as JSON.
REPORTER = """\
import json

def pytest_collection_finish(session):
    print(json.dumps({item.nodeid: sorted(mark.name for mark in item.iter_markers())
                      for item in session.items}))
"""


def collect(tmp_path: Path, *args: str) -> dict[str, set[str]]:
    """Each test pytest collects with these arguments, and the needs it is marked with."""
    (tmp_path / "marker_reporter.py").write_text(REPORTER)
    # In a collection every snapshot is unused, which syrupy would count as a failure.
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                             "--snapshot-warn-unused", "-p", "no:cacheprovider",
                             "-p", "marker_reporter", *args],
                            cwd=REPO, capture_output=True, text=True, check=False,
                            env={**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO}"})
    assert result.returncode == 0, result.stdout + result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("{")]
    return {test: set(marks) & NEEDS for test, marks in json.loads(line).items()}


@pytest.fixture(scope="module")
def needs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    return collect(tmp_path_factory.mktemp("markers"))


def test_the_selection_of_no_need_is_exactly_the_tests_that_need_nothing(needs, tmp_path):
    selected = collect(tmp_path, "-m", NOTHING)
    assert set(selected) == {test for test, marked in needs.items() if not marked}
    assert {test.split("/")[1] for test in selected} == {"unit", "compile"}


@pytest.mark.parametrize(("folder", "need"), FOLDER_NEEDS.items())
def test_every_test_in_a_folder_is_marked_with_its_need(needs, folder, need):
    in_folder = [test for test in needs if test.startswith(f"tests/{folder}/")]
    assert in_folder
    assert [test for test in in_folder if need not in needs[test]] == []


def test_a_test_that_asks_for_a_real_thing_is_marked_with_its_need_wherever_it_is(needs):
    billed = [test for test in needs if "gpus_billed_are_what_a_real_slurm_allocates" in test]
    assert billed and all(needs[test] == {"slurm"} for test in billed)
    signals = {test: needs[test] for test in needs if "/test_signals.py" in test}
    assert {frozenset(marked) for marked in signals.values()} == {
        frozenset({"shells"}), frozenset({"shells", "engines"})}


def test_a_parameter_named_like_a_fixture_is_no_need(needs):
    # test_plan_meaning has a parameter `slurm` (a run file's block), not the cluster.
    assert not [test for test in needs if "/test_plan_meaning.py" in test and needs[test]]


def test_every_test_is_in_the_folder_of_its_need(needs):
    # A test file straight under tests/ would be marked with no need, whatever it needs.
    folders = {"unit", "compile", *FOLDER_NEEDS}
    assert [test for test in needs if test.split("/")[1] not in folders] == []
