"""Test helpers of the ALOHA plugin: a traced environment and a raw gym-aloha process.

:class:`TracedAlohaEnvironment` is the ``aloha`` environment that also appends, for every
reset and step, what reached the simulator and the physics state after it to a trace file
(``environment.type: arena_aloha.testing:TracedAlohaEnvironment``, ``trace_dir: DIR``; one
pickle stream per env, read with :func:`read_traces`).

:func:`raw_gym_aloha_server` is the other side: run as ``python -m arena_aloha.testing``
under the ALOHA venv, it serves plain ``gymnasium.make("gym_aloha/...", obs_type=
"pixels_agent_pos")`` calls over stdin/stdout, so a reference client's loop can run in an
interpreter that has ``openpi-client`` and drive gym-aloha exactly as that client would.
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np
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
        self._trace_files: list[Any] = []
        self._tracing = False
        super().__init__(config, num_envs=num_envs, cameras=cameras)
        self._tracing = True  # the constructor's resets are not episodes

    def _trace(self, env_id: int, entry: dict[str, Any]) -> None:
        if not self._tracing:
            return
        while len(self._trace_files) <= env_id:
            path = Path(self.config.trace_dir) / f"{os.getpid()}-{len(self._trace_files)}.pkl"
            path.parent.mkdir(parents=True, exist_ok=True)
            self._trace_files.append(path.open("ab"))
        pickle.dump(entry, self._trace_files[env_id])
        self._trace_files[env_id].flush()

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
        for f in getattr(self, "_trace_files", []):
            f.close()
        self._trace_files = []
        super().close()


def read_traces(trace_dir: str | os.PathLike[str]) -> list[list[dict[str, Any]]]:
    """Every trace file of ``trace_dir`` (sorted by name), each a list of its entries."""
    traces = []
    for path in sorted(Path(trace_dir).glob("*.pkl")):
        entries = []
        with path.open("rb") as f:
            while True:
                try:
                    entries.append(pickle.load(f))
                except EOFError:
                    break
        traces.append(entries)
    return traces


def raw_gym_aloha_server() -> None:
    """Serve plain gym-aloha over stdin/stdout (pickled ``(method, args)`` in, result out).

    ``("make", (gym_id,))`` builds ``gymnasium.make(gym_id, obs_type="pixels_agent_pos")``
    as openpi's ``AlohaSimEnvironment`` does; ``reset`` (``seed``), ``step`` (an action) and
    ``get_physics_state`` follow; ``close`` ends the loop. Exceptions come back as
    ``("error", repr)``.
    """
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr
    env = None
    while True:
        try:
            method, args = pickle.load(stdin)
        except EOFError:
            return
        try:
            if method == "make":
                import gym_aloha  # noqa: F401  (registers the envs)
                import gymnasium

                env = gymnasium.make(args[0], obs_type="pixels_agent_pos")
                result: Any = None
            elif method == "reset":
                result = env.reset(seed=args[0])
            elif method == "step":
                result = env.step(args[0])
            elif method == "get_physics_state":
                result = physics_state(env.unwrapped._env.physics)
            elif method == "close":
                env.close()
                pickle.dump(("ok", None), stdout)
                stdout.flush()
                return
            else:
                raise ValueError(f"unknown method {method!r}")
            reply = ("ok", result)
        except Exception as exc:  # the client shows it
            reply = ("error", repr(exc))
        pickle.dump(reply, stdout)
        stdout.flush()


if __name__ == "__main__":
    raw_gym_aloha_server()
