"""Test helpers of the ALOHA plugin: a traced environment and a raw gym-aloha process.

:class:`TracedAlohaEnvironment` is the ``aloha`` environment that also appends, for every
reset and step, what reached the simulator and the physics state after it to a trace file
(``environment.type: arena_aloha.testing:TracedAlohaEnvironment``, ``trace_dir: DIR``; one
file of codec frames per env, ``DIR/<pid>-<env_id>.frames``, read with
:func:`arena.testing.frames.read_frame_files`).

:func:`raw_gym_aloha_server` is the other side: run as ``python -m arena_aloha.testing``
under the ALOHA venv, it serves plain ``gymnasium.make("gym_aloha/...", obs_type=
"pixels_agent_pos")`` calls over stdin/stdout, so a reference client's loop can run in an
interpreter that has ``openpi-client`` and drive gym-aloha exactly as that client would.
Neither side unpickles: both speak :mod:`arena.testing.frames`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from arena.testing.frames import TraceFiles, serve_calls
from pydantic import Field

from arena_aloha.config import AlohaConfig
from arena_aloha.env import AlohaEnvironment


class TracedAlohaConfig(AlohaConfig):
    """``aloha`` options plus where the trace goes."""

    trace_dir: str = Field(description="directory of the per-env trace files")


def physics_state(physics: Any) -> np.ndarray:
    """``float64 (D,)``: the dm_control physics state (qpos, qvel, act)."""
    return np.array(physics.get_state(), np.float64)


class TracedAlohaEnvironment(AlohaEnvironment):
    """:class:`~arena_aloha.env.AlohaEnvironment` that traces what reaches the simulator.

    Entries: ``{"op": "reset", "seed", "state"}`` and ``{"op": "step", "action": float64
    (14,) as handed to the simulator, "state", "reward"}``.
    """

    name = "aloha_traced"
    Config = TracedAlohaConfig

    def __init__(self, config: TracedAlohaConfig, *, num_envs: int, cameras: bool = False) -> None:
        self._trace_files = TraceFiles(config.trace_dir)
        self._tracing = False
        super().__init__(config, num_envs=num_envs, cameras=cameras)
        self._tracing = True  # the constructor's resets are not episodes

    def _trace(self, env_id: int, entry: dict[str, Any]) -> None:
        if not self._tracing:
            return
        self._trace_files.write(env_id, entry)

    def reset_envs(self, env_ids: list[int], seeds: list[int]) -> dict[str, Any]:
        obs = super().reset_envs(env_ids, seeds)
        for e, seed in zip(env_ids, seeds):
            self._trace(int(e), {"op": "reset", "seed": int(seed), "state": physics_state(self._envs[int(e)].physics)})
        return obs

    def step(self, actions: np.ndarray) -> Any:
        applied = np.asarray(actions, np.float64).copy()
        result = super().step(actions)
        for e, env in enumerate(self._envs):
            self._trace(e, {"op": "step", "action": applied[e], "state": physics_state(env.physics),
                            "reward": float(result[1][e])})
        return result

    def close(self) -> None:
        if hasattr(self, "_trace_files"):
            self._trace_files.close()
        super().close()


def raw_gym_aloha_server() -> None:
    """Serve plain gym-aloha over stdin/stdout with :func:`arena.testing.frames.serve_calls`
    (``[method, args]`` frames of arena's wire codec in, ``["ok", result]`` out; no pickle).

    ``("make", (gym_id,))`` builds ``gymnasium.make(gym_id, obs_type="pixels_agent_pos")``
    as openpi's ``AlohaSimEnvironment`` does; ``reset`` (``seed``; ``(obs, info)`` comes back
    as a list), ``step`` (an action ``(14,)``; ``(obs, reward, terminated, truncated, info)``
    as a list) and ``get_physics_state`` (:func:`physics_state`) follow; ``close`` closes the
    env and ends the loop. Exceptions come back as ``["error", repr]``.
    """
    env: Any = None

    def handle(method: str, args: list[Any]) -> Any:
        nonlocal env
        if method == "make":
            import gym_aloha  # noqa: F401  (registers the envs)
            import gymnasium

            env = gymnasium.make(args[0], obs_type="pixels_agent_pos")
            return None
        if method == "reset":
            return env.reset(seed=args[0])
        if method == "step":
            return env.step(args[0])
        if method == "get_physics_state":
            return physics_state(env.unwrapped._env.physics)
        if method == "close":
            return env.close()
        raise ValueError(f"unknown method {method!r}")

    serve_calls(handle)


if __name__ == "__main__":
    raw_gym_aloha_server()
