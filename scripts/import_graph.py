#!/usr/bin/env python3
"""Measure arena's import graph: the layers of ``core/arena`` and the module cycles of the tree.

Two measures, both from the source text alone (stdlib ``ast``; nothing is imported, so it runs
without arena installed):

1. **Units of core.** A unit of ``core/arena`` is a subpackage (``arena.rollout``) or a
   top-level module (``arena.cli``). An edge ``A -> B`` says some module of unit ``A`` imports
   something of unit ``B`` (counted once per pair; ``import arena`` itself is not counted). The
   *levels* are the longest-path layers of that graph (a unit importing no other unit is level
   0, any other is one above the highest unit it imports) once the imports closing a cycle are
   set aside, and those are the imports that *run back up*: a lower layer reaching into a
   higher one. Which imports close a cycle: first each import made only inside functions (or
   under ``TYPE_CHECKING``) whose target imports its source back at the top of a module; then,
   while a cycle is left, the late imports of it, then any other of its imports.
2. **Module cycles.** Across ``core``, ``plugins/*`` and ``backends/*``, the modules and every
   import between them (top-level and in functions alike) form a graph; each strongly connected
   component of two modules or more is one cycle.

Usage::

    python scripts/import_graph.py            # the counts and the offending edges
    python scripts/import_graph.py --json     # the same as a JSON object
    python scripts/import_graph.py --check    # exit 1 when an import runs back up or a cycle exists

The counts of main before issue 24: 28 units, 10 levels, 87 imports, 3 running back up; 2 module
cycles.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Import:
    """One import statement's target: the importing module, the imported module, where it sits."""

    source: str
    target: str
    top_level: bool
    line: int


@dataclass
class Tree:
    """The modules found under the roots: dotted name -> file, and which names are packages."""

    files: dict[str, Path] = field(default_factory=dict)
    packages: set[str] = field(default_factory=set)


def package_roots(root: Path) -> list[Path]:
    """The directories that hold top-level packages: ``core``, each plugin's ``src``, each backend."""
    roots = [root / "core"]
    for group in ("plugins", "backends"):
        for project in sorted((root / group).glob("*/")):
            roots.append(project / "src" if (project / "src").is_dir() else project)
    return [r for r in roots if r.is_dir()]


def collect(roots: list[Path]) -> Tree:
    """Every ``.py`` file of a package (a directory chain with ``__init__.py``) under the roots."""
    tree = Tree()
    for root in roots:
        for init in sorted(root.glob("*/__init__.py")):
            top = init.parent
            for path in sorted(top.rglob("*.py")):
                rel = path.relative_to(root).with_suffix("")
                parts = list(rel.parts)
                if any(p in {"tests", "template", "templates"} or p.startswith(".") for p in parts):
                    continue
                if not all((root.joinpath(*parts[:i]) / "__init__.py").is_file() for i in range(1, len(parts))):
                    continue
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                    tree.packages.add(".".join(parts))
                tree.files[".".join(parts)] = path
    return tree


def _in_function_or_guard(parents: list[ast.AST]) -> bool:
    for node in parents:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return True
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports_of(module: str, path: Path, tree: Tree) -> list[Import]:
    """The imports of one module resolved to modules of the tree (others are dropped)."""
    syntax = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if module in tree.packages else module.rpartition(".")[0]
    found: list[Import] = []

    def resolve(name: str) -> str | None:
        # The longest prefix of a dotted name that is a module of the tree.
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            candidate = ".".join(parts[:i])
            if candidate in tree.files:
                return candidate
        return None

    def visit(node: ast.AST, parents: list[ast.AST]) -> None:
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            # ``from pkg import mod`` imports the module ``pkg.mod`` when there is one.
            targets = [f"{prefix}.{alias.name}" for alias in node.names] or [prefix]
        for name in targets:
            target = resolve(name)
            if target is not None and target != module:
                found.append(Import(module, target, not _in_function_or_guard(parents), node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child, [*parents, node])

    visit(syntax, [])
    return found


def unit_of(module: str) -> str | None:
    """The unit of core a module belongs to: ``arena.outputs.records`` -> ``outputs``."""
    parts = module.split(".")
    if parts[0] != "arena":
        return None
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def strongly_connected(nodes: set[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def measure(root: Path = ROOT) -> dict:
    """Both measures of the module docstring, as one JSON-ready dict."""
    tree = collect(package_roots(root))
    every = [imp for module, path in sorted(tree.files.items()) for imp in imports_of(module, path, tree)]

    # 1. Units of core.
    units = sorted({u for m in tree.files if (u := unit_of(m)) is not None})
    unit_edges: dict[tuple[str, str], list[Import]] = {}
    for imp in every:
        a, b = unit_of(imp.source), unit_of(imp.target)
        if a is None or b is None or a == b or b == "__init__":
            continue
        unit_edges.setdefault((a, b), []).append(imp)
    # The levels come from every import, once the imports that close a cycle between units are
    # set aside: first each import made only inside functions (a late import, the usual way a
    # lower layer reaches up) whose target imports its source back at the top of a module,
    # then, while a cycle is left, the remaining imports of that cycle.
    graph: dict[str, set[str]] = {u: set() for u in units}
    top: dict[str, set[str]] = {u: set() for u in units}
    for (a, b), imps in unit_edges.items():
        graph[a].add(b)
        if any(i.top_level for i in imps):
            top[a].add(b)

    def reaches(start: str, goal: str, edges: dict[str, set[str]]) -> bool:
        seen, todo = {start}, [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            for nxt in edges[node] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return False

    for a, b in sorted(unit_edges):
        if b not in top[a] and reaches(b, a, top):
            graph[a].discard(b)
    for late_only in (True, False):
        for a, b in sorted(unit_edges):
            if b in graph[a] and (not late_only or b not in top[a]) and reaches(b, a, graph):
                graph[a].discard(b)
    level: dict[str, int] = {}

    def level_of(unit: str) -> int:
        if unit not in level:
            level[unit] = 1 + max((level_of(b) for b in graph[unit]), default=-1)
        return level[unit]

    for unit in units:
        level_of(unit)
    back_up = sorted((a, b) for (a, b) in unit_edges if level[b] >= level[a])

    def describe(a: str, b: str) -> dict:
        imp = unit_edges[(a, b)][0]
        return {
            "from": a,
            "to": b,
            "levels": [level[a], level[b]],
            "at": f"{imp.source} (line {imp.line}) -> {imp.target}",
            "top_level": any(i.top_level for i in unit_edges[(a, b)]),
        }

    # 2. Module cycles across core, plugins and backends.
    module_edges: dict[str, set[str]] = {}
    for imp in every:
        module_edges.setdefault(imp.source, set()).add(imp.target)
    cycles = [c for c in strongly_connected(set(tree.files), module_edges) if len(c) > 1]

    return {
        "units": len(units),
        "levels": 1 + max(level.values()),
        "imports": len(unit_edges),
        "back_up": len(back_up),
        "back_up_imports": [describe(a, b) for a, b in back_up],
        "unit_levels": {u: level[u] for u in sorted(units, key=lambda u: (level[u], u))},
        "cycles": len(cycles),
        "module_cycles": cycles,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the measures as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 on an import running back up or a cycle")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository root (default: this checkout)")
    args = parser.parse_args(argv)
    result = measure(args.root)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"core/arena: {result['units']} units, {result['levels']} levels, "
            f"{result['imports']} imports, {result['back_up']} running back up"
        )
        for edge in result["back_up_imports"]:
            print(f"  back up: {edge['from']} (level {edge['levels'][0]}) -> {edge['to']} "
                  f"(level {edge['levels'][1]}): {edge['at']}")
        print(f"module cycles across core, plugins and backends: {result['cycles']}")
        for cycle in result["module_cycles"]:
            print("  cycle: " + " <-> ".join(cycle))
    if args.check and (result["back_up"] or result["cycles"]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
