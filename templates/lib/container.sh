# --- obc's library: container ----------------------------------------------------------
# docker and podman (the job's OBC_RUNTIME): each step runs in a container of its own, named
# OBC_CONTAINER after the run dir. The job's obc_step_command runs the step in a container
# that is removed when it ends, with the run dir at /workspace/run. --init makes PID 1 a
# tiny init that passes signals on (a trainer as PID 1 would ignore TERM). `--` ends the
# engine's options, in both engines: were an option before it to want a value, it would
# take the `--`, never the image (obc also passes each option whole, as --name=value).

# Stops the step's container (TERM, then KILL after the stop timeout) and removes it, also
# when it was created but not started (`stop` leaves that alone, and the client would go
# on to start it); the client then ends by itself. With no container yet (the client is
# still pulling the image), the client is stopped instead, and whatever it created
# meanwhile is removed once it has ended.
# shellcheck disable=SC2329 # called from the traps
obc_stop_step() {
  "$OBC_RUNTIME" stop -t "$OBC_STOP_TIMEOUT" "$OBC_CONTAINER" >/dev/null 2>&1 ||
    env kill -s TERM -- "-$OBC_CHILD" 2>/dev/null
  "$OBC_RUNTIME" rm -f "$OBC_CONTAINER" >/dev/null 2>&1
  wait "$OBC_CHILD" 2>/dev/null
  "$OBC_RUNTIME" rm -f "$OBC_CONTAINER" >/dev/null 2>&1
}

# Removes a container of this run dir that an earlier run left behind (killed before it
# could). One that still runs is not removed: its trainer writes into the run dir (an
# earlier run killed with its client: the run dir's lock no longer says so), and this run
# refuses to start beside it.
obc_remove_leftover() {
  [ -z "$OBC_DRY_RUN" ] || return 0
  if OBC_WORD=$("$OBC_RUNTIME" container inspect --format '{{.State.Running}}' "$OBC_CONTAINER" 2>/dev/null); then
    [ "$OBC_WORD" != true ] ||
      obc_fail "the run dir $OBC_RUN_DIR is in use by container $OBC_CONTAINER, which an earlier run of this job started and which still runs" 4
    obc_say "removing container $OBC_CONTAINER, left by an earlier run in this run dir"
    "$OBC_RUNTIME" rm -f "$OBC_CONTAINER" >/dev/null 2>&1 ||
      obc_fail "cannot remove container $OBC_CONTAINER"
  fi
}

# Preflight: the engine is there.
obc_check_runtime() {
  command -v "$OBC_RUNTIME" >/dev/null 2>&1 || obc_preflight_failure "$OBC_RUNTIME not found on PATH"
}

# Before the steps: HOME's folder in the run dir, for steps that run as the user who starts
# the job (OBC_HOME_IN_RUN_DIR), and no container left by an earlier run.
obc_prepare_runtime() {
  [ -z "$OBC_HOME_IN_RUN_DIR" ] || obc_run mkdir -p -- "$OBC_RUN_DIR/.obc/home" || obc_exit 1
  obc_remove_leftover
}

# Before a node's part of a step: its container has a name of its own (the nodes' engines
# may be one).
# shellcheck disable=SC2329 # called by obc_node_task, in a job with steps on every node
obc_node_prepare() {
  OBC_CONTAINER=$OBC_CONTAINER-$SLURM_NODEID
  obc_remove_leftover
}
