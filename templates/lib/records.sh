# --- obc's library: records ------------------------------------------------------------
# Run records (docs/resume.md, "Run records"): each run of the job in a run dir is an attempt; its
# state goes to .obc/status.json and each step's output to .obc/logs/STEP.ATTEMPT.log too.

obc_now() {
  date -u +%Y-%m-%dT%H:%M:%SZ
}

# Prints $1 as a JSON value: null when it is empty, else a string. (The values are obc's
# own: names, times, numbers and checkpoint paths, which hold no quote or backslash.)
obc_json() {
  if [ -n "$1" ]; then printf '"%s"' "$1"; else printf null; fi
}

# Counts this run as the next attempt of the job in its run dir, and records it as running.
obc_begin_attempt() {
  OBC_ATTEMPT=$(cat -- "$OBC_RUN_DIR/.obc/attempt" 2>/dev/null)
  case $OBC_ATTEMPT in '' | *[!0-9]*) OBC_ATTEMPT=0 ;; esac
  OBC_ATTEMPT=$((OBC_ATTEMPT + 1))
  OBC_STARTED_AT=$(obc_now)
  if ! { mkdir -p -- "$OBC_RUN_DIR/.obc/logs" && obc_save_record attempt "$OBC_ATTEMPT"; }; then
    obc_fail "cannot record the attempt in $OBC_RUN_DIR/.obc"
  fi
  obc_status running
  [ -z "$OBC_NOTIFY_ON" ] || obc_notify started
}

# obc_status STATE [EXIT_CODE]: records this attempt's state in .obc/status.json, and tells
# notify's command or URL of the job's end (part notify; requeued, obc_requeue tells).
obc_status() {
  [ -n "$OBC_ATTEMPT" ] || return 0
  OBC_ENDED_AT=
  case $1 in running) ;; *) OBC_ENDED_AT=$(obc_now) ;; esac
  OBC_RECORD=$(
    printf '{"job": "%s", "attempt": %s, "state": "%s", "step": %s, ' \
      "$OBC_JOB" "$OBC_ATTEMPT" "$1" "$(obc_json "${OBC_NAME:-}")"
    printf '"exit_code": %s, "started_at": "%s", "ended_at": %s, "slurm_job_id": %s, ' \
      "${2:-null}" "$OBC_STARTED_AT" "$(obc_json "$OBC_ENDED_AT")" \
      "$(obc_json "${SLURM_JOB_ID:-}")"
    printf '"slurm_restarts": %s, "inputs": "%s", "resumed_from": %s, ' \
      "${SLURM_RESTART_COUNT:-null}" "$OBC_INPUTS" "$(obc_json "$OBC_RESUMED_FROM")"
    printf '"resumed_from_inputs": %s}' "$(obc_json "${OBC_RESUMED_INPUTS:-}")")
  obc_save_record status.json "$OBC_RECORD" ||
    obc_say "cannot record the status in $OBC_RUN_DIR/.obc"
  [ -z "$OBC_NOTIFY_ON" ] || case $1 in
    failed) obc_notify gave_up "${2:-1}" ;;
    succeeded) obc_notify 'done' 0 ;;
  esac
}

# obc_save_record NAME LINE: replaces the record .obc/NAME with LINE, whole or not at all
# (the last whole record stays): written into the private temporary folder, read back (a
# full disk leaves a file empty or cut short), and only then renamed into place.
obc_save_record() {
  if printf '%s\n' "$2" > "$OBC_TMP/$1" && [ "$(cat -- "$OBC_TMP/$1")" = "$2" ] &&
     mv -fT -- "$OBC_TMP/$1" "$OBC_RUN_DIR/.obc/$1"; then
    return 0
  fi
  rm -f -- "$OBC_TMP/$1"
  return 1
}

# job.sh --status: the record of the job's last attempt in the run dir, if it is whole: one
# that a full disk cut short, by an older obc or anything else, is not shown as a state. A
# record that says running, of a run that has gone without a word (killed), says killed.
obc_show_status() {
  obc_read_record
  case $OBC_RECORD in
    *'"state": "running"'*)
      # The record is written before the lock is let go: read again once the run is gone,
      # it is the run's last word.
      if obc_run_gone && obc_read_record; then
        case $OBC_RECORD in
          *'"state": "running"'*)
            OBC_RECORD=${OBC_RECORD%%'"state": "running"'*}'"state": "killed"'${OBC_RECORD#*'"state": "running"'} ;;
        esac
      fi ;;
  esac
  printf '%s\n' "$OBC_RECORD"
  exit 0
}

# Reads the record .obc/status.json into OBC_RECORD; without a whole record, says why and
# exits 1.
obc_read_record() {
  OBC_RECORD_FILE=$OBC_RUN_DIR/.obc/status.json
  if [ ! -e "$OBC_RECORD_FILE" ] && [ ! -L "$OBC_RECORD_FILE" ]; then
    obc_say "no run of $OBC_JOB in $OBC_RUN_DIR yet"
    exit 1
  fi
  if ! OBC_RECORD=$(cat -- "$OBC_RECORD_FILE" 2>/dev/null); then
    obc_say "cannot read the record $OBC_RECORD_FILE"
    exit 1
  fi
  case $OBC_RECORD in
    '{"job": '*', "resumed_from": '*'}') return 0 ;;
  esac
  obc_say "the record $OBC_RECORD_FILE is empty or cut short (a full disk?): no state to show"
  exit 1
}

# True when the run the run dir's lock names has gone: the lock is gone, or on its own
# machine nothing holds it any more (obc_ended_lock), or on another machine its Slurm job
# has ended. A run on another machine outside Slurm cannot be judged: it is not gone.
obc_run_gone() {
  OBC_LOCK=$OBC_RUN_DIR/.obc/lock OBC_HOST=
  [ -e "$OBC_LOCK" ] || [ -L "$OBC_LOCK" ] || return 0
  ! obc_ended_lock || return 0
  [ -n "$OBC_HOST" ] && [ "$OBC_HOST" != "$(obc_host)" ] && [ "${OBC_HELD:--}" != - ] &&
    obc_slurm_job_ended "$OBC_HELD"
}

# True when Slurm says job $1 has ended, or no longer knows it; not when squeue cannot say.
obc_slurm_job_ended() {
  if OBC_WORD=$(squeue -h -j "$1" -t all -o %T 2>&1); then
    # compiler/model/slurm.py's SLURM_ENDED_STATES, which tests/compile/test_library.py
    # holds this list to.
    case $OBC_WORD in
      BOOT_FAIL | CANCELLED | COMPLETED | DEADLINE | FAILED | NODE_FAIL) return 0 ;;
      OUT_OF_MEMORY | PREEMPTED | TIMEOUT) return 0 ;;
    esac
    return 1
  fi
  case $OBC_WORD in *'Invalid job id'*) return 0 ;; esac
  return 1
}

# The step's output goes to its log as well as to the job's own output: two tees, fed by
# named pipes that the step (started first: see obc_start) writes. The tees ignore the
# signals that stop the job (OBC_SIGNALS, the job's), so that nothing the step says while it
# stops is lost.
# shellcheck disable=SC2086 # OBC_SIGNALS is a list of names, split on purpose
obc_tee_log() {
  OBC_LOG=$OBC_RUN_DIR/.obc/logs/$OBC_NAME.$OBC_ATTEMPT.log
  (trap '' $OBC_SIGNALS; exec tee -a "$OBC_LOG" < "$OBC_TMP/err" >&2) &
  OBC_TEE_ERR=$!
  (trap '' $OBC_SIGNALS; exec tee -a "$OBC_LOG" < "$OBC_TMP/out") &
  # Set last: a stop signal may run obc_close_log between any two of these lines, and it
  # waits for the tees only once both are known.
  OBC_TEE_OUT=$!
}

# Once the step has ended: what it left running is ended too (it would hold the log's pipes
# open), and the tees are waited for.
obc_close_log() {
  [ -n "$OBC_TEE_OUT" ] || return 0
  env kill -s TERM -- "-$OBC_CHILD" 2>/dev/null
  wait "$OBC_TEE_OUT" "$OBC_TEE_ERR" 2>/dev/null
  OBC_TEE_OUT=
}
