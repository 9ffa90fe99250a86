"""Local baseline policies that work with any environment: zero, random and replayed actions.

Each returns ``float32 (num_envs, action_dim)`` with ``action_dim = env.action_space.shape[0]``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field

from arena.errors import ConfigError
from arena.policies.base import PolicyBase, PolicyConfig

if TYPE_CHECKING:
    from arena.envs.base import Environment


def _action_dim(env: Environment) -> int:
    return int(np.prod(env.action_space.shape))


class ZeroActionConfig(PolicyConfig):
    """``zero_action`` has no options."""


class ZeroActionPolicy(PolicyBase[ZeroActionConfig]):
    """Always the zero action (a "do nothing" baseline; zero need not lie inside the Box)."""

    name = "zero_action"
    Config = ZeroActionConfig

    def get_action(self, env: Environment, observation: dict[str, Any]) -> np.ndarray:
        return np.zeros((env.num_envs, _action_dim(env)), np.float32)


class RandomActionConfig(PolicyConfig):
    """Options of ``random_action``."""

    seed: int = Field(0, ge=0, description="policy seed, combined with each episode's seed")
    action_scale: float = Field(
        1.0, ge=0, description="fraction of the action space's half-range to sample from"
    )


class RandomActionPolicy(PolicyBase[RandomActionConfig]):
    """Uniform random actions around the centre of ``env.action_space``.

    Env ``e`` samples ``centre + action_scale * half_range * U(-1, 1)`` from its own numpy
    Generator, reseeded by ``reset`` from ``(config.seed, episode seed)``, so an episode's
    actions depend only on its seed and step, never on which env ran it. Unbounded
    dimensions of the Box are treated as ``[-1, 1]`` (a one-sided bound as that side +- 1).
    """

    name = "random_action"
    Config = RandomActionConfig

    def __init__(self, config: RandomActionConfig) -> None:
        super().__init__(config)
        self._rngs: list[np.random.Generator] = []

    def start(self, env: Environment) -> None:
        self._ensure(env.num_envs)

    def reset(self, env_ids: list[int] | None = None, seeds: list[int] | None = None) -> None:
        if env_ids is None:
            env_ids = list(range(len(self._rngs)))
        if seeds is not None and len(seeds) != len(env_ids):
            raise ValueError(f"{len(env_ids)} env_ids but {len(seeds)} seeds")
        if env_ids:
            self._ensure(max(env_ids) + 1)
        for k, env_id in enumerate(env_ids):
            if seeds is None:  # no episode seed: fall back to the env id (documented)
                self._rngs[env_id] = self._unseeded(env_id)
            else:
                self._rngs[env_id] = np.random.default_rng([self.config.seed, 1, int(seeds[k])])

    def get_action(self, env: Environment, observation: dict[str, Any]) -> np.ndarray:
        self._ensure(env.num_envs)
        low = np.asarray(env.action_space.low, np.float64).reshape(-1)
        high = np.asarray(env.action_space.high, np.float64).reshape(-1)
        low, high = _finite_bounds(low, high)
        centre, half = (low + high) / 2, (high - low) / 2 * self.config.action_scale
        noise = np.zeros((env.num_envs, low.size))
        for e in range(env.num_envs):
            if self.is_active(e):  # an idle env draws nothing (the rollout repeats its last action)
                noise[e] = self._rngs[e].uniform(-1.0, 1.0, low.size)
        return np.clip(centre + half * noise, low, high).astype(np.float32)

    def _ensure(self, n: int) -> None:
        while len(self._rngs) < n:
            self._rngs.append(self._unseeded(len(self._rngs)))

    def _unseeded(self, env_id: int) -> np.random.Generator:
        return np.random.default_rng([self.config.seed, 0, env_id])


def _finite_bounds(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    low_ok, high_ok = np.isfinite(low), np.isfinite(high)
    new_low = np.where(low_ok, low, np.where(high_ok, high - 1.0, -1.0))
    new_high = np.where(high_ok, high, np.where(low_ok, low + 1.0, 1.0))
    return new_low, new_high


class ReplayConfig(PolicyConfig):
    """Options of ``replay``."""

    path: str = Field(
        description="actions file: .npz/.npy (loaded without pickle), .json (a list of rows "
        "or an object holding them under `key`) or .jsonl (one row, or one object, a line); "
        "relative paths are relative to the working directory"
    )
    key: str = Field("actions", description="array name in an .npz, or object key in JSON")
    loop: bool = Field(False, description="start over when the rows run out (else zeros)")


class ReplayPolicy(PolicyBase[ReplayConfig]):
    """Replays a recorded ``(T, action_dim)`` action sequence in every env.

    Each env plays rows ``0, 1, ...`` from its episode start (``reset`` rewinds it); past row
    ``T - 1`` it returns zeros, or starts over when ``loop`` is set.

    Raises:
        ConfigError: naming the file, when it cannot be read, has no ``key``, is not a finite
            2-D numeric array, or its row width differs from the env's action dimension.
    """

    name = "replay"
    Config = ReplayConfig

    def __init__(self, config: ReplayConfig) -> None:
        super().__init__(config)
        self.actions = load_actions(config.path, config.key)
        self._cursor = np.zeros(0, np.int64)
        self._checked_dim: int | None = None

    def start(self, env: Environment) -> None:
        self._check(env)
        self._ensure(env.num_envs)

    def reset(self, env_ids: list[int] | None = None, seeds: list[int] | None = None) -> None:
        if env_ids is None:
            self._cursor[:] = 0
            return
        if env_ids:
            self._ensure(max(env_ids) + 1)
        self._cursor[list(env_ids)] = 0

    def get_action(self, env: Environment, observation: dict[str, Any]) -> np.ndarray:
        self._check(env)
        self._ensure(env.num_envs)
        steps = len(self.actions)
        out = np.zeros((env.num_envs, self.actions.shape[1]), np.float32)
        for e in range(env.num_envs):
            if not self.is_active(e):  # idle: the rollout repeats its last action
                continue
            row = int(self._cursor[e])
            if self.config.loop and steps:
                out[e] = self.actions[row % steps]
            elif row < steps:
                out[e] = self.actions[row]
            self._cursor[e] = row + 1
        return out

    def _check(self, env: Environment) -> None:
        dim = _action_dim(env)
        if self._checked_dim == dim:
            return
        if self.actions.shape[1] != dim:
            raise ConfigError(
                f"replay actions have {self.actions.shape[1]} columns but the environment's "
                f"action dimension is {dim}",
                file=self.config.path,
            )
        self._checked_dim = dim

    def _ensure(self, n: int) -> None:
        if len(self._cursor) < n:
            grown = np.zeros(n, np.int64)
            grown[: len(self._cursor)] = self._cursor
            self._cursor = grown


def load_actions(path: str | Path, key: str = "actions") -> np.ndarray:
    """Read a ``float32 (T, D)`` action array from ``.npz``/``.npy``/``.json``/``.jsonl``.

    Raises:
        ConfigError: naming ``path`` (unreadable, unknown suffix, missing key, bad shape or
            non-finite values).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    try:
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                if key not in archive.files:
                    raise ConfigError(
                        f"no array {key!r} in the archive (it has {', '.join(archive.files)})",
                        file=str(path),
                    )
                data: Any = archive[key]
        elif suffix == ".npy":
            data = np.load(path, allow_pickle=False)
        elif suffix == ".json":
            data = _from_json(json.loads(path.read_text()), key, path)
        elif suffix == ".jsonl":
            lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
            data = [_from_json(json.loads(ln), key, path) for ln in lines]
        else:
            raise ConfigError(
                "replay actions must be a .npz, .npy, .json or .jsonl file", file=str(path)
            )
    except ConfigError:
        raise
    except (OSError, ValueError) as err:  # missing file, bad JSON, pickled object array
        raise ConfigError(f"cannot read replay actions: {err}", file=str(path)) from err
    try:
        actions = np.asarray(data, dtype=np.float32)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"replay actions are not a numeric array: {err}", file=str(path)) from err
    if actions.ndim != 2:
        raise ConfigError(
            f"replay actions must be a 2-D (steps, action_dim) array, got shape {actions.shape}",
            file=str(path),
        )
    if not np.all(np.isfinite(actions)):
        raise ConfigError("replay actions contain NaN or infinite values", file=str(path))
    return actions


def _from_json(value: Any, key: str, path: Path) -> Any:
    if isinstance(value, dict):
        if key not in value:
            raise ConfigError(
                f"no key {key!r} in the JSON object (it has {', '.join(map(str, value))})",
                file=str(path),
            )
        return value[key]
    return value
