# --- obc's library: retry --------------------------------------------------------------
# retry (docs/retry.md): a step that fails for a cause another try may not meet (OBC_CAUSES,
# the part causes: a lost node, a network error, preemption), or with one of the
# exit codes OBC_RETRY_EXIT_CODES, is run again, up to OBC_RETRY_MAX times; one that fails
# for a user error (out of memory, a config error) is not, and the job says which log line
# told.

# Before each try of a step: where its lines of the log begin, and how many OOM kills its
# cgroup has counted so far.
obc_mark_try() {
  OBC_TRY_LINE=1 OBC_OOM_KILLS=$(obc_oom_kills)
  OBC_WORD=$OBC_RUN_DIR/.obc/logs/$OBC_NAME.$OBC_ATTEMPT.log
  [ ! -f "$OBC_WORD" ] || OBC_TRY_LINE=$(($(wc -l < "$OBC_WORD") + 1))
}

# Prints the OOM kills the job's cgroup (v2) has counted, if it can tell.
obc_oom_kills() {
  OBC_WORD=$(sed -n 's/^0:://p' /proc/self/cgroup 2>/dev/null)
  sed -n 's/^oom_kill //p' "/sys/fs/cgroup${OBC_WORD%/}/memory.events" 2>/dev/null
}

# Why the step failed: the first cause of OBC_CAUSES (`ACTION|CODES|NAME|LOG`) whose exit
# codes, if it lists any, hold OBC_STATUS, and whose LOG, if any, a line of this try's log
# matches (or `memory.events: oom_kill`, when its cgroup counted an OOM kill during it). Sets
# OBC_ACTION (retry, stop, or empty for none), OBC_CAUSE and OBC_WHERE (`log line N`).
# shellcheck disable=SC2153 # OBC_CAUSES, the part causes' table, is no misspelt OBC_CAUSE
obc_cause() {
  OBC_EVIDENCE=
  [ -z "${OBC_OOM_KILLS:-}" ] || [ "$(obc_oom_kills)" = "$OBC_OOM_KILLS" ] ||
    OBC_EVIDENCE='memory.events: oom_kill'
  OBC_WORD=$OBC_RUN_DIR/.obc/logs/$OBC_NAME.$OBC_ATTEMPT.log
  OBC_WORD=$({ tail -n "+${OBC_TRY_LINE:-1}" -- "$OBC_WORD" 2>/dev/null || :; } | tr -d '\000' |
    OBC_CAUSES=$OBC_CAUSES OBC_STATUS=$OBC_STATUS OBC_TRY_LINE=${OBC_TRY_LINE:-1} \
    OBC_EVIDENCE=$OBC_EVIDENCE LC_ALL=C awk '
      BEGIN {
        count = split(ENVIRON["OBC_CAUSES"], cause, "\n")
        for (r = 1; r <= count; r++) {
          rest = cause[r]
          at = index(rest, "|"); action[r] = substr(rest, 1, at - 1); rest = substr(rest, at + 1)
          at = index(rest, "|"); codes = " " substr(rest, 1, at - 1) " "; rest = substr(rest, at + 1)
          at = index(rest, "|"); name[r] = substr(rest, 1, at - 1); pattern[r] = substr(rest, at + 1)
          fits[r] = codes == "  " || index(codes, " " ENVIRON["OBC_STATUS"] " ") > 0
        }
      }
      {
        for (r = 1; r <= count; r++)
          if (fits[r] && pattern[r] != "" && !(r in line) && $0 ~ pattern[r])
            line[r] = "log line " (NR + ENVIRON["OBC_TRY_LINE"] - 1)
      }
      END {
        evidence = ENVIRON["OBC_EVIDENCE"]
        for (r = 1; r <= count; r++) {
          if (!fits[r]) continue
          if (pattern[r] == "") where = "exit code " ENVIRON["OBC_STATUS"]
          else if (r in line) where = line[r]
          else if (evidence != "" && evidence ~ pattern[r]) where = "memory.events of its cgroup"
          else continue
          printf "%s|%s|%s\n", action[r], where, name[r]
          exit
        }
      }')
  # (The bar quoted: mksh and ksh93 read a bare one in a pattern as an alternative.)
  OBC_ACTION=${OBC_WORD%%'|'*}
  OBC_WORD=${OBC_WORD#*'|'}
  OBC_WHERE=${OBC_WORD%%'|'*}
  OBC_CAUSE=${OBC_WORD#*'|'}
}

# True when the step may be tried again after exit code $OBC_STATUS: locally it is run again
# at once; under Slurm (OBC_RETRY_REQUEUES) the job requeues itself (and skips the steps it
# finished).
obc_retry() {
  obc_cause
  case $OBC_ACTION in
    stop)
      obc_say "$OBC_NAME failed: $OBC_CAUSE ($OBC_WHERE), not retried"
      return 1 ;;
    retry) OBC_CAUSE="$OBC_CAUSE ($OBC_WHERE)" ;;
    *)
      case " $OBC_RETRY_EXIT_CODES " in
        *" $OBC_STATUS "*) OBC_CAUSE= ;;
        *) return 1 ;;
      esac ;;
  esac
  OBC_WORD="exited with $OBC_STATUS${OBC_CAUSE:+: $OBC_CAUSE}"
  if [ -n "$OBC_RETRY_REQUEUES" ] && [ -n "${SLURM_JOB_ID:-}" ]; then
    obc_requeue "$OBC_RETRY_MAX" "step $OBC_NAME $OBC_WORD" || return 1
  fi
  OBC_TRIES=$((${OBC_TRIES:-0} + 1))
  [ "$OBC_TRIES" -le "$OBC_RETRY_MAX" ] || return 1
  obc_announce "$OBC_WORD; trying again ($OBC_TRIES of $OBC_RETRY_MAX)"
}
