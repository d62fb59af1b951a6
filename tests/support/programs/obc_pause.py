"""An Axolotl plugin for the resume test: it takes the race out of stopping a real trainer.

On a tiny model a CPU takes hundreds of steps a second, so a test that signals a job "in
the middle of train" may find train already done. With `plugins: [obc_pause.PausePlugin]`
(this folder on PYTHONPATH), a train that starts with no checkpoint in output_dir waits at
the end of its second step until the dynamic checkpoint's trigger file appears (the job was
told to stop: step 1's loss is in the log by then), and once a checkpoint is saved, waits at
the next step until it is stopped. Everything in between is Axolotl's own: the trigger, the
save, the stop. A train that starts from a checkpoint (the resumed attempt) runs freely.
"""

import time
from pathlib import Path

from axolotl.integrations.base import BasePlugin
from axolotl.utils.callbacks.dynamic_checkpoint import DEFAULT_TRIGGER_FILENAME
from transformers import TrainerCallback

POLL = 0.1  # seconds


class PauseCallback(TrainerCallback):
    def __init__(self) -> None:
        self.first_attempt = False
        self.asked = False

    def on_train_begin(self, args, state, control, **_kwargs):
        self.first_attempt = not any(Path(args.output_dir).glob("checkpoint-*"))

    def on_step_end(self, args, state, control, **_kwargs):
        if not self.first_attempt or state.global_step < 2:
            return
        output_dir = Path(args.output_dir)
        # (A checkpoint numbered above this step is an old one, not what this train saved.)
        if any(int(path.name.partition("-")[2]) <= state.global_step
               for path in output_dir.glob("checkpoint-*") if path.name[11:].isdigit()):
            while True:  # saved: the job stops train here
                time.sleep(POLL)
        # The dynamic checkpoint callback, before this one, deletes the file it sees and
        # asks for the save: a job told to stop before this step ended is asked already.
        while not self.asked:
            self.asked = control.should_save or (output_dir / DEFAULT_TRIGGER_FILENAME).exists()
            time.sleep(POLL)


class PausePlugin(BasePlugin):
    def add_callbacks_post_trainer(self, cfg, trainer):
        return [PauseCallback()]
