"""Simulators behind the vectorized :class:`arena.envs.base.Environment` interface."""

from arena.envs.base import Environment, EnvironmentConfig

__all__ = ["Environment", "EnvironmentConfig"]
