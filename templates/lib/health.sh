# --- obc's library: health -------------------------------------------------------------
# health: (docs/preflight.md): before the first step, every node checks its GPUs with
# nvidia-smi (at least OBC_HEALTH_GPUS of them) and runs its ranks of a short all-reduce
# across the job (.obc/health.py, which the job's obc_files writes) within
# OBC_HEALTH_TIMEOUT seconds. A node that fails says why, naming itself, and the job ends
# with exit 3; under Slurm, with OBC_HEALTH_REQUEUE (slurm.max_restarts), the node is first
# added to the job's excluded nodes and the job requeued.

# obc_gpu_count N: `N GPU` or `N GPUs`.
obc_gpu_count() {
  if [ "$1" -eq 1 ]; then echo "1 GPU"; else echo "$1 GPUs"; fi
}

# obc_check_gpus EXPECTED: true if nvidia-smi lists at least EXPECTED GPUs (0: no check),
# none with uncorrectable ECC errors since the driver loaded (a GPU that does not count them
# says [N/A], and passes); else sets OBC_HEALTH_PROBLEM to what is wrong.
obc_check_gpus() {
  [ "$1" -gt 0 ] || return 0
  if ! obc_which nvidia-smi "$PATH" >/dev/null; then
    OBC_HEALTH_PROBLEM="expected $(obc_gpu_count "$1"), but nvidia-smi is not on PATH"
    return 1
  fi
  OBC_CODE=0
  OBC_REST=$(nvidia-smi --query-gpu=index,ecc.errors.uncorrected.volatile.total \
    --format=csv,noheader,nounits 2>/dev/null) || OBC_CODE=$?
  OBC_COUNT=0 OBC_HEALTH_PROBLEM=
  while IFS=', ' read -r OBC_WORD OBC_VALUE; do
    case $OBC_WORD in '' | *[!0-9]*) continue ;; esac
    OBC_COUNT=$((OBC_COUNT + 1))
    case $OBC_VALUE in
      '' | *[!0-9]* | 0) ;;
      *) OBC_HEALTH_PROBLEM="${OBC_HEALTH_PROBLEM:+$OBC_HEALTH_PROBLEM; }GPU $OBC_WORD has $OBC_VALUE uncorrectable ECC errors" ;;
    esac
  done <<EOF
$OBC_REST
EOF
  if [ "$OBC_COUNT" -lt "$1" ]; then
    OBC_HEALTH_PROBLEM="expected $(obc_gpu_count "$1"), nvidia-smi lists $OBC_COUNT"
    [ "$OBC_CODE" -eq 0 ] || OBC_HEALTH_PROBLEM="$OBC_HEALTH_PROBLEM (it exited with $OBC_CODE)"
  fi
  [ -z "$OBC_HEALTH_PROBLEM" ]
}

# obc_check_node NODES RANK: this node's check, node RANK of NODES: its GPUs, then its ranks
# of the all-reduce, started in the job's runtime (obc_step_command) and waited for. Returns
# 0, or says why it failed, naming the node, and returns 3.
obc_check_node() {
  if obc_check_gpus "$OBC_HEALTH_GPUS"; then
    obc_step_command obc_start python3 .obc/health.py "$OBC_HEALTH_TIMEOUT" "$1" "$2"
    OBC_STATUS=0
    wait "$OBC_CHILD" || OBC_STATUS=$?
    OBC_CHILD=
    # Ended by its SIGALRM (14): 128+14, as ksh93 says it 256+14, as yash 384+14.
    case $OBC_STATUS in
      0) return 0 ;;
      142 | 270 | 398) OBC_HEALTH_PROBLEM="the all-reduce did not end within $OBC_HEALTH_TIMEOUT s (health.timeout)" ;;
      *) OBC_HEALTH_PROBLEM="the all-reduce failed with exit code $OBC_STATUS" ;;
    esac
  fi
  obc_say "$OBC_JOB: health check failed on $(obc_host): $OBC_HEALTH_PROBLEM"
  return 3
}

# The health check, after the rendezvous: on every node of a Slurm job with steps on every
# node (each node's task runs obc_check_node: obc_node_task), else here. A node that failed
# is excluded and the job requeued, if it may; else the job ends with exit 3.
# shellcheck disable=SC2034 # OBC_NODE_HEALTH is read by obc_node_tasks, if the job has it
obc_health() {
  if [ -n "$OBC_DRY_RUN" ]; then
    OBC_WORD=
    [ "$OBC_HEALTH_GPUS" -eq 0 ] ||
      OBC_WORD="nvidia-smi lists at least $(obc_gpu_count "$OBC_HEALTH_GPUS"), none with uncorrectable ECC errors; "
    obc_say "health check on every node: ${OBC_WORD}an all-reduce across every rank within $OBC_HEALTH_TIMEOUT s (python3 .obc/health.py)"
    return 0
  fi
  if [ -n "${SLURM_JOB_ID:-}" ] && obc_runs_node_tasks; then
    OBC_NODE_HEALTH=1
    obc_node_tasks obc_start
    OBC_NODE_HEALTH='' OBC_STATUS=0
    wait "$OBC_CHILD" || OBC_STATUS=$?
    OBC_CHILD=
    [ "$OBC_STATUS" -ne 0 ] || return 0
    # The node that failed first, as its task recorded it: `RANK CODE NODE`.
    OBC_WORD=$(readlink -- "$OBC_TMP/failed" 2>/dev/null) || OBC_WORD='? ? a node'
    rm -f -- "$OBC_TMP/failed"
    OBC_WORD=${OBC_WORD#* } OBC_WORD=${OBC_WORD#* }
  else
    obc_check_node 1 0 && return 0
    OBC_WORD=$(obc_host)
  fi
  [ -z "$OBC_HEALTH_REQUEUE" ] ||
    obc_requeue "$OBC_HEALTH_REQUEUE" "the health check failed on $OBC_WORD" "$OBC_WORD"
  obc_status failed 3
  obc_exit 3
}
