"""What a run file holds cannot change what shellcheck finds, nor can the caller's environment:
no value reads as a directive or an end token, typographic quotes are literal, and a broken
temporary folder is an error that says so."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys

import pytest

from tests.conftest import compile_text, make_sandbox, write_script

DIRECTIVE = re.compile("^#[ \t\u00a0\u200b]*shellcheck.*$", re.MULTILINE)
STEPS_RUN = """\
version: 1
id: c1
description: {description}
runtime: {{kind: native}}
steps: [{{name: s, run: [{args}]}}]
"""


def run_file(description: str = "plain", args: str = "x") -> str:
    return STEPS_RUN.format(description=description, args=args)


def directives(text: str) -> list[str]:
    return DIRECTIVE.findall(text)


@pytest.mark.parametrize("line", [
    "shellcheck disable=all", "shellcheck enable=all", " shellcheck foo=bar",
    "\\tshellcheck disable=SC2086", "shellcheck", "\\u00a0shellcheck disable=all"])
def test_no_description_line_reads_as_a_shellcheck_directive(tmp_path, line):
    text = compile_text(tmp_path, run_file(f'"first\\n{line}"'))
    assert directives(text) == directives(compile_text(tmp_path, run_file()))
    assert "\n# | " + line.replace("\\t", "\t").replace("\\u00a0", "\u00a0") in text


def test_no_argument_line_reads_as_a_shellcheck_directive(tmp_path):
    text = compile_text(tmp_path, run_file(args='x, "a\\nshellcheck disable=all"'))
    assert directives(text) == directives(compile_text(tmp_path, run_file()))


END_TOKENS = ["OBC_EOF ", " OBC_EOF", "\tOBC_EOF", "OBC_EOF x", "OBC_EOF)", "OBC_EOF #",
              "OBC_EOF;", "OBC_EOF&"]


def test_lines_like_the_end_token_are_written_and_read_intact(tmp_path):
    body = "".join(f"{line}\n" for line in END_TOKENS)
    (tmp_path / "notes.txt").write_text(body)
    description = '"' + "\\n".join(line.replace("\t", "\\t") for line in END_TOKENS) + '"'
    text = compile_text(tmp_path, run_file(description, "cat, notes.txt")
                        + "files: {notes.txt: notes.txt}\n")
    script = write_script(tmp_path, text)
    box = make_sandbox(tmp_path / "box", programs=())
    for shell in ("dash", "bash"):
        shown = box.run(script, "--help", shell=shell)  # the description, fenced with "| "
        fenced = "".join(f"| {line}".rstrip() + "\n" for line in END_TOKENS)
        assert shown.stdout.startswith(fenced), shell
        ran = box.run(script, "--run-dir", str(tmp_path / shell), shell=shell)
        assert (ran.returncode, ran.stdout) == (0, body), (shell, ran.stderr)


def test_typographic_quotes_in_values_are_literal(tmp_path):
    text = compile_text(tmp_path, run_file(args="x, ‘quoted’, ’")
                        + "env: {NOTE: “double” ‘single’}\n")
    assert "'‘quoted’'" in text


def test_shellcheck_options_in_the_environment_change_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("OBC_COMPILE_CACHE", str(tmp_path / "cache"))  # shellcheck must run
    monkeypatch.setenv("SHELLCHECK_OPTS", "--enable=all")
    compile_text(tmp_path, run_file())


def obc_process(tmp_path, *args: str, preexec=None, wrapper: tuple[str, ...] = ()):
    """Run `obc ARGS` on run.yaml in a process of its own, which writes no bytecode (a limit
    on file sizes would leave it truncated) and has no cache."""
    (tmp_path / "run.yaml").write_text(run_file())
    return subprocess.run([*wrapper, sys.executable, "-m", "compiler", *args], cwd=tmp_path,
                          capture_output=True, text=True, preexec_fn=preexec, check=False,
                          env={"PATH": "/usr/bin:/bin", "OBC_COMPILE_CACHE": "",
                               "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(tmp_path)})


def small_files() -> None:
    # What a full disk looks like to a writer: writes fail (EFBIG rather than ENOSPC).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))


def test_a_full_temporary_folder_is_an_error_not_a_traceback(tmp_path):
    done = obc_process(tmp_path, "compile", "run.yaml", "-o", "out", "--check",
                       preexec=small_files)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"obc: error: cannot write the scripts for shellcheck in "
                                  f"{tmp_path}: File too large; free some space there"), \
        done.stderr


# Without CAP_DAC_OVERRIDE, root meets the file modes a umask of 0277 gives, as any other
# user does: the folders it creates are not writable, even to itself.
AS_ANY_USER = ("setpriv", "--bounding-set=-dac_override,-dac_read_search")


def test_umask_0277_checks_and_fails_cleanly_where_it_cannot_write(tmp_path):
    def obc(*args: str) -> subprocess.CompletedProcess:
        return obc_process(tmp_path, *args, preexec=lambda: os.umask(0o277),
                           wrapper=AS_ANY_USER)

    checked = obc("compile", "run.yaml", "-o", "out", "--check")
    assert (checked.returncode, checked.stderr.splitlines()[0]) == (
        1, "out/c1/job.sh:1:1: error: missing; compile would write it"), checked.stderr
    written = obc("compile", "run.yaml", "-o", "out")
    assert written.returncode == 2
    assert written.stderr.startswith(
        "obc: error: out/c1/job.sh: cannot write: Permission denied"), written.stderr
