"""Recorded trajectories: one .npz per recorded episode holding what the policy saw and did,
bounded by episodes and size, never a half file counted."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from rollout_fakes import CoinFlipConfig, CoinFlipPolicy, CounterConfig, CounterEnv, RolloutTestPlugin

from arena.config.models import TrajectoriesConfig
from arena.hookspecs import hookimpl
from arena.outputs.records import read_records
from arena.plugins import PluginManager
from arena.rollout.rollout import rollout
from arena.rollout.run_one import run_one
from arena.rollout.trajectories import TrajectoryRecorder, read_trajectory, recorded_episodes
from arena.rollout.workitems import WorkItem


class CameraCounterEnv(CounterEnv):
    """CounterEnv with two cameras whose frames encode the env id and its counter."""

    name = "camera_counter"

    def _obs(self):
        obs = super()._obs()
        frames = np.zeros((self.num_envs, 4, 6, 3), np.uint8)
        for e in range(self.num_envs):
            frames[e, :, :, 0] = e
            frames[e, :, :, 1] = min(255, int(self.counter[e]))
        obs["camera_obs"] = {"front": frames, "wrist": frames[:, :2, :3].copy()}
        obs["task"] = ["count"] * self.num_envs
        return obs


def _rollout(tmp_path, config, items, num_envs=2, env_cls=CameraCounterEnv, env_config=None):
    env = env_cls(env_config or CounterConfig(), num_envs=num_envs)
    recorder = TrajectoryRecorder(config, tmp_path, run="r", task="count-to-target")
    records = []
    limit = SimpleNamespace(max_episode_steps=None, terminate_on_success=True)
    rollout(env, CoinFlipPolicy(CoinFlipConfig()), items, limit, on_episode_end=records.append, trajectories=recorder)
    return {r.episode_index: r for r in records}


def test_each_recorded_episode_holds_the_observation_before_each_action_and_what_the_step_returned(tmp_path):
    items = [WorkItem("r", i, 10 + i) for i in range(5)]
    records = _rollout(tmp_path, TrajectoriesConfig(enabled=True), items)
    for i, record in records.items():
        assert record.trajectory == f"trajectories/ep{i:05d}_seed{10 + i}_{record.outcome}.npz"
        traj = read_trajectory(tmp_path / record.trajectory)
        assert traj.steps == record.steps
        assert traj.meta == {
            "format_version": 1, "run": "r", "episode_index": i, "seed": 10 + i, "outcome": record.outcome,
            "steps": record.steps, "env_id": record.env_id, "task": "count-to-target",
            "instruction": "count up to the target", "observation_strings": {"task": "count"},
        }
        # the counter starts at 0 and each action adds round(action): obs[t] is the sum before step t
        counter = traj.observations["policy"]["counter"][:, 0]
        actions = traj.action[:, 0]
        assert traj.action.shape == (record.steps, 1) and traj.action.dtype == np.float32
        assert np.array_equal(counter, np.concatenate([[0], np.cumsum(actions)[:-1]]))
        assert np.array_equal(traj.reward, actions.astype(np.float64))
        assert traj.reward.sum() == pytest.approx(record.return_)
        front = traj.observations["camera_obs"]["front"]
        assert front.shape == (record.steps, 4, 6, 3) and front.dtype == np.uint8
        assert np.all(front[:, :, :, 0] == record.env_id)
        assert np.array_equal(front[:, 0, 0, 1], counter.astype(np.uint8))
        assert traj.observations["camera_obs"]["wrist"].shape == (record.steps, 2, 3, 3)
        # success and the end flags are per step; only the last step can end the episode
        assert traj.success[:-1].sum() == 0 and bool(traj.success[-1]) == (record.outcome == "success")
        assert not traj.terminated[:-1].any() and not traj.truncated.any()
        # frame t as a batch of one env, as an adapter reads it
        obs = traj.observation(1 if record.steps > 1 else 0)
        assert obs["policy"]["counter"].shape == (1, 1) and obs["task"] == ["count"]  # the env's own string
    assert not list((tmp_path / "trajectories").glob(".*"))


def test_trajectories_off_write_nothing(tmp_path):
    records = _rollout(tmp_path, TrajectoriesConfig(), [WorkItem("r", 0, 1), WorkItem("r", 1, 2)])
    assert all(r.trajectory is None for r in records.values())
    assert not (tmp_path / "trajectories").exists()
    assert "trajectory" in json.loads(records[0].to_json())  # the field is always in the record


def test_cameras_choose_which_frames_are_kept(tmp_path):
    for cameras, expected in ((False, set()), (["wrist"], {"wrist"}), (True, {"front", "wrist"})):
        out = tmp_path / str(cameras)
        records = _rollout(out, TrajectoriesConfig(enabled=True, cameras=cameras), [WorkItem("r", 0, 3)], num_envs=1)
        traj = read_trajectory(out / records[0].trajectory)
        assert set(traj.observations.get("camera_obs", {})) == expected
        assert "counter" in traj.observations["policy"]


def test_max_episodes_bounds_which_episodes_are_recorded(tmp_path):
    items = [WorkItem("r", i, 20 + i) for i in range(6)]
    records = _rollout(tmp_path, TrajectoriesConfig(enabled=True, max_episodes=2), items, env_cls=CounterEnv)
    assert [records[i].trajectory is not None for i in range(6)] == [True, True, False, False, False, False]
    assert len(list((tmp_path / "trajectories").iterdir())) == 2
    # an env that puts no task in its observation: adapters are given the instruction
    traj = read_trajectory(tmp_path / records[0].trajectory)
    assert traj.meta["observation_strings"] == {} and traj.observation(0)["task"] == ["count up to the target"]


def test_max_mb_stops_recording_once_the_files_reach_it_and_says_so(tmp_path, capsys):
    items = [WorkItem("r", i, 30 + i) for i in range(4)]
    records = _rollout(tmp_path, TrajectoriesConfig(enabled=True, max_mb=1e-6), items, num_envs=1)
    assert [records[i].trajectory is not None for i in range(4)] == [True, False, False, False]
    assert "reached trajectories.max_mb=1e-06 MB; episode 1 and later ones are not recorded" in capsys.readouterr().err
    # a later recorder of the same directory (a resume) counts the files already there
    again = TrajectoryRecorder(TrajectoriesConfig(enabled=True, max_mb=1e-6), tmp_path)
    assert again.bytes_written > 0 and not again.wants(WorkItem("r", 0, 30))


def test_error_episodes_leave_no_trajectory(tmp_path):
    items = [WorkItem("r", 0, 5), WorkItem("r", 1, 6)]
    records = _rollout(tmp_path, TrajectoriesConfig(enabled=True), items, env_config=CounterConfig(fault_seeds=[5]))
    assert records[0].outcome == "error" and records[0].trajectory is None
    assert records[1].trajectory is not None
    assert [p.name for p in (tmp_path / "trajectories").iterdir()] == [records[1].trajectory.split("/")[-1]]


class _CameraPlugin:
    @hookimpl
    def arena_register_environments(self, register):
        register(CameraCounterEnv.name, CameraCounterEnv)


def _snapshot(tmp_path, trajectories, num_episodes=4):
    snap = tmp_path / "experiment.yaml"
    run = {
        "environment": {"type": "camera_counter"},
        "policy": {"type": "coin_flip"},
        "environment_builder": {"num_envs": 2, "seed": 0},
        "rollout_limit": {"num_episodes": num_episodes},
        "trajectories": trajectories,
    }
    snap.write_text(yaml.safe_dump({"runs": {"count": run}}))
    manager = PluginManager()
    manager.register(RolloutTestPlugin(), "rollout-test")
    manager.register(_CameraPlugin(), "camera-counter")
    return snap, manager


@pytest.mark.parametrize("shard", [None, (1, 2)])
def test_run_one_records_trajectories_relative_to_the_run_directory(tmp_path, shard):
    snap, manager = _snapshot(tmp_path, {"enabled": True, "max_episodes": 3})
    out = tmp_path / "out"
    assert run_one(snap, "count", out, shard=shard, manager=manager) == 0
    work = out / "count" if shard is None else out / "count" / "shards" / "1"
    records, _ = read_records(work / "episodes.jsonl")
    with_files = sorted(r.episode_index for r in records if r.trajectory)
    assert with_files == [r.episode_index for r in sorted(records, key=lambda r: r.episode_index) if r.episode_index < 3]
    found = recorded_episodes(out / "count")
    assert [r.episode_index for r, _ in found] == with_files
    for record, path in found:
        assert path == out / "count" / record.trajectory and read_trajectory(path).steps == record.steps
    assert CameraCounterEnv.instances[-1].cameras is False  # recording switches no camera on


def test_a_killed_run_leaves_no_half_file_counted_and_its_resume_cleans_up(tmp_path):
    snap, manager = _snapshot(tmp_path, {"enabled": True})
    out = tmp_path / "out"
    assert run_one(snap, "count", out, manager=manager) == 0
    directory = out / "count" / "trajectories"
    # a kill after episode 3's file was renamed but before its record was written, while
    # another episode was being written: its record is gone, a partial file is left
    episodes = out / "count" / "episodes.jsonl"
    lines = episodes.read_text().splitlines()
    last = next(line for line in lines if json.loads(line)["episode_index"] == 3)
    episodes.write_text("".join(line + "\n" for line in lines if line != last))
    orphan = json.loads(last)["trajectory"]
    (directory / ".ep00002.4242.partial.npz").write_bytes(b"PK\x03\x04 torn")
    assert [r.episode_index for r, _ in recorded_episodes(out / "count")] == [0, 1, 2]  # the orphan is not counted

    assert run_one(snap, "count", out, manager=manager, resume=True) == 0  # runs episode 3 again
    assert not (directory / ".ep00002.4242.partial.npz").exists()
    found = recorded_episodes(out / "count")
    assert [r.episode_index for r, _ in found] == [0, 1, 2, 3]
    again = found[3][0].trajectory
    assert again != orphan and again.endswith("_2.npz")  # the orphan is never overwritten
    assert (out / "count" / orphan).exists() and read_trajectory(out / "count" / again).meta["episode_index"] == 3


def test_a_file_holding_pickled_objects_is_refused(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, action=np.zeros((1, 1)), meta=np.array([{"x": 1}], dtype=object))
    with pytest.raises(ValueError, match="allow_pickle"):
        read_trajectory(path)


def test_a_wrong_trajectories_key_names_the_file_the_run_and_the_key():
    from arena.config import load_experiment_dict
    from arena.errors import ConfigError

    run = {"environment": {"type": "counter"}, "policy": {"type": "coin_flip"}}
    manager = PluginManager()
    manager.register(RolloutTestPlugin(), "rollout-test")
    for bad, key in (({"max_mb": 0}, "trajectories.max_mb"), ({"camera": "front"}, "trajectories.camera")):
        with pytest.raises(ConfigError) as caught:
            load_experiment_dict({"runs": {"r": {**run, "trajectories": bad}}}, source="exp.yaml", manager=manager)
        text = str(caught.value)
        assert "exp.yaml" in text and "r" in text and key in text, text
    ok = load_experiment_dict({"runs": {"r": {**run, "trajectories": {"enabled": True, "cameras": ["front"]}}}},
                              source="exp.yaml", manager=manager)
    assert ok.runs["r"].trajectories == TrajectoriesConfig(enabled=True, cameras=["front"])
    assert ok.runs["r"].to_dict()["trajectories"] == {"enabled": True, "max_episodes": None, "max_mb": 1024.0, "cameras": ["front"]}
