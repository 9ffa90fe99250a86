"""A real one-node Slurm cluster for the backend's tests, started in a temporary directory.

``slurm_cluster`` (session scope) writes a ``slurm.conf`` for this host (no cgroups:
``proctrack/linuxproc``, ``task/none``; no accounting), a munge key, starts ``munged``,
``slurmctld`` and ``slurmd`` in the foreground as children of the test process, waits until
the node is ``idle`` and points ``SLURM_CONF`` at the file for everything the tests start.
Everything is stopped afterwards. It skips with the reason when the binaries are missing
(``make test`` installs them as root: ``scripts/setup-system.sh``) or when not running as root (slurmd must be).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "srun", "sinfo")
SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")


@dataclass
class SlurmCluster:
    """A running test cluster: its config file, node name and daemon logs."""

    root: Path
    conf: Path
    node: str
    partition: str

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def logs(self) -> str:
        """The tail of every daemon log (for assertion messages)."""
        parts = []
        for name in ("slurmctld.log", "slurmd.log", "munged.log"):
            path = self.root / name
            if path.exists():
                parts.append(f"--- {name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-30:]))
        return "\n".join(parts)


def _which(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for directory in SBIN:
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _slurm_conf(root: Path, node: str, partition: str) -> str:
    ctld_port, slurmd_port = _free_port(), _free_port()
    return f"""\
# One-node test cluster written by backends/slurm/tests/conftest.py
ClusterName=arenatest
SlurmctldHost={node}
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=500
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=600
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName={node} NodeAddr=127.0.0.1 CPUs=8 RealMemory=8000 State=UNKNOWN
PartitionName={partition} Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


def _start(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    handle = open(log, "ab")
    try:
        return subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    finally:
        handle.close()


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def start_cluster(root: Path) -> tuple[SlurmCluster, list[subprocess.Popen]]:
    """Start munged, slurmctld and slurmd under ``root``; return the cluster and its daemons.

    Raises:
        RuntimeError: a daemon exited or the node did not become idle within 60 s.
    """
    paths = {name: _which(name) for name in BINARIES}
    node = socket.gethostname().split(".")[0]
    partition = "arena"
    for sub in ("munge", "state", "spool"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    os.chmod(root / "munge", 0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    conf = root / "slurm.conf"
    conf.write_text(_slurm_conf(root, node, partition))
    cluster = SlurmCluster(root=root, conf=conf, node=node, partition=partition)
    env = cluster.env()
    procs: list[subprocess.Popen] = []
    try:
        procs.append(_start(
            [paths["munged"], "--foreground", "--force", f"--key-file={key}", f"--socket={root}/munge/munge.socket",
             f"--pid-file={root}/munge/munged.pid", f"--seed-file={root}/munge/munged.seed",
             f"--log-file={root}/munged.log", "--num-threads=2"],
            root / "munged.out", env,
        ))
        _wait_for(lambda: (root / "munge" / "munge.socket").exists(), 20, "munged did not create its socket", procs, cluster)
        procs.append(_start([paths["slurmctld"], "-D", "-i", "-f", str(conf)], root / "slurmctld.out", env))
        procs.append(_start([paths["slurmd"], "-D", "-f", str(conf)], root / "slurmd.out", env))

        def idle() -> bool:
            out = subprocess.run([paths["sinfo"], "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True)
            return out.returncode == 0 and out.stdout.strip().rstrip("*") == "idle"

        _wait_for(idle, 60, "the node did not become idle", procs, cluster)
    except BaseException:
        for proc in reversed(procs):
            _stop(proc)
        raise
    return cluster, procs


def _wait_for(check, timeout_s: float, what: str, procs: list[subprocess.Popen], cluster: SlurmCluster) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args[0]} exited with code {proc.returncode}\n{cluster.logs()}")
        if check():
            return
        time.sleep(0.3)
    raise RuntimeError(f"{what} within {timeout_s:g} s\n{cluster.logs()}")


def missing_binaries() -> list[str]:
    return [name for name in BINARIES if _which(name) is None]


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory) -> Iterator[SlurmCluster]:
    """A one-node Slurm cluster (see the module docstring); ``SLURM_CONF`` is set while it runs."""
    missing = missing_binaries()
    if missing:
        pytest.skip(
            f"Slurm test cluster: {', '.join(missing)} not installed "
            "(run once: sudo scripts/setup-system.sh; it installs Debian's slurmctld, slurmd, slurm-client, munge)"
        )
    if os.geteuid() != 0:
        pytest.skip("Slurm test cluster: slurmd must run as root (CI runs as root)")
    root = Path(tmp_path_factory.mktemp("slurm"))
    try:
        cluster, procs = start_cluster(root)
    except RuntimeError as exc:
        pytest.fail(f"could not start the Slurm test cluster: {exc}")
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        subprocess.run([_which("scancel"), "--partition", cluster.partition], env=cluster.env(), capture_output=True)
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous
        for proc in reversed(procs):
            _stop(proc)
