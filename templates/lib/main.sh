# --- obc's library: main ---------------------------------------------------------------
# The job's run (obc_main): its options, paths, preflight, setup and steps, and what runs
# one step. POSIX sh: runs alike under dash, bash, busybox sh, zsh, ksh93, mksh, posh and
# yash. No `set -e`: each command that matters is checked where it runs. Nothing here ever
# expands a secret, so even `sh -x job.sh` shows names only (the job sets PS4 first: an
# inherited one would be expanded on every traced line). The job's values are
# single-quoted on purpose: shellcheck need not point out that '$x' or '~/x' stays as
# written (SC2016, SC2088), that a backslash or a typographic quote (U+2018, U+2019) in
# quotes is literal (SC1003, SC1112), nor that a job id or step name such as `wait` is also
# a command's name (SC2209): the job's first line after its header says so.

# What the job inherits must not change how it runs: default field splitting, no CDPATH
# for `cd`, and a umask that lets the job's owner use what it creates (its group and other
# bits are kept, so 0077 keeps the run private; 0777 would make the run dir unusable).
set -u
unset IFS CDPATH
umask u=rwx

OBC_RUN_DIR='' OBC_CACHE_DIR='' OBC_DRY_RUN='' OBC_FROM='' OBC_ONLY='' OBC_CHILD=''
OBC_STARTING='' OBC_LOCKED='' OBC_TMP='' OBC_FAILED='' OBC_ATTEMPT='' OBC_NAME=''
OBC_TEE_OUT='' OBC_LOG='' OBC_RESUMED_FROM='' OBC_FRESH='' OBC_SKIPPED=''
OBC_RESUME_FROM='' OBC_SHOW_STATUS='' OBC_NODE_TASK='' OBC_RECORDS_ID='' OBC_NODE_HEALTH=''
OBC_STEP_COUNT=0
for OBC_WORD in $OBC_STEPS; do OBC_STEP_COUNT=$((OBC_STEP_COUNT + 1)); done

# Ends the job on a wrong option $1, with the usage line of the job's summary (obc_help).
obc_usage() {
  printf 'job.sh: %s\n' "$1" >&2
  printf 'usage: %s\n' "$(obc_help | sed -n 's/^usage  *//p')" >&2
  exit 2
}

# Preflight: required secret $1 is not set or empty. A job sbatch started with --export=NONE
# (or a list of names without it), which Slurm says in SLURM_EXPORT_ENV, does not get the
# environment sbatch ran in; a native job may also set it in its env file.
# shellcheck disable=SC2329 # called by the job's preflight, for its required secrets
obc_missing_secret() {
  case ,${SLURM_EXPORT_ENV:-ALL}, in
    *,[Aa][Ll][Ll],* | *,"$1",* | *,"$1"=*)
      obc_preflight_failure "secret $1 is not set or empty" ;;
    *)
      OBC_WORD=
      [ "$OBC_RUNTIME" != native ] || OBC_WORD=', or set it in runtime.env_file'
      obc_preflight_failure "secret $1 is not set or empty: the job was submitted with --export=$SLURM_EXPORT_ENV, so it does not get the environment sbatch ran in; submit with --export=ALL, or with $1 among the names of --export$OBC_WORD" ;;
  esac
}

# Preflight, first of all: the tools every job needs.
obc_check_tools() {
  obc_which setsid "$PATH" >/dev/null || obc_preflight_failure 'setsid (util-linux) not found on PATH'
  obc_which flock "$PATH" >/dev/null || obc_preflight_failure 'flock (util-linux) not found on PATH'
}

# The run dir and the cache dir, when relative, are taken from where the job starts.
obc_absolute_dirs() {
  case $OBC_RUN_DIR in /*) ;; *) OBC_RUN_DIR=$PWD/$OBC_RUN_DIR ;; esac
  case $OBC_CACHE_DIR in /* | '') ;; *) OBC_CACHE_DIR=$PWD/$OBC_CACHE_DIR ;; esac
}

# True for a step that runs on every node (OBC_NODE_STEPS).
obc_every_node() {
  for OBC_WORD in $OBC_NODE_STEPS; do
    [ "$OBC_WORD" != "$1" ] || return 0
  done
  return 1
}

# True when the nodes run their part of a step from a copy of this script (every runtime
# with steps on every node but enroot, whose srun starts the step in its containers).
obc_runs_node_tasks() {
  [ -n "$OBC_NODE_STEPS" ] && [ "$OBC_RUNTIME" != enroot ]
}

# obc_launch RUNNER PROGRAM [ARG...]: hands RUNNER the step's command. Under Slurm, a step
# that runs on every node is one srun task per node (obc_on_every_node); every other step
# runs here.
obc_launch() {
  if [ -n "${SLURM_JOB_ID:-}" ] && obc_every_node "$OBC_NAME"; then
    obc_on_every_node "$@"
  else
    obc_step_command "$@"
  fi
}

# obc_step NUMBER NAME PROGRAM [ARG...]: runs one step and waits for it, and says how long
# it took.
obc_step() {
  OBC_NUMBER=$1 OBC_NAME=$2
  shift 2
  if { [ -n "$OBC_FROM" ] && [ "$OBC_FROM" != "$OBC_NAME" ]; } ||
     { [ -n "$OBC_ONLY" ] && [ "$OBC_ONLY" != "$OBC_NAME" ]; }; then
    obc_announce "${OBC_SKIPPED:-skipped}"
    return 0
  fi
  OBC_FROM=
  [ -n "$OBC_DRY_RUN" ] || obc_mark_done "$OBC_NAME"
  if [ "$OBC_NAME" = "$OBC_CHECKPOINT_STEP" ]; then
    obc_resume
    # The checkpoint, after train's own words: with the flag OBC_RESUME_FLAG (the trainer's
    # option that takes it), in the same word when the flag ends in `=` (LLaMA-Factory's
    # resume_from_checkpoint=PATH).
    if [ -n "$OBC_RESUMED_FROM" ]; then
      case $OBC_RESUME_FLAG in
        *=) set -- "$@" "$OBC_RESUME_FLAG$OBC_RESUMED_FROM" ;;
        *) set -- "$@" "$OBC_RESUME_FLAG" "$OBC_RESUMED_FROM" ;;
      esac
    fi
  fi
  obc_announce "$(obc_print_command "$@")"
  if [ -n "$OBC_DRY_RUN" ]; then
    obc_launch obc_print_command "$@"
    return 0
  fi
  OBC_BEGAN=$(date +%s)
  while :; do
    [ -z "$OBC_RETRY_MAX" ] || obc_mark_try
    obc_run_step "$@"
    [ "$OBC_STATUS" -ne 0 ] || break
    [ -z "$OBC_NOTIFY_ON" ] || obc_notify step_failed "$OBC_STATUS"
    { [ -n "$OBC_RETRY_MAX" ] && obc_retry; } ||
      obc_fail "step $OBC_NUMBER/$OBC_STEP_COUNT $OBC_NAME failed with exit code $OBC_STATUS" \
        "$OBC_STATUS"
  done
  obc_announce "done in $(($(date +%s) - OBC_BEGAN)) s"
  obc_mark_done "$OBC_NAME" finished
}

# Runs the step in the background (so that the signal traps below run at once: a shell runs
# a trap only after a foreground command ends), in a session of its own (so that they can
# stop all of it), its output copied to its log; sets OBC_STATUS to its exit code.
obc_run_step() {
  obc_check_records_folder
  obc_status running
  mkfifo -- "$OBC_TMP/out" "$OBC_TMP/err" || obc_fail "cannot make the log's pipes"
  OBC_LOG=1
  obc_launch obc_start "$@"
  obc_tee_log
  OBC_STATUS=0
  wait "$OBC_CHILD" || OBC_STATUS=$?
  obc_close_log
  obc_check_records_folder
  [ -z "$OBC_NODE_STEPS" ] || obc_first_failure
  OBC_CHILD=
  rm -f -- "$OBC_TMP/out" "$OBC_TMP/err"
}

# A scheduler's TERM (Slurm at its time limit, scancel), ^C or a lost terminal: stop the
# running step and everything it started, then exit 128+N. The exit is explicit rather
# than a re-raised signal so that every shell reports the same code. Near the time limit
# (OBC_TIME_LIMIT_SIGNAL), the job requeues itself instead.
# shellcheck disable=SC2329,SC2086 # called from the traps; OBC_SIGNALS is split on purpose
obc_on_signal() {
  trap '' $OBC_SIGNALS
  obc_say "$1 received, stopping"
  if [ -z "$OBC_CHILD" ] && [ -n "$OBC_STARTING" ] && [ "${!:-none}" != "$OBC_STARTING" ]; then
    OBC_CHILD=$!
  fi
  if [ -n "$OBC_CHILD" ]; then
    [ -z "$OBC_CHECKPOINT_TRIGGER" ] || obc_ask_checkpoint
    [ -z "$OBC_GIVE_GRACE" ] || obc_give_grace
    obc_stop_step
    obc_close_log
  fi
  [ "$1" != "$OBC_TIME_LIMIT_SIGNAL" ] || obc_at_time_limit
  obc_status stopped "$((128 + $2))"
  obc_exit "$((128 + $2))"
}

# The number of signal $1 (Linux's; the exit code is 128 + the number): the ones a job
# stops on, compiler/render/library.py's SIGNAL_NUMBERS.
obc_signal_number() {
  case $1 in HUP) echo 1 ;; INT) echo 2 ;; USR1) echo 10 ;; USR2) echo 12 ;; TERM) echo 15 ;; esac
}

# obc_main [OPTION...]: the job's run, from its options to its last step.
obc_main() {
  while [ "$#" -gt 0 ]; do
    case $1 in
      --help | -h) obc_help; exit 0 ;;
      --dry-run) OBC_DRY_RUN=1 ;;
      --status) OBC_SHOW_STATUS=1 ;;
      --fresh) OBC_FRESH=1 ;;
      --run-dir | --cache-dir | --from | --only | --resume-from | --node-task)
        case $1 in
          --resume-from) [ -n "$OBC_RESUME" ] || obc_usage "unknown option: $1" ;;
          --node-task) obc_runs_node_tasks || obc_usage "unknown option: $1" ;;
        esac
        [ "$#" -ge 2 ] && [ -n "$2" ] || obc_usage "$1 needs a value"
        case $1 in
          --run-dir) OBC_RUN_DIR=$2 ;;
          --cache-dir) OBC_CACHE_DIR=$2 ;;
          --from) obc_known_step "$2"; OBC_FROM=$2 ;;
          --only) obc_known_step "$2"; OBC_ONLY=$2 ;;
          --resume-from)
            case ${2#checkpoint-} in "$2" | '' | *[!0-9]*) obc_usage "--resume-from takes a checkpoint's name, checkpoint-N" ;; esac
            OBC_RESUME_FROM=$2 ;;
          --node-task) OBC_NODE_TASK=$2 ;;
        esac
        shift ;;
      --node-health) OBC_NODE_HEALTH=1 ;;
      --) obc_runs_node_tasks || obc_usage "unknown option: $1"; shift; break ;;
      *) obc_usage "unknown option: $1" ;;
    esac
    shift
  done
  [ -z "$OBC_FROM" ] || [ -z "$OBC_ONLY" ] || obc_usage "give --from or --only, not both"
  [ -z "$OBC_FRESH" ] || [ -z "$OBC_RESUME_FROM" ] || obc_usage "give --fresh or --resume-from, not both"
  # A node's health check (obc_health), which srun starts as a node's task.
  [ -z "$OBC_NODE_HEALTH" ] || { [ -n "$OBC_NODE_TASK" ] && [ -n "$OBC_HEALTH_TIMEOUT" ]; } ||
    obc_usage "unknown option: --node-health"

  for OBC_WORD in $OBC_SIGNALS; do
    # shellcheck disable=SC2064 # the signal's name and number, as they are now
    trap "obc_on_signal $OBC_WORD $(obc_signal_number "$OBC_WORD")" "$OBC_WORD"
  done

  # Paths.
  obc_absolute_path
  obc_paths
  [ -z "$OBC_SHOW_STATUS" ] || obc_show_status
  [ -z "$OBC_NODE_TASK" ] || obc_node_task "$@"

  # Preflight: check everything before creating anything.
  obc_preflight
  if [ -z "$OBC_DRY_RUN" ]; then
    ! obc_runs_node_tasks || [ -z "${SLURM_JOB_ID:-}" ] || obc_hash_self
    obc_check_run_dir
    [ -z "$OBC_CACHE_DIR" ] || obc_check_writable "$OBC_CACHE_DIR" 'the cache dir'
    [ -z "$OBC_FAILED" ] || exit 3
  fi

  # Setup.
  obc_prepare_run_dir
  [ -n "$OBC_DRY_RUN" ] || obc_begin_attempt
  if [ -n "$OBC_DRY_RUN" ] || [ -z "$OBC_FRESH" ]; then
    :
  elif [ -n "$OBC_CHECKPOINT_STEP" ]; then
    obc_set_aside_all all
  else
    obc_run rm -rf -- "$OBC_RUN_DIR/.obc/done"
  fi
  [ -n "$OBC_FROM$OBC_ONLY$OBC_FRESH" ] || obc_start_at_unfinished
  [ -z "$OBC_CHECKPOINT_STEP" ] || ! obc_runs "$OBC_CHECKPOINT_STEP" || obc_choose_checkpoint
  [ -z "$OBC_CACHE_DIR" ] || obc_make_folders "$OBC_CACHE_DIR" 'the cache dir'
  obc_files
  obc_prepare_runtime
  [ -z "$OBC_NODE_STEPS" ] || obc_rendezvous
  [ -z "$OBC_HEALTH_TIMEOUT" ] || obc_health

  obc_steps
  OBC_NAME=
  obc_status succeeded 0
  if [ -n "$OBC_DRY_RUN" ]; then
    obc_say "$OBC_JOB: dry run, nothing was run or written"
  else
    obc_say "$OBC_JOB done"
  fi
  obc_exit 0
}
