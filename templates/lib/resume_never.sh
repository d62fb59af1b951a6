# --- obc's library: resume_never -------------------------------------------------------
# The trainer's resume (the run file's field OBC_RESUME_FIELD, e.g. trainer.axolotl.resume)
# is never: train starts over from step 0, what it wrote before set aside.
obc_choose_checkpoint() {
  :
}

obc_resume() {
  obc_announce "starts over ($OBC_RESUME_FIELD: never)"
  [ -n "$OBC_DRY_RUN" ] || { obc_set_aside_all checkpoints; obc_record_train_attempt; }
}
