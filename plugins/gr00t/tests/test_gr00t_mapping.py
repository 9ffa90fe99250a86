"""Observation mapping (modality config, letterbox, joint groups) and the action schedulers."""

from __future__ import annotations

import numpy as np
import pytest

from arena_gr00t.adapters import Gr00tDroidAdapter, UnsupportedModality
from arena_gr00t.codec import ModalityConfig
from arena.images import letterbox
from arena_gr00t.schedulers import make_scheduler
from arena.testing.droid import droid_obs


def test_letterbox_keeps_aspect_and_pads_black():
    img = np.full((2, 100, 100, 3), 200, np.uint8)
    out = letterbox(img, 180, 320)
    assert out.shape == (2, 180, 320, 3) and out.dtype == np.uint8
    assert out[:, :, :70].max() == 0 and out[:, :, 250:].max() == 0  # 180x180 centred
    assert out[:, :, 70:250].min() == 200


def test_letterbox_of_the_target_size_is_an_exact_copy():
    img = np.random.default_rng(0).integers(0, 255, (180, 320, 3), dtype=np.uint8)
    np.testing.assert_array_equal(letterbox(img, 180, 320), img)


def test_n16_observation_is_nested_batched_and_keyed_by_the_modality_config():
    obs = droid_obs(3)
    out = Gr00tDroidAdapter().observation(obs, "open the door")
    assert set(out) == {"video", "state", "language"}
    assert {k: v.shape for k, v in out["video"].items()} == {
        "exterior_image_1_left": (3, 1, 180, 320, 3),
        "wrist_image_left": (3, 1, 180, 320, 3),
    }
    assert out["state"]["joint_position"].dtype == np.float32
    np.testing.assert_allclose(out["state"]["joint_position"][:, 0], obs["policy"]["joint_pos"])
    assert out["state"]["gripper_position"].shape == (3, 1, 1)
    assert out["language"] == {"annotation.language.language_instruction": [["open the door"]] * 3}


def test_n15_observation_is_flat_with_prefixed_keys():
    out = Gr00tDroidAdapter().observation(droid_obs(2), "go", flat=True)
    assert sorted(out) == [
        "annotation.language.language_instruction",
        "state.gripper_position",
        "state.joint_position",
        "video.exterior_image_1_left",
        "video.wrist_image_left",
    ]
    assert out["annotation.language.language_instruction"] == ["go", "go"]


def test_prefixed_modality_keys_and_longer_horizons_are_understood():
    modality = {
        "video": ModalityConfig((-1, 0), ("video.exterior_image_2_left",)),
        "state": ModalityConfig((0,), ("state.joint_position",)),
        "action": ModalityConfig(tuple(range(16)), ("action.joint_position", "action.gripper_position")),
        "language": ModalityConfig((0,), ("annotation.human.task_description",)),
    }
    adapter = Gr00tDroidAdapter(modality, (90, 160))
    out = adapter.observation(droid_obs(1), "x")
    assert out["video"]["video.exterior_image_2_left"].shape == (1, 2, 90, 160, 3)
    assert adapter.action_horizon == 16


def test_unknown_modality_keys_are_named():
    modality = dict(Gr00tDroidAdapter().modality)
    modality["state"] = ModalityConfig((0,), ("joint_position", "base_velocity"))
    with pytest.raises(UnsupportedModality, match="base_velocity"):
        Gr00tDroidAdapter(modality)


def test_reply_groups_land_in_their_action_slots():
    adapter = Gr00tDroidAdapter()
    reply = {
        "action.gripper_position": np.ones((2, 32, 1), np.float32),
        "joint_position": np.full((2, 32, 7), 0.5, np.float64),
    }
    chunk = adapter.actions_from_reply(reply, 2, 32)
    assert chunk.dtype == np.float32 and chunk.shape == (2, 32, 8)
    assert np.all(chunk[..., :7] == 0.5) and np.all(chunk[..., 7] == 1.0)


@pytest.mark.parametrize(
    "reply, match",
    [
        ({"joint_position": np.zeros((2, 32, 7), np.float32)}, "no action group 'gripper_position'"),
        ({"joint_position": np.zeros((2, 8, 7), np.float32), "gripper_position": np.zeros((2, 8, 1), np.float32)}, "H>=32"),
        ({"joint_position": np.full((2, 32, 7), np.nan, np.float32), "gripper_position": np.zeros((2, 32, 1), np.float32)}, "NaN"),
    ],
)
def test_malformed_replies_are_protocol_violations(reply, match):
    from arena.policies.adapters import ProtocolViolation

    with pytest.raises(ProtocolViolation, match=match):
        Gr00tDroidAdapter().actions_from_reply(reply, 2, 32)


def _fetcher(n, h=4, d=2):
    calls = []

    def fetch():
        calls.append(1)
        return np.full((n, h, d), len(calls), np.float32) + np.arange(h, dtype=np.float32)[None, :, None] / 10

    return fetch, calls


def test_chunk_scheduler_fetches_for_all_envs_when_any_is_due():
    sched = make_scheduler("chunk", 2, 4, 2)
    fetch, calls = _fetcher(2)
    rows = [sched.get_action(fetch) for _ in range(2)]
    sched.reset([1])  # env 1 starts a new episode early
    rows.append(sched.get_action(fetch))
    assert len(calls) == 2 and sched.rows_used == 3 and sched.rows_requested == 4
    assert rows[2][0, 0] == pytest.approx(1.2)  # env 0 keeps replaying its first chunk
    assert rows[2][1, 0] == pytest.approx(2.0)  # env 1 starts the second chunk


def test_synced_batch_holds_early_envs_until_every_env_is_due():
    sched = make_scheduler("synced_batch", 2, 4, 2)
    fetch, calls = _fetcher(2)
    hold = np.array([[9, 9], [7, 7]], np.float32)
    sched.get_action(fetch, hold)
    sched.reset([1])
    out = sched.get_action(fetch, hold)
    assert len(calls) == 1 and out[1].tolist() == [7, 7] and out[0, 0] == pytest.approx(1.1)
    sched.get_action(fetch, hold)
    sched.get_action(fetch, hold)  # env 0 has used its 4 rows now
    assert len(calls) == 1 and sched.held_steps[1] == 3
    out = sched.get_action(fetch, hold)
    assert len(calls) == 2 and out[:, 0].tolist() == [2.0, 2.0]


def test_a_failed_fetch_advances_nothing():
    sched = make_scheduler("chunk", 2, 4, 2)

    def broken():
        raise RuntimeError("server gone")

    with pytest.raises(RuntimeError):
        sched.get_action(broken)
    assert sched.needs_chunk().all() and sched.fetches == 0


def test_unknown_scheduler_names_the_known_ones():
    with pytest.raises(ValueError, match="chunk"):
        make_scheduler("eager", 1, 4, 2)
