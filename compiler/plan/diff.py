"""`obc plan`: what a compile would do to OUT, said by what the jobs mean, not by their text.

Each script compile would write, remove or leave is compared through its meaning: the new
job's (meaning.py) against the record at the end of the script on disk. A field change reads
`env LR 1e-4 → 2e-4`; labels below make the known fields read well, and any other field of
the model is named by its path, so that a field the model gains shows up unaided.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from ..core import shell
from ..core.diagnostics import field_path
from ..core.text import visible
from ..model.job import Job
from ..pipeline.changes import Change, CompileNamed, Elsewhere, changes_to
from ..pipeline.pipeline import Script
from ..render.library import LIBRARY_LINE_PREFIX, job_part, named_parts, read_library
from ..render.meaning import JOB, SWEEP, VARIANT_KEY, Digest, Part, meaning, read_record
from ..render.sweep import Sweep, SweepFile
from ..validate.policy_rules import Judgement
from .files import embedded_text, file_change
from .recorded import recorded_job, rendered_again

Action = Literal["add", "change", "remove", "foreign", "keep", "none"]
ACTIONS: dict[str, Action] = {"missing": "add", "changed": "change", "stale": "remove",
                              "foreign": "foreign", "kept": "keep", "unchanged": "none"}
# The actions a plan shows, as it marks them: what compile would do, and a file that is not
# obc's, which it leaves (so a plan with one is not "no changes").
SYMBOLS = {"add": "+", "change": "~", "remove": "-", "foreign": "?"}
Kind = Literal["changed", "added", "removed", "reordered"]
_MISSING = object()
# The collections whose order is part of what they mean: steps run in order, and a later
# mount may cover an earlier one. (The order of env, secrets, files or fields is not.)
ORDERED = {("steps",), ("runtime", "mounts")}
# Fields that say where a script came from rather than what it does: named only when nothing
# else changed (a comment edited in the run file). A sweep.sh's runs' sha256: each job.sh
# that changes has a line of its own.
PROVENANCE = {("inputs",), ("runs", "*", "checksum")}
# The obc version that wrote a job.sh: said once for all scripts, with what changed in the
# library (LibraryChange), not in each script's line.
VERSION = ("obc_version",)

# A script edited after obc wrote it is named by its first MAX_EDITS edited lines, each cut to
# MAX_EDIT_WIDTH characters.
MAX_EDITS = 3
MAX_EDIT_WIDTH = 80

# How a field reads in a change line; "*" stands for an item's key, {N} for the Nth part.
LABELS: dict[tuple[str, ...], str] = {
    ("source_file",): "run file",
    ("obc_version",): "obc",
    ("runtime", "type"): "runtime",
    ("runtime", "image"): "image",
    ("runtime", "engine"): "engine",
    ("runtime", "user"): "user",
    ("runtime", "shm_size"): "shm size",
    ("runtime", "host_network"): "host network",
    ("runtime", "venv"): "venv",
    ("runtime", "env_file"): "env file",
    ("runtime", "extra_args"): "engine options",
    ("runtime", "mounts", "*"): "mount {2}",
    ("runtime", "mounts", "*", "source"): "mount {2} source",
    ("runtime", "mounts", "*", "readonly"): "mount {2} read-only",
    ("steps", "*"): "step {1}",
    ("steps", "*", "argv"): "step {1}",
    ("steps", "*", "nodes"): "step {1} nodes",
    ("files", "*"): "file {1}",
    ("files", "*", "content"): "file {1}",
    ("files", "*", "origin"): "file {1} from",
    ("files", "*", "obc_adds", "*"): "file {1}: obc adds {3}",
    ("env", "*"): "env {1}",
    ("secrets", "*"): "secret {1}",
    ("secrets", "*", "required"): "secret {1} required",
    ("slurm", "gpus_per_node"): "gpus per node",
    ("sweep", "labels", "*"): "sweep label {2}",
    ("sweep", "changes", "*"): "sweep patch {2}",
    ("sweep", "changes", "*", "new"): "sweep patch {2}",
    ("sweep", "changes", "*", "old"): "{2} before the sweep's patch",
    ("directives",): "sbatch",
}
# An item added that is shown by one of its fields, as its label names it.
SHOWN_BY: dict[tuple[str, ...], str] = {("sweep", "changes", "*"): "new"}


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One field of a job's meaning that differs: `before` and `after` are plain values."""

    path: tuple[str, ...]
    kind: Kind
    before: Any = None
    after: Any = None
    # For text kept as its hash: what changed in it, where the script on disk tells.
    detail: str = ""

    @property
    def field(self) -> str:
        return field_path(self.path)

    @property
    def label(self) -> str:
        return label(self.path)

    def text(self) -> str:
        """Return the change as a reviewer reads it: `env LR 1e-4 → 2e-4`, as one line of
        visible text (a record on disk may hold anything)."""
        return visible(self._text())

    def _text(self) -> str:
        if self.kind == "reordered":
            return f"{self.label} order {' '.join(self.before)} → {' '.join(self.after)}"
        if self.kind in ("added", "removed"):
            value = self.after if self.kind == "added" else self.before
            by = next((key for pattern, key in SHOWN_BY.items() if _matches(pattern, self.path)),
                      None)
            if by is not None and isinstance(value, dict):
                value = value.get(by)
            shown = "" if isinstance(value, dict) or _hidden(value) else f" ({value_line(value)})"
            return f"{self.label} {self.kind}" + (shown if self.kind == "added" else "")
        if _hidden(self.before) or _hidden(self.after) or _is_provenance(self.path):
            return f"{self.label}: {self.detail}" if self.detail else f"{self.label} changed"
        if self.path == ("runtime", "image"):
            return _image_change(self.before, self.after)
        before, after = value_line(self.before), value_line(self.after)
        colon = ":" if " " in before + after else ""
        return f"{self.label}{colon} {before} → {after}"


def label(path: tuple[str, ...]) -> str:
    """Return how the field at `path` is named in a change line."""
    for pattern, text in LABELS.items():
        if _matches(pattern, path):
            return text.format(*path)
    return " ".join(part.replace("_", " ") if part.isidentifier() and part.islower() else part
                    for part in path)


def _matches(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    """Whether `path` is `pattern`'s, "*" standing for any one part."""
    return len(pattern) == len(path) and all(
        p in ("*", part) for p, part in zip(pattern, path, strict=True))


def _is_provenance(path: tuple[str, ...]) -> bool:
    return any(_matches(pattern, path) for pattern in PROVENANCE)


def value_line(value: Any) -> str:
    """Return a plain value as one line: strings and lists as shell words, as the header does."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return visible(_word(value))
    if isinstance(value, list):
        return visible(" ".join(_word(item) if isinstance(item, str) else value_line(item)
                                for item in value)) if value else "none"
    if isinstance(value, Digest | dict):
        return _shown_whole(value)
    return str(value)


def _shown_whole(value: Digest | dict) -> str:
    """A text kept as its hash, in words no value reads as (a value with spaces is quoted); a
    runtime by its engine or type; another block by being there."""
    if isinstance(value, Digest):
        return f"(a text with sha256 {value.sha256[:12]}…)"
    return str(value.get("engine") or value.get(VARIANT_KEY) or "set")


def _word(text: str) -> str:
    """Quoted only where it would not read as one word: `~/x` stays as the header has it."""
    plain = text and not any(char.isspace() or char in "'\"" for char in text)
    return text if plain else shell.quote(text)


def _hidden(value: Any) -> bool:
    """Whether a value is text kept as its hash: it can say only that it changed."""
    return isinstance(value, Digest)


def _image_change(before: str, after: str) -> str:
    name_before, _, digest_before = before.partition("@")
    name_after, _, digest_after = after.partition("@")
    if name_before != name_after:
        return f"image {value_line(before)} → {value_line(after)}"
    if digest_before and digest_after:
        return "image digest changed"
    return "image pinned by digest" if digest_after else "image no longer pinned by digest"


# What a field that holds nothing is recorded as.
EMPTY_VALUES: tuple[Any, ...] = (None, [], {})


def diff_meaning(old: Any, new: Any, path: tuple[str, ...] = (), part: Part = JOB) -> \
        list[FieldChange]:
    """Return every field that differs between two meanings, in the new one's order. `part`,
    the model's type at `path`, says what a mapping is: a variant, a record, names."""
    if _same(old, new):
        return []
    if part.kind == "variant" and isinstance(old, dict) and isinstance(new, dict):
        if old.get(VARIANT_KEY) != new.get(VARIANT_KEY):
            return [FieldChange(path, "changed", old, new)]
        part = part.variant(new.get(VARIANT_KEY))
    if _are_mappings(old, new, part):
        return _diff_mappings(old or {}, new or {}, path, part)
    return [_field_change(path, old, new, part)]


def _are_mappings(old: Any, new: Any, part: Part) -> bool:
    """Whether both are mappings to compare key by key: not a text's hash, and an empty
    collection is recorded as [], whatever its items would be."""
    if isinstance(old, dict) and isinstance(new, dict):
        return part.kind != "text"
    return old == [] and isinstance(new, dict) or new == [] and isinstance(old, dict)


def _field_change(path: tuple[str, ...], old: Any, new: Any, part: Part) -> FieldChange:
    # A part that is absent, or None where the other side has a mapping (no slurm block).
    if old is _MISSING or old is None and isinstance(new, dict):
        return FieldChange(path, "added", after=part.read(new))
    if new is _MISSING or new is None and isinstance(old, dict):
        return FieldChange(path, "removed", before=part.read(old))
    return FieldChange(path, "changed", part.read(old), part.read(new))


def _same(old: Any, new: Any) -> bool:
    """Equal, and mappings in the same order too (== ignores the order of a dict)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return list(old) == list(new) and all(_same(old[key], new[key]) for key in old)
    return old == new


def _diff_mappings(old: dict, new: dict, path: tuple[str, ...], part: Part) -> \
        list[FieldChange]:
    kept_old, kept_new = [k for k in old if k in new], [k for k in new if k in old]
    changes = []
    if path in ORDERED and kept_old != kept_new:
        changes.append(FieldChange(path, "reordered", kept_old, kept_new))
    for key in [*new, *(key for key in old if key not in new)]:
        before, after = old.get(key, _MISSING), new.get(key, _MISSING)
        if not _only_one_obc_records(before, after):
            changes += diff_meaning(before, after, (*path, key), part.child(key))
    return changes


def _only_one_obc_records(old: Any, new: Any) -> bool:
    """Whether a field is in one record and not the other, with nothing in it: a field the
    model gained (or lost) between two obc versions, which a job that does not use it holds
    empty. Its meaning is the same, so an upgrade is not a change of every script."""
    return (old is _MISSING and new in EMPTY_VALUES) or (new is _MISSING and old in EMPTY_VALUES)


@dataclass(frozen=True, slots=True)
class LibraryChange:
    """How the library a job.sh embeds changes: from the obc version and parts its header
    names on disk (none for a script of obc 0.2 or older) to those compile would write. The
    changes of many scripts are said together, once (`library_lines`)."""

    before_version: str
    after_version: str
    changed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    @property
    def versions(self) -> str:
        return (f"obc {self.after_version}" if self.before_version == self.after_version
                else f"obc {self.before_version} → {self.after_version}")


def library_change(text: str, job: Job, old_version: str) -> LibraryChange | None:
    """How the library of the script `text` on disk changes when compile writes `job`'s; None
    if it does not."""
    before = read_library(text)
    old = dict(before.named) if before else {}
    new = dict(named_parts(job))
    version = before.version if before else old_version
    if old == new and version == job.obc_version:
        return None
    return LibraryChange(version, job.obc_version,
                         tuple(name for name in new if name in old and old[name] != new[name]),
                         tuple(name for name in new if name not in old),
                         tuple(name for name in old if name not in new))


def library_lines(plans: Iterable[ScriptPlan]) -> list[str]:
    """The library changes of all `plans`, one line for each change of obc version however
    many scripts it is in: `library obc 0.3.0 → 0.3.1 in 12 scripts: core changed`."""
    together: dict[str, list[LibraryChange]] = {}
    for plan in plans:
        if plan.library is not None:
            together.setdefault(plan.library.versions, []).append(plan.library)
    return [visible(f"library {versions} in {len(changes)} script"
                    f"{'s' if len(changes) > 1 else ''}: {_parts_changed(changes)}")
            for versions, changes in together.items()]


def _parts_changed(changes: list[LibraryChange]) -> str:
    """`core, main changed; docker added`: each part once, by how it changes in any script."""
    said = []
    for verb in ("changed", "added", "removed"):
        names = dict.fromkeys(name for change in changes for name in getattr(change, verb))
        if names:
            said.append(f"{', '.join(names)} {verb}")
    return "; ".join(said) or "the same parts"


@dataclass(frozen=True, slots=True)
class ScriptPlan:
    """What compile would do to one script under OUT, and why."""

    path: str
    action: Action
    changes: tuple[FieldChange, ...] = ()
    # Why, where the fields cannot say: a stale or kept script, text or mode only.
    note: str = ""
    # The job compile would write it from, or the sweep of a sweep.sh (None for a script it
    # removes or keeps).
    job: Job | Sweep | None = None
    # The script on disk is what obc writes for what the job means now: only its mode or
    # provenance (the inputs hash) differ, so its bill is the one approved before.
    same_meaning: bool = False
    # The site policy's verdicts on the job (None for a sweep.sh, or a script not compiled).
    judgement: Judgement | None = None
    # How its library changes, said once for every script it is in (library_lines).
    library: LibraryChange | None = None

    @property
    def billed(self) -> bool:
        """Whether plan shows the bill of the job it would write: one it adds, or one whose
        meaning changes or is not known."""
        return self.job is not None and not self.same_meaning

    def line(self) -> str:
        """Return the one-line summary: `~ out/b/job.sh: image digest changed; gpus 2 → 4`."""
        what = [change.text() for change in self.changes] + ([self.note] if self.note else []) \
            + ([f"library {self.library.versions} (below)"] if self.library else [])
        return f"{SYMBOLS[self.action]} {visible(self.path)}" + (
            f": {'; '.join(what)}" if what else "")


def plan_scripts(out: Path, scripts: Iterable[Script], *, compile_named: CompileNamed,
                 prune: bool = False) -> list[ScriptPlan]:
    """Return what compile would do to each script under OUT, in path order (changes_to's
    decisions, `compile_named` compiling the run files named there but not given: the same
    conflicts raise ObcError)."""
    scripts = list(scripts)
    jobs = {out / script.relative_path: script.job for script in scripts}

    def with_jobs(named: dict[str, Path]) -> Elsewhere:
        # The scripts of run files not given, that compile changes, show what they mean too.
        elsewhere = compile_named(named)
        jobs.update((out / output.relative_path, output.job) for output in elsewhere.outputs)
        return elsewhere

    judged = {out / script.relative_path: script.judgement for script in scripts
              if isinstance(script, (Script, SweepFile))}
    return [replace(_script_plan(change, jobs.get(change.path)),
                    judgement=judged.get(change.path))
            for change in changes_to(out, scripts, prune=prune, compile_named=with_jobs)]


def _script_plan(change: Change, job: Job | Sweep | None) -> ScriptPlan:
    action = ACTIONS[change.status]
    path = change.path.as_posix()
    if action in ("remove", "foreign", "keep"):
        return ScriptPlan(path, action, note=change.reason)
    if action != "change" or job is None:
        return ScriptPlan(path, action, job=job)
    if change.old == change.new:
        return ScriptPlan(path, action, note=f"mode {change.old_mode:04o} → {change.mode:04o}",
                          job=job, same_meaning=True)
    return _compared(path, (change.old or b"").decode("utf-8", "replace"), job)


def _compared(path: str, text: str, job: Job | Sweep) -> ScriptPlan:
    """The plan of a script on disk to change, by the record at its end: the changes of its
    meaning, or else whether its text is what obc writes for that meaning."""
    old = read_record(text)
    if old is None:
        return ScriptPlan(path, "change", note="the script on disk has no plan record this obc "
                          "reads (an earlier obc, or an edit): what it meant is not known", job=job)
    part = JOB if isinstance(job, Job) else SWEEP
    library = library_change(text, job, str(old.get("obc_version"))) \
        if isinstance(job, Job) else None
    changes = tuple(_with_file_detail(change, text, job)
                    for change in diff_meaning(old, meaning(job), part=part)
                    if not (library and change.path == VERSION))
    edits = _edits(old, job, text)
    note = f"the script on disk is not what obc writes for its record (edited by hand, or " \
           f"another build of obc {job.obc_version}): {edits}" if edits else ""
    if any(not _is_provenance(change.path) for change in changes):
        note = "; ".join(filter(None, (_rerun(old, job, text), note)))
        return ScriptPlan(path, "change", tuple(change for change in changes
                                                if not _is_provenance(change.path)), note, job,
                          library=library)
    return ScriptPlan(path, "change", changes, note, job, same_meaning=not edits,
                      library=library)


def _rerun(record: dict[str, Any], job: Job | Sweep, text: str) -> str:
    """What a rerun in the same run dir keeps of the old job's work: whether the training
    inputs (Job.training_inputs) of the job the record stands for are the new job's."""
    old = recorded_job(record, job, text) if isinstance(job, Job) else None
    if old is None or job.checkpoints is None:
        return ""
    if old.training_inputs != job.training_inputs:
        return "a rerun starts over (checkpoints of the old inputs are set aside)"
    return "a rerun keeps its checkpoints and finished steps (same training inputs)"


def _edits(record: dict[str, Any], job: Job | Sweep, text: str) -> str:
    """Return where the script on disk differs from what this obc writes for its record; ""
    where it does not, or where that is not known (a record of another obc version, or one
    whose hashed texts are neither in the new job nor in the script)."""
    if record.get("obc_version") != job.obc_version:
        return ""
    written = rendered_again(record, job, text)
    if written is None:
        return ""
    # The library is compared by its parts' sha256 (LibraryChange), once for all scripts;
    # a part edited by hand is one whose text is not the sha256 its header names.
    edited = [f"library part {name} edited" for name in _edited_parts(text)]
    return "; ".join(filter(None, [edited_lines(_job_alone(written), _job_alone(text)),
                                   *edited]))


def _job_alone(text: str) -> str:
    """The script's job part with its header's library line cut to its start, so that the
    lines left are the job's and keep their numbers."""
    return re.sub(rf"^# {LIBRARY_LINE_PREFIX}.*$", f"# {LIBRARY_LINE_PREFIX}", job_part(text),
                  count=1, flags=re.M)


def _edited_parts(text: str) -> list[str]:
    """The library parts `text` embeds whose text is not the one its header names."""
    library = read_library(text)
    return list(library.edited) if library else []


def edited_lines(expected: str, actual: str) -> str:
    """Return where `actual` differs from `expected`, by its own lines as they now read:
    `line 812: axolotl merge-lora …`, the first MAX_EDITS of them and how many more."""
    matcher = difflib.SequenceMatcher(None, expected.split("\n"), lines := actual.split("\n"),
                                      autojunk=False)
    edits = []
    for tag, _, _, start, end in matcher.get_opcodes():
        if tag == "delete":
            edits.append(f"line {start}: lines removed after it")
        elif tag != "equal":
            edits += [f"line {n + 1}: {_clipped(lines[n])}" for n in range(start, end)]
    more = f"; {len(edits) - MAX_EDITS} more lines" if len(edits) > MAX_EDITS else ""
    return "; ".join(edits[:MAX_EDITS]) + more


def _clipped(line: str) -> str:
    line = visible(line.strip())
    return line if len(line) <= MAX_EDIT_WIDTH else line[:MAX_EDIT_WIDTH] + "…"


def _with_file_detail(change: FieldChange, script: str, job: Job | Sweep) -> FieldChange:
    """An embedded file's change, with what changed in it if the old script tells."""
    is_content = isinstance(job, Job) and change.path[:1] == ("files",) and \
        change.path[2:] == ("content",)
    if change.kind != "changed" or not is_content or not (
            _hidden(change.before) or _hidden(change.after)):
        return change
    old = change.before
    if _hidden(old):
        old = embedded_text(script, change.path[1], old.sha256)
    new = next((file.content for file in job.files if file.path == change.path[1]), None)
    if not isinstance(old, str) or new is None:
        return change
    return replace(change, detail=file_change(old, new))


def totals(plans: list[ScriptPlan]) -> dict[str, int]:
    """Return how many scripts compile would add, change, remove, and leave as they are; and
    how many files it leaves that are not obc's (foreign)."""
    counts = {"add": 0, "change": 0, "remove": 0, "foreign": 0, "unchanged": 0}
    for plan in plans:
        counts[plan.action if plan.action in counts else "unchanged"] += 1
    return counts
