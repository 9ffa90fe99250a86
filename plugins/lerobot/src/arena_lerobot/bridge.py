"""``lerobot_env``: any LeRobot environment config as an arena environment.

::

    environment:
      type: lerobot_env
      env: {type: pusht}                       # a LeRobot env config: its type and its fields
      # env: {type: aloha, task: AlohaTransferCube-v0}
      # env: {type: metaworld, task: metaworld-reach-v3}
      # env: {type: so101}                     # a third-party lerobot_env_* package's type
      # env: {type: my_env, discover_packages_path: my_envs}   # another package's type

Config: the ``env`` type and its fields are checked when the config is read, in arena's own
interpreter without LeRobot (:mod:`arena_lerobot.envtypes`: LeRobot 0.6.1's types and fields,
and lerobot-env-so101's, compared with LeRobot's registry by tests/test_lerobot_env_types.py):
an unknown type, an unknown field, a field LeRobot accepts but never hands the env
(:data:`arena_lerobot.envtypes.IGNORED_FIELDS`, e.g. Meta-World's ``episode_length``) and a type
the bridge cannot run (LIBERO's, with env processors) are refused with the file, run and key
(``environment.env.<key>``). A type another package registers is accepted when ``env`` names
that package under ``discover_packages_path`` (lerobot-eval's ``--env.discover_packages_path``);
its fields are LeRobot's to check, in the worker.

Each env is what ``lerobot-eval`` 0.6 builds (``lerobot/scripts/lerobot_eval.py``, ``eval_main``
and ``rollout``): ``register_third_party_plugins()`` (imports every installed
``lerobot_env_*`` distribution), ``load_plugin(discover_packages_path)`` when set (as
``lerobot/configs/parser.py`` does for ``--env.discover_packages_path``),
``make_env_config(type, **fields)``, ``make_env(cfg, n_envs=1,
use_async_envs=False)`` -> ``{suite: {task_id: vector env}}`` (the suite and task id chosen by
``suite`` / ``task_id``, else the only or first one), with LeRobot's own wrappers and step limit
(``episode_length``). The envs are synchronous: LeRobot 0.6.1's default asynchronous vector envs
fail for pusht and aloha with more than one env (``NamespaceNotFound: gym_pusht`` in the
forkserver workers); arena's environment workers run one env each instead (``envs_per_worker:
one``), in the ``lerobot`` model venv (:data:`arena_lerobot.venv.LEROBOT_VENV`), so the
simulator packages live there and not in arena's interpreter.

Episodes, as ``lerobot-eval`` runs them: episode seed ``s`` is ``env.reset(seed=[s],
options={NEW_ROLLOUT_OPTION: True})`` (``lerobot-eval --seed S`` gives its episode ``i`` the seed
``S + i`` whatever its batch size: an arena run with ``seed: S`` runs the same episodes); actions
reach ``env.step`` as ``float32 (1, action_dim)`` (lerobot-eval hands the postprocessed torch
action's numpy array); success is ``info["final_info"]["is_success"]`` when the vector env
reports a final info, else the step's ``info["is_success"]`` (:attr:`success_key` ``is_success``);
the episode ends when the env terminates or truncates (its ``TimeLimit`` at ``episode_length``,
which is also :attr:`default_max_episode_steps`). The record's ``return`` is lerobot-eval's
``sum_reward`` and the episode metric ``max_reward`` (``max``) its ``max_reward``; PushT's
``coverage`` is an episode metric too (its maximum), as the native ``pusht`` reports it; the
run's figures are also given under lerobot-eval's names (``pc_success``, ``avg_sum_reward``,
``avg_max_reward``: :mod:`arena_lerobot.names`); the task string
is what ``lerobot-eval`` sends: the env's ``task_description``, else its ``task``, else ``""``.

Meta-World (``{type: metaworld, task: metaworld-<name>-v3}``, LeRobot's pin ``metaworld==3.0.0``
in the lerobot venv) needs nothing of its own here. Its scene is fixed by the episode seed:
LeRobot 0.6.1's ``MetaworldEnv`` sets ``seeded_rand_vec = True`` (``lerobot/envs/metaworld.py``
l.157-158) and calls ``self._env.seed(seed)`` before each seeded reset (l.224-226), so
Meta-World draws the object/goal vector from the env's own ``np_random`` (``metaworld/
sawyer_xyz_env.py`` l.702-710), not from the global ``np.random`` (l.711-718, the branch older
LeRobot envs took); one env per worker reset with seed ``s`` is therefore the scene
``lerobot-eval`` gives seed ``s`` in any slot of any batch, whatever its ``set_seed`` did to the
global generator (tests/test_lerobot_env_bridge.py checks both). Its episodes are 500 steps
whatever the config's ``episode_length`` (l.104), as in ``lerobot-eval``; the config refuses
that field (``rollout_limit.max_episode_steps`` ends episodes earlier).

Observation: LeRobot's raw env observation renamed as ``preprocess_observation`` renames it, the
values kept as numpy (the policy server stacks and converts them exactly as
``preprocess_observation`` does, :func:`arena_lerobot.features.to_policy_batch`)::

    {"camera_obs": {"observation.image": uint8 (N, H, W, 3)}            # "pixels" (one camera)
                   or {"observation.images.<cam>": uint8 (N, H, W, 3)},  # "pixels" (a dict)
     "policy": {"observation.state": float32 (N, D),                     # "agent_pos"
                "observation.environment_state": float32 (N, D),         # "environment_state"
                "observation.<key>": float32 (N, ...)},                  # any other array
     "task": list[str] of N}

The ``lerobot/lerobot_env`` adapter sends these keys unchanged. LeRobot env processors
(``make_env_pre_post_processors``: LIBERO's and IsaacLab Arena's) are not applied here: those
types are refused with the config, and a third-party env config that has one when the env is
built, naming it.

Missing packages: the env's build fails with :class:`ImportError` naming the LeRobot extra to
install into the ``lerobot`` venv (:data:`ENV_PACKAGES`); the config itself validates anywhere.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from pydantic import Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from arena.envs.base import EnvironmentConfig
from arena.envs.serial import SerialEnvironment
from arena.outputs.fingerprint import EQUIVALENCE_KEY, PROTOCOL_KEY, package_versions
from arena.outputs.metrics import RETURN_KEY
from arena_lerobot.envtypes import PLUGIN_KEY, check_env_config
from arena_lerobot.names import LEROBOT_EVAL_NAMES
from arena_lerobot.venv import LEROBOT_VENV

#: What each LeRobot env type needs installed in the lerobot venv (module, what to install).
ENV_PACKAGES: dict[str, tuple[str, str]] = {
    "pusht": ("gym_pusht", "lerobot[pusht] (gym-pusht)"),
    "aloha": ("gym_aloha", "lerobot[aloha] (gym-aloha)"),
    "metaworld": ("metaworld", "lerobot[metaworld] (metaworld==3.0.0)"),
    "robocasa": ("robocasa", "lerobot[robocasa]"),
    "vlabench": ("VLABench", "lerobot[vlabench]"),
    "robotwin": ("robotwin", "lerobot[robotwin]"),
    "robomme": ("robomme", "lerobot[robomme]"),
    "so101": ("lerobot_env_so101", "lerobot-env-so101"),
}
#: The bounds of the step reward of each LeRobot env type whose 0.6.1 sources prove them (paths
#: in the lerobot venv's site-packages); the episode metric ``reward`` (its max) keeps them and
#: the episode return (a sum of such rewards) is >= their low end. LeRobot's
#: ``FreezeAfterEpisodeEnd`` replays a finished env with reward 0.0 (``lerobot/envs/utils.py``
#: l.229-234), inside both. Types not listed (Meta-World: its ``evaluate_state`` docstring says
#: "between 0 and 10", ``metaworld/sawyer_xyz_env.py`` l.650, but nothing enforces it for
#: every task and reward version; LIBERO and the rest) declare nothing and keep Student's t.
REWARD_BOUNDS: dict[str, tuple[float, float]] = {
    # gym_pusht/envs/pusht.py l.257: reward = np.clip(coverage / self.success_threshold, 0.0, 1.0)
    "pusht": (0.0, 1.0),
    # gym_aloha/env.py l.177: the reward is the dm_control task's get_reward, which returns
    # 0, 1, 2, 3 or 4 for the two tasks gym_aloha builds (gym_aloha/tasks/sim.py l.140-149
    # TransferCubeTask, l.208-219 InsertionTask; the end-effector tasks raise
    # NotImplementedError before they are built, gym_aloha/env.py l.121 and l.126).
    "aloha": (0.0, 4.0),
}
#: Partial credit an env type's step ``info`` carries, reported as episode metrics as the native
#: environment reports it: gym-pusht's ``coverage`` (``gym_pusht/envs/pusht.py`` l.263,
#: ``info["coverage"]``, the block's area inside the target over the target's), its maximum.
INFO_METRICS: dict[str, dict[str, str]] = {"pusht": {"coverage": "max"}}
INFO_METRIC_BOUNDS: dict[str, dict[str, tuple[float, float]]] = {"pusht": {"coverage": (0.0, 1.0)}}
#: Distributions whose versions can change an episode (the protocol fingerprint's).
PACKAGES = ("lerobot", "gymnasium", "numpy", "gym-pusht", "pymunk", "gym-aloha", "mujoco", "dm-control",
            "metaworld", "lerobot-env-so101")
#: lerobot-eval's reset option telling ``FreezeAfterEpisodeEnd`` that this is a new rollout
#: (``lerobot.envs.utils.NEW_ROLLOUT_OPTION``; read from LeRobot when it is importable).
NEW_ROLLOUT_OPTION_FALLBACK = "new_rollout"


class LeRobotEnvConfig(EnvironmentConfig):
    """Options of ``environment: {type: lerobot_env, env: {type: ..., ...}}``."""

    env: dict[str, Any] = Field(
        description="a LeRobot env config: `type` (pusht, aloha, metaworld, ..., so101, or another package's type "
        "with `discover_packages_path: PACKAGE`) and that config's own fields, e.g. {type: aloha, task: "
        "AlohaInsertion-v0}; types and fields are checked against LeRobot 0.6.1's (arena_lerobot.envtypes)"
    )
    suite: str | None = Field(None, description="which suite of make_env's {suite: {task_id: env}}; null: the first")
    task_id: int | None = Field(None, ge=0, description="which task id of the suite; null: the first")

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, Any]) -> dict[str, Any]:
        kind = value.get("type")
        if not isinstance(kind, str) or not kind:
            raise ValueError("env needs `type`: a LeRobot env config type such as pusht, aloha or metaworld")
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"env must hold plain values (it goes to LeRobot's make_env_config): {exc}") from None
        problems = check_env_config(value)
        if problems:  # located at environment.env.<key>
            raise ValidationError.from_exception_data(cls.__name__, [
                {"type": PydanticCustomError("arena_config", "{message}", {"message": message}), "loc": (key,),
                 "input": value.get(key)}
                for key, message in problems
            ])
        return dict(value)

    def task_name(self) -> str | None:
        fields = self.env
        task = fields.get("task")
        return f"{fields['type']}/{task}" if task else str(fields["type"])

    @property
    def fields(self) -> dict[str, Any]:
        """The config's fields for ``make_env_config`` (``type`` and ``discover_packages_path`` left out)."""
        return {k: v for k, v in self.env.items() if k not in ("type", PLUGIN_KEY)}


def _import_lerobot_envs(plugin: str | None = None) -> Any:
    """LeRobot's env factory, with third-party ``lerobot_env_*`` packages registered, and package
    ``plugin`` with its submodules imported (``load_plugin``, lerobot-eval's
    ``--env.discover_packages_path``) when given.

    Raises:
        ImportError: LeRobot is not importable, or ``plugin`` cannot be loaded.
    """
    try:
        from lerobot.envs import factory
        from lerobot.utils.import_utils import register_third_party_plugins
    except ImportError as exc:
        raise ImportError(
            f"the lerobot_env environment needs LeRobot 0.6, which is not importable in {sys.executable} ({exc}): "
            f"run `{LEROBOT_VENV.setup_command}` once (the envs then run in workers under that venv)"
        ) from exc
    register_third_party_plugins()
    if plugin is not None:
        from lerobot.configs.parser import PluginLoadError, load_plugin

        try:
            load_plugin(plugin)
        except PluginLoadError as exc:
            raise ImportError(f"env.{PLUGIN_KEY}: {exc} (install it into the lerobot venv)") from exc
    return factory


class LeRobotEnvironment(SerialEnvironment):
    """``num_envs`` LeRobot envs of one config, each its own synchronous vector env of one
    (see the module docstring).

    Raises:
        ImportError: LeRobot, the env type's package or the ``discover_packages_path`` package is
            missing (names what to install).
        ValueError: a type the ``discover_packages_path`` package did not register (LeRobot's
            message, with the registered types), a suite / task id the config does not make, an
            env config with env processors, ``num_envs < 1``.
        TypeError: a field such a type's config does not have (LeRobot's dataclass). The types
            :mod:`arena_lerobot.envtypes` knows are checked with the config instead.
    """

    name: ClassVar[str] = "lerobot_env"
    Config = LeRobotEnvConfig
    success_key: ClassVar[str | None] = "is_success"
    #: lerobot-eval's ``max_reward``: the best reward of the episode (not a mean reward).
    episode_metrics: ClassVar[dict[str, str]] = {"max_reward": "max"}
    #: The run's figures under lerobot-eval's names too (its ``eval_info.json`` "aggregated").
    reported_as: ClassVar[dict[str, str]] = LEROBOT_EVAL_NAMES
    reported_by: ClassVar[str | None] = "lerobot-eval"

    @classmethod
    def episode_metrics_for(cls, config: LeRobotEnvConfig) -> dict[str, str]:
        """``max_reward``, and the partial credit the env type reports in its step ``info``
        (:data:`INFO_METRICS`: PushT's ``coverage``), each its maximum over the episode."""
        return {**cls.episode_metrics, **INFO_METRICS.get(str(config.env.get("type")), {})}

    @classmethod
    def episode_metric_bounds_for(cls, config: LeRobotEnvConfig) -> dict[str, tuple[float | None, float | None]]:
        """``max_reward`` inside the env type's step-reward bounds (:data:`REWARD_BOUNDS`), the
        episode return (``return``, a sum of those rewards) at or above their low end, with no
        upper bound claimed (the step limit can change per run), and PushT's ``coverage`` in
        [0, 1]; ``{}`` for other types."""
        kind = str(config.env.get("type"))
        bounds = REWARD_BOUNDS.get(kind)
        if bounds is None:
            return {}
        low, high = bounds
        return {"max_reward": (low, high), RETURN_KEY: (low, None), **INFO_METRIC_BOUNDS.get(kind, {})}
    #: One env per worker: several simulators keep process-wide state (gym-aloha), and one
    #: SyncVectorEnv of one per process is what lerobot-eval at batch size 1 steps.
    envs_per_worker: ClassVar[str] = "one"
    default_venv = LEROBOT_VENV
    simulator_modules = ("lerobot",)

    def __init__(self, config: LeRobotEnvConfig, *, num_envs: int, cameras: bool = False) -> None:
        super().__init__(config, num_envs=num_envs, cameras=cameras)
        factory = _import_lerobot_envs(config.env.get(PLUGIN_KEY))
        kind = config.env["type"]
        self._info_metrics = list(INFO_METRICS.get(str(kind), {}))
        module, install = ENV_PACKAGES.get(kind, (None, None))
        if module is not None:
            try:
                __import__(module)
            except ImportError as exc:
                raise ImportError(
                    f"the LeRobot env type {kind!r} needs {install}, not importable in {sys.executable} ({exc}); "
                    "install it into the lerobot venv"
                ) from exc
        self.env_config = factory.make_env_config(kind, **config.fields)
        if self._has_env_processors():
            raise ValueError(
                f"the LeRobot env type {kind!r} has env processors (make_env_pre_post_processors), which the "
                "lerobot_env bridge does not apply yet: evaluate it with lerobot-eval or arena's own environment"
            )
        try:
            from lerobot.envs.utils import NEW_ROLLOUT_OPTION
        except ImportError:
            NEW_ROLLOUT_OPTION = NEW_ROLLOUT_OPTION_FALLBACK
        self._new_rollout = NEW_ROLLOUT_OPTION
        self._vecs = [self._make_one(factory) for _ in range(num_envs)]
        first = self._vecs[0]
        self.action_space = gym.spaces.Box(
            np.asarray(first.single_action_space.low, np.float64),
            np.asarray(first.single_action_space.high, np.float64),
            first.single_action_space.shape,
            np.float64,
        )
        self.action_dim = int(np.prod(first.single_action_space.shape))
        self.default_max_episode_steps = int(first.call("_max_episode_steps")[0])
        self.task_description = self._task(first)
        self._obs: list[dict[str, Any]] = [{} for _ in range(num_envs)]
        self._tasks = [self.task_description] * num_envs
        self._start_episodes()

    def _has_env_processors(self) -> bool:
        pre, post = self.env_config.get_env_processors()
        return bool(getattr(pre, "steps", ())) or bool(getattr(post, "steps", ()))

    def _make_one(self, factory: Any) -> Any:
        envs = factory.make_env(self.env_config, n_envs=1, use_async_envs=False)
        suite = self.config.suite or next(iter(envs))
        if suite not in envs:
            raise ValueError(f"the LeRobot env makes the suites {sorted(envs)}, not {suite!r}")
        tasks = envs[suite]
        task_id = self.config.task_id if self.config.task_id is not None else next(iter(tasks))
        if task_id not in tasks:
            raise ValueError(f"suite {suite!r} has the task ids {sorted(tasks)}, not {task_id}")
        for other_suite, other in envs.items():  # the ones not used are closed now
            for other_id, vec in other.items():
                if (other_suite, other_id) != (suite, task_id):
                    vec.close()
        self.suite, self.task_id = suite, task_id
        return tasks[task_id]

    @staticmethod
    def _task(vec: Any) -> str:
        """lerobot-eval's task string: ``task_description``, else ``task``, else ``""``."""
        for attribute in ("task_description", "task"):
            try:
                return str(list(vec.call(attribute))[0])
            except (AttributeError, NotImplementedError):
                continue
        return ""

    # -- Environment API ---------------------------------------------------------------------

    def _reset_one(self, e: int, seed: int) -> None:
        self._obs[e], _ = self._vecs[e].reset(seed=[int(seed)], options={self._new_rollout: True})
        self._tasks[e] = self._task(self._vecs[e])

    def _observe_one(self, e: int) -> dict[str, Any]:
        return {**lerobot_observation(self._obs[e]), "task": self._tasks[e]}

    def step(self, actions: np.ndarray) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Apply ``(N, action_dim)`` actions as ``float32`` (lerobot-eval's dtype).

        Returns the observation, reward ``(N,)`` float64, ``terminated`` and ``truncated``
        ``(N,)`` bool (LeRobot's env and its ``TimeLimit``), and ``info`` with ``is_success``
        ``(N,)`` bool (as lerobot-eval reads it), ``reward`` and ``max_reward`` (the same
        reward, for the episode metric) ``(N,)`` float64, and the env type's partial credit
        (:data:`INFO_METRICS`: PushT's ``coverage``) ``(N,)`` float64.

        Raises:
            ValueError: ``actions`` is not ``(N, action_dim)`` or holds NaN or infinite values.
        """
        actions = self.check_actions(actions, self.action_dim, np.float32)
        n = self.num_envs
        reward = np.zeros(n, np.float64)
        terminated = np.zeros(n, bool)
        truncated = np.zeros(n, bool)
        success = np.zeros(n, bool)
        extra = {key: np.zeros(n, np.float64) for key in self._info_metrics}
        for e, vec in enumerate(self._vecs):
            obs, r, term, trunc, info = vec.step(actions[e : e + 1].reshape((1, *vec.single_action_space.shape)))
            self._obs[e] = obs
            reward[e] = float(np.asarray(r).reshape(-1)[0])
            terminated[e] = bool(np.asarray(term).reshape(-1)[0])
            truncated[e] = bool(np.asarray(trunc).reshape(-1)[0])
            success[e] = read_lerobot_success(info)
            for key, values in extra.items():
                values[e] = read_lerobot_info(info, key)
        info = {"is_success": success, "reward": reward.copy(), "max_reward": reward.copy(), **extra}
        return self._observation(), reward, terminated, truncated, info

    def render(self, env_id: int) -> np.ndarray:
        env_id = self.check_env_id(env_id)
        frame = self._vecs[env_id].call("render")[0]
        return np.ascontiguousarray(np.asarray(frame, np.uint8))

    def episode_info(self, env_id: int) -> dict[str, Any]:
        return {PROTOCOL_KEY: self.protocol()}

    def protocol(self) -> dict[str, Any]:
        """The protocol fingerprint: LeRobot's and the simulators' versions, the env config
        (every field, as LeRobot resolved it, but ``observation_height`` / ``observation_width``:
        the frames' real size, see :meth:`frame_shapes`), ``frame_shapes``, suite, task id and
        the step limit."""
        try:
            resolved = json.loads(json.dumps(dataclasses.asdict(self.env_config), default=str))
        except TypeError:
            resolved = dict(self.config.env)
        shapes = self.frame_shapes()
        if {"observation_height", "observation_width"} & set(resolved):
            # LeRobot's pusht / aloha configs never pass them to the env (gym-pusht renders 96x96
            # whatever they say, 384 by default): recorded as what the frames are
            sizes = {tuple(shape) for shape in shapes.values()}
            if len(sizes) == 1:
                resolved["observation_height"], resolved["observation_width"] = sizes.pop()
            else:  # no camera, or cameras of several sizes: frame_shapes says it
                resolved.pop("observation_height", None)
                resolved.pop("observation_width", None)
        return {
            "benchmark": f"lerobot_env:{self.config.env['type']}",
            "suite": str(self.suite),
            "task_id": self.task_id,
            "simulators": package_versions(PACKAGES),
            "env_config": resolved,
            "frame_shapes": shapes,
            **({PLUGIN_KEY: self.config.env[PLUGIN_KEY]} if PLUGIN_KEY in self.config.env else {}),
            "init_state_source": "the LeRobot env's reset(seed) (as lerobot-eval)",
            "max_episode_steps": self.default_max_episode_steps,
            "action_dtype": "float32",
            **self._episodes_as(),
        }

    def frame_shapes(self) -> dict[str, list[int]]:
        """``{feature name: [height, width]}`` of the camera frames the env returns (its last
        observation's; ``{}`` for a state-only env)."""
        cameras = lerobot_observation(self._obs[0])["camera_obs"] if self._obs and self._obs[0] else {}
        return {name: [int(image.shape[0]), int(image.shape[1])] for name, image in cameras.items()}

    def _episodes_as(self) -> dict[str, Any]:
        """PushT: the episodes it plays, declared as the native ``pusht`` declares them
        (:func:`arena_lerobot.pusht.episodes.pusht_episodes`, read from the gym-pusht env
        LeRobot made), so ``arena compare`` pairs the two; ``{}`` for other types."""
        if self.config.env.get("type") != "pusht" or not self._vecs:
            return {}
        from arena_lerobot.pusht.episodes import pusht_episodes

        try:
            env = self._vecs[0].envs[0].unwrapped
            obs_type = str(env.obs_type)
            size = [int(env.observation_height), int(env.observation_width)] if obs_type.startswith("pixels") else None
        except (AttributeError, IndexError, TypeError, ValueError):
            return {}
        version = package_versions(["gym-pusht"]).get("gym-pusht")
        return {EQUIVALENCE_KEY: pusht_episodes(version, obs_type, size, self.default_max_episode_steps)}

    def _release(self) -> None:
        for vec in self._vecs:
            try:
                vec.close()
            except Exception:  # closing is best effort
                pass


def read_lerobot_info(info: dict[str, Any], key: str) -> float:
    """One env's value of ``key`` in a step's vector-env ``info`` (batch of 1), read where
    :func:`read_lerobot_success` reads success: ``final_info`` when present, else ``info``;
    NaN when neither has it."""
    final = info.get("final_info") if isinstance(info, dict) else None
    if final is not None and not isinstance(final, dict):
        final = list(final)[0] if len(final) else None
    source = final if isinstance(final, dict) and key in final else info
    value = source.get(key) if isinstance(source, dict) else None
    return float(np.asarray(value, np.float64).reshape(-1)[0]) if value is not None and np.size(value) else float("nan")


def read_lerobot_success(info: dict[str, Any]) -> bool:
    """One env's success of a step as lerobot-eval 0.6 reads it (``rollout``): the vector env's
    ``final_info["is_success"]`` when present, else ``info["is_success"]``, else false."""
    final = info.get("final_info") if isinstance(info, dict) else None
    if isinstance(final, dict):
        value = final.get("is_success", False)
    elif final is not None:
        item = list(final)[0] if len(final) else None
        value = item.get("is_success", False) if isinstance(item, dict) else False
    elif isinstance(info, dict) and "is_success" in info:
        value = info["is_success"]
    else:
        value = False
    return bool(np.asarray(value).reshape(-1)[0]) if np.size(value) else False


def lerobot_observation(raw: dict[str, Any]) -> dict[str, Any]:
    """One env's LeRobot vector-env observation (batch of 1) under ``preprocess_observation``'s
    names, numpy: images ``uint8 (H, W, 3)`` under ``camera_obs``, the rest ``float32`` under
    ``policy`` (see the module docstring).

    Raises:
        ValueError: a nested observation other than ``pixels`` (LIBERO's ``robot_state``: it
            needs LIBERO's env processor).
    """
    cameras: dict[str, np.ndarray] = {}
    policy: dict[str, np.ndarray] = {}
    for key, value in raw.items():
        if key == "pixels":
            images = {f"observation.images.{k}": v for k, v in value.items()} if isinstance(value, dict) else {"observation.image": value}
            for name, image in images.items():
                image = np.asarray(image)
                if image.dtype != np.uint8:
                    raise ValueError(f"LeRobot env image {name} is {image.dtype}; preprocess_observation needs uint8")
                cameras[name] = image[0]
        elif isinstance(value, dict):
            raise ValueError(f"the LeRobot env observation {key!r} is nested: it needs the env's processors")
        else:
            name = {"agent_pos": "observation.state", "environment_state": "observation.environment_state"}.get(key, f"observation.{key}")
            policy[name] = np.asarray(value)[0].astype(np.float32)
    return {"camera_obs": cameras, "policy": policy}
