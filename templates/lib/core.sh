# --- obc's library: core ---------------------------------------------------------------
# Plain shell (templates/lib/core.sh), the same bytes in every script of one obc
# version: a job's values reach it only as the job's variables, set above.

# Ends the job with exit code $1, leaving the run dir free for the next run.
obc_exit() {
  [ -z "$OBC_TMP" ] || rm -rf -- "$OBC_TMP"
  [ -z "$OBC_LOCKED" ] || rm -rf -- "$OBC_RUN_DIR/.obc/lock"
  exit "$1"
}

# Ends the job with exit code $2 (1 by default), saying why; the record says it failed.
obc_fail() {
  obc_say "$1"
  obc_status failed "${2:-1}"
  obc_exit "${2:-1}"
}

obc_known_step() {
  for OBC_WORD in $OBC_STEPS; do
    [ "$OBC_WORD" != "$1" ] || return 0
  done
  obc_usage "no step named '$1' (steps: $OBC_STEPS)"
}

# Runs a command, or under --dry-run prints it instead.
obc_run() {
  if [ -n "$OBC_DRY_RUN" ]; then
    obc_print_command "$@"
  else
    "$@"
  fi
}

obc_preflight_failure() {
  obc_say "preflight: $1"
  OBC_FAILED=1
}

# obc_needs FIELD NAME...: a preflight failure for each variable NAME (a name the job writes,
# never one it read) that is not set or is empty, which FIELD of the run file (a path in it)
# needs.
# shellcheck disable=SC2329 # called by the job for a path that names variables, if any
obc_needs() {
  OBC_FIELD=$1
  shift
  for OBC_WORD in "$@"; do
    case $OBC_WORD in '' | [!A-Za-z_]* | *[!A-Za-z0-9_]*) continue ;; esac
    eval "OBC_VALUE=\${$OBC_WORD:-}"
    [ -n "$OBC_VALUE" ] || obc_preflight_failure "\$$OBC_WORD is not set or empty, and $OBC_FIELD needs it"
  done
}

# Prints where PATH-like list $2 has the program $1, as a process started with that PATH
# would find it (builtins and functions do not count: steps run programs).
obc_which() {
  OBC_REST=$2:
  while [ -n "$OBC_REST" ]; do
    OBC_WORD=${OBC_REST%%:*}/$1 OBC_REST=${OBC_REST#*:}
    if [ -f "$OBC_WORD" ] && [ -x "$OBC_WORD" ]; then
      printf '%s\n' "$OBC_WORD"
      return 0
    fi
  done
  return 1
}

# PATH without its relative and empty entries: the steps run in the run dir, where those
# would find other programs than the ones preflight checked from the start dir.
obc_absolute_path() {
  OBC_REST=${PATH-}: OBC_KEPT='' OBC_DROPPED=''
  while [ -n "$OBC_REST" ]; do
    OBC_WORD=${OBC_REST%%:*} OBC_REST=${OBC_REST#*:}
    case $OBC_WORD in
      /*) OBC_KEPT=$OBC_KEPT${OBC_KEPT:+:}$OBC_WORD ;;
      *) OBC_DROPPED=$OBC_DROPPED${OBC_DROPPED:+ }"'$OBC_WORD'" ;;
    esac
  done
  [ -z "$OBC_DROPPED" ] || obc_say "ignoring relative PATH entries: $OBC_DROPPED"
  PATH=$OBC_KEPT
}

# Says on stderr, with the UTC time, what becomes of the current step:
# `obc: 2026-11-30T10:00:00Z step 2/3 merge: WHAT`.
obc_announce() {
  obc_say "$(obc_now) step $OBC_NUMBER/$OBC_STEP_COUNT $OBC_NAME: $1"
}

# Says on stderr `obc: MESSAGE`, on a line of its own: when the running (or last) step's
# output ended mid-line, as a progress bar redrawn with carriage returns does, it ends that
# line first, on the terminal and in the step's log alike (so that the next message does
# not again). The log holds both of the step's streams, as the terminal shows them.
obc_say() {
  case $OBC_LOG in
    /*) [ -z "$(tail -c 1 -- "$OBC_LOG" 2>/dev/null)" ] || { echo >> "$OBC_LOG"; echo >&2; } ;;
  esac
  printf 'obc: %s\n' "$1" >&2
}

# Starts a command in the background, in a session of its own (a new process group); in a
# run with logs (the job's own steps, not a node's part of one), writing to the log's pipes
# (whose tees start after it) and holding the run dir's lock (fd 9, see obc_lock), which
# everything it starts inherits: the run dir stays in use while any of it runs, even when
# the job itself has been killed.
# shellcheck disable=SC2329 # called by obc_step_command, which shellcheck cannot follow
obc_start() {
  # A signal that arrives now is handled after the next command: obc_on_signal then finds
  # the step in $!, though not yet in OBC_CHILD.
  OBC_STARTING=${!:-none}
  if [ -n "$OBC_LOG" ]; then
    # In a subshell that execs: yash would start the program from a process of its own when
    # a redirection of a background command blocks (as opening a pipe does), and $! would
    # not be the step.
    (exec setsid "$@" > "$OBC_TMP/out" 2> "$OBC_TMP/err" 9>&9) &
  else
    setsid "$@" &
  fi
  OBC_CHILD=$!
  OBC_STARTING=
}
