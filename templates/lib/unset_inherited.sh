# --- obc's library: unset_inherited ----------------------------------------------------
# For the runtimes that read their options from the environment (apptainer, pyxis).

# obc_unset_inherited PREFIX...: unsets every variable of the job's environment whose name
# starts with a PREFIX (a name in a value's later line is only unset too).
obc_unset_inherited() {
  for OBC_PREFIX in "$@"; do
    for OBC_INHERITED in $(env | sed -n "s/^\\(${OBC_PREFIX}[A-Za-z0-9_]*\\)=.*/\\1/p"); do
      unset "$OBC_INHERITED"
    done
  done
}

