"""``arena plugins new NAME [--kind KIND]``: generate a plugin package from templates.

The package (``arena-plugin-NAME``, import ``arena_NAME`` with dashes as underscores) holds a
pyproject with the ``arena`` entry point, tests that pass as generated, a README, and per
kind (:data:`KINDS`): ``remote-policy`` (``template/``: a remote policy, an embodiment
adapter, a server task and a servable model), ``environment`` (``template-environment/``: an
environment whose tests run arena's conformance check) or ``local-policy``
(``template-local-policy/``: a policy that runs in the simulation process). Templates are plain
files with ``string.Template`` placeholders (``$name``, ``$ident``, ``$module``, ``$dist``,
``$Class``, ``$arena_min``); ``package/`` becomes the import package and test modules get the
plugin's name in their basename (pytest's default import mode needs unique basenames).
"""

from __future__ import annotations

import os
import re
import string
from dataclasses import dataclass, field
from pathlib import Path

from arena.errors import ConfigError

TEMPLATE_DIR = Path(__file__).resolve().parent / "template"
#: ``--kind`` -> the template folder it is generated from.
KINDS: dict[str, Path] = {
    "remote-policy": TEMPLATE_DIR,
    "environment": TEMPLATE_DIR.with_name("template-environment"),
    "local-policy": TEMPLATE_DIR.with_name("template-local-policy"),
}
_NAME = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")


@dataclass
class CreatedPlugin:
    root: Path
    distribution: str
    module: str
    entry_point: str
    files: list[Path] = field(default_factory=list)


def plugin_names(name: str) -> dict[str, str]:
    """The names derived from ``name`` (``my-vla`` -> ``arena-plugin-my-vla``, ``arena_my_vla``…).

    Raises:
        ConfigError: ``name`` is not lower-case letters and digits separated by ``-`` or ``_``.
    """
    if not _NAME.match(name or ""):
        raise ConfigError(
            f"plugin name {name!r}: use lower-case letters and digits, words separated by '-' or '_' (e.g. my-vla)"
        )
    ident = name.replace("-", "_")
    return {
        "name": name,
        "ident": ident,
        "module": f"arena_{ident}",
        "dist": f"arena-plugin-{name.replace('_', '-')}",
        "Class": "".join(part.capitalize() for part in ident.split("_")),
        "arena_min": "0.1",
    }


def _target(relative: Path, names: dict[str, str]) -> Path:
    parts = list(relative.parts)
    if parts[0] == "package":
        parts[0] = names["module"]
    if parts[-1].endswith(".tmpl"):
        parts[-1] = parts[-1][: -len(".tmpl")]
    if parts[0] == "tests" and parts[-1] == "test_plugin.py":
        parts[-1] = f"test_{names['ident']}_plugin.py"
    return Path(*parts)


def _refuse_installed(names: dict[str, str]) -> None:
    """A new plugin must not share a distribution, package or entry-point name with one that is
    installed: ``pip install -e`` of it would silently replace that plugin."""
    import importlib.metadata
    import importlib.util

    clash = None
    try:
        importlib.metadata.distribution(names["dist"])
        clash = f"the distribution {names['dist']} is installed"
    except importlib.metadata.PackageNotFoundError:
        if importlib.util.find_spec(names["module"]) is not None:
            clash = f"the package {names['module']} is importable"
        elif any(ep.name == names["name"] for ep in importlib.metadata.entry_points(group="arena")):
            clash = f"a plugin registers the entry point '{names['name']}'"
    if clash:
        raise ConfigError(f"plugin name {names['name']!r} is taken: {clash}; installing the new package would "
                          "replace it. Choose another name")


def create_plugin(
    name: str, directory: str | os.PathLike[str] | None = None, *, force: bool = False, kind: str = "remote-policy"
) -> CreatedPlugin:
    """Write the plugin package of ``kind`` (:data:`KINDS`) for ``name`` into ``directory``
    (default ``./arena-plugin-NAME``).

    Raises:
        ConfigError: an unknown kind; a bad name; a name whose distribution, import package
            or entry point is already installed (installing the new package would replace that
            plugin); or ``directory`` exists and is not empty (without ``force``).
    """
    if kind not in KINDS:
        raise ConfigError(f"plugin kind {kind!r}: expected one of {', '.join(KINDS)}")
    template = KINDS[kind]
    names = plugin_names(name)
    _refuse_installed(names)
    root = Path(directory) if directory is not None else Path.cwd() / names["dist"]
    if root.exists() and any(root.iterdir()) and not force:
        raise ConfigError(f"{root} exists and is not empty (use --force to write into it)")
    created = CreatedPlugin(root=root, distribution=names["dist"], module=names["module"], entry_point=name)
    for source in sorted(template.rglob("*")):
        if source.is_dir() or "__pycache__" in source.parts:
            continue
        target = root / _target(source.relative_to(template), names)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = string.Template(source.read_text(encoding="utf-8")).substitute(names)
        target.write_text(text, encoding="utf-8")
        created.files.append(target)
    return created
