"""The metaworld-expert model: request/reply shapes, unknown tasks, and that it solves tasks."""

from __future__ import annotations

import time

import numpy as np
import pytest

from arena.envs.metaworld import MetaWorldConfig, MetaWorldEnvironment
from arena.errors import ConfigError
from arena.models.metaworld_expert import MetaWorldExpertModel
from arena.models.model import Model

TASKS = ["reach-v3", "pick-place-v3", "drawer-open-v3", "button-press-topdown-v3"]


@pytest.fixture(scope="module")
def model():
    model = MetaWorldExpertModel()
    model.load()
    return model


def test_model_follows_the_model_protocol(model):
    assert isinstance(model, Model)
    meta = model.metadata()
    assert meta["model"] == "metaworld-expert" and meta["action_dim"] == 4
    assert set(TASKS) <= set(meta["tasks"]) and len(meta["tasks"]) == 50


def test_model_takes_no_options():
    with pytest.raises(ConfigError, match="no options"):
        MetaWorldExpertModel(checkpoint="x")


@pytest.mark.parametrize("task", TASKS)
def test_infer_returns_one_float32_action_row(model, task):
    env = MetaWorldEnvironment(MetaWorldConfig(task=task), num_envs=1)
    try:
        state = env.reset_envs([0], [0])["policy"]["state"]
    finally:
        env.close()
    for sent in (state[0], state, state.astype(np.float32)):  # (39,), (1, 39), float32
        reply = model.infer({"observation/state": sent, "task": task, "prompt": "ignored"})
        actions = reply["actions"]
        assert actions.dtype == np.float32 and actions.shape == (1, 4)
        assert np.all(np.abs(actions) <= 1)


def test_infer_batch_answers_each_request_in_order(model):
    state = np.zeros(39)
    batch = [{"observation/state": state, "task": t} for t in TASKS]
    replies = model.infer_batch(batch)
    assert len(replies) == len(TASKS)
    for request, reply in zip(batch, replies):
        np.testing.assert_array_equal(reply["actions"], model.infer(request)["actions"])


def test_unknown_task_names_known_tasks(model):
    with pytest.raises(ValueError, match="reach-v3"):
        model.infer({"observation/state": np.zeros(39), "task": "reach-v2"})


def test_bad_state_is_refused(model):
    with pytest.raises(ValueError, match="39"):
        model.infer({"observation/state": np.zeros(7), "task": "reach-v3"})


def _success_rate(model, task: str, episodes: int = 10, max_steps: int = 500) -> tuple[float, int]:
    """Drive ``episodes`` envs (seeds 0..episodes-1) with ``model.infer``; stop each at success."""
    env = MetaWorldEnvironment(MetaWorldConfig(task=task), num_envs=episodes)
    try:
        obs = env.reset_envs(list(range(episodes)), list(range(episodes)))
        solved = np.zeros(episodes, bool)
        steps = 0
        while steps < max_steps and not solved.all():
            actions = np.zeros((episodes, 4), np.float32)
            for e in np.flatnonzero(~solved):
                request = {"observation/state": obs["policy"]["state"][e], "task": task}
                actions[e] = model.infer(request)["actions"][0]
            obs, _, _, _, info = env.step(actions)
            solved |= info["success"]
            steps += 1
        return float(solved.mean()), steps
    finally:
        env.close()


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_expert_model_solves_at_least_80_percent_of_episodes(model, task):
    start = time.perf_counter()
    rate, steps = _success_rate(model, task)
    print(f"{task}: success {rate:.0%} in {steps} steps, {time.perf_counter() - start:.1f}s")
    assert rate >= 0.8
