"""Environment conformance: what every :class:`arena.envs.base.Environment` must do, in seconds.

:func:`check_environment` builds the environment, resets a few envs with given seeds, takes a
few steps and checks, naming every violation at once:

* **the observation layout** (:mod:`arena.envs.base`): a dict; ``camera_obs`` images ``uint8
  (N, H, W, 3)``; ``policy`` vectors floating ``(N, D)``; ``task``, when present, ``N``
  strings; the same keys, shapes and dtypes after every step;
* **reset/step return types**: ``reset_envs`` returns the observation; ``step`` returns
  ``(observation, reward float (N,), terminated bool (N,), truncated bool (N,), info dict)``;
  ``action_space`` is a 1-D ``Box``;
* **the success key**: the class declares ``success_key`` and ``info`` holds it as ``(N,)``
  (:func:`arena.envs.base.read_success`); each declared episode metric is in ``info`` as ``(N,)``;
* **records**: ``episode_info`` and ``protocol`` are JSON-able; ``check_env_id`` refuses an
  env id out of range;
* **seeding across processes**: the same seeds give the same first observation in another
  process (the env built again in environment workers, :func:`arena.envs.workers.build_environment`
  under this interpreter: one, or one per env for a one-env-per-process simulator), so
  records never depend on where an env ran;
* **close** twice (idempotent), in both processes.

A simulator that needs its benchmark venv is checked there: :func:`check_environment_in_venv`
runs this module under the venv's interpreter (``python -m arena.testing.environments``).
Keep the calls cheap: small images, a few steps, two envs.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["EnvironmentConformanceError", "check_environment", "check_environment_in_venv"]


class EnvironmentConformanceError(AssertionError):
    """The environment breaks its contract; ``problems`` lists every violation found."""

    def __init__(self, env_name: str, problems: Sequence[str]) -> None:
        super().__init__(f"environment {env_name} breaks the Environment contract:\n- " + "\n- ".join(problems))
        self.problems = list(problems)


def neutral_actions(env: Any) -> np.ndarray:
    """``float64 (N, A)``: the middle of each bounded action dimension, 0 where unbounded."""
    low = np.asarray(env.action_space.low, np.float64).reshape(-1)
    high = np.asarray(env.action_space.high, np.float64).reshape(-1)
    middle = np.where(np.isfinite(low) & np.isfinite(high), (low + high) / 2.0, 0.0)
    return np.repeat(middle[None], env.num_envs, axis=0)


def check_environment(
    env_cls: type,
    config: Any,
    *,
    num_envs: int = 2,
    seeds: Sequence[int] = (3, 11),
    steps: int = 3,
    cameras: bool = False,
    actions: Callable[[Any], np.ndarray] = neutral_actions,
    across_processes: bool = True,
    render: bool | None = None,
) -> dict[str, Any]:
    """Check ``env_cls`` built from ``config`` against the Environment contract (module doc).

    Args:
        num_envs: envs to build (``seeds[k]`` resets env ``k``; more envs than seeds reset
            the rest with seed 0).
        steps: steps taken with ``actions(env)`` (default: the middle of the action space).
        cameras: build with cameras.
        render: check ``render(0)`` (default: when ``cameras``): a ``uint8 (H, W, 3)`` frame.
        across_processes: also build the env in a worker process and compare the first
            observation (off only for a simulator that cannot run twice on one machine).

    Returns:
        ``{"observation": {key path: [shape, dtype]}, "action_dim", "success_key",
        "protocol", "render": [shape, dtype, pixel std] or None}`` for further assertions.

    Raises:
        EnvironmentConformanceError: naming every violation found.
    """
    from arena.envs.base import declared_success_key
    from arena.errors import SuccessSignalError

    name = f"{env_cls.__module__}.{env_cls.__qualname__}"
    problems: list[str] = []
    try:
        success_key = declared_success_key(env_cls)
    except SuccessSignalError as exc:
        raise EnvironmentConformanceError(name, [str(exc)]) from None
    ids = list(range(num_envs))
    episode_seeds = [int(seeds[k]) if k < len(seeds) else 0 for k in ids]
    env = env_cls(config, num_envs=num_envs, cameras=cameras)
    try:
        first = env.reset_envs(ids, episode_seeds)
        layout = _layout(first, num_envs, "reset_envs", problems)
        action_dim = _action_dim(env, problems)
        metrics = env_cls.episode_metrics_for(config)
        for step in range(steps):
            if action_dim is None:
                break
            out = env.step(actions(env))
            _check_step(env, out, num_envs, layout, metrics, f"step {step + 1}", problems)
        _check_records(env, ids, problems)
        rendered = None
        if cameras if render is None else render:
            frame = np.asarray(env.render(0))
            rendered = [list(frame.shape), str(frame.dtype), float(frame.std())]
            if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[-1] != 3:
                problems.append(f"render(0) is {frame.dtype} {frame.shape}; expected uint8 (H, W, 3)")
        protocol = _json_or_problem(env.protocol(), "protocol()", problems)
    finally:
        _close_twice(env, "in-process", problems)
    if across_processes:
        _check_other_process(env_cls, config, num_envs, cameras, ids, episode_seeds, first, problems)
    if problems:
        raise EnvironmentConformanceError(name, problems)
    return {
        "observation": layout, "action_dim": action_dim, "success_key": success_key, "protocol": protocol,
        "render": rendered,
    }


def _layout(obs: Any, n: int, where: str, problems: list[str]) -> dict[str, list]:
    """``{key path: [shape, dtype]}`` of an observation, its layout checked."""
    if not isinstance(obs, Mapping):
        problems.append(f"{where} returned {type(obs).__name__}; expected the observation dict")
        return {}
    layout: dict[str, list] = {}

    def walk(value: Any, path: str) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, f"{path}/{key}" if path else str(key))
        elif isinstance(value, np.ndarray):
            layout[path] = [list(value.shape), str(value.dtype)]
        elif isinstance(value, list):
            layout[path] = [[len(value)], "list"]
        else:
            layout[path] = [[], type(value).__name__]

    walk(obs, "")
    for key, image in (obs.get("camera_obs") or {}).items():
        image = np.asarray(image)
        if image.dtype != np.uint8 or image.ndim != 4 or image.shape[0] != n or image.shape[-1] != 3:
            problems.append(f"{where}: camera_obs/{key} is {image.dtype} {image.shape}; expected uint8 ({n}, H, W, 3)")
    for key, vector in (obs.get("policy") or {}).items():
        vector = np.asarray(vector)
        if not np.issubdtype(vector.dtype, np.floating) or vector.ndim != 2 or vector.shape[0] != n:
            problems.append(f"{where}: policy/{key} is {vector.dtype} {vector.shape}; expected float ({n}, D)")
    task = obs.get("task")
    if task is not None and not (isinstance(task, list) and len(task) == n and all(isinstance(t, str) for t in task)):
        problems.append(f"{where}: task is {task!r:.80}; expected a list of {n} strings")
    return layout


def _action_dim(env: Any, problems: list[str]) -> int | None:
    import gymnasium as gym

    space = getattr(env, "action_space", None)
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        problems.append(f"action_space is {space!r}; expected a 1-D gymnasium Box of one env's action")
        return None
    return int(space.shape[0])


def _check_step(env: Any, out: Any, n: int, layout: dict, metrics: Mapping[str, str], where: str, problems: list[str]) -> None:
    from arena.envs.base import read_success
    from arena.errors import SuccessSignalError

    if not (isinstance(out, tuple) and len(out) == 5):
        problems.append(f"{where} returned {type(out).__name__}; expected (observation, reward, terminated, truncated, info)")
        return
    obs, reward, terminated, truncated, info = out
    if _layout(obs, n, where, problems) != layout:
        problems.append(f"{where}: the observation's keys, shapes or dtypes differ from reset_envs'")
    for label, value, kind in (("reward", reward, "f"), ("terminated", terminated, "b"), ("truncated", truncated, "b")):
        value = np.asarray(value)
        ok = value.shape == (n,) and (value.dtype.kind in "fiu" if kind == "f" else value.dtype == np.bool_)
        if not ok:
            problems.append(f"{where}: {label} is {value.dtype} {value.shape}; expected {'float' if kind == 'f' else 'bool'} ({n},)")
    if not isinstance(info, dict):
        problems.append(f"{where}: info is {type(info).__name__}; expected a dict")
        return
    try:
        read_success(env, info, n)
    except SuccessSignalError as exc:
        problems.append(f"{where}: {exc}")
    for key in metrics:
        if key not in info or np.asarray(info[key]).reshape(-1).shape != (n,):
            problems.append(f"{where}: episode metric '{key}' is not in info with one value per env")


def _check_records(env: Any, ids: list[int], problems: list[str]) -> None:
    for e in ids:
        _json_or_problem(env.episode_info(e), f"episode_info({e})", problems)
    try:
        env.check_env_id(len(ids))
    except ValueError:
        pass
    else:
        problems.append(f"check_env_id({len(ids)}) accepted an env id out of range")


def _json_or_problem(value: Any, where: str, problems: list[str]) -> Any:
    if not isinstance(value, dict):
        problems.append(f"{where} is {type(value).__name__}; expected a dict")
        return None
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        problems.append(f"{where} is not JSON-able: {exc}")
        return None


def _close_twice(env: Any, where: str, problems: list[str]) -> None:
    for attempt in ("close()", "a second close()"):
        try:
            env.close()
        except Exception as exc:  # noqa: BLE001 - reported as a violation
            problems.append(f"{where}: {attempt} raised {type(exc).__name__}: {exc}")
            return


def _check_other_process(
    env_cls: type, config: Any, n: int, cameras: bool, ids: list[int], seeds: list[int], first: Any, problems: list[str]
) -> None:
    """The same seeds in a worker process under this interpreter: the same observation."""
    from arena.envs.workers import build_environment

    workers = n if env_cls.envs_per_worker_for(config) == "one" else 1
    other_config = config.model_copy(update={"workers": workers, "python": sys.executable})
    other = build_environment(env_cls, other_config, num_envs=n, cameras=cameras)
    try:
        again = other.reset_envs(ids, seeds)
        for path, (a, b) in _leaves(first, again).items():
            if a is None or b is None:
                problems.append(f"seeding: {path} is in one process's first observation only")
            elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
                if not np.array_equal(np.asarray(a), np.asarray(b)):
                    problems.append(f"seeding: the same seeds {seeds} give another {path} in a second process")
            elif a != b:
                problems.append(f"seeding: the same seeds {seeds} give another {path} in a second process")
    finally:
        _close_twice(other, "worker process", problems)


def _leaves(a: Any, b: Any, path: str = "") -> dict[str, tuple[Any, Any]]:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out: dict[str, tuple[Any, Any]] = {}
        for key in list(a) + [k for k in b if k not in a]:
            out.update(_leaves(a.get(key), b.get(key), f"{path}/{key}" if path else str(key)))
        return out
    return {path: (a, b)}


def check_environment_in_venv(
    venv: str, env_cls: str, config: Mapping[str, Any], *, setup_command: str | None = None,
    env: Mapping[str, str] | None = None, timeout_s: float = 600, **options: Any,
) -> dict[str, Any]:
    """:func:`check_environment` under benchmark venv ``venv``'s interpreter (skipped when the
    venv is missing, failed under CI: :func:`arena.testing.venvs.benchmark_python`).

    ``env_cls`` is ``"package.module:Class"``; ``config`` the fields of its ``Config``;
    ``env`` extra environment variables (e.g. ``MUJOCO_GL``); ``options`` go to
    :func:`check_environment`. Returns its report.

    Raises:
        pytest.fail.Exception: the check failed (its problems in the message).
    """
    from arena.testing.venvs import run_in_venv

    spec = json.dumps({"env_cls": env_cls, "config": dict(config), "options": options})
    return run_in_venv(venv, "-m", "arena.testing.environments", spec, setup_command=setup_command, env=env, timeout_s=timeout_s)


def _main(argv: list[str]) -> int:
    """``python -m arena.testing.environments SPEC``: run :func:`check_environment` for the JSON
    ``SPEC`` (``env_cls``, ``config``, ``options``) and print its report (or the problems, on
    stderr, with exit status 1)."""
    spec = json.loads(argv[0])
    module, _, qualname = spec["env_cls"].partition(":")
    env_cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        env_cls = getattr(env_cls, part)
    try:
        report = check_environment(env_cls, env_cls.Config(**spec["config"]), **spec.get("options", {}))
    except EnvironmentConformanceError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
