"""The whole plugin contract: one hook per kind of contribution, register-callback style.

A plugin is a module with ``@hookimpl`` functions, published through the entry-point group
``arena`` (``[project.entry-points.arena] NAME = "package.plugin"``).
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("arena")
hookimpl = pluggy.HookimplMarker("arena")


@hookspec
def arena_register_policies(register):
    """Call ``register(name, policy_cls)``; the config class is ``policy_cls.Config``."""


@hookspec
def arena_register_embodiment_adapters(register):
    """Call ``register(family, name, adapter_cls)``, e.g. ``("openpi", "droid", DroidAdapter)``."""


@hookspec
def arena_register_environments(register):
    """Call ``register(name, env_cls)``; the config class is ``env_cls.Config``."""


@hookspec
def arena_register_server_tasks(register):
    """Call ``register(policy_name, factory)``; ``factory(policy_config) -> ServerTask``."""


@hookspec
def arena_register_servers(register):
    """Call ``register(name, model_factory)``; ``model_factory(**options)`` returns a Model."""


@hookspec
def arena_register_launch_backends(register):
    """Call ``register(name, backend_cls)``; its options class is ``backend_cls.Config``."""


@hookspec
def arena_register_result_sinks(register):
    """Call ``register(name, sink_cls)``; a :class:`arena.sinks.ResultSink`, options ``sink_cls.Config``."""


@hookspec
def arena_register_commands(app):
    """Add typer sub-commands to the ``arena`` CLI ``app``."""
