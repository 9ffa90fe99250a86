"""``Environment``: the vectorized simulator interface every rollout drives.

Observations use the Arena layout, so adapters move between simulators::

    {"camera_obs": {name: uint8 (num_envs, H, W, 3)},
     "policy":     {name: float (num_envs, D)},
     ...}                      # simulators may add keys, e.g. "task": list[str] of num_envs

The environment never resets by itself: the rollout calls ``reset_envs`` with the seeds of
the episodes it hands out, so totals never depend on which env finished first.

Environment workers (docs/architecture.md, "Environment workers"): every environment config
has ``workers`` and ``python``; :func:`arena.envs.workers.build_environment` honours them by
spreading the envs over worker processes, each building this same class for its slice of env ids, behind one
vectorized ``Environment`` the rollout drives as if it ran in-process. Constructing the class
directly always runs in this process. Class attributes tell the workers what a simulator
needs: :attr:`Environment.envs_per_worker` (or, when it depends on the config,
:meth:`Environment.envs_per_worker_for`) and :attr:`Environment.default_venv` (a
:class:`arena.venvs.VenvSpec`). Simulators stepped one env at a time in one process derive
from :class:`arena.envs.serial.SerialEnvironment`.

Faults of single envs (a worker process that died) are reported per env, so they cost those
envs' episodes only: ``step`` names them in ``info["env_errors"]`` and ``reset_envs`` raises
:class:`arena.errors.SimulatorError`.

**Success signal.** Every environment class declares how it reports success with the class
attribute ``success_key``: the name of the ``info`` key that ``step`` fills with ``bool
(num_envs,)`` (``"success"`` for the built-ins, ``"is_success"`` for gym-aloha), or ``None``
when the simulator has no success signal at all. A class that declares nothing is refused
when the experiment is validated (exit 2); a declared key missing from a step's ``info`` ends
the run ``failed`` with the reason (never a silent 0 %); ``None`` runs, but every episode ends
``failure`` or ``timeout`` and the run carries a warning (:func:`success_warning`) in its
``run_result.json``, ``status.json``, the report and ``arena status``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import gymnasium as gym
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from arena.checks import Check
from arena.errors import SuccessSignalError
from arena.outputs.fingerprint import PROTOCOL_KEY

#: Key of ``step``'s ``info`` naming envs whose step failed: ``{env_id: reason}``.
ENV_ERRORS = "env_errors"


class EnvironmentConfig(BaseModel):
    """Base of every environment config. Unknown keys are errors.

    Every environment, built-in or plugin, has these two keys:

    - ``workers``: ``0`` runs the envs in the process that runs the rollout; ``N`` spreads them
      over ``N`` worker processes (at most ``num_envs``), stepped in parallel; ``"auto"`` uses
      one worker per usable CPU core (``os.sched_getaffinity``), at most ``num_envs``.
    - ``python``: path of another Python interpreter (a benchmark's own virtual environment,
      see :mod:`arena.venvs`) to run the workers under; implies at least one worker. Unset:
      the venv the environment class declares (:attr:`Environment.default_venv`; at least one
      worker, under that venv's interpreter where it exists, else under this one), else this
      interpreter.
    - ``worker_timeout_s``: seconds a worker may take to answer one step, reset, render or
      episode-info request (default 600; ``null``: no bound). A worker that takes longer (a
      simulator deadlocked in native code) is killed: its envs' current episodes end ``error``
      naming this timeout, it is started again for their next episodes, and the other workers'
      envs go on, as when a worker crashes. Building the environment is not bounded by it.
    """

    model_config = ConfigDict(extra="forbid")

    workers: Annotated[int, Field(ge=0)] | Literal["auto"] = Field(
        0,
        description="0: envs run in the rollout's process; N: in N worker processes stepped in "
        "parallel (pays when a step costs milliseconds, e.g. with cameras); auto: one per usable "
        "CPU core. Results do not depend on it",
    )
    python: str | None = Field(
        None,
        description="interpreter to run the workers under (a benchmark's own venv, e.g. "
        "~/.local/share/arena/venvs/NAME/bin/python); null: the environment's default venv if "
        "it exists, else this one",
    )

    worker_timeout_s: float | None = Field(
        600.0,
        gt=0,
        description="seconds a worker process may take to answer one step or reset; a worker stuck "
        "longer is killed, its envs' episodes end as errors and it is restarted. null: no bound",
    )

    perturbations: dict[str, Any] = Field(
        default_factory=dict,
        description="perturbations of this run's episodes, {name: value}: generic ones (image_noise, "
        "image_blur, jpeg_quality, brightness, contrast, state_noise, action_noise, action_delay, "
        "instruction, instruction_drop, instruction_replace) and the environment's own simulator ones "
        "(arena plugins lists them); empty: none (arena.envs.perturbations)",
    )

    @field_validator("workers", mode="before")
    @classmethod
    def _workers(cls, value: Any) -> Any:
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            return value
        raise ValueError(f"expected 0 (in-process), a number of worker processes or 'auto'; got {value!r}")

    def task_name(self) -> str | None:
        """The task this config selects, for records and reports."""
        return getattr(self, "task", None)

    def expand(self) -> dict[str, dict[str, Any]] | None:
        """Split the run into several runs, or ``None`` (the default) to keep it whole.

        Returns ``{suffix: field updates}``: the experiment loader replaces the run ``NAME``
        by one run ``NAME.<suffix>`` per entry, each resolved as if its ``environment``
        section held those updates (e.g. a LIBERO suite without a task becomes one run per
        task, ``{"0": {"task": 0}, ...}``). A suffix is letters, digits, ``_`` or ``-``. The
        expanded configs must not expand again.
        """
        return None

    def code_references(self) -> dict[str, str]:
        """``{field: "package.module:Name"}``: code this config names that building the
        environment imports (e.g. Isaac Lab's ``env_cfg``). Empty by default.

        The experiment loader treats each like a ``package.module:Class`` ``type``: its module
        is imported only when the user allowed it (``--allow-import``, see
        :mod:`arena.config.imports`); a refusal is a :class:`~arena.errors.ConfigError` keyed
        ``environment.<field>``.
        """
        return {}


class Environment:
    """A batch of ``num_envs`` simulator instances of one task.

    Subclasses set ``name``, ``Config`` and ``success_key`` and implement ``reset_envs``,
    ``step`` and ``render``; everything else has a default (the optional contract:
    :meth:`protocol`, :meth:`venv_checks`, :meth:`check_env_id`, :meth:`close` /
    :meth:`_release`, :meth:`episode_info`, and the class attributes below).
    ``action_space`` is a gymnasium ``Box`` of **one** env's action.
    :func:`arena.testing.environments.check_environment` checks a subclass against this
    contract (the plugins' tests call it).

    What crosses to a worker process (the worker protocol): observations, rewards,
    ``terminated``, ``truncated`` and ``info`` made of numpy arrays, numbers, strings, lists
    and dicts; ``action_space`` (its bounds), ``task_description``,
    ``default_max_episode_steps`` and :meth:`episode_info`. Every array or list of an
    observation or ``info`` whose first dimension is the env count is per env (it is split
    and joined by env id); anything else is shared by the batch.
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type[EnvironmentConfig]] = EnvironmentConfig
    #: Required, no default: the ``info`` key of ``step`` holding per-env success, ``bool
    #: (num_envs,)``, or ``None`` when the simulator has no success signal (see the module
    #: docstring).
    success_key: ClassVar[str | None]
    #: How the envs of one batch may be spread over worker processes: ``"any"`` split;
    #: ``"one"`` env per worker (a simulator that keeps per-env state in module globals, like
    #: gym-aloha: with ``num_envs > 1`` it always runs in ``num_envs`` workers); ``"all"`` envs
    #: in one worker (a simulator that vectorizes itself, like Isaac Lab: ``workers`` above 1
    #: is a configuration error). A class whose answer depends on its config overrides
    #: :meth:`envs_per_worker_for`.
    envs_per_worker: ClassVar[Literal["any", "one", "all"]] = "any"
    #: The benchmark venv whose interpreter runs this environment's workers when the config
    #: sets no ``python`` (an :class:`arena.venvs.VenvSpec`: its name, Python, requirements and
    #: set-up steps; ``arena venv setup NAME`` creates it), or ``None``: this interpreter.
    default_venv: ClassVar[Any] = None
    #: Top-level modules of the simulator that the :attr:`default_venv` holds (e.g. ``("libero",)``):
    #: ``arena run`` refuses a run whose venv does not exist while one of these modules is not
    #: importable in arena's own interpreter either (exit 2, naming the setup command).
    simulator_modules: ClassVar[tuple[str, ...]] = ()
    #: Cameras whose ``camera_obs`` frames come upside down, as the simulator renders them
    #: (LIBERO): policies get them so, videos are rotated upright.
    upside_down_cameras: ClassVar[frozenset[str]] = frozenset()
    #: Partial-credit metrics (:mod:`arena.outputs.metrics`): ``{info key: reduction}``, the
    #: reduction one of ``"max"``, ``"min"``, ``"last"``, ``"mean"``. ``step`` fills each key of
    #: its ``info`` with one value per env, float or bool ``(num_envs,)`` (e.g. gym-pusht's
    #: ``{"coverage": "max"}``); the rollout reduces it over the episode into the record's
    #: ``metrics``. A class whose metrics depend on its config (the task) overrides
    #: :meth:`episode_metrics_for`.
    episode_metrics: ClassVar[dict[str, str]] = {}
    #: The names a reference tool reports this environment's run figures under, ``{its name:
    #: arena's figure}``, the figure one of ``success_rate``, ``success_rate_pct`` (the rate in
    #: percent), ``return`` (the episode return's mean) or ``metrics.<key>`` (an episode
    #: metric's mean), e.g. lerobot-eval's ``{"pc_success": "success_rate_pct", "avg_sum_reward":
    #: "return", "avg_max_reward": "metrics.max_reward"}``; :attr:`reported_by` names the tool.
    #: The results give each figure under that name too, with arena's interval
    #: (:func:`arena.results.run_summary.as_reported`), beside arena's own name.
    reported_as: ClassVar[dict[str, str]] = {}
    reported_by: ClassVar[str | None] = None

    # -- perturbations (issue 40, owner `perturb`; arena.envs.perturbations) ----------------
    #: The simulator-side perturbations this environment supports
    #: (:class:`arena.envs.perturbations.Perturbation`: name, unit, range, nominal), e.g. a
    #: subset of :data:`arena.envs.perturbations.MUJOCO`. The generic ones (image, state, action,
    #: instruction) every environment gets from core's wrapper and need not be declared.
    perturbations: ClassVar[tuple[Any, ...]] = ()

    @classmethod
    def perturbations_for(cls, config: EnvironmentConfig) -> tuple[Any, ...]:
        """The simulator perturbations a run with ``config`` supports (:attr:`perturbations` by
        default); override when they depend on the config (e.g. the task's scene)."""
        return tuple(cls.perturbations)

    def perturb_after_reset(self, env_id: int, seed: int) -> bool | None:
        """Apply the config's active simulator perturbations to ``env_id`` right after its
        ``reset(seed)`` and before its first observation is read (the environment calls it from
        its own reset; seeded draws use ``seed``); may return whether it moved objects, so the
        caller reads the scene again. Does nothing by default and must do nothing when no
        simulator perturbation is active, so the unperturbed episode is unchanged."""
        return None

    # -- end perturbations ---------------------------------------------------------------

    @classmethod
    def envs_per_worker_for(cls, config: EnvironmentConfig) -> Literal["any", "one", "all"]:
        """How the envs of a run with ``config`` may be spread (see :attr:`envs_per_worker`,
        returned by default). The worker plan asks this once, when the run is validated.

        Override it when the answer depends on the config, e.g. a simulator that keeps one env
        per process on its CPU backend and vectorizes all envs itself on its GPU backend::

            @classmethod
            def envs_per_worker_for(cls, config):
                return "all" if config.sim_backend == "physx_cuda" else "one"
        """
        return cls.envs_per_worker

    @classmethod
    def default_venv_for(cls, config: EnvironmentConfig) -> Any:
        """The benchmark venv whose interpreter runs the workers of a run with ``config`` when it
        sets no ``python`` (:attr:`default_venv`, returned by default): an
        :class:`arena.venvs.VenvSpec`, the name (``str``) of a venv another declaration makes
        (a servable model's), or ``None`` for this interpreter. The worker plan asks this once,
        when the run is validated; a named venv missing on the machine that starts the workers
        means this interpreter there (``runner.log`` and ``arena validate`` say so).

        Override it when an option needs another simulator build, e.g. Meta-World's LeRobot
        options, whose episodes are LeRobot's only under the MuJoCo of the ``lerobot`` venv::

            @classmethod
            def default_venv_for(cls, config):
                return "lerobot" if config.scenes == "lerobot" else cls.default_venv
        """
        return cls.default_venv

    @classmethod
    def episode_metrics_for(cls, config: EnvironmentConfig) -> dict[str, str]:
        """The episode metrics of a run with ``config`` (see :attr:`episode_metrics`, returned by
        default), e.g. per ManiSkill task its ``info`` extras::

            @classmethod
            def episode_metrics_for(cls, config):
                return {"is_grasped": "max"} if config.task == "PickCube-v1" else {}
        """
        return dict(cls.episode_metrics)

    # -- episode metric bounds (helper `faults`): the known range of each episode metric -------
    #: ``{info key: (low, high)}``: the range each declared episode metric cannot leave (e.g.
    #: PushT's coverage ``(0.0, 1.0)``; a boolean metric is ``(0, 1)``). A metric with bounds
    #: gets an interval that stays inside them (:mod:`arena.outputs.metrics`: the betting
    #: interval of Waudby-Smith & Ramdas 2023); one without keeps Student's t. ``None`` on one
    #: side declares a bound on the other only (``(0.0, None)``: non-negative; Student's t clipped
    #: at it), and the key ``"return"`` bounds the episode return. A class whose bounds depend on
    #: its config overrides :meth:`episode_metric_bounds_for`.
    episode_metric_bounds: ClassVar[dict[str, tuple[float | None, float | None]]] = {}

    @classmethod
    def episode_metric_bounds_for(cls, config: EnvironmentConfig) -> dict[str, tuple[float | None, float | None]]:
        """The bounds of the episode metrics of a run with ``config`` (see
        :attr:`episode_metric_bounds`, returned by default); keys need not all be declared
        metrics of this config (bounds of metrics a run does not have are unused)."""
        return dict(cls.episode_metric_bounds)

    # -- end of episode metric bounds ------------------------------------------------------------

    def __init__(self, config: EnvironmentConfig, *, num_envs: int, cameras: bool = False) -> None:
        """``cameras`` asks for ``camera_obs`` (rendering costs tens of ms per frame on a CPU)."""
        self.config = config
        self.num_envs = num_envs
        self.cameras = cameras
        self._closed = False  # close() releases from here on

    action_space: gym.spaces.Box
    task_description: str
    #: Steps after which an episode is a timeout when the experiment sets no
    #: ``rollout_limit.max_episode_steps``.
    default_max_episode_steps: int = 500

    def reset_envs(self, env_ids: list[int], seeds: list[int]) -> dict[str, Any]:
        """Reset ``env_ids`` with episode seeds ``seeds``; return the full batched observation.

        Raises:
            arena.errors.SimulatorError: some envs could not be reset (e.g. their worker died);
                its ``env_ids`` name them and its ``observation`` is the batched observation
                after the other envs of the call were reset (their episodes go on).
        """
        raise NotImplementedError

    def check_reset(self, env_ids: list[int], seeds: list[int]) -> tuple[list[int], list[int]]:
        """``reset_envs``' arguments as ints, checked: one seed per env id, ids in range.

        Raises:
            ValueError: the lengths differ or an env id is outside ``0..num_envs - 1``.
        """
        env_ids = [int(e) for e in env_ids]
        seeds = [int(s) for s in seeds]
        if len(env_ids) != len(seeds):
            raise ValueError(f"{len(env_ids)} env_ids but {len(seeds)} seeds")
        for e in env_ids:
            if not 0 <= e < self.num_envs:
                raise ValueError(f"env id {e} out of range 0..{self.num_envs - 1}")
        return env_ids, seeds

    def check_actions(
        self, actions: Any, action_dim: int, dtype: Any = np.float64, *, finite: bool = True
    ) -> np.ndarray:
        """``step``'s ``actions`` as a ``(num_envs, action_dim)`` array of ``dtype`` (the dtype
        the simulator's reference client hands it), checked.

        Raises:
            ValueError: another shape, or (``finite``) NaN or infinite values.
        """
        actions = np.asarray(actions, dtype=dtype)
        if actions.shape != (self.num_envs, action_dim):
            raise ValueError(f"actions must have shape ({self.num_envs}, {action_dim}), got {actions.shape}")
        if finite and not np.all(np.isfinite(actions)):
            raise ValueError("actions hold NaN or infinite values")
        return actions

    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Apply ``(num_envs, action_dim)`` float actions.

        Policies hand float64 or float32; each environment passes them to its simulator in the
        dtype that simulator's reference client uses (float64 for LIBERO, ALOHA and
        franka_kitchen, as openpi's clients pass ``action.tolist()``; float32 for Meta-World,
        its declared action space), so a float64 value is rounded only where the reference
        rounds it.

        Returns ``observation, reward (num_envs,) float, terminated (num_envs,) bool,
        truncated (num_envs,) bool, info`` where ``info[success_key]`` is ``(num_envs,) bool``
        from the benchmark's own success signal (absent when ``success_key`` is ``None``).
        Envs whose episode has ended are stepped too; the rollout ignores them until it
        resets them.

        ``info["env_errors"]`` (optional, :data:`ENV_ERRORS`) maps env ids whose step failed
        for reasons of infrastructure (a worker process died) to the reason: their episodes end
        with outcome ``error``, their other values in this step are meaningless, and the other
        envs' results count as usual. An exception ends every running episode as ``error``.
        """
        raise NotImplementedError

    def episode_info(self, env_id: int) -> dict[str, Any]:
        """Extra fields for the record of ``env_id``'s episode that just ended.

        E.g. which fixed initial state the episode used. JSON-able values; the record holds
        them under ``env_extras``, except ``"protocol"``: the environment's protocol
        fingerprint (:meth:`protocol`), which becomes the record's own ``protocol``. Called
        once per episode end, before the env is reset. The default is ``{"protocol":
        self.protocol()}``, or ``{}`` when :meth:`protocol` is empty; an override adds its
        fields to ``super().episode_info(env_id)``.
        """
        fingerprint = self.protocol()
        return {PROTOCOL_KEY: fingerprint} if fingerprint else {}

    def render(self, env_id: int) -> np.ndarray:
        """Return one ``uint8 (H, W, 3)`` frame of env ``env_id`` (for videos)."""
        raise NotImplementedError

    # -- the optional contract (issue 35: declared here, with defaults) ----------------------
    # Every member below has a working default; override what your simulator needs.

    @classmethod
    def venv_checks(cls, python: Path) -> Sequence[Check]:
        """``arena doctor``'s checks of this environment inside its benchmark venv, whose
        interpreter is ``python`` (e.g. ManiSkill's Vulkan device, which only the venv's
        SAPIEN can probe): a list of :class:`arena.checks.Check`. Called only for classes
        with a :attr:`default_venv`, whose venv exists; a check that raises is reported as a
        ``fail`` naming the error. Default: none (``()``)."""
        return ()

    def protocol(self) -> dict[str, Any]:
        """The protocol fingerprint of this environment's episodes
        (:mod:`arena.outputs.fingerprint`): what must match for two success rates to be
        comparable — benchmark, suite and its version, simulator versions, how seeds become
        episodes, cameras and image size, step limit. JSON-able. The default
        :meth:`episode_info` puts it in every record (``protocol``); the report compares it
        between runs. Default: ``{}`` (nothing known: runs compare as "unknown")."""
        return {}

    def check_env_id(self, env_id: int) -> int:
        """``env_id`` as an int, for methods taking one env (``render``, ``episode_info``).

        Raises:
            ValueError: it is outside ``0..num_envs - 1``.
        """
        env_id = int(env_id)
        if not 0 <= env_id < self.num_envs:
            raise ValueError(f"env id {env_id} out of range 0..{self.num_envs - 1}")
        return env_id

    def close(self) -> None:
        """Release the simulator's resources: :meth:`_release`, once. Idempotent, and
        nothing when the constructor failed before :meth:`Environment.__init__` ran."""
        if self.__dict__.get("_closed", True):  # closed, or the constructor never got this far
            return
        self._closed = True
        self._release()

    def _release(self) -> None:
        """Free the simulator's resources; called once, by :meth:`close`. Nothing by default."""

    def __del__(self) -> None:  # best effort; close() is the contract
        try:
            self.close()
        except Exception:
            pass

    # -- live: what the simulator executes while an action chunk is in flight (arena.live) --
    #: Hold rules valid for this action space, preferred first (the default of
    #: ``execution.hold``): ``"continue_chunk"`` (the previous chunk's not-yet-executed rows,
    #: RTC's protocol), ``"repeat_last"`` (the last action again: absolute position control),
    #: ``"null_action"`` (:meth:`null_action_for`: delta or velocity control). Empty: the
    #: environment cannot run in live mode (refused at validation).
    hold_rules: ClassVar[tuple[str, ...]] = ()
    #: Control steps per second (one ``step``), or ``None`` when unknown: a delay in ms and a
    #: measured clock need it (:meth:`control_hz_for` when it depends on the config).
    control_hz: ClassVar[float | None] = None

    @classmethod
    def hold_rules_for(cls, config: EnvironmentConfig) -> tuple[str, ...]:
        """The hold rules valid for a run with ``config`` (default :attr:`hold_rules`), e.g.
        per controller: absolute joint targets repeat, deltas hold still with a null action."""
        return tuple(cls.hold_rules)

    @classmethod
    def control_hz_for(cls, config: EnvironmentConfig) -> float | None:
        """Control steps per second of a run with ``config`` (default :attr:`control_hz`)."""
        return cls.control_hz

    @classmethod
    def null_action_for(cls, config: EnvironmentConfig) -> np.ndarray | None:
        """``float64 (action_dim,)``: the action that holds still (delta/velocity control), or
        ``None`` when there is none (absolute control). A NaN entry keeps that dimension's
        last executed value (e.g. an absolute gripper command). Default ``None``."""
        return None

    def null_action(self, env_id: int) -> np.ndarray | None:
        """Env ``env_id``'s null action (default :meth:`null_action_for` of its config)."""
        return self.null_action_for(self.config)

    @classmethod
    def stay_action_for(cls, config: EnvironmentConfig, observation: dict[str, Any], env_id: int) -> np.ndarray | None:
        """``float64 (action_dim,)``: the absolute command that keeps env ``env_id`` where
        ``observation`` (the batch the env returned last) shows it, e.g. the current joint
        positions as joint targets; ``None`` (the default) when the action space has none
        (delta or velocity control, whose null action already holds still).

        Live mode executes it on a measured clock while an episode's first action chunk is in
        flight, when no action has been executed yet to repeat (a real arm holds its pose; a
        zero target would drive an absolute-control env to the origin). NaN entries of the null
        action take their values from it under ``hold: null_action``.
        """
        return None

    def stay_action(self, observation: dict[str, Any], env_id: int) -> np.ndarray | None:
        """Env ``env_id``'s stay action (default :meth:`stay_action_for` of its config)."""
        return self.stay_action_for(self.config, observation, env_id)


_UNDECLARED = object()


def declared_success_key(env: Any) -> str | None:
    """The ``success_key`` an environment (class or instance) declares.

    Raises:
        SuccessSignalError: it declares none (the message says how to declare it).
    """
    key = getattr(env, "success_key", _UNDECLARED)
    if key is _UNDECLARED or not (key is None or (isinstance(key, str) and key)):
        cls = env if isinstance(env, type) else type(env)
        raise SuccessSignalError(
            f"environment class {cls.__module__}.{cls.__qualname__} does not declare how it reports success: "
            "set the class attribute success_key to the `info` key its step() fills with per-env success "
            "(e.g. 'success', or gym-aloha's 'is_success'), or to None if the simulator has no success signal"
        )
    return key


def success_warning(env: Any) -> str | None:
    """The warning a run carries when its environment has no success signal, else ``None``.

    Raises:
        SuccessSignalError: the environment declares no ``success_key``.
    """
    if declared_success_key(env) is not None:
        return None
    name = getattr(env, "name", "") or (env if isinstance(env, type) else type(env)).__name__
    return (
        f"environment '{name}' has no success signal (success_key = None): every episode ends as "
        "failure or timeout, so the success rate does not measure the task"
    )


def read_success(env: Any, info: Any, num_envs: int) -> np.ndarray:
    """``bool (num_envs,)``: per-env success from a step's ``info`` under ``env.success_key``.

    All false when the environment declares ``success_key = None``.

    Raises:
        SuccessSignalError: the declared key is missing from ``info``, or its value does not
            hold one entry per env.
    """
    key = declared_success_key(env)
    if key is None:
        return np.zeros(num_envs, dtype=bool)
    if not isinstance(info, dict) or key not in info:
        got = sorted(map(str, info)) if isinstance(info, dict) else type(info).__name__
        raise SuccessSignalError(
            f"the environment's step() info has no '{key}' (its declared success_key); info keys: {got}"
        )
    value = np.asarray(info[key]).reshape(-1)
    if value.shape != (num_envs,):
        raise SuccessSignalError(
            f"info['{key}'] has {value.size} value(s); expected one per env ({num_envs})"
        )
    return value.astype(bool)
