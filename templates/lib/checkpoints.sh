# --- obc's library: checkpoints --------------------------------------------------------
# The trainer's checkpoints (docs/resume.md): $OBC_CHECKPOINTS is output_dir
# on this machine; .obc/checkpoints and .obc/train-attempts say which inputs made each.

# The inputs of the checkpoint train resumed from, and the folder this attempt sets aside in.
OBC_RESUMED_INPUTS='' OBC_ASIDE=''

# True when checkpoint folder $1 is whole: the trainer state (written last) and weights.
obc_whole_checkpoint() {
  [ -f "$1/trainer_state.json" ] || return 1
  for OBC_PART in "$1"/adapter_model.* "$1"/model.safetensors* "$1"/pytorch_model* \
      "$1"/global_step*; do
    [ ! -e "$OBC_PART" ] || return 0
  done
  return 1
}

# Prints the names of the whole checkpoints in output_dir, one a line.
obc_whole_checkpoints() {
  for OBC_WORD in "$OBC_CHECKPOINTS"/checkpoint-*; do
    case ${OBC_WORD##*/checkpoint-} in '' | *[!0-9]*) continue ;; esac
    ! obc_whole_checkpoint "$OBC_WORD" || printf '%s\n' "${OBC_WORD##*/}"
  done
}

# Prints the training inputs that made checkpoint $1: its line in the ledger
# (.obc/checkpoints, `NAME INPUTS`), else those of the last train attempt
# (.obc/train-attempts, `ATTEMPT INPUTS`; `unknown` before any), which wrote it (only train
# writes checkpoints, and each train attempt first records the ones before it).
obc_inputs_of() {
  awk -v name="$1" '$1 == name { found = $2 } END { if (found == "") exit 1; print found }' \
    "$OBC_RUN_DIR/.obc/checkpoints" 2>/dev/null ||
    awk '{ last = $2 } END { print (last == "" ? "unknown" : last) }' \
      "$OBC_RUN_DIR/.obc/train-attempts" 2>/dev/null || printf 'unknown\n'
}
# Records in the ledger whose inputs made each whole checkpoint not yet in it, then this
# train attempt's inputs: from here on, what train writes is theirs.
obc_record_train_attempt() {
  for OBC_WORD in $(obc_whole_checkpoints); do
    awk -v name="$OBC_WORD" '$1 == name { found = 1 } END { exit !found }' \
      "$OBC_RUN_DIR/.obc/checkpoints" 2>/dev/null ||
      printf '%s %s\n' "$OBC_WORD" "$(obc_inputs_of "$OBC_WORD")" >> "$OBC_RUN_DIR/.obc/checkpoints" ||
      obc_fail "cannot record the checkpoints in $OBC_RUN_DIR/.obc/checkpoints"
  done
  printf '%s %s\n' "$OBC_ATTEMPT" "$OBC_INPUTS" >> "$OBC_RUN_DIR/.obc/train-attempts" ||
    obc_fail "cannot record the train attempt in $OBC_RUN_DIR/.obc/train-attempts"
}

# Moves $1 into this run's dated folder under set-aside/ in the run dir: nothing the job
# sets aside is deleted.
obc_put_aside() {
  [ -n "$OBC_ASIDE" ] ||
    OBC_ASIDE=$OBC_RUN_DIR/set-aside/$(date -u +%Y%m%dT%H%M%SZ)-attempt-$OBC_ATTEMPT
  # .obc's records are named .obc-NAME there (.obc/checkpoints beside output_dir's).
  case $1 in "$OBC_RUN_DIR"/.obc/*) OBC_FOLDER=.obc-${1##*/} ;; *) OBC_FOLDER=${1##*/} ;; esac
  if ! { mkdir -p -- "$OBC_ASIDE" && mv -T -- "$1" "$OBC_ASIDE/$OBC_FOLDER"; }; then
    obc_fail "cannot set aside $1 in $OBC_ASIDE"
  fi
  obc_say "set aside $1 as $OBC_ASIDE/$OBC_FOLDER"
}

# Starting over: sets aside what the old inputs wrote, output_dir (checkpoints, adapter,
# merged model; when output_dir is the run dir itself, OBC_CHECKPOINTS_OWN_FOLDER empty, only
# its checkpoint-N folders) and the ledger of its checkpoints; with $1 = all (--fresh) also
# the finished steps and Axolotl's prepared dataset (OBC_PREPARED_DIR, if the job has one).
obc_set_aside_all() {
  OBC_WHAT=$1
  if [ -n "$OBC_CHECKPOINTS_OWN_FOLDER" ]; then
    set -- "$OBC_CHECKPOINTS" "$OBC_RUN_DIR/.obc/checkpoints"
  else
    set -- "$OBC_CHECKPOINTS"/checkpoint-* "$OBC_RUN_DIR/.obc/checkpoints"
  fi
  if [ "$OBC_WHAT" = all ]; then
    set -- "$@" "$OBC_RUN_DIR/.obc/done"
    [ -z "$OBC_PREPARED_DIR" ] || set -- "$@" "$OBC_RUN_DIR/$OBC_PREPARED_DIR"
  fi
  for OBC_WORD in "$@"; do
    [ ! -e "$OBC_WORD" ] || obc_put_aside "$OBC_WORD"
  done
}

# True when step $1 runs in this run: it is --only's, or --from's (or the first unfinished)
# or after it.
obc_runs() {
  if [ -n "$OBC_ONLY" ]; then
    [ "$OBC_ONLY" = "$1" ]
    return
  fi
  [ -n "$OBC_FROM" ] || return 0
  OBC_SEEN=
  for OBC_WORD in $OBC_STEPS; do
    [ "$OBC_WORD" != "$OBC_FROM" ] || OBC_SEEN=1
    [ "$OBC_WORD" != "$1" ] || break
  done
  [ -n "$OBC_SEEN" ]
}
