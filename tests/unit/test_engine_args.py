"""obc reads a run file's engine options as pflag does, against the engine's own table, and
passes each on whole (`--name` or `--name=value`), so that none takes the image's place."""

from __future__ import annotations

import pytest

from compiler.model.engine_args import OptionError, normal_words, read_options
from compiler.validate.rules import engine_options


@pytest.mark.parametrize(("word", "words"), [
    ("--network=none", ["--network=none"]),
    ("--rm", ["--rm"]),
    ("--rm=false", ["--rm=false"]),
    ("--label=", ["--label="]),
    ("-it", ["--interactive", "--tty"]),
    ("-lfoo", ["--label=foo"]),
    ("-l=foo", ["--label=foo"]),
    ("-l=", ["--label=="]),  # pflag: '=' is the value when nothing follows it
    ("-l==x", ["--label==x"]),
    ("-tl=x", ["--tty", "--label=x"]),
    ("-tlx", ["--tty", "--label=x"]),
    ("-ed=1", ["--env=d=1"]),  # the rest of the group is -e's value, not -d
    ("-d=false", ["--detach=false"]),
    ("-itq", ["--interactive", "--tty", "--quiet"]),
    ("-h=x", ["--hostname=x"]),
])
@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_each_option_is_passed_whole_as_pflag_reads_it(engine, word, words):
    assert list(normal_words(engine, [word])) == words


@pytest.mark.parametrize(("engine", "word", "words"), [
    ("podman", "--label", "takes a value"),
    ("docker", "-l", "takes a value"),
    ("podman", "-tl", "-l takes a value"),
    ("docker", "-itl", "-l takes a value"),
    ("podman", "--future-opt", "--future-opt is not an option of podman run (podman 4.3.1)"),
    ("docker", "--future-opt=1", "not an option of docker run (docker 28.2.2)"),
    ("docker", "--tls-verify", "not an option of docker run"),  # podman's alone
    ("podman", "--net=none", "not an option"),  # an alias: --network is the option
    ("podman", "--", "obc gives it itself"),
    ("docker", "-", "would read it as the image"),
    ("podman", "x", "would read it as the image"),
    ("podman", "---label", "not an option"),
    ("docker", "--=x", "not an option"),
    ("podman", "-t=", "-= is not an option"),
    ("docker", "-Z", "-Z is not an option"),
    ("podman", "--rm=maybe", "takes true or false after '=', not 'maybe'"),
    ("docker", "-t=yes", "takes true or false"),
])
def test_a_word_the_engine_would_not_read_as_whole_options_is_refused(engine, word, words):
    with pytest.raises(OptionError) as refused:
        read_options(engine, word)
    assert words in str(refused.value)


@pytest.mark.parametrize("kind", [["podman"], {"a": 1}, None, "native"])
def test_the_rule_leaves_a_runtime_without_an_engine_to_the_runtime_rules(kind):
    # The schema may have failed on the same file: the rule must not fail on its shape.
    assert list(engine_options.check({"runtime": {"kind": kind, "extra_args": ["-l"]}})) == []
