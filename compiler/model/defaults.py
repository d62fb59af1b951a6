"""Every default obc applies, in one place: what a job gets for a field its run file leaves out,
and the defaults of the tools obc drives that it must know to say what a job does.

normalise applies them to build the `Job`; the rules, the sweep and the renderers read them
here to judge or show the same value. Imports nothing.
"""

# obc's own, for a field the run file leaves out.
DEFAULT_GPUS = "all"
DEFAULT_USER = "invoker"  # runtimes.INVOKER: the user who starts the job
DEFAULT_CLEANENV = True
DEFAULT_CONTAIN = True
DEFAULT_ENROOT_VERSION = 3
DEFAULT_READONLY = False
DEFAULT_SHARED = False
DEFAULT_PREPROCESS = False
DEFAULT_MERGE = False
DEFAULT_ON_SIGNAL = True
DEFAULT_SECRET_REQUIRED = True
DEFAULT_SLURM_NODES = 1
DEFAULT_REQUEUE = False
DEFAULT_IMAGE = (
    "axolotlai/axolotl:0.19.0-py3.12-cu130-2.12.1"
    "@sha256:9de7c7a5b8830480a7d2eb3b6d49759586615f5f8eb1126d5df29f8bd9fa324b"
)
# The Axolotl release a config is checked against when the run file names none: the image's.
DEFAULT_AXOLOTL_VERSION = "0.19"
# trainer.torchrun: the launcher, where the script writes its checkpoints, which of them train
# resumes from (with resume.flag), and the ranks of a node when neither Slurm nor
# runtime.gpus says how many GPUs it has.
DEFAULT_LAUNCHER = "torchrun"
DEFAULT_TORCHRUN_OUTPUT_DIR = "output"
DEFAULT_NPROC_PER_NODE = 1
# The TRL release a trainer.trl config is checked against when the run file names none.
DEFAULT_TRL_VERSION = "1.16"
# The LLaMA-Factory release a trainer.llamafactory config is checked against when the run
# file names none.
DEFAULT_LLAMAFACTORY_VERSION = "0.9"
# Seconds a stopped step has between TERM and KILL: a trainer that saves on TERM needs more
# than the engines' 10 s.
DEFAULT_STOP_TIMEOUT = 60
# Which checkpoint train resumes from (model.job.Resume).
DEFAULT_RESUME = "same-inputs"
DEFAULT_RUN_DIR = "~/overbrainer/runs/{id}"
DEFAULT_CACHE_DIR = "~/overbrainer/.hf-cache"
# Seconds a checkpointing trainer has to save on a stop signal, and how often the job looks
# for the checkpoint it asked for.
DEFAULT_GRACE = 45
DEFAULT_CHECK_INTERVAL = 1
# The signal Slurm sends the script before the time limit.
DEFAULT_SLURM_SIGNAL = "B:TERM@120"
# With slurm.max_restarts: a signal that scancel and preemption do not send, so that the job
# can tell the time limit and requeue itself.
DEFAULT_RESTART_SIGNAL = "B:USR1@120"
DEFAULT_SLURM_OUTPUT = "%x-%j.out"
DEFAULT_RENDEZVOUS_PORT = 29500
# The most runs a sweep's matrix may make.
DEFAULT_MAX_RUNS = 256
# health: seconds the all-reduce may take on a node, torch's start included; and what a
# failed check does.
DEFAULT_HEALTH_TIMEOUT = 120
DEFAULT_HEALTH_ON_FAILURE = "stop"

# The defaults the run file's schema declares (for editors), by field path: the schema must
# declare exactly these (tests/unit/test_defaults.py).
RUN_FILE_DEFAULTS = {
    "runtime.cleanenv": DEFAULT_CLEANENV,
    "runtime.contain": DEFAULT_CONTAIN,
    "runtime.enroot_version": DEFAULT_ENROOT_VERSION,
    "runtime.gpus": DEFAULT_GPUS,
    "runtime.mounts.readonly": DEFAULT_READONLY,
    "runtime.user": DEFAULT_USER,
    "runtime.stop_timeout": DEFAULT_STOP_TIMEOUT,
    "paths.shared": DEFAULT_SHARED,
    "trainer.axolotl.preprocess": DEFAULT_PREPROCESS,
    "trainer.axolotl.merge": DEFAULT_MERGE,
    "trainer.axolotl.resume": DEFAULT_RESUME,
    "trainer.axolotl.version": DEFAULT_AXOLOTL_VERSION,
    "trainer.llamafactory.resume": DEFAULT_RESUME,
    "trainer.llamafactory.version": DEFAULT_LLAMAFACTORY_VERSION,
    "trainer.torchrun.launcher": DEFAULT_LAUNCHER,
    "trainer.torchrun.output_dir": DEFAULT_TORCHRUN_OUTPUT_DIR,
    "trainer.torchrun.resume.from": DEFAULT_RESUME,
    "trainer.trl.merge": DEFAULT_MERGE,
    "trainer.trl.resume": DEFAULT_RESUME,
    "trainer.trl.version": DEFAULT_TRL_VERSION,
    "checkpoint.on_signal": DEFAULT_ON_SIGNAL,
    "checkpoint.grace": DEFAULT_GRACE,
    "checkpoint.check_interval": DEFAULT_CHECK_INTERVAL,
    "secrets.required": DEFAULT_SECRET_REQUIRED,
    "slurm.nodes": DEFAULT_SLURM_NODES,
    "slurm.requeue": DEFAULT_REQUEUE,
    "slurm.rendezvous_port": DEFAULT_RENDEZVOUS_PORT,
    "matrix.max_runs": DEFAULT_MAX_RUNS,
    "health.timeout": DEFAULT_HEALTH_TIMEOUT,
    "health.on_failure": DEFAULT_HEALTH_ON_FAILURE,
}

# The tools' own, which obc does not set but must know.
# Where Axolotl writes checkpoints when the config does not say (its schema's default).
DEFAULT_OUTPUT_DIR = "./model-out"
# Where TRL and LLaMA-Factory write checkpoints when the config does not say (transformers'
# TrainingArguments, training_args.py).
DEFAULT_TRAINER_OUTPUT_DIR = "trainer_output"
# Where Axolotl 0.19 keeps the prepared dataset when the config names no dataset_prepared_path.
DEFAULT_PREPARED_DIR = "last_run_prepared"
# Seconds before the time limit Slurm sends a `--signal` that names none.
SLURM_DEFAULT_LEAD = 60
