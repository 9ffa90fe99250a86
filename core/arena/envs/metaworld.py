"""Meta-World v3 (Sawyer arm, MuJoCo) behind arena's vectorized :class:`Environment`.

One batch runs ``num_envs`` copies of one of the 50 Meta-World v3 tasks (``reach-v3``,
``pick-place-v3``, ...). Each episode is fixed by its seed alone: the seed picks one of the
task's 50 MT1 goal variations (a ``numpy`` Generator seeded with the episode seed), sets it,
and resets the simulator, so the same seed gives the same trajectory on any env of any batch,
in-process or in a worker, whatever ran before.

Observation (Arena layout)::

    {"policy":     {"state": float64 (num_envs, 39)},     # Meta-World's goal-observable state
     "camera_obs": {CAMERA: uint8 (num_envs, S, S, 3)},    # only when cameras are on
     "task":       list[str] of num_envs task names}

Actions are ``float32 (num_envs, 4)`` in ``[-1, 1]``: end-effector xyz deltas and gripper
effort. Meta-World never terminates an episode itself and its own 500-step limit is lifted;
the rollout decides timeouts (``default_max_episode_steps = 500``, Meta-World's horizon).

Headless rendering: on Linux, importing this module sets ``MUJOCO_GL=osmesa`` and
``PYOPENGL_PLATFORM=osmesa`` when ``MUJOCO_GL`` is unset, before MuJoCo is imported (set
``MUJOCO_GL=egl`` yourself on a GPU node). It only takes effect if nothing imported MuJoCo
earlier. Software rendering costs roughly 80-500 ms per 224x224 frame on a CPU (the first
frame of a process ~1 s), so ``cameras`` is off unless a policy needs images.

Workers: ``workers=N`` runs the envs in N subprocesses (each owns a contiguous slice of env
ids), stepped in parallel. It pays when a step is expensive, i.e. with cameras on and more
than one free core; without cameras a Meta-World step takes ~1 ms and the pipe round trip
costs about as much, so in-process (``workers=0``) is as fast or faster. Workers start with
the ``spawn`` method (no fork of a process that may hold OpenGL contexts or threads), so a
script that builds the environment must do so under ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import difflib
import functools
import multiprocessing as mp
import os
import sys
import traceback
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from pydantic import Field, field_validator

from arena.envs.base import Environment, EnvironmentConfig
from arena.errors import ArenaError


def configure_headless_rendering() -> None:
    """Choose OSMesa software rendering on Linux when ``MUJOCO_GL`` is unset.

    Must run before MuJoCo is first imported; it is a no-op elsewhere or when the user chose.
    """
    if sys.platform.startswith("linux") and "MUJOCO_GL" not in os.environ:
        os.environ.setdefault("MUJOCO_GL", "osmesa")
        os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")


configure_headless_rendering()

#: Natural-language instruction of every Meta-World v3 task (the keys are the task names).
TASK_DESCRIPTIONS: dict[str, str] = {
    "assembly-v3": "Pick up the nut and place it onto the peg.",
    "basketball-v3": "Pick up the basketball and dunk it into the hoop.",
    "bin-picking-v3": "Pick up the puck from one bin and place it into the other bin.",
    "box-close-v3": "Pick up the lid and place it on the box to close it.",
    "button-press-topdown-v3": "Press the button from the top.",
    "button-press-topdown-wall-v3": "Reach past the wall and press the button from the top.",
    "button-press-v3": "Press the button from the front.",
    "button-press-wall-v3": "Reach past the wall and press the button from the front.",
    "coffee-button-v3": "Press the button on the coffee machine.",
    "coffee-pull-v3": "Pull the coffee mug out from the coffee machine to the goal.",
    "coffee-push-v3": "Push the coffee mug under the coffee machine.",
    "dial-turn-v3": "Turn the dial to the goal position.",
    "disassemble-v3": "Pick the nut up and off the peg.",
    "door-close-v3": "Close the door.",
    "door-lock-v3": "Lock the door by turning the lock.",
    "door-open-v3": "Open the door.",
    "door-unlock-v3": "Unlock the door by turning the lock.",
    "drawer-close-v3": "Push the drawer closed.",
    "drawer-open-v3": "Pull the drawer open.",
    "faucet-close-v3": "Turn the faucet handle to close the faucet.",
    "faucet-open-v3": "Turn the faucet handle to open the faucet.",
    "hammer-v3": "Pick up the hammer and hammer the nail into the wall.",
    "hand-insert-v3": "Move the gripper into the hole.",
    "handle-press-side-v3": "Press the handle down from the side.",
    "handle-press-v3": "Press the handle down.",
    "handle-pull-side-v3": "Pull the handle up from the side.",
    "handle-pull-v3": "Pull the handle up.",
    "lever-pull-v3": "Pull the lever up.",
    "peg-insert-side-v3": "Pick up the peg and insert it sideways into the hole.",
    "peg-unplug-side-v3": "Pull the peg sideways out of the hole.",
    "pick-out-of-hole-v3": "Pick the puck up out of the hole and lift it to the goal.",
    "pick-place-v3": "Pick up the puck and place it at the goal.",
    "pick-place-wall-v3": "Pick up the puck, carry it over the wall and place it at the goal.",
    "plate-slide-back-side-v3": "Slide the plate sideways out of the cabinet.",
    "plate-slide-back-v3": "Slide the plate back out of the cabinet.",
    "plate-slide-side-v3": "Slide the plate sideways into the cabinet.",
    "plate-slide-v3": "Slide the plate into the cabinet.",
    "push-back-v3": "Pull the puck back to the goal.",
    "push-v3": "Push the puck to the goal.",
    "push-wall-v3": "Push the puck around the wall to the goal.",
    "reach-v3": "Reach the red goal position with the gripper.",
    "reach-wall-v3": "Reach over the wall to the goal position with the gripper.",
    "shelf-place-v3": "Pick up the puck and place it on the shelf.",
    "soccer-v3": "Push the soccer ball into the goal.",
    "stick-pull-v3": "Grasp the stick and use it to pull the container to the goal.",
    "stick-push-v3": "Grasp the stick and use it to push the container to the goal.",
    "sweep-into-v3": "Sweep the puck into the hole.",
    "sweep-v3": "Sweep the puck off the edge of the table.",
    "window-close-v3": "Slide the window closed.",
    "window-open-v3": "Slide the window open.",
}

#: The 50 Meta-World v3 task names, sorted.
TASKS: tuple[str, ...] = tuple(sorted(TASK_DESCRIPTIONS))

#: Cameras defined in Meta-World's scene.
CAMERAS = ("corner", "corner2", "corner3", "corner4", "topview", "behindGripper", "gripperPOV")
CameraName = Literal[
    "corner", "corner2", "corner3", "corner4", "topview", "behindGripper", "gripperPOV"
]
#: Cameras that Meta-World renders upside down (rotated 180 degrees).
_UPSIDE_DOWN_CAMERAS = frozenset({"corner", "corner2", "corner3", "corner4"})

#: Seed of the MT1 benchmark whose 50 goal variations episodes choose from. Fixed, so a
#: seed means the same episode in every process and every run.
GOAL_SET_SEED = 0

STATE_DIM = 39
ACTION_DIM = 4
# Meta-World raises ValueError when stepped past ``max_path_length``; arena owns timeouts.
_NO_PATH_LIMIT = 2**62


def check_task_name(task: str) -> str:
    """Return ``task`` if it is a Meta-World v3 task; otherwise raise ``ValueError``.

    The message lists the closest task names (or all of them when none is close).
    """
    if task in TASK_DESCRIPTIONS:
        return task
    close = difflib.get_close_matches(task, TASKS, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else f"known tasks: {', '.join(TASKS)}"
    raise ValueError(f"unknown Meta-World task {task!r}; {hint}")


class MetaWorldConfig(EnvironmentConfig):
    """Options of a Meta-World run (experiment key ``environment``, ``type: metaworld``)."""

    task: str = Field(description="Meta-World v3 task name, e.g. 'reach-v3', 'pick-place-v3'")
    camera: CameraName = Field(
        "corner", description="Meta-World camera rendered for camera_obs and videos"
    )
    image_size: int = Field(224, ge=16, le=2048, description="frame side in pixels (square)")
    cameras: bool = Field(False, description="produce camera_obs every step (slow on a CPU)")
    upright: bool = Field(
        True,
        description="rotate frames of the corner cameras by 180 degrees so the table is at "
        "the bottom (Meta-World renders them upside down); false keeps its raw frames",
    )
    workers: int = Field(
        0,
        ge=0,
        description="0 runs the envs in this process; N>0 runs them in N subprocesses "
        "(pays with cameras on a multi-core machine)",
    )

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        return check_task_name(value)


class MetaWorldWorkerError(ArenaError):
    """A Meta-World worker process failed or died; the message carries its traceback."""


# --------------------------------------------------------------------------------------------
# The envs of one process.


@functools.lru_cache(maxsize=None)
def _goal_variations(task: str) -> tuple:
    """The 50 MT1 goal variations of ``task`` (Meta-World ``Task`` tuples; ~0.8 s to build)."""
    import metaworld

    return tuple(metaworld.MT1(task, seed=GOAL_SET_SEED).train_tasks)


class _LocalBatch:
    """``n`` Meta-World envs of one task in this process, indexed ``0..n-1``."""

    def __init__(
        self, task: str, n: int, camera: str, image_size: int, cameras: bool, upright: bool
    ) -> None:
        import metaworld  # heavy (MuJoCo); imported only when envs are built

        self.task = task
        self.cameras = cameras
        self._rotate = upright and camera in _UPSIDE_DOWN_CAMERAS
        self._goals = _goal_variations(task)
        env_cls = metaworld.env_dict.ALL_V3_ENVIRONMENTS[task]
        self.envs = []
        for _ in range(n):
            env = env_cls(
                render_mode="rgb_array", camera_name=camera, width=image_size, height=image_size
            )
            env.max_path_length = _NO_PATH_LIMIT
            self.envs.append(env)
        self.state = np.zeros((n, STATE_DIM), np.float64)
        self.frames = np.zeros((n, image_size, image_size, 3), np.uint8) if cameras else None
        # Every env holds a valid episode from the start, so stepping before reset works.
        self.reset(list(range(n)), [0] * n)

    def reset(self, ids: list[int], seeds: list[int]) -> None:
        for i, seed in zip(ids, seeds):
            env = self.envs[i]
            goal = int(np.random.default_rng(seed).integers(len(self._goals)))
            env.set_task(self._goals[goal])
            env.seed(seed)
            obs, _ = env.reset(seed=seed)
            self.state[i] = obs
            if self.cameras:
                self.frames[i] = self.render(i)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        reward = np.zeros(len(self.envs), np.float64)
        success = np.zeros(len(self.envs), bool)
        for i, env in enumerate(self.envs):
            obs, r, _, _, info = env.step(actions[i])
            self.state[i] = obs
            reward[i] = r
            success[i] = bool(info.get("success", 0.0))
            if self.cameras:
                self.frames[i] = self.render(i)
        return reward, success

    def render(self, i: int) -> np.ndarray:
        frame = np.asarray(self.envs[i].render(), dtype=np.uint8)
        if self._rotate:
            frame = frame[::-1, ::-1]
        return np.ascontiguousarray(frame)

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []


def _worker_main(conn: Any, batch_args: tuple) -> None:
    """Subprocess loop: build a ``_LocalBatch`` and answer commands until ``close``."""
    try:
        batch = _LocalBatch(*batch_args)
        conn.send(("ok", None))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        conn.close()
        return
    while True:
        try:
            command, payload = conn.recv()
        except (EOFError, OSError):  # parent gone
            break
        try:
            if command == "reset":
                batch.reset(*payload)
                reply = (batch.state, batch.frames)
            elif command == "step":
                reward, success = batch.step(payload)
                reply = (batch.state, batch.frames, reward, success)
            elif command == "render":
                reply = batch.render(payload)
            elif command == "close":
                batch.close()
                conn.send(("ok", None))
                break
            else:
                raise ValueError(f"unknown command {command!r}")
            conn.send(("ok", reply))
        except BaseException:
            conn.send(("error", traceback.format_exc()))
    conn.close()


class _Worker:
    """Parent-side handle of one worker process owning env ids ``ids``."""

    def __init__(self, ctx: Any, ids: list[int], batch_args: tuple) -> None:
        self.ids = ids
        self.conn, child_conn = ctx.Pipe()
        self.process = ctx.Process(
            target=_worker_main, args=(child_conn, batch_args), daemon=True,
            name=f"arena-metaworld-{ids[0]}-{ids[-1]}",
        )
        self.process.start()
        child_conn.close()

    def send(self, command: str, payload: Any = None) -> None:
        try:
            self.conn.send((command, payload))
        except (BrokenPipeError, OSError) as err:
            raise self._died(err) from err

    def receive(self) -> Any:
        try:
            status, value = self.conn.recv()
        except (EOFError, OSError) as err:
            raise self._died(err) from err
        if status == "error":
            raise MetaWorldWorkerError(
                f"Meta-World worker for envs {self.ids[0]}..{self.ids[-1]} failed:\n{value}"
            )
        return value

    def _died(self, err: Exception) -> MetaWorldWorkerError:
        self.process.join(1.0)
        return MetaWorldWorkerError(
            f"Meta-World worker for envs {self.ids[0]}..{self.ids[-1]} died "
            f"(exit code {self.process.exitcode}) {err!r}. Workers start with the 'spawn' "
            "method: a script that builds the environment at import time must do it under "
            "`if __name__ == '__main__':`"
        )

    def stop(self, timeout_s: float = 5.0) -> None:
        if self.process.is_alive():
            try:
                self.conn.send(("close", None))
                if self.conn.poll(timeout_s):
                    self.conn.recv()
            except (EOFError, OSError):
                pass
            self.process.join(timeout_s)
            if self.process.is_alive():
                self.process.terminate()
                self.process.join(timeout_s)
        self.conn.close()


# --------------------------------------------------------------------------------------------


class MetaWorldEnvironment(Environment):
    """``num_envs`` Meta-World v3 envs of one task (see the module docstring for the layout).

    Raises:
        ValueError: ``num_envs < 1``, or actions of the wrong shape in :meth:`step`.
        MetaWorldWorkerError: a worker process failed (``workers > 0``).
    """

    name = "metaworld"
    Config = MetaWorldConfig
    success_key = "success"  # Meta-World's own info["success"]
    default_max_episode_steps = 500

    def __init__(self, config: MetaWorldConfig, *, num_envs: int, cameras: bool = False) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        cameras = bool(cameras or config.cameras)
        super().__init__(config, num_envs=num_envs, cameras=cameras)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (ACTION_DIM,), np.float32)
        self.task_description = TASK_DESCRIPTIONS[config.task]
        self._closed = False
        self._local: _LocalBatch | None = None
        self._workers: list[_Worker] = []
        size = config.image_size
        self._state = np.zeros((num_envs, STATE_DIM), np.float64)
        self._frames = np.zeros((num_envs, size, size, 3), np.uint8) if cameras else None
        batch_args = (config.task, config.camera, size, cameras, config.upright)
        if config.workers == 0:
            self._local = _LocalBatch(config.task, num_envs, *batch_args[1:])
            self._state[:] = self._local.state
            if cameras:
                self._frames[:] = self._local.frames
            return
        ctx = mp.get_context("spawn")
        slices = np.array_split(np.arange(num_envs), min(config.workers, num_envs))
        try:
            for ids in slices:
                ids = ids.tolist()
                self._workers.append(
                    _Worker(ctx, ids, (config.task, len(ids), *batch_args[1:]))
                )
            for worker in self._workers:
                worker.receive()  # built; workers build their envs in parallel
        except BaseException:
            self.close()
            raise

    # -- Environment API ---------------------------------------------------------------------

    def reset_envs(self, env_ids: list[int], seeds: list[int]) -> dict[str, Any]:
        """Start episodes with seeds ``seeds`` (ints >= 0) on ``env_ids``; return the batch obs."""
        env_ids, seeds = self.check_reset(env_ids, seeds)
        if self._local is not None:
            self._local.reset(env_ids, seeds)
            self._copy_local()
        else:
            busy = []
            for worker in self._workers:
                start = worker.ids[0]
                mine = [(e - start, s) for e, s in zip(env_ids, seeds) if e in worker.ids]
                if mine:
                    worker.send("reset", ([m[0] for m in mine], [m[1] for m in mine]))
                    busy.append(worker)
            for worker in busy:
                state, frames = worker.receive()
                self._store(worker, state, frames)
        return self._observation()

    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Apply ``float32 (num_envs, 4)`` actions (Meta-World clips them to ``[-1, 1]``)."""
        actions = np.asarray(actions, dtype=np.float32)
        if actions.shape != (self.num_envs, ACTION_DIM):
            raise ValueError(
                f"actions must have shape ({self.num_envs}, {ACTION_DIM}), got {actions.shape}"
            )
        if self._local is not None:
            reward, success = self._local.step(actions)
            reward, success = reward.copy(), success.copy()
            self._copy_local()
        else:
            reward = np.zeros(self.num_envs, np.float64)
            success = np.zeros(self.num_envs, bool)
            for worker in self._workers:
                worker.send("step", actions[worker.ids[0] : worker.ids[-1] + 1])
            for worker in self._workers:
                state, frames, r, s = worker.receive()
                self._store(worker, state, frames)
                reward[worker.ids[0] : worker.ids[-1] + 1] = r
                success[worker.ids[0] : worker.ids[-1] + 1] = s
        none = np.zeros(self.num_envs, bool)
        return self._observation(), reward, none, none.copy(), {"success": success}

    def render(self, env_id: int) -> np.ndarray:
        """``uint8 (S, S, 3)`` frame of ``env_id`` (the current camera_obs when cameras are on)."""
        if self._frames is not None:
            return self._frames[env_id].copy()
        if self._local is not None:
            return self._local.render(env_id)
        for worker in self._workers:
            if env_id in worker.ids:
                worker.send("render", env_id - worker.ids[0])
                return worker.receive()
        raise ValueError(f"env id {env_id} out of range 0..{self.num_envs - 1}")

    def close(self) -> None:
        """Close the simulators and stop the workers. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._local is not None:
            self._local.close()
            self._local = None
        for worker in self._workers:
            worker.stop()
        self._workers = []

    def __del__(self) -> None:  # best effort; close() is the contract
        try:
            self.close()
        except Exception:
            pass

    # -- helpers -----------------------------------------------------------------------------

    def _copy_local(self) -> None:
        self._state[:] = self._local.state
        if self._frames is not None:
            self._frames[:] = self._local.frames

    def _store(self, worker: _Worker, state: np.ndarray, frames: np.ndarray | None) -> None:
        rows = slice(worker.ids[0], worker.ids[-1] + 1)
        self._state[rows] = state
        if self._frames is not None:
            self._frames[rows] = frames

    def _observation(self) -> dict[str, Any]:
        obs: dict[str, Any] = {"policy": {"state": self._state.copy()}}
        if self._frames is not None:
            obs["camera_obs"] = {self.config.camera: self._frames.copy()}
        obs["task"] = [self.config.task] * self.num_envs
        return obs
