"""A stand-in for `docker` and `podman` that records what a job asks of it.

`run` records its argv and the environment the container would get, then runs the
container's command on this machine: in the host folder mounted at the `-w` target, with
exactly that environment (plus PATH, and the test's log location). `container inspect`,
`stop` (with its timeout) and `rm -f` act on a small state folder, so a test can leave a
container behind and see a signal stop the "container". Test plumbing lives in OBC_STUB_* variables.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ENGINE = Path(sys.argv[0]).name
STATE = Path(os.environ["OBC_STUB_STATE"])
# Options that take a value as the next word (the subset obc's scripts use, and a few more).
WITH_VALUE = {"--name", "--gpus", "--ulimit", "--device", "--shm-size", "-v", "--volume", "-w",
              "--workdir", "-e", "--env", "--security-opt", "--network", "--label", "--user"}


def record(entry: dict) -> None:
    with open(STATE / "log.jsonl", "a", encoding="utf-8") as log:
        log.write(json.dumps({"engine": ENGINE, **entry}) + "\n")


def parse_run(args: list[str]) -> tuple[dict[str, list[str]], str, list[str]]:
    options: dict[str, list[str]] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        word = args[i]
        if word == "--":  # the end of the options, as the real engines read it
            i += 1
            break
        if "=" in word and word.startswith("--"):
            name, value = word.split("=", 1)
        elif word in WITH_VALUE:
            name, value = word, args[i + 1]
            i += 1
        else:
            name, value = word, ""
        options.setdefault(name, []).append(value)
        i += 1
    return options, args[i], args[i + 1:]


def container_env(options: dict[str, list[str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in options.get("-e", []) + options.get("--env", []):
        name, sep, value = item.partition("=")
        if sep:
            env[name] = value
        elif name in os.environ:  # `-e NAME` passes the caller's value; unset: left out
            env[name] = os.environ[name]
    return env


def host_dir(options: dict[str, list[str]], target: str) -> str:
    for volume in options.get("-v", []) + options.get("--volume", []):
        source, _, rest = volume.partition(":")
        if rest.split(":")[0] == target:
            return source
    raise SystemExit(f"{ENGINE} stub: no volume mounted at {target}")


def run(args: list[str]) -> int:
    options, image, command = parse_run(args)
    name = options["--name"][0]
    state = STATE / f"container-{name}"
    if state.exists():
        print(f"Error: the container name {name!r} is already in use", file=sys.stderr)
        return 125
    env = container_env(options)
    record({"argv": [ENGINE, "run", *args], "container_env": env, "image": image})
    cwd = host_dir(options, options["-w"][0])
    child = subprocess.Popen(command, cwd=cwd, env={
        **env, "PATH": os.environ["PATH"], "OBC_STUB_STATE": str(STATE)})
    state.write_text(str(child.pid))
    # Like the real client: a TERM or INT to the client goes on to the container.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, _frame: child.send_signal(number))
    status = child.wait()
    state.unlink(missing_ok=True)
    return status if status >= 0 else 128 - status


def stop(args: list[str]) -> int:
    """`stop [-t SECONDS] NAME`: TERM, then KILL once the timeout has passed."""
    record({"argv": [ENGINE, "stop", *args]})
    name, timeout = args[-1], float(args[args.index("-t") + 1]) if "-t" in args else 10
    state = STATE / f"container-{name}"
    if not state.exists():
        return 1
    pid = int(state.read_text())
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while state.exists():
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    return 0


def remove(name: str) -> int:
    """`rm -f NAME`: a running container is killed."""
    record({"argv": [ENGINE, "rm", "-f", name]})
    state = STATE / f"container-{name}"
    if state.exists():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(state.read_text()), signal.SIGKILL)
        state.unlink(missing_ok=True)
    return 0


def inspect(name: str, running: bool) -> int:
    """`container inspect [--format {{.State.Running}}] NAME`: whether the "container" is
    there, and whether its process runs."""
    state = STATE / f"container-{name}"
    if not state.exists():
        return 1
    if running:
        try:
            os.kill(int(state.read_text()), 0)
            print("true")
        except ProcessLookupError:
            print("false")
    return 0


def main(args: list[str]) -> int:
    if args[:1] == ["run"]:
        return run(args[1:])
    if args[:2] == ["container", "inspect"]:
        record({"argv": [ENGINE, *args]})
        return inspect(args[-1], "--format" in args)
    if args[:1] == ["stop"]:
        return stop(args[1:])
    if args[:2] == ["rm", "-f"]:
        return remove(args[2])
    record({"argv": [ENGINE, *args]})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
