# --- obc's library: stop_group ---------------------------------------------------------
# obc_stop_step for a step that is a process group on this machine (native steps, apptainer,
# enroot's srun).

# Stops the step: TERM to its whole process group (OBC_TERM_GROUP: native steps, enroot's
# srun), or only to its first process (apptainer, or srun for a step on every node), which
# passes it on to the program (to the whole group, the program would get it twice); then
# KILL for whatever is left of the group after the stop timeout; waits for the step, and
# when the whole group had the TERM, up to the stop timeout for the rest of it: a launcher
# may end at the TERM before the processes it started, which save a checkpoint
# (llamafactory-cli before its torchrun, trl sft before its trainer), and must not have a
# second TERM meanwhile from obc_close_log (transformers' Trainer would save twice).
# shellcheck disable=SC2329 # called from the traps
obc_stop_step() {
  # env's kill: the built-in kill of dash, busybox and mksh rejects a negative PID.
  env kill -s TERM -- "${OBC_TERM_GROUP:+-}$OBC_CHILD" 2>/dev/null
  # (In a subshell that execs, as in obc_start: so that $! is the killer's own process.)
  # shellcheck disable=SC2016 # expanded by the killer's shell
  (exec setsid sh -c 'sleep "$1"; env kill -s KILL -- "-$2"' sh "$OBC_STOP_TIMEOUT" \
    "$OBC_CHILD" >/dev/null 2>&1) &
  OBC_KILLER=$!
  wait "$OBC_CHILD" 2>/dev/null
  OBC_LEFT=$OBC_STOP_TIMEOUT
  while [ -n "$OBC_TERM_GROUP" ] && [ "$OBC_LEFT" -gt 0 ] &&
    env kill -0 -- "-$OBC_CHILD" 2>/dev/null; do
    sleep 1
    OBC_LEFT=$((OBC_LEFT - 1))
  done
  # The killer stays for whatever the program left running.
  env kill -0 -- "-$OBC_CHILD" 2>/dev/null || env kill -s TERM -- "-$OBC_KILLER" 2>/dev/null
}
