# --- obc's library: finished -----------------------------------------------------------
# Steps finish once per inputs (docs/resume.md, "Run records"): each `.obc/done/STEP`
# names the inputs the step last finished for (obc_step_inputs, the job's), and a run starts
# at the first step that has not finished for the current ones.

# True when step $1 finished before, for these inputs.
obc_finished() {
  [ "$(cat -- "$OBC_RUN_DIR/.obc/done/$1" 2>/dev/null)" = "$(obc_step_inputs "$1")" ]
}

# obc_mark_done STEP [finished]: forgets that the step finished (it starts), or records it,
# whole or not at all, as every record. A record that cannot be written (a full disk) fails
# nothing: the step did finish, and a rerun only runs it again.
obc_mark_done() {
  OBC_DONE=$OBC_RUN_DIR/.obc/done/$1
  if [ "$#" -eq 1 ]; then
    rm -f -- "$OBC_DONE"
  elif ! { mkdir -p -- "${OBC_DONE%/*}" "$OBC_TMP/done" &&
           obc_save_record "done/$1" "$(obc_step_inputs "$1")"; }; then
    obc_say "cannot record that step $1 finished in $OBC_DONE: a rerun runs it again"
  fi
}

# Without --from or --only, the run starts at the first step that has not finished for
# these inputs (or at the training step, which --resume-from asks for); when every one has,
# there is nothing to do.
obc_start_at_unfinished() {
  OBC_SKIPPED='finished before for these inputs, skipped'
  for OBC_WORD in $OBC_STEPS; do
    if ! obc_finished "$OBC_WORD" ||
       { [ -n "$OBC_RESUME_FROM" ] && [ "$OBC_WORD" = "$OBC_CHECKPOINT_STEP" ]; }; then
      OBC_FROM=$OBC_WORD
      return 0
    fi
  done
  obc_say "every step finished before for these inputs ($OBC_INPUTS): nothing to do (--from STEP or --fresh runs them again)"
  [ -n "$OBC_DRY_RUN" ] || obc_status succeeded 0
  obc_exit 0
}
