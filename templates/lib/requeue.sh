# --- obc's library: requeue ------------------------------------------------------------
# A Slurm job that requeues itself (slurm.max_restarts, or retry under Slurm; docs/resume.md).

# obc_requeue MAX REASON [NODE]: unless the job has been restarted MAX times already, asks
# Slurm to run it again from the top (in an array, this task alone), on other nodes than
# NODE if given (added to its excluded nodes, which Slurm changes only while the job is
# pending), and ends this attempt; else returns false. The one way a job requeues itself:
# at the time limit, to retry a step, after a failed health check.
# shellcheck disable=SC2329,SC2086 # called from the traps; OBC_SIGNALS is split on purpose
obc_requeue() {
  [ -n "${SLURM_JOB_ID:-}" ] && [ "${SLURM_RESTART_COUNT:-0}" -lt "$1" ] || return 1
  # Told before, not after: Slurm ends this attempt, notify's command with it, once requeued.
  [ -z "$OBC_NOTIFY_ON" ] || obc_notify requeued
  OBC_ID=$SLURM_JOB_ID
  [ -z "${SLURM_ARRAY_JOB_ID:-}" ] || OBC_ID=${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}
  # Slurm stops a job it requeues at once (TERM), and changes its excluded nodes only after:
  # the job ignores the signals it would stop on from here, and records that it was requeued
  # rather than stopped. (If Slurm refuses, the caller ends the job all the same.)
  trap '' $OBC_SIGNALS
  scontrol requeue "$OBC_ID" || return 1
  [ "$#" -lt 3 ] || obc_exclude_node "$3"
  obc_say "$2: requeued (restart $((${SLURM_RESTART_COUNT:-0} + 1)) of $1)"
  obc_status requeued
  obc_exit 0
}

# The time limit is near: Slurm sent the job's OBC_TIME_LIMIT_SIGNAL. Requeues the job
# unless it has been restarted OBC_MAX_RESTARTS times (slurm.max_restarts).
# shellcheck disable=SC2329 # called from the traps, in a job with slurm.max_restarts
obc_at_time_limit() {
  obc_requeue "$OBC_MAX_RESTARTS" 'the time limit is near'
  obc_fail "the time limit is near, and the job has been restarted $OBC_MAX_RESTARTS times (slurm.max_restarts): giving up" 5
}

# Adds node $1 to the excluded nodes (ExcNodeList) of the requeued job OBC_ID.
# shellcheck disable=SC2329 # called by obc_requeue, which the traps call
obc_exclude_node() {
  OBC_WORD=$(scontrol show job -o "$OBC_ID" | sed -n 's/.* ExcNodeList=\([^ ]*\).*/\1/p')
  case $OBC_WORD in '' | '(null)') OBC_WORD=$1 ;; *) OBC_WORD=$OBC_WORD,$1 ;; esac
  if scontrol update "JobId=$OBC_ID" "ExcNodeList=$OBC_WORD"; then
    obc_say "excluded node $1 (ExcNodeList=$OBC_WORD)"
  else
    obc_say "cannot exclude node $1 from the requeued job"
  fi
}
