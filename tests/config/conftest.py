"""Fake components registered on a fresh PluginManager, so the experiment model is tested alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from arena.envs.base import Environment, EnvironmentConfig
from arena.hookspecs import hookimpl
from arena.plugins import PluginManager
from arena.policies.base import PolicyBase, PolicyConfig


class FakeEnvConfig(EnvironmentConfig):
    task: str = Field(description="task name, e.g. reach")
    horizon: int = Field(100, ge=1, description="steps")
    options: dict[str, Any] = Field(default_factory=dict)


class FakeEnv(Environment):
    name = "fake_env"
    Config = FakeEnvConfig
    success_key = "success"


class OtherEnvConfig(EnvironmentConfig):
    level: int = 1


class OtherEnv(Environment):
    name = "other_env"
    Config = OtherEnvConfig
    success_key = "success"


class FakePolicyConfig(PolicyConfig):
    scale: float = Field(1.0, gt=0)


class FakePolicy(PolicyBase[FakePolicyConfig]):
    name = "fake_policy"
    Config = FakePolicyConfig


class FakeRemoteConfig(PolicyConfig):
    remote_host: str = "localhost"
    remote_port: int = Field(8000, ge=1, le=65535)
    open_loop_horizon: int = Field(8, ge=1, description="actions replayed per chunk")
    single_env_only: bool = False

    def validate_run(self, run: Any) -> None:
        if self.single_env_only and run.environment_builder.num_envs > 1:
            raise ValueError("this policy serves one env only; set environment_builder.num_envs: 1")


class FakeRemotePolicy(PolicyBase[FakeRemoteConfig]):
    name = "fake_remote"
    Config = FakeRemoteConfig


class LocalBackend:
    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        jobs: int = Field(1, ge=1, description="runs at a time")


class SlurmBackend:
    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        partition: str = "cpu"
        time_limit_min: int = Field(60, gt=0)


class FakePlugin:
    @hookimpl
    def arena_register_policies(self, register):
        register("fake_policy", FakePolicy)
        register("fake_remote", FakeRemotePolicy)

    @hookimpl
    def arena_register_environments(self, register):
        register("fake_env", FakeEnv)
        register("other_env", OtherEnv)

    @hookimpl
    def arena_register_launch_backends(self, register):
        register("local", LocalBackend)
        register("slurm", SlurmBackend)


@pytest.fixture(scope="session")
def manager() -> PluginManager:
    pm = PluginManager()
    pm.register(FakePlugin(), name="fake")
    return pm


class _Environments:
    """A plugin registering the environments it is given (name -> class)."""

    def __init__(self, environments: dict[str, type]) -> None:
        self.environments = environments

    @hookimpl
    def arena_register_environments(self, register):
        for name, cls in self.environments.items():
            register(name, cls)


@pytest.fixture
def with_environments(manager: PluginManager):
    """with_environments(name=Class, ...) -> ``manager`` with those environments registered too
    (until the test ends)."""
    added: list[str] = []

    def _register(**environments: type) -> PluginManager:
        name = f"test-environments-{len(added)}"
        manager.register(_Environments(environments), name=name)
        added.append(name)
        return manager

    yield _register
    for name in added:
        manager.unregister(name=name)


@pytest.fixture
def write(tmp_path: Path):
    """write(text, name="exp.yaml") -> path of a new experiment file."""

    def _write(text: str, name: str = "exp.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return _write


VALID = """\
launch:
  backend: local
shared:
  environment: {type: fake_env, task: reach}
  environment_builder: {num_envs: 2}
  rollout_limit: {num_episodes: 20}
runs:
  alpha:
    policy: {type: fake_policy}
  beta:
    policy: {type: fake_remote, open_loop_horizon: 4}
"""


@pytest.fixture
def valid_text() -> str:
    return VALID
