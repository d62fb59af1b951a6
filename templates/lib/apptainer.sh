# --- obc's library: apptainer ----------------------------------------------------------
# apptainer: each step runs with `apptainer exec` (or `singularity exec`), as the user.

# apptainer, or singularity where only that is installed (SingularityCE, an older Apptainer):
# each reads the container's variables with its own prefix.
obc_find_apptainer() {
  OBC_APPTAINER=apptainer OBC_ENV_PREFIX=APPTAINERENV_
  if ! obc_which apptainer "$PATH" >/dev/null && obc_which singularity "$PATH" >/dev/null; then
    OBC_APPTAINER=singularity OBC_ENV_PREFIX=SINGULARITYENV_
  fi
}

# obc_pass RUNNER NAME VALUE: the container gets NAME=VALUE through the variable
# $OBC_ENV_PREFIX$NAME. Under --dry-run, prints the export.
obc_pass() {
  if [ "$1" = obc_print_command ]; then
    obc_print_command export "$OBC_ENV_PREFIX$2=$3"
  else
    export "$OBC_ENV_PREFIX$2=$3"
  fi
}

# obc_pass_by_name RUNNER NAME [VALUE]: obc_pass for a value that is not in this script (a
# secret, what Slurm or the rendezvous set), which --dry-run prints as "$NAME"; nothing
# without a VALUE (the name is not set).
# shellcheck disable=SC2329 # called by the job's obc_container_env, for the names it passes
obc_pass_by_name() {
  [ "$#" -ge 3 ] || return 0
  if [ "$1" = obc_print_command ]; then
    printf 'export %s%s="$%s"\n' "$OBC_ENV_PREFIX" "$2" "$2"
  else
    obc_pass "$@"
  fi
}

# Preflight: apptainer (or singularity) is there.
obc_check_runtime() {
  obc_which "$OBC_APPTAINER" "$PATH" >/dev/null || obc_preflight_failure 'apptainer (or singularity) not found on PATH'
}

# Before the steps: the containers get what the header says: a variable with either prefix
# that the job inherited would give them a name nobody reviewed (and one name with both
# prefixes makes apptainer print both values). HOME's folder in the run dir; the steps run
# in the run dir.
obc_prepare_runtime() {
  obc_unset_inherited APPTAINERENV_ SINGULARITYENV_
  obc_run mkdir -p -- "$OBC_RUN_DIR/.obc/home" || obc_exit 1
  obc_run cd -- "$OBC_RUN_DIR" || obc_exit 1
}

# Before a node's part of a step: it runs in the run dir.
# shellcheck disable=SC2329 # called by obc_node_task, in a job with steps on every node
obc_node_prepare() {
  cd -- "$OBC_RUN_DIR" || exit 1  # steps run in the run dir
}
