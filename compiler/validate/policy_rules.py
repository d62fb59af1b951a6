"""Stage 3b, the site policy (policy.py): each normalised job judged rule by rule.

It judges the Job, not the run file, so what it judges is what runs: the #SBATCH lines the
script carries, what Slurm allocates for them (gpu_hours.py, the bill's count), the runtime
and image the script starts. Each verdict names the run file's field it judges, so that a
refusal is located there, and the rule, so that it cites where the policy says so. `obc plan`
shows every verdict; compile and `--check` refuse a job with a refused one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..core.diagnostics import Diagnostic, field_path
from ..model.gpu_hours import Compute, compute
from ..model.job import Job
from ..model.runtimes import Container, Enroot, Native, is_image_file, registry_host
from ..model.slurm import granted_seconds, time_limit_seconds
from ..read.load import Path_, Source
from .policy import Limits, Policy
from .rules.slurm import SLURM_FIELDS

# Where an option refused by default is given a field of its own, or a better way.
_INSTEAD = {
    "gpus": "slurm.gpus_per_node", "gpus-per-task": "slurm.gpus_per_node",
    "gres": "slurm.gpus_per_node for GPUs", "array": "a sweep (matrix:), one run dir a task",
    "chdir": "paths.run_dir, where the job works",
}


@dataclass(frozen=True, slots=True)
class Verdict:
    """One rule's verdict on a job: what the job asks (`asks`), whether the policy allows it,
    the field of the run file it judges, and what to do if it is refused."""

    rule: str
    allowed: bool
    asks: str
    path: Path_
    hint: str | None = None


@dataclass(frozen=True, slots=True)
class Judgement:
    """Every verdict of a policy on one job, which `obc plan` shows."""

    policy: Policy
    verdicts: tuple[Verdict, ...]

    def json(self) -> dict[str, object]:
        return {"file": self.policy.file,
                "allowed": all(v.allowed for v in self.verdicts),
                "verdicts": [{"rule": v.rule, "verdict": "allowed" if v.allowed else "refused",
                              "asks": v.asks, "field": field_path(v.path),
                              "by": self.policy.cite(v.rule)} for v in self.verdicts]}

    def lines(self) -> list[str]:
        """`obc plan`'s rows: the policy, then each verdict."""
        name = self.policy.file or "obc's defaults (no obc-policy.yaml)"
        return [name] + [f"{'allowed' if v.allowed else 'REFUSED'}  {v.rule}: {v.asks}"
                         for v in self.verdicts]


def problems(source: Source, job: Job, policy: Policy) -> list[Diagnostic]:
    """The job's refused verdicts, located in the run file, each citing its rule."""
    return [source.problem(_stage_field(source, job, v.path),
                           f"{v.asks} is not allowed by {policy.cite(v.rule)}", v.hint)
            for v in judge(job, policy) if not v.allowed]


def _stage_field(source: Source, job: Job, path: Path_) -> Path_:
    """Where a stage's script takes the value at `path` of the slurm block from: its stage's
    own field, if the run file gives it (slurm.stages)."""
    if job.stage is None or len(path) != 2 or path[0] != "slurm":
        return path
    own = ("slurm", "stages", job.stage.name, path[1])
    return own if path[1] in source.data["slurm"]["stages"][job.stage.name] else path


def judge(job: Job, policy: Policy) -> list[Verdict]:
    """Every rule's verdict on `job`, in the order of the policy file's sections."""
    return [*_runtime(job, policy), *_slurm(job, policy)]


def judge_sweep(jobs: Sequence[Job], max_parallel: int | None, policy: Policy) -> list[Verdict]:
    """The sweep limits' verdicts on a sweep of `jobs`, at most `max_parallel` at once: its
    GPUs and nodes at once, the longest it can take, all its GPU-hours."""
    if not jobs or policy.sweep == Limits():
        return []
    at_once = min(max_parallel or len(jobs), len(jobs))
    computes = [compute(job) for job in jobs]
    widest = sorted(computes, key=lambda c: c.gpus if isinstance(c.gpus, int) else 1 << 30,
                    reverse=True)[:at_once]
    gpus: int | str = "all" if any(c.gpus == "all" for c in widest) else \
        sum(int(c.gpus) for c in widest)
    hours = [c.gpu_hours for c in computes]
    waves = -(-len(jobs) // at_once)
    times = [_seconds(job) for job in jobs]
    longest = None if None in times else max(t for t in times if t is not None) * waves
    return list(_limits("sweep", policy.sweep, ("matrix",), {
        "max_nodes": sum(sorted((c.nodes for c in computes), reverse=True)[:at_once]),
        "max_gpus": gpus,
        "max_gpu_hours": None if None in hours else round(sum(h or 0 for h in hours), 4),
        "max_time": longest,
    }, f"a sweep of {len(jobs)} runs, {at_once} at once"))


def _runtime(job: Job, policy: Policy) -> Iterator[Verdict]:
    kind = _kind(job)
    if policy.runtimes is not None:
        yield Verdict("runtimes", kind in policy.runtimes, f"runtime {kind}",
                      ("runtime", "kind"), f"use one of {', '.join(policy.runtimes)}")
    image = getattr(job.runtime, "image", None)
    if policy.registries is not None and image is not None and not is_image_file(image):
        name = image.removeprefix("docker://").partition("@")[0]
        registry = registry_host(name) or "docker.io"
        yield Verdict("registries", registry in policy.registries,
                      f"image {image} from {registry}", ("runtime", "image"),
                      f"take an image from {', '.join(policy.registries)}")
    if job.shared:
        yield Verdict("shared_run_dirs", policy.shared_run_dirs,
                      "a run dir in a folder the team shares", ("paths", "shared"),
                      "keep the run dir in a folder only you can write")


def _kind(job: Job) -> str:
    runtime = job.runtime
    if isinstance(runtime, Container):
        return runtime.engine
    return "native" if isinstance(runtime, Native) else \
        "enroot" if isinstance(runtime, Enroot) else "apptainer"


def _slurm(job: Job, policy: Policy) -> Iterator[Verdict]:
    slurm = job.slurm
    if slurm is None:
        return
    for rule, value, key in (("partitions", slurm.partition, "partition"),
                             ("accounts", slurm.account, "account"),
                             ("qos", slurm.qos, "qos")):
        names = getattr(policy, rule)
        if names is not None and value is not None:
            yield Verdict(rule, value in names, f"{key} {value}", ("slurm", key),
                          f"use one of {', '.join(names)}")
    yield from _limits("job", policy.job, ("slurm",), _asked(job, compute(job)), "the job")
    yield from _options(job, policy)


def _asked(job: Job, given: Compute) -> dict[str, object]:
    return {"max_time": _seconds(job), "max_nodes": given.nodes, "max_gpus": given.gpus,
            "max_gpu_hours": given.gpu_hours}


def _seconds(job: Job) -> int | None:
    """The time limit Slurm grants the job; None for none (UNLIMITED, or not a Slurm job)."""
    time = job.slurm.time if job.slurm else None
    seconds = time_limit_seconds(time) if time is not None else None
    return None if seconds is None else granted_seconds(seconds)


# Each limit: the run file's field that sets it, how a value is shown, what to do.
_LIMITS = {
    "max_time": ("time", "time limit", "a shorter slurm.time"),
    "max_nodes": ("nodes", "nodes", "fewer slurm.nodes"),
    "max_gpus": ("gpus_per_node", "GPUs", "fewer slurm.gpus_per_node"),
    "max_gpu_hours": ("time", "GPU-hours", "fewer GPUs, or a shorter slurm.time"),
}


def _limits(scope: str, limits: Limits, at: Path_, asked: dict[str, object],
            what: str) -> Iterator[Verdict]:
    for key, (field_, noun, fix) in _LIMITS.items():
        most = getattr(limits, key)
        if most is None:
            continue
        value = asked[key]
        if key == "max_time":
            most = granted_seconds(time_limit_seconds(most) or 0)
        allowed = isinstance(value, (int, float)) and value <= most
        shown = "unbounded" if value is None or value == "all" else \
            f"{value:g}" if isinstance(value, (int, float)) else str(value)
        unit = " s" if key == "max_time" else ""
        path = (*at, field_) if at == ("slurm",) else at
        yield Verdict(f"{scope}.{key}", allowed,
                      f"{noun} of {what}: {shown}{unit if shown != 'unbounded' else ''} "
                      f"(at most {most:g}{unit})", path, fix)


def _options(job: Job, policy: Policy) -> Iterator[Verdict]:
    """The #SBATCH options: slurm.extra's from the allow-list, none the policy refuses,
    every one it requires."""
    slurm = job.slurm
    assert slurm is not None
    given = [directive[2:].partition("=")[0] for directive in slurm.directives]
    extra_from = len(given) - len(slurm.extra)
    for i, name in enumerate(given):
        path = ("slurm", "extra", i - extra_from) if i >= extra_from else \
            ("slurm", SLURM_FIELDS[name]) if name in SLURM_FIELDS else ("slurm",)
        if name in policy.refused:
            yield Verdict("sbatch.refused", False, f"--{name}", path)
        elif i >= extra_from:
            instead = f"{_INSTEAD[name]}, or " if name in _INSTEAD else ""
            yield Verdict("sbatch.allowed", policy.allows_option(name), f"--{name}", path,
                          f"use {instead}a site policy that allows it "
                          f"(sbatch: {{allowed: [{name}]}} in obc-policy.yaml)")
    for name in policy.required:
        field_ = SLURM_FIELDS.get(name)
        yield Verdict("sbatch.required", name in given,
                      f"--{name}" if name in given else f"a job without --{name}",
                      ("slurm",), f"set slurm.{field_}" if field_ else
                      f"add --{name}=... to slurm.extra")
