# --- obc's library: files --------------------------------------------------------------
# The files the job writes into its run dir: its embedded files, and under Slurm the copy of
# itself that the nodes run.

# obc_write_file PATH [chomp] <<'EOF': writes the here-document to PATH in the run dir:
# first into the private temporary folder, then renamed into place from inside PATH's
# folder, checked to be where it should be, so that PATH is never half-written and no link
# can redirect it. With chomp, the file ends without the newline a here-document always adds.
obc_write_file() {
  if [ -n "$OBC_DRY_RUN" ]; then
    printf '# write %s\n' "$(obc_quote "$1")"
    return 0
  fi
  case $1 in */*) OBC_WORD=/${1%/*} ;; *) OBC_WORD= ;; esac
  if obc_write_body "$@" > "$OBC_TMP/file" &&
     (cd -P -- "$OBC_RUN_DIR$OBC_WORD" && [ "$(pwd -P)" = "$OBC_REAL_RUN_DIR$OBC_WORD" ] &&
      mv -fT -- "$OBC_TMP/file" "${1##*/}"); then
    return 0
  fi
  obc_fail "cannot write $1 in the run dir"
}

obc_write_body() {
  if [ "$#" -gt 1 ]; then
    # The body does not end in a newline, so the here-document added exactly one: just
    # what $(...) strips.
    printf '%s' "$(cat)"
  else
    cat
  fi
}

# Creates folder $1 of the run dir unless it is there; either way it must be a real folder
# (never a link, which could lead a file anywhere).
# shellcheck disable=SC2329 # called for the job's files that are in folders, if any
obc_make_folder() {
  [ -n "$OBC_DRY_RUN" ] || mkdir -- "$OBC_RUN_DIR/$1" 2>/dev/null ||
    { [ -d "$OBC_RUN_DIR/$1" ] && [ ! -L "$OBC_RUN_DIR/$1" ]; } ||
    obc_fail "cannot create the folder $1 in the run dir: something else is in the way"
}
