"""`obc status`: the last state of the job in each run dir, read from what the job itself
left there (its record .obc/status.json and its lock), judged as `job.sh --status` judges it.
Enters: run dirs. Leaves: one state per run dir. Reads run dirs and may ask Slurm (squeue);
writes nothing. Imports model (the Slurm facts it shares with the script) and core; never
cli."""
