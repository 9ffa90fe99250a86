"""ManiSkill's own motion-planning experts, recorded on a second env and replayed.

ManiSkill ships scripted solutions for its Panda tasks
(``mani_skill.examples.motionplanning.panda.solutions``, the ``MP_SOLUTIONS`` table of
``mani_skill/examples/motionplanning/panda/run.py``, mani-skill 3.0.1): ``solve(env, seed)``
resets the env it is given with ``seed``, reads the scene's ground truth (object poses, goal),
plans with mplib (screw motions, no sampling) and **steps that env itself**, with
``obs_mode="none"`` and ``control_mode="pd_joint_pos"`` (7 absolute arm joint targets in rad
and the gripper, +1 open ... -1 closed).

**Approach: record on a twin, replay on the evaluated env.** A solver cannot be handed the
env arena evaluates: it resets it itself and steps it outside the rollout, so the rollout would
see none of its steps. :class:`MotionPlanner` therefore keeps a second ManiSkill env of the
same task (and robot) in the same worker process, wraps its ``step`` to record every action
the solver applies, and runs the solver on it with the episode's seed; the evaluated env,
reset with the same seed, then gets those actions one per rollout step (:class:`Plan`,
:class:`MotionPlanProvider`). Chosen over planning on the evaluated env and restoring its
state (``set_state_dict``) because the rollout's env is then never stepped outside the
rollout (its ``elapsed_steps`` and the task's internal state stay ManiSkill's own), and over
re-implementing the solutions because they are ManiSkill's reference.

**Faithful replay.** Both envs start each episode with a fresh scene
(``reset(seed=seed, options={"reconfigure": True})``): on the CPU backend a plain
``reset(seed)`` keeps PhysX state of the previous episode that ``get_state()`` does not hold,
and the same seed and actions then drift (measured: a resting PickCube cube moves 3e-4 m by
step 8, states end up to ~1-3 apart). From a fresh scene, physics is deterministic: the same
seed and the same float32 actions give the same states bit for bit.
:meth:`Plan.check_start` compares the evaluated env's state after its reset with the twin's
(a mismatch raises), and ``tests/test_maniskill_planner.py`` compares every state of a replay
with the twin's (both get the actions as float32, what the ``maniskill`` environment hands
ManiSkill). A reconfiguring reset costs ~0.3 s on the twin, ~1 s with a camera.

After the plan's last action the evaluated env gets that action again (the arm holds its
final joint targets); a solver that fails (``-1``, an mplib error, an exception) leaves the
actions it applied before failing, then the same hold. The solvers take more steps than the
tasks' registered limits allow (e.g. PickCube: up to 88 of 50): :data:`EXPERT_STEPS` holds what
they took on seeds 0-9, and the expert policy refuses a run whose step limit is shorter.

Measured here (mani-skill 3.0.1, CPU backend, seeds 0-9; the plugin README's table), the
same counted at the solver's last step (ManiSkill's runner) and at any step of the replay:
PickCube, StackCube, PullCube, LiftPegUpright 10/10, PushCube 9/10, PlugCharger 8/10,
PegInsertionSide 4/10 (``reference/lerobot-maniskill.md``'s table).

ManiSkill is imported only when a plan is made (in the env worker, under the ``maniskill``
venv); arena's own interpreter imports this module for the config checks alone.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Tasks with a Panda solution in mani-skill 3.0.1 (``MP_SOLUTIONS`` of ``panda/run.py``).
SOLVED_TASKS: tuple[str, ...] = (
    "DrawTriangle-v1",
    "PickCube-v1",
    "StackCube-v1",
    "PegInsertionSide-v1",
    "PlugCharger-v1",
    "PlaceSphere-v1",
    "PushCube-v1",
    "PullCubeTool-v1",
    "LiftPegUpright-v1",
    "PullCube-v1",
    "DrawSVG-v1",
    "StackPyramid-v1",
)
#: The controller the solvers emit actions for (and the evaluated env must run).
CONTROL_MODE = "pd_joint_pos"
#: Robots the Panda solutions drive (``None``: the task's default robot, the Panda).
ROBOTS: tuple[str | None, ...] = (None, "panda", "panda_wristcam")
#: gym id -> most steps the solver took on seeds 0-9 (mani-skill 3.0.1, CPU backend), for the
#: offline tasks; a run of the expert needs a step limit of at least this.
EXPERT_STEPS: dict[str, int] = {
    "PickCube-v1": 88,
    "PushCube-v1": 77,
    "StackCube-v1": 120,
    "PegInsertionSide-v1": 201,
    "PullCube-v1": 79,
    "LiftPegUpright-v1": 197,
    "PlugCharger-v1": 234,
}


@dataclass
class Plan:
    """One episode's solution: what the solver applied to the twin env.

    ``actions``: ``float32 (T, action_dim)``, ``pd_joint_pos`` actions (7 arm joint targets in
    rad, gripper +1 open ... -1 closed) in the order applied; ``T`` may be 0 when the solver
    failed before moving. ``initial_state``: the twin's flat ManiSkill state
    (``get_state()``, ``float32 (S,)``) right after the solver's ``reset(seed=seed)``;
    ``states``: the twin's state after each action, ``(T, S)`` (kept only when asked:
    ``MotionPlanner.plan(..., keep_states=True)``). ``success``: the task's ``info["success"]``
    at the solver's last step (ManiSkill's own runner's criterion); ``error``: why the solver
    failed (``None`` when it finished).
    """

    task: str
    seed: int
    actions: np.ndarray
    hold: np.ndarray
    initial_state: np.ndarray
    success: bool
    error: str | None = None
    states: np.ndarray | None = field(default=None, repr=False)

    @property
    def steps(self) -> int:
        """``T``, the number of actions the solver applied."""
        return int(len(self.actions))

    def action(self, step: int) -> np.ndarray:
        """``float32 (action_dim,)``: the action for rollout step ``step`` (0-based), the last
        one (or :attr:`hold`, for an empty plan) once the plan is spent."""
        if step < len(self.actions):
            return self.actions[step]
        return self.actions[-1] if len(self.actions) else self.hold

    def check_start(self, state: np.ndarray, where: str = "the evaluated env") -> None:
        """Raise ``RuntimeError`` unless ``state`` (flat ``get_state()`` after the evaluated
        env's reset) equals the twin's :attr:`initial_state`: a replay from another start
        would not reproduce the solution."""
        state = np.asarray(state, np.float32).reshape(-1)
        if state.shape != self.initial_state.shape or not np.array_equal(state, self.initial_state):
            diff = (
                float(np.max(np.abs(state - self.initial_state)))
                if state.shape == self.initial_state.shape
                else f"shape {state.shape} vs {self.initial_state.shape}"
            )
            raise RuntimeError(
                f"{where} starts {self.task} seed {self.seed} from another state than the motion planner's twin "
                f"(max difference {diff}): the planned actions cannot be replayed faithfully (a reset that is not "
                "ManiSkill's reset(seed=seed), or a different robot or scene option)"
            )


class _RecordingEnv:
    """The twin env, seen by a solver: ``step`` records the action (as float32, and applies
    that float32 value, as the evaluated env gets it), ``reset`` keeps the start state.
    Everything else is the wrapped env's (``unwrapped``, ``spec``, ...)."""

    def __init__(self, env: Any, keep_states: bool = False) -> None:
        self.env = env
        self.keep_states = keep_states
        self.actions: list[np.ndarray] = []
        self.states: list[np.ndarray] = []
        self.initial_state: np.ndarray | None = None
        self.last_info: dict[str, Any] | None = None

    def reset(self, **kwargs: Any) -> Any:
        kwargs["options"] = {**(kwargs.get("options") or {}), "reconfigure": True}  # a fresh scene
        out = self.env.reset(**kwargs)
        self.actions, self.states, self.last_info = [], [], None
        self.initial_state = _flat_state(self.env.unwrapped)
        return out

    def step(self, action: Any) -> Any:
        import torch

        action = np.asarray(action, np.float32).reshape(-1).copy()
        self.actions.append(action)
        out = self.env.step(torch.from_numpy(action.copy()))
        self.last_info = out[-1]
        if self.keep_states:
            self.states.append(_flat_state(self.env.unwrapped))
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)


def _flat_state(env: Any) -> np.ndarray:
    """``float32 (S,)``: ManiSkill's flat state (actors' and articulations' poses, velocities,
    joint positions) of a one-env ManiSkill env."""
    return np.asarray(env.get_state().detach().cpu().numpy(), np.float32).reshape(-1)


def _solution(task: str) -> Any:
    from mani_skill.examples.motionplanning.panda.run import MP_SOLUTIONS

    if task not in MP_SOLUTIONS:
        raise ValueError(f"ManiSkill has no motion-planning solution for {task}; it has {', '.join(sorted(MP_SOLUTIONS))}")
    return MP_SOLUTIONS[task]


class MotionPlanner:
    """Plans episodes of one task with ManiSkill's solution, on a twin env it owns.

    ``task``: a gym id of :data:`SOLVED_TASKS`; ``robot``: ManiSkill ``robot_uids`` (``None``:
    the task's default). The twin is built on first use: ``gym.make(task, obs_mode="none",
    control_mode="pd_joint_pos", sim_backend="cpu")``, as ManiSkill's runner builds it.

    Raises:
        ValueError: ``task`` has no solution, or ``robot`` is not a Panda.
    """

    def __init__(self, task: str, robot: str | None = None) -> None:
        if task not in SOLVED_TASKS:
            raise ValueError(f"ManiSkill has no motion-planning solution for {task}; it has {', '.join(SOLVED_TASKS)}")
        if robot not in ROBOTS:
            raise ValueError(f"ManiSkill's motion-planning solutions drive the Panda, not robot {robot!r}")
        self.task, self.robot = task, robot
        self._env: Any = None

    def _twin(self) -> Any:
        if self._env is None:
            import gymnasium as gym
            import mani_skill.envs  # noqa: F401  (registers the tasks)

            kwargs: dict[str, Any] = {"obs_mode": "none", "control_mode": CONTROL_MODE, "sim_backend": "cpu"}
            if self.robot:
                kwargs["robot_uids"] = self.robot
            self._env = gym.make(self.task, **kwargs)
        return self._env

    def plan(self, seed: int, *, keep_states: bool = False) -> Plan:
        """Run the solution with ``seed`` on the twin and return what it applied.

        The solver's prints (mplib's "screw plan failed") are captured: the first line of
        them is the :attr:`Plan.error` of a failed plan. Deterministic: the same seed gives the
        same plan (screw motions only; no sampling-based planner is used by these solutions).
        """
        solve = _solution(self.task)
        twin = _RecordingEnv(self._twin(), keep_states=keep_states)
        printed = io.StringIO()
        error: str | None = None
        try:
            with contextlib.redirect_stdout(printed):
                result = solve(twin, seed=int(seed), debug=False, vis=False)
        except Exception as exc:  # ManiSkill's runner counts these as failed plans too
            result, error = -1, f"{type(exc).__name__}: {exc}"
        if result == -1 and error is None:
            error = (printed.getvalue().strip().splitlines() or ["the solver returned -1"])[0]
        info = twin.last_info or {}
        success = error is None and bool(np.asarray(_numpy(info.get("success", False))).reshape(-1)[0])
        assert twin.initial_state is not None, "the solution did not reset the env"
        dim = int(np.prod(twin.env.unwrapped.single_action_space.shape))
        if twin.actions:
            actions = np.stack(twin.actions)
            hold = actions[-1].copy()
        else:
            actions, hold = np.zeros((0, dim), np.float32), _start_hold(twin, seed, dim)
        return Plan(
            task=self.task,
            seed=int(seed),
            actions=actions,
            hold=hold,
            initial_state=twin.initial_state,
            success=success,
            error=error,
            states=np.stack(twin.states) if keep_states and twin.states else None,
        )

    def close(self) -> None:
        """Close the twin env (idempotent)."""
        if self._env is not None:
            with contextlib.suppress(Exception):
                self._env.close()
            self._env = None


def _start_hold(twin: _RecordingEnv, seed: int, dim: int) -> np.ndarray:
    """The action that holds the robot in its start pose of episode ``seed``, gripper open."""
    twin.env.reset(seed=int(seed))
    qpos = _numpy(twin.env.unwrapped.agent.robot.get_qpos()).reshape(-1)
    return np.concatenate([qpos[: dim - 1], [1.0]]).astype(np.float32)


def _numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


# -- the ``maniskill`` environment's privileged provider ``motion_plan`` --------------------


#: The ``environment.privileged`` entry that builds :class:`MotionPlanProvider`.
PROVIDER = "motion_plan"
#: Key of ``observation["privileged"]`` holding each env's planned action for this step,
#: ``float32 (N, action_dim)``.
ACTION_KEY = "motion_plan_action"
#: Key of ``observation["privileged"]`` saying whether the solver finished the episode's plan
#: (``bool (N,)``; false: it failed, the actions are those it applied before failing).
PLANNED_KEY = "motion_plan_ok"


class MotionPlanProvider:
    """``environment.privileged: [motion_plan]``: plans each episode in the env worker and
    hands the planned action of the current step to the policy (``maniskill_motion_planner``).

    Hook (what the ``maniskill`` environment gives a provider, in the worker):
    ``env.config`` (``task``, ``control_mode``, ``sim_backend``, ``robot``),
    ``env.num_envs``, ``env.maniskill_env(env_id)`` (the unwrapped one-env ManiSkill env of
    ``env_id`` on the CPU backend) and ``env.elapsed_steps(env_id)``; it calls
    :meth:`reset` after each env's ManiSkill ``reset(seed=seed)`` and :meth:`observe` for every
    observation, stacking the rows into ``observation["privileged"]``:
    ``{ACTION_KEY: float32 (N, action_dim), PLANNED_KEY: bool (N,)}``. :meth:`reset` resets the
    ManiSkill env of ``env_id`` once more, with the same seed and a fresh scene (the env's
    observation of its own reset shows the same state, which :meth:`Plan.check_start`
    asserts, and, measured on PickCube with ``panda_wristcam``, the same camera images) unless
    the environment's own reset rebuilt the scene already (``fresh_scene``, its default on the
    CPU backend: ``env.fresh_scene_resets``).

    Raises (constructor; the expert's ``validate_run`` refuses these configs before a run):
        ValueError: ``control_mode`` is not ``pd_joint_pos``, the backend is not ``cpu``, or
            the task has no solution / the robot is not a Panda.
    """

    def __init__(self, env: Any) -> None:
        config = env.config
        check_config(config.task, config.control_mode, config.sim_backend, getattr(config, "robot", None))
        self.env = env
        self.planner = MotionPlanner(config.task, getattr(config, "robot", None))
        self.plans: dict[int, Plan] = {}

    def reset(self, env_id: int, seed: int) -> None:
        """Plan env ``env_id``'s episode of ``seed`` on the twin, reset the evaluated env again
        with the same seed and a fresh scene (``options={"reconfigure": True}``, as the twin;
        module docstring) and check that it starts where the twin did
        (:meth:`Plan.check_start`: ``RuntimeError`` if not)."""
        plan = self.planner.plan(seed)
        evaluated = self.env.maniskill_env(env_id)
        if not getattr(self.env, "fresh_scene_resets", False):  # the env's own reset rebuilt nothing
            evaluated.reset(seed=int(seed), options={"reconfigure": True})
        plan.check_start(_flat_state(evaluated), f"env {env_id}")
        self.plans[int(env_id)] = plan

    def observe(self, env_id: int) -> dict[str, np.ndarray]:
        """``{ACTION_KEY: float32 (action_dim,), PLANNED_KEY: bool ()}`` for the env's next step."""
        plan = self.plans[int(env_id)]
        return {
            ACTION_KEY: plan.action(self.env.elapsed_steps(env_id)).copy(),
            PLANNED_KEY: np.asarray(plan.error is None),
        }

    def close(self) -> None:
        self.planner.close()


def check_config(task: str, control_mode: str, sim_backend: str = "cpu", robot: str | None = None) -> None:
    """Raise ``ValueError`` (with the key and the fix) unless the solutions can drive this
    env exactly: a solved task, ``pd_joint_pos``, the ``cpu`` backend, a Panda."""
    if task not in SOLVED_TASKS:
        raise ValueError(
            f"environment.task {task} has no ManiSkill motion-planning solution (mani-skill 3.0.1 has "
            f"{', '.join(SOLVED_TASKS)})"
        )
    if control_mode != CONTROL_MODE:
        raise ValueError(
            f"environment.control_mode is {control_mode!r}, but ManiSkill's motion planners emit {CONTROL_MODE} "
            f"actions (absolute joint targets): set environment.control_mode: {CONTROL_MODE} for the expert"
        )
    if sim_backend != "cpu":
        raise ValueError(
            f"environment.sim_backend is {sim_backend!r}: the motion planners plan on a CPU twin env and their "
            "replay is exact only on the CPU backend; set environment.sim_backend: cpu for the expert"
        )
    if robot not in ROBOTS:
        raise ValueError(f"environment.robot is {robot!r}: ManiSkill's motion-planning solutions drive the Panda (panda, panda_wristcam)")


def privileged_provider(env: Any) -> MotionPlanProvider:
    """The factory ``arena_maniskill.config.PRIVILEGED_PROVIDERS["motion_plan"]`` names."""
    return MotionPlanProvider(env)
