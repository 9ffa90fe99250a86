"""What a plugin registers, declared in one call: ``declare(__name__, policies=..., ...)`` in its
``plugin.py`` writes the ``@hookimpl`` functions of :mod:`arena.hookspecs` on that module.

This sits above :mod:`arena.plugins` (the loader and registry) and :mod:`arena.venvcli` (the
venv command groups a plugin may add), so the hooks it writes may build either; importing it
costs no more than the loader: everything a hook needs is imported when the hook runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from arena.errors import PluginError
from arena.plugins import Lazy, load_reference

__all__ = ["VenvGroup", "declare"]


@dataclass(frozen=True)
class VenvGroup:
    """A command group ``arena NAME`` holding only ``setup`` for a benchmark venv
    (:func:`arena.venvcli.alias_app`): ``spec`` is the ``"module:attribute"`` of its
    :class:`arena.venvs.VenvSpec`, ``help`` the group's help line."""

    spec: str
    help: str


def declare(
    module_name: str,
    *,
    policies: Any = (),
    environments: Any = (),
    server_tasks: Any = (),
    servers: Any = (),
    launch_backends: Any = (),
    result_sinks: Any = (),
    adapters: dict[Any, str] | None = None,
    commands: dict[str, str | VenvGroup] | None = None,
    exporters: dict[str, str] | None = None,
) -> None:
    """Give the plugin module ``module_name`` (pass ``__name__``) one ``@hookimpl`` per kind it
    declares, so its ``plugin.py`` is a table of what it registers, not a page of hooks.

    Every value is a ``"package.module:attribute"`` reference. A named one (a dict entry) is
    imported when the registry is first asked for that name (:class:`arena.plugins.Table`); a
    list entry, whose name is its class's, and an adapter family's table when the registry is
    built; a command group when the CLI adds commands. So ``arena --help`` and a run stay fast
    whatever other plugins need, and a missing dependency fails only what uses it, naming the
    plugin and the hook.

    - ``policies``, ``environments``, ``server_tasks``, ``servers``, ``launch_backends``,
      ``result_sinks``: a dict ``{name: reference}``, or a list of references to classes that
      carry their registered name as ``cls.name``;
    - ``adapters``: ``{(family, name): reference to the adapter class}``, or
      ``{family: reference to a dict {name: adapter class}}``;
    - ``commands``: ``{group name: reference to a typer app}`` or ``{group name: VenvGroup}``;
    - ``exporters``: ``{name: reference to a function}``, added as ``arena export NAME``
      (:func:`arena.exporters.export_group`).

    A hook the module defines itself under the same attribute name would be replaced, so that
    is refused; a second implementation of one hook is written with pluggy's ``specname``.

    Raises:
        PluginError: the module already has an ``arena_register_<kind>`` attribute, or an
            argument has the wrong form.
    """
    from arena.hookspecs import hookimpl

    hooks: dict[str, Callable] = {}
    named = {
        "policies": policies, "environments": environments, "server_tasks": server_tasks, "servers": servers,
        "launch_backends": launch_backends, "result_sinks": result_sinks,
    }
    for kind, table in named.items():
        if table:
            hooks[f"arena_register_{kind}"] = _named_hook(table)
    if adapters:
        hooks["arena_register_embodiment_adapters"] = _adapters_hook(adapters)
    if commands or exporters:
        hooks["arena_register_commands"] = _commands_hook(dict(commands or {}), dict(exporters or {}))
    module = importlib.import_module(module_name)
    for attr, function in hooks.items():
        if hasattr(module, attr):
            raise PluginError(f"{module_name}.{attr} exists already; declare() would replace it")
        function.__name__ = function.__qualname__ = attr
        function.__module__ = module_name
        setattr(module, attr, hookimpl(function))


def _named_hook(table: Any) -> Callable:
    if isinstance(table, str):
        raise PluginError(f"expected a dict or a list of references, got the string '{table}'")
    entries = list(table.items()) if isinstance(table, dict) else [(None, ref) for ref in table]

    def hook(register: Callable) -> None:
        for name, reference in entries:
            if name is None:  # the name is the class's: import it now
                value = load_reference(reference)
                register(value.name, value)
            else:  # imported when the registry is first asked for it (arena.plugins.Table)
                register(name, Lazy(reference))

    return hook


def _adapters_hook(adapters: dict[Any, str]) -> Callable:
    def hook(register: Callable) -> None:
        for key, reference in adapters.items():
            if isinstance(key, tuple):
                register(*key, Lazy(reference))
            else:  # a family's whole table
                for name, cls in load_reference(reference).items():
                    register(key, name, cls)

    return hook


def _commands_hook(commands: dict[str, str | VenvGroup], exporters: dict[str, str]) -> Callable:
    def hook(app: Any) -> None:
        for name, target in commands.items():
            if isinstance(target, VenvGroup):
                from arena.venvcli import alias_app

                app.add_typer(alias_app(load_reference(target.spec), target.help), name=name)
            else:
                app.add_typer(load_reference(target), name=name)
        if exporters:
            from arena.exporters import export_group

            group = export_group(app)
            for name, reference in exporters.items():
                group.command(name)(load_reference(reference))

    return hook


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A package's module-level ``__getattr__`` (PEP 562) that imports each public name from
    its submodule on first use: ``exports`` is ``{name: submodule}``. A plugin package's
    ``__init__`` uses it so that loading its ``plugin`` module (every arena process loads every
    entry point) imports none of its client, adapters or model code::

        __getattr__ = lazy_exports(__name__, {"MyClient": "client", "MyPolicy": "policy"})
        __all__ = ["MyClient", "MyPolicy"]

    Raises (from the returned function):
        AttributeError: ``name`` is not one of ``exports``.
    """

    def __getattr__(name: str) -> Any:
        submodule = exports.get(name)
        if submodule is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{submodule}"), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__
