"""How `obc plan` is shown: text for a terminal, JSON for policy tools, markdown for a pull
request comment (`github`). Each takes the plans of plan.py and writes to a stream.

Text and markdown list one line per script that changes, the totals, then the bill of
materials of each script compile would add or change; JSON holds the bill of every script
compile would write, changed or not, so that a policy sees the whole tree.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
from collections.abc import Callable
from typing import Any, TextIO

from . import shell
from .bill import Bill, bill_of
from .meaning import DIGEST_KEY, Digest
from .model import Job, SweepRun
from .plan import ScriptPlan, totals
from .summary import labelled_lines
from .text import visible

PLAN_FORMAT = 2


def summary_line(plans: list[ScriptPlan]) -> str:
    """Return the totals: `1 to add, 2 to change, 0 to remove, 4 unchanged`, or no changes."""
    counts = totals(plans)
    if not counts["add"] + counts["change"] + counts["remove"]:
        return f"no changes ({counts['unchanged']} script(s) as compile would write them)"
    return (f"{counts['add']} to add, {counts['change']} to change, {counts['remove']} to "
            f"remove, {counts['unchanged']} unchanged")


def _changing(plans: list[ScriptPlan]) -> list[ScriptPlan]:
    return [plan for plan in plans if plan.action in ("add", "change", "remove")]


def bill_lines(bill: Bill, sweep: SweepRun | None = None) -> list[str]:
    """Return the bill of materials as labelled lines, as a script's header shows its summary;
    a sweep's run says which one it is and the values its patches set."""
    rows = [
        ("run file", [bill.run_file]),
        *_sweep_rows(sweep),
        ("runtime", [bill.runtime]),
        ("images", [f"{i.reference}  ({i.registry}"
                    + ("" if i.digest else "; not pinned by digest") + ")" for i in bill.images]),
        ("privileges", [f"{p.option}: {p.meaning}" if p.option else p.meaning
                        for p in bill.privileges]),
        ("gpu-hours", [bill.compute.text()]),
        ("mounts", [f"{m.source} → {m.target} ({m.mode})" for m in bill.mounts]),
        ("writable", list(bill.writable)),
        ("env", [f"{name}={shell.quote(value)}" for name, value in bill.env]),
        ("secrets", [", ".join(name + ("" if required else " (optional)")
                               for name, required in bill.secrets)] if bill.secrets else []),
        ("egress", [f"{e.host}: {e.purpose}" + (f" (off with {e.off_switch})"
                                                if e.off_switch else "") for e in bill.egress]),
        ("commands", [f"{n}. {c.step}" + (f" ({c.where})" if c.where else "") + f": {c.command}"
                      for n, c in enumerate(bill.commands, 1)]),
    ]
    return [visible(line) for line in labelled_lines(
        (label, values or ["none"]) for label, values in rows)]


def _sweep_rows(sweep: SweepRun | None) -> list[tuple[str, list[str]]]:
    if sweep is None:
        return []
    which = " ".join(f"{axis}={label}" for axis, label in sweep.labels) if sweep.labels \
        else f"the named run {sweep.name}"
    return [("sweep", [f"{sweep.sweep}: {which}"]),
            ("patched", [f"{change.field}: {change.old} → {change.new}"
                         for change in sweep.changes])]


def _bill_lines(job: Job) -> list[str]:
    """The bill of a job plan would write, the same whether it adds or changes its script."""
    return bill_lines(bill_of(job), job.sweep)


def _bill_title(plan: ScriptPlan) -> str:
    return f"{'+' if plan.action == 'add' else '~'} {visible(plan.path)}"


def report_plan_text(plans: list[ScriptPlan], stream: TextIO) -> None:
    changing = _changing(plans)
    for plan in changing:
        print(plan.line(), file=stream)
    if changing:
        print(file=stream)
    print(f"plan: {summary_line(plans)}", file=stream)
    for plan in changing:
        if plan.billed and plan.job is not None:
            print(f"\n{_bill_title(plan)}", file=stream)
            print("\n".join("  " + line for line in _bill_lines(plan.job)), file=stream)


def report_plan_github(plans: list[ScriptPlan], stream: TextIO) -> None:
    """Markdown for a pull request comment: run files' text only inside code blocks, so
    nothing in them can change how the comment renders."""
    changing = _changing(plans)
    print(f"#### obc plan: {summary_line(plans)}", file=stream)
    if changing:
        # GitHub colours a diff block's `!` lines as changes; `~` lines it leaves plain.
        lines = [_github_symbol(plan.line()) for plan in changing]
        print("\n" + _code_block("diff", lines), file=stream)
    for plan in changing:
        if plan.billed and plan.job is not None:
            print(f"\n<details><summary>{html.escape(_bill_title(plan))}: bill of materials"
                  f"</summary>\n\n{_code_block('text', _bill_lines(plan.job))}\n\n"
                  "</details>", file=stream)


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
        "bill": None if plan.job is None else bill_json(bill_of(plan.job), plan.job.sweep),
    }


def bill_json(bill: Bill, sweep: SweepRun | None = None) -> dict[str, Any]:
    """The bill as JSON: env a mapping, secrets and the rest lists of objects; `sweep` the
    run's sweep, labels and patches, or null."""
    document = dataclasses.asdict(bill)
    document["sweep"] = None if sweep is None else {
        "sweep": sweep.sweep, "labels": dict(sweep.labels), "name": sweep.name,
        "patched": [change._asdict() for change in sweep.changes]}
    document["env"] = dict(bill.env)
    document["secrets"] = [{"name": name, "required": required}
                           for name, required in bill.secrets]
    document["compute"]["text"] = bill.compute.text()
    return document


PlanReporter = Callable[[list[ScriptPlan], TextIO], None]
PLAN_REPORTERS: dict[str, PlanReporter] = {"text": report_plan_text, "json": report_plan_json,
                                           "github": report_plan_github}
