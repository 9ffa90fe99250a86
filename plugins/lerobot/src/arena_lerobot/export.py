"""``arena export lerobot``: a run's recorded episodes as a LeRobotDataset v3.

The run must have recorded its episodes (``trajectories.enabled``,
:mod:`arena.rollout.trajectories`). Each recorded observation goes through a LeRobot
embodiment adapter, ``adapter.pack_request(adapter.extract(observation, 0), instruction)``,
the same call that builds a served LeRobot policy's request, so the dataset's feature names,
image layout and state composition are those the policy is served with:

- ``observation.images.<camera>``: the adapter's ``uint8 (H, W, 3)`` images, stored as PNG
  images (lossless), or as videos with ``--videos`` (LeRobot's encoder, AV1 via PyAV: lossy);
- ``observation.state`` (and any other ``observation.*`` array): ``float32``;
- ``action``: ``float32 (action_dim,)``, the action the environment applied, in the model's
  convention (``adapter.pack_actions``, the inverse of what the served policy's reply goes
  through; the identity for LeRobot's embodiments);
- ``next.reward`` ``float32 (1,)``, ``next.success`` and ``next.done`` ``bool (1,)``: what the
  step returned (``next.done``: the episode's last frame), as LeRobot's PushT dataset names them;
- ``task``: the adapter's ``task`` (the environment's instruction).

Episodes keep the run's order (by episode index); dataset episode ``i`` is the ``i``-th
exported one. Per episode, what a LeRobotDataset has no column for is written next to it, in
``meta/arena_episodes.jsonl`` (:data:`EPISODES_SIDE_FILE`): one JSON line per dataset episode
with ``dataset_episode_index``, ``run``, ``episode_index``, ``seed``, ``outcome``, ``steps``,
``return``, ``task`` and ``trajectory`` (the source file, relative to the run directory).

The adapter: ``--adapter`` (``lerobot/<embodiment>`` from the registry, or ``module:Class``);
else the run's own when its policy uses LeRobot adapters (its ``embodiment``); else by the
environment type (:data:`DEFAULT_ADAPTERS`). fps: ``--fps``, else the fps LeRobot's env config
gives the run's environment type, whichever adapter reads it (``lerobot.envs.configs``: aloha
50, pusht 10, libero 30, metaworld 80), else 30 (LeRobot's ``EnvConfig`` default).

This module imports LeRobot only in :func:`write_dataset`; :func:`plan_export` checks
everything arena knows (run, records, target, adapter) in arena's own interpreter, so the CLI
fails fast before it starts the ``lerobot`` venv's interpreter (``python -m arena_lerobot.export``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from arena.errors import ArenaError

#: The adapter an environment type's runs are exported with when the run names none.
DEFAULT_ADAPTERS: dict[str, str] = {
    "aloha": "lerobot/aloha",
    "pusht": "lerobot/pusht",
    "libero": "lerobot/libero",
    "metaworld": "lerobot/metaworld",
}
#: fps of LeRobot's env configs (lerobot 0.4.4, ``lerobot/envs/configs.py``) per arena
#: environment type (a property of the simulator, whichever adapter reads it).
LEROBOT_FPS: dict[str, int] = {"aloha": 50, "pusht": 10, "libero": 30, "metaworld": 80}
DEFAULT_FPS = 30
ADAPTER_FAMILY = "lerobot"
EPISODES_SIDE_FILE = "meta/arena_episodes.jsonl"
#: The outcomes ``--failed-only`` keeps (``error`` episodes are never recorded).
FAILED_OUTCOMES = ("failure", "timeout")
EXIT_USAGE = 2
EXIT_FAILED = 3
#: The smallest frames LeRobot 0.6's default video encoder (SVT-AV1 through PyAV) takes,
#: measured with tests/video_limits.py (:func:`check_video_sizes`): width, height in pixels.
MIN_VIDEO_WIDTH = 25
MIN_VIDEO_HEIGHT = 4
#: Where the dataset is written until it is complete: ``<to's parent>/.<to's name>.partial-<pid>``,
#: renamed to ``to`` at the end, removed on any failure (also by the CLI when the writing
#: process dies natively, e.g. an encoder's SIGFPE).
STAGING_INFIX = ".partial-"


def staging_dir(to: Path, pid: int | None = None) -> Path:
    """The temporary directory an export to ``to`` writes into (:data:`STAGING_INFIX`)."""
    import os

    return to.parent / f".{to.name}{STAGING_INFIX}{os.getpid() if pid is None else pid}"


def remove_staging(to: Path) -> list[Path]:
    """Remove every staging directory of exports to ``to`` (what a killed export left); return them."""
    import shutil

    removed = []
    for path in sorted(to.parent.glob(f".{to.name}{STAGING_INFIX}*")):
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


class ExportError(ArenaError):
    """The export cannot start (``exit_code`` 2: a run, target or option is wrong) or failed (3)."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class ExportPlan:
    """What :func:`write_dataset` writes: ``episodes`` are ``(record, trajectory path)``."""

    output_dir: Path
    run: str
    to: Path
    repo_id: str
    adapter: str
    fps: int
    videos: bool
    failed_only: bool
    episodes: list[tuple[Any, Path]] = field(default_factory=list)
    #: The adapter instance (:func:`load_adapter`).
    adapter_instance: Any = None


def plan_export(
    output_dir: str | Path,
    run: str,
    to: str | Path,
    *,
    repo_id: str | None = None,
    adapter: str | None = None,
    failed_only: bool = False,
    videos: bool | None = None,
    fps: int | None = None,
) -> ExportPlan:
    """Check the export and choose its adapter, fps and episodes (no LeRobot needed).

    ``videos``: ``None`` chooses videos when the run recorded episode videos (``recording.enabled``).

    Raises:
        ExportError: ``output_dir`` holds no run ``run`` (the message lists its runs), the run
            recorded no trajectories (or, with ``failed_only``, no failed episode), ``to``
            exists, no adapter is known for the run's environment, the adapter cannot be
            loaded, or the first exported episode does not fit it (adapters hold no heavy
            dependency: they run in arena's client process, so this needs no LeRobot).
    """
    from arena.outputs.layout import read_snapshot, run_dir, run_names
    from arena.rollout.trajectories import recorded_episodes

    output_dir, to = Path(output_dir), Path(to)
    if not output_dir.is_dir():
        raise ExportError(f"{output_dir} is not an output directory (arena run --output-dir)")
    names = run_names(output_dir)
    if run not in names:
        raise ExportError(f"{output_dir} has no run '{run}' (runs: {', '.join(names) or 'none'})")
    if to.exists():
        raise ExportError(f"{to} exists already: LeRobotDataset.create writes a new directory (choose another --to)")
    snapshot_run = ((read_snapshot(output_dir) or {}).get("runs") or {}).get(run) or {}
    episodes = recorded_episodes(run_dir(output_dir, run))
    if not episodes:
        raise ExportError(
            f"run '{run}' of {output_dir} recorded no trajectories: run it with trajectories.enabled=true "
            f"(e.g. arena run EXPERIMENT shared.trajectories.enabled=true)"
        )
    if failed_only:
        episodes = [(r, p) for r, p in episodes if r.outcome in FAILED_OUTCOMES]
        if not episodes:
            raise ExportError(f"run '{run}' of {output_dir} recorded no failed episode (--failed-only: outcome failure or timeout)")
    chosen = adapter or _run_adapter(snapshot_run)
    if not chosen:
        env_type = (snapshot_run.get("environment") or {}).get("type")
        raise ExportError(
            f"no LeRobot adapter for run '{run}' (environment type {env_type!r}; known: "
            f"{', '.join(f'{k} -> {v}' for k, v in DEFAULT_ADAPTERS.items())}): pass --adapter lerobot/<embodiment>"
        )
    instance = load_adapter(chosen)
    _, _, first_requests, _ = _requests(instance, chosen, *episodes[0])  # the adapter fits the recording (the rest: while writing)
    if videos is None:
        videos = bool((snapshot_run.get("recording") or {}).get("enabled"))
    if videos:
        check_video_sizes(first_requests[0])
    env_type = str((snapshot_run.get("environment") or {}).get("type") or "")
    return ExportPlan(
        output_dir=output_dir,
        run=run,
        to=to,
        repo_id=repo_id or f"local/{run}",
        adapter=chosen,
        fps=int(fps or LEROBOT_FPS.get(env_type, DEFAULT_FPS)),
        videos=bool(videos),
        failed_only=failed_only,
        episodes=episodes,
        adapter_instance=instance,
    )


def _requests(adapter: Any, name: str, record: Any, path: Path) -> tuple[Any, np.ndarray, list[dict[str, Any]], str]:
    """One recorded episode through ``adapter``: ``(trajectory, actions (T, action_dim) in
    the model's convention, the T requests, the instruction)``.

    Raises:
        ExportError: the file cannot be read or the episode does not fit the adapter.
    """
    from arena.rollout.trajectories import read_trajectory

    try:
        trajectory = read_trajectory(path)
    except (OSError, ValueError) as exc:
        raise ExportError(f"episode {record.episode_index}: cannot read {path}: {exc}") from None
    instruction = trajectory.meta.get("instruction") or trajectory.meta.get("task") or record.task or ""
    try:
        actions = adapter.pack_actions(np.asarray(trajectory.action, np.float64), "action")["action"]
        requests = [adapter.pack_request(adapter.extract(trajectory.observation(t), 0), instruction)
                    for t in range(trajectory.steps)]
    except Exception as exc:
        raise ExportError(
            f"episode {record.episode_index} ({path.name}) does not fit adapter {name}: {type(exc).__name__}: {exc}"
        ) from None
    return trajectory, np.asarray(actions), requests, instruction


def _run_adapter(snapshot_run: dict[str, Any]) -> str | None:
    """The run's own LeRobot adapter (a policy whose adapters are LeRobot's and its
    ``embodiment``), else the default of its environment type."""
    policy = snapshot_run.get("policy") or {}
    embodiment = policy.get("embodiment")
    if embodiment and policy.get("type"):
        try:
            from arena.plugins import get_registry

            policy_cls = get_registry().policies.get(str(policy["type"]))
        except Exception:
            policy_cls = None
        if getattr(policy_cls, "adapter_family", None) == ADAPTER_FAMILY:
            return f"{ADAPTER_FAMILY}/{embodiment}"
    return DEFAULT_ADAPTERS.get(str((snapshot_run.get("environment") or {}).get("type")))


def load_adapter(spec: str) -> Any:
    """An adapter instance from ``family/name`` (the registry) or ``module:Class``.

    Raises:
        ExportError: nothing is registered or importable under ``spec``.
    """
    try:
        if ":" in spec:
            module, _, name = spec.partition(":")
            return getattr(importlib.import_module(module), name)()
        family, sep, name = spec.partition("/")
        if not sep:
            family, name = ADAPTER_FAMILY, spec
        from arena.plugins import get_registry

        return get_registry().adapter(family, name)()
    except Exception as exc:
        raise ExportError(f"adapter {spec!r}: {type(exc).__name__}: {exc}") from None


def check_video_sizes(request: dict[str, Any]) -> None:
    """Refuse camera frames LeRobot's video encoder cannot take (before anything is written).

    LeRobot 0.6's default RGB encoder is SVT-AV1 (``libsvtav1``, ``yuv420p``, crf 30) through
    PyAV 15.1; measured with ``tests/video_limits.py`` in the lerobot venv: frames up to 24
    pixels wide kill the encoding process natively (SIGFPE: exit status 248 from a shell, -8
    from Python; no exception, so nothing can clean up), whatever their height (64x24, 24x24
    and 15x15 crash, 64x25, 8x25 and 4x25 encode); frames under 4 pixels high fail to open the
    codec (a PyAV ``ValueError``); odd sizes encode. Images are refused, not padded: padding
    would change what a policy trained on the export sees.

    Raises:
        ExportError: (exit 2) a camera narrower than :data:`MIN_VIDEO_WIDTH` or lower than
            :data:`MIN_VIDEO_HEIGHT`, naming it and ``--no-videos`` (lossless PNG frames, any size).
    """
    for key, value in request.items():
        if not (isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 3 and value.shape[-1] == 3):
            continue
        h, w = int(value.shape[0]), int(value.shape[1])
        if w < MIN_VIDEO_WIDTH or h < MIN_VIDEO_HEIGHT:
            raise ExportError(
                f"{key} is {h}x{w} (HxW): LeRobot's AV1 video encoder (libsvtav1) needs frames at least "
                f"{MIN_VIDEO_WIDTH} pixels wide and {MIN_VIDEO_HEIGHT} high (narrower ones crash it natively); "
                "export with --no-videos (PNG frames, lossless, any size) or record a larger camera"
            )


def _features(request: dict[str, Any], action_dim: int, videos: bool) -> dict[str, dict[str, Any]]:
    features: dict[str, dict[str, Any]] = {}
    for key, value in request.items():
        if not key.startswith("observation.") or not isinstance(value, np.ndarray):
            continue
        if value.dtype == np.uint8 and value.ndim == 3 and value.shape[-1] == 3:
            features[key] = {"dtype": "video" if videos else "image", "shape": tuple(value.shape),
                             "names": ["height", "width", "channels"]}
        else:
            features[key] = {"dtype": "float32", "shape": tuple(value.shape) or (1,), "names": None}
    if not features:
        raise ExportError(f"the adapter's request has no observation.* arrays (keys: {sorted(request)})")
    features["action"] = {"dtype": "float32", "shape": (action_dim,), "names": None}
    features["next.reward"] = {"dtype": "float32", "shape": (1,), "names": None}
    features["next.success"] = {"dtype": "bool", "shape": (1,), "names": None}
    features["next.done"] = {"dtype": "bool", "shape": (1,), "names": None}
    return features


def write_dataset(plan: ExportPlan, say: Any = None) -> dict[str, Any]:
    """Write ``plan`` as a LeRobotDataset at ``plan.to``; return a summary (``episodes``,
    ``frames``, ``features``, ``seconds``). Needs LeRobot (the ``lerobot`` venv).

    Raises:
        ExportError: a recorded episode does not fit the adapter or the video encoder (exit
            2), or LeRobot refused a frame (exit 3). The dataset is written into
            :func:`staging_dir` and renamed to ``plan.to`` when complete; on any failure the
            staging directory is removed and ``plan.to`` never exists.
    """
    import shutil

    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    staging = staging_dir(plan.to)
    if staging.exists():
        shutil.rmtree(staging)

    try:  # Hugging Face datasets' progress bars: arena prints one line per episode instead
        import datasets

        datasets.disable_progress_bars()
    except Exception:
        pass
    began = time.perf_counter()
    adapter = plan.adapter_instance if plan.adapter_instance is not None else load_adapter(plan.adapter)
    dataset = None
    frames = 0
    side: list[dict[str, Any]] = []
    try:
        for number, (record, path) in enumerate(plan.episodes):
            trajectory, actions, requests, instruction = _requests(adapter, plan.adapter, record, path)
            if dataset is None:
                features = _features(requests[0], actions.shape[1], plan.videos)
                embodiment = plan.adapter.split("/", 1)[-1]
                if plan.videos:
                    check_video_sizes(requests[0])
                # LeRobot 0.6's create(): no vcodec any more (rgb_encoder: its default, SVT-AV1)
                dataset = LeRobotDataset.create(
                    repo_id=plan.repo_id, fps=plan.fps, features=features, root=staging,
                    robot_type=embodiment, use_videos=plan.videos,
                )
            last = trajectory.steps - 1
            for t, request in enumerate(requests):
                frame = {key: _as(request[key], spec) for key, spec in features.items() if key in request}
                frame["action"] = np.asarray(actions[t], np.float32)
                frame["next.reward"] = np.array([trajectory.reward[t]], np.float32)
                frame["next.success"] = np.array([bool(trajectory.success[t])])
                frame["next.done"] = np.array([t == last])
                frame["task"] = str(request.get("task") or instruction)
                dataset.add_frame(frame)
            dataset.save_episode()
            frames += trajectory.steps
            side.append({
                "dataset_episode_index": number, "run": record.run, "episode_index": record.episode_index,
                "seed": record.seed, "outcome": record.outcome, "steps": trajectory.steps,
                "return": record.return_, "task": instruction,
                "trajectory": str(path.relative_to(plan.output_dir / plan.run)),
            })
            if say is not None:
                say(f"episode {record.episode_index} (seed {record.seed}, {record.outcome}): {trajectory.steps} frames")
        dataset.finalize()
        (staging / EPISODES_SIDE_FILE).write_text("".join(json.dumps(line) + "\n" for line in side))
        if plan.to.exists():
            raise ExportError(f"{plan.to} appeared while the export ran: the dataset was not moved there")
        staging.rename(plan.to)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, ExportError):
            raise
        if isinstance(exc, Exception):
            raise ExportError(f"LeRobot could not write the dataset: {type(exc).__name__}: {exc}", EXIT_FAILED) from exc
        raise
    return {
        "to": str(plan.to), "repo_id": plan.repo_id, "adapter": plan.adapter, "fps": plan.fps,
        "videos": plan.videos, "episodes": len(side), "frames": frames,
        "features": sorted(features), "seconds": round(time.perf_counter() - began, 3),
    }


def _as(value: Any, spec: dict[str, Any]) -> np.ndarray:
    if spec["dtype"] in ("image", "video"):
        return np.ascontiguousarray(value, np.uint8)
    return np.asarray(value, np.float32).reshape(spec["shape"])


def lerobot_importable() -> bool:
    """Whether this interpreter can import LeRobot (else the CLI runs this module in the venv)."""
    import importlib.util

    return importlib.util.find_spec("lerobot") is not None


def run_export(argv: list[str]) -> int:
    """Plan and write; print the summary as JSON on stdout, problems on stderr; the exit code."""
    parser = argparse.ArgumentParser(prog="python -m arena_lerobot.export")
    parser.add_argument("output_dir")
    parser.add_argument("--run", required=True)
    parser.add_argument("--to", required=True)
    parser.add_argument("--repo-id")
    parser.add_argument("--adapter")
    parser.add_argument("--failed-only", action="store_true")
    parser.add_argument("--videos", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--fps", type=int)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)

    def say(text: str) -> None:
        if not args.quiet:
            print(f"arena export lerobot: {text}", file=sys.stderr)

    try:
        plan = plan_export(
            args.output_dir, args.run, args.to, repo_id=args.repo_id, adapter=args.adapter,
            failed_only=args.failed_only, videos=args.videos, fps=args.fps,
        )
        summary = write_dataset(plan, say)
    except ExportError as exc:
        print(f"arena export lerobot: {exc}", file=sys.stderr)
        return exc.exit_code
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(run_export(sys.argv[1:]))
