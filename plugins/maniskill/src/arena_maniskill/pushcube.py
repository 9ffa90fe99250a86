"""A scripted PushCube-v1 controller served by arena's policy server (a remote policy end to end).

It is what drives a ManiSkill task through arena's own server in the plugin's tests and in a
user's check of the remote path: ``arena serve maniskill-push-cube`` hosts
:class:`PushCubeModel`; the remote client ``maniskill_push_cube_remote`` (started with its
server by ``arena run``: the server task) sends one request per step. numpy only: it runs in
arena's interpreter, never in ManiSkill's venv.

Controller (closed loop, stateless, ``pd_ee_delta_pos``: 3 end-effector position deltas
normalized to [-1, 1] and the gripper, -1 closed): PushCube-v1 puts the goal 0.1 m + its radius
in +x of the cube (``mani_skill/envs/tasks/tabletop/push_cube.py``). The gripper, closed, goes
to a point 5.5 cm behind the cube's centre (-x) at 2 cm above the table, over the cube at 8 cm
when it starts in front of it; once there and aligned in y it pushes towards the goal's x,
steering y to the goal's, 3 cm per step at most. The action is ``clip(20 * (target - tcp),
-1, 1)`` per axis. Measured here (mani-skill 3.0.1, CPU backend): seeds 0-9 all succeed in
9-16 of the task's 50 steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import AliasChoices, Field

from arena.policies.adapters import EmbodimentAdapter
from arena.policies.remote import RemoteChunkReplayPolicy, RemotePolicyConfig
from arena.servertask import ServerTask, arena_server_task

ACTION_DIM = 4
TASK = "PushCube-v1"
CONTROL_MODE = "pd_ee_delta_pos"
#: Distances of the controller, metres.
BEHIND_M, PUSH_HEIGHT_M, OVER_HEIGHT_M, ALIGN_M, MAX_STEP_M, GAIN = 0.055, 0.02, 0.08, 0.012, 0.03, 20.0


def push_cube_action(tcp: np.ndarray, cube: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """``float32 (4,)``: the controller's action for the gripper at ``tcp``, the cube's centre
    ``cube`` and the goal ``goal`` (each ``(3,)`` positions in metres, world frame)."""
    tcp, cube, goal = (np.asarray(v, np.float64).reshape(-1)[:3] for v in (tcp, cube, goal))
    behind = np.array([cube[0] - BEHIND_M, cube[1], PUSH_HEIGHT_M])
    in_front = tcp[0] > cube[0] - 0.04
    aligned = abs(tcp[1] - cube[1]) < ALIGN_M and tcp[0] < cube[0] - 0.03 and tcp[2] < 0.035
    if aligned:  # push towards the goal
        target = np.array([goal[0] - 0.03, goal[1], PUSH_HEIGHT_M])
        target = tcp + np.clip(target - tcp, -MAX_STEP_M, MAX_STEP_M)
    elif np.linalg.norm((tcp - behind)[:2]) > ALIGN_M:  # go behind the cube, over it when in front
        if in_front and tcp[2] < OVER_HEIGHT_M - 0.02:
            target = np.array([tcp[0], tcp[1], OVER_HEIGHT_M])
        else:
            target = np.array([behind[0], behind[1], OVER_HEIGHT_M if in_front else PUSH_HEIGHT_M])
    else:  # descend behind it
        target = behind
    delta = np.clip((target - tcp) * GAIN, -1.0, 1.0)
    return np.array([*delta, -1.0], np.float32)


class PushCubeStateAdapter(EmbodimentAdapter):
    """The PushCube controller's request from the ``maniskill`` observation (a state mode).

    Request: ``{"observation/tcp_pos": float64 (3,), "observation/cube_pos": float64 (3,),
    "observation/goal_pos": float64 (3,), "prompt": str}`` (metres; read from ``policy/tcp_pose``,
    ``policy/obj_pose`` and ``policy/goal_pos``); reply ``{"actions": float32 (1, 4)}``.
    """

    action_dim = ACTION_DIM

    def extract(self, observation: dict[str, Any], env_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        policy = observation["policy"]
        return tuple(np.asarray(policy[key][env_id], np.float64)[:3] for key in ("tcp_pose", "obj_pose", "goal_pos"))

    def pack_request(self, extracted: tuple[np.ndarray, np.ndarray, np.ndarray], instruction: str | None) -> dict[str, Any]:
        tcp, cube, goal = extracted
        return {
            "observation/tcp_pos": tcp.reshape(3),
            "observation/cube_pos": cube.reshape(3),
            "observation/goal_pos": goal.reshape(3),
            "prompt": instruction or "",
        }


class PushCubeRemoteConfig(RemotePolicyConfig):
    """Options of ``maniskill_push_cube_remote`` (the connection's; the controller has none)."""

    embodiment: str = Field("push_cube_state", description="embodiment adapter name", validation_alias=AliasChoices("embodiment"))
    open_loop_horizon: int = Field(1, ge=1, description="chunk rows replayed per request (the controller is closed-loop)")

    def validate_run(self, run: Any) -> None:
        from arena_maniskill.config import ManiSkillConfig

        env = run.environment
        if not isinstance(env, ManiSkillConfig) or env.task != TASK:
            raise ValueError(f"maniskill_push_cube_remote drives the maniskill environment's {TASK} only")
        if env.control_mode != CONTROL_MODE or env.obs_mode == "rgb":
            raise ValueError(
                f"maniskill_push_cube_remote needs control_mode: {CONTROL_MODE} and obs_mode state or rgb+state "
                f"(it reads the cube's pose); got {env.control_mode}, {env.obs_mode}"
            )


class PushCubeRemotePolicy(RemoteChunkReplayPolicy):
    """The PushCube controller behind arena's policy server (``arena serve maniskill-push-cube``)."""

    name = "maniskill_push_cube_remote"
    Config = PushCubeRemoteConfig
    adapter_family = "maniskill_push_cube"
    server_response_actions_key = "actions"


class PushCubeModel:
    """The controller as a policy-server model (stateless; any number of envs and runs).

    Raises:
        ConfigError: from the constructor, for any option (it takes none).
        ValueError: from :meth:`infer`, for a request without three finite ``(3,)`` positions.
    """

    def __init__(self, **options: Any) -> None:
        if options:
            from arena.errors import ConfigError

            raise ConfigError(f"maniskill-push-cube takes no options, got {', '.join(sorted(options))}")

    def metadata(self) -> dict[str, Any]:
        return {"model": "maniskill-push-cube", "action_dim": ACTION_DIM, "control_mode": CONTROL_MODE}

    def load(self) -> None:
        """Nothing to load: the controller is a formula."""

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        parts = []
        for key in ("observation/tcp_pos", "observation/cube_pos", "observation/goal_pos"):
            value = np.asarray(obs.get(key, ()), np.float64).reshape(-1)
            if value.shape != (3,) or not np.all(np.isfinite(value)):
                raise ValueError(f"request needs {key!r}: 3 finite floats (m)")
            parts.append(value)
        return {"actions": push_cube_action(*parts).reshape(1, ACTION_DIM)}

    def infer_batch(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [self.infer(obs) for obs in batch]


def push_cube_server_task(config: PushCubeRemoteConfig) -> ServerTask:
    """arena's own server hosting the controller: CPU only, starts in a second, shareable."""
    return arena_server_task("maniskill-push-cube")
