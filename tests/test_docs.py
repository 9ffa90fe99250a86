"""The README and docs/ as a user follows them: links that lead somewhere, every command listed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]+\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as '-'."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    headings = re.findall(r"^#{1,6} +(.+?) *$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_a_file_and_heading_that_exist(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: link to {target}: no such file"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{page.name}: link to {target}: no such heading"


def test_the_readme_links_the_architecture_page_and_lists_every_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/architecture.md)" in readme
    table = readme[readme.index("## Commands"):]
    table = table[: table.index("\n## ")]
    from arena.cli import app

    for command in app.registered_commands:
        name = command.name or command.callback.__name__.replace("_", "-")
        assert re.search(rf"`arena (\S+\\\|)*{re.escape(name)}\b", table), f"arena {name} is not in the README's table"


def test_the_readme_names_every_environment_with_simulator_perturbations():
    """`arena plugins --json` lists each environment's simulator perturbations; the README's
    "Perturbations" paragraph names every environment that has some (a user reading that the
    others take the generic ones only would not sweep ALOHA's or LIBERO's cameras)."""
    import json

    from typer.testing import CliRunner

    from arena.cli import app

    result = CliRunner().invoke(app, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    paragraph = readme[readme.index("Perturbations: why a policy fails."):]
    paragraph = paragraph[: paragraph.index("the other environments take the generic ones only")]
    shown = {"metaworld": "Meta-World", "franka_kitchen": "Franka Kitchen", "libero": "LIBERO", "aloha": "ALOHA"}
    for env, supported in json.loads(result.output)["perturbations"].items():
        if any(p["where"] == "simulator" for p in supported):
            assert shown.get(env, env) in paragraph, f"README's perturbation paragraph does not name {env}"
