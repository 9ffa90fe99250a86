"""Simulators behind the vectorized :class:`arena.envs.base.Environment` interface."""

from arena.envs.base import Environment, EnvironmentConfig
from arena.envs.serial import SerialEnvironment

__all__ = ["Environment", "EnvironmentConfig", "SerialEnvironment"]
