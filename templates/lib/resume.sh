# --- obc's library: resume -------------------------------------------------------------
# The trainer's resume (the run file's field OBC_RESUME_FIELD, e.g. trainer.axolotl.resume)
# is same-inputs or any (OBC_RESUME; docs/resume.md): train resumes from a
# whole checkpoint, which it finds in output_dir (OBC_TRAINER_OUTPUT_DIR, as the trainer sees
# it).

# Prints the step number of the newest whole checkpoint of inputs $1 (any: every
# checkpoint; other: those of other inputs than these), 0 if there is none. Within one
# inputs' checkpoints numbers only grow: a start from step 0 sets the old ones aside first.
obc_newest_of() {
  OBC_BEST=0
  for OBC_WORD in $(obc_whole_checkpoints); do
    OBC_N=${OBC_WORD#checkpoint-}
    [ "$OBC_N" -gt "$OBC_BEST" ] || continue
    OBC_OWNER=$(obc_inputs_of "$OBC_WORD")
    case $1 in
      any) ;;
      other) [ "$OBC_OWNER" != "$OBC_INPUTS" ] || continue ;;
      *) [ "$OBC_OWNER" = "$1" ] || continue ;;
    esac
    OBC_BEST=$OBC_N
  done
  printf '%s\n' "$OBC_BEST"
}

# Moves aside every checkpoint that is not whole (a stop while it was saved): Axolotl's own
# resume would take the highest number, whole or not.
obc_set_aside() {
  for OBC_WORD in "$OBC_CHECKPOINTS"/checkpoint-*; do
    OBC_N=${OBC_WORD##*/checkpoint-}
    case $OBC_N in '' | *[!0-9]*) continue ;; esac
    ! obc_whole_checkpoint "$OBC_WORD" || continue
    OBC_FOLDER=$OBC_WORD.incomplete
    [ ! -e "$OBC_FOLDER" ] || OBC_FOLDER=$OBC_FOLDER.$OBC_ATTEMPT
    mv -T -- "$OBC_WORD" "$OBC_FOLDER" &&
      obc_say "checkpoint-$OBC_N is incomplete, moved aside as ${OBC_FOLDER##*/}"
  done
}

# Sets aside every whole checkpoint numbered above $1, which train, resumed from checkpoint
# $1, would write over, and drops it from the ledger.
obc_set_aside_above() {
  for OBC_WORD in $(obc_whole_checkpoints); do
    [ "${OBC_WORD#checkpoint-}" -gt "$1" ] || continue
    obc_put_aside "$OBC_CHECKPOINTS/$OBC_WORD"
    [ ! -f "$OBC_RUN_DIR/.obc/checkpoints" ] || {
      awk -v name="$OBC_WORD" '$1 != name' "$OBC_RUN_DIR/.obc/checkpoints" > "$OBC_TMP/ledger" &&
        mv -fT -- "$OBC_TMP/ledger" "$OBC_RUN_DIR/.obc/checkpoints"; } ||
      obc_fail "cannot update $OBC_RUN_DIR/.obc/checkpoints"
  done
}

# Refuses to train on from checkpoint $1 of other inputs, saying what the user can do.
obc_refuse_checkpoint() {
  obc_say "$1 in $OBC_TRAINER_OUTPUT_DIR was made by other training inputs ($(obc_inputs_of "$1")), not these ($OBC_INPUTS): resuming from it would continue the training of another config, data or program. Choose one:"
  printf '  job.sh --fresh: start over; what the old inputs wrote is set aside under %s/set-aside\n' \
    "$OBC_RUN_DIR" >&2
  OBC_KEPT=$(obc_trainer_steps "$OBC_CHECKPOINTS/$1/trainer_state.json")
  printf '  job.sh --resume-from %s: continue from it deliberately (transformers then takes save_steps and logging_steps from its trainer_state.json%s, not from the config)\n' \
    "$1" "${OBC_KEPT:+: $OBC_KEPT}" >&2
  printf '  %s: any, in the run file: always the newest checkpoint, whatever made it\n' \
    "$OBC_RESUME_FIELD" >&2
  obc_fail "$1 is of other training inputs" 3
}

# Prints save_steps and logging_steps as trainer_state.json $1 has them.
obc_trainer_steps() {
  sed -n -e 's/^ *"\(save_steps\)": *\([0-9]*\).*/\1 \2/p' \
    -e 's/^ *"\(logging_steps\)": *\([0-9]*\).*/\1 \2/p' "$1" 2>/dev/null | paste -sd ' ' -
}

# Before the steps, when train will run: the checkpoint it resumes from (the one
# --resume-from names, else by OBC_RESUME: the newest of these inputs, or with `any` the
# newest), given to train with OBC_RESUME_FLAG (Axolotl's --resume-from-checkpoint; so the
# log says which). What train would write over is set aside.
obc_choose_checkpoint() {
  [ -z "$OBC_FRESH" ] || return 0
  [ -n "$OBC_DRY_RUN" ] || obc_set_aside
  if [ -n "$OBC_RESUME_FROM" ]; then
    obc_whole_checkpoint "$OBC_CHECKPOINTS/$OBC_RESUME_FROM" ||
      obc_fail "--resume-from: $OBC_RESUME_FROM is no whole checkpoint in $OBC_CHECKPOINTS" 3
    OBC_NEWEST=${OBC_RESUME_FROM#checkpoint-}
  else
    if [ "$OBC_RESUME" = any ]; then
      OBC_NEWEST=$(obc_newest_of any)
    else
      OBC_NEWEST=$(obc_newest_of "$OBC_INPUTS")
      OBC_OTHER=$(obc_newest_of other)
      [ "$OBC_NEWEST" -gt 0 ] || [ "$OBC_OTHER" -eq 0 ] || obc_refuse_checkpoint "checkpoint-$OBC_OTHER"
    fi
  fi
  [ -n "$OBC_DRY_RUN" ] || obc_set_aside_above "$OBC_NEWEST"
  [ "$OBC_NEWEST" -gt 0 ] || return 0
  OBC_RESUMED_FROM=$OBC_TRAINER_OUTPUT_DIR/checkpoint-$OBC_NEWEST
  OBC_RESUMED_INPUTS=$(obc_inputs_of "checkpoint-$OBC_NEWEST")
}

# When train starts: says where from, and records the attempt's inputs.
obc_resume() {
  if [ -n "$OBC_FRESH" ]; then
    obc_announce 'starts over (--fresh)'
  elif [ -n "$OBC_RESUMED_FROM" ]; then
    obc_announce "resumes from $OBC_RESUMED_FROM$(
      [ "$OBC_RESUMED_INPUTS" = "$OBC_INPUTS" ] || printf ', of other inputs (--resume-from)')"
  fi
  [ -n "$OBC_DRY_RUN" ] || obc_record_train_attempt
}
