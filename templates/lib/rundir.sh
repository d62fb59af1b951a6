# --- obc's library: rundir -------------------------------------------------------------
# The run dir (docs/security.md): everything the job writes goes there, through folders
# no other user can change, and one run at a time.

# True when $1 is a folder of the user's own (with $2 = 0: or of root's) that no other user
# can write into, or only with the sticky bit, as /tmp: another user who could write there
# could make the job write through a link of theirs.
obc_guarded() {
  [ -n "$(find -H "$1" -prune -type d \( -user "$(id -u)" -o -user "${2:-$(id -u)}" \) \
    \( -perm -1000 -o ! -perm -0020 ! -perm -0002 \) -print 2>/dev/null)" ] && obc_own_link "$1"
}

# True unless $1 is a link of another user's (neither the user's nor root's): in a folder
# such as /tmp, or one a team shares, it would lead the job where that user chose.
obc_own_link() {
  [ ! -L "$1" ] || [ -n "$(find -P "$1" -prune \( -user "$(id -u)" -o -user 0 \) -print)" ]
}

# Says what $1 is, whose, and its mode; for a link, whose link it is, and what it leads to.
obc_described() {
  [ ! -L "$1" ] || printf '%s' "$(stat -c 'a link owned by %U (uid %u), to ' -- "$1")"
  stat -L -c 'a %F owned by %U (uid %u), mode %a' -- "$1" 2>/dev/null || printf nothing
}

# Prints the deepest folder of path $1 that exists.
obc_existing_parent() {
  OBC_WORD=$1
  while [ -n "$OBC_WORD" ] && [ ! -e "$OBC_WORD" ] && [ ! -L "$OBC_WORD" ]; do
    OBC_WORD=${OBC_WORD%/*}
  done
  printf '%s\n' "${OBC_WORD:-/}"
}

# Preflight: folder $1 ($2 names it) can be made by the user: it, or the deepest folder
# above it that exists, is a folder they can write into (a read-only filesystem, another
# user's folder or a file in the way would otherwise stop the job only at its mkdir).
obc_check_writable() {
  OBC_WORD=$(obc_existing_parent "$1")
  if [ ! -d "$OBC_WORD" ] || [ ! -w "$OBC_WORD" ] || [ ! -x "$OBC_WORD" ]; then
    if [ "$OBC_WORD" = "$1" ]; then
      obc_preflight_failure "$2 $1 cannot be written by you: it is $(obc_described "$1")"
    else
      obc_preflight_failure "$2 $1 cannot be created: $OBC_WORD is $(obc_described "$OBC_WORD"), not a folder you can write into"
    fi
  fi
}

# obc_make_folders PATH WHAT: creates folder PATH and those above it, or ends the job with
# exit 3 saying why; WHAT names it.
obc_make_folders() {
  [ -z "$OBC_DRY_RUN" ] || { obc_print_command mkdir -p -- "$1"; return 0; }
  OBC_WORD=$(mkdir -p -- "$1" 2>&1) || obc_fail "cannot create $2 $1: ${OBC_WORD##*: }" 3
}

# The name of this machine in the lock: the node's name under Slurm (the emulated nodes of
# a test cluster share one kernel, and so one `uname -n`), else the host's.
obc_host() {
  printf '%s\n' "${SLURMD_NODENAME:-$(uname -n)}"
}

# Removes what a killed run left in .obc, once this run holds the lock: its temporary
# folders (only the lock's holder has one), the locks it had begun to make or to remove, if
# they have ended as obc_ended_lock judges them (another run's lock in the making is held,
# or has no owner yet).
obc_clear_leftovers() {
  for OBC_FOLDER in "$OBC_RUN_DIR"/.obc/tmp.?????? "$OBC_RUN_DIR"/.obc/lock.??????; do
    case $OBC_FOLDER in
      "$OBC_RUN_DIR/.obc/tmp."*) [ -d "$OBC_FOLDER" ] || continue ;;
      *)
        OBC_LOCK=$OBC_FOLDER
        obc_ended_lock || continue ;;
    esac
    rm -rf -- "$OBC_FOLDER"
  done
  OBC_LOCK=$OBC_RUN_DIR/.obc/lock
  rm -rf -- "$OBC_RUN_DIR"/.obc/lock.ended.*
}

# Takes the run dir's lock, so that a second run in the same run dir (launched twice, or on
# another node of a shared filesystem) exits 4 instead of writing over this one. The lock is
# a folder, made whole under a name of its own and then renamed into place, which fails
# while another is there: its owner file (host, pid, Slurm job and restart) and its file
# `held`, which the job keeps open on fd 9 under flock(1), and every step it starts
# inherits (obc_start).
# A lock is taken over once nothing holds `held` any more (see obc_ended_lock).
obc_lock() {
  OBC_LOCK=$OBC_RUN_DIR/.obc/lock
  OBC_NEW_LOCK=$(mktemp -d "$OBC_LOCK.XXXXXX") ||
    obc_fail "cannot create a lock in $OBC_RUN_DIR/.obc"
  exec 9> "$OBC_NEW_LOCK/held"
  # (9>&9: mksh and ksh93 do not pass on what `exec` opened by itself.) A filesystem that
  # has no flock fails here: the lock then still keeps other runs out, but is never taken
  # over by itself.
  flock -n 9 9>&9 2>/dev/null
  printf '%s %s %s %s\n' "$(obc_host)" "$$" "${SLURM_JOB_ID:--}" "${SLURM_RESTART_COUNT:-0}" \
    > "$OBC_NEW_LOCK/owner"
  for OBC_WORD in 1 2 3; do
    if mv -T -- "$OBC_NEW_LOCK" "$OBC_LOCK" 2>/dev/null; then
      OBC_LOCKED=1
      return 0
    fi
    obc_take_over || break
  done
  rm -rf -- "$OBC_NEW_LOCK"
  OBC_WORD=$(cat -- "$OBC_LOCK/owner" 2>/dev/null)
  obc_fail "the run dir $OBC_RUN_DIR is in use by another run of this job, or by what it started (host, pid, Slurm job, restart: ${OBC_WORD:-unknown}); if nothing of it runs any more, remove $OBC_LOCK" 4
}

# True when the way is clear for this run's lock: the lock is gone, or the run that held it
# has ended and its lock is removed. Runs wait their turn for this on .obc/lock.take, so
# that none removes a lock that another has just taken.
obc_take_over() {
  { flock 8 && obc_clear_lock; } 8> "$OBC_RUN_DIR/.obc/lock.take" 2>/dev/null
}

obc_clear_lock() {
  [ -e "$OBC_LOCK" ] || return 0
  obc_ended_lock && mv -- "$OBC_LOCK" "$OBC_LOCK.ended.$$" && rm -rf -- "$OBC_LOCK.ended.$$"
}

# True when the run that holds the lock has ended. On its own machine: when nothing holds
# its file `held` any more (the flock is shared here, and only for a moment), neither the
# job nor what it started: a job.sh killed with KILL leaves its step running, a zombie holds
# nothing, and pids do not matter. On another machine: when it is this Slurm job, requeued
# since (Slurm has ended that attempt); a second copy of this attempt (`srun -n2 job.sh`)
# has the same restart count, and keeps out.
obc_ended_lock() {
  # (Its pid is there for people to read.)
  { read -r OBC_HOST OBC_WORD OBC_HELD OBC_RESTARTS < "$OBC_LOCK/owner"; } 2>/dev/null ||
    return 1
  if [ "$OBC_HOST" = "$(obc_host)" ]; then
    flock -n -s 7 7< "$OBC_LOCK/held"
  else
    case ${OBC_RESTARTS:-} in '' | *[!0-9]*) return 1 ;; esac
    [ -n "${SLURM_JOB_ID:-}" ] && [ "${OBC_HELD:-}" = "$SLURM_JOB_ID" ] &&
      [ "$OBC_RESTARTS" -lt "${SLURM_RESTART_COUNT:-0}" ]
  fi
}

# Preflight: folder $1 (the run dir, or another folder the job writes into, which $2
# names), or the folder it will be created in, is safe to write into. With paths.shared
# (OBC_SHARED), it may be in a folder the team shares, and only another user's link is not.
obc_check_folder() {
  if [ -n "$OBC_SHARED" ]; then
    obc_own_link "$1" || obc_preflight_failure "$2 $1 is $(obc_described "$1"): the job follows no other user's link"
  elif [ -e "$1" ] || [ -L "$1" ]; then
    obc_guarded "$1" || obc_preflight_failure "$2 $1 is not a folder of yours that only you can write ($(obc_described "$1"); paths.shared allows a team's folder)"
  else
    OBC_WORD=$(obc_existing_parent "$1")
    obc_guarded "$OBC_WORD" 0 || obc_preflight_failure "$2 would be created in $OBC_WORD, which another user can change ($(obc_described "$OBC_WORD"); paths.shared allows a team's folder)"
  fi
  obc_check_writable "$1" "$2"
}

# Preflight: the run dir, and the trainer's (OBC_TRAINER_TITLE's) output_dir where another
# user could have put something in its place (OBC_CHECK_OUTPUT_DIR), or the folders to create
# them in, are safe to write into.
obc_check_run_dir() {
  obc_check_folder "$OBC_RUN_DIR" 'the run dir'
  [ -z "$OBC_CHECK_OUTPUT_DIR" ] ||
    obc_check_folder "$OBC_CHECKPOINTS" "$OBC_TRAINER_TITLE's output_dir"
}

# Creates the run dir and takes it for this run: its .obc folder (the job's own records,
# which only the user can write), the lock, and a private folder for temporary files.
obc_prepare_run_dir() {
  obc_make_folders "$OBC_RUN_DIR" 'the run dir'
  [ -z "$OBC_DRY_RUN" ] || return 0
  [ -n "$OBC_SHARED" ] || obc_guarded "$OBC_RUN_DIR" ||
    obc_fail "the run dir $OBC_RUN_DIR is not a folder of yours that only you can write" 3
  # shellcheck disable=SC2034 # read by the part files, in a job that writes files
  OBC_REAL_RUN_DIR=$(cd -P -- "$OBC_RUN_DIR" && pwd -P) || obc_fail "cannot enter $OBC_RUN_DIR"
  mkdir -- "$OBC_RUN_DIR/.obc" 2>/dev/null && chmod go-w "$OBC_RUN_DIR/.obc"
  if [ -L "$OBC_RUN_DIR/.obc" ] || ! obc_guarded "$OBC_RUN_DIR/.obc"; then
    obc_fail "$OBC_RUN_DIR/.obc is not a folder of yours that only you can write" 3
  fi
  OBC_RECORDS_ID=$(stat -c '%d:%i' -- "$OBC_RUN_DIR/.obc")
  obc_lock
  obc_clear_leftovers
  OBC_TMP=$(mktemp -d "$OBC_RUN_DIR/.obc/tmp.XXXXXX") ||
    obc_fail "cannot create a temporary folder in $OBC_RUN_DIR/.obc"
}

# Before and after each step: .obc is still the folder this run made. In a team's folder
# (paths.shared) another user can put a folder of theirs in its place, where the job would
# write its records and find the script it gives the nodes; the job then stops at once
# (exit 3), writing nothing more there.
obc_check_records_folder() {
  [ -n "$OBC_SHARED" ] || return 0
  [ "$(stat -c '%d:%i' -- "$OBC_RUN_DIR/.obc" 2>/dev/null)" = "$OBC_RECORDS_ID" ] && return 0
  obc_say "$OBC_RUN_DIR/.obc is no longer the folder this run made: another user put $(obc_described "$OBC_RUN_DIR/.obc") in its place; stopping, and writing nothing there"
  exit 3
}
