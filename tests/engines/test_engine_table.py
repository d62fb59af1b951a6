"""obc's tables of `podman run` and `docker run` options (compiler/engine_args.py) are the
installed engines' own: the same names and letters as their `run --help`, and each option
takes a value exactly when the engine takes the next word as its value. The whole words obc
passes mean to the engine what the run file's words did."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from compiler.model.engine_args import TABLES, normal_words
from tests.engines.test_engines import job_id
from tests.support.engines import Engine

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


# Words whose reading by pflag's rules is easy to get wrong.
TRICKY = ["-tl=x", "-tlx", "-l=", "-l==x", "-ed=1", "-itq", "-lfoo", "-h=x", "-d=false",
          "-t=false", "--label=", "--env=A=b c", "-ih=x=y"]


def created(engine: Engine, name: str, words: list[str]) -> tuple[int, dict | None]:
    """Create (not start) a container with `words`; return the engine's answer and what the
    container was given."""
    made = engine("create", "--name", name, "--hostname=base", *words, "--", engine.image,
                  "true", check=False)
    if made.returncode != 0:
        return made.returncode, None
    config = json.loads(engine("container", "inspect", "--format", "{{json .Config}}",
                               name).stdout)
    engine("rm", "-f", name)
    given = {key: config.get(key) for key in ("Labels", "Tty", "OpenStdin", "Hostname")}
    return 0, {**given, "Env": sorted(config.get("Env") or ())}  # podman's order varies


@pytest.mark.parametrize("engine_name", ["podman", "docker"])
def test_the_words_obc_passes_mean_what_the_run_file_wrote(engine_name, request, cleanup):
    engine: Engine = request.getfixturevalue(engine_name)
    name = job_id()
    cleanup.append((engine, name))
    for word in TRICKY:
        written = created(engine, name, [word])
        assert created(engine, name, list(normal_words(engine_name, [word]))) == written, word
