# --- obc's library: resume_never -------------------------------------------------------
# trainer.axolotl.resume is never: train starts over from step 0, what it wrote before set
# aside.
obc_choose_checkpoint() {
  :
}

obc_resume() {
  obc_announce 'starts over (trainer.axolotl.resume: never)'
  [ -n "$OBC_DRY_RUN" ] || { obc_set_aside_all checkpoints; obc_record_train_attempt; }
}
