"""Typed environment factories (IsaacLab-Arena's interface)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Generic, TypeVar


@dataclass
class ArenaEnvironmentCfg:
    """Marks a typed environment configuration."""


CfgT = TypeVar("CfgT", bound=ArenaEnvironmentCfg)


class ArenaEnvironmentFactory(ABC, Generic[CfgT]):
    name: str | None = None

    @abstractmethod
    def build(self, cfg: CfgT):
        """Return an ``IsaacLabArenaEnvironment``."""
