"""A stand-in for `apptainer` (and, installed under that name, SingularityCE's `singularity`)
that records what a job asks of it: neither can be installed on the test machine.

`exec` checks its options as apptainer would read them, works out the environment the
container would get (apptainer's rules: --cleanenv keeps only TERM and the proxies and sets
LANG=C; APPTAINERENV_<NAME> and SINGULARITYENV_<NAME> set NAME, and apptainer given both
with different values warns with both values; HOME comes from --home, PATH is apptainer's
default), records argv and that environment, then runs the command on this machine: in the
host folder bound at --pwd, with exactly that environment (plus PATH and the test's log
location). Like apptainer, it passes the signals it gets on to the command. Test plumbing
lives in OBC_STUB_* variables.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

PROGRAM = Path(sys.argv[0]).name
STATE = Path(os.environ["OBC_STUB_STATE"])
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Apptainer reads both prefixes, the first winning; SingularityCE only its own.
PREFIXES = (["APPTAINERENV_", "SINGULARITYENV_"] if PROGRAM == "apptainer"
            else ["SINGULARITYENV_"])
SETTINGS = ("APPTAINER_", "SINGULARITY_")
ALWAYS_PASSED = {"TERM", "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy",
                 "NO_PROXY", "all_proxy", "ALL_PROXY", "ftp_proxy", "FTP_PROXY"}
NEVER_PASSED = {"HOME", "PATH", "LD_LIBRARY_PATH"}
SPECIAL_PATHS = {"PATH": "SING_USER_DEFINED_PATH", "PREPEND_PATH": "SING_USER_DEFINED_PREPEND_PATH",
                 "APPEND_PATH": "SING_USER_DEFINED_APPEND_PATH"}
FLAGS = {"--cleanenv": "cleanenv", "-e": "cleanenv", "--contain": "contain", "-c": "contain",
         "--containall": "containall", "-C": "containall", "--no-eval": "no-eval",
         "--nv": "nv"}
WITH_VALUE = {"--bind": "bind", "-B": "bind", "--home": "home", "-H": "home", "--pwd": "pwd",
              "--cwd": "pwd"}


def fail(message: str) -> int:
    print(f"FATAL:   {message}", file=sys.stderr)
    return 255


def parse_exec(args: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """The options, then the image and the command. Unknown options are refused, as
    apptainer refuses them ("unknown flag")."""
    options: dict[str, list[str]] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        name, equals, value = args[i].partition("=")
        if name in FLAGS and not equals:
            options.setdefault(FLAGS[name], []).append("")
        elif name in WITH_VALUE:
            if not equals:
                i += 1
                value = args[i]
            options.setdefault(WITH_VALUE[name], []).append(value)
        else:
            raise SystemExit(fail(f"unknown flag: {name}"))
        i += 1
    return options, args[i:]


def binds(options: dict[str, list[str]]) -> list[tuple[str, str, str]]:
    """--bind SRC[:DST[:OPTS]], several separated by ','; the home too."""
    found = []
    for spec in options.get("bind", []):
        for entry in spec.split(","):
            source, _, rest = entry.partition(":")
            target, _, flags = rest.partition(":")
            found.append((source, target or source, flags))
    for spec in options.get("home", []):
        source, _, target = spec.partition(":")
        found.append((source, target or source, ""))
    return found


def check_image(image: str) -> str | None:
    if image.startswith("docker://"):
        name = image.removeprefix("docker://")
        if "@" in name and ":" in name.split("@")[0].rsplit("/", 1)[-1]:
            return f"unable to parse image name {image}: tag and digest"
        return None
    return None if Path(image).is_file() else f"could not open image {image}: no such file"


def container_env(options: dict[str, list[str]]) -> tuple[dict[str, str], list[str]]:
    """The environment apptainer would give the container, and the warnings it prints."""
    clean = "cleanenv" in options or "containall" in options
    env, overrides, warnings = ({"LANG": "C"} if clean else {}), {}, []
    for prefix in PREFIXES:
        for key, value in os.environ.items():
            name = key.removeprefix(prefix)
            if not key.startswith(prefix) or not name:
                continue
            name = SPECIAL_PATHS.get(name, name)
            if name == "HOME":
                warnings.append(f"WARNING: Overriding HOME environment variable with {key} "
                                "is not permitted")
            elif name in overrides and overrides[name] != value:
                warnings.append(f"WARNING: Skipping environment variable [{key}={value}], "
                                f"{name} is already overridden with different value "
                                f"[{overrides[name]}]")
            else:
                overrides.setdefault(name, value)
    for key, value in os.environ.items():
        if key.startswith(SETTINGS) or key.startswith(tuple(PREFIXES)):
            continue
        if key in ALWAYS_PASSED or not (clean or key in NEVER_PASSED):
            env[key] = value
    env.update(overrides)
    homes = options.get("home", [])
    env["HOME"] = homes[-1].partition(":")[2] or homes[-1] if homes else os.environ["HOME"]
    env["PATH"] = env.pop("SING_USER_DEFINED_PATH", DEFAULT_PATH)
    return env, warnings


def host_dir(mounts: list[tuple[str, str, str]], target: str) -> str:
    """The host folder that holds `target` in the container, through the deepest bind."""
    for source, inside, _ in sorted(mounts, key=lambda m: -len(m[1])):
        if target == inside or target.startswith(inside.rstrip("/") + "/"):
            return source + target[len(inside):]
    raise SystemExit(fail(f"{PROGRAM} stub: nothing bound at {target}"))


def run(args: list[str]) -> int:
    options, rest = parse_exec(args)
    if not rest:
        return fail("exec needs an image")
    image, command = rest[0], rest[1:]
    problem = check_image(image)
    mounts = binds(options)
    missing = [source for source, _, _ in mounts if not Path(source).exists()]
    if problem or missing:
        return fail(problem or f"bind source {missing[0]} does not exist")
    env, warnings = container_env(options)
    for warning in warnings:
        print(warning, file=sys.stderr)
    with open(STATE / "log.jsonl", "a", encoding="utf-8") as log:
        log.write(json.dumps({"apptainer": PROGRAM, "argv": [PROGRAM, "exec", *args],
                              "options": options, "image": image, "binds": mounts,
                              "container_env": env}) + "\n")
    cwd = host_dir(mounts, options["pwd"][-1]) if "pwd" in options else os.getcwd()
    child = subprocess.Popen(command, cwd=cwd, env={
        **env, "PATH": os.environ["PATH"], "OBC_STUB_STATE": str(STATE)})
    # apptainer passes every signal it gets on to the program in the container.
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1,
                   signal.SIGUSR2):
        signal.signal(number, lambda received, _frame: child.send_signal(received))
    status = child.wait()
    return status if status >= 0 else 128 - status


def main(args: list[str]) -> int:
    if args[:1] == ["exec"]:
        return run(args[1:])
    return fail(f"{PROGRAM} stub: only exec is known")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
