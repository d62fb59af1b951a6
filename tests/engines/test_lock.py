"""The image lock against a real registry on loopback: `obc lock`, `lock --check`, and compile
reading obc.lock without the network (tests/support/registry.py starts the registries)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.read.lockfile import HEADER
from tests.compile.diagnostics.corpus import unblocked
from tests.support.engines import Engine, trainer_records
from tests.support.registry import (
    DOCKER_LIST,
    DOCKER_MANIFEST,
    OCI_INDEX,
    OCI_MANIFEST,
    Registry,
    StartRegistry,
    TokenService,
    write_oci_layout,
)

HEADER_LINES = 2
RUNS, LOCK, OUT = Path("runs"), Path("obc.lock"), Path("out")


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test works in a folder of its own outside any git work tree: paths in messages
    are relative, and the lock is ./obc.lock unless a test says otherwise."""
    monkeypatch.chdir(tmp_path)


def write_run(name: str, image: str | None, kind: str = "docker", folder: Path = RUNS) -> Path:
    """A run file `FOLDER/NAME.yaml` of one step; `runtime.image` is on line 5, column 10."""
    folder.mkdir(parents=True, exist_ok=True)
    image_line = f"  image: {image}\n" if image else ""
    path = folder / f"{name}.yaml"
    path.write_text(f"version: 1\nid: {name}\nruntime:\n  kind: {kind}\n{image_line}"
                    "steps:\n  - name: hello\n    run: [echo, hello]\n", encoding="utf-8")
    return path


def entries(lock: Path = LOCK) -> dict[str, str]:
    lines = lock.read_text(encoding="utf-8").splitlines()
    assert all(line.startswith("# ") for line in lines[:HEADER_LINES])
    return dict(line.split(" ") for line in lines[HEADER_LINES:])


@pytest.fixture
def image(tmp_path: Path, test_image_tar: tuple[str, bytes]):
    """Push the test image (variant V) as `obc/test:TAG` to a registry; return its name."""

    def push(registry: Registry, tag: str = "1", *, variant: str = "1",
             platforms: tuple[str, ...] = ("amd64",), docker_types: bool = False) -> str:
        layout = write_oci_layout(tmp_path / f"layout-{tag}-{variant}", tag, test_image_tar[1],
                                  variant=variant, platforms=platforms)
        registry.push(layout, tag, docker_types=docker_types)
        return f"{registry.host}/obc/test:{tag}"

    return push


@pytest.mark.parametrize(("platforms", "docker_types", "media_type"), [
    (("amd64",), False, OCI_MANIFEST),
    (("amd64", "arm64"), False, OCI_INDEX),
    (("amd64",), True, DOCKER_MANIFEST),
    (("amd64", "arm64"), True, DOCKER_LIST),
], ids=["oci-manifest", "oci-index", "docker-manifest", "docker-list"])
def test_lock_writes_the_digest_skopeo_reports(
        obc, start_registry: StartRegistry, image, token_service: TokenService,
        monkeypatch: pytest.MonkeyPatch, platforms: tuple[str, ...], docker_types: bool,
        media_type: str) -> None:
    registry = start_registry()
    name = image(registry, platforms=platforms, docker_types=docker_types)
    write_run("a", name)
    token_service.seen.clear()
    # A proxy for the outside world (here: none listening) is not used for loopback.
    for variable in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.setenv(variable, "http://127.0.0.1:9")

    done = obc("lock", "runs")
    (request,) = token_service.seen

    assert done.code == 0, done.stderr
    # obc took the anonymous bearer-token flow, with the service and scope of the challenge.
    assert request["service"] == ["obc-test-registry"]
    assert request["scope"] == ["repository:obc/test:pull"]
    assert request["user-agent"][0].startswith("Python-urllib/")
    # The digest docker pins: the index or manifest list itself for a multi-platform image.
    assert registry.inspect("1", raw=True)["mediaType"] == media_type
    assert entries() == {name: registry.inspect("1")["Digest"]}
    assert done.stderr == f"obc: locked {name} at {entries()[name]}\n" \
                          "obc: obc.lock: 1 image(s) locked\n"


def test_lock_through_skopeo_writes_the_same_lock(obc, start_registry, image) -> None:
    write_run("a", image(start_registry(), platforms=("amd64", "arm64")))
    assert obc("lock", "runs", "--lock", "by-obc.lock").code == 0
    assert obc("lock", "runs", "--lock", "by-skopeo.lock", "--skopeo").code == 0
    assert Path("by-skopeo.lock").read_bytes() == Path("by-obc.lock").read_bytes()


def test_lock_needs_no_token_from_a_registry_without_auth(obc, start_registry, image,
                                                          token_service) -> None:
    registry = start_registry(auth="none")
    name = image(registry)
    write_run("a", name)
    token_service.seen.clear()
    assert obc("lock", "runs").code == 0
    assert entries() == {name: registry.inspect("1")["Digest"]}
    assert token_service.seen == []


def write_enroot_run(version: int, image: str) -> None:
    RUNS.mkdir(exist_ok=True)
    (RUNS / f"e{version}.yaml").write_text(
        f"version: 1\nid: e{version}\nruntime:\n  kind: enroot\n  image: {image}\n"
        f"  enroot_version: {version}\nslurm: {{}}\n"
        "steps:\n  - name: hello\n    run: [echo, hello]\n", encoding="utf-8")


def test_an_enroot_4_job_runs_the_locked_digest_and_an_enroot_3_job_cannot(
        obc, start_registry, image) -> None:
    registry = start_registry(auth="none")
    name = image(registry)
    write_enroot_run(3, name)
    assert obc("lock", "runs").code == 0
    assert entries() == {}  # enroot 3 takes no digest: nothing to lock
    write_enroot_run(4, name)
    assert obc("lock", "runs").code == 0
    digest = registry.inspect("1")["Digest"]
    assert entries() == {name: digest}

    assert obc("compile", "runs", "-o", "out").code == 0
    host, _, path = name.partition("/")
    assert f"--container-image={host}#{path}@{digest}'" in (OUT / "e4/job.sh").read_text()
    assert f"--container-image={host}#{path}'" in (OUT / "e3/job.sh").read_text()
    done = obc("compile", "runs", "-o", "out", "--require-digests")
    assert done.code == 1
    assert [line for line in done.stderr.splitlines() if ": error: " in line] == [
        f"runs/e3.yaml:5:10: error: runtime.image: {name!r} is not pinned by digest; import "
        "it into a squashfs file (enroot import) and give its path, or, with enroot 4, lock "
        "it (obc lock) or write NAME:TAG@sha256:<digest>"]


def test_a_lock_entry_is_an_input_of_the_scripts_it_gives_a_digest_only(obc) -> None:
    name = "registry.example/obc/test:1"
    write_run("a", name)
    write_enroot_run(3, name)

    def inputs_lines(digest: str) -> dict[str, str]:
        LOCK.write_text(f"{HEADER}{name} sha256:{digest * 64}\n", encoding="utf-8")
        assert obc("compile", "runs", "-o", "out").code == 0
        return {job: next(line for line in (OUT / job / "job.sh").read_text().splitlines()
                          if line.startswith("# inputs")) for job in ("a", "e3")}

    before, after = inputs_lines("a"), inputs_lines("b")
    assert before["a"] != after["a"]
    assert before["e3"] == after["e3"]  # enroot 3 takes no digest: the lock is not its input


def test_lock_check_reports_a_tag_that_moved(obc, start_registry, image) -> None:
    registry = start_registry()
    name = image(registry)
    write_run("a", name)
    assert obc("lock", "runs").code == 0
    locked, before = entries()[name], LOCK.read_bytes()
    assert obc("lock", "--check", "runs").stderr == "obc: obc.lock is up to date\n"

    image(registry, variant="2")  # another image, pushed under the same tag
    moved = registry.inspect("1")["Digest"]
    assert moved != locked
    done = obc("lock", "--check", "runs")

    assert done.code == 1
    assert done.stderr.splitlines() == [
        f"obc.lock:3:1: error: {name}: moved: the registry now has {moved}, the lock {locked}",
        "obc: obc.lock is out of date; to fix, run: obc lock runs --update"]
    assert LOCK.read_bytes() == before
    # `obc lock` keeps what is locked; --update takes the new digest.
    assert obc("lock", "runs").code == 0
    assert LOCK.read_bytes() == before
    done = obc("lock", "--update", "runs")
    assert f"obc: locked {name} at {moved} (was {locked})\n" in done.stderr
    assert entries() == {name: moved}
    assert obc("lock", "--check", "runs").code == 0


def test_lock_check_reports_missing_and_stale_entries(obc, start_registry, image) -> None:
    registry = start_registry()
    old, new = image(registry, "old"), image(registry, "new")
    write_run("a", old)
    assert obc("lock", "runs", "--lock", "team.lock").code == 0
    write_run("a", new)

    done = obc("lock", "--check", "runs", "--lock", "team.lock")

    assert done.code == 1
    assert done.stderr.splitlines() == [
        f"runs/a.yaml:5:10: error: runtime.image: {new!r} is not in team.lock",
        f"team.lock:3:1: error: {old}: stale: no run file uses this image",
        "obc: team.lock is out of date; to fix, run: obc lock runs --lock team.lock --update"]
    done = obc("lock", "runs", "--lock", "team.lock")
    assert f"obc: removed {old}: no run file uses it\n" in done.stderr
    assert entries(Path("team.lock")) == {new: registry.inspect("new")["Digest"]}


def test_compile_reads_the_lock_and_never_the_registry(obc, start_registry, image) -> None:
    registry = start_registry()
    name = image(registry)
    write_run("a", name)
    assert obc("lock", "runs").code == 0
    assert obc("compile", "runs", "-o", "out").code == 0
    digest = entries()[name]

    registry.stop()

    done = obc("compile", "runs", "-o", "out", "--check", "--require-digests")
    assert done.code == 0, done.stderr
    assert f" -- {name}@{digest} " in (OUT / "a" / "job.sh").read_text()
    # Only `obc lock` uses the network: with the registry gone, it says where and why.
    done = obc("lock", "--check", "runs")
    assert done.code == 1
    assert done.stderr.splitlines()[0] == (
        f"runs/a.yaml:5:10: error: runtime.image: cannot resolve {name!r}: cannot reach "
        f"{registry.host}: [Errno 111] Connection refused")


def test_require_digests_fails_on_an_unlocked_tag_only(obc, start_registry, image) -> None:
    registry = start_registry()
    name = image(registry)
    write_run("tagged", name)
    write_run("pinned", f"{name}@{registry.inspect('1')['Digest']}")
    write_run("native", None, kind="native")

    done = obc("compile", "runs", "-o", "out", "--require-digests")

    assert done.code == 1
    assert done.stderr.splitlines() == [
        f"runs/tagged.yaml:5:10: error: runtime.image: {name!r} is neither pinned by digest "
        "nor locked in obc.lock; run obc lock, or write the image as NAME:TAG@sha256:<digest>"]
    assert not OUT.exists()
    assert obc("compile", "runs", "-o", "out").code == 0
    assert obc("lock", "runs").code == 0
    assert list(entries()) == [name]
    assert obc("compile", "runs", "-o", "out", "--require-digests").code == 0


def test_lock_file_is_the_same_bytes_on_every_run(start_registry, image) -> None:
    registry = start_registry()
    names = [image(registry, tag) for tag in ("b", "a", "c")]
    for number, name in enumerate(names):
        write_run(f"run{number}", name, kind=("docker", "podman")[number % 2])
    write_run("again", names[0])
    texts = set()
    for seed, zone, options in (("1", "UTC", ()), ("2", "Asia/Tokyo", ("--update",)),
                                ("3", "America/Lima", ("--update",))):
        env = {**os.environ, "PYTHONHASHSEED": seed, "TZ": zone, "LC_ALL": "C.UTF-8"}
        subprocess.run([sys.executable, "-m", "compiler", "lock", "runs", *options],
                       env=env, check=True, capture_output=True)
        texts.add(LOCK.read_bytes())
    (text,) = texts
    assert text.decode().splitlines()[HEADER_LINES:] == [
        f"{registry.host}/obc/test:{tag} {registry.inspect(tag)['Digest']}"
        for tag in ("a", "b", "c")]
    assert LOCK.stat().st_mode & 0o777 == 0o644


def test_lock_lives_at_the_top_of_the_git_work_tree(obc, start_registry, image,
                                                    monkeypatch) -> None:
    registry = start_registry()
    runs = Path("project", "runs")
    write_run("a", image(registry), folder=runs)
    subprocess.run(["git", "init", "-q", "project"], check=True)
    start = Path.cwd()
    monkeypatch.chdir(runs)

    assert obc("lock", ".").code == 0
    assert (start / "project" / "obc.lock").is_file()
    monkeypatch.chdir(start)
    assert obc("compile", "project/runs", "-o", "out", "--require-digests").code == 0
    assert obc("lock", "--check", "project/runs").stderr == \
        "obc: project/obc.lock is up to date\n"

    # Outside a work tree the lock is in the current directory.
    write_run("b", image(registry, "2"), folder=Path("loose"))
    assert obc("lock", "loose").code == 0
    assert list(entries()) == [f"{registry.host}/obc/test:2"]
    done = obc("lock", "loose", "project/runs")
    assert done.code == 2
    assert "the run files are in different projects" in done.stderr


def test_lock_reports_what_it_cannot_resolve_and_writes_nothing(obc, start_registry,
                                                                image) -> None:
    registry, login = start_registry(), start_registry(auth="basic")
    write_run("a", image(registry))
    write_run("b", f"{registry.host}/obc/test:absent")
    write_run("c", f"{login.host}/obc/test:1")

    done = obc("lock", "runs")

    assert done.code == 1
    assert done.stderr.splitlines() == [
        f"runs/b.yaml:5:10: error: runtime.image: cannot resolve "
        f"'{registry.host}/obc/test:absent': no such repository or tag in the registry "
        "(404 Not Found)",
        f"runs/c.yaml:5:10: error: runtime.image: cannot resolve '{login.host}/obc/test:1': "
        f"{login.host} asks for a login (Basic challenge); obc lock uses anonymous tokens "
        "only: log in and use obc lock --skopeo, or pin the digest in the run file",
        "obc: obc.lock left as it was"]
    assert not LOCK.exists()


@pytest.mark.parametrize("engine_name", ["podman", "docker"])
def test_the_job_runs_the_image_the_lock_names(request, tmp_path: Path, obc, start_registry,
                                               image, sandbox, cleanup, engine_name) -> None:
    engine: Engine = request.getfixturevalue(engine_name)
    registry = start_registry()
    name = image(registry)
    job = f"lock-{os.getpid()}-{engine_name}"
    cleanup.append((engine, f"overbrainer-{job}"))
    # docker takes a loopback registry to be insecure (plain HTTP) by itself; podman is told.
    tls = ", --tls-verify=false" if engine_name == "podman" else ""
    RUNS.mkdir()
    (RUNS / "job.yaml").write_text(f"""\
version: 1
id: {job}
runtime: {{kind: {engine_name}, image: "{name}", gpus: none, extra_args: [--network=none{tls}]}}
paths: {{run_dir: {tmp_path / "run"}, cache_dir: {tmp_path / "cache"}}}
steps: [{{name: hello, run: [record, hello]}}]
""")
    assert obc("lock", "runs").code == 0
    assert obc("compile", "runs", "-o", "out", "--require-digests").code == 0
    pinned = f"{name}@{entries()[name]}"
    try:
        run = sandbox.run(OUT / job / "job.sh",
                          env=sandbox.env(PATH="/usr/local/bin:/usr/bin:/bin", **engine.env))
        assert run.returncode == 0, run.stderr
        (record,) = trainer_records(tmp_path / "run")
        assert record.argv == ["hello"]
        digests = engine("image", "inspect", "--format", "{{json .RepoDigests}}", pinned)
        assert f"{registry.host}/obc/test@{entries()[name]}" in digests.stdout
    finally:
        engine("rmi", "--force", pinned, check=False)


def test_lock_and_compile_report_problems_of_their_inputs_and_write_nothing(obc) -> None:
    write_run("a", "team/trainer:1", kind="dokcer")
    done = obc("lock", "runs")
    assert (done.code, done.stderr.splitlines()[0]) == (1, (
        "runs/a.yaml:4:9: error: runtime.kind: 'dokcer' is not one of docker, podman, apptainer, "
        "enroot, native; did you mean 'docker'?"))
    assert not LOCK.exists()
    write_run("a", "team/trainer:1")
    LOCK.write_text("team/trainer:1 sha256:abc\n")
    done = obc("compile", "runs", "-o", "out")
    assert (done.code, done.stderr) == (1, (
        "obc.lock:1:1: error: expected 'IMAGE sha256:<64 lower-case hex digits>', one space "
        "between them, got 'team/trainer:1 sha256:abc'\n"))
    done = obc("compile", "runs", "-o", "out", "--lock", "absent.lock")
    assert (done.code, done.stderr) == (2, "obc: error: absent.lock: no such lock file\n")
    assert not OUT.exists()


# --- obc.lock is read like every other file obc is given (issue 18, F3) ----------------

SECRET = "deploy-key-line-1 do-not-print"


@pytest.fixture
def secret(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file outside the project (the test's folder) that must never be read."""
    path = tmp_path_factory.mktemp("secrets") / "deploy-key"
    path.write_text(f"{SECRET}\n")
    return path


def assert_lock_refused(done, because: str) -> None:
    said = done.stdout + done.stderr
    assert done.code == 1, done
    assert f"obc.lock:1:1: error: this lock file {because}" in said or \
        f"::error file=obc.lock,line=1,col=1,title=obc::this lock file {because}" in said, said
    assert SECRET not in said


def test_a_lock_linked_to_a_file_outside_the_project_is_not_read(obc, secret: Path) -> None:
    # The review's: the secret's first line went into the CI log as an annotation.
    write_run("a", "team/trainer:1")
    LOCK.symlink_to(secret)
    for command in (["compile", "runs", "-o", "out", "--check", "--format", "github"],
                    ["plan", "runs", "-o", "out"], ["lock", "runs", "--check"]):
        assert_lock_refused(obc(*command), "is a symbolic link to a file outside the project")
    assert not OUT.exists() and LOCK.is_symlink()


@pytest.mark.parametrize("target", ["/proc/self/environ", "/dev/zero", "/dev/stdin"])
def test_a_lock_linked_to_a_system_file_is_not_read(obc, target: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # The review's: the environment printed, a MemoryError, a hang.
    monkeypatch.setenv("OBC_TEST_CANARY", SECRET)
    write_run("a", "team/trainer:1")
    LOCK.symlink_to(target)
    with unblocked():
        done = obc("compile", "runs", "-o", "out")
    assert_lock_refused(done, "is a symbolic link to a file outside the project")


@pytest.mark.parametrize(("make", "because"), [
    (os.mkfifo, "is a named pipe (FIFO), not a regular file"),
    (lambda path: path.mkdir(), "is a folder, not a regular file"),
    (lambda path: path.write_bytes(b"#" * (1024 * 1024 + 1)),
     "is 1,048,577 bytes; a lock file holds at most 1,048,576 bytes"),
    (lambda path: path.write_bytes(b"a:1 \xff\n"), "is not UTF-8 text"),
], ids=["fifo", "folder", "over-1-mib", "not-utf-8"])
def test_a_lock_in_the_project_that_is_no_text_file_is_refused(obc, make, because: str) -> None:
    write_run("a", "team/trainer:1")
    make(LOCK)
    with unblocked():
        done = obc("compile", "runs", "-o", "out")
    assert_lock_refused(done, because)


def test_a_lock_may_link_to_a_file_in_the_project_or_an_allowed_folder(obc, secret: Path) -> None:
    write_run("a", "team/trainer@" + "sha256:" + "a" * 64)
    Path("locks").mkdir()
    (Path("locks") / "obc.lock").write_text("# empty\n")
    LOCK.symlink_to(Path("locks") / "obc.lock")
    assert obc("compile", "runs", "-o", "out").code == 0
    secret.write_text("# empty too\n")
    LOCK.unlink()
    LOCK.symlink_to(secret)
    for command in (["compile", "runs", "-o", "out"], ["lock", "runs", "--check"]):
        done = obc(*command, "--allow-dir", str(secret.parent))
        assert done.code == 0, done
