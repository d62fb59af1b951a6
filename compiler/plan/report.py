"""How `obc plan` is shown: text for a terminal, JSON for policy tools, markdown for a pull
request comment (`github`). Each takes the plans of diff.py and writes to a stream.

Text and markdown list one line per script that changes, the totals, then the bill of
materials of each script compile would add or change; JSON holds the bill of every script
compile would write, changed or not, so that a policy sees the whole tree.
"""

from __future__ import annotations

import dataclasses
import html
import json
import posixpath
import re
from collections.abc import Callable
from typing import Any, TextIO

from ..core import shell
from ..core.text import visible
from ..model.job import SweepRun
from ..model.launcher import Launcher
from ..render.meaning import DIGEST_KEY, Digest
from ..render.summary import labelled_lines, notify_lines, retry_line
from .bill import Bill, SlurmBill, SweepBill, bill_of
from .diff import SYMBOLS, ScriptPlan, library_lines, totals

PLAN_FORMAT = 2


def summary_line(plans: list[ScriptPlan]) -> str:
    """Return the totals: `1 to add, 2 to change, 0 to remove, 4 unchanged` (and how many
    files are not obc's, if any are), or no changes."""
    counts = totals(plans)
    if not counts["add"] + counts["change"] + counts["remove"] + counts["foreign"]:
        return f"no changes ({counts['unchanged']} script(s) as compile would write them)"
    foreign = f", {counts['foreign']} not obc's" if counts["foreign"] else ""
    return (f"{counts['add']} to add, {counts['change']} to change, {counts['remove']} to "
            f"remove{foreign}, {counts['unchanged']} unchanged")


def _changing(plans: list[ScriptPlan]) -> list[ScriptPlan]:
    return [plan for plan in plans if plan.action in SYMBOLS]


def bill_lines(bill: Bill | SweepBill) -> list[str]:
    """Return the bill of materials as labelled lines, as a script's header shows its summary."""
    rows = _sweep_rows(bill) if isinstance(bill, SweepBill) else _job_rows(bill)
    return [visible(line) for line in labelled_lines(
        (label, values or ["none"]) for label, values in rows)]


def _job_rows(bill: Bill) -> list[tuple[str, list[str]]]:
    native = [("venv", [f"{bill.venv}: its bin/ comes first on PATH: a program named without "
                        "a path runs from it" if bill.venv else "none: programs from PATH"]),
              ("env file", [f"{bill.env_file}: sourced as shell code before the steps"
                            if bill.env_file else "none"])] if bill.runtime == "native" else []
    return [
        ("job", [bill.job]),
        ("run file", [bill.run_file]),
        *(_sweep_run(bill.sweep) if bill.sweep else []),
        ("runtime", [bill.runtime]),
        *native,
        ("images", [f"{i.reference}  ({i.registry}"
                    + ("" if i.digest else "; not pinned by digest") + ")" for i in bill.images]),
        ("privileges", [f"{p.option}: {p.meaning}" if p.option else p.meaning
                        for p in bill.privileges]),
        ("gpus", [f"{bill.gpus} (runtime.gpus: what the steps see)"]),
        ("gpu-hours", [bill.compute.text()]),
        *([("sbatch", _sbatch(bill.slurm, bill.launcher))] if bill.slurm else []),
        *([("stages", _stages(bill))] if bill.stages else []),
        ("mounts", [f"{m.source} → {m.target} ({m.mode})" for m in bill.mounts]),
        ("writable", [*bill.writable, *(["the run dir may be in a folder the team shares "
                                         "(paths.shared)"] if bill.shared else [])]),
        ("env", [f"{name}={shell.quote(value)}" for name, value in bill.env]),
        ("secrets", [", ".join(name + ("" if required else " (optional)")
                               for name, required in bill.secrets)] if bill.secrets else []),
        ("egress", [f"{e.host}: {e.purpose}" + (f" (off with {e.off_switch})"
                                                if e.off_switch else "") for e in bill.egress]),
        ("commands", [f"{n}. {c.step}" + (f" ({c.where})" if c.where else "") + f": {c.command}"
                      for n, c in enumerate(bill.commands, 1)]),
        ("files", [f"{f.path}  (from {f.origin}; {f.bytes} bytes, sha256 {f.sha256})"
                   + ("; obc adds " + ", ".join(f"{key}: {value}" for key, value in f.obc_adds)
                      if f.obc_adds else "") for f in bill.files]),
        ("checkpoints", _checkpoints(bill)),
        ("stop", _stop(bill)),
        ("retry", [retry_line(bill.retry)] if bill.retry else []),
        ("health", list(bill.health)),
        ("notify", notify_lines(bill.notify) if bill.notify else []),
    ]


def _stages(bill: Bill) -> list[str]:
    """The job's stages on Slurm, each with its steps, GPUs, GPU-hours and #SBATCH lines."""
    run = bill.stage[0] if bill.stage else bill.job
    this = f"this script is stage {bill.stage[1]} of job {run}; " if bill.stage else ""
    lines = [f"{this}../{run}/submit.sh submits each as a Slurm job of its own, after the "
             f"one before it succeeded; ../{run}/job.sh runs them all in one"]
    for n, stage in enumerate(bill.stages, 1):
        lines += [f"{n}. {stage.name}: steps {', '.join(c.step for c in stage.commands)}; "
                  f"gpus {stage.gpus}; {stage.compute.text()}",
                  *(f"   {line}" for line in (_sbatch(stage.slurm) if stage.slurm else []))]
    return lines


def _sweep_run(run: SweepRun) -> list[tuple[str, list[str]]]:
    """A sweep run's rows: which run of which sweep, and the values its patches set."""
    return [("sweep", [f"{run.sweep}: {run.which}"]),
            ("patched", [f"{change.field}: {change.old} → {change.new}"
                         for change in run.changes]
             + ([f"(applied to {run.config_file})"] if run.config_file else []))]


def _sbatch(slurm: SlurmBill, launcher: Launcher | None = None) -> list[str]:
    return [*(f"#SBATCH {directive}" for directive in slurm.directives),
            *([f"requeues itself, at the time limit up to {slurm.max_restarts or 0} times"]
              if slurm.requeues_itself else []),
            *([f"rendezvous on port {slurm.rendezvous_port} of the first node"]
              if slurm.rendezvous_port is not None else []),
            *([f"{slurm.torchrun_step} launched with torchrun across the nodes"]
              if slurm.torchrun_step else []),
            *([f"{launcher.step} launched with {launcher.kind} across the nodes"]
              if launcher and slurm.rendezvous_port is not None else []),
            *([f"{slurm.torchrun_program_step} is torchrun across the nodes, given the "
               "rendezvous"] if slurm.torchrun_program_step else [])]


def _checkpoints(bill: Bill) -> list[str]:
    checkpoints = bill.checkpoints
    if checkpoints is None:
        return []
    host = checkpoints.host_rest if checkpoints.host_base is None else \
        posixpath.join(checkpoints.host_base, checkpoints.host_rest)
    return [f"{checkpoints.step} writes them to {checkpoints.output_dir} ({host} of the "
            + ("run dir" if checkpoints.host_base is None else "machine") + ")"
            + f"; resume: {checkpoints.resume}"]


def _stop(bill: Bill) -> list[str]:
    signal = bill.on_signal
    asked = [f"during {bill.checkpoints.step if bill.checkpoints else 'train'}: creates "
             f"{signal.trigger} in its output dir and waits up to {signal.grace} s for a "
             "checkpoint"] if signal and signal.trigger else \
        [f"during train: TERM passed on to the script, which has {signal.grace} s more "
         "to save a checkpoint"] if signal else []
    return [*asked, f"TERM, then KILL after {bill.stop_timeout} s"]


def _sweep_rows(bill: SweepBill) -> list[tuple[str, list[str]]]:
    return [
        ("sweep", [bill.sweep]),
        ("run file", [bill.run_file]),
        ("runs", [f"{run}: ../{run}/job.sh, only if its sha256 is {checksum}"
                  for run, checksum in bill.runs]),
        ("submit", [{"array": "one job array (sbatch sweep.sh, or --submit)",
                     "each": "each run with its own sbatch (--submit)",
                     "none": "cannot: runs without a slurm block"}[bill.submission]]),
        ("throttle", [f"{bill.max_parallel} array tasks at a time (matrix.max_parallel)"
                      if bill.max_parallel else "none: every task may run at once"]),
        *([("sbatch", _sbatch(bill.slurm))] if bill.slurm else []),
        *([("gpu-hours", [bill.compute.text()])] if bill.compute else []),
    ]


def _bill_title(plan: ScriptPlan) -> str:
    return f"{'+' if plan.action == 'add' else '~'} {visible(plan.path)}"


def report_plan_text(plans: list[ScriptPlan], stream: TextIO) -> None:
    changing = _changing(plans)
    for line in [plan.line() for plan in changing] + library_lines(changing):
        print(line, file=stream)
    if changing:
        print(file=stream)
    print(f"plan: {summary_line(plans)}", file=stream)
    for plan in changing:
        if plan.billed and plan.job is not None:
            print(f"\n{_bill_title(plan)}", file=stream)
            print("\n".join("  " + line for line in _reviewed_lines(plan)), file=stream)


def report_plan_github(plans: list[ScriptPlan], stream: TextIO) -> None:
    """Markdown for a pull request comment: run files' text only inside code blocks, so
    nothing in them can change how the comment renders."""
    changing = _changing(plans)
    print(f"#### obc plan: {summary_line(plans)}", file=stream)
    if changing:
        # GitHub colours a diff block's `!` lines as changes; `~` lines it leaves plain.
        lines = [_github_symbol(plan.line()) for plan in changing] + library_lines(changing)
        print("\n" + _code_block("diff", lines), file=stream)
    for plan in changing:
        if plan.billed and plan.job is not None:
            print(f"\n<details><summary>{html.escape(_bill_title(plan))}: bill of materials"
                  f"</summary>\n\n{_code_block('text', _reviewed_lines(plan))}\n\n"
                  "</details>", file=stream)


def _reviewed_lines(plan: ScriptPlan) -> list[str]:
    """The bill of a job, then the site policy's verdict on it, rule by rule."""
    assert plan.job is not None
    policy = [visible(line) for line in labelled_lines([("policy", plan.judgement.lines())])] \
        if plan.judgement else []
    return bill_lines(bill_of(plan.job)) + policy


def _github_symbol(line: str) -> str:
    return "!" + line[1:] if line.startswith("~") else line


def _code_block(language: str, lines: list[str]) -> str:
    """A fenced block whose fence is longer than any run of backticks in `lines`."""
    longest = max((len(run) for run in re.findall("`+", "\n".join(lines))), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([fence + language, *lines, fence])


def report_plan_json(plans: list[ScriptPlan], stream: TextIO) -> None:
    document = {"plan_format": PLAN_FORMAT, "totals": totals(plans),
                "scripts": [_script_json(plan) for plan in plans]}
    print(json.dumps(document, indent=2, ensure_ascii=False, default=_plain_digest),
          file=stream)


def _plain_digest(value: Any) -> dict[str, str]:
    """A text kept as its hash, as the record has it: `{"sha256": HEX}`."""
    if not isinstance(value, Digest):
        raise TypeError(f"not JSON: {value!r}")
    return {DIGEST_KEY: value.sha256}


def _script_json(plan: ScriptPlan) -> dict[str, Any]:
    return {
        "path": plan.path,
        "action": plan.action,
        "note": plan.note,
        "changes": [{"field": change.field, "label": change.label, "kind": change.kind,
                     "before": change.before, "after": change.after, "detail": change.detail,
                     "text": change.text()}
                    for change in plan.changes],
        "bill": None if plan.job is None else bill_json(bill_of(plan.job)),
        "policy": None if plan.judgement is None else plan.judgement.json(),
        "library": None if plan.library is None else dataclasses.asdict(plan.library),
    }


def bill_json(bill: Bill | SweepBill) -> dict[str, Any]:
    """The bill as JSON: name/value pairs mappings, secrets and the rest lists of objects."""
    document = dataclasses.asdict(bill)
    if isinstance(bill, SweepBill):
        document["runs"] = dict(bill.runs)
    else:
        document["env"] = dict(bill.env)
        document["secrets"] = [{"name": name, "required": required}
                               for name, required in bill.secrets]
        for file, shown in zip(bill.files, document["files"], strict=True):
            shown["obc_adds"] = dict(file.obc_adds)
        if bill.sweep is not None:
            document["sweep"]["labels"] = dict(bill.sweep.labels)
            document["sweep"]["changes"] = [change._asdict() for change in bill.sweep.changes]
    if bill.compute is not None:
        document["compute"]["text"] = bill.compute.text()
    return document


PlanReporter = Callable[[list[ScriptPlan], TextIO], None]
PLAN_REPORTERS: dict[str, PlanReporter] = {"text": report_plan_text, "json": report_plan_json,
                                           "github": report_plan_github}
