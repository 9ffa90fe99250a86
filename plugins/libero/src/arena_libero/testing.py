"""Test helpers of the LIBERO plugin: a traced environment and a raw-LIBERO process.

:class:`TracedLiberoEnvironment` is the ``libero`` environment that also appends, for every
reset and step, what reached the simulator and the simulator state after it to a trace
file: ``environment.type: arena_libero.testing:TracedLiberoEnvironment`` with
``trace_dir: DIR`` (one file of codec frames per env, ``DIR/<pid>-<env_id>.frames``, read
with :func:`arena.testing.frames.read_frame_files`). The equivalence tests compare it with a
reference client's loop.

:func:`raw_libero_server` is the other side: run as ``python -m arena_libero.testing`` under
the LIBERO venv it serves plain LIBERO calls (``OffScreenRenderEnv``, as openpi's example
builds it) over stdin/stdout, so a reference client's loop can run in another interpreter
(one that has ``openpi-client``) and drive LIBERO exactly as the client would. Neither side
unpickles: both speak :mod:`arena.testing.frames`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from arena.testing.frames import TraceFiles, serve_calls
from pydantic import Field

from arena_libero.env import LiberoConfig, LiberoEnvironment


def body_positions(sim: Any) -> np.ndarray:
    """``float64 (B, 3)``: the MuJoCo model's body positions, where a reset placed the fixtures
    (``get_sim_state`` holds joints only, so it cannot tell two fixture layouts apart)."""
    return np.array(sim.sim.model.body_pos, np.float64)


class TracedLiberoConfig(LiberoConfig):
    """``libero`` options plus where the trace goes."""

    trace_dir: str = Field(description="directory of the per-env trace files")


class TracedLiberoEnvironment(LiberoEnvironment):
    """:class:`~arena_libero.env.LiberoEnvironment` that traces what reaches the simulator.

    Trace entries (one frame each, in order): ``{"op": "reset", "init_state": k, "state":
    float64 (D,), "body_pos": float64 (B, 3)}`` after each episode start (wait steps
    included; ``body_pos`` holds where the reset placed the fixtures, which the simulator
    state does not) and ``{"op": "step",
    "action": float64 (7,) as handed to LIBERO, "state": float64 (D,), "success": bool}``.
    """

    name = "libero_traced"
    Config = TracedLiberoConfig

    def __init__(self, config: TracedLiberoConfig, *, num_envs: int, cameras: bool = False) -> None:
        self._trace_files = TraceFiles(config.trace_dir)
        self._tracing = False
        super().__init__(config, num_envs=num_envs, cameras=cameras)
        self._tracing = True  # the constructor's resets (``_start_episodes``) are not episodes

    def _trace(self, env_id: int, entry: dict[str, Any]) -> None:
        self._trace_files.write(env_id, entry)

    def _reset_one(self, env_id: int, seed: int) -> dict[str, Any]:
        obs = super()._reset_one(env_id, seed)
        if self._tracing:
            sim = self._sims[env_id]
            state = np.array(sim.get_sim_state(), np.float64)
            self._trace(env_id, {"op": "reset", "init_state": self._init_state[env_id], "state": state,
                                 "body_pos": body_positions(sim)})
        return obs

    def step(self, actions: np.ndarray) -> Any:
        applied = np.asarray(actions, np.float64).copy()
        result = super().step(actions)
        for i, sim in enumerate(self._sims):
            state = np.array(sim.get_sim_state(), np.float64)
            self._trace(i, {"op": "step", "action": applied[i], "state": state, "success": bool(result[4]["success"][i])})
        return result

    def close(self) -> None:
        if hasattr(self, "_trace_files"):
            self._trace_files.close()
        super().close()


def raw_libero_server() -> None:
    """Serve plain LIBERO over stdin/stdout with :func:`arena.testing.frames.serve_calls`
    (``[method, args]`` frames of arena's wire codec in, ``["ok", result]`` out; no pickle).

    The first call is ``("make", (suite, task_index, resolution))``: builds
    ``OffScreenRenderEnv(bddl_file_name, camera_heights, camera_widths)`` as openpi's
    ``_get_libero_env`` does and returns the task's language; then ``seed``, ``reset``,
    ``set_init_state`` (by init-state index), ``step`` (a list of floats) and
    ``get_sim_state`` call the env's methods of those names (observations: dicts of numpy
    arrays; ``step``'s ``(obs, reward, done, info)`` comes back as a list), ``body_positions``
    returns :func:`body_positions`; ``close`` closes the env and ends the loop.
    Exceptions come back as ``["error", repr]``.
    """
    import contextlib
    import io

    env: Any = None
    states: Any = None

    def handle(method: str, args: list[Any]) -> Any:
        nonlocal env, states
        if method == "make":
            from libero.libero import benchmark, get_libero_path
            from libero.libero.envs import OffScreenRenderEnv

            suite_name, task_id, resolution = args
            with contextlib.redirect_stdout(io.StringIO()):
                suite = benchmark.get_benchmark_dict()[suite_name]()
            task = suite.get_task(task_id)
            states = suite.get_task_init_states(task_id)
            bddl = Path(get_libero_path("bddl_files")) / task.problem_folder / task.bddl_file
            env = OffScreenRenderEnv(bddl_file_name=bddl, camera_heights=resolution, camera_widths=resolution)
            return task.language
        if method == "body_positions":
            return body_positions(env)
        if method == "set_init_state":
            return env.set_init_state(states[args[0]])
        return getattr(env, method)(*args)

    serve_calls(handle)


if __name__ == "__main__":
    raw_libero_server()
