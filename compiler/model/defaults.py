"""Every default obc applies, in one place: what a job gets for a field its run file leaves out,
and the defaults of the tools obc drives that it must know to say what a job does.

normalise applies them to build the `Job`; the rules, the sweep and the renderers read them
here to judge or show the same value. Imports nothing.
"""

# obc's own, for a field the run file leaves out.
DEFAULT_IMAGE = (
    "axolotlai/axolotl:0.19.0-py3.12-cu130-2.12.1"
    "@sha256:9de7c7a5b8830480a7d2eb3b6d49759586615f5f8eb1126d5df29f8bd9fa324b"
)
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

# The tools' own, which obc does not set but must know.
# Where Axolotl writes checkpoints when the config does not say (its schema's default).
DEFAULT_OUTPUT_DIR = "./model-out"
# Where Axolotl 0.19 keeps the prepared dataset when the config names no dataset_prepared_path.
DEFAULT_PREPARED_DIR = "last_run_prepared"
# Seconds before the time limit Slurm sends a `--signal` that names none.
SLURM_DEFAULT_LEAD = 60
