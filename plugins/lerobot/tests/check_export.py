"""Run under the lerobot venv's interpreter by test_export.py: load an exported dataset with
LeRobot's own ``LeRobotDataset(repo_id, root=DIR)`` and compare every frame with the run's
recorded trajectories put through the same adapter. Prints a JSON summary; exits 1 (with the
first difference) when a frame differs.

    python check_export.py DIR REPO_ID RUN_DIR ADAPTER MAX_MEAN_ABS_IMAGE_DIFF
    python check_export.py --many JOBS.json   # several datasets, one LeRobot import

``--many`` reads a JSON list of ``[DIR, REPO_ID, RUN_DIR, ADAPTER, MAX_MEAN_ABS_IMAGE_DIFF]`` and
prints one JSON list: per dataset ``{"summary": {...}}``, or ``{"error": traceback}`` where the
check failed (the next datasets are still checked); it exits 0 either way.

ADAPTER: the adapter the export used (``lerobot/<embodiment>`` or ``module:Class``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def main(root: str, repo_id: str, run_dir: str, adapter_spec: str, tolerance: float) -> dict:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from arena.rollout.trajectories import read_trajectory
    from arena_lerobot.export import EPISODES_SIDE_FILE, load_adapter

    dataset = LeRobotDataset(repo_id, root=root)
    side = [json.loads(line) for line in (Path(root) / EPISODES_SIDE_FILE).read_text().splitlines()]
    adapter = load_adapter(adapter_spec)
    assert dataset.meta.total_episodes == len(side), (dataset.meta.total_episodes, len(side))
    episode_of = np.asarray(dataset.hf_dataset["episode_index"])
    image_keys = list(dataset.meta.camera_keys)
    worst = {key: 0.0 for key in image_keys}
    worst_max = {key: 0 for key in image_keys}
    # video frames: the decoded frame t must be closer to recorded frame t than to frame t+1
    aligned = {key: [0.0, 0.0] for key in image_keys}
    frames = 0
    for number, entry in enumerate(side):
        assert entry["dataset_episode_index"] == number
        trajectory = read_trajectory(Path(run_dir) / entry["trajectory"])
        assert trajectory.meta["episode_index"] == entry["episode_index"] and trajectory.meta["seed"] == entry["seed"]
        assert trajectory.meta["outcome"] == entry["outcome"]
        indices = np.flatnonzero(episode_of == number)
        assert len(indices) == trajectory.steps, (number, len(indices), trajectory.steps)
        instruction = trajectory.meta["instruction"]
        requests = [adapter.pack_request(adapter.extract(trajectory.observation(t), 0), instruction)
                    for t in range(trajectory.steps)]
        for t, index in enumerate(indices):
            item = dataset[int(index)]
            expected = requests[t]
            assert int(item["frame_index"]) == t and int(item["episode_index"]) == number
            assert item["task"] == expected["task"], (item["task"], expected["task"])
            assert np.array_equal(item["observation.state"].numpy(), expected["observation.state"].astype(np.float32))
            assert np.array_equal(item["action"].numpy(), trajectory.action[t].astype(np.float32))
            assert np.float32(item["next.reward"].item()) == np.float32(trajectory.reward[t])
            assert bool(item["next.success"].item()) == bool(trajectory.success[t])
            assert bool(item["next.done"].item()) == (t == trajectory.steps - 1)
            for key in image_keys:
                got = (item[key].numpy().transpose(1, 2, 0) * 255.0).round().astype(np.int16)  # LeRobot: float (C, H, W) in [0, 1]
                want = np.asarray(expected[key], np.int16)
                assert got.shape == want.shape, (key, got.shape, want.shape)
                diff = np.abs(got - want)
                worst[key] = max(worst[key], float(diff.mean()))
                worst_max[key] = max(worst_max[key], int(diff.max()))
                assert diff.mean() <= tolerance, (key, number, t, float(diff.mean()))
                if t + 1 < trajectory.steps:
                    aligned[key][0] += float(diff.mean())
                    aligned[key][1] += float(np.abs(got - np.asarray(requests[t + 1][key], np.int16)).mean())
            frames += 1
    for key, (right, next_frame) in aligned.items():
        assert right <= next_frame, (key, "decoded frames are closer to the next recorded frame", right, next_frame)
    return {
        "episodes": len(side), "frames": frames, "outcomes": [e["outcome"] for e in side],
        "episode_indices": [e["episode_index"] for e in side], "image_keys": image_keys,
        "video_keys": list(dataset.meta.video_keys), "mean_abs_diff": worst, "max_abs_diff": worst_max,
        "fps": dataset.meta.fps, "aligned": aligned, "task": dataset[0]["task"],
    }


def many(jobs_path: str) -> list[dict]:
    """``main`` for each job of ``jobs_path`` (see the module docstring)."""
    import traceback

    results = []
    for root, repo_id, run_dir, adapter_spec, tolerance in json.loads(Path(jobs_path).read_text()):
        try:
            results.append({"summary": main(root, repo_id, run_dir, adapter_spec, float(tolerance))})
        except Exception:
            results.append({"error": traceback.format_exc()})
    return results


if __name__ == "__main__":
    if sys.argv[1] == "--many":
        print(json.dumps(many(sys.argv[2])))
    else:
        root, repo_id, run_dir, adapter_spec, tolerance = sys.argv[1:6]
        print(json.dumps(main(root, repo_id, run_dir, adapter_spec, float(tolerance))))
