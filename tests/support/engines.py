"""Real container engines for the tests: podman, a private dockerd, and a tiny local image.

The image is built without a registry: a busybox-static root filesystem with the shell stub
trainer (stubs/trainer.sh) as `record` and `axolotl`, imported into each engine. podman uses
the system's storage with tests/support/containers.conf (one storage, one configuration: mixing them
makes every `podman run` stall for 20 s); a fake CDI spec lets `--device nvidia.com/gpu=all`
resolve. dockerd is started for the session on a socket, data and exec root of its own, so
that several test sessions can run side by side, and stopped at the end.

A test that needs an engine that is not installed fails, saying so; tests/run installs both.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SUPPORT = Path(__file__).resolve().parent
TRAINER = SUPPORT / "stubs" / "trainer.sh"
CONTAINERS_CONF = SUPPORT / "containers.conf"
# podman 4.3 reads CDI specs only from /etc/cdi and /var/run/cdi.
FAKE_GPU_SPEC = Path("/etc/cdi/obc-test-fake-gpu.json")
FAKE_GPU_ENV = ("OBC_FAKE_GPU", "all")
DEB_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "obc-tests"


@dataclass(frozen=True)
class Engine:
    """A working engine: `name` on PATH, with `env` added to whatever runs it."""

    name: str
    env: dict[str, str]
    image: str

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.name, *args], env={**os.environ, **self.env}, text=True,
                              capture_output=True, check=check, timeout=120)

    def container_exists(self, name: str) -> bool:
        return self("container", "inspect", name, check=False).returncode == 0


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    """Poll `condition` until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def _busybox_deb() -> Path:
    """Debian's busybox-static package, downloaded once into a cache folder."""
    DEB_CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(DEB_CACHE.glob("busybox-static_*.deb"))
    if not found:
        result = subprocess.run(["apt-get", "download", "busybox-static"], cwd=DEB_CACHE,
                                capture_output=True, text=True, check=False)
        found = sorted(DEB_CACHE.glob("busybox-static_*.deb"))
        if not found:
            pytest.fail(f"cannot download busybox-static for the test image:\n{result.stderr}")
    return found[-1]


def _rootfs_tar(work: Path) -> bytes:
    """A root filesystem of busybox applets and the stub trainer, as a tar archive."""
    subprocess.run(["dpkg-deb", "-x", str(_busybox_deb()), str(work / "deb")], check=True)
    busybox = work / "deb" / "bin" / "busybox"
    applets = subprocess.run([str(busybox), "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    applets.remove("busybox")
    # Owner root and time 0 throughout: the same content gives the same archive and tag.
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for folder in ("bin", "tmp", "root", "usr", "usr/local", "usr/local/bin"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755
            tar.addfile(info)
        _add_program(tar, "bin/busybox", busybox.read_bytes())
        for applet in applets:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(info)
        for program in ("record", "axolotl"):
            _add_program(tar, f"usr/local/bin/{program}", TRAINER.read_bytes())
    return buffer.getvalue()


def _add_program(tar: tarfile.TarFile, name: str, content: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(content), 0o755
    tar.addfile(info, io.BytesIO(content))


@pytest.fixture(scope="session")
def test_image_tar(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, bytes]:
    """The test image's name (tagged by its content) and its root filesystem."""
    tar = _rootfs_tar(tmp_path_factory.mktemp("rootfs"))
    return f"localhost/obc-test:{hashlib.sha256(tar).hexdigest()[:12]}", tar


def _import(engine: Engine, tar: bytes) -> None:
    if engine("image", "inspect", engine.image, check=False).returncode == 0:
        return  # the tag names the content: imported before, by this or another session
    result = subprocess.run([engine.name, "import", "-", engine.image], input=tar,
                            capture_output=True, env={**os.environ, **engine.env}, timeout=120,
                            check=False)
    if result.returncode != 0:
        pytest.fail(f"{engine.name} import failed:\n{result.stderr.decode()}")


def _install_fake_gpu_spec() -> None:
    """A CDI spec for `nvidia.com/gpu=all` that adds one variable and nothing else."""
    spec = {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [
        {"name": "all", "containerEdits": {"env": ["=".join(FAKE_GPU_ENV)]}}]}
    text = json.dumps(spec, indent=2) + "\n"
    if FAKE_GPU_SPEC.exists() and FAKE_GPU_SPEC.read_text() == text:
        return
    FAKE_GPU_SPEC.parent.mkdir(parents=True, exist_ok=True)
    temporary = FAKE_GPU_SPEC.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(text)
    temporary.replace(FAKE_GPU_SPEC)


def _require(*programs: str) -> None:
    missing = [p for p in programs if not shutil.which(p)]
    if missing:
        pytest.fail(f"ENGINE MISSING: {', '.join(missing)} not installed, so the real-engine "
                    "tests cannot run; tests/run installs them (Debian: podman runc docker.io)")


@pytest.fixture(scope="session")
def podman(test_image_tar: tuple[str, bytes]) -> Engine:
    """Rootful podman with runc, the system's storage and a fake GPU."""
    _require("podman", "runc")
    _install_fake_gpu_spec()
    engine = Engine("podman", {"CONTAINERS_CONF": str(CONTAINERS_CONF)}, test_image_tar[0])
    _import(engine, test_image_tar[1])
    return engine


@pytest.fixture(scope="session")
def docker(tmp_path_factory: pytest.TempPathFactory,
           test_image_tar: tuple[str, bytes]) -> Iterator[Engine]:
    """A dockerd of this session's own, without a bridge or iptables rules."""
    _require("docker", "dockerd")
    root = tmp_path_factory.mktemp("dockerd")
    socket = root / "docker.sock"
    with open(root / "dockerd.log", "wb") as log:
        daemon = subprocess.Popen(
            ["dockerd", "--bridge=none", "--iptables=false", f"--host=unix://{socket}",
             f"--data-root={root / 'data'}", f"--exec-root={root / 'exec'}",
             f"--pidfile={root / 'dockerd.pid'}"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    engine = Engine("docker", {"DOCKER_HOST": f"unix://{socket}"}, test_image_tar[0])
    try:
        def ready() -> bool:
            if daemon.poll() is not None:
                pytest.fail("dockerd exited:\n" + (root / "dockerd.log").read_text()[-3000:])
            return engine("version", check=False).returncode == 0

        wait_until(ready, "dockerd to answer on its socket")
        _import(engine, test_image_tar[1])
        yield engine
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


@pytest.fixture
def cleanup() -> Iterator[list[tuple[Engine, str]]]:
    """(engine, container name) pairs to remove after the test, whatever happened in it."""
    names: list[tuple[Engine, str]] = []
    yield names
    for engine, name in names:
        engine("rm", "-f", name, check=False)


@dataclass(frozen=True)
class Record:
    """What one run of the stub trainer inside a container saw."""

    program: str
    argv: list[str]
    env: dict[str, str]
    cwd: str


def trainer_records(run_dir: Path) -> list[Record]:
    """The stub trainer's records in `run_dir`, in the order the steps ran."""
    folder = run_dir / ".records"
    count = len(list(folder.glob("*/ready"))) if folder.is_dir() else 0
    return [_read_record(folder / str(n)) for n in range(count)]


def _read_record(folder: Path) -> Record:
    def fields(name: str) -> list[str]:
        data = (folder / name).read_bytes().decode()
        return data.split("\0")[:-1] if data else []

    env = dict(item.split("=", 1) for item in fields("env"))
    return Record((folder / "program").read_text(), fields("argv"), env,
                  (folder / "cwd").read_text().rstrip("\n"))
