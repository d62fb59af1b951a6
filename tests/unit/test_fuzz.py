"""Arbitrary input never gets obc to crash: `obc validate` and `obc compile` either succeed or
report located problems in the run file, in bounded time and memory — never a traceback,
never a problem in obc's own output (a shellcheck finding would be one), never exit code 2.

The inputs: arbitrary bytes, and valid run files with bytes spliced in; arbitrary YAML-shaped
documents, from random data with the run file's words as keys to run files built field by
field, valid or with one bad field; and those documents with one of YAML's traps (tags,
aliases, recursive aliases, merge keys, duplicate keys, tabs, BOM, several documents, a cut,
a stray character) worked into their text.
"""

from __future__ import annotations

import io
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from compiler.read.load import display_name
from tests.compile.diagnostics.harness import run_obc
from tests.support.memory import traced_peak

pytestmark = pytest.mark.slow  # about a minute of inputs

# The deadline is far above the few milliseconds an input takes: it bounds time without
# depending on the machine's load.
FUZZ = settings(derandomize=True, database=None, deadline=timedelta(seconds=20),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

WORDS = [
    "version", "id", "description", "runtime", "kind", "docker", "podman", "native", "image",
    "gpus", "all", "none", "shm_size", "mounts", "source", "target", "readonly", "extra_args",
    "venv", "env_file", "paths", "run_dir", "cache_dir", "trainer", "axolotl", "config",
    "preprocess", "merge", "steps", "name", "run", "files", "env", "secrets", "required",
    "slurm", "x-a", "HF_TOKEN", "HF_HOME", "IFS", "PATH", "OBC_X", "1", "3.10", "~", "~/x",
    "..", "-x", "$(id)", "a b", "it's", "axolotl.yaml", "/workspace/run", "16g", "",
]
# Text of every kind but control characters, which the loader refuses (the traps below and
# the bytes tests bring them in).
PRINTABLE = st.characters(exclude_categories=["Cs", "Cc"])
TEXT = st.text(st.one_of(PRINTABLE, st.sampled_from("\n\t")), max_size=12)
PATH_TEXT = st.text(PRINTABLE, max_size=12)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(),
                    TEXT, st.sampled_from(WORDS))
KEYS = st.one_of(st.sampled_from(WORDS), TEXT)
ANY_DATA = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(KEYS, inner, max_size=5), max_leaves=25)

NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
ARGUMENTS = st.lists(st.one_of(TEXT, st.sampled_from(WORDS)), max_size=5)
PROGRAMS = st.one_of(st.from_regex(r"[a-z][a-z0-9_./-]{0,8}", fullmatch=True),
                     st.sampled_from(["python", "~/bin/x", "./train.sh", "/usr/bin/env"]))
# The run file's fields, built once: a strategy made anew on each draw has Hypothesis work
# out its properties anew, which took most of the time of drawing a run file.
KINDS = st.sampled_from(["docker", "podman", "native"])
GPUS = st.one_of(st.sampled_from(["all", "none"]),
                 st.lists(st.integers(0, 16), min_size=1, max_size=3, unique=True))
EXTRA_ARGUMENTS = ARGUMENTS.filter(bool)
IDS = st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,20}", fullmatch=True)
DESCRIPTIONS = st.text(st.one_of(PRINTABLE, st.just("\n")), max_size=40)
STEP_NAMES = st.lists(st.from_regex(r"[a-z][a-z0-9_-]{0,6}", fullmatch=True),
                      min_size=1, max_size=3, unique=True)
ENVS = st.dictionaries(NAMES, st.one_of(TEXT, st.integers(0, 10**6)), max_size=3)
SECRETS = st.lists(NAMES, max_size=2, unique=True)
RUN_DIRS = st.sampled_from(["~", "~/r", "runs/x", "/srv/r ~ x"])


@st.composite
def run_files(draw: st.DrawFn, *, broken: bool = True) -> dict[str, Any]:
    """A run file built field by field: valid, or (when `broken`) often with one bad field."""
    kind = draw(KINDS)
    runtime: dict[str, Any] = {"kind": kind}
    if draw(st.booleans()):
        runtime["gpus"] = draw(GPUS)
    if kind != "native" and draw(st.booleans()):
        runtime["extra_args"] = [f"-{arg}" for arg in draw(EXTRA_ARGUMENTS)]
        runtime["mounts"] = [{"source": "~/" + draw(PATH_TEXT),
                              "target": "/d" + draw(PATH_TEXT)}]
    if kind == "native" and draw(st.booleans()):
        runtime["venv"] = "~/" + draw(PATH_TEXT)
    doc: dict[str, Any] = {
        "version": 1,
        "id": draw(IDS),
        "description": draw(DESCRIPTIONS),
        "runtime": runtime,
        "steps": [{"name": name, "run": [draw(PROGRAMS), *draw(ARGUMENTS)]}
                  for name in draw(STEP_NAMES)],
        "env": draw(ENVS),
        "secrets": draw(SECRETS),
        "paths": {"run_dir": draw(RUN_DIRS)},
    }
    if broken and draw(st.integers(0, 2)) == 0:
        section = draw(st.sampled_from(sorted(doc)))
        doc[section] = draw(ANY_DATA)
    return doc


def dump(data: Any, flow: bool) -> str:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = flow
    yaml.allow_unicode = True
    stream = io.StringIO()
    yaml.dump(data, stream)
    return stream.getvalue()


TRAPS = [
    lambda text, n: text,
    lambda text, n: "x-a: &a [1, 2]\nx-b: *a\n" + text,
    lambda text, n: "x-b: &b {c: &c [*c]}\n" + text,
    lambda text, n: text + "x-m:\n  <<: {a: 1}\n",
    lambda text, n: text + "description: !!binary aGk=\n",
    lambda text, n: text + "id: again\n",
    lambda text, n: text + "---\n" + text,
    lambda text, n: "\ufeff" + text,
    lambda text, n: text.replace("  ", "\t", 1),
    lambda text, n: text[: n % (len(text) + 1)],
    lambda text, n: text[: n % (len(text) + 1)] + chr(n % 0x250) + text[n % (len(text) + 1):],
]

DOCUMENTS = st.builds(
    lambda data, flow, trap, n: TRAPS[trap](dump(data, flow), n),
    st.one_of(ANY_DATA, run_files(), run_files()), st.booleans(),
    st.integers(0, len(TRAPS) - 1), st.integers(0, 10_000))


VALID = (b"version: 1\nid: r\nruntime: {kind: docker, gpus: [0]}\nenv: {A: '1'}\n"
         b"steps:\n  - name: a\n    run: [python, \"it's\", -x]\n")
BYTES = st.one_of(
    st.binary(max_size=600),
    st.text(max_size=200).map(lambda text: text.encode("utf-8", "surrogatepass")),
    st.builds(lambda at, cut, junk: VALID[:at] + junk + VALID[at + cut:],
              st.integers(0, len(VALID)), st.integers(0, 3), st.binary(min_size=1, max_size=4)),
)


def check_outcome(run_file: Path, out: Path, *command: str) -> None:
    """Run obc on `run_file`; the outcome must be a success or problems located in it."""
    outcome = run_obc(*command, "--format", "json", str(run_file),
                      *(["-o", str(out)] if command == ("compile",) else []))
    assert outcome.code in (0, 1), outcome
    problems = outcome.diagnostics()
    event("valid" if outcome.code == 0 else problems[0]["message"][:24])
    assert bool(problems) == (outcome.code == 1), outcome
    lines = run_file.read_bytes().count(b"\n") + 1
    for problem in problems:
        assert problem["file"] == display_name(run_file), problem  # not a shellcheck finding
        assert 1 <= problem["line"] <= lines and problem["column"] >= 1, problem
        assert problem["message"] and "Traceback" not in problem["message"], problem
    if command == ("compile",):
        assert out.exists() == (outcome.code == 0)


# What one input may allocate while obc handles it (the loader's bounds keep it to a few MiB).
MAX_MEMORY = 50 * 1024 * 1024


def fuzz(content: bytes, *command: str) -> None:
    """Check obc's outcome on `content`, and bound the peak of what it allocates for it."""
    with tempfile.TemporaryDirectory(prefix="obc-fuzz-") as tmp:
        run_file = Path(tmp, "run.yaml")
        run_file.write_bytes(content)
        _, peak = traced_peak(lambda: check_outcome(run_file, Path(tmp, "out"), *command))
        assert peak < MAX_MEMORY


@settings(FUZZ, max_examples=400)
@given(BYTES)
def test_arbitrary_bytes_validate_or_fail_with_located_problems(content):
    fuzz(content, "validate")


@settings(FUZZ, max_examples=150)
@given(BYTES)
def test_arbitrary_bytes_compile_or_fail_with_located_problems(content):
    fuzz(content, "compile")


@settings(FUZZ, max_examples=300)
@given(DOCUMENTS)
def test_arbitrary_documents_validate_or_fail_with_located_problems(text):
    fuzz(text.encode("utf-8", "surrogatepass"), "validate")


@settings(FUZZ, max_examples=100)
@given(st.one_of(run_files(broken=False).map(lambda doc: dump(doc, False)), DOCUMENTS))
def test_arbitrary_documents_compile_or_fail_with_located_problems(text):
    fuzz(text.encode("utf-8", "surrogatepass"), "compile")
