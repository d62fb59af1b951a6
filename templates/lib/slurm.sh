# --- obc's library: slurm --------------------------------------------------------------
# Steps on every node of a Slurm job (OBC_NODE_STEPS; docs/slurm.md). Outside
# Slurm (SLURM_JOB_ID unset) none of this changes what the script does.

# The rendezvous of a job on several nodes, for every step: the first node of the
# allocation and a port there (OBC_MASTER_PORT), the node count, this node's rank (0 here;
# each node's task sets its own) and the GPUs each node has (OBC_GPUS_PER_NODE).
obc_rendezvous() {
  [ -n "${SLURM_JOB_ID:-}" ] || return 0
  MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
  [ -n "$MASTER_ADDR" ] ||
    obc_fail "cannot find the first node of $SLURM_JOB_NODELIST with scontrol"
  MASTER_PORT=$OBC_MASTER_PORT
  NNODES=$SLURM_JOB_NUM_NODES
  NODE_RANK=0
  GPUS_PER_NODE=$OBC_GPUS_PER_NODE
  export MASTER_ADDR MASTER_PORT NNODES NODE_RANK GPUS_PER_NODE
  ! obc_runs_node_tasks || obc_copy_self
}

# obc_on_every_node RUNNER PROGRAM [ARG...]: hands RUNNER the step as one srun task per node
# (obc_node_tasks); the step OBC_TORCHRUN_STEP (Axolotl's train) is launched with torchrun
# across the nodes, the step OBC_LAUNCHER_STEP (trainer.torchrun's) by its launcher. The step
# OBC_TORCHRUN_PROGRAM_STEP (TRL's train) is torchrun itself, `torchrun -m trl.scripts.sft ...`,
# which takes the rendezvous right after its name, before -m. c10d's rendezvous gives each
# node its rank, so that the words are the same on every node.
obc_on_every_node() {
  if [ "$OBC_NAME" = "$OBC_LAUNCHER_STEP" ]; then
    obc_launch_across_nodes "$@"
    return
  fi
  if [ "$OBC_NAME" = "$OBC_TORCHRUN_STEP" ]; then
    set -- "$@" --launcher torchrun -- --nnodes "$NNODES" --nproc_per_node "$GPUS_PER_NODE" \
      --rdzv_backend c10d --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" --rdzv_id "$SLURM_JOB_ID"
  fi
  if [ "$OBC_NAME" = "$OBC_TORCHRUN_PROGRAM_STEP" ]; then
    OBC_RUNNER=$1 OBC_WORD=$2
    shift 2
    set -- "$OBC_RUNNER" "$OBC_WORD" --nnodes "$NNODES" --nproc_per_node "$GPUS_PER_NODE" \
      --rdzv_backend c10d --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" --rdzv_id "$SLURM_JOB_ID" "$@"
  fi
  obc_node_tasks "$@"
}

# After a step on every node: if it failed, its exit code is that of the node's part that
# failed first, by itself, as it recorded (a link whose target is `RANK CODE NODE`, made
# only if none is there). srun would give the highest code of all: 143 for the parts it
# stopped with TERM once that one failed.
obc_first_failure() {
  OBC_WORD=$(readlink -- "$OBC_TMP/failed" 2>/dev/null) || return 0
  rm -f -- "$OBC_TMP/failed"
  OBC_RANK=${OBC_WORD%% *} OBC_WORD=${OBC_WORD#* }
  OBC_CODE=${OBC_WORD%% *} OBC_WORD=${OBC_WORD#* }
  case $OBC_RANK in '' | *[!0-9]*) return 0 ;; esac
  case $OBC_CODE in '' | *[!0-9]*) return 0 ;; esac
  [ "$OBC_STATUS" -ne 0 ] || return 0
  OBC_STATUS=$OBC_CODE
  obc_announce "rank $OBC_RANK failed first, on node $OBC_WORD, with exit code $OBC_CODE"
}
