# --- obc's library: launcher -----------------------------------------------------------
# trainer.torchrun (docs/trainers.md): the user's script under its
# launcher (OBC_LAUNCHER: torchrun or accelerate) in the step OBC_LAUNCHER_STEP, on several
# Slurm nodes, whose launch takes the rendezvous of obc_rendezvous.

# obc_launch_across_nodes RUNNER LAUNCH...: the step on every node, one srun task each, the
# first OBC_LOCAL_WORDS words of its launch on one machine and its rank count replaced by
# the rendezvous: torchrun's c10d rendezvous at the first node, which gives each process
# its rank; or accelerate's machines, this node's rank (each node's own NODE_RANK, read
# where it runs), all the processes and the first node's address and port.
# shellcheck disable=SC2329 # called by obc_on_every_node, in a job with steps on every node
obc_launch_across_nodes() {
  OBC_WORD=$1
  shift "$((OBC_LOCAL_WORDS + 2))"
  if [ "$OBC_LAUNCHER" = accelerate ]; then
    # shellcheck disable=SC2016 # expanded by the node's shell
    obc_node_tasks "$OBC_WORD" sh -c 'exec accelerate launch --machine_rank "$NODE_RANK" "$@"' \
      accelerate --multi_gpu --num_machines "$NNODES" \
      --num_processes "$((NNODES * OBC_NPROC_PER_NODE))" \
      --main_process_ip "$MASTER_ADDR" --main_process_port "$MASTER_PORT" "$@"
  else
    obc_node_tasks "$OBC_WORD" torchrun --nnodes "$NNODES" \
      --nproc_per_node "$OBC_NPROC_PER_NODE" --rdzv_backend c10d \
      --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" --rdzv_id "$SLURM_JOB_ID" "$@"
  fi
}
