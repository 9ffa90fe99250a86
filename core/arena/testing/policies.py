"""Small local policies for tests of arena and of plugins.

- :class:`ToyReachExpert`: the scripted expert of :class:`arena.testing.envs.ToyReachEnv`: it
  reads the state (``policy.position`` and ``policy.target``) and moves straight at the target
  (``experiment type: arena.testing.policies:ToyReachExpert``). Image perturbations leave it
  unaffected; state noise, action noise and action delay do not.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from arena.policies.base import PolicyBase, PolicyConfig

__all__ = ["ToyReachExpert", "ToyReachExpertConfig"]


class ToyReachExpertConfig(PolicyConfig):
    """Options of the toy reaching expert."""

    gain: float = Field(10.0, gt=0, description="action = gain * (target - position), clipped to [-1, 1]")


class ToyReachExpert(PolicyBase[ToyReachExpertConfig]):
    """``float32 (N, 2)`` actions ``clip(gain * (target - position), -1, 1)`` from the state."""

    name = "toy_reach_expert"
    Config = ToyReachExpertConfig

    def get_action(self, env: Any, observation: dict[str, Any]) -> np.ndarray:
        state = observation["policy"]
        delta = np.asarray(state["target"], np.float32) - np.asarray(state["position"], np.float32)
        return np.clip(self.config.gain * delta, -1.0, 1.0).astype(np.float32)
