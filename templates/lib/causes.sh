# --- obc's library: causes -------------------------------------------------------------
# Why a step failed, and whether retry tries again (docs/retry.md): one cause a line,
# `ACTION|EXIT CODES|NAME|LOG`, in the order the part retry's obc_cause tries them.
# Written from compiler/model/causes.py by `python3 -m tools.release_library`: change the
# table there, never here.
OBC_CAUSES='stop||out of memory|OutOfMemoryError|CUDA out of memory|CUDA error: out of memory
stop|137|killed by the OOM killer|oom[-_ ]kill|Out of memory: Kill|Memory cgroup out of memory
stop||a config error|^(\[rank[0-9]*\]: )?([A-Za-z_.]*\.)?(ValueError|KeyError|ValidationError|YAMLError|ScannerError|ParserError|ConfigError)(:|$)
retry||preempted|DUE TO PREEMPTION
retry||a lost node|DUE TO NODE FAIL|Node failure on|NODE_FAIL|Connection to node .* lost
retry||a GPU fault|uncorrectable ECC error|GPU is lost|fallen off the bus|Xid [0-9]
retry||a network or NCCL error|ncclSystemError|ncclRemoteError|ncclInternalError|NCCL error|Watchdog caught collective operation timeout|DistNetworkError|RendezvousConnectionError|RendezvousTimeoutError|Connection reset by peer
retry|143|stopped by TERM from outside the job (a node shutting down, preemption)|'
