"""``requires``: installed, version, plugin loaded."""

from __future__ import annotations

import pytest

from arena.config import check_requires
from arena.errors import ConfigError
from arena.plugins import BrokenPlugin, PluginManager


def test_installed_distribution_with_matching_version_passes():
    check_requires({"pydantic": ">=2", "pyyaml": ""}, manager=PluginManager())


def test_missing_distribution_says_how_to_install():
    with pytest.raises(ConfigError) as info:
        check_requires({"arena-plugin-openpi-absent": ">=0.1"}, source="exp.yaml", manager=PluginManager())
    assert str(info.value) == (
        "exp.yaml: key requires.arena-plugin-openpi-absent: requires arena-plugin-openpi-absent>=0.1, "
        "which is not installed: pip install 'arena-plugin-openpi-absent>=0.1'"
    )


def test_version_mismatch_names_installed_and_required():
    from importlib.metadata import version

    with pytest.raises(ConfigError, match=rf"requires pydantic>=99, but pydantic {version('pydantic')} is installed"):
        check_requires({"pydantic": ">=99"}, manager=PluginManager())


def test_broken_plugin_of_a_required_distribution_is_reported_with_its_error():
    manager = PluginManager()
    manager.broken.append(BrokenPlugin(name="yamlplug", distribution="PyYAML", error="ImportError: no torch", traceback=""))
    with pytest.raises(ConfigError, match=r"its plugin 'yamlplug' failed to load: ImportError: no torch"):
        check_requires({"pyyaml": ""}, manager=manager)


def test_distribution_names_are_compared_normalized():
    manager = PluginManager()
    manager.broken.append(BrokenPlugin(name="p", distribution="arena_plugin_x", error="boom", traceback=""))
    check_requires({"pydantic": ""}, manager=manager)  # another distribution's breakage does not matter


@pytest.mark.parametrize("requires", [["pydantic"], {"pydantic": 2}, {"pydantic": "two"}])
def test_malformed_requires_is_a_config_error(requires):
    with pytest.raises(ConfigError, match="requires"):
        check_requires(requires, manager=PluginManager())
