"""Shared test fixtures: compiling run files, stub engines and trainer, running scripts."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from compiler.cli.main import main
from compiler.pipeline.pipeline import compile_files
from tests.support.shared import run_temp
from tests.support.slurm_cluster import SlurmCluster, missing_programs

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
STUBS = TESTS / "support" / "stubs"

# What a test needs beyond Python is a marker (pyproject.toml says what each needs;
# docs/tests.md): every test in the folder of tests/ that holds that need has it...
FOLDER_NEEDS = {"script": "shells", "engines": "engines", "slurm": "slurm", "axolotl": "axolotl",
                "trl": "trl", "llamafactory": "llamafactory", "packaging": "packaging",
                "browser": "browser"}
# ...and so has any test elsewhere that asks for a fixture starting the real thing, directly
# or through another fixture (a parameter of the same name is no need).
FIXTURE_NEEDS = {"podman": "engines", "docker": "engines", "test_image_tar": "engines",
                 "cleanup": "engines", "token_service": "engines", "start_registry": "engines",
                 "slurm": "slurm", "pyxis": "slurm", "axolotl_venv": "axolotl",
                 "axolotl_newest_venv": "axolotl", "trl_venv": "trl",
                 "llamafactory_venv": "llamafactory"}

# How each POSIX shell of the matrix is started.
SHELLS: dict[str, list[str]] = {
    "dash": ["dash"],
    "bash": ["bash"],
    "bash-posix": ["bash", "--posix"],
    "busybox": ["busybox", "sh"],
    "zsh": ["zsh", "--emulate", "sh"],
    "mksh": ["mksh"],
    "posh": ["posh"],
    "yash": ["yash"],
    "ksh93": ["ksh93"],
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with what it needs: its folder's need and its fixtures'."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        fixtures = set(item.fixturenames) - set(callspec.params if callspec else ())
        needs = {FIXTURE_NEEDS[name] for name in fixtures & FIXTURE_NEEDS.keys()}
        needs.add(FOLDER_NEEDS.get(item.path.relative_to(TESTS).parts[0]))
        for need in sorted(needs - {None}):
            item.add_marker(need)


@pytest.fixture(autouse=True, scope="session")
def compile_cache(tmp_path_factory: pytest.TempPathFactory):
    """obc's cache for the whole test run, away from the user's: records are keyed by all they
    depend on, so sharing them between tests, and between the run's processes (as obc's
    compiles share a user's cache), is sound; the library's findings are made once a run. A
    test of the cache itself, or of what shellcheck is run with, points OBC_COMPILE_CACHE at
    a folder of its own."""
    cache = run_temp(tmp_path_factory) / "obc-cache"
    cache.mkdir(mode=0o700, exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OBC_COMPILE_CACHE", str(cache))
        yield


def compile_text(directory: Path, text: str, name: str = "run.yaml") -> str:
    """Compile one run file written to `directory`; return the script's text."""
    run_file = directory / name
    run_file.write_text(text, encoding="utf-8")
    result = compile_files([run_file], out=directory / "out")
    assert not result.diagnostics, "\n".join(d.text() for d in result.diagnostics)
    # A run file compiled before, here or by another test, is reused from the session's cache.
    (script,) = [*result.scripts, *result.reused]
    return script.text


def allow_sbatch(folder: Path, *names: str) -> None:
    """Give the project at `folder` a site policy that allows these sbatch options in
    slurm.extra besides obc's allow-list (docs/slurm.md, "Site policy")."""
    (folder / "obc-policy.yaml").write_text(
        f"version: 1\nsbatch: {{allowed: [{', '.join(names)}]}}\n", encoding="utf-8")


def container_name(job_id: str, run_dir: Path | str) -> str:
    """The name a job's container gets in `run_dir` (docs/script.md: what obc adds to every
    container)."""
    digest = hashlib.sha256(str(run_dir).encode()).hexdigest()[:12]
    return f"overbrainer-{job_id}-{digest}"


def open_folder(prefix: str, mode: int) -> Iterator[Path]:
    """A folder with `mode` that another user can reach (a test's own tmp_path is private
    to root), removed afterwards: the body of a fixture."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(mode)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def write_script(directory: Path, text: str) -> Path:
    path = directory / "job.sh"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
    return path


@dataclass
class Run:
    """One run of a job.sh: its exit code, output, and what the stubs recorded."""

    returncode: int
    stdout: str
    stderr: str
    records: list[dict] = field(default_factory=list)

    @property
    def engine_runs(self) -> list[dict]:
        return [r for r in self.records if "engine" in r and r["argv"][1] == "run"]

    @property
    def apptainer_runs(self) -> list[dict]:
        return [r for r in self.records if "apptainer" in r]

    @property
    def steps(self) -> list[dict]:
        return [r for r in self.records if "program" in r]

    @property
    def messages(self) -> list[str]:
        """stderr's lines, with the UTC times and durations of the step lines left out."""
        return untimed(self.stderr)


def timeless_status(data: bytes) -> dict:
    """A run's .obc/status.json without its times, which differ from run to run."""
    return {key: value for key, value in json.loads(data).items() if not key.endswith("_at")}


def untimed(stderr: str) -> list[str]:
    """Lines of a job's stderr without what differs from run to run: `obc: <UTC time> step`
    becomes `obc: step`, and `done in 12 s` becomes `done`."""
    lines = [re.sub(r"^obc: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ step ", "obc: step ", line)
             for line in stderr.splitlines()]
    return [re.sub(r": done in \d+ s$", ": done", line) for line in lines]


@dataclass
class Sandbox:
    """A folder with stub `docker`, `podman`, `apptainer` and trainer programs, and a HOME
    for the job."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def home(self) -> Path:
        return self.root / "home"

    def env(self, **extra: str) -> dict[str, str]:
        """A clean environment: the stubs first on PATH, then the system's."""
        return {"PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin", "HOME": str(self.home),
                "LANG": "C.UTF-8", "OBC_STUB_STATE": str(self.state), **extra}

    def path_without_system_bins(self) -> str:
        """A PATH of the stubs and just the tools a job script uses, so that a test can
        take a program away whatever else this machine has installed."""
        tools = self.root / "tools"
        tools.mkdir(exist_ok=True)
        for tool in ("env", "setsid", "flock", "mkdir", "cat", "mv", "kill", "python3", "id",
                     "find", "sha256sum", "cut", "uname", "mktemp", "chmod", "rm", "sleep", "sh",
                     "sed", "ln", "stat"):
            link = tools / tool
            if not link.exists():
                link.symlink_to(shutil.which(tool))
        return f"{self.bin}:{tools}"

    def records(self) -> list[dict]:
        log = self.state / "log.jsonl"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]

    def run(self, script: Path, *args: str, shell: str = "dash", env: dict | None = None,
            timeout: float = 60) -> Run:
        program, *options = SHELLS[shell]
        command = [shutil.which(program) or program, *options, str(script), *args]
        result = subprocess.run(command, capture_output=True,
                                text=True, env=env if env is not None else self.env(),
                                stdin=subprocess.DEVNULL, timeout=timeout, check=False)
        return Run(result.returncode, result.stdout, result.stderr, self.records())


def install_stub(path: Path, stub: str, python: Path = Path(sys.executable)) -> None:
    """Install tests/support/stubs/<stub>.py as the executable `path`, run by `python`
    without site-packages (-S): the stubs need only the standard library, and the tests
    start thousands, each 14 ms of processor time where the site's .pth files make it 90."""
    path.write_text(f"#!{python} -S\n" + (STUBS / f"{stub}.py").read_text())
    path.chmod(0o755)


# scontrol for a job on nodes n1 and n2, as job.sh asks it for the first node.
SCONTROL = "#!/bin/sh\n[ \"$*\" = 'show hostnames n[1-2]' ] && printf 'n1\\nn2\\n'\n"


def install_slurm_stubs(box: Sandbox) -> None:
    """A stub srun with pyxis's options (tests/support/stubs/srun.py), and scontrol for a job on n1
    and n2: enough for an enroot job.sh, run as if in a Slurm job."""
    install_stub(box.bin / "srun", "srun")
    (box.bin / "scontrol").write_text(SCONTROL)
    (box.bin / "scontrol").chmod(0o755)


def make_sandbox(root: Path, programs: tuple[str, ...] = ("axolotl", "record")) -> Sandbox:
    """A sandbox under `root`: stub engines, and the stub trainer under each name in
    `programs`."""
    box = Sandbox(root)
    for folder in (box.bin, box.state, box.home):
        folder.mkdir(parents=True, exist_ok=True)
    for engine in ("docker", "podman"):
        install_stub(box.bin / engine, "engine")
    install_stub(box.bin / "apptainer", "apptainer")
    for program in programs:
        install_stub(box.bin / program, "record")
    return box


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return make_sandbox(tmp_path / "sandbox")


@pytest.fixture(scope="session")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real virtual environment whose bin/ holds the stub trainer as `axolotl`."""
    path = tmp_path_factory.mktemp("venv") / "axolotl-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    install_stub(path / "bin" / "axolotl", "record", python=path / "bin" / "python")
    return path


# Enough examples to write, keep, change and remove scripts: the tests of OUT use these four
# (each compile runs shellcheck, so fewer scripts make faster tests).
PROJECT_RUNS = ("docker-qlora", "inline-config", "native-venv", "steps-eval")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Four examples (and what they read) in a fresh folder, which is the working directory."""
    root = tmp_path / "project"
    shutil.copytree(REPO / "examples", root / "examples",
                    ignore=lambda folder, names: [
                        name for name in names if Path(folder) == REPO / "examples"
                        and name.endswith(".yaml") and name[:-5] not in PROJECT_RUNS])
    monkeypatch.chdir(root)
    return root


@dataclass
class Outcome:
    """What one in-process `obc` command returned and printed."""

    code: int
    stdout: str
    stderr: str


@pytest.fixture
def obc(capsys: pytest.CaptureFixture[str]):
    """Run `obc ARGS...` in this process; return its exit code and output."""

    def run(*args: str) -> Outcome:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    return run


def start_script(script: Path, *args: str, shell: str, env: dict[str, str]) -> subprocess.Popen:
    """Start a job.sh in the background, as a scheduler would: a session of its own, and
    TERM, INT and HUP at their defaults (a shell cannot trap a signal ignored on entry,
    and a parent started in the background may have left INT ignored)."""

    def default_signals() -> None:
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)

    return subprocess.Popen([*SHELLS[shell], str(script), *args], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=default_signals)  # noqa: PLW1509 (no threads here)


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory):
    """The real Slurm cluster of tests/support/slurm_cluster.py, one per session for every
    module."""
    missing = missing_programs()
    assert not missing, f"tests/run installs Slurm; missing here: {', '.join(missing)}"
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


# As fixtures for every test module: the real engines of tests/support/engines.py, and real Axolotl
# (tests/support/axolotl.py: its venv, the tiny model, the image that runs them) and real TRL
# (tests/support/trl.py) and LLaMA-Factory (tests/support/llamafactory.py).
from tests.support.axolotl import (  # noqa: E402,F401
    axolotl_image,
    axolotl_newest_venv,
    axolotl_venv,
    tiny_model,
)
from tests.support.engines import cleanup, docker, podman, test_image_tar  # noqa: E402,F401
from tests.support.llamafactory import llamafactory_venv, tiny_factory  # noqa: E402,F401
from tests.support.registry import start_registry, token_service  # noqa: E402,F401
from tests.support.trl import tiny_sft, trl_venv  # noqa: E402,F401
