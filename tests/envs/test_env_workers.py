"""Environment workers behind the vectorized Environment contract: same results as in-process,
frames through shared memory, crashes cost only the crashed worker's envs."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from arena.envs.base import ENV_ERRORS, Environment
from arena.envs.workers import WorkerEnvironment, WorkerError, build_environment
from arena.errors import SimulatorError
from arena.testing.envs import CrashingToyConfig, CrashingToyEnv, ToyReachConfig, ToyReachEnv

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are tested on Linux")


def _same(a, b, path="obs"):
    assert type(a) is type(b) or (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)), path
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            _same(a[key], b[key], f"{path}/{key}")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        np.testing.assert_array_equal(a, b, err_msg=path)
    else:
        assert a == b, path


def _drive(env: Environment, steps: int, seeds: list[int], action_seed: int = 0) -> list:
    """Reset every env, step with seeded random actions, reset two envs mid-way; return all results."""
    out = [env.reset_envs(list(range(env.num_envs)), seeds)]
    rng = np.random.default_rng(action_seed)
    low, high = env.action_space.low, env.action_space.high
    for t in range(steps):
        actions = rng.uniform(low, high, (env.num_envs, *env.action_space.shape)).astype(np.float32)
        obs, reward, terminated, truncated, info = env.step(actions)
        out.append((obs, reward, terminated, truncated, {"success": info["success"]}))
        if t == steps // 2:
            out.append(env.reset_envs([0, env.num_envs - 1], [seeds[0] + 100, seeds[-1] + 100]))
    out.append([env.render(e) for e in range(env.num_envs)])
    out.append([env.episode_info(e) for e in range(env.num_envs)])
    return out


def _compare_across_workers(env_cls, config, num_envs: int, steps: int, worker_counts=(1, 2, 3)):
    seeds = [11 * (i + 1) for i in range(num_envs)]
    reference = env_cls(config, num_envs=num_envs)
    try:
        expected = _drive(reference, steps, seeds)
    finally:
        reference.close()
    for workers in worker_counts:
        env = build_environment(env_cls, config.model_copy(update={"workers": workers}), num_envs=num_envs)
        try:
            assert isinstance(env, WorkerEnvironment) and len(env.plan.slices) == min(workers, num_envs)
            assert env.task_description == expected_task(env_cls, config)
            _same(_drive(env, steps, seeds), expected, f"workers={workers}")
        finally:
            env.close()


def expected_task(env_cls, config):
    env = env_cls(config, num_envs=1)
    try:
        return env.task_description
    finally:
        env.close()


def test_toy_env_results_are_identical_in_process_and_in_1_2_3_workers():
    _compare_across_workers(ToyReachEnv, ToyReachConfig(image_size=8), num_envs=3, steps=6)


@pytest.mark.slow
def test_metaworld_results_are_identical_in_process_and_in_2_3_workers():
    # one worker: the environment's conformance check (tests/envs/test_metaworld.py)
    from arena.envs.metaworld import MetaWorldConfig, MetaWorldEnvironment

    config = MetaWorldConfig(task="push-v3", cameras=True, image_size=24)
    _compare_across_workers(MetaWorldEnvironment, config, num_envs=3, steps=8, worker_counts=(2, 3))


@pytest.mark.slow
def test_franka_kitchen_results_are_identical_in_process_and_in_2_3_workers():
    # one worker: the environment's conformance check (tests/envs/test_franka_kitchen.py)
    from arena.envs.franka_kitchen import FrankaKitchenConfig, FrankaKitchenEnvironment

    config = FrankaKitchenConfig(task="microwave", image_height=18, image_width=32)
    _compare_across_workers(FrankaKitchenEnvironment, config, num_envs=3, steps=6, worker_counts=(2, 3))


def test_camera_frames_cross_through_shared_memory_not_the_socket():
    env = build_environment(ToyReachEnv, ToyReachConfig(workers=2, image_size=64), num_envs=2)
    try:
        obs = env.reset_envs([0, 1], [1, 2])
        assert obs["camera_obs"]["top"].shape == (2, 64, 64, 3)
        maps = Path("/proc/self/maps").read_text()
        assert maps.count("memfd:arena-env-worker") >= 2  # one buffer per worker, mapped here
        before = maps.count("memfd:arena-env-worker")
        for _ in range(3):
            obs = env.step(np.zeros((2, 2), np.float32))[0]
        assert Path("/proc/self/maps").read_text().count("memfd:arena-env-worker") == before  # reused
        obs["camera_obs"]["top"][:] = 0  # the caller owns what it gets
    finally:
        env.close()


@pytest.mark.parametrize("mode", ["segfault", "exit", "kill"])
def test_a_dead_worker_costs_only_its_envs_and_is_started_again_at_their_next_reset(mode):
    config = CrashingToyConfig(workers=3, crash_seeds=[22], crash_step=2, crash_mode=mode, image_size=8)
    env = build_environment(CrashingToyEnv, config, num_envs=3)
    reference = ToyReachEnv(ToyReachConfig(image_size=8), num_envs=3)
    try:
        seeds = [11, 22, 33]
        env.reset_envs([0, 1, 2], seeds)
        reference.reset_envs([0, 1, 2], seeds)
        actions = np.full((3, 2), 0.5, np.float32)
        env.step(actions), reference.step(actions)
        obs, reward, _, _, info = env.step(actions)
        expected = reference.step(actions)
        errors = info[ENV_ERRORS]
        assert list(errors) == [1]
        how = {"segfault": "killed by SIGSEGV", "exit": "exited with code 3", "kill": "killed by SIGKILL"}[mode]
        assert errors[1].startswith("env worker 1 (envs 1, pid ") and how in errors[1]
        assert "episode seed 22 crashes" in errors[1]  # the worker's last output
        for e in (0, 2):  # the other workers' step counts
            np.testing.assert_array_equal(obs["policy"]["position"][e], expected[0]["policy"]["position"][e])
            assert reward[e] == expected[1][e]
        assert env.episode_info(1) == {}  # its worker is gone
        obs = env.reset_envs([1], [44])  # started again
        reference.reset_envs([1], [44])
        np.testing.assert_array_equal(obs["policy"]["position"], reference._observation()["policy"]["position"])
        assert ENV_ERRORS not in env.step(actions)[4]
    finally:
        env.close()
        reference.close()


def test_an_exception_in_a_worker_fails_only_its_envs_and_keeps_the_worker():
    config = CrashingToyConfig(workers=2, crash_seeds=[22], crash_step=1, crash_mode="raise", image_size=8)
    env = build_environment(CrashingToyEnv, config, num_envs=2)
    try:
        env.reset_envs([0, 1], [11, 22])
        info = env.step(np.zeros((2, 2), np.float32))[4]
        assert list(info[ENV_ERRORS]) == [1] and "RuntimeError: toy simulator failed" in info[ENV_ERRORS][1]
        env.reset_envs([1], [33])
        assert ENV_ERRORS not in env.step(np.zeros((2, 2), np.float32))[4]
        assert env.episode_info(1) != {}  # the same worker answers
    finally:
        env.close()


def test_a_worker_that_cannot_be_restarted_fails_only_the_reset_of_its_envs(tmp_path):
    config = CrashingToyConfig(workers=2, crash_seeds=[22], crash_step=1, crash_mode="exit", image_size=8)
    env = build_environment(CrashingToyEnv, config, num_envs=2)
    try:
        env.reset_envs([0, 1], [11, 22])
        assert 1 in env.step(np.zeros((2, 2), np.float32))[4][ENV_ERRORS]
        env._workers[1].python = str(tmp_path / "no-python")  # its next start fails
        with pytest.raises(SimulatorError) as err:
            env.reset_envs([0, 1], [12, 23])
        assert err.value.env_ids == [1] and "could not be restarted" in str(err.value)
        assert err.value.observation["policy"]["position"].shape == (2, 2)  # env 0 was reset
    finally:
        env.close()


class _BrokenConfig(ToyReachConfig):
    pass


class BrokenEnv(ToyReachEnv):
    Config = _BrokenConfig

    def __init__(self, config, *, num_envs, cameras=False):
        raise RuntimeError("the simulator's assets are missing")


def test_a_worker_that_cannot_build_its_environment_fails_with_its_traceback(capfd):
    with pytest.raises(WorkerError) as err:
        build_environment(BrokenEnv, _BrokenConfig(workers=1), num_envs=1)
    message = str(err.value)
    assert "could not build" in message and "RuntimeError: the simulator's assets are missing" in message
    # one line (it is the run's failure reason in the summary); the traceback goes to the log
    assert "\n" not in message and "traceback in the run's log" in message
    logged = capfd.readouterr().err
    assert "Traceback (most recent call last)" in logged and "raise RuntimeError" in logged


def test_a_class_defined_in_a_function_cannot_go_to_a_worker():
    class Local(ToyReachEnv):
        pass

    with pytest.raises(WorkerError, match="move it into a module"):
        build_environment(Local, ToyReachConfig(workers=1), num_envs=1)


def test_close_is_idempotent_and_ends_the_worker_processes():
    env = build_environment(ToyReachEnv, ToyReachConfig(workers=2), num_envs=2)
    pids = [w.pid for w in env._workers]
    procs = [w.proc for w in env._workers]
    env.close()
    env.close()
    assert all(p.poll() is not None for p in procs)
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
