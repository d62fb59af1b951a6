# --- obc's library: retry --------------------------------------------------------------
# retry (README, "Preemption and resume"): a step that fails with one of the exit codes
# OBC_RETRY_EXIT_CODES is run again, up to OBC_RETRY_MAX times.

# True when the step may be tried again after exit code $OBC_STATUS: locally it is run again
# at once; under Slurm (OBC_RETRY_REQUEUES) the job requeues itself (and skips the steps it
# finished).
obc_retry() {
  case " $OBC_RETRY_EXIT_CODES " in
    *" $OBC_STATUS "*) ;;
    *) return 1 ;;
  esac
  if [ -n "$OBC_RETRY_REQUEUES" ] && [ -n "${SLURM_JOB_ID:-}" ]; then
    obc_requeue "$OBC_RETRY_MAX" "step $OBC_NAME exited with $OBC_STATUS" || return 1
  fi
  OBC_TRIES=$((${OBC_TRIES:-0} + 1))
  [ "$OBC_TRIES" -le "$OBC_RETRY_MAX" ] || return 1
  obc_announce "exited with $OBC_STATUS; trying again ($OBC_TRIES of $OBC_RETRY_MAX)"
}
