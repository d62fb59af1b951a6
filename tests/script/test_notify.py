"""notify (docs/notify.md), run by real shells: a real job's events reach a loopback HTTP
server, a URL that hangs or a command that fails never holds the job nor changes its exit
code, and the JSON is JSON whatever the failed step's log holds."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from compiler.model.notify import NOTIFY_SECONDS
from tests.conftest import SHELLS, compile_text, write_script
from tests.support.processes import alive

# The longest a notification may hold the job, with room for a slow, shared machine: a limit,
# not a measurement.
BOUND = NOTIFY_SECONDS + 1 + 15
# A step's output no JSON writer may take as it is: a quote, a backslash, a tab, control
# characters, bytes that are no UTF-8 (a lone continuation, an overlong form, a surrogate),
# then good UTF-8.
HOSTILE = r'a\"b\\c\tz\001\033[31m\377\300\200\355\240\200 ok é €'


def job(events: str, target: str) -> str:
    return f"""\
version: 1
id: nt
runtime: {{kind: native}}
steps:
  - {{name: prepare, run: [echo, ready]}}
  - {{name: train, run: [sh, -c, 'printf "{HOSTILE}\\n"; echo "line 2" >&2; exit 3']}}
notify:
  on: [{events}]
  {target}
"""


class Received(BaseHTTPRequestHandler):
    """Answers every POST with 200, keeping its path and JSON body on the server."""

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.posts.append((self.path, self.headers["Content-Type"], json.loads(body)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    """An HTTP server on a free port of 127.0.0.1, in a thread."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Received)
    httpd.posts = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port of 127.0.0.1 that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    listener.close()


def run(script: Path, home: Path, *args: str, shell: str = "dash", trace: bool = False,
        **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the job in `shell` (traced: `sh -x`), its run dir in `home`; with how long it took."""
    program, *options = SHELLS[shell]
    started = time.monotonic()
    done = subprocess.run(
        [shutil.which(program) or program, *options, *(["-x"] if trace else []), str(script),
         "--run-dir", str(home / "run"), *args],
        env={"PATH": env.pop("PATH", os.environ["PATH"]), "HOME": str(home), "LANG": "C.UTF-8",
             **env},
        capture_output=True, text=True, errors="replace", stdin=subprocess.DEVNULL, timeout=120,
        check=False)
    return done, time.monotonic() - started


def test_a_real_job_posts_its_events_to_the_url_in_its_secret(tmp_path, server):
    # The token is a path part, as in Slack's webhooks: it must be in no log, nor in `sh -x`.
    token = "T0K3N-" + "x9" * 12
    url = f"http://127.0.0.1:{server.server_port}/hooks/{token}"
    script = write_script(tmp_path, compile_text(tmp_path, job(
        "started, step_failed, gave_up, done", "url: {secret: HOOK_URL}")))
    # A secret's value never exists at compile time: preflight requires it where the job runs.
    unset, _ = run(script, tmp_path)
    assert unset.returncode == 3
    assert "obc: preflight: secret HOOK_URL is not set or empty" in unset.stderr.splitlines()
    assert not server.posts
    done, _ = run(script, tmp_path, trace=True, HOOK_URL=url)
    assert done.returncode == 3, done.stderr
    assert token not in done.stderr + done.stdout
    logs = tmp_path / "run" / ".obc" / "logs"
    assert all(token not in path.read_text(errors="replace") for path in logs.iterdir())
    events = [body["event"] for _, _, body in server.posts]
    assert events == ["started", "step_failed", "gave_up"]
    path, kind, failed = server.posts[1]
    assert (path, kind) == (f"/hooks/{token}", "application/json")
    assert {key: failed[key] for key in ("job", "step", "attempt", "exit_code", "slurm_job_id",
                                         "run_dir")} == {
        "job": "nt", "step": "train", "attempt": 1, "exit_code": 3, "slurm_job_id": None,
        "run_dir": str(tmp_path / "run")}
    assert failed["log"] == str(logs / "train.1.log")
    assert failed["log_tail"].endswith("ok é €\nline 2") or \
        failed["log_tail"].startswith("line 2\n")
    assert failed["text"] == "obc: nt: step_failed, step train, exit code 3 (attempt 1)"
    assert server.posts[0][2]["log_tail"] is None  # started: no step yet
    # A second run of the first step alone: started, then done with exit code 0.
    server.posts.clear()
    again, _ = run(script, tmp_path, "--only", "prepare", HOOK_URL=url)
    assert again.returncode == 0, again.stderr
    assert [(body["event"], body["exit_code"], body["attempt"]) for _, _, body in server.posts] \
        == [("started", None, 2), ("done", 0, 2)]


def test_a_url_that_never_answers_does_not_hold_the_job(tmp_path, silent_server):
    script = write_script(tmp_path, compile_text(tmp_path, job(
        "done", f"url: 'http://127.0.0.1:{silent_server}/hook'")))
    done, took = run(script, tmp_path, "--only", "prepare")
    assert done.returncode == 0, done.stderr
    assert took < BOUND
    assert "obc: notify done: failed (exit code 28)" in done.stderr.splitlines()


def test_a_notify_command_that_fails_never_changes_the_exit_code(tmp_path):
    failing = write_script(tmp_path, compile_text(tmp_path, job(
        "step_failed, gave_up, done", "command: [sh, -c, 'cat >/dev/null; exit 7']")))
    done, _ = run(failing, tmp_path)
    assert done.returncode == 3
    assert [line for line in done.stderr.splitlines() if "notify" in line] == [
        "obc: notify step_failed: failed (exit code 7)",
        "obc: notify gave_up: failed (exit code 7)"]
    ok, _ = run(failing, tmp_path, "--only", "prepare")
    assert ok.returncode == 0
    assert "obc: notify done: failed (exit code 7)" in ok.stderr.splitlines()


@pytest.mark.parametrize("shell", SHELLS)
def test_the_json_is_json_whatever_the_log_holds_and_a_hanging_command_is_stopped(tmp_path,
                                                                                    shell):
    # And a command that hangs is stopped, with what it started, at the deadline.
    home = tmp_path / 'a "quoted" \\ home é'
    home.mkdir()
    script = write_script(tmp_path, compile_text(tmp_path, job(
        "started, step_failed, gave_up",
        "command: [sh, -c, 'cat > \"$OBC_RUN_DIR/../$OBC_EVENT.json\"; "
        "env | grep ^OBC_ | sort > \"$OBC_RUN_DIR/../$OBC_EVENT.env\"; "
        "[ $OBC_EVENT != gave_up ] || { sleep 300 & echo $! > \"$OBC_RUN_DIR/../sleep.pid\"; "
        "wait; }']")))
    done, took = run(script, home, shell=shell)
    assert done.returncode == 3, done.stderr
    assert took < BOUND
    assert [line for line in done.stderr.splitlines() if "notify" in line] == [
        f"obc: notify gave_up: no answer within {NOTIFY_SECONDS + 1} s, given up"]
    assert not alive(int((home / "sleep.pid").read_text()))
    bodies = {event: json.loads((home / f"{event}.json").read_bytes())
              for event in ("started", "step_failed", "gave_up")}
    failed = bodies["step_failed"]
    assert failed["run_dir"] == str(home / "run")
    tail = failed["log_tail"]
    assert 'a"b\\c\tz\x01\x1b[31m' in tail
    # Each byte that is no UTF-8 is U+FFFD; good UTF-8 is kept.
    assert "\ufffd" * 6 + " ok é €" in tail
    assert "line 2" in tail
    assert bodies["gave_up"]["exit_code"] == 3
    facts = (home / "step_failed.env").read_text(errors="replace").splitlines()
    assert "OBC_EVENT=step_failed" in facts and "OBC_EXIT_CODE=3" in facts
    assert "OBC_STEP=train" in facts and "OBC_ATTEMPT=1" in facts


def test_without_curl_the_job_says_so_once_and_goes_on(tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    for folder in ("/usr/bin", "/bin"):
        for program in Path(folder).iterdir():
            if program.name != "curl" and not (tools / program.name).exists():
                (tools / program.name).symlink_to(program)
    script = write_script(tmp_path, compile_text(tmp_path, job(
        "started, done", "url: 'http://127.0.0.1:9/hook'")))
    done, _ = run(script, tmp_path, "--only", "prepare", PATH=str(tools))
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if "notify" in line] == [
        "obc: notify: curl not found on PATH: no event is POSTed"]
