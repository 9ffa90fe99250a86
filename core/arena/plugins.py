"""The plugin manager: built-ins and entry points, loaded one at a time, into one registry.

Loading rules:

- built-ins (``arena.default_plugins``) are registered as plugins, exactly like third-party ones;
- entry points of group ``arena`` are loaded one at a time; a failing one is recorded in
  :attr:`PluginManager.broken` and skipped, unless ``ARENA_STRICT_PLUGINS=1`` (re-raise);
- ``ARENA_LOAD_PLUGINS=a,b`` loads only the named entry points (an empty value loads none);
- ``check_pending()`` runs after loading, so a misspelled ``arena_*`` hook fails loudly;
- a name registered twice is an error naming both plugins;
- a value a plugin declares by reference (:func:`arena.declare.declare`) is imported the first
  time the registry is asked for it (:class:`Lazy`, :class:`Table`): a process that runs one
  policy on one environment imports those, not every plugin's code (an ``arena run`` starts
  ~0.4 s sooner with the plugins of this repository), and a broken reference fails only what
  uses it, naming the plugin.
"""

from __future__ import annotations

import importlib
import os
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import pluggy

from arena import hookspecs
from arena.errors import PluginError

ENTRY_POINT_GROUP = "arena"

BUILTIN_MODULES = (
    "arena.default_plugins.policies",
    "arena.default_plugins.environments",
    "arena.default_plugins.servers",
    "arena.default_plugins.launch",
)

KINDS = (
    "policies", "embodiment_adapters", "environments", "server_tasks", "servers", "launch_backends", "result_sinks",
)


@dataclass
class BrokenPlugin:
    """An entry point that failed to load or register."""

    name: str
    distribution: str | None
    error: str
    traceback: str


@dataclass
class PluginInfo:
    """What ``arena plugins`` shows for one plugin."""

    name: str
    distribution: str | None = None
    version: str | None = None
    builtin: bool = False
    hooks: list[str] = field(default_factory=list)
    registered: dict[str, list[str]] = field(default_factory=dict)


class Lazy:
    """A registered value not imported yet: the ``"package.module:attribute"`` reference a
    plugin declared (:func:`arena.declare.declare`), imported by :meth:`load`."""

    __slots__ = ("reference", "owner", "kind", "key")

    def __init__(self, reference: str) -> None:
        self.reference = reference
        self.owner = self.kind = self.key = "?"

    def load(self) -> Any:
        """The object the reference names.

        Raises:
            PluginError: it cannot be imported (the message names the plugin and its hook, as
                when the hook imported it), or a policy or environment class's ``name`` is not
                the name it was registered under.
        """
        try:
            value = load_reference(self.reference)
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(f"plugin '{self.owner}' failed in arena_register_{self.kind}: {exc}") from exc
        name = getattr(value, "name", None) if self.kind in ("policies", "environments") else None
        if isinstance(name, str) and name != self.key:  # configs and records use the class's name
            raise PluginError(
                f"plugin '{self.owner}' registers {self.reference} as '{self.key}' but the class is named '{name}'"
            )
        return value

    def __repr__(self) -> str:
        return f"Lazy({self.reference!r})"


class Table(MutableMapping):
    """One kind's ``{name: value}`` in the :class:`Registry`: a mapping whose :class:`Lazy`
    values are imported when first read (``table[name]``, ``get``, ``values``, ``items``),
    never by ``in``, ``len``, iteration or ``sorted(table)``.

    Raises (reading a value):
        PluginError: a lazy value cannot be imported (see :meth:`Lazy.load`).
    """

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        value = self._data[key]
        if isinstance(value, Lazy):
            value = self._data[key] = value.load()
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        self._data[key] = value

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Table({self._data!r})"


@dataclass
class Registry:
    """Everything plugins registered, by kind. Values are classes or factories, each kind a
    :class:`Table` (a mapping that imports a declared value when it is first read).

    ``embodiment_adapters`` is keyed by ``"family/name"``. ``owners[kind][name]`` is the
    plugin that registered it.
    """

    policies: Table = field(default_factory=Table)
    embodiment_adapters: Table = field(default_factory=Table)
    environments: Table = field(default_factory=Table)
    server_tasks: Table = field(default_factory=Table)
    servers: Table = field(default_factory=Table)
    launch_backends: Table = field(default_factory=Table)
    result_sinks: Table = field(default_factory=Table)
    owners: dict[str, dict[str, str]] = field(default_factory=lambda: {k: {} for k in KINDS})

    def adapter(self, family: str, name: str) -> Any:
        """The adapter class registered as ``(family, name)``.

        Raises:
            PluginError: none is registered; the message lists the family's adapters.
        """
        key = f"{family}/{name}"
        if key not in self.embodiment_adapters:
            known = sorted(k.split("/", 1)[1] for k in self.embodiment_adapters if k.startswith(family + "/"))
            raise PluginError(
                f"no embodiment adapter '{name}' for the {family} protocol (registered: {', '.join(known) or 'none'})"
            )
        return self.embodiment_adapters[key]


class PluginManager:
    """Loads plugins and builds the :class:`Registry`. Use :func:`get_plugin_manager`."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
        self.pm.add_hookspecs(hookspecs)
        self.broken: list[BrokenPlugin] = []
        self.infos: dict[str, PluginInfo] = {}
        self._registry: Registry | None = None

    # -- loading ---------------------------------------------------------------------------
    def load_builtins(self) -> None:
        for module_name in BUILTIN_MODULES:
            module = importlib.import_module(module_name)
            name = "arena." + module_name.rsplit(".", 1)[1]
            self.pm.register(module, name=name)
            self.infos[name] = PluginInfo(name=name, distribution="arena-core", version=_version("arena-core"), builtin=True)

    def load_entry_points(self) -> None:
        strict = os.environ.get("ARENA_STRICT_PLUGINS", "") not in ("", "0", "false")
        allowed = os.environ.get("ARENA_LOAD_PLUGINS")
        allow = None if allowed is None else {n.strip() for n in allowed.split(",") if n.strip()}
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if allow is not None and ep.name not in allow:
                continue
            if self.pm.get_plugin(ep.name) is not None:
                continue
            dist = ep.dist.name if ep.dist else None
            try:
                module = ep.load()
                self.pm.register(module, name=ep.name)
            except Exception as exc:  # one broken plugin never takes the CLI down
                if strict:
                    raise
                self.broken.append(_broken(ep, dist, exc))
                continue
            self.infos[ep.name] = PluginInfo(name=ep.name, distribution=dist, version=ep.dist.version if ep.dist else None)

    def register(self, plugin: object, name: str) -> None:
        """Register a plugin object (a module or any object with ``@hookimpl`` methods)."""
        self.pm.register(plugin, name=name)
        self.infos[name] = PluginInfo(name=name)
        self._registry = None

    def unregister(self, name: str) -> None:
        self.pm.unregister(name=name)
        self.infos.pop(name, None)
        self._registry = None

    def check_pending(self) -> None:
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"plugin {exc.plugin!r} implements an unknown hook: {exc}") from exc

    # -- the registry ----------------------------------------------------------------------
    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = self._build_registry()
        return self._registry

    def _build_registry(self) -> Registry:
        registry = Registry()
        for info in self.infos.values():
            info.hooks = []
            info.registered = {}
        for kind in KINDS:
            hook = getattr(self.pm.hook, f"arena_register_{kind}")
            for impl in reversed(hook.get_hookimpls()):
                owner = impl.plugin_name
                register = _make_register(registry, kind, owner)
                info = self.infos.setdefault(owner, PluginInfo(name=owner))
                info.hooks.append(f"arena_register_{kind}")
                before = set(getattr(registry, kind))
                try:
                    impl.function(register)
                except PluginError:
                    raise
                except Exception as exc:
                    raise PluginError(f"plugin '{owner}' failed in arena_register_{kind}: {exc}") from exc
                added = sorted(set(getattr(registry, kind)) - before)
                if added:  # a plugin may implement a hook more than once (pluggy's specname)
                    info.registered[kind] = sorted({*info.registered.get(kind, []), *added})
        for impl in self.pm.hook.arena_register_commands.get_hookimpls():
            info = self.infos.setdefault(impl.plugin_name, PluginInfo(name=impl.plugin_name))
            info.hooks.append("arena_register_commands")
        return registry

    def describe(self) -> Registry:
        """The registry with every declared value imported and each plugin's command names in
        :attr:`infos` (``registered["commands"]``): what ``arena plugins`` and ``arena doctor``
        show, at the price of importing every plugin's code.

        Raises:
            PluginError: a declared value cannot be imported, or a command hook fails; the
                message names the plugin and the hook.
        """
        registry = self.registry
        for kind in KINDS:
            for _ in getattr(registry, kind).values():
                pass
        for impl in self.pm.hook.arena_register_commands.get_hookimpls():
            commands = _commands_of(impl)
            if commands:
                self.infos[impl.plugin_name].registered["commands"] = commands
        return registry

    def resolve_class(self, kind: str, type_name: str, *, allow_import: bool = False) -> Any:
        """Return the class registered under ``type_name``, or import ``package.module:Class``.

        Importing runs the module's code, so it happens only with ``allow_import`` (the
        caller checked the user's opt-in, :mod:`arena.config.imports`).

        Raises:
            PluginError: not registered, and not importable or not allowed to be imported;
                the message lists registered names or says how to opt in.
        """
        table = getattr(self.registry, kind)
        if type_name in table:
            return table[type_name]
        if ":" in type_name:
            if not allow_import:  # arena's loader refuses first, saying how to opt in (arena.config.imports)
                label = kind.rstrip("s") if kind != "policies" else "policy"
                raise PluginError(
                    f"'{type_name}' is not a registered {label}, and importing the module it names needs the "
                    "caller's opt-in (allow_import=True; arena's commands: --allow-import)"
                )
            module_name = type_name.partition(":")[0]
            try:
                obj = load_reference(type_name)
            except (ImportError, AttributeError) as exc:
                hint = ""
                if isinstance(exc, ModuleNotFoundError) and exc.name == module_name.split(".")[0]:
                    hint = (
                        " (arena never imports from the working directory: install the package, "
                        "e.g. pip install -e ., or put its folder on PYTHONPATH)"
                    )
                raise PluginError(f"cannot import '{type_name}': {exc}{hint}") from exc
            return obj
        singular = kind.rstrip("s") if kind != "policies" else "policy"
        known = ", ".join(sorted(table)) or "none"
        hint = ""
        if self.broken:  # the type may belong to a plugin that failed to load: say so
            failed = "; ".join(f"'{b.name}' ({b.distribution}): {b.error}" for b in self.broken)
            hint = f"; plugins that failed to load: {failed} (`arena plugins` shows their tracebacks)"
        raise PluginError(
            f"unknown {singular} type '{type_name}' (registered: {known}; or use package.module:Class){hint}"
        )

    def register_commands(self, app: Any) -> None:
        """Let plugins add typer sub-commands; a command name registered twice is an error.

        Raises:
            PluginError: a plugin added a command (or group) whose name already exists.
        """
        owners = {name: "arena" for name in _command_names(app)}
        for impl in reversed(self.pm.hook.arena_register_commands.get_hookimpls()):
            before = Counter(_command_names(app))
            impl.function(app)
            for name in (Counter(_command_names(app)) - before).elements():
                if name in owners:
                    raise PluginError(
                        f"command '{name}' is registered twice: by '{owners[name]}' and by '{impl.plugin_name}'"
                    )
                owners[name] = impl.plugin_name


def _commands_of(impl: Any) -> list[str]:
    """The command names one ``arena_register_commands`` implementation adds (to a scratch app).

    Raises:
        PluginError: the implementation fails.
    """
    import typer

    scratch = typer.Typer()
    try:
        impl.function(scratch)
    except Exception as exc:
        raise PluginError(f"plugin '{impl.plugin_name}' failed in arena_register_commands: {exc}") from exc
    return sorted(_command_names(scratch))


def _command_names(app: Any) -> list[str]:
    return [_command_name(c) for c in app.registered_commands] + [g.name for g in app.registered_groups]


def _command_name(command: Any) -> str:
    if command.name:
        return command.name
    return command.callback.__name__.replace("_", "-")


def _make_register(registry: Registry, kind: str, owner: str) -> Callable:
    table = getattr(registry, kind)
    owners = registry.owners[kind]

    def register(*args: Any) -> None:
        if kind == "embodiment_adapters":
            if len(args) != 3:
                raise PluginError(f"plugin '{owner}': register(family, name, adapter_cls) takes 3 arguments")
            family, name, value = args
            key = f"{family}/{name}"
        else:
            if len(args) != 2:
                raise PluginError(f"plugin '{owner}': register(name, value) takes 2 arguments")
            key, value = args
        if key in table:
            raise PluginError(
                f"{kind.replace('_', ' ')} name '{key}' is registered by two plugins: "
                f"'{owners[key]}' and '{owner}'"
            )
        if isinstance(value, Lazy):
            value.owner, value.kind, value.key = owner, kind, key
        table[key] = value
        owners[key] = owner

    return register


def _broken(ep: EntryPoint, dist: str | None, exc: BaseException) -> BrokenPlugin:
    return BrokenPlugin(
        name=ep.name,
        distribution=dist,
        error=f"{type(exc).__name__}: {exc}",
        traceback="".join(traceback.format_exception(exc)),
    )


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


_MANAGER: PluginManager | None = None


def get_plugin_manager() -> PluginManager:
    """The process-wide plugin manager, loaded on first use."""
    global _MANAGER
    if _MANAGER is None:
        manager = PluginManager()
        manager.load_builtins()
        manager.load_entry_points()
        manager.check_pending()
        _MANAGER = manager
    return _MANAGER


def get_registry() -> Registry:
    """The registry of the process-wide plugin manager."""
    return get_plugin_manager().registry


# -- references --------------------------------------------------------------------------------
def load_reference(reference: str) -> Any:
    """The object a ``"package.module:attribute"`` reference names (dots in the attribute
    walk into it, ``"mod:Class.attr"``), imported now.

    Raises:
        PluginError: the reference has no ``:``.
        ImportError, AttributeError: the module or the attribute is missing (raised inside a
            hook, they become the registry's ``PluginError`` naming the plugin and the hook).
    """
    module_name, sep, attr = reference.partition(":")
    if not sep or not module_name or not attr:
        raise PluginError(f"'{reference}' is not a 'package.module:attribute' reference")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj
