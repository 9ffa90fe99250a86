"""Every `arena …` command a README, a doc or a message shows exists (issue 39 item 4).

Collected by extraction, not a list kept by hand: the `arena …` lines of every README and doc
(code blocks and inline code) and the `arena …` commands quoted in messages of the sources.
Each is resolved against the real CLI, plugin commands included: its command path exists and
`--help` renders, each `--option` is one that command takes, and a command running an
experiment file of this checkout (`arena run|validate FILE KEY=V …`) validates with its
overrides, so a printed override is a real key.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

DOCS = sorted({*REPO.glob("README.md"), *REPO.glob("docs/*.md"), *REPO.glob("plugins/*/README.md"),
               *REPO.glob("backends/*/README.md"), *REPO.glob("examples/**/README.md")})
SOURCES = sorted(p for root in ("core/arena", "plugins", "backends") for p in (REPO / root).rglob("*.py")
                 if "/tests/" not in str(p) and "/build/" not in str(p) and "/scaffold/template" not in str(p))

#: A token that stands for something the reader fills in.
PLACEHOLDER = re.compile(r"^(\[.*|.*[A-Z]{2,}.*|.*[{<].*|\.\.\.|…|OUT/.*)$")


def _commands() -> list[tuple[str, str]]:
    """``(where, command)`` for every `arena …` shown to a user."""
    found: list[tuple[str, str]] = []
    for path in DOCS:
        in_fence = False
        for number, line in enumerate(path.read_text().splitlines(), 1):
            where = f"{path.relative_to(REPO)}:{number}"
            if line.strip().startswith("```"):
                in_fence = not in_fence
                continue
            code = line.strip() if (in_fence or line.startswith("    ")) else None
            if code is not None:
                code = code.removeprefix("$ ")
                if code.startswith("arena "):
                    found.append((where, code.split("  #")[0].split(" # ")[0].rstrip("\\ ").strip()))
                continue
            found += [(where, m) for m in re.findall(r"`(arena [^`]+)`", line)]
    for path in SOURCES:
        text = path.read_text()
        for m in re.finditer(r"(?:`|e\.g\. |run: |with )(arena (?:[a-z][\w-]*)(?: [^`\"'\n)]*)?)", text):
            number = text.count("\n", 0, m.start()) + 1
            found.append((f"{path.relative_to(REPO)}:{number}", m.group(1).rstrip(".,;:")))
    return found


_CHECK = r"""
import json, shlex, sys
import typer
from typer.testing import CliRunner
from arena.cli import app
from arena.plugins import get_plugin_manager
from arena.config import load_experiment
from pathlib import Path

get_plugin_manager().register_commands(app)
root = typer.main.get_command(app)
runner = CliRunner()
repo = Path(sys.argv[1])
placeholder = __import__("re").compile(sys.argv[2])
problems, helped, checked = [], {}, 0
queue = json.loads(sys.stdin.read())
while queue:
    where, command = queue.pop(0)
    command = command.replace("\\|", "|")
    try:
        tokens = shlex.split(command)[1:]
    except ValueError:
        tokens = command.split()[1:]
    if tokens and "|" in tokens[0]:  # `arena status|cancel|collect DIR`: each of them
        rest = " ".join(shlex.quote(t) for t in tokens[1:])
        queue.extend((where, f"arena {alt} {rest}") for alt in tokens[0].split("|"))
        continue
    node, path = root, []
    while tokens and hasattr(node, "commands") and tokens[0] in node.commands:
        node = node.commands[tokens[0]]
        path.append(tokens.pop(0))
    if hasattr(node, "commands") and tokens and not tokens[0].startswith("-"):
        if not placeholder.match(tokens[0]):
            problems.append(f"{where}: `{command}`: no command '{' '.join(path + tokens[:1])}'")
        continue
    key = " ".join(path)
    if key not in helped:
        done = runner.invoke(app, [*path, "--help"])
        helped[key] = done.exit_code
        if done.exit_code != 0:
            problems.append(f"{where}: `arena {key} --help` exits {done.exit_code}")
    options = {o for p in node.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
    for token in tokens:
        if token.startswith("-") and len(token) > 1 and not token[1].isdigit() and token.split("=")[0] not in options:
            problems.append(f"{where}: `{command}`: `arena {key}` has no option {token.split('=')[0]}")
    if path and path[0] in ("run", "validate") and tokens and (repo / tokens[0]).is_file() and tokens[0].endswith((".yaml", ".yml")):
        overrides = [t for t in tokens[1:] if "=" in t and not t.startswith("-") and not placeholder.match(t.split("=", 1)[1])]
        try:
            load_experiment(repo / tokens[0], overrides, check_requires=False)
        except Exception as exc:
            problems.append(f"{where}: `{command}`: {type(exc).__name__}: {exc}")
    checked += 1
print(json.dumps({"problems": problems, "checked": checked, "helped": sorted(helped)}))
"""


def _check(commands: list[tuple[str, str]]) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHECK, str(REPO), PLACEHOLDER.pattern], input=json.dumps(commands),
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_command_shown_to_a_user_exists() -> None:
    commands = _commands()
    assert len(commands) > 100, len(commands)  # the extraction found the READMEs' commands
    got = _check(commands)
    assert got["problems"] == [], "\n".join(got["problems"])
    assert {"run", "validate", "watch", "venv setup", "export lerobot", "compare"} <= set(got["helped"]), got["helped"]


#: What a fresh machine prints: `arena validate` of examples whose venvs (benchmark and model)
#: do not exist yet and whose server program is not on PATH, and the venv set-up's own hints.
_RUNTIME = r"""
import json, os, sys
from typer.testing import CliRunner
from arena.cli import app
from arena.plugins import get_plugin_manager
from arena.venvs import declared_venvs

get_plugin_manager().register_commands(app)
runner = CliRunner()
printed = []
for argv in json.loads(sys.argv[1]):
    done = runner.invoke(app, argv)
    printed.append([" ".join(argv), done.output])
print(json.dumps({"printed": printed, "venvs": sorted(declared_venvs())}))
"""


def test_every_command_a_fresh_machine_prints_exists(tmp_path: Path) -> None:
    """`arena validate` on a machine without the venvs (benchmark and model) or the server's
    program names set-up commands that run: `arena venv setup NAME` (and each declared venv's
    `arena NAME setup` alias, which docs/commands.md promises, exists too)."""
    server = "runs.reach_vla_eval.server.local_command=[no-such-server-program, serve]"
    invocations = [
        ["validate", "examples/pusht.yaml"],
        ["validate", "examples/aloha_quick.yaml"],
        ["validate", "examples/lerobot_bridge/bridge.yaml"],
        ["validate", "examples/vla_eval_metaworld.yaml", server],
        ["venv", "setup", "no-such-venv"],
    ]
    env = {**__import__("os").environ, "ARENA_VENVS": str(tmp_path)}  # no venv exists there
    done = subprocess.run([sys.executable, "-c", _RUNTIME, json.dumps(invocations)], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    commands = [(f"`arena {argv}` prints", m) for argv, output in got["printed"]
                for m in re.findall(r"`(arena [^`]+)`", " ".join(output.split()))]
    printed = {argv: " ".join(output.split()) for argv, output in got["printed"]}
    assert "`arena venv setup pusht`" in printed["validate examples/pusht.yaml"], printed
    assert "`arena venv setup lerobot`" in printed["validate examples/lerobot_bridge/bridge.yaml"], printed
    commands += [("docs/commands.md: `arena NAME setup` is each venv's alias", f"arena {name} setup") for name in got["venvs"]]
    assert {"pusht", "lerobot", "aloha", "libero"} <= set(got["venvs"]), got["venvs"]
    checked = _check(commands)
    assert checked["problems"] == [], "\n".join(checked["problems"])
    assert {"venv setup", "pusht setup", "lerobot setup"} <= set(checked["helped"]), checked["helped"]


def test_install_instructions_say_what_is_true_today() -> None:
    """arena's packages are not on PyPI (README, "Installing"): no doc tells a user to
    `pip install arena-…` by name alone; they install from a checkout or a git URL."""
    assert "arena's packages are not on PyPI yet" in (REPO / "README.md").read_text()
    by_name = re.compile(r"pip install '?(arena-(?:core|plugin|backend)[\w-]*(?![\w-])(?:\[[^\]]*\])?(?!\[))'?(?!\s*@)")
    wrong = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
             for path in DOCS for number, line in enumerate(path.read_text().splitlines(), 1) if by_name.search(line)]
    assert wrong == [], "\n".join(wrong)
