"""IsaacLab-Arena's DROID observation layout is arena's: the DROID adapters of the openpi,
Cosmos, GR00T and DreamZero plugins each pack a request from it unchanged.

The fast test uses an observation with IsaacLab-Arena's DROID keys, dtypes and sizes
(``reference/isaaclab.md``: policy terms ``actions``, ``robot_joint_pos``, ``joint_pos`` (7),
``gripper_pos`` (1), ``eef_pos``, ``eef_quat``; cameras ``external_camera_rgb``,
``external_camera_2_rgb``, ``wrist_camera_rgb`` at 720 x 1280). The slow one takes the
observation from the isaaclab plugin's stand-in for IsaacLab-Arena (its ``ArenaEnvBuilder``
interface, real Isaac Lab 3 on Newton; ``stand_in/`` next to this file) built by arena in an
environment worker under the Isaac Lab venv. The adapters belong to other plugins: without
them installed (this plugin alone), the tests skip.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

CosmosDroidAdapter = pytest.importorskip("arena_cosmos.adapters").CosmosDroidAdapter
DreamZeroDroidAdapter = pytest.importorskip("arena_dreamzero.adapters").DreamZeroDroidAdapter
Gr00tDroidAdapter = pytest.importorskip("arena_gr00t.adapters").Gr00tDroidAdapter
OpenPIDroidAdapter = pytest.importorskip("arena_openpi.adapters").OpenPIDroidAdapter

STAND_IN = Path(__file__).resolve().parent / "stand_in"
CAMERAS = ("external_camera_rgb", "external_camera_2_rgb", "wrist_camera_rgb")


def isaaclab_arena_droid_observation(num_envs: int = 2, height: int = 720, width: int = 1280) -> dict[str, Any]:
    """A batched observation exactly as IsaacLab-Arena's DROID embodiment gives it (after
    arena's torch -> numpy conversion): float32 state terms, uint8 cameras."""
    rng = np.random.default_rng(7)
    f32 = lambda *shape: rng.uniform(-1, 1, (num_envs, *shape)).astype(np.float32)  # noqa: E731
    return {
        "policy": {
            "actions": f32(8),
            "robot_joint_pos": f32(9),
            "joint_pos": f32(7),
            "gripper_pos": rng.uniform(0, 1, (num_envs, 1)).astype(np.float32),
            "eef_pos": f32(3),
            "eef_quat": f32(4),
        },
        "camera_obs": {name: rng.integers(0, 256, (num_envs, height, width, 3), dtype=np.uint8) for name in CAMERAS},
        "task": ["put the cube in the bowl"] * num_envs,
    }


def pack_with_every_droid_adapter(obs: dict[str, Any], env_id: int, instruction: str) -> dict[str, dict[str, Any]]:
    """One request per plugin for env ``env_id``, as each plugin's client builds it."""
    openpi = OpenPIDroidAdapter()
    cosmos = CosmosDroidAdapter()
    dreamzero = DreamZeroDroidAdapter()
    single = {
        "camera_obs": {k: v[env_id : env_id + 1] for k, v in obs["camera_obs"].items()},
        "policy": {k: v[env_id : env_id + 1] for k, v in obs["policy"].items()},
    }
    return {
        "openpi": openpi.pack_request(openpi.extract(obs, env_id), instruction),
        "cosmos": cosmos.pack_request(cosmos.extract(obs, env_id), instruction),
        "gr00t": Gr00tDroidAdapter().observation(single, instruction),
        "dreamzero": dreamzero.pack_request(
            dreamzero.frames(obs, env_id), dreamzero.state(obs, env_id), instruction, "session-0", (180, 320)
        ),
    }


def check_requests(requests: dict[str, dict[str, Any]], obs: dict[str, Any], env_id: int) -> None:
    joints = obs["policy"]["joint_pos"][env_id]
    gripper = obs["policy"]["gripper_pos"][env_id]

    openpi = requests["openpi"]
    assert openpi["observation/exterior_image_1_left"].shape == (224, 224, 3)
    assert openpi["observation/wrist_image_left"].dtype == np.uint8
    np.testing.assert_allclose(openpi["observation/joint_position"], joints, rtol=1e-6)
    np.testing.assert_allclose(openpi["observation/gripper_position"], gripper, rtol=1e-6)

    cosmos = requests["cosmos"]
    assert cosmos["observation/image"].shape == CosmosDroidAdapter.COMPOSED_SHAPE
    np.testing.assert_allclose(cosmos["observation/joint_position"], joints, rtol=1e-6)

    gr00t = requests["gr00t"]
    assert set(gr00t["video"]) == {"exterior_image_1_left", "wrist_image_left"}
    assert gr00t["video"]["wrist_image_left"].shape == (1, 1, 180, 320, 3)
    np.testing.assert_allclose(gr00t["state"]["joint_position"].reshape(7), joints, rtol=1e-6)
    np.testing.assert_allclose(gr00t["state"]["gripper_position"].reshape(1), gripper, rtol=1e-6)

    dreamzero = requests["dreamzero"]
    for key in ("observation/exterior_image_0_left", "observation/exterior_image_1_left", "observation/wrist_image_left"):
        assert dreamzero[key].shape == (180, 320, 3) and dreamzero[key].dtype == np.uint8
    np.testing.assert_allclose(dreamzero["observation/joint_position"], joints, rtol=1e-6)
    assert dreamzero["session_id"] == "session-0"


def test_every_droid_adapter_packs_isaaclab_arenas_droid_observation():
    obs = isaaclab_arena_droid_observation()
    for env_id in range(2):
        requests = pack_with_every_droid_adapter(obs, env_id, obs["task"][env_id])
        check_requests(requests, obs, env_id)
        assert all(r.get("prompt", "put the cube in the bowl") == "put the cube in the bowl" for r in requests.values() if "prompt" in r)


@pytest.mark.slow
@pytest.mark.timeout(1200)  # Isaac Lab's start and build on a busy 2-core machine
def test_every_droid_adapter_packs_the_observation_of_an_isaaclab_arena_environment(tmp_path, monkeypatch):
    from arena.testing.venvs import benchmark_python
    from arena_isaaclab.config import IsaacLabConfig
    from arena_isaaclab.env import IsaacLabEnvironment

    python = benchmark_python("isaaclab")
    pytest.importorskip("arena.envs.workers.pool", reason="environment workers are not implemented in this checkout")
    from arena.envs.workers import build_environment

    assets = tmp_path / "assets"
    subprocess.run([str(python), "-m", "arena_isaaclab.sim.assets", str(assets)], check=True, timeout=300)
    monkeypatch.setenv("PYTHONPATH", str(STAND_IN))
    config = IsaacLabConfig(
        isaaclab_arena={"environment": "droid_cube_stand_in", "embodiment": "droid_abs_joint_pos", "options": {"pick_up_object": "cube"}},
        device="cpu",
        asset_root=str(assets),
    )
    env = build_environment(IsaacLabEnvironment, config, num_envs=2, cameras=True)
    try:
        obs = env.reset_envs([0, 1], [3, 4])
        obs, _, terminated, truncated, info = env.step(np.zeros((2, 8), np.float32))
        assert env.task_description == "pick up the cube"
        assert not info["success"].any() and not terminated.any() and not truncated.any()
    finally:
        env.close()
    assert obs["policy"]["joint_pos"].shape == (2, 7) and obs["policy"]["joint_pos"].dtype == np.float32
    for name in CAMERAS:
        frames = obs["camera_obs"][name]
        assert frames.dtype == np.uint8 and frames.shape[0] == 2 and frames.shape[-1] == 3
        assert frames.std() > 0  # rendered, not blank
    for env_id in range(2):
        check_requests(pack_with_every_droid_adapter(obs, env_id, env.task_description), obs, env_id)
