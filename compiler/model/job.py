"""The normalised job: plain, frozen, typed data with every default applied.

normalise.py builds it from a valid run file; render.py turns it into a script. Anything a
template would otherwise have to work out from several fields is a property here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Literal, NamedTuple

from .launcher import Launcher
from .notify import Notify
from .runtimes import CONTAINER_CACHE_DIR, Apptainer, Container, Enroot, Gpus, Native
from .slurm import RENDEZVOUS_NAMES, Slurm

# Which checkpoint train resumes from: only one the same training inputs made, any, or none.
Resume = Literal["same-inputs", "any", "never"]
Nodes = Literal["all", "first"]


@dataclass(frozen=True, slots=True)
class Step:
    """One program run in the run dir; `argv[0]` is the program as the run file names it.
    In a job on several nodes, `nodes` says whether srun starts it on every node."""

    name: str
    argv: tuple[str, ...]
    nodes: Nodes = "first"


@dataclass(frozen=True, slots=True)
class EmbeddedFile:
    """A text file the script writes into the run dir; `origin` says where it came from, and
    `obc_adds` the settings obc added to it (`dynamic_checkpoint.enabled`, "true"), which
    `content` ends with."""

    path: str
    content: str
    origin: str
    obc_adds: tuple[tuple[str, str], ...] = ()

    @property
    def ends_with_newline(self) -> bool:
        return self.content.endswith("\n")


@dataclass(frozen=True, slots=True)
class Secret:
    """An environment variable passed by name; a required one must be set and not empty."""

    name: str
    required: bool


@dataclass(frozen=True, slots=True)
class Checkpoints:
    """Where the train step (Axolotl's, TRL's, or a script's under torchrun) writes its
    checkpoint-N folders: its output_dir as the trainer sees it (relative to the run dir, or
    absolute in its container), and where the script finds it: `host_base` (None: the run
    dir; else a folder on the machine, such as a mount's source) joined with `host_rest`.
    `resume` says which complete one train starts from (docs/resume.md);
    `prepared_dir`, Axolotl's prepared dataset when it is in the run dir, is set aside with
    the checkpoints when the job starts over.
    `trainer_title` is the trainer's name for people (messages say whose output_dir),
    `resume_flag` the option train takes the checkpoint's path with (one that ends in `=`
    takes it in the same word), `resume_field` the run file's field that chose `resume`."""

    step: str
    output_dir: str
    host_base: str | None
    host_rest: str
    resume: Resume
    trainer_title: str
    resume_flag: str
    resume_field: str
    prepared_dir: str | None = None

    @property
    def own_folder(self) -> bool:
        """Whether output_dir is a folder of its own, not the run dir itself."""
        return not (self.host_base is None and self.host_rest == ".")

    @property
    def host_suffix(self) -> str:
        """What leads from host_base to output_dir: nothing when it is that folder (so that
        messages name it as written), else `/` and host_rest."""
        return "" if self.host_rest == "." else "/" + self.host_rest


@dataclass(frozen=True, slots=True)
class OnSignal:
    """On a stop signal, ask Axolotl for a checkpoint (its dynamic_checkpoint `trigger` file
    in output_dir) and wait up to `grace` seconds for it before stopping the step; with no
    trigger (a script under torchrun, which saves on TERM itself), pass the signal on and
    give train `grace` seconds more before KILL."""

    grace: int
    trigger: str | None


@dataclass(frozen=True, slots=True)
class Retry:
    """A step that fails with one of these exit codes is run again, up to `max` times."""

    exit_codes: tuple[int, ...]
    max: int


@dataclass(frozen=True, slots=True)
class Health:
    """health: (docs/preflight.md): before the first step, each node checks that nvidia-smi
    lists at least `gpus` GPUs (0: no check), none with uncorrectable ECC errors, and that an
    all-reduce across every rank completes within `timeout` seconds. A node that fails ends
    the job with exit 3; with `requeue`, under Slurm, it is first excluded and the job
    requeued, within slurm.max_restarts."""

    gpus: int
    timeout: int
    requeue: bool


def expected_gpus(slurm: Slurm | None, gpus: Gpus) -> int:
    """The GPUs health expects on each node of a job (or stage): Slurm's per node, else those
    runtime.gpus names (all: at least one; none: no check)."""
    if slurm is not None and slurm.gpus_per_node:
        return slurm.gpus_per_node
    return {"all": 1, "none": 0}[gpus] if isinstance(gpus, str) else len(gpus)


class SweepChange(NamedTuple):
    """What a sweep's patches did to one field, as the header shows it: its value in the run
    file (`(unset)`) and in this run (`(deleted)`)."""

    field: str
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class SweepRun:
    """A job's place in a sweep (a run file with a matrix): the sweep's id, its label on each
    axis (none for a named extra run), and what its patches changed. Nothing of the other
    runs: a label added to an axis changes no other run's meaning."""

    sweep: str
    labels: tuple[tuple[str, str], ...]
    name: str | None
    changes: tuple[SweepChange, ...]
    # The Axolotl config file its patches were applied to, if they were.
    config_file: str | None = None

    @property
    def which(self) -> str:
        """Which run it is, as its header and `obc plan` say: `lr=1e-4 seed=2`, or `the
        named run long`."""
        return " ".join(f"{axis}={label}" for axis, label in self.labels) or \
            f"the named run {self.name}"


@dataclass(frozen=True, slots=True)
class Stage:
    """A part of a job's steps that runs on Slurm as a job of its own (slurm.stages): its
    name (its first step's), its steps, and what it asks Slurm for. `gpus` is what its steps
    see: none in a stage that asks for no GPUs (gpus_per_node: 0)."""

    name: str
    steps: tuple[Step, ...]
    slurm: Slurm
    gpus: Gpus


@dataclass(frozen=True, slots=True)
class StageOf:
    """Which stage of which job a stage's script is: OUT/<run>-<name>/job.sh, submitted by
    OUT/<run>/submit.sh after the stage before it."""

    run: str
    name: str


def lookup(program: str) -> Literal["path", "absolute", "run_dir"]:
    """How the shell finds `program`: on PATH, at an absolute (or ~/) path, or in the run dir."""
    if "/" not in program:
        return "path"
    return "absolute" if program.startswith(("/", "~")) else "run_dir"


@dataclass(frozen=True, slots=True)
class Job:
    """Everything the script needs, defaults applied; paths as written (`~` and `${NAME}`
    are expanded by the script where it runs)."""

    id: str
    source_file: str
    obc_version: str
    description: str | None
    runtime: Container | Native | Apptainer | Enroot
    gpus: Gpus
    run_dir: str
    # None for a native job that sets no cache dir: Hugging Face then uses its own default.
    cache_dir: str | None
    # The run dir may sit in a folder the team shares (paths.shared): it and the folders
    # above it may be another user's or group-writable.
    shared: bool
    steps: tuple[Step, ...]
    files: tuple[EmbeddedFile, ...]
    env: tuple[tuple[str, str], ...]
    secrets: tuple[Secret, ...]
    # Seconds between the TERM that stops a step and the KILL that ends it.
    stop_timeout: int
    slurm: Slurm | None = None
    checkpoints: Checkpoints | None = None
    on_signal: OnSignal | None = None
    retry: Retry | None = None
    # sha256 of the inputs that shaped the script (provenance.py): run file, embedded files,
    # the lock entry of its image. The pipeline sets it: it has the bytes.
    inputs: str = ""
    sweep: SweepRun | None = None
    # trainer.torchrun: how train launches the script.
    launcher: Launcher | None = None
    health: Health | None = None
    # On Slurm, the stages its steps run in, each a job of its own (none: all in this one);
    # and for a stage's own script, which stage it is (its steps are then the stage's).
    stages: tuple[Stage, ...] = ()
    stage: StageOf | None = None

    @property
    def pipeline(self) -> tuple[Step, ...]:
        """Every step of the job, whichever stage runs it: what its identity is made of, the
        same in the job's script and in each stage's."""
        return tuple(step for stage in self.stages for step in stage.steps) or self.steps
    notify: Notify | None = None

    @property
    def wandb_run_id(self) -> bool:
        """Whether the job gives Axolotl's W&B run an id of its own, one per run dir, so that
        a resumed attempt continues the run (with WANDB_RESUME=allow) rather than start
        another: with a trainer, unless the run file sets WANDB_RUN_ID."""
        return self.checkpoints is not None and "WANDB_RUN_ID" not in dict(self.env)

    @property
    def run_dir_base(self) -> str | None:
        """The folder of the run dir when the run dir's last part is the job's id, which the
        script and its summary then write as the job (`"$OBC_JOB"`, `<job>`): the runs of a
        sweep differ in no line of it."""
        base, _, last = self.run_dir.rpartition("/")
        return base if base and last == self.id else None

    @property
    def resumes(self) -> bool:
        """Whether train resumes from a checkpoint (resume is not `never`): the script then
        takes --resume-from, and a finished step counts only for the same training inputs."""
        return self.checkpoints is not None and self.checkpoints.resume != "never"

    @property
    def checkpoints_in_run_dir(self) -> bool:
        """Whether train writes its checkpoints under the run dir (not in a mount's folder)."""
        return self.checkpoints is not None and self.checkpoints.host_base is None

    @property
    def requeues_at_time_limit(self) -> bool:
        """Whether the job requeues itself when Slurm signals that the time limit is near:
        with slurm.max_restarts, and a signal only the time limit sends."""
        return bool(self.slurm and self.slurm.max_restarts and self.slurm.time_limit_signal)

    @property
    def writes_into_run_dir(self) -> bool:
        """Whether the script writes files into the run dir: the embedded files, and its own
        copy that srun starts for the node tasks, and the health check's program."""
        return bool(self.files or self.node_tasks or self.health)

    @property
    def run_hash(self) -> bool:
        """Whether the script makes the run dir's short hash: its container is named after it,
        and its W&B run id holds it."""
        return self.wandb_run_id or self.container is not None

    @property
    def restartable(self) -> bool:
        """Whether a run may start again from the top as the same Slurm job (requeued by
        Slurm, or by itself)."""
        return self.slurm is not None and self.slurm.restartable

    @property
    def checked_output_dir(self) -> bool:
        """Whether preflight checks train's output_dir (where the job moves checkpoints aside
        and makes the trigger file) as it checks the run dir: when it is outside the run dir
        (absolute, or a mount's source), or anywhere in a run dir a team shares, where another
        member could have put a link in its place."""
        return self.checkpoints is not None and \
            (self.shared or self.checkpoints.host_base is not None)

    @property
    def training_steps(self) -> tuple[Step, ...]:
        """The steps up to train, whose work checkpoints carry; every step, without a
        trainer."""
        names = training_names([step.name for step in self.pipeline],
                               self.checkpoints and self.checkpoints.step)
        return self.pipeline[:len(names)]

    @property
    def training_input_lines(self) -> tuple[str, ...]:
        """What the work of the training steps depends on, one line each: each embedded file
        (the trainer's config, attached files and data) by its sha256, the program that runs
        (image or venv) and each step's command. Not the run file itself: another run of its
        sweep, a time limit or a notification changes nothing the steps do."""
        files = tuple(f"file {f.path} {hashlib.sha256(f.content.encode()).hexdigest()}"
                      for f in sorted(self.files, key=lambda f: f.path))
        return (*files, f"program {self._program}",
                *(f"step {step.name} {json.dumps(step.argv)}" for step in self.training_steps))

    @property
    def training_inputs(self) -> str:
        """`sha256:HEX` of `training_input_lines`: the identity of the checkpoints train makes
        and of the steps that finished. The header shows it, `obc plan` compares it, and the
        script records it with each attempt."""
        listing = "".join(line + "\n" for line in self.training_input_lines)
        return "sha256:" + hashlib.sha256(listing.encode()).hexdigest()

    def is_training_step(self, step: Step) -> bool:
        """Whether `step` is one of the training steps, by its name (a stage's script has
        its own steps, and the whole job's)."""
        return any(step.name == training.name for training in self.training_steps)

    def step_inputs(self, step: Step) -> str:
        """What the record that a step finished names: the training inputs, and for a step
        after train, a hash of its own command too."""
        return self.training_inputs + self.step_inputs_suffix(step)

    def step_inputs_suffix(self, step: Step) -> str:
        """What step_inputs adds to the training inputs (inputs_suffix). A render asks for
        it of every step, and for the training inputs once: those hash every embedded file
        each time."""
        return inputs_suffix(None if self.is_training_step(step) else step.argv)

    @property
    def _program(self) -> str:
        """Where the steps' programs come from: the image (with its digest, when known), or
        the venv and PATH."""
        if self.native is not None:
            return f"venv {self.native.venv}" if self.native.venv else "PATH"
        image = self.runtime.image
        # An image file's checked SHA-256 (a registry's image names its digest, if any).
        sha256 = getattr(self.runtime, "image_sha256", None) \
            if getattr(self.runtime, "image_is_file", False) else None
        return f"image {image}" + (f" sha256:{sha256}" if sha256 else "")

    @property
    def container(self) -> Container | None:
        return self.runtime if isinstance(self.runtime, Container) else None

    @property
    def native(self) -> Native | None:
        return self.runtime if isinstance(self.runtime, Native) else None

    @property
    def apptainer(self) -> Apptainer | None:
        return self.runtime if isinstance(self.runtime, Apptainer) else None

    @property
    def enroot(self) -> Enroot | None:
        return self.runtime if isinstance(self.runtime, Enroot) else None

    @property
    def required_secrets(self) -> tuple[str, ...]:
        """The names of the secrets preflight requires to be set and not empty: the steps',
        and the one that holds notify's URL."""
        notify = (self.notify.url_secret,) if self.notify and self.notify.url_secret else ()
        names = tuple(secret.name for secret in self.secrets if secret.required)
        return names + tuple(name for name in notify if name not in names)

    @property
    def programs(self) -> tuple[str, ...]:
        """The distinct programs a native job runs, in step order."""
        if self.native is None:
            return ()
        return tuple(dict.fromkeys(step.argv[0] for step in self.steps))

    @property
    def file_folders(self) -> tuple[str, ...]:
        """The folders the embedded files go in, outermost first: a/b/c.py → a, a/b."""
        folders = []
        for file in self.files:
            parts = file.path.split("/")[:-1]
            folders += ["/".join(parts[: i + 1]) for i in range(len(parts))]
        return tuple(dict.fromkeys(folders))

    @property
    def node_steps(self) -> tuple[str, ...]:
        """The steps srun starts on every node of a job on several nodes."""
        if self.slurm is None or not self.slurm.multi_node:
            return ()
        return tuple(step.name for step in self.steps if step.nodes == "all")

    @property
    def node_tasks(self) -> tuple[str, ...]:
        """The steps on every node that srun starts as this script with --node-task (each
        node's private copy, checked against its sha256), which then runs the node's part;
        for enroot, srun starts the containers itself."""
        return () if self.enroot else self.node_steps

    @property
    def gpu_args(self) -> tuple[str, ...]:
        """The engine options that give the container this job's GPUs (the engine's own:
        Container.gpu_args)."""
        return self.container.gpu_args(self.gpus) if self.container else ()

    @property
    def cuda_visible_devices(self) -> str | None:
        """What a native, apptainer or enroot job sets CUDA_VISIBLE_DEVICES to, or None to
        leave it alone."""
        if self.gpus == "all":
            return None
        return "" if self.gpus == "none" else ",".join(self.gpus)

    @property
    def slurm_names(self) -> tuple[str, ...]:
        """The variables Slurm or the script set that a container must be given by name: the
        GPUs Slurm picked, and in a multi-node job the rendezvous."""
        if self.slurm is None:
            return ()
        gpus = ("CUDA_VISIBLE_DEVICES",) if self.slurm.gpus_per_node else ()
        return gpus + (RENDEZVOUS_NAMES if self.slurm.multi_node else ())

    @property
    def container_values(self) -> tuple[tuple[str, str], ...]:
        """What an apptainer or enroot job gives its containers by value: the cache, the
        env, and the GPUs runtime.gpus selects (HOME is apptainer's --home; enroot's is a
        folder of the container, since enroot itself finds its data under HOME)."""
        gpus = self.cuda_visible_devices
        return ((("HF_HOME", CONTAINER_CACHE_DIR), *self.env)
                + ((("CUDA_VISIBLE_DEVICES", gpus),) if gpus is not None else ()))

    @property
    def apptainer_args(self) -> tuple[str, ...]:
        """The options obc gives `apptainer exec` for this job (Apptainer.exec_args)."""
        return self.apptainer.exec_args(self.gpus) if self.apptainer else ()

    @property
    def enroot_args(self) -> tuple[str, ...]:
        """The options obc gives each srun step of this enroot job (Enroot.srun_args)."""
        return self.enroot.srun_args(self.passed_names) if self.enroot else ()

    @property
    def passed_names(self) -> tuple[str, ...]:
        """Every variable an apptainer or enroot job gives its containers: by value, the
        W&B run id the script makes, and by name."""
        run_id = ("WANDB_RUN_ID",) if self.wandb_run_id else ()
        return (*(name for name, _ in self.container_values), *run_id, *self.container_names)

    @property
    def container_names(self) -> tuple[str, ...]:
        """What an apptainer or enroot job gives its containers by name, from the job's own
        environment: the secrets, and what Slurm or the script set."""
        return (*(secret.name for secret in self.secrets), *self.slurm_names)


def training_names(names: list[str], checkpoint_step: str | None) -> list[str]:
    """The training steps among a job's steps `names` (in order): those up to the step whose
    checkpoints train makes (`checkpoint_step`), or every one without a trainer."""
    return names if checkpoint_step is None else names[:names.index(checkpoint_step) + 1]


def finished_inputs(training_inputs: str, argv: tuple[str, ...] | list[str] | None) -> str:
    """What `.obc/done/STEP` names once a step finished: the training inputs, and for a step
    after train (`argv`: its command; None for a training step) a hash of its command too."""
    return training_inputs + inputs_suffix(argv)


def inputs_suffix(argv: tuple[str, ...] | list[str] | None) -> str:
    """What finished_inputs adds to the training inputs: nothing for a training step (`argv`
    None), `+` and a hash of its command for a step after train."""
    if argv is None:
        return ""
    return f"+{hashlib.sha256(json.dumps(argv).encode()).hexdigest()[:16]}"


def stage_id(job: str, stage: str) -> str:
    """The id of a stage's job, and so the folder of its script under OUT: <job>-<stage>."""
    return f"{job}-{stage}"


def stage_job(job: Job, stage: Stage) -> Job:
    """The job of one stage of `job` (Job.stages): its steps and resources, in the job's run
    dir; OUT/<job>-<stage>/job.sh is its script."""
    health = job.health and dataclasses.replace(
        job.health, gpus=expected_gpus(stage.slurm, stage.gpus))
    return dataclasses.replace(
        job, id=stage_id(job.id, stage.name), steps=stage.steps, slurm=stage.slurm,
        gpus=stage.gpus, health=health, stage=StageOf(job.id, stage.name))
