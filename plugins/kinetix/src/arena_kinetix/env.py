"""Environment ``kinetix``: one Kinetix level (kinetix-env 3.0.2, CPU JAX) per run.

Built as Real-Time Chunking evaluates it (Black et al. 2025, ``src/eval_flow.py``): continuous
actions, symbolic observations, ``frame_skip`` 2, Gaussian action noise of std 0.1 on every
action, 256 control steps per episode, success = the level solved.

- **Actions** ``float (N, 6)`` in ``[-1, 1]``: four motors then two thrusters (Kinetix clips
  motors to ``[-1, 1]`` and thrusters to ``[0, 1]``); the noise is added before Kinetix sees them.
- **Observations**: ``obs_type: symbolic`` -> ``policy: {"state": float32 (N, 679)}`` (Kinetix's
  ``SYMBOLIC_FLAT``); ``pixels`` -> ``camera_obs: {"pixels": uint8 (N, 125, 125, 3)}``, upright
  (Kinetix renders x-major with y up: ``image.transpose(1, 0, 2)[::-1]``), and ``policy:
  {"gravity": float32 (N, 1)}``. Both add ``policy.distance`` ``float32 (N, 1)``: Kinetix's
  green-to-blue distance after the last step (its dense-reward signal; -1 before the first),
  privileged like PushT's ``privileged`` state, for scripted baselines.
- **Episodes**: ``reset(seed)`` starts the level's stored state; the seed drives everything
  random: ``jax.random.PRNGKey(seed)`` split into the reset key and one key per step, and the
  action noise drawn from ``numpy.random.default_rng([seed, 0x6b6e])``. The dynamics are
  deterministic, so an episode depends only on its seed and its actions.
- **Ends**: Kinetix's ``done`` (a goal or a forbidden contact) is ``terminated``; its
  ``max_timesteps`` (256) is ``truncated``; ``info["success"]`` is Kinetix's ``GoalR`` (the
  green shape touched the blue one) on a terminated step. ``info["distance"]`` (Kinetix's
  green-to-blue distance) is an episode metric (its minimum).
- **Compilation**: Kinetix's ``step`` is jitted per environment object, and the jit cache is
  keyed by the static parameters: one ``KinetixEnv`` per (static parameters, observation type)
  is kept per process (:func:`compiled_env`) and reused across levels and episodes (the first
  step compiles for 25-90 s on a CPU; later levels with the same static parameters 0.02 s).
  The reset state's ``last_distance`` is made a strong float32 (Kinetix returns it weakly
  typed), else the second step would compile a second time.

Live mode: all three hold rules are valid (motor and thruster commands are efforts: zeros
hold still); the control rate is taken as 10 Hz, vla-eval's for Kinetix (Kinetix itself has
no wall-clock rate).
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from arena.envs.serial import SerialEnvironment
from arena_kinetix.config import KinetixConfig
from arena_kinetix.venv import VENV

ACTION_DIM = 6
NOISE_STREAM = 0x6B6E  # the action noise's numpy stream per episode: default_rng([seed, NOISE_STREAM])

_COMPILED: dict[Any, Any] = {}


def load_level(path: str) -> tuple[Any, Any, Any]:
    """``(level state, static params, env params)`` of a level file (``l/NAME`` or a path)."""
    from kinetix.util.saving import load_from_json_file

    return load_from_json_file(path)


def compiled_env(static_params: Any, env_params: Any, obs_type: str) -> Any:
    """The one ``KinetixEnv`` of this process for ``static_params`` and ``obs_type`` (continuous
    actions, no auto-reset), made once (module docstring)."""
    from kinetix.environment.env import make_kinetix_env
    from kinetix.environment.spaces import ActionType, ObservationType

    key = (hash(static_params), obs_type)
    if key not in _COMPILED:
        kind = ObservationType.PIXELS if obs_type == "pixels" else ObservationType.SYMBOLIC_FLAT
        _COMPILED[key] = make_kinetix_env(ActionType.CONTINUOUS, kind, None, env_params, static_params, auto_reset=False)
    return _COMPILED[key]


def strong_state(state: Any) -> Any:
    """``state`` with ``last_distance`` a strong float32 (as ``step`` returns it): one compile."""
    import jax.numpy as jnp

    return state.replace(last_distance=jnp.asarray(state.last_distance, dtype=jnp.float32))


def upright(image: Any) -> np.ndarray:
    """Kinetix's ``float32 (W, H, 3)`` pixels in ``[0, 1]`` (x-major, y up) as ``uint8 (H, W, 3)``."""
    array = np.asarray(image, np.float32).transpose(1, 0, 2)[::-1]
    return np.clip(np.rint(array * 255.0), 0, 255).astype(np.uint8)


class KinetixEnvironment(SerialEnvironment):
    """``num_envs`` episodes of one Kinetix level in this process (see the module docstring).

    Raises:
        ValueError: ``num_envs < 1``, bad env ids or seeds, actions of the wrong shape or not finite.
        ImportError: kinetix-env is not installed in this interpreter (``arena venv setup kinetix``).
    """

    name: ClassVar[str] = "kinetix"
    Config = KinetixConfig
    success_key: ClassVar[str | None] = "success"
    episode_metrics: ClassVar[dict[str, str]] = {"distance": "min"}
    default_venv = VENV
    simulator_modules = ("kinetix", "jax")
    default_max_episode_steps = 256
    #: Live mode (arena.live): motors and thrusters are efforts, so every hold rule is valid.
    hold_rules: ClassVar[tuple[str, ...]] = ("continue_chunk", "repeat_last", "null_action")
    #: Kinetix has no wall-clock rate; vla-eval's live runner steps it at 10 Hz.
    control_hz: ClassVar[float | None] = 10.0

    @classmethod
    def null_action_for(cls, config: KinetixConfig) -> np.ndarray:
        return np.zeros(ACTION_DIM)

    def __init__(self, config: KinetixConfig, *, num_envs: int, cameras: bool = False) -> None:
        try:
            import jax  # noqa: F401
            import kinetix  # noqa: F401
        except ModuleNotFoundError as exc:
            raise ImportError(
                f"kinetix-env is not installed in this interpreter ({exc.name} missing): run `arena venv setup kinetix`"
            ) from exc
        super().__init__(config, num_envs=num_envs, cameras=cameras or config.obs_type == "pixels")
        import jax

        self._jax = jax
        self.level_path = config.level_path()
        level, static, params = load_level(self.level_path)
        self._static = static.replace(frame_skip=config.frame_skip)
        self._params = params
        self._level = level
        self._env = compiled_env(self._static, params, config.obs_type)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (ACTION_DIM,), np.float32)
        self.task_description = str(config.task)
        self._states: list[Any] = [None] * num_envs
        self._keys: list[Any] = [None] * num_envs
        self._noise: list[np.random.Generator | None] = [None] * num_envs
        self._obs: list[Any] = [None] * num_envs
        self._renderer: Any = None
        self._start_episodes()

    # -- SerialEnvironment -------------------------------------------------------------------
    def _reset_one(self, env_id: int, seed: int) -> None:
        jax = self._jax
        key, reset_key = jax.random.split(jax.random.PRNGKey(seed))
        obs, state = self._env.reset(reset_key, self._params, override_reset_state=self._level)
        self._states[env_id] = strong_state(state)
        self._obs[env_id] = obs
        self._keys[env_id] = key
        self._noise[env_id] = np.random.default_rng([int(seed) % 2**63, NOISE_STREAM])

    def _observe_one(self, env_id: int) -> dict[str, Any]:
        obs = self._obs[env_id]
        if self.config.obs_type == "pixels":
            return {
                "camera_obs": {"pixels": upright(obs.image)},
                "policy": {"gravity": np.asarray(obs.global_info, np.float32), "distance": self._distance(env_id)},
            }
        return {"policy": {"state": np.asarray(obs, np.float32), "distance": self._distance(env_id)}}

    def _distance(self, env_id: int) -> np.ndarray:
        """``float32 (1,)``: Kinetix's green-to-blue distance after the last step (-1 before one)."""
        return np.asarray([float(self._states[env_id].last_distance)], np.float32)

    def step(self, actions: np.ndarray):
        actions = self.check_actions(actions, ACTION_DIM, np.float32)
        jax = self._jax
        n = self.num_envs
        reward = np.zeros(n)
        terminated = np.zeros(n, bool)
        truncated = np.zeros(n, bool)
        success = np.zeros(n, bool)
        distance = np.zeros(n)
        for e in range(n):
            action = actions[e] + np.float32(self.config.action_noise) * self._noise[e].standard_normal(ACTION_DIM).astype(np.float32)
            self._keys[e], step_key = jax.random.split(self._keys[e])
            obs, state, r, done, info = self._env.step(step_key, self._states[e], np.clip(action, -1.0, 1.0), self._params)
            self._states[e], self._obs[e] = state, obs
            reward[e] = float(r)
            timeout = int(state.timestep) >= int(self._params.max_timesteps)
            goal = bool(info["GoalR"])
            if bool(done):
                terminated[e] = goal or not timeout
                truncated[e] = not terminated[e]
            success[e] = bool(done) and goal
            distance[e] = float(info["distance"])
        return self._observation(), reward, terminated, truncated, {"success": success, "distance": distance}

    def protocol(self) -> dict[str, Any]:
        """The protocol fingerprint (:mod:`arena.outputs.fingerprint`): kinetix-env's and JAX's
        versions, the level file, observation type, action noise, frame skip and step limit; the
        default :meth:`episode_info` puts it in every record."""
        from importlib import metadata

        return {
            "benchmark": "kinetix", "kinetix_env": metadata.version("kinetix-env"), "jax": metadata.version("jax"),
            "level": self.level_path, "obs_type": self.config.obs_type, "action_noise": self.config.action_noise,
            "frame_skip": self.config.frame_skip, "max_timesteps": int(self._params.max_timesteps),
        }

    def render(self, env_id: int) -> np.ndarray:
        if self.config.obs_type == "pixels":
            return upright(self._obs[env_id].image)
        if self._renderer is None:
            from kinetix.render.renderer_pixels import make_render_pixels

            self._renderer = self._jax.jit(make_render_pixels(self._params, self._static))
        return upright(np.asarray(self._renderer(self._states[env_id])) / 255.0)

    def _release(self) -> None:
        self._states = [None] * self.num_envs
