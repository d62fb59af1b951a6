"""The long options sbatch knows, for `slurm.extra`.

Taken from Slurm's src/common/slurm_opt.c (the options with a name and an sbatch setter),
releases 22.05 to 25.11, all of them: a name only newer releases know is still an option, and
with more names an abbreviation is only ever more ambiguous, never read as another option
(the one name an older sbatch reads otherwise, --extra, rules/slurm.py checks both ways).
tests/slurm/test_slurm.py checks the 22.05 ones, and sbatch's abbreviation rule, against the real
sbatch of the test cluster. Options of SPANK plugins (pyxis's --container-image) depend on
the cluster and are not here.
"""

from __future__ import annotations

# sbatch 22.05 (Debian 12's, and the test cluster's).
SBATCH_22_05_OPTIONS = frozenset((
    "account", "acctg-freq", "array", "batch", "bb", "bbf", "begin", "chdir", "cluster",
    "cluster-constraint", "clusters", "comment", "constraint", "container", "context",
    "contiguous", "core-spec", "cores-per-socket", "cpu-freq", "cpus-per-gpu",
    "cpus-per-task", "deadline", "delay-boot", "dependency", "distribution", "error",
    "exclude", "exclusive", "export", "export-file", "extra-node-info", "get-user-env",
    "gid", "gpu-bind", "gpu-freq", "gpus", "gpus-per-node", "gpus-per-socket",
    "gpus-per-task", "gres", "gres-flags", "help", "hint", "hold", "ignore-pbs", "input",
    "job-name", "kill-on-invalid-dep", "licenses", "mail-type", "mail-user", "mcs-label",
    "mem", "mem-bind", "mem-per-cpu", "mem-per-gpu", "mincpus", "network", "nice",
    "no-kill", "no-requeue", "nodefile", "nodelist", "nodes", "ntasks", "ntasks-per-core",
    "ntasks-per-gpu", "ntasks-per-node", "ntasks-per-socket", "ntasks-per-tres",
    "open-mode", "output", "overcommit", "oversubscribe", "parsable", "partition", "power",
    "prefer", "priority", "profile", "propagate", "qos", "quiet", "reboot", "requeue",
    "reservation", "signal", "sockets-per-node", "spread-job", "switches", "tasks-per-node",
    "test-only", "thread-spec", "threads-per-core", "time", "time-min", "tmp", "uid",
    "usage", "use-min-nodes", "verbose", "version", "wait", "wait-all-nodes", "wckey",
    "wrap",
))
# Added by 23.02 to 25.11.
NEWER_SBATCH_OPTIONS = frozenset((
    "autocomplete", "consolidate-segments", "container-id", "external", "extra",
    "oom-kill-step", "resources", "resv-ports", "segment", "spread-segments", "stepmgr",
    "tres-bind", "tres-per-task",
))
SBATCH_OPTIONS = SBATCH_22_05_OPTIONS | NEWER_SBATCH_OPTIONS

# Options that are another name of one option (the same getopt value in slurm_opt.c).
SBATCH_ALIASES = {"tasks-per-node": "ntasks-per-node"}


def sbatch_matches(name: str, options: frozenset[str] = SBATCH_OPTIONS) -> list[str]:
    """Return the options sbatch reads `--name` as: itself when it is an option, else every
    option it abbreviates. getopt_long takes an abbreviation that fits one option (or several
    of one getopt value: no abbreviation here fits two such options), and refuses the rest."""
    if name in options:
        return [name]
    return sorted(option for option in options if option.startswith(name))


def sbatch_spellings(name: str) -> list[str]:
    """Return every `--word` that sbatch reads as `--name`: the name and its abbreviations."""
    return [name[:end] for end in range(1, len(name) + 1)
            if sbatch_matches(name[:end]) == [name]]


# Arity, from the option table of slurm_opt.c: these take no value, these may take one, the
# rest need one (`--name=value`, as an #SBATCH line writes it).
SBATCH_FLAGS = frozenset((
    "contiguous", "help", "hold", "ignore-pbs", "no-requeue", "overcommit", "oversubscribe",
    "parsable", "quiet", "reboot", "requeue", "spread-job", "test-only", "usage",
    "use-min-nodes", "verbose", "version", "wait",
))
SBATCH_OPTIONAL_VALUE = frozenset((
    "exclusive", "get-user-env", "nice", "no-kill", "propagate",
))

# What slurm.extra takes without a site policy (docs/security.md): options that neither
# change who the job runs as, where it starts or what it reads, nor take more of the cluster
# than the fields say, nor bypass the site's scheduling. A site policy allows more
# (sbatch.allowed in obc-policy.yaml), or less (sbatch.refused).
SBATCH_DEFAULT_ALLOWED = frozenset((
    "acctg-freq", "begin", "comment", "contiguous", "cores-per-socket", "cpu-freq",
    "cpus-per-gpu", "deadline", "dependency", "distribution", "error", "exclude", "gpu-bind",
    "gpu-freq", "hint", "hold", "kill-on-invalid-dep", "licenses", "mail-type", "mail-user",
    "mem-bind", "mem-per-cpu", "mem-per-gpu", "mincpus", "no-kill", "nodelist", "prefer",
    "profile", "propagate", "reservation", "sockets-per-node", "spread-job", "switches",
    "threads-per-core", "time-min", "tmp", "use-min-nodes", "wait-all-nodes", "wckey",
))


def arity_problem(name: str, has_value: bool) -> str | None:
    """Why `--name` (with a value or without) is not how sbatch takes it, if it is not."""
    if name in SBATCH_FLAGS and has_value:
        return f"--{name} takes no value"
    if name not in SBATCH_FLAGS | SBATCH_OPTIONAL_VALUE and not has_value:
        return f"--{name} needs a value: write --{name}=VALUE"
    return None
