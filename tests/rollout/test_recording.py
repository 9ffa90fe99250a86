"""Episode videos: one playable file per recorded episode, only recorded envs rendered, never overwritten."""

from __future__ import annotations

from types import SimpleNamespace

import av
import numpy as np
import pytest
import yaml
from rollout_fakes import CoinFlipConfig, CoinFlipPolicy, CounterConfig, CounterEnv, RolloutTestPlugin

from arena.config.models import RecordingConfig
from arena.plugins import PluginManager
from arena.rollout.recording import EpisodeRecorder, VideoWriter
from arena.outputs.records import read_records
from arena.rollout.rollout import rollout
from arena.rollout.run_one import run_one
from arena.rollout.workitems import WorkItem


def _frames_in(path) -> tuple[int, int, int, str]:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = sum(1 for _ in container.decode(video=0))
        return frames, stream.width, stream.height, stream.codec_context.name


def test_video_writer_makes_a_playable_h264_file_and_pads_odd_sizes(tmp_path):
    writer = VideoWriter(tmp_path / "v.mp4", fps=10)
    for i in range(5):
        writer.add(np.full((9, 15, 3), 50 * i, np.uint8))
    writer.close()
    assert _frames_in(tmp_path / "v.mp4") == (5, 16, 10, "h264")


def _record(tmp_path, config, items, num_envs=2):
    env = CounterEnv(CounterConfig(), num_envs=num_envs)
    recorder = EpisodeRecorder(config, tmp_path)
    records = []
    limit = SimpleNamespace(max_episode_steps=None, terminate_on_success=True)
    rollout(env, CoinFlipPolicy(CoinFlipConfig()), items, limit, on_episode_end=records.append, recorder=recorder)
    return env, records


def test_only_recorded_episodes_are_rendered_and_each_gets_its_own_file(tmp_path):
    items = [WorkItem("r", i, 10 + i) for i in range(6)]
    env, records = _record(tmp_path, RecordingConfig(enabled=True, fps=5, max_episodes=2), items)
    by_index = {r.episode_index: r for r in records}
    assert [by_index[i].video is not None for i in range(6)] == [True, True, False, False, False, False]
    for i in (0, 1):
        record = by_index[i]
        assert record.video == f"videos/ep{i:05d}_seed{10 + i}_{record.outcome}.mp4"
        frames, *_ = _frames_in(tmp_path / record.video)
        assert frames == record.steps + 1  # the frame after reset, then one per step
    # renders happened only while a recorded episode ran: as many as the recorded frames
    assert len(env.renders) == sum(by_index[i].steps + 1 for i in (0, 1))
    assert not list((tmp_path / "videos").glob(".*partial*"))


def test_a_retried_episode_never_overwrites_an_earlier_video(tmp_path):
    config = RecordingConfig(enabled=True, fps=5)
    _, first = _record(tmp_path, config, [WorkItem("r", 0, 4)], num_envs=1)
    _, second = _record(tmp_path, config, [WorkItem("r", 0, 4)], num_envs=1)
    assert first[0].video != second[0].video
    assert second[0].video.endswith("_2.mp4")
    assert (tmp_path / first[0].video).exists() and (tmp_path / second[0].video).exists()


def test_recording_off_renders_nothing(tmp_path):
    env, records = _record(tmp_path, RecordingConfig(enabled=False), [WorkItem("r", 0, 1)])
    assert env.renders == [] and records[0].video is None and not (tmp_path / "videos").exists()


@pytest.mark.parametrize("shard", [None, (1, 2)])
def test_run_one_records_video_paths_relative_to_the_run_directory(tmp_path, shard):
    manager = PluginManager()
    manager.register(RolloutTestPlugin(), "rollout-test")
    snap = tmp_path / "experiment.yaml"
    snap.write_text(
        yaml.safe_dump(
            {
                "runs": {
                    "count": {
                        "environment": {"type": "counter"},
                        "policy": {"type": "coin_flip"},
                        "environment_builder": {"num_envs": 2, "seed": 0},
                        "rollout_limit": {"num_episodes": 4},
                        "recording": {"enabled": True, "fps": 5, "max_episodes": 3},
                    }
                }
            }
        )
    )
    out = tmp_path / "out"
    assert run_one(snap, "count", out, shard=shard, manager=manager) == 0
    work = out / "count" if shard is None else out / "count" / "shards" / "1"
    records, _ = read_records(work / "episodes.jsonl")
    videos = [r.video for r in records if r.video]
    assert videos and all((out / "count" / v).exists() for v in videos)
    assert sorted(r.episode_index for r in records if r.video) == [i for i in sorted(r.episode_index for r in records) if i < 3]
    # the env was built without cameras: recording renders only the recorded envs
    assert CounterEnv.instances[-1].cameras is False


def test_cameras_a_simulator_renders_upside_down_are_recorded_upright(tmp_path):
    frame = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(1, 4, 6, 3)
    observation = {"camera_obs": {"flipped": frame, "plain": frame}}
    env = SimpleNamespace(upside_down_cameras=frozenset({"flipped"}))
    for camera, expected in (("flipped", frame[0, ::-1, ::-1]), ("plain", frame[0])):
        recorder = EpisodeRecorder(RecordingConfig(enabled=True, camera=camera), tmp_path)
        assert np.array_equal(recorder._frame(env, 0, observation), expected)
