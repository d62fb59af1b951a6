# --- obc's library: enroot -------------------------------------------------------------
# enroot: each step is an srun step, in containers that pyxis makes with enroot (the job's
# obc_srun).

# obc_step_command RUNNER PROGRAM [ARG...]: hands RUNNER the whole command of a step: one
# task, in its container.
obc_step_command() {
  OBC_RUNNER=$1
  shift
  obc_srun "$OBC_RUNNER" 1 "$@"
}

# One node's part of a step, in its container: a shell sets NODE_RANK from the node's
# number in the job, runs the step, and if the step fails records it at $1, the first
# node's temporary folder (relative to the run dir, the container's working directory),
# unless another node's part failed first (obc_first_failure). The shell waits for the step
# through any signal (its trap does nothing): Slurm sends each one to every process of the
# task, and the task ends with the step's own code.
# shellcheck disable=SC2016 # expanded by the node's shell
OBC_NODE_PART='
  NODE_RANK=$SLURM_NODEID failed=$1
  export NODE_RANK
  shift
  trap : TERM INT HUP
  "$@"
  code=$?
  [ "$code" -eq 0 ] || ln -s "$NODE_RANK $code ${SLURMD_NODENAME:-$(uname -n)}" "$failed" 2>/dev/null
  exit "$code"
'

# obc_node_tasks RUNNER PROGRAM [ARG...]: the step on every node, one task each.
# shellcheck disable=SC2329 # called by obc_on_every_node, in a job with steps on every node
obc_node_tasks() {
  OBC_RUNNER=$1
  shift
  obc_srun "$OBC_RUNNER" "$NNODES" /bin/sh -c "$OBC_NODE_PART" sh ".obc/${OBC_TMP##*/}/failed" \
    "$@"
}

# Preflight: a Slurm job, whose srun has pyxis's options.
obc_check_runtime() {
  [ -n "${SLURM_JOB_ID:-}" ] || obc_preflight_failure 'an enroot job runs its steps with srun, in a Slurm job: submit it with sbatch'
  if obc_which srun "$PATH" >/dev/null; then
    case $(srun --help 2>&1) in
      *--container-image*) ;;
      *) obc_preflight_failure 'srun has no --container-image: pyxis is not installed' ;;
    esac
  else
    obc_preflight_failure 'srun (Slurm) not found on PATH'
  fi
}

# Preflight: pyxis writes mounts into a shell script for enroot, between double quotes:
# none of the folders $@ it mounts may hold a character that ends or expands there.
obc_check_pyxis_mounts() {
  for OBC_WORD in "$@"; do
    case $OBC_WORD in
      *\"* | *\$* | *\`* | *\\*)
        obc_preflight_failure "pyxis writes mounts into a shell script for enroot, between double quotes: $OBC_WORD cannot be one" ;;
    esac
  done
}

# Before the steps: pyxis reads an option it is not given from PYXIS_CONTAINER_<OPTION>:
# one the job inherited would change the containers. The steps run in the run dir.
obc_prepare_runtime() {
  obc_unset_inherited PYXIS_CONTAINER_
  obc_run cd -- "$OBC_RUN_DIR" || obc_exit 1
}
