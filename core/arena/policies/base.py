"""``PolicyBase``: what every policy, local or remote, implements.

Value types: observations arrive in the Arena layout (see :mod:`arena.envs.base`); a policy
returns float numpy actions of shape ``(num_envs, action_dim)``: float64 for the remote
policies (the server's values, unrounded), float32 or float64 for local ones; each
environment casts to its simulator's dtype (:meth:`arena.envs.base.Environment.step`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from arena.envs.base import Environment


class PolicyConfig(BaseModel):
    """Base of every policy config. Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")

    def variant(self) -> str | None:
        """The policy's variant for records and reports (e.g. ``pi05``); ``None`` if it has none."""
        return getattr(self, "policy_variant", None)

    def live_chunk_rows(self) -> int | None:
        """Rows of each action chunk this policy returns, when its config fixes them (live
        mode's validation refuses a schedule they cannot fill); ``None``: known at run time only."""
        return None


ConfigT = TypeVar("ConfigT", bound=PolicyConfig)


class PolicyBase(Generic[ConfigT]):
    """A policy built from its typed config.

    Life cycle, driven by the rollout: ``start(env)`` once, ``set_task_description(text)``,
    then ``reset(env_ids, seeds)`` whenever envs start episodes, ``set_active(env_ids)``
    whenever the set of envs running an episode changes, ``get_action`` every step, and
    finally ``close()``.

    **Idle envs.** When the work queue runs dry, envs whose episode ended get no new one but
    are still stepped with the batch. The rollout applies each idle env's last applied action
    again (safe for absolute joint targets, unlike zeros), whatever ``get_action`` returns in
    its row; so a policy must not spend work (above all, server requests) on inactive envs:
    ``is_active(env_id)`` says which are running (all, before the first ``set_active``).

    Subclasses set ``name`` (the registered name) and ``Config``.
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type[PolicyConfig]] = PolicyConfig

    def __init__(self, config: ConfigT) -> None:
        self.config = config
        self.task_description: str | None = None
        self.active_envs: frozenset[int] | None = None

    @property
    def is_remote(self) -> bool:
        """Whether actions come from a policy server (and so need a ServerTask)."""
        return False

    def start(self, env: Environment) -> None:
        """Called once before the first reset. Remote policies open their connections here."""

    def set_task_description(self, text: str | None) -> str | None:
        """Store the language instruction sent with every request; returns it."""
        self.task_description = text
        return text

    def reset(self, env_ids: list[int] | None = None, seeds: list[int] | None = None) -> None:
        """Forget per-env state of ``env_ids`` (all envs when ``None``).

        ``seeds[i]`` is the episode seed of ``env_ids[i]``; a stochastic policy reseeds from it
        so outcomes never depend on which env ran which episode.
        """

    def set_active(self, env_ids: Sequence[int]) -> None:
        """The envs running an episode from the next ``get_action`` on (the rest are idle).

        Called by the rollout whenever the set changes. An override must call this one (or
        keep ``active_envs`` itself) so :meth:`is_active` stays right.
        """
        self.active_envs = frozenset(int(e) for e in env_ids)

    def is_active(self, env_id: int) -> bool:
        """Whether env ``env_id`` runs an episode (every env, until ``set_active`` is called)."""
        return self.active_envs is None or env_id in self.active_envs

    def get_action(self, env: Environment, observation: dict[str, Any]) -> np.ndarray:
        """Return float ``(num_envs, action_dim)`` actions for the batched ``observation``.

        Rows of inactive envs (:meth:`is_active`) are ignored: compute nothing for them.

        Raises:
            arena.errors.PolicyError: infrastructure failed for some envs (their episodes end
                as ``error``, never ``failure``).
        """
        raise NotImplementedError

    def episode_info(self, env_id: int) -> dict[str, Any]:
        """Per-episode extras for the record of ``env_id``'s episode that just ended.

        Remote policies return request latency stats and the server's timing; the default has
        nothing. Called once per episode end, before ``reset``.
        """
        return {}

    def run_warnings(self) -> list[str]:
        """Caveats about the episodes this policy served, for the run's warnings (``run_result.json``,
        ``status.json``, the report), read when the rollout ends; none by default. E.g. a server
        that had to drop an env's state mid-episode."""
        return []

    def server_metadata(self) -> dict[str, Any] | None:
        """What the policy server said about itself (the openpi protocol's metadata frame,
        GR00T's modality config, DreamZero's greeting), recorded with the run's result so it
        names the model that answered; ``None`` for a local policy or before a server answered."""
        return None

    def close(self) -> None:
        """Release resources. Idempotent; a remote client disconnects but never stops a server."""


def latency_stats(samples_ms: Sequence[float]) -> dict[str, Any] | None:
    """Summarize request latencies (milliseconds) for the ``latency`` field of :meth:`PolicyBase.episode_info`.

    Returns ``{"requests", "mean_ms", "p50_ms", "p95_ms", "max_ms"}`` (nearest-rank
    percentiles), or ``None`` for no samples.
    """
    if not samples_ms:
        return None
    ordered = sorted(float(s) for s in samples_ms)
    n = len(ordered)

    def rank(q: float) -> float:
        return ordered[min(n - 1, max(0, math.ceil(q * n) - 1))]

    return {
        "requests": n,
        "mean_ms": round(sum(ordered) / n, 3),
        "p50_ms": round(rank(0.50), 3),
        "p95_ms": round(rank(0.95), 3),
        "max_ms": round(ordered[-1], 3),
    }
