"""The output directory's names and paths: one place that says where each file of a run lives.

An output directory (``arena run --output-dir``, default ``outputs/<experiment>/<timestamp>``)::

    experiment.yaml          the resolved snapshot; creating it claims the directory
    manifest.json            the planned work items of every run
    submission.json          which backend holds the runs (status, cancel, collect)
    provenance.json          what ran: versions, hosts, who could reach the servers
    experiment_result.json   the merged results (``arena report`` rebuilds it)
    index.html               the report
    <run>/                   one run: episodes.jsonl, status.json, run_result.json,
                             stop_reason, runner.log, server.log, videos/, trajectories/
    <run>/shards/<K>/        shard K of a sharded run: the same files of a run
    servers/                 the local backend's server logs while its servers run
    queue.sqlite             the work queue runners claim episodes from (:mod:`arena.outputs.workqueue`)

A *work directory* is where one ``arena run-one`` invocation writes: the run's directory, or
one shard's. Everything here is a name or a path; reading and writing the files is
:mod:`arena.outputs.records` (episodes, status, run result) and :mod:`arena.outputs.progress`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: The resolved snapshot of the experiment; creating it exclusively claims the directory.
EXPERIMENT_FILE = "experiment.yaml"
#: The planned work items of every run (:func:`arena.rollout.workitems.write_manifest`).
MANIFEST_FILE = "manifest.json"
#: Which launch backend holds the runs (:class:`arena.launch.base.Submission`).
SUBMISSION_FILE = "submission.json"
#: What ran (:mod:`arena.results.provenance`).
PROVENANCE_FILE = "provenance.json"
#: The merged results of every run (:func:`arena.results.aggregate.build_experiment_result`).
EXPERIMENT_RESULT_FILE = "experiment_result.json"
#: The HTML report (:mod:`arena.results.report`).
REPORT_FILE = "index.html"
#: The work queue of every run's episodes (:class:`arena.outputs.workqueue.WorkQueue`).
QUEUE_FILE = "queue.sqlite"

#: One finished episode per line (:class:`arena.outputs.records.RecordWriter`).
EPISODES_FILE = "episodes.jsonl"
#: A run's (or shard's) live state (:class:`arena.outputs.records.StatusWriter`).
STATUS_FILE = "status.json"
#: A run's (or shard's) final numbers (:func:`arena.outputs.records.write_run_result`).
RUN_RESULT_FILE = "run_result.json"
#: A backend's reason for the SIGUSR1 it sends a runner, written into the work directory first.
STOP_REASON_FILE = "stop_reason"
#: The output of ``arena run-one`` (local backend).
RUNNER_LOG = "runner.log"
#: The output of the run's policy server, when arena started one.
SERVER_LOG = "server.log"
#: The folder of the local backend's server logs while they run (copied to each run's ``server.log``).
SERVERS_DIR = "servers"
#: The folder of a work directory's episode videos (``recording.enabled``), one MP4 per episode
#: (:mod:`arena.rollout.recording`).
VIDEOS_DIR = "videos"
#: The folder of a work directory's recorded episodes (``trajectories.enabled``), one
#: :data:`TRAJECTORY_SUFFIX` file per episode (:mod:`arena.rollout.trajectories`).
TRAJECTORIES_DIR = "trajectories"
#: How a recorded episode's file ends (a NumPy ``.npz`` archive, no pickled objects).
TRAJECTORY_SUFFIX = ".npz"
#: How the file of an episode still running ends; renamed to its final name when it ends.
TRAJECTORY_PARTIAL_SUFFIX = ".partial.npz"
#: The folder of a sharded run's shards, one subfolder per shard index.
SHARDS_DIR = "shards"

#: The files whose presence marks a directory as a run's.
RUN_MARKERS: tuple[str, ...] = (EPISODES_FILE, STATUS_FILE, RUN_RESULT_FILE, SHARDS_DIR)


def run_dir(output_dir: str | os.PathLike[str], run: str) -> Path:
    """``<output_dir>/<run>``."""
    return Path(output_dir) / run


def work_dir(output_dir: str | os.PathLike[str], run: str, shard: int | None = None) -> Path:
    """Where one invocation writes: ``<output_dir>/<run>``, or ``<output_dir>/<run>/shards/<K>``
    for shard index ``shard`` (``K`` of ``K/N``)."""
    base = run_dir(output_dir, run)
    return base if shard is None else base / SHARDS_DIR / str(shard)


def shard_dirs(run_directory: str | os.PathLike[str]) -> list[Path]:
    """The shard directories of a run, by shard index (numeric names first, in numeric order,
    then any other name alphabetically); ``[]`` for an unsharded run."""
    shards = Path(run_directory) / SHARDS_DIR
    if not shards.is_dir():
        return []
    dirs = [d for d in shards.iterdir() if d.is_dir()]
    return sorted(dirs, key=lambda d: (0, int(d.name), "") if d.name.isdigit() else (1, 0, d.name))


def work_dirs(run_directory: str | os.PathLike[str]) -> list[Path]:
    """The run's directory, then its shard directories (:func:`shard_dirs`)."""
    return [Path(run_directory), *shard_dirs(run_directory)]


def read_snapshot(output_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The directory's ``experiment.yaml`` as plain data, read with the hardened YAML reader
    (:func:`arena.yaml_io.read_yaml`: duplicate keys and alias bombs refused), or
    ``None`` when it is missing, unreadable or not a mapping."""
    from arena.yaml_io import read_yaml
    from arena.errors import ConfigError

    path = Path(output_dir) / EXPERIMENT_FILE
    try:
        data = read_yaml(path)
    except (OSError, ConfigError):
        return None
    return data if isinstance(data, dict) else None


def run_names(output_dir: str | os.PathLike[str], manifest: dict[str, Any] | None = None) -> list[str]:
    """The runs of an output directory: the planned ones (``manifest``'s ``runs`` when given,
    else those of the snapshot), in their order, then any other directory holding a run's
    files (:data:`RUN_MARKERS`), alphabetically."""
    if manifest is not None:
        names = list(manifest.get("runs") or {})
    else:
        names = list(((read_snapshot(output_dir) or {}).get("runs")) or {})
    out = Path(output_dir)
    extra = sorted(
        d.name
        for d in out.iterdir()
        if d.is_dir() and d.name not in names and any((d / m).exists() for m in RUN_MARKERS)
    ) if out.is_dir() else []
    return names + extra


def unique_path(directory: Path, stem: str, suffix: str) -> Path:
    """``directory/<stem><suffix>``, or ``<stem>_2<suffix>``, ``<stem>_3<suffix>``, … — the first
    that does not exist: a retried or resumed episode's file (video, trajectory) never replaces
    an earlier one."""
    candidate = directory / f"{stem}{suffix}"
    number = 2
    while candidate.exists():
        candidate = directory / f"{stem}_{number}{suffix}"
        number += 1
    return candidate


def episode_file_stem(episode_index: int, seed: int, outcome: str) -> str:
    """``ep<index:05d>_seed<seed>_<outcome>``: how an episode's files are named."""
    return f"ep{episode_index:05d}_seed{seed}_{outcome}"


def partial_path(directory: Path, episode_index: int, suffix: str) -> Path:
    """The hidden file an episode's file is written to before it is renamed to its final name:
    ``.ep<index:05d>.<pid><suffix>`` (the pid keeps two processes writing one directory apart)."""
    return directory / f".ep{episode_index:05d}.{os.getpid()}{suffix}"


def remove_partials(directory: Path, suffix: str) -> None:
    """Delete the partial files (:func:`partial_path`) an earlier, killed writer left in
    ``directory``: they belong to episodes that never finished."""
    if directory.is_dir():
        for partial in directory.glob(f".ep*{suffix}"):
            partial.unlink(missing_ok=True)
