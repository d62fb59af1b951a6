# --- obc's library: on_signal ----------------------------------------------------------
# checkpoint.on_signal (docs/resume.md): a job told to stop during training
# first asks Axolotl for a checkpoint, or gives a step that saves one on TERM the time to.

# When the job is told to stop during the step that saves a checkpoint on TERM
# (OBC_GIVE_GRACE: a script's launcher, which passes TERM on to every rank; a trainer that
# saves on TERM, transformers' enable_jit_checkpoint), or in a node's part of it: the step
# gets TERM as any other, and OBC_CHECKPOINT_GRACE seconds (checkpoint.grace) more than the
# stop timeout before KILL, to save a checkpoint.
# shellcheck disable=SC2329 # called from the traps
obc_give_grace() {
  [ "$OBC_NAME" = "$OBC_GIVE_GRACE" ] || [ -n "$OBC_NODE_TASK" ] || return 0
  OBC_STOP_TIMEOUT=$((OBC_STOP_TIMEOUT + OBC_CHECKPOINT_GRACE))
  obc_say "$OBC_GIVE_GRACE has the signal; it has $OBC_STOP_TIMEOUT s to save a checkpoint and end"
}

# True while the step's program runs: its process is there, and not a zombie (which it is
# from its end until the shell waits for it).
# shellcheck disable=SC2329 # called from the traps
obc_step_alive() {
  { read -r OBC_WORD < "/proc/$OBC_CHILD/stat"; } 2>/dev/null || return 1
  case ${OBC_WORD##*') '} in Z*) return 1 ;; esac
}

# When the job is told to stop during its training step (OBC_CHECKPOINT_STEP): ask Axolotl
# for a checkpoint (its dynamic_checkpoint trigger file, OBC_CHECKPOINT_TRIGGER) and wait,
# up to the grace (OBC_CHECKPOINT_GRACE seconds), for a whole checkpoint that was not there
# before (by name, never by number: an older one may be numbered higher), or for the step
# to end.
# shellcheck disable=SC2329 # called from the traps
obc_ask_checkpoint() {
  [ "$OBC_NAME" = "$OBC_CHECKPOINT_STEP" ] && [ -d "$OBC_CHECKPOINTS" ] || return 0
  OBC_BEFORE=" $(obc_whole_checkpoints | tr '\n' ' ')"
  OBC_TRIGGER=$OBC_CHECKPOINTS/$OBC_CHECKPOINT_TRIGGER
  if [ -e "$OBC_TRIGGER" ] || [ -L "$OBC_TRIGGER" ]; then
    obc_say "cannot ask Axolotl for a checkpoint: $OBC_TRIGGER is there already"
    return 0
  fi
  obc_create_new "$OBC_TRIGGER" || return 0
  obc_say "asked Axolotl for a checkpoint; waiting up to $OBC_CHECKPOINT_GRACE s"
  OBC_LEFT=$OBC_CHECKPOINT_GRACE
  while [ "$OBC_LEFT" -gt 0 ] && obc_step_alive; do
    OBC_SAVED=$(obc_new_checkpoint "$OBC_BEFORE")
    if [ -n "$OBC_SAVED" ]; then
      obc_say "$OBC_SAVED saved"
      break
    fi
    sleep 1
    OBC_LEFT=$((OBC_LEFT - 1))
  done
  [ "$OBC_LEFT" -gt 0 ] || obc_say "no checkpoint within $OBC_CHECKPOINT_GRACE s"
  rm -f -- "$OBC_TRIGGER"
}

# Creates the empty file $1, which is not there, and never through a link (output_dir may
# be a folder others can write, who could leave one under its name): made new by mktemp
# beside it, then hard-linked into place, which neither follows a link nor replaces
# anything. A shell's noclobber (`set -C`) would not do: every shell opens a link to a pipe
# or a device with it, and yash loops for ever on a link that leads nowhere.
# shellcheck disable=SC2329 # called from the traps
obc_create_new() {
  OBC_NEW=$(mktemp "${1%/*}/.obc-new.XXXXXX") || return 1
  ln -T -- "$OBC_NEW" "$1"
  set -- "$?"
  rm -f -- "$OBC_NEW"
  return "$1"
}

# Prints the name of a whole checkpoint that is not in the list $1 (` NAME NAME `), if any.
# shellcheck disable=SC2329 # called from the traps
obc_new_checkpoint() {
  for OBC_WORD in $(obc_whole_checkpoints); do
    case $1 in *" $OBC_WORD "*) ;; *) printf '%s\n' "$OBC_WORD"; return 0 ;; esac
  done
}
