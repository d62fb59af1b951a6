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
from .plan import SYMBOLS, ScriptPlan, totals
from .summary import labelled_lines
from .text import visible

PLAN_FORMAT = 1


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


def bill_lines(bill: Bill) -> list[str]:
    """Return the bill of materials as labelled lines, as a script's header shows its summary."""
    rows = [
        ("run file", [bill.run_file]),
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
        if plan.job is not None:
            print(f"\n{_bill_title(plan)}", file=stream)
            print("\n".join("  " + line for line in bill_lines(bill_of(plan.job))), file=stream)


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
        if plan.job is not None:
            print(f"\n<details><summary>{html.escape(_bill_title(plan))}: bill of materials"
                  f"</summary>\n\n{_code_block('text', bill_lines(bill_of(plan.job)))}\n\n"
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
    print(json.dumps(document, indent=2, ensure_ascii=False), file=stream)


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
    }


def bill_json(bill: Bill) -> dict[str, Any]:
    """The bill as JSON: env a mapping, secrets and the rest lists of objects."""
    document = dataclasses.asdict(bill)
    document["env"] = dict(bill.env)
    document["secrets"] = [{"name": name, "required": required}
                           for name, required in bill.secrets]
    document["compute"]["text"] = bill.compute.text()
    return document


PlanReporter = Callable[[list[ScriptPlan], TextIO], None]
PLAN_REPORTERS: dict[str, PlanReporter] = {"text": report_plan_text, "json": report_plan_json,
                                           "github": report_plan_github}
