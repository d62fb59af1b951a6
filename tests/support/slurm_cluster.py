"""A real Slurm cluster on this machine, for the tests: Debian's slurmctld and slurmd.

Two emulated nodes (two `slurmd -N`, one machine), each with eight fake GPUs: gres files
that are character devices with /dev/null's numbers, which is all Slurm needs to hand out
CUDA_VISIBLE_DEVICES. Partitions `debug` (the default), `gpu` and `cpu`, and nodes that claim 64
CPUs and 512 GiB (`config_overrides`), so that `sbatch --test-only` takes the examples as
a real GPU cluster would. A cluster may be given the text of a plugstack.conf (SPANK
plugins, such as the fake pyxis of tests/support/pyxis); the default has none. The cluster has a
munged of its own (its socket named by AuthInfo), so that test sessions side by side do not
share one; the daemons are stopped at the end by their PIDs.

Jobs are submitted with `sbatch --parsable` and followed with `scontrol show job -o` (`sbatch
--wait` polls with a back-off of up to 10 s); nothing waits a fixed time.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import alive

NODES = ("n1", "n2")
GPUS_PER_NODE = 8
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


def missing_programs() -> list[str]:
    """The Slurm and munge programs this machine lacks (tests/run installs them)."""
    programs = ("slurmctld", "slurmd", "sbatch", "scontrol", "srun", "munged", "munge")
    return [p for p in programs if shutil.which(p, path="/usr/sbin:/usr/bin:/sbin:/bin") is None]


def _free_ports(count: int) -> list[int]:
    """Ports free now, consecutive (slurm.conf gives the nodes a range)."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count > 65535:
            continue
        sockets = []
        try:
            for port in range(first, first + count):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return list(range(first, first + count))
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError("no free ports for the Slurm daemons")


def _config(root: Path, munge_socket: Path, ports: list[int], plugstack: str) -> str:
    controller, *nodes = ports
    # Without the line Slurm reads plugstack.conf beside slurm.conf, which is not written.
    plugstack_line = f"PlugStackConfig={root}/etc/plugstack.conf\n" if plugstack else ""
    return f"""\
{plugstack_line}ClusterName=obctest
SlurmctldHost=localhost
SlurmctldPort={controller}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
MinJobAge=600
GresTypes=gpu
NodeName=n[1-{len(NODES)}] NodeHostname={socket.gethostname()} NodeAddr=127.0.0.1 \
Port=[{nodes[0]}-{nodes[-1]}] CPUs=64 RealMemory=524288 Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=ALL MaxTime=INFINITE State=UP
PartitionName=cpu Nodes=ALL MaxTime=INFINITE State=UP
"""


@dataclass
class Job:
    """A finished (or running) job as `scontrol show job -o` describes it."""

    id: str
    fields: dict[str, str]

    @property
    def state(self) -> str:
        return self.fields["JobState"]

    @property
    def requeued(self) -> bool:
        """Waiting to start again: pending, with a restart counted (a job pending without
        one has not started yet)."""
        return self.state == "PENDING" and self.fields.get("Restarts", "0") != "0"

    @property
    def exit_code(self) -> int:
        """The script's exit code (ExitCode=CODE:SIGNAL)."""
        return int(self.fields["ExitCode"].split(":")[0])


class SlurmCluster:
    """Start with `start()`, stop with `stop()` (also after a start that failed half way);
    `env` is what every Slurm client needs. `plugstack`, if given, is the plugstack.conf
    that srun, sbatch and slurmstepd load."""

    def __init__(self, root: Path, plugstack: str = "") -> None:
        self.root = root
        self.plugstack = plugstack
        self.conf = root / "etc" / "slurm.conf"
        self._pids: list[int] = []
        self._munged: int | None = None
        # munged runs as the munge user, who cannot enter pytest's private temporary folders.
        self._munge_dir = Path(tempfile.mkdtemp(prefix="obc-munge-"))

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def start(self, timeout: float = 60) -> None:
        for folder in ("etc", "state", "log", "dev", *(f"spool/{n}" for n in NODES)):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        for i in range(GPUS_PER_NODE):
            os.mknod(self.root / "dev" / f"nvidia{i}", 0o666 | 0o020000, os.makedev(1, 3))
        self.conf.write_text(_config(self.root, self._munge_dir / "munge.socket",
                                     _free_ports(1 + len(NODES)), self.plugstack))
        if self.plugstack:
            (self.root / "etc" / "plugstack.conf").write_text(self.plugstack)
        (self.root / "etc" / "gres.conf").write_text(
            f"AutoDetect=off\nNodeName=n[1-{len(NODES)}] Name=gpu "
            f"File={self.root}/dev/nvidia[0-{GPUS_PER_NODE - 1}]\n")
        self._munged = self._start_munged()
        env = {**os.environ, **self.env}
        self._pids.append(self._daemon(["slurmctld"], env, self.root / "slurmctld.pid"))
        for node in NODES:
            self._pids.append(self._daemon(["slurmd", "-N", node], env,
                                           self.root / f"slurmd-{node}.pid"))
        self.wait_for(lambda: self._idle_nodes() == len(NODES), timeout, "nodes to be idle")

    def stop(self) -> None:
        # `scontrol shutdown` stops slurmctld and every slurmd; then wait for their PIDs
        # (slurmctld removes its pid file before it has exited), and stop munged last.
        subprocess.run(["scontrol", "shutdown"], env={**os.environ, **self.env},
                       capture_output=True, check=False, timeout=30)
        for pid in self._pids:
            self._end(pid)
        if self._munged is not None:
            os.kill(self._munged, signal.SIGTERM)
            self._end(self._munged)
        shutil.rmtree(self._munge_dir, ignore_errors=True)

    def submit(self, script: Path, *options: str, cwd: Path, env: dict[str, str]) -> str:
        """sbatch the script from `cwd` with exactly `env` (plus SLURM_CONF); return its id."""
        result = subprocess.run(["sbatch", "--parsable", *options, str(script)], cwd=cwd,
                                env={**env, **self.env}, capture_output=True, text=True,
                                check=False, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip().split(";")[0]

    def show(self, job_id: str) -> Job:
        result = subprocess.run(["scontrol", "show", "job", "-o", job_id],
                                env={**os.environ, **self.env}, capture_output=True,
                                text=True, check=True, timeout=30)
        fields = dict(word.split("=", 1) for word in result.stdout.split() if "=" in word)
        return Job(job_id, fields)

    def wait(self, job_id: str, timeout: float = 90) -> Job:
        """Wait until the job has ended; return how. A job that does not end fails the test
        with what it printed so far and the processes still running: all there is to tell a
        hang by once the cluster is gone."""
        try:
            self.wait_for(lambda: self.show(job_id).state in FINISHED, timeout,
                          f"job {job_id} to end")
        except TimeoutError as error:
            raise TimeoutError(f"{error}\n{self._hang_report(job_id)}") from None
        return self.show(job_id)

    def _hang_report(self, job_id: str) -> str:
        output = Path(self.show(job_id).fields.get("StdOut", ""))
        printed = output.read_text(errors="replace")[-6000:] if output.is_file() else ""
        processes = subprocess.run(["ps", "-eo", "pid,ppid,etime,stat,wchan:20,args"],
                                   capture_output=True, text=True, check=False).stdout
        return (f"--- the job's output ({output}), its end:\n{printed}\n"
                f"--- the processes:\n{processes}")

    def start_requeued(self, job_id: str) -> None:
        """Let a job start again now once it has been requeued, not after the two minutes
        Slurm makes it wait; but not within the second in which the node revoked the job's
        credential: the node would refuse to launch it ("Job credential revoked") and the
        job would fail. Pending alone is not requeued: a CI run took a job that had not
        started yet for one."""
        self.wait_for(lambda: self.show(job_id).requeued, 60,
                      f"job {job_id} to be requeued")
        requeued = int(time.time())
        self.wait_for(lambda: time.time() >= requeued + 2, 10, "the next second but one")
        result = self.run("scontrol", "update", f"JobId={job_id}", "StartTime=now")
        assert result.returncode == 0, result.stderr

    def run(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env={**os.environ, **self.env}, capture_output=True,
                              text=True, check=False, timeout=60)

    def _idle_nodes(self) -> int:
        result = self.run("sinfo", "-h", "-N", "-o", "%N %t")
        return sum(1 for line in set(result.stdout.splitlines()) if line.endswith(" idle"))

    def _start_munged(self) -> int:
        folder = self._munge_dir
        folder.chmod(0o755)
        shutil.chown(folder, "munge", "munge")
        # munged refuses to run as root (its files would be owned by another user).
        subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged",
                        f"--socket={folder}/munge.socket", f"--pid-file={folder}/munged.pid",
                        f"--log-file={folder}/munged.log", f"--seed-file={folder}/munged.seed"],
                       check=True, timeout=30)
        pid_file = folder / "munged.pid"
        self.wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 30, "munged")
        return int(pid_file.read_text())

    def _daemon(self, argv: list[str], env: dict[str, str], pid_file: Path) -> int:
        subprocess.run(argv, env=env, check=True, timeout=30, capture_output=True)
        self.wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 30,
                       f"{argv[0]} to write {pid_file.name}")
        return int(pid_file.read_text())

    @staticmethod
    def _end(pid: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while alive(pid):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                deadline += timeout
            time.sleep(0.1)

    def wait_for(self, condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                logs = "\n".join(p.read_text()[-2000:] for p in (self.root / "log").glob("*"))
                raise TimeoutError(f"gave up waiting {timeout} s for {what}\n{logs}")
            time.sleep(0.1)


