"""PushT (gym-pusht 0.1.8: a disc pushes a T-shaped block onto a fixed T-shaped target, pymunk
physics, pygame drawing) as an arena env: LeRobot's and Diffusion Policy's standard benchmark.

Each env is gym-pusht's own ``gym_pusht/PushT-v0`` (``gymnasium.make(..., obs_type=...,
render_mode="rgb_array")``, unwrapped: arena owns the step limit), reset and stepped with
gym-pusht's own calls, so an episode here is that episode of gym-pusht, value for value
(``tests/test_pusht_sim.py`` steps both side by side). Headless: importing this module sets
``SDL_VIDEODRIVER=dummy`` unless it is set (pygame draws into memory, no display).

Observation (Arena layout; ``N = num_envs``; which keys depend on ``config.obs_type``, named as
gym-pusht names them, so the LeRobot ``pusht`` adapter maps them as lerobot-eval does:
``pixels`` -> ``observation.image``, ``agent_pos`` -> ``observation.state``,
``environment_state`` -> ``observation.environment_state``)::

    {"camera_obs": {"pixels": uint8 (N, H, W, 3)},         # obs_type pixels, pixels_agent_pos
     "policy":     {"agent_pos": float64 (N, 2),            # pixels_agent_pos, environment_state_agent_pos
                    "environment_state": float64 (N, 16),   # environment_state_agent_pos: the T's 8
                                                            #   keypoints, x0, y0, x1, y1, ...
                    "state": float64 (N, 5)},               # state: agent x, y, block x, y, angle
     "privileged": {"agent_pos":  float64 (N, 2),           # always: ground truth for scripted
                    "block_pose": float64 (N, 3),           #   experts (x, y, angle), whatever
                    "goal_pose":  float64 (N, 3)},          #   the obs type; policies ignore it
     "task":       list[str] of N instructions}

``policy`` is empty for ``pixels``. Positions are in gym-pusht's 512 x 512 workspace units
(walls at 5 and 506), angles in radians in ``[0, 2 pi)`` (gym-pusht's ``state`` convention);
the goal is gym-pusht's fixed ``(256, 256, pi / 4)``. ``H x W`` is ``observation_height x
observation_width`` (gym-pusht's 96 x 96; LeRobot's ``PushtEnv`` config renders 384 x 384).

Actions: ``(N, 2)`` absolute target positions of the disc in ``[0, 512]`` (:attr:`ACTION_SPACE`,
float64), tracked by gym-pusht's PD controller for 10 physics steps of 10 ms (10 Hz control).
They reach gym-pusht as float64 and unclipped, as gym-pusht receives them (its PD law computes in
float64 whatever the action's dtype, so a float32 action gives the same episode as its float64
value). A zero action is the target ``(0, 0)``, the workspace's corner: the zero-action baseline
drives the disc into that corner, it does not hold it still.

Episodes: episode seed ``s`` is gym-pusht's ``reset(seed=s)`` (disc at integers in [50, 450),
block at integers in [100, 400), angle uniform in [-pi, pi), from the env's own
``np_random``): the same seed is the same episode in any process and on any env.

Success, reward, coverage as gym-pusht defines them: ``coverage`` is the area of the block inside
the target over the target's area; ``info["is_success"]`` (the :attr:`~PushTEnvironment.success_key`)
is coverage > 0.95, which also terminates the episode; the reward is ``clip(coverage / 0.95, 0,
1)``. ``info`` carries ``coverage`` and ``max_reward`` (the step's reward again, under the name
of its episode maximum) per env for the episode metrics ``coverage`` and ``max_reward`` (their
maximum over the episode: lerobot-eval's per-episode ``max_reward``; their mean is what it
reports as ``avg_max_reward`` and Diffusion Policy as ``mean_score``). The run's figures are
also given under lerobot-eval's names (:attr:`~PushTEnvironment.reported_as`).
"""

from __future__ import annotations

import os
import sys
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from arena.envs.serial import SerialEnvironment
from arena.outputs.fingerprint import EQUIVALENCE_KEY, package_versions
from arena_lerobot.pusht.config import GYM_ID, PushTConfig
from arena_lerobot.names import LEROBOT_EVAL_NAMES
from arena_lerobot.pusht.episodes import pusht_episodes
from arena_lerobot.pusht.venv import VENV

# pygame draws into memory surfaces only; without a display it needs the dummy video driver.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

ACTION_DIM = 2
#: One env's action: the disc's target position, gym-pusht's bounds (it declares float32; the
#: values reach it as float64, see the module docstring).
ACTION_SPACE = gym.spaces.Box(0.0, 512.0, (ACTION_DIM,), np.float64)
#: Distributions whose versions can change a PushT result (the protocol fingerprint's).
SIMULATOR_PACKAGES = ("gym-pusht", "pymunk", "shapely", "pygame", "opencv-python", "gymnasium", "numpy")
#: gym-pusht's step limit (``max_episode_steps=300`` of its registration; lerobot-eval's
#: ``PushtEnv.episode_length``).
STEP_LIMIT = 300
_TWO_PI = 2.0 * np.pi


class PushTEnvironment(SerialEnvironment):
    """``num_envs`` gym-pusht PushT envs in this process (see the module docstring).

    Raises:
        ValueError: ``num_envs < 1``, bad env ids or seeds, actions of the wrong shape or not
            finite.
        ImportError: gym-pusht is not installed in this interpreter (``arena venv setup pusht``
            creates the venv whose interpreter runs the workers; or set ``environment.python``).
    """

    name: ClassVar[str] = "pusht"
    Config = PushTConfig
    #: gym-pusht's own success key: coverage > 0.95.
    success_key: ClassVar[str | None] = "is_success"
    #: Partial credit per episode: the best coverage reached, and the best reward
    #: (``clip(coverage / 0.95, 0, 1)``: lerobot-eval's ``max_reward``; not a mean reward).
    episode_metrics: ClassVar[dict[str, str]] = {"coverage": "max", "max_reward": "max"}
    #: Both stay in [0, 1] (gym-pusht: coverage is an area ratio, the reward its clipped
    #: rescaling), so their intervals stay inside it (arena.outputs.metrics); the episode return
    #: (a sum of rewards in [0, 1]) is non-negative.
    episode_metric_bounds: ClassVar[dict[str, tuple[float | None, float | None]]] = {
        "coverage": (0.0, 1.0), "max_reward": (0.0, 1.0), "return": (0.0, None)}
    #: The run's figures under lerobot-eval's names too (its ``eval_info.json`` "aggregated").
    reported_as: ClassVar[dict[str, str]] = LEROBOT_EVAL_NAMES
    reported_by: ClassVar[str | None] = "lerobot-eval"
    #: The venv ``arena venv setup pusht`` creates; its interpreter runs the workers.
    default_venv = VENV
    simulator_modules = ("gym_pusht", "pymunk", "pygame")
    default_max_episode_steps = STEP_LIMIT
    #: Live mode (arena.live): actions are absolute disc targets, so a held target repeats.
    hold_rules: ClassVar[tuple[str, ...]] = ("continue_chunk", "repeat_last")
    #: gym-pusht's control_hz (its metadata's render_fps): 10 control steps per second.
    control_hz: ClassVar[float | None] = 10.0

    @classmethod
    def stay_action_for(cls, config: PushTConfig, observation: dict[str, Any], env_id: int) -> np.ndarray:
        """The disc's current position as its target (``privileged.agent_pos``, pixels): what a
        live episode holds before its first chunk arrives, where zeros would pull the disc to the
        corner."""
        return np.asarray(observation["privileged"]["agent_pos"][env_id], np.float64)

    def __init__(self, config: PushTConfig, *, num_envs: int, cameras: bool = False) -> None:
        # The obs type decides the image: `cameras` (asked by policies that want images) does not
        # add one to a state obs type; choose a pixels obs type for that.
        super().__init__(config, num_envs=num_envs, cameras=config.has_pixels)
        try:
            import gym_pusht  # noqa: F401  (registers gym_pusht/PushT-v0)
        except ModuleNotFoundError as exc:
            raise ImportError(
                f"the pusht environment needs gym-pusht, which is not installed in {sys.executable} "
                f"(missing module '{exc.name}'): run `arena venv setup pusht` once, so that its envs run in "
                "workers under that venv, or point environment.python at an interpreter that has gym-pusht==0.1.8"
            ) from exc

        self.task_description = config.instruction
        self.action_space = ACTION_SPACE
        self._envs = [
            gym.make(
                GYM_ID,
                obs_type=config.obs_type,
                render_mode="rgb_array",
                observation_width=config.observation_width,
                observation_height=config.observation_height,
                visualization_width=config.visualization_width,
                visualization_height=config.visualization_height,
                disable_env_checker=True,
            ).unwrapped
            for _ in range(num_envs)
        ]
        self._obs: list[Any] = [None] * num_envs
        self._initial_state = np.zeros((num_envs, 5), np.float64)
        self._start_episodes()

    # -- Environment API ---------------------------------------------------------------------

    def _reset_one(self, e: int, seed: int) -> None:
        """Start env ``e``'s episode of seed ``seed``: gym-pusht's ``reset(seed=seed)``."""
        self._obs[e], _ = self._envs[e].reset(seed=seed)
        self._initial_state[e] = self._state(e)

    def reset_to_state(self, env_id: int, state: Any) -> dict[str, Any]:
        """Start env ``env_id``'s episode from ``state`` = agent x, y, block x, y, angle (rad),
        through gym-pusht's ``reset(options={"reset_to_state": state})`` (which sets the
        position before the angle, so the block's origin ends where gym-pusht's legacy order
        puts it, not exactly at ``state[2:4]``); return the batched observation.

        Raises:
            ValueError: ``env_id`` out of range or ``state`` not 5 finite numbers.
        """
        env_id = self.check_env_id(env_id)
        state = np.asarray(state, np.float64)
        if state.shape != (5,) or not np.all(np.isfinite(state)):
            raise ValueError(f"state must be 5 finite numbers (agent x, y, block x, y, angle), got {state.tolist()}")
        self._obs[env_id], _ = self._envs[env_id].reset(options={"reset_to_state": state})
        self._initial_state[env_id] = self._state(env_id)
        return self._observation()

    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Apply ``(N, 2)`` disc targets (workspace units), as float64, unclipped.

        Returns the observation, gym-pusht's reward ``(N,)`` float64 (``clip(coverage / 0.95,
        0, 1)``), ``terminated (N,)`` bool (success, as gym-pusht), ``truncated`` (all false:
        arena owns the step limit) and ``info`` with ``is_success`` and ``success`` ``(N,)``
        bool, ``coverage``, ``reward`` and ``max_reward`` (the same reward, for the episode
        metric) ``(N,)`` float64.

        Raises:
            ValueError: ``actions`` is not ``(N, 2)`` or holds NaN or infinite values.
        """
        actions = self.check_actions(actions, ACTION_DIM, np.float64)
        reward = np.zeros(self.num_envs, np.float64)
        coverage = np.zeros(self.num_envs, np.float64)
        success = np.zeros(self.num_envs, bool)
        for e, env in enumerate(self._envs):
            self._obs[e], r, _, _, info = env.step(actions[e].copy())
            reward[e] = float(r)
            coverage[e] = float(info["coverage"])
            success[e] = bool(info["is_success"])  # gym-pusht: terminated is the same value
        info = {"is_success": success.copy(), "success": success.copy(), "coverage": coverage, "reward": reward.copy(),
                "max_reward": reward.copy()}
        return self._observation(), reward, success.copy(), np.zeros(self.num_envs, bool), info

    def episode_info(self, env_id: int) -> dict[str, Any]:
        """``initial_state``: the episode's state after its reset (agent x, y, block x, y,
        angle in rad; what the seed drew); and the protocol fingerprint."""
        return {
            "initial_state": [round(float(v), 6) for v in self._initial_state[env_id]],
            **super().episode_info(env_id),
        }

    def protocol(self) -> dict[str, Any]:
        """The protocol fingerprint of this run's episodes (:mod:`arena.outputs.fingerprint`):
        gym-pusht's and the simulators' versions, the init-state source (gym-pusht's per-seed
        sampling), the obs type, image size, step limit (no settle steps)."""
        versions = package_versions(SIMULATOR_PACKAGES)
        c = self.config
        image_size = [c.observation_height, c.observation_width] if c.has_pixels else None
        return {
            "benchmark": "pusht",
            "suite": "PushT-v0",
            "suite_version": versions["gym-pusht"],
            "simulators": versions,
            "init_states": {"source": "gym-pusht reset(seed): np_random integers/uniform"},
            "seeding": "gym-pusht reset(seed)",
            "obs_type": c.obs_type,
            "image_size": image_size,
            "settle_steps": 0,
            "step_limit": self.default_max_episode_steps,
            # the same episodes as the lerobot_env bridge's PushT with these settings
            EQUIVALENCE_KEY: pusht_episodes(versions["gym-pusht"], c.obs_type, image_size, self.default_max_episode_steps),
        }

    def render(self, env_id: int) -> np.ndarray:
        """``uint8 (visualization_height, visualization_width, 3)``: gym-pusht's ``render()`` of
        env ``env_id`` (the scene with the last action's target marked), for videos."""
        env_id = self.check_env_id(env_id)
        return np.ascontiguousarray(self._envs[env_id].render(), np.uint8)

    def _release(self) -> None:
        self._close_each(self._envs, lambda env: env.close())
        self._envs = []

    # -- helpers -----------------------------------------------------------------------------

    def _state(self, e: int) -> np.ndarray:
        """``float64 (5,)``: agent x, y, block x, y, angle in ``[0, 2 pi)``, as gym-pusht's ``state``."""
        env = self._envs[e]
        return np.array([*env.agent.position, *env.block.position, env.block.angle % _TWO_PI], np.float64)

    def _observe_one(self, e: int) -> dict[str, Any]:
        env, raw, obs_type = self._envs[e], self._obs[e], self.config.obs_type
        state = self._state(e)
        policy: dict[str, np.ndarray] = {}
        obs: dict[str, Any] = {}
        if obs_type == "pixels":
            obs["camera_obs"] = {"pixels": raw}
        elif obs_type == "pixels_agent_pos":
            obs["camera_obs"] = {"pixels": raw["pixels"]}
            policy["agent_pos"] = np.asarray(raw["agent_pos"], np.float64)
        elif obs_type == "environment_state_agent_pos":
            policy["agent_pos"] = np.asarray(raw["agent_pos"], np.float64)
            policy["environment_state"] = np.asarray(raw["environment_state"], np.float64)
        else:
            policy["state"] = np.asarray(raw, np.float64)
        obs["policy"] = policy
        obs["privileged"] = {
            "agent_pos": state[:2],
            "block_pose": state[2:],
            "goal_pose": np.asarray(env.goal_pose, np.float64),
        }
        obs["task"] = self.task_description
        return obs
