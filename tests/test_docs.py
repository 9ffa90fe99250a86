"""The README and docs/ as a user follows them: links that lead somewhere, every command listed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Every other page a user follows links from: each plugin's, backend's and example's README.
OTHER_PAGES = sorted({*ROOT.glob("plugins/*/README.md"), *ROOT.glob("backends/*/README.md"),
                      *ROOT.glob("examples/**/README.md")})
LINK = re.compile(r"\[[^\]]+\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as '-'."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    headings = re.findall(r"^#{1,6} +(.+?) *$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES + OTHER_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_a_file_and_heading_that_exist(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.relative_to(ROOT)}: link to {target}: no such file"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{page.relative_to(ROOT)}: link to {target}: no such heading"


def test_the_readme_maps_every_docs_page_and_starts_each_path_with_a_command():
    """The README is the way in: it links the architecture page and every page under docs/, and
    each persona's path ("Where to start") shows a command to run."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/architecture.md)" in readme
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in readme, f"the README's map does not link docs/{page.name}"
    start = readme[readme.index("## Where to start"):]
    start = start[: start.index("\n## ")]
    paths = re.split(r"\n(?=\*\*[^*]+\*\*)", start)[1:]
    assert len(paths) >= 8, [p[:40] for p in paths]
    for path in paths:
        assert re.search(r"^    (arena|pip) ", path, flags=re.M), f"no command in the README's path {path[:60]!r}"


def test_every_docs_page_opens_with_a_command():
    """Each page under docs/ a user looks things up in shows a command to run (`arena`, `python`,
    `make`, `pip`, or a Python example) within its first 20 lines: a reader lands on something that
    runs, then the reference. (How arena works explains; it is the one page without.)"""
    command = re.compile(r"^(    (arena|python|make|pip) |```python)", flags=re.M)
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name == "architecture.md":
            continue
        head = "\n".join(page.read_text(encoding="utf-8").splitlines()[:20])
        assert command.search(head), f"docs/{page.name} does not open with a command"


def test_the_commands_page_lists_every_command():
    text = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    table = text[text.index("| command |"):]
    table = table[: table.index("\n\n")]
    from arena.cli import app

    for command in app.registered_commands:
        name = command.name or command.callback.__name__.replace("_", "-")
        assert re.search(rf"`arena (\S+\\\|)*{re.escape(name)}\b", table), f"arena {name} is not in docs/commands.md's table"


def test_the_perturbations_page_names_every_environment_with_simulator_perturbations():
    """`arena plugins --json` lists each environment's simulator perturbations; docs/perturbations.md's
    first paragraph names every environment that has some (a user reading that the
    others take the generic ones only would not sweep ALOHA's or LIBERO's cameras)."""
    import json

    from typer.testing import CliRunner

    from arena.cli import app

    result = CliRunner().invoke(app, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    page = " ".join((ROOT / "docs" / "perturbations.md").read_text(encoding="utf-8").split())
    paragraph = page[page.index("Perturbations: why a policy fails."):]
    paragraph = paragraph[: paragraph.index("the other environments take the generic ones only")]
    shown = {"metaworld": "Meta-World", "franka_kitchen": "Franka Kitchen", "libero": "LIBERO", "aloha": "ALOHA"}
    for env, supported in json.loads(result.output)["perturbations"].items():
        if any(p["where"] == "simulator" for p in supported):
            assert shown.get(env, env) in paragraph, f"docs/perturbations.md's paragraph does not name {env}"
