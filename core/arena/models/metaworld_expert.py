"""Meta-World's scripted experts as a policy-server model (``arena serve metaworld-expert``).

Request (one env, openpi-style keys)::

    {"observation/state": float (39,) or (1, 39),   # Meta-World's goal-observable state
     "task": str,                                    # e.g. "pick-place-v3"
     "prompt": str}                                  # optional, ignored

Reply: ``{"actions": float32 (1, 4)}`` in ``[-1, 1]`` (an action chunk of one row).

The model is stateless (Meta-World's experts are functions of the current state), so one
server answers runs of different tasks and any number of envs at once.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from arena.envs.metaworld import ACTION_DIM, STATE_DIM, TASKS
from arena.extras import import_extra
from arena.rendering import configure_headless_rendering
from arena.errors import ConfigError


class MetaWorldExpertModel:
    """The :class:`arena.models.model.Model` of Meta-World's scripted expert policies.

    Raises:
        ConfigError: from the constructor, for any option (it takes none).
        ValueError: from :meth:`infer`, for an unknown task or a state that is not 39 floats.
    """

    def __init__(self, **options: Any) -> None:
        if options:
            raise ConfigError(
                f"metaworld-expert takes no options, got {', '.join(sorted(options))}"
            )
        self._experts: dict[str, Any] = {}
        self._policy_map: dict[str, type] | None = None

    def metadata(self) -> dict[str, Any]:
        return {"model": "metaworld-expert", "action_dim": ACTION_DIM, "tasks": list(TASKS)}

    def load(self) -> None:
        """Import Meta-World's expert policies (no weights; experts are built per task lazily)."""
        if self._policy_map is None:
            configure_headless_rendering()
            policies = import_extra("metaworld.policies", "metaworld", "the Meta-World expert server")
            self._policy_map = dict(policies.ENV_POLICY_MAP)

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        """Return ``{"actions": float32 (1, 4)}``: the task's expert action for ``obs``."""
        task = obs.get("task")
        if isinstance(task, bytes):
            task = task.decode()
        expert = self._expert(task)
        if "observation/state" not in obs:
            raise ValueError("request has no 'observation/state' (float (39,))")
        state = np.asarray(obs["observation/state"], dtype=np.float64).reshape(-1)
        if state.shape != (STATE_DIM,) or not np.all(np.isfinite(state)):
            raise ValueError(
                f"'observation/state' must be {STATE_DIM} finite floats, "
                f"got shape {np.shape(obs['observation/state'])}"
            )
        with warnings.catch_warnings():
            # Experts' gains may saturate; Meta-World warns on every such step.
            warnings.simplefilter("ignore", UserWarning)
            action = np.asarray(expert.get_action(state), dtype=np.float32)
        return {"actions": np.clip(action, -1.0, 1.0).reshape(1, ACTION_DIM)}

    def infer_batch(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``infer`` of every request, in order."""
        return [self.infer(obs) for obs in batch]

    def _expert(self, task: Any) -> Any:
        if task not in self._experts:
            if not isinstance(task, str) or task not in TASKS:
                raise ValueError(
                    f"unknown Meta-World task {task!r}; known tasks: {', '.join(TASKS)}"
                )
            self.load()
            self._experts[task] = self._policy_map[task]()
        return self._experts[task]
