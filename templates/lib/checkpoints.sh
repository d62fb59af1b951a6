# --- obc's library: checkpoints --------------------------------------------------------
# Axolotl's checkpoints (README, "Preemption and resume"): $OBC_CHECKPOINTS is output_dir on
# this machine; .obc/checkpoints and .obc/train-attempts say which inputs made each.

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
  printf 'obc: set aside %s as %s\n' "$1" "$OBC_ASIDE/$OBC_FOLDER" >&2
}
