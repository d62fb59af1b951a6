# --- obc's library: node_tasks ---------------------------------------------------------
# A step on every node whose part each node runs from a copy of this script (every runtime
# but enroot): the copy, its check, and the node's part.

# Where this script's own text is, by a path that stays right after the job changes
# directory: the nodes run a copy of it. Taken here, at the top level: in a function, zsh's
# $0 is the function's name.
case $0 in /*) OBC_SELF=$0 ;; *) OBC_SELF=$PWD/$0 ;; esac
OBC_SELF_SHA256=

# Preflight, in a Slurm job: the sha256 of this script's own text, which each node checks
# its copy against before it runs it (without sha256sum, preflight says so already). A
# script read from standard input has none to copy.
obc_hash_self() {
  obc_which sha256sum "$PATH" >/dev/null || return 0
  if [ -f "$OBC_SELF" ] && OBC_SELF_SHA256=$(sha256sum < "$OBC_SELF"); then
    OBC_SELF_SHA256=${OBC_SELF_SHA256%% *}
  else
    obc_preflight_failure "cannot read this script's own text at $OBC_SELF, which every node runs a copy of: start it as a file (sh job.sh, sbatch job.sh), not from standard input"
  fi
}

# At the rendezvous: the nodes run the steps from a copy of this script in the run dir
# (sbatch runs a copy of its own that only this node can read), checked against its sha256
# (obc_node_tasks).
obc_copy_self() {
  obc_write_file .obc/job.sh < "$OBC_SELF" ||
    obc_fail "cannot copy this script ($OBC_SELF) into the run dir for the nodes" 3
}

# What srun starts on each node for its part of a step (obc_node_tasks): never this script
# by its name in the run dir, where another user of a team's folder could put a script of
# theirs, or where the job may have been edited since. The check copies it (the run dir's
# copy $1, a regular file: a pipe would never end) into a private file of the node's
# (mktemp, mode 600, in the user's TMPDIR or /tmp; removed if srun stops it meanwhile), and
# runs that only if its sha256 is $2, the one preflight took on the first node; else it
# says which node refuses and why, and exits 3. Its text is srun's argument, never a file.
# A check that fails records it at $3, as the node's part does (obc_node_task).
# shellcheck disable=SC2016 # expanded by the node's shell
OBC_NODE_CHECK='
  node=${SLURMD_NODENAME:-$(uname -n)} rank=$SLURM_NODEID shared=$1 sum=$2 failed=$3
  shift 3
  refuse() {
    printf "obc: node %s (rank %s) refuses to run %s: %s\n" "$node" "$rank" "$shared" "$1" >&2
    ln -s "$rank 3 $node" "$failed" 2>/dev/null
    exit 3
  }
  copy=
  stopped() { rm -f -- "$copy"; exit 143; }
  trap stopped TERM
  copy=$(mktemp "${TMPDIR:-/tmp}/obc-node.XXXXXX") || refuse "cannot make a private file for it"
  if [ ! -f "$shared" ] || ! cat -- "$shared" > "$copy"; then
    rm -f -- "$copy"
    refuse "it is no regular file, or cannot be read"
  fi
  case $(sha256sum < "$copy") in "$sum "*) exec /bin/sh "$copy" --node-task "$failed" "$@" ;; esac
  rm -f -- "$copy"
  refuse "it is not the script this job checked (its sha256 differs)"
'

# obc_node_tasks RUNNER PROGRAM [ARG...]: one srun task per node (the whole step ends when
# one of them fails), each the check, then this script with --node-task. srun of Slurm
# 22.05 to 23.02 does not take --cpus-per-task from the job: it is passed on.
obc_node_tasks() {
  OBC_RUNNER=$1
  shift
  "$OBC_RUNNER" srun --nodes="$NNODES" --ntasks="$NNODES" --ntasks-per-node=1 \
    ${SLURM_CPUS_PER_TASK:+"--cpus-per-task=$SLURM_CPUS_PER_TASK"} \
    --kill-on-bad-exit=1 --export=ALL \
    /bin/sh -c "$OBC_NODE_CHECK" obc-node "$OBC_RUN_DIR/.obc/job.sh" "$OBC_SELF_SHA256" \
    "$OBC_TMP/failed" ${OBC_NODE_HEALTH:+--node-health} --run-dir "$OBC_RUN_DIR" \
    ${OBC_CACHE_DIR:+--cache-dir "$OBC_CACHE_DIR"} -- "$@"
}

# One node's part of a step (srun runs it on every node), from the private copy that the
# check made, which it removes now that this shell has it open (--node-task is the check's
# option, never a person's: its copy alone is removed): this node's rank, and the step
# stopped like any other on TERM, which srun passes on when the job stops it or is
# cancelled, or when another node's part failed. With --node-health, the part is the node's
# health check (obc_check_node).
obc_node_task() {
  case ${OBC_SELF##*/} in obc-node.*) rm -f -- "$OBC_SELF" ;; esac
  NODE_RANK=$SLURM_NODEID
  export NODE_RANK
  obc_node_prepare
  OBC_STATUS=0
  if [ -n "$OBC_NODE_HEALTH" ]; then
    obc_check_node "$NNODES" "$NODE_RANK" || OBC_STATUS=$?
  else
    obc_step_command obc_start "$@"
    wait "$OBC_CHILD" || OBC_STATUS=$?
  fi
  # A part that failed by itself (one that srun stopped ends in the trap instead) says so,
  # unless another was first.
  [ "$OBC_STATUS" -eq 0 ] ||
    ln -s "$NODE_RANK $OBC_STATUS $(obc_host)" "$OBC_NODE_TASK" 2>/dev/null
  exit "$OBC_STATUS"
}
