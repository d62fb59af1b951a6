"""Stage 4, render: a `Job` → the text of its job.sh, from the Jinja templates.

Quoting is not the templates' job to remember: every `{{ ... }}` goes through `_finalize`,
which shell-quotes strings and refuses anything else but integers and `ShellText`, the
marker that only this module's filters and shell.py hand out.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from pathlib import Path
from types import GeneratorType
from typing import Any

import jinja2
import jinja2.bccache

from ..core import shell
from ..core.diagnostics import ObcError
from ..core.resources import data_dir
from ..core.shell import ShellText
from ..model import slurm
from ..model.job import Job, lookup
from ..model.records import GAVE_UP, GAVE_UP_EXIT_CODE, NOT_STARTED, STATE_NAMES
from ..model.runtimes import (
    CONTAINER_CACHE_DIR,
    CONTAINER_HOME,
    CONTAINER_RUN_DIR,
    Apptainer,
    Container,
    Enroot,
    Native,
)
from ..validate.rules.sbatch_options import sbatch_spellings
from .library import MAIN_CALL, library_line, library_parts, part_text, settings
from .meaning import record_lines
from .stages import STAGE_JOB_IDS, Submit
from .stages import USAGE as SUBMIT_USAGE
from .stages import help_lines as submit_help_lines
from .summary import GENERATED_PREFIX, help_lines
from .sweep import USAGE as SWEEP_USAGE
from .sweep import Sweep
from .sweep import help_lines as sweep_help_lines

# The template of each runtime; each extends job.sh.j2.
_TEMPLATES = {Container: "container.sh.j2", Native: "native.sh.j2",
              Apptainer: "apptainer.sh.j2", Enroot: "enroot.sh.j2"}


class UnquotedValueError(TypeError):
    """A template tried to print a value that has no safe shell form."""


class Printer:
    """How values reach a script's text: quoted words, integers, comments, here-documents.

    This one writes them as they are. A shape (shape.py) is the same templates written by a
    printer of placeholders, so whatever the templates become, shapes follow them.
    """

    def word(self, value: str) -> ShellText:
        return shell.quote(value)

    def number(self, value: int) -> str:
        return str(value)

    def comment(self, lines: Iterable[str]) -> ShellText:
        return _comment(lines)

    def heredoc(self, body: str) -> ShellText:
        return _heredoc(body)

    def sbatch(self, job_slurm: Any) -> ShellText:
        return slurm.sbatch_lines(job_slurm)


# The render variable that holds the printer; a template never names it.
_PRINTER = "obc_printer"
_REAL = Printer()


class _Twin(ShellText):
    """What two printers wrote of one value in a render that writes two texts at once
    (render_twice): the real printer's text, and the other's as `other`. Jinja's str() of
    an output keeps it whole."""

    other: str

    def __str__(self) -> str:
        return self


class _Twins:
    """The printer of a render that writes two texts at once: the real one and `other`."""

    def __init__(self, other: Printer) -> None:
        self.other = other


# One way to write a value: (printer, value) → its text.
Write = Callable[[Printer, Any], str]


def _write(context: jinja2.runtime.Context, write: Write, value: Any) -> ShellText:
    """`value` written by the render's printer (see _written)."""
    return _written(context.get(_PRINTER) or _REAL, write, value)


def _written(printer: Printer | _Twins, write: Write, value: Any) -> ShellText:
    """`value` written by `printer`; by both of a render of two texts, each writing the text
    its own printer made of `value` (a here-document's body is the comment each wrote), in
    the order of the template, as a render of its own would."""
    if not isinstance(printer, _Twins):
        return ShellText(write(printer, value))
    if isinstance(value, GeneratorType):
        value = list(value)  # lines made once, for both
    twin = _Twin(write(_REAL, str.__str__(value) if isinstance(value, _Twin) else value))
    twin.other = write(printer.other, value.other if isinstance(value, _Twin) else value)
    return twin


@jinja2.pass_context
def _finalize(context: jinja2.runtime.Context, value: Any) -> str:
    if isinstance(value, ShellText):
        return value
    if isinstance(value, str):
        # As a plain str: a markupsafe.Markup would HTML-escape the quotes that quote() adds.
        return _write(context, _word, str.__str__(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return _write(context, _number, value)
    raise UnquotedValueError(
        f"template printed {type(value).__name__} {value!r}: only strings (quoted on the way "
        "out), integers and ShellText from obc's filters can reach a script")


def _word(printer: Printer, value: str) -> str:
    return printer.word(value)


def _number(printer: Printer, value: int) -> str:
    return printer.number(value)


def _words(printer: Printer, words: list[str]) -> str:
    return shell.join_words(words, printer.word)


def _path(printer: Printer, path: str) -> str:
    return shell.shell_path(path, printer.word)


def _run_dir(printer: Printer, job: Job) -> str:
    """The job's run dir as its script writes it (Job.run_dir_base)."""
    if job.run_dir_base is None:
        return shell.shell_path(job.run_dir, printer.word)
    return shell.shell_path(job.run_dir_base, printer.word) + '/"$OBC_JOB"'


def _sourced_path(printer: Printer, path: str) -> str:
    return shell.sourced_path(path, printer.word)


def _comment_lines(printer: Printer, lines: Iterable[str]) -> str:
    return printer.comment(lines)


def _heredoc_body(printer: Printer, body: str) -> str:
    return printer.heredoc(body)


def _sbatch(printer: Printer, job_slurm: Any) -> str:
    return printer.sbatch(job_slurm)


def _filter(write: Write) -> Callable[[jinja2.runtime.Context, Any], ShellText]:
    """The template filter that writes its value with `write` (see _write)."""
    return jinja2.pass_context(lambda context, value: _write(context, write, value))


def _comment(lines: Iterable[str]) -> ShellText:
    """Lines as shell comments: `# text`, or a bare `#` for a blank line. A line with a
    newline in it (a quoted argument can hold one) becomes several comment lines."""
    split = [part for line in lines for part in line.split("\n")]
    return ShellText("\n".join(_comment_line(line) for line in split))


# shellcheck reads a comment as a directive when `shellcheck` follows the `#` and blanks
# (Parser.hs, `readAnnotationPrefix`); `# shellcheck disable=all` in a description would
# switch the check off for the whole script.
_DIRECTIVE_TEXT = re.compile("[ \t\xa0\u200b]*shellcheck")


def _comment_line(line: str) -> str:
    if not line:
        return "#"
    return f"# | {line}" if _DIRECTIVE_TEXT.match(line) else f"# {line}"


def _heredoc(body: str) -> ShellText:
    """`body` as a quoted here-document: `<<'DELIM'`, the lines, `DELIM` (nothing expands)."""
    delimiter = shell.heredoc_delimiter(body)
    if delimiter is None:
        raise ObcError("a file or description has lines that start like every here-document "
                       "delimiter obc can choose, each followed by a non-ASCII character; "
                       "dash would corrupt it, so it cannot be embedded")
    text = body if body.endswith("\n") else body + "\n"
    return ShellText(f"<<'{delimiter}'\n{text}{delimiter}")


def _expansion(name: str, operator: str = "") -> ShellText:
    """`"${NAME<operator>}"`: a double-quoted parameter expansion of a validated name."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise UnquotedValueError(f"{name!r} is not a shell variable name")
    return ShellText(f'"${{{name}{operator}}}"')


def _value_if_set(name: str) -> ShellText:
    """`${NAME+"$NAME"}`: the variable's value as one word when it is set, else no word."""
    inner = _expansion(name)
    return ShellText(f"${{{name}+{inner}}}")


class _TemplateCache(jinja2.FileSystemBytecodeCache):
    """Jinja's compiled templates, kept in obc's cache (by Jinja's own key and a checksum of
    the template): compiling them is most of a first render. One that cannot be stored or
    read back is compiled again."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, EOFError, ValueError, TypeError):
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            os.makedirs(self.directory, exist_ok=True)
            super().dump_bytecode(bucket)


def cache_templates(root: Path | None) -> None:
    """Keep compiled templates in the folder `root/templates`; None keeps them in memory."""
    _environment().bytecode_cache = None if root is None else _TemplateCache(
        str(root / "templates"))


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(data_dir("templates")),
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        keep_trailing_newline=True,
        # Read each template once per process, however many jobs a batch renders.
        auto_reload=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # Jinja's HTML-safety marker means nothing in a shell script.
    del env.filters["safe"]
    env.filters.update(
        words=_filter(_words),
        path=_filter(_path),
        run_dir=_filter(_run_dir),
        path_variables=shell.path_variables,
        sourced_path=_filter(_sourced_path),
        comment=_filter(_comment_lines),
        heredoc=_filter(_heredoc_body),
        expansion=_expansion,
        value_if_set=_value_if_set,
        sbatch=_filter(_sbatch),
    )
    env.globals.update(
        plain_chars=ShellText(shell.PLAIN_CHARS),
        reserved_words=ShellText(" | ".join(shell.quote(w) for w in sorted(shell.RESERVED_WORDS))),
        run_dir_in_container=CONTAINER_RUN_DIR,
        cache_dir_in_container=CONTAINER_CACHE_DIR,
        home_in_container=CONTAINER_HOME,
        lookup=lookup,
        library=library_part,
        # health: the all-reduce every node runs, written into the run dir by obc_files.
        health_program=(data_dir("templates") / "health.py").read_text(encoding="utf-8"),
        # sbatch's --array as a case pattern: -a, its abbreviations, with a value or not.
        sbatch_array_patterns=ShellText(" | ".join(
            ["-a", "-a?*", *(f"--{word}{value}" for word in sbatch_spellings("array")
                             for value in ("", "=*"))])),
    )
    return env


def render_job(job: Job, printer: Printer = _REAL) -> str:
    """Return the job.sh of `job`, its values written by `printer`."""
    return "".join(_job_pieces(job, printer))


def render_twice(job: Job, other: Printer) -> tuple[str, str]:
    """Return the job.sh of `job`, and the same written by `other` (its shape), in one
    render: the templates are gone through once, each value written by both printers."""
    pieces = list(_job_pieces(job, _Twins(other)))
    return "".join(pieces), "".join([getattr(piece, "other", piece) for piece in pieces])


def _job_pieces(job: Job, printer: Printer | _Twins) -> Iterator[str]:
    """The pieces of the job.sh of `job` in order, its values written by `printer`."""
    template = _environment().get_template(_TEMPLATES[type(job.runtime)])
    groups = settings(job)
    off = [name for group in groups if all(value == "" for _, value in group)
           for name, _ in group]
    yield from template.generate(
        job=job, generated_line=f"{GENERATED_PREFIX}{job.source_file}. DO NOT EDIT.",
        library_line=library_line(job), help_lines=_when_written(help_lines, job),
        # The texts of the library's parts, not their names: no call from the template.
        parts=[library_part(name) for name in library_parts(job)],
        main_call=ShellText(MAIN_CALL),
        settings=[[(ShellText(name), value) for name, value in group] for group in groups
                  if any(value != "" for _, value in group)],
        # The switches of the features the job has not, on one line: `OBC_RETRY_MAX='' …`.
        settings_off=ShellText(" ".join(f"{name}=''" for name in off)),
        **{_PRINTER: printer})
    # The job's meaning, last: `obc plan` reads it back from the script on disk.
    yield from ("\n", _written(printer, _comment_lines, _when_written(record_lines, job)), "\n")


def _when_written(lines: Callable[[Job], list[str]], job: Job) -> Iterator[str]:
    """`lines(job)`, made only if the printer writes them: a shape's printer writes the
    summary and the plan record as one placeholder line, and they cost a tenth of a render."""
    yield from lines(job)


def render_sweep(sweep: Sweep, printer: Printer = _REAL) -> str:
    """Return the sweep.sh of `sweep`, its values written by `printer`."""
    lines = sweep_help_lines(sweep)
    header = [f"{GENERATED_PREFIX}{sweep.source_file}. DO NOT EDIT.", "", *lines]
    text = _environment().get_template("sweep.sh.j2").render(
        sweep=sweep, header_lines=header, help_lines=lines, usage=SWEEP_USAGE,
        state_names=STATE_NAMES, gave_up=GAVE_UP, gave_up_exit_code=GAVE_UP_EXIT_CODE,
        not_started=NOT_STARTED, **{_PRINTER: printer})
    return f"{text}\n{printer.comment(record_lines(sweep))}\n"


@cache  # the library is most of every script: one copy of each part a process
def library_part(name: str) -> ShellText:
    """The part `name` of obc's runtime library, templates/lib/NAME.sh, as written: plain
    shell that no template renders, so it is the same bytes in every script that uses it.
    Its last newline is the including template's."""
    return ShellText(part_text(name).removesuffix("\n"))


def render_submit(submit: Submit, printer: Printer = _REAL) -> str:
    """Return the submit.sh of a job's stages, its values written by `printer`."""
    lines = submit_help_lines(submit)
    header = [f"{GENERATED_PREFIX}{submit.source_file}. DO NOT EDIT.", "", *lines]
    text = _environment().get_template("submit.sh.j2").render(
        submit=submit, header_lines=header, help_lines=lines, usage=SUBMIT_USAGE,
        stage_job_ids=ShellText(STAGE_JOB_IDS), **{_PRINTER: printer})
    # What it was made of, last: `obc verify` renders it again from this.
    return f"{text}\n{printer.comment(record_lines(submit))}\n"
