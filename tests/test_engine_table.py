"""obc's tables of `podman run` and `docker run` options (compiler/engine_args.py) are the
installed engines' own: the same names and letters as their `run --help`, and each option
takes a value exactly when the engine takes the next word as its value."""

from __future__ import annotations

import dataclasses
import re

import pytest

from compiler.engine_args import TABLES
from tests.engines import Engine

pytestmark = pytest.mark.engine

# A line of pflag's option list: `  -l, --label stringArray   Set metadata…`, where the word
# after the name says what value it takes (none for a boolean).
HELP_LINE = re.compile(r"^\s+(?:-(\w), )?--([\w-]+)( \S+)?(?:\s|$)", re.MULTILINE)
NO_DAEMON = "unix:///nonexistent/obc-no-daemon.sock"


def takes_a_value(engine: Engine, word: str) -> bool:
    """Ask the engine itself: an option that takes a value takes `--help` as it; one that
    does not leaves `--help` to print the help (exit 0)."""
    probe = engine("run", word, "--help", check=False)
    assert "unknown" not in probe.stderr, probe.stderr
    return probe.returncode != 0


@pytest.mark.parametrize("engine_name", ["podman", "docker"])
def test_the_table_is_the_engines_run_help(engine_name, request):
    engine: Engine = request.getfixturevalue(engine_name)
    table = TABLES[engine_name]
    # docker's help hides the options its daemon does not support, but reads them all: ask
    # a docker without a daemon.
    alone = dataclasses.replace(engine, env={**engine.env, "DOCKER_HOST": NO_DAEMON})
    listed = HELP_LINE.findall(alone("run", "--help").stdout)

    assert alone("--version").stdout.split()[2].rstrip(",") == table.source.split()[1]
    assert {name for _, name, value in listed if value} == table.valued
    assert {name for _, name, value in listed if not value} == table.flags
    assert {letter: name for letter, name, _ in listed if letter} == table.shorthands


@pytest.mark.parametrize("engine_name", ["podman", "docker"])
def test_each_option_takes_a_value_exactly_when_the_engine_says(engine_name, request):
    engine: Engine = request.getfixturevalue(engine_name)
    table = TABLES[engine_name]

    assert {name for name in table.valued | table.flags
            if takes_a_value(engine, f"--{name}")} == table.valued
    assert {letter for letter in table.shorthands
            if takes_a_value(engine, f"-{letter}")} == {
        letter for letter, name in table.shorthands.items() if name in table.valued}
