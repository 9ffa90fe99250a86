"""Plugin loading as a user sees it: `arena plugins`, broken plugins, third-party packages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from arena.errors import PluginError
from arena.hookspecs import hookimpl
from arena.plugins import PluginManager

FIXTURES = Path(__file__).parent / "fixtures"


def arena(*args: str, env_extra: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "arena", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


def make_broken_plugin(site: Path) -> None:
    """A distribution whose entry point raises on import, laid out as pip would install it."""
    pkg = site / "broken_arena_plugin"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "plugin.py").write_text("raise ImportError('needs libfoo, which is missing')\n")
    info = site / "arena_plugin_broken-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: arena-plugin-broken\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[arena]\nbroken = broken_arena_plugin.plugin\n")


def test_builtins_are_listed_with_what_they_register():
    result = arena("plugins", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    registered = {p["name"]: p["registered"] for p in data["plugins"]}
    assert "zero_action" in registered["arena.policies"]["policies"]
    assert "metaworld" in registered["arena.environments"]["environments"]
    assert "metaworld-expert" in registered["arena.servers"]["servers"]
    assert "local" in registered["arena.launch"]["launch_backends"]
    assert data["broken"] == []


def test_broken_plugin_is_reported_and_skipped(tmp_path):
    make_broken_plugin(tmp_path)
    result = arena("plugins", "--json", env_extra={"PYTHONPATH": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [b["name"] for b in data["broken"]] == ["broken"]
    assert "needs libfoo" in data["broken"][0]["error"]
    assert data["broken"][0]["distribution"] == "arena-plugin-broken"
    assert any(p["name"] == "arena.policies" for p in data["plugins"])


def test_strict_mode_reraises_a_broken_plugin(tmp_path):
    make_broken_plugin(tmp_path)
    result = arena("plugins", env_extra={"PYTHONPATH": str(tmp_path), "ARENA_STRICT_PLUGINS": "1"})
    assert result.returncode != 0
    assert "needs libfoo" in result.stderr


def test_load_plugins_allow_list_skips_others(tmp_path):
    make_broken_plugin(tmp_path)
    result = arena("plugins", "--json", env_extra={"PYTHONPATH": str(tmp_path), "ARENA_LOAD_PLUGINS": ""})
    assert json.loads(result.stdout)["broken"] == []


def test_experiment_requiring_a_broken_plugin_names_it(tmp_path):
    make_broken_plugin(tmp_path / "site")
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        textwrap.dedent(
            """
            requires: {arena-plugin-broken: ">=1.0"}
            runs:
              a:
                environment: {type: metaworld, task: reach-v3}
                policy: {type: zero_action}
            """
        )
    )
    result = arena("validate", str(exp), env_extra={"PYTHONPATH": str(tmp_path / "site")})
    assert result.returncode == 2
    assert "arena-plugin-broken" in result.stderr
    assert "needs libfoo" in result.stderr


def test_duplicate_policy_name_names_both_plugins():
    class First:
        @hookimpl
        def arena_register_policies(self, register):
            register("twin", object)

    class Second:
        @hookimpl
        def arena_register_policies(self, register):
            register("twin", object)

    manager = PluginManager()
    manager.register(First(), name="first")
    manager.register(Second(), name="second")
    with pytest.raises(PluginError, match="'twin'.*'first'.*'second'|'twin'.*'second'.*'first'"):
        manager.registry


def test_duplicate_command_name_names_both_plugins():
    import typer

    class A:
        @hookimpl
        def arena_register_commands(self, app):
            app.command("hello")(lambda: None)

    class B:
        @hookimpl
        def arena_register_commands(self, app):
            app.command("hello")(lambda: None)

    manager = PluginManager()
    manager.register(A(), name="a")
    manager.register(B(), name="b")
    with pytest.raises(PluginError, match="'hello' is registered twice"):
        manager.register_commands(typer.Typer())


def test_misspelled_hook_fails_check_pending():
    class Typo:
        @hookimpl
        def arena_register_polices(self, register):
            pass

    manager = PluginManager()
    with pytest.raises(Exception, match="arena_register_polices"):
        manager.register(Typo(), name="typo")
        manager.check_pending()


@pytest.mark.slow
def test_plugin_installed_from_its_own_directory_shows_up_and_its_policy_runs(tmp_path):
    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(FIXTURES / "arena-plugin-example")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    env = {"PYTHONPATH": str(site)}
    listed = json.loads(arena("plugins", "--json", env_extra=env).stdout)
    example = next(p for p in listed["plugins"] if p["name"] == "example")
    assert example["distribution"] == "arena-plugin-example"
    assert example["version"] == "0.3.1"
    assert example["registered"] == {"policies": ["constant_action"]}

    exp = tmp_path / "exp.yaml"
    exp.write_text(
        textwrap.dedent(
            """
            requires: {arena-plugin-example: ">=0.3"}
            shared:
              rollout_limit: {num_episodes: 2, max_episode_steps: 20}
            runs:
              constant:
                environment: {type: metaworld, task: reach-v3}
                policy: {type: constant_action, value: 0.5}
            """
        )
    )
    out = tmp_path / "out"
    result = arena("run", str(exp), "--output-dir", str(out), env_extra=env)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = (out / "constant" / "episodes.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["outcome"] for r in records] == ["timeout", "timeout"]
    assert all(r["policy"]["type"] == "constant_action" for r in records)


def test_unknown_type_mentions_plugins_that_failed_to_load(tmp_path):
    make_broken_plugin(tmp_path / "site")
    exp = tmp_path / "exp.yaml"
    exp.write_text("runs:\n  a:\n    environment: {type: metaworld, task: reach-v3}\n    policy: {type: broken_remote}\n")
    result = arena("validate", str(exp), env_extra={"PYTHONPATH": str(tmp_path / "site")})
    assert result.returncode == 2
    message = " ".join(result.stderr.split())
    assert "unknown policy type 'broken_remote'" in message
    assert "failed to load" in message and "needs libfoo" in message


def make_command_plugin(site: Path) -> None:
    """A distribution that only adds a command group, laid out as pip would install it."""
    pkg = site / "hello_arena_plugin"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "plugin.py").write_text(
        textwrap.dedent(
            """
            import typer
            from arena.hookspecs import hookimpl

            hello = typer.Typer(help="Say hello.")

            @hello.command()
            def world() -> None:
                print("hello world")

            @hookimpl
            def arena_register_commands(app):
                app.add_typer(hello, name="hello")
            """
        )
    )
    info = site / "arena_plugin_hello-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: arena-plugin-hello\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[arena]\nhello = hello_arena_plugin.plugin\n")


def test_a_plugin_that_only_adds_a_command_is_listed_with_its_command(tmp_path):
    make_command_plugin(tmp_path)
    env = {"PYTHONPATH": str(tmp_path), "ARENA_LOAD_PLUGINS": "hello"}
    listed = arena("plugins", "--json", env_extra=env)
    assert listed.returncode == 0, listed.stderr
    hello = {p["name"]: p for p in json.loads(listed.stdout)["plugins"]}["hello"]
    assert hello["registered"] == {"commands": ["hello"]}
    table = arena("plugins", env_extra=env)
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if "arena-plugin-hello" in line)
    assert "commands: hello" in row
    assert arena("hello", "world", env_extra=env).stdout.strip() == "hello world"


def test_a_broken_plugins_hint_leads_to_its_traceback(tmp_path):
    """The unknown-type error sends the user to `arena plugins`, which shows the traceback."""
    make_broken_plugin(tmp_path)
    exp = tmp_path / "exp.yaml"
    exp.write_text("runs:\n  a:\n    environment: {type: metaworld, task: reach-v3}\n    policy: {type: broken_remote}\n")
    validated = arena("validate", str(exp), env_extra={"PYTHONPATH": str(tmp_path)})
    assert "`arena plugins` shows their tracebacks" in " ".join(validated.stderr.split())
    listed = arena("plugins", env_extra={"PYTHONPATH": str(tmp_path)})
    assert listed.returncode == 0, listed.stderr
    assert "Traceback (most recent call last)" in listed.stderr
    assert str(tmp_path / "broken_arena_plugin" / "plugin.py") in listed.stderr
    assert "ImportError: needs libfoo, which is missing" in listed.stderr
