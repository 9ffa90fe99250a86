"""LeRobot side of the adapter-equivalence tests; runs in the ``lerobot`` model venv.

``python lerobot_reference.py IN.frames OUT.frames [IN.frames OUT.frames ...]`` (several pairs:
one process, LeRobot imported once): for each step of the simulator's recording
(:mod:`equivalence_sources`; ``IN`` may be ``pusht``, which runs LeRobot's own gym-pusht env
here), computes

(a) arena: ``arena_lerobot.adapters`` on arena's observation, then
    :func:`arena_lerobot.features.to_policy_batch`;
(b) LeRobot 0.4.4: its env wrapper's observation formatting where it cannot run here
    (``LiberoEnv._format_raw_obs``, ``MetaworldEnv._format_raw_obs``, called on the recorded
    raw simulator output; the simulators' imports are stubbed, nothing else), the vector env's
    stacking, ``preprocess_observation``, its task lookup (:func:`with_task`) and the env preprocessor
    ``make_env_pre_post_processors`` builds (``LiberoProcessorStep`` for LIBERO), in
    ``lerobot_eval.rollout``'s order;

and writes ``{"steps": [{key: {"equal", "shape_a", "shape_b", "dtype_a", "dtype_b",
"max_abs", "max_ulp"}}], "tasks_a", "tasks_b", "metaworld_tasks"}``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from arena.testing.frames import read_frame, write_frame
from arena_lerobot.adapters import ADAPTERS
from arena_lerobot.features import to_policy_batch


def _stub_module(name: str, **attrs: Any) -> types.ModuleType:
    class Stub(types.ModuleType):
        def __getattr__(self, item: str) -> Any:  # e.g. metaworld.policies.SawyerPushV3Policy
            if item.startswith("__"):  # module protocol (__file__, __path__, ...): what a plain module lacks
                raise AttributeError(item)
            return type(item, (), {})

    module = Stub(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def _stack(values: list[Any]) -> Any:
    """What a gymnasium vector env does to per-env dict observations (stack along axis 0)."""
    if isinstance(values[0], dict):
        return {k: _stack([v[k] for v in values]) for k in values[0]}
    return np.stack([np.asarray(v) for v in values])


class _VectorTasks:
    """``SyncVectorEnv.call`` over real per-env objects: gymnasium 1.x reads the attribute through
    the wrappers (``get_wrapper_attr``), an AttributeError when no layer has it."""

    def __init__(self, envs: list[Any]) -> None:
        self.envs = envs

    def call(self, name: str) -> tuple:
        return tuple(e.get_wrapper_attr(name) if hasattr(e, "get_wrapper_attr") else getattr(e, name) for e in self.envs)


def with_task(vec: Any, observation: dict[str, Any]) -> dict[str, Any]:
    """The ``task`` lerobot-eval 0.6.1 adds (``scripts/lerobot_eval.py``, ``rollout``; 0.4.4's
    ``add_envs_task`` is gone): ``env.call("task_description")``, else ``env.call("task")``, else
    ``""`` per env."""
    try:
        observation["task"] = list(vec.call("task_description"))
    except (AttributeError, NotImplementedError):
        try:
            observation["task"] = list(vec.call("task"))
        except (AttributeError, NotImplementedError):
            observation["task"] = [""] * len(vec.envs)
    return observation


def lerobot_side(benchmark: str, raws: list[Any], instruction: str) -> dict[str, Any]:
    from lerobot.envs import configs
    from lerobot.envs.factory import make_env_pre_post_processors
    from lerobot.envs.utils import preprocess_observation

    if benchmark == "aloha":
        cfg = configs.AlohaEnv(task="AlohaTransferCube-v0")

        class GymAloha(gym.Env):  # gym-aloha's env sets `task`; gym.make wraps it like this
            def __init__(self) -> None:
                self.task = "transfer_cube"

        envs = [gym.wrappers.TimeLimit(gym.wrappers.OrderEnforcing(GymAloha()), 400) for _ in raws]
        formatted = raws  # gym-aloha's observation is what LeRobot's AlohaEnv wrapper hands on
    elif benchmark == "libero":
        envs_module = _stub_module("libero.libero.envs", OffScreenRenderEnv=None)
        _stub_module("libero", libero=_stub_module("libero.libero", benchmark=None, get_libero_path=None,
                                                   envs=envs_module))
        from lerobot.envs.libero import LiberoEnv

        cfg = configs.LiberoEnv(task="libero_spatial")
        envs, formatted = [], []
        for raw in raws:
            env = object.__new__(LiberoEnv)  # the attributes __init__ sets that _format_raw_obs reads
            env.camera_name = ["agentview_image", "robot0_eye_in_hand_image"]
            env.camera_name_mapping = {"agentview_image": "image", "robot0_eye_in_hand_image": "image2"}
            env.obs_type = "pixels_agent_pos"
            controller = types.SimpleNamespace(ee_ori_mat=raw["ee_ori_mat"])
            env._env = types.SimpleNamespace(robots=[types.SimpleNamespace(controller=controller)])
            env.task_description = instruction  # LIBERO's task.language, as _make_envs_task sets it
            env.task = "task"
            formatted.append(env._format_raw_obs(raw))
            envs.append(env)
    elif benchmark == "metaworld":
        try:  # the lerobot venv holds LeRobot's metaworld==3.0.0 (only its task wording is read)
            import metaworld  # noqa: F401
        except ImportError:
            _stub_module("metaworld", policies=_stub_module("metaworld.policies"))
        from lerobot.envs import metaworld as lerobot_metaworld

        cfg = configs.MetaworldEnv(task="push-v3")
        envs, formatted = [], []
        for raw in raws:
            env = object.__new__(lerobot_metaworld.MetaworldEnv)
            env.task, env.obs_type, env.camera_name = "push-v3", "pixels_agent_pos", "corner2"
            env.task_description = lerobot_metaworld.TASK_DESCRIPTIONS[env.task]  # as __init__ sets it
            frame = raw["render"]
            env._env = types.SimpleNamespace(render=lambda frame=frame: frame.copy())
            formatted.append(env._format_raw_obs(raw["obs"]))
            envs.append(env)
    else:
        raise ValueError(benchmark)
    observation = preprocess_observation(_stack(formatted))
    observation = with_task(_VectorTasks(envs), observation)
    env_preprocessor, _ = make_env_pre_post_processors(env_cfg=cfg, policy_cfg=None)
    return env_preprocessor(observation)


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in sorted(k for k in set(a) | set(b) if k.startswith("observation.")):
        if key not in a or key not in b:
            out[key] = {"equal": False, "missing_in": "a" if key not in a else "b"}
            continue
        x, y = a[key], b[key]
        entry = {"shape_a": list(x.shape), "shape_b": list(y.shape), "dtype_a": str(x.dtype), "dtype_b": str(y.dtype)}
        same = x.shape == y.shape and x.dtype == y.dtype
        entry["equal"] = bool(same and torch.equal(x, y))
        if same and x.dtype == torch.float32:
            xi, yi = x.numpy().view(np.int32).astype(np.int64), y.numpy().view(np.int32).astype(np.int64)
            entry["max_ulp"] = int(np.abs(xi - yi).max()) if x.numel() else 0
            entry["max_abs"] = float((x - y).abs().max()) if x.numel() else 0.0
            if x.ndim == 2:  # per column, for the state vectors
                entry["ulp_per_column"] = np.abs(xi - yi).max(axis=0).tolist()
        out[key] = entry
    return out


def pusht_recording() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Steps of LeRobot's own PushT vector env (``make_env``), per obs type: LeRobot's batch
    (b) and arena's layout built from the same gym-pusht observations (arena's ``pusht``
    environment's layout: ``camera_obs/<camera>``, ``policy/agent_pos``,
    ``policy/environment_state``)."""
    from lerobot.envs import configs
    from lerobot.envs.factory import make_env, make_env_pre_post_processors
    from lerobot.envs.utils import preprocess_observation

    results, tasks = [], []
    for obs_type in ("pixels_agent_pos", "environment_state_agent_pos"):
        cfg = configs.PushtEnv(obs_type=obs_type)
        vec = make_env(cfg, n_envs=2, use_async_envs=False)["pusht"][0]  # 0.6.1's async envs fail for pusht
        env_pre, _ = make_env_pre_post_processors(env_cfg=cfg, policy_cfg=None)
        adapter = ADAPTERS["pusht"]()
        try:
            obs, _ = vec.reset(seed=[5, 6])
            rng = np.random.default_rng(0)
            for step in range(3):
                arena_obs: dict[str, Any] = {"policy": {"agent_pos": obs["agent_pos"]}, "task": ["pusht"] * 2}
                if "pixels" in obs:
                    arena_obs["camera_obs"] = {"pixels": obs["pixels"]}
                if "environment_state" in obs:
                    arena_obs["policy"]["environment_state"] = obs["environment_state"]
                requests = [adapter.pack_request(adapter.extract(arena_obs, i), "Push the T") for i in range(2)]
                a = to_policy_batch(requests)
                b = env_pre(with_task(vec, preprocess_observation({k: v for k, v in obs.items()})))
                results.append({"obs_type": obs_type, "step": step, "keys": compare(a, b)})
                tasks.append({"a": a["task"], "b": b["task"]})
                obs = vec.step(rng.uniform(0, 512, (2, 2)).astype(np.float32))[0]
        finally:
            vec.close()
    return results, tasks


def main() -> None:
    pairs = sys.argv[1:]
    if not pairs or len(pairs) % 2:
        raise SystemExit(f"usage: lerobot_reference.py IN OUT [IN OUT ...], got {pairs}")
    for start in range(0, len(pairs), 2):
        compare_source(pairs[start], pairs[start + 1])


def compare_source(source: str, out: str) -> None:
    """The report of one recording ``source`` (or ``pusht``), written to ``out``."""
    report: dict[str, Any] = {}
    if source == "pusht":
        report["steps"], tasks = pusht_recording()
    else:
        with open(source, "rb") as f:
            recording = read_frame(f, writable=True)
        benchmark = recording["benchmark"]
        # Meta-World: the adapter with the 39-dim observation as observation.environment_state too
        adapter = ADAPTERS["metaworld_environment_state" if benchmark == "metaworld" else benchmark]()
        report["steps"], tasks = [], []
        for step in recording["steps"]:
            arena_obs, raws = step["arena"], step["raw"]
            requests = [adapter.pack_request(adapter.extract(arena_obs, i), recording["instruction"])
                        for i in range(len(raws))]
            a = to_policy_batch(requests)
            b = lerobot_side(benchmark, raws, recording["instruction"])
            if benchmark == "metaworld":  # LeRobot's Meta-World env has no environment_state: what
                # preprocess_observation makes of one (as of gym-pusht's) holding the raw observation
                from lerobot.envs.utils import preprocess_observation

                b = {**b, **preprocess_observation({"environment_state": _stack([r["obs"] for r in raws])})}
            report["steps"].append({"keys": compare(a, b)})
            tasks.append({"a": a["task"], "b": b["task"]})
        if benchmark == "metaworld":
            import json
            from pathlib import Path

            import lerobot.envs

            path = Path(lerobot.envs.__file__).parent / "metaworld_config.json"
            report["metaworld_tasks"] = json.loads(path.read_text())["TASK_DESCRIPTIONS"]
    report["tasks"] = tasks
    with open(out, "wb") as f:
        write_frame(f, report)


if __name__ == "__main__":
    main()
