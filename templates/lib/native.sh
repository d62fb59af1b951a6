# --- obc's library: native -------------------------------------------------------------
# Native steps: each runs on this machine, its program found on PATH, the venv's first
# (OBC_VENV, when the job has one).

# Preflight: the venv is there and its python can run. Without the venv the steps would
# run the system's programs (python3 found further on PATH); a venv whose Python was
# removed or upgraded away keeps bin/python as a link to nothing, and its programs fail.
obc_check_venv() {
  if [ ! -d "$OBC_VENV" ]; then
    obc_preflight_failure "runtime.venv $OBC_VENV is $(obc_described "$OBC_VENV"), not a venv"
  elif [ ! -e "$OBC_VENV/bin/python" ] && [ ! -L "$OBC_VENV/bin/python" ]; then
    obc_preflight_failure "runtime.venv $OBC_VENV is not a venv: it has no bin/python"
  elif [ ! -f "$OBC_VENV/bin/python" ] || [ ! -x "$OBC_VENV/bin/python" ]; then
    obc_preflight_failure "runtime.venv $OBC_VENV: its bin/python is $(obc_described "$OBC_VENV/bin/python"): the Python it was made from is gone? make the venv again"
  fi
}

# Preflight: the venv, if the job has one, and the folders of it that the steps run from,
# which no other user may be able to change.
obc_check_runtime() {
  [ -n "$OBC_VENV" ] || return 0
  obc_check_venv
  obc_check_trusted runtime.venv "${OBC_VENV%/*}" "$OBC_VENV" "$OBC_VENV/bin" \
    "$OBC_VENV/pyvenv.cfg" "$OBC_VENV"/bin/*
}

# Preflight: when program $2 (a step's program $1) is a script, the interpreter its first
# line names (#!) can run, and for `#!/usr/bin/env NAME`, NAME is on the steps' PATH ($3):
# the kernel would refuse to start it. What that interpreter loads in turn is not checked.
# shellcheck disable=SC2329 # called by the job's preflight, for each program it names
obc_check_interpreter() {
  OBC_LINE=$(sed -n '1{s/^#!//p;q;}' "$2" 2>/dev/null)
  read -r OBC_INTERPRETER OBC_ARG OBC_REST <<EOF
$OBC_LINE
EOF
  [ -n "$OBC_INTERPRETER" ] || return 0
  case $OBC_LINE in
    *"$(printf '\r')"*)
      obc_preflight_failure "program $1 ($2) is a script with Windows line ends (CR LF): the interpreter its #! line names ends in a carriage return"
      return 0 ;;
  esac
  if [ ! -f "$OBC_INTERPRETER" ] || [ ! -x "$OBC_INTERPRETER" ]; then
    obc_preflight_failure "program $1 ($2) is a script for $OBC_INTERPRETER, which is $(obc_described "$OBC_INTERPRETER") (#! in its first line)"
  elif [ "${OBC_INTERPRETER##*/}" = env ] && [ -z "$OBC_REST" ]; then
    case $OBC_ARG in
      '' | -* | *=*) ;;
      */*) [ -f "$OBC_ARG" ] && [ -x "$OBC_ARG" ] ||
        obc_preflight_failure "program $1 ($2) is a script for $OBC_ARG, which is $(obc_described "$OBC_ARG") (#! in its first line)" ;;
      *) obc_which "$OBC_ARG" "$3" >/dev/null ||
        obc_preflight_failure "program $1 ($2) is a script for $OBC_ARG (#!$OBC_LINE), which is not found on the steps' PATH" ;;
    esac
  fi
}

# obc_check_trusted FIELD PATH...: a preflight failure for each PATH that another user
# could change, for the job would run what they put there: one (links followed) that is
# neither the user's nor root's, or that group or others can write (a folder only with the
# sticky bit, as /tmp), or a link of another user's. FIELD names it in the run file. With
# paths.shared (OBC_SHARED), the team's folders are trusted.
# shellcheck disable=SC2329 # called for the venv and the env file, if the job has them
obc_check_trusted() {
  [ -z "$OBC_SHARED" ] || return 0
  OBC_WHAT=$1
  shift
  OBC_REST=$(find -P "$@" -prune -type l ! -user "$(id -u)" ! -user 0 -print 2>/dev/null
    find -L "$@" -prune ! -type l \( ! -user "$(id -u)" ! -user 0 -o \
      \( -perm -0020 -o -perm -0002 \) ! \( -type d -perm -1000 \) \) -print 2>/dev/null)
  [ -n "$OBC_REST" ] || return 0
  while IFS= read -r OBC_WORD; do
    obc_preflight_failure "$OBC_WHAT: $OBC_WORD is $(obc_described "$OBC_WORD"): another user could change what the job runs (paths.shared allows a team's)"
  done <<EOF
$OBC_REST
EOF
  return 1
}

# Before the steps: they run in the run dir.
obc_prepare_runtime() {
  obc_run cd -- "$OBC_RUN_DIR" || obc_exit 1
}

# Before a node's part of a step: it runs in the run dir.
# shellcheck disable=SC2329 # called by obc_node_task, in a job with steps on every node
obc_node_prepare() {
  cd -- "$OBC_RUN_DIR" || exit 1  # steps run in the run dir
}
