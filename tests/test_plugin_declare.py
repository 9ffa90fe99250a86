"""``arena.declare.declare``: a plugin module's hooks written from a table of references, imported
only when a hook runs, registering exactly what hand-written hooks would."""

from __future__ import annotations

import sys
import textwrap
import types
from pathlib import Path

import pytest
import typer

from arena.errors import PluginError
from arena.declare import VenvGroup, declare
from arena.plugins import PluginManager, load_reference

PARTS = '''
import typer

from arena.venvs import VenvSpec


class Policy:
    name = "demo_policy"


class OtherPolicy:
    name = "demo_other"


class Adapter:
    pass


def server_task(policy_config):
    return None


ADAPTERS = {"a": Adapter, "b": Adapter}
app = typer.Typer(name="demo")
app.command("hello")(lambda: None)
VENV = VenvSpec(name="demo", summary="a demo venv")


def export_demo():
    """Export nothing."""
'''


@pytest.fixture
def parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module ``demo_parts_<n>`` on ``sys.path`` (not imported yet) holding what plugins register."""
    name = f"demo_parts_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(PARTS))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


@pytest.fixture
def plugin_module(monkeypatch: pytest.MonkeyPatch):
    def make(name: str = "demo_plugin") -> types.ModuleType:
        module = types.ModuleType(name)
        monkeypatch.setitem(sys.modules, name, module)
        return module

    return make


def test_declare_registers_what_hand_written_hooks_would_and_imports_late(parts, plugin_module):
    module = plugin_module()
    declare(
        module.__name__,
        policies=[f"{parts}:Policy", f"{parts}:OtherPolicy"],
        server_tasks={"demo_policy": f"{parts}:server_task"},
        adapters={("fam", "one"): f"{parts}:Adapter", "table": f"{parts}:ADAPTERS"},
        result_sinks={"demo-sink": f"{parts}:Adapter"},
    )
    assert parts not in sys.modules  # nothing imported by declaring
    assert sorted(n for n in vars(module) if n.startswith("arena_register_")) == [
        "arena_register_embodiment_adapters", "arena_register_policies", "arena_register_result_sinks",
        "arena_register_server_tasks",
    ]
    manager = PluginManager()
    manager.register(module, name="demo")
    manager.check_pending()
    registry = manager.registry
    parts_module = sys.modules[parts]
    assert registry.policies == {"demo_policy": parts_module.Policy, "demo_other": parts_module.OtherPolicy}
    assert registry.server_tasks == {"demo_policy": parts_module.server_task}
    assert registry.embodiment_adapters == {
        "fam/one": parts_module.Adapter, "table/a": parts_module.Adapter, "table/b": parts_module.Adapter,
    }
    assert registry.result_sinks == {"demo-sink": parts_module.Adapter}
    assert manager.infos["demo"].registered["embodiment_adapters"] == ["fam/one", "table/a", "table/b"]


def test_declared_commands_venv_groups_and_exporters(parts, plugin_module):
    module = plugin_module()
    declare(
        module.__name__,
        commands={"demo": f"{parts}:app", "demo-venv": VenvGroup(f"{parts}:VENV", "The demo venv.")},
        exporters={"demo": f"{parts}:export_demo"},
    )
    manager = PluginManager()
    manager.register(module, name="demo")
    app = typer.Typer()
    manager.register_commands(app)
    groups = {g.name: g.typer_instance for g in app.registered_groups}
    assert set(groups) == {"demo", "demo-venv", "export"}
    assert [c.name for c in groups["demo-venv"].registered_commands] == ["setup"]
    assert groups["demo-venv"].info.help == "The demo venv."
    assert [c.name for c in groups["export"].registered_commands] == ["demo"]
    assert manager.describe().policies == {}  # listing commands builds the registry without error
    assert manager.infos["demo"].registered["commands"] == ["demo", "demo-venv", "export"]


def test_a_missing_reference_fails_its_hook_naming_the_plugin(plugin_module):
    module = plugin_module()
    declare(module.__name__, environments=["no_such_package_for_arena.env:Env"])  # declaring imports nothing
    manager = PluginManager()
    manager.register(module, name="demo")
    with pytest.raises(PluginError, match="plugin 'demo' failed in arena_register_environments: No module named"):
        manager.registry


def test_a_named_reference_is_imported_when_first_read_and_a_broken_one_fails_only_there(plugin_module):
    module = plugin_module()
    declare(module.__name__, policies={"zero_action": "arena.policies.simple:ZeroActionPolicy",
                                       "misnamed": "arena.policies.simple:RandomActionPolicy",
                                       "broken": "no_such_package_for_arena.policy:Policy"})
    manager = PluginManager()
    manager.register(module, name="demo")
    table = manager.registry.policies  # built: nothing imported yet, the broken entry included
    assert set(table) == {"zero_action", "misnamed", "broken"} and "broken" in table and len(table) == 3
    from arena.policies.simple import ZeroActionPolicy

    assert table["zero_action"] is ZeroActionPolicy and table.get("zero_action") is ZeroActionPolicy
    with pytest.raises(PluginError, match="plugin 'demo' failed in arena_register_policies: No module named"):
        table["broken"]
    with pytest.raises(PluginError, match="registers arena.policies.simple:RandomActionPolicy as 'misnamed' but the class"):
        table["misnamed"]  # records and configs use the class's name
    assert manager.registry.owners["policies"]["broken"] == "demo"


def test_declare_refuses_to_replace_a_hook_and_wrong_forms(plugin_module):
    module = plugin_module()
    module.arena_register_policies = lambda register: None
    with pytest.raises(PluginError, match="exists already"):
        declare(module.__name__, policies={"x": "m:X"})
    with pytest.raises(PluginError, match="a dict or a list"):
        declare(plugin_module("other_demo").__name__, servers="m:Model")
    with pytest.raises(PluginError, match="not a 'package.module:attribute' reference"):
        load_reference("arena.plugins")
    assert load_reference("arena.declare:VenvGroup.__name__") == "VenvGroup"
