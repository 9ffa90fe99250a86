"""Recorded episodes: the observations, actions and rewards of each step, one file per episode.

Opt-in per run (``trajectories: {enabled, max_episodes, max_mb, cameras}``,
:class:`arena.config.models.TrajectoriesConfig`), so that rollouts become training data (e.g.
``arena export lerobot``, which writes them as a LeRobotDataset).

Which episodes: those with ``episode_index < max_episodes`` (all when ``max_episodes`` is
null), as the video recorder chooses (:mod:`arena.rollout.recording`), so a resume records the
same episodes; and, to bound the disk, only while the trajectory files of the work directory
(those already there when the recorder starts, a resume's, included) total less than
``max_mb`` megabytes (10^6 bytes) — the episode that crosses the bound is kept whole, later
ones are not recorded (said once on stderr). Error episodes (infrastructure) are never kept:
they are no behaviour of the policy, and a resume runs them again.

File (one per recorded episode, ``<work dir>/trajectories/ep<index:05d>_seed<seed>_<outcome>.npz``;
a name that exists already gets ``_2``, ``_3``, …): a NumPy ``.npz`` archive (zip-deflated
``.npy`` arrays, no pickled objects: read it with ``np.load(path, allow_pickle=False)`` or
:func:`read_trajectory`). With ``T`` the episode's steps, frame ``t`` is the observation the
policy saw before step ``t``, the action applied at step ``t`` and what that step returned:

- ``obs/camera_obs/<camera>``: ``uint8 (T, H, W, 3)``, the env's ``camera_obs`` frames as the
  simulator produces them (LIBERO's upside down: an adapter flips them as it does for a
  policy); only the cameras ``cameras`` selects, and only when the environment produces them
  (its own ``cameras`` setting);
- ``obs/<group>/<name>``: ``(T, D)`` in the env's dtype for every other observation group of
  arrays (the Arena layout's ``policy`` state vectors, e.g. Meta-World's ``state`` ``float64
  (T, 39)``);
- ``action``: ``(T, action_dim)``, the action applied (the policy's dtype, float32 or float64);
- ``reward``: ``float64 (T,)``; ``success``, ``terminated``, ``truncated``: ``bool (T,)`` (the
  env's success signal and end flags after the step);
- ``step/<name>``: ``(T,)`` per-step columns the policy adds (its ``episode_info``'s
  ``trajectory_columns``): live mode's ``step/live_age``, ``int64``, each executed action's age
  in control steps (``-1``: the null action, computed from no observation; :mod:`arena.live`);
- ``meta``: a 0-d unicode array holding JSON: ``format_version``, ``run``, ``episode_index``,
  ``seed``, ``outcome``, ``steps``, ``env_id``, ``task`` (the run's task name), ``instruction``
  (the env's ``task_description``, what a language-conditioned policy is told),
  ``observation_strings`` (the observation's per-env strings at reset, e.g. Meta-World's
  ``{"task": "reach-v3"}``, which adapters read; constant over an episode).

An episode's file is written to a hidden ``.ep<index>.<pid>.partial.npz`` when it ends and
renamed to its final name, and its record's ``trajectory`` names it (relative to the run
directory). A killed run leaves at most a partial file, which the next recorder of the same
directory deletes, or a final file that no record names; readers (:func:`recorded_episodes`)
go from the records, so neither is ever counted.

Size: an episode's frames are held in memory (raw) while it runs, then compressed (zip deflate)
into its file. Measured file bytes per step (raw in brackets): Meta-World reach-v3 state only
138 B (339 B), 224×224 camera 40.8 kB (151 kB), 64×64 1.4 kB (12.6 kB); PushT 96×96 pixels
0.5 kB (27.8 kB); ALOHA's 480×640 top camera 24.8 kB (922 kB). docs/experiments.md
("Recording episodes") has them too.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

import numpy as np

from arena.outputs.layout import (
    TRAJECTORIES_DIR,
    TRAJECTORY_PARTIAL_SUFFIX,
    TRAJECTORY_SUFFIX,
    episode_file_stem,
    partial_path,
    remove_partials,
    unique_path,
)

FORMAT_VERSION = 1
CAMERA_GROUP = "camera_obs"
OBS_PREFIX = "obs/"
STEP_PREFIX = "step/"
META_KEY = "meta"
#: Per-frame arrays besides the observation.
STEP_KEYS = ("action", "reward", "success", "terminated", "truncated")


class _Episode:
    def __init__(self, item: Any, env_id: int, instruction: str | None) -> None:
        self.item = item
        self.env_id = env_id
        self.instruction = instruction
        self.pending: dict[str, np.ndarray] | None = None  # the observation the next action answers
        self.strings: dict[str, str] = {}  # the observation's per-env strings (e.g. "task") at reset
        self.obs: dict[str, list[np.ndarray]] = {}
        self.steps: dict[str, list[Any]] = {key: [] for key in STEP_KEYS}


class TrajectoryRecorder:
    """Trajectories of the recorded episodes of one rollout (see the module docstring).

    ``config``: a :class:`arena.config.models.TrajectoriesConfig`; ``work_dir``: the directory
    whose ``trajectories/`` receives the files; ``relative_to``: the directory record paths are
    relative to (the run directory, above a shard's); ``run`` and ``task``: written into each
    file's ``meta``. The rollout calls :meth:`begin` after an env is reset, :meth:`step` after
    every env step and :meth:`end` when an episode ends. A file that cannot be written is
    reported once on stderr and the episode goes on without it.
    """

    def __init__(
        self,
        config: Any,
        work_dir: str | os.PathLike[str],
        relative_to: str | os.PathLike[str] | None = None,
        *,
        run: str | None = None,
        task: str | None = None,
    ) -> None:
        self.config = config
        self.directory = Path(work_dir) / TRAJECTORIES_DIR
        self.relative_to = Path(relative_to) if relative_to is not None else Path(work_dir)
        self.run = run
        self.task = task
        self._episodes: dict[int, _Episode] = {}
        self._warned: set[str] = set()
        remove_partials(self.directory, TRAJECTORY_PARTIAL_SUFFIX)
        self.bytes_written = sum(p.stat().st_size for p in self._finished_files())

    # -- choosing ----------------------------------------------------------------------------
    def wants(self, item: Any) -> bool:
        """Whether work item ``item`` is recorded (enabled, below ``max_episodes``, ``max_mb`` not reached)."""
        limit = self.config.max_episodes
        if not self.config.enabled or (limit is not None and item.episode_index >= limit):
            return False
        if self.config.max_mb is not None and self.bytes_written >= self.config.max_mb * 1e6:
            self._warn(
                "max_mb",
                f"the trajectories of {self.directory} reached trajectories.max_mb={self.config.max_mb:g} MB; "
                f"episode {item.episode_index} and later ones are not recorded",
            )
            return False
        return True

    def _camera_wanted(self, name: str) -> bool:
        cameras = self.config.cameras
        return bool(cameras) if isinstance(cameras, bool) else name in cameras

    # -- the rollout's calls -----------------------------------------------------------------
    def begin(self, env: Any, env_id: int, item: Any, observation: Any) -> None:
        """Start recording ``item`` on ``env_id`` from the observation after its reset."""
        self.discard(env_id)
        if not self.wants(item):
            return
        episode = _Episode(item, env_id, getattr(env, "task_description", None))
        episode.pending = self._row(observation, env_id)
        if isinstance(observation, dict):
            episode.strings = {
                str(key): value[env_id]
                for key, value in observation.items()
                if isinstance(value, (list, tuple)) and len(value) > env_id and isinstance(value[env_id], str)
            }
        self._episodes[env_id] = episode

    def step(
        self,
        env_ids: Any,
        actions: Any,
        observation: Any,
        reward: np.ndarray,
        success: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> None:
        """Add one frame to each recorded episode of ``env_ids``: the observation before the
        step, ``actions[e]`` (the batch ``(num_envs, action_dim)`` applied), and the step's
        ``(num_envs,)`` reward, success and end flags; ``observation`` is the one after it."""
        for env_id in env_ids:
            episode = self._episodes.get(env_id)
            if episode is None:
                continue
            for key, value in (episode.pending or {}).items():
                episode.obs.setdefault(key, []).append(value)
            episode.steps["action"].append(np.array(actions[env_id], copy=True))
            episode.steps["reward"].append(float(reward[env_id]))
            episode.steps["success"].append(bool(success[env_id]))
            episode.steps["terminated"].append(bool(terminated[env_id]))
            episode.steps["truncated"].append(bool(truncated[env_id]))
            episode.pending = self._row(observation, env_id)

    def end(self, env_id: int, outcome: str, columns: dict[str, Any] | None = None) -> str | None:
        """Write ``env_id``'s episode; return its path relative to ``relative_to``, or ``None``
        (not recorded, an ``error`` episode, no step, or the file could not be written).
        ``columns``: per-step arrays to add as ``step/<name>`` (one value per recorded step;
        others are left out)."""
        episode = self._episodes.pop(env_id, None)
        if episode is None or outcome == "error" or not episode.steps["action"]:
            return None
        item = episode.item
        partial = partial_path(self.directory, item.episode_index, TRAJECTORY_PARTIAL_SUFFIX)
        try:
            arrays = self._arrays(episode, outcome)
            for name, values in (columns or {}).items():
                column = np.asarray(values)
                if column.ndim >= 1 and len(column) == len(arrays["action"]):
                    arrays[f"{STEP_PREFIX}{name}"] = column
            self.directory.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(partial, **arrays)
            final = unique_path(self.directory, episode_file_stem(item.episode_index, item.seed, outcome), TRAJECTORY_SUFFIX)
            os.replace(partial, final)
        except Exception as exc:  # disk full, a ragged observation: the episode itself counts
            partial.unlink(missing_ok=True)
            self._warn("write", f"no trajectory for episode {item.episode_index}: {type(exc).__name__}: {exc}")
            return None
        self.bytes_written += final.stat().st_size
        return os.path.relpath(final, self.relative_to)

    def discard(self, env_id: int) -> None:
        """Drop ``env_id``'s unfinished episode, if any (nothing was written for it)."""
        self._episodes.pop(env_id, None)

    def close(self) -> None:
        """Drop every unfinished episode (episodes left without a record get no file)."""
        self._episodes.clear()

    # -- internals ---------------------------------------------------------------------------
    def _row(self, observation: Any, env_id: int) -> dict[str, np.ndarray]:
        """Env ``env_id``'s arrays of a batched Arena-layout observation, copied (simulators
        reuse their buffers), keyed ``obs/<group>/<name>``."""
        row: dict[str, np.ndarray] = {}
        if not isinstance(observation, dict):
            return row
        for group, values in observation.items():
            if not isinstance(values, dict):
                continue  # e.g. "task": a list of strings, kept once per episode in meta
            for name, value in values.items():
                if group == CAMERA_GROUP and not self._camera_wanted(str(name)):
                    continue
                if isinstance(value, np.ndarray) and value.ndim >= 1:
                    row[f"{OBS_PREFIX}{group}/{name}"] = np.array(value[env_id], copy=True)
        return row

    def _arrays(self, episode: _Episode, outcome: str) -> dict[str, np.ndarray]:
        steps = len(episode.steps["action"])
        arrays = {key: np.stack(values) for key, values in episode.obs.items() if len(values) == steps}
        arrays["action"] = np.stack(episode.steps["action"])
        arrays["reward"] = np.asarray(episode.steps["reward"], np.float64)
        for key in ("success", "terminated", "truncated"):
            arrays[key] = np.asarray(episode.steps[key], bool)
        item = episode.item
        meta = {
            "format_version": FORMAT_VERSION,
            "run": self.run if self.run is not None else getattr(item, "run", None),
            "episode_index": int(item.episode_index),
            "seed": int(item.seed),
            "outcome": outcome,
            "steps": steps,
            "env_id": int(episode.env_id),
            "task": self.task,
            "instruction": episode.instruction,
            "observation_strings": episode.strings,
        }
        arrays[META_KEY] = np.array(json.dumps(meta))
        return arrays

    def _finished_files(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        return [p for p in self.directory.glob(f"ep*{TRAJECTORY_SUFFIX}") if p.is_file()]


    def _warn(self, kind: str, text: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            print(f"arena: trajectories: {text}", file=sys.stderr)


@dataclass
class Trajectory:
    """One recorded episode read back (:func:`read_trajectory`).

    ``observations``: ``{"camera_obs": {camera: uint8 (T, H, W, 3)}, "policy": {name: (T, D)},
    …}`` (the Arena layout with a time axis instead of the env axis); ``action``
    ``(T, action_dim)``; ``reward`` ``float64 (T,)``; ``success``, ``terminated``,
    ``truncated`` ``bool (T,)``; ``meta``: the file's metadata (module docstring).
    """

    observations: dict[str, dict[str, np.ndarray]]
    action: np.ndarray
    reward: np.ndarray
    success: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    meta: dict[str, Any]
    #: ``step/<name>`` columns, by name (e.g. ``live_age``).
    columns: dict[str, np.ndarray] = dataclass_field(default_factory=dict)

    @property
    def steps(self) -> int:
        return int(self.action.shape[0])

    def observation(self, t: int) -> dict[str, Any]:
        """Frame ``t``'s observation as a batch of one env (Arena layout, env axis of length
        1, the recorded per-env strings as one-element lists; ``"task"``, when the env put none
        in its observation, the instruction), which an embodiment adapter's ``extract(obs, 0)`` reads."""
        obs: dict[str, Any] = {
            group: {name: values[t : t + 1] for name, values in arrays.items()}
            for group, arrays in self.observations.items()
        }
        for key, value in (self.meta.get("observation_strings") or {}).items():
            obs[key] = [value]
        obs.setdefault("task", [self.meta.get("instruction") or self.meta.get("task") or ""])
        return obs


def read_trajectory(path: str | os.PathLike[str]) -> Trajectory:
    """Read one trajectory file (``allow_pickle=False``: an archive holding objects is refused).

    Raises:
        ValueError: the file is not a trajectory (no ``meta``, an unknown format version, or
            arrays whose lengths disagree), or holds pickled objects.
        OSError: it cannot be read.
    """
    with np.load(path, allow_pickle=False) as archive:
        data = {key: archive[key] for key in archive.files}
    if META_KEY not in data or "action" not in data:
        raise ValueError(f"{path} is not an arena trajectory (no meta / action arrays)")
    meta = json.loads(str(data.pop(META_KEY)))
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: trajectory format {meta.get('format_version')!r}, this arena reads {FORMAT_VERSION}")
    observations: dict[str, dict[str, np.ndarray]] = {}
    for key in [k for k in data if k.startswith(OBS_PREFIX)]:
        group, _, name = key[len(OBS_PREFIX) :].partition("/")
        observations.setdefault(group, {})[name] = data.pop(key)
    columns = {key[len(STEP_PREFIX) :]: data.pop(key) for key in [k for k in data if k.startswith(STEP_PREFIX)]}
    steps = data["action"].shape[0]
    lengths = {key: len(value) for key, value in data.items()} | {
        f"{group}/{name}": len(value) for group, arrays in observations.items() for name, value in arrays.items()
    } | {f"{STEP_PREFIX}{name}": len(value) for name, value in columns.items()}
    wrong = {key: n for key, n in lengths.items() if n != steps}
    if wrong:
        raise ValueError(f"{path}: arrays of other lengths than its {steps} actions: {wrong}")
    return Trajectory(
        observations=observations,
        action=data["action"],
        reward=data["reward"],
        success=data["success"],
        terminated=data["terminated"],
        truncated=data["truncated"],
        meta=meta,
        columns=columns,
    )


def recorded_episodes(run_directory: str | os.PathLike[str]) -> list[tuple[Any, Path]]:
    """``(record, trajectory path)`` of every counted episode of a run that has a trajectory,
    by episode index: the records of the run and its shards merged
    (:func:`arena.results.run_summary.counted_run_records`), so a retried episode counts once
    and a file no record names (a killed run's) never counts.

    A record whose file is missing is left out (the caller may say so by comparing with the
    records that name one)."""
    from arena.results.run_summary import counted_run_records

    run_directory = Path(run_directory)
    found = []
    for record in counted_run_records(run_directory):
        name = getattr(record, "trajectory", None)
        if name:
            path = run_directory / name
            if path.is_file():
                found.append((record, path))
    return found
