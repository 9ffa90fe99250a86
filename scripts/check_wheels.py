"""Build every distribution of this repository and check that each installs and works alone.

    .venv/bin/python scripts/check_wheels.py [--out build/wheel-check] [--jobs 2] [--only NAME ...]

1. Build: ``python -m build`` makes an sdist and, from it, a wheel of arena-core and of every
   package under ``plugins/*/`` and ``backends/*/`` into one wheelhouse (a file the sdist
   forgets fails here), then ``twine check --strict`` reads their metadata.
2. Install: for each distribution a new venv installs it from the wheelhouse and nothing else
   of this repository; its dependencies come from the package index (or pip's cache), pinned
   by a constraints file at the lower bounds the distributions declare, so the declared
   floors are the versions that ran (``--also-python``: arena-core under another interpreter,
   with the newest dependencies).
3. Smoke: ``arena plugins --json`` lists each entry point of the distribution, not broken and
   registering something (a policy, a command, ...); ``arena validate`` passes on every file of
   ``examples/`` or of the package's own ``examples/`` whose ``requires`` names it and nothing
   else of this repository (a launch backend without one: ``examples/quickstart.yaml`` with
   ``launch.backend=NAME``); each command it adds answers ``--help``.
4. Tests: a distribution whose ``pyproject.toml`` says ``[tool.arena.wheel-check] tests = true``
   also runs its own ``tests/`` there, installed with its ``test`` extra.

Exit 0 when every check passed, 1 otherwise; prints one line per step with its duration.
Needs network access to the package index (or a warm pip cache) and ``packaging``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
#: The build and check tools, in their own venv; builds run in it (``--no-isolation``), so
#: setuptools is installed once rather than once per build.
TOOLS = ("build>=1.2", "twine>=5", "pip>=24", "setuptools>=77")


@dataclass
class Dist:
    """One distribution of the workspace, read from its ``pyproject.toml``."""

    path: Path
    name: str
    version: str
    requires: list[Requirement]
    extras: dict[str, list[Requirement]]
    entry_points: list[str]
    tests: bool
    log: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return canonicalize_name(self.name)


def discover(repo: Path = REPO) -> list[Dist]:
    """arena-core, then every ``plugins/*/`` and ``backends/*/`` package, sorted by path."""
    paths = [repo] + sorted(p.parent for p in [*repo.glob("plugins/*/pyproject.toml"), *repo.glob("backends/*/pyproject.toml")])
    dists = []
    for path in paths:
        data = tomllib.loads((path / "pyproject.toml").read_text())
        project = data["project"]
        arena_eps = project.get("entry-points", {}).get("arena", {})
        check = data.get("tool", {}).get("arena", {}).get("wheel-check", {})
        dists.append(
            Dist(
                path=path,
                name=project["name"],
                version=project["version"],
                requires=[Requirement(r) for r in project.get("dependencies", [])],
                extras={k: [Requirement(r) for r in v] for k, v in project.get("optional-dependencies", {}).items()},
                entry_points=sorted(arena_eps),
                tests=bool(check.get("tests", False)),
            )
        )
    return dists


def closure(dist: Dist, extras: list[str], by_key: dict[str, Dist]) -> list[Requirement]:
    """Every requirement an install of ``dist[extras]`` declares, through workspace packages."""
    seen: set[tuple[str, frozenset[str]]] = set()
    found: list[Requirement] = []

    def walk(d: Dist, wanted: frozenset[str]) -> None:
        if (d.key, wanted) in seen:
            return
        seen.add((d.key, wanted))
        for req in d.requires + [r for e in sorted(wanted) for r in d.extras.get(e, [])]:
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            found.append(req)
            if canonicalize_name(req.name) in by_key:
                walk(by_key[canonicalize_name(req.name)], frozenset(req.extras))

    walk(dist, frozenset(extras))
    return found


def floor_constraints(requirements: list[Requirement], by_key: dict[str, Dist], floors_too: bool = True) -> list[str]:
    """``name==version`` lines: workspace packages at their own version, and (``floors_too``)
    every other requirement at the highest lower bound declared for it (``>=``, ``==``, ``~=``)."""
    floors: dict[str, Version] = {}
    for req in requirements:
        key = canonicalize_name(req.name)
        if key in by_key:
            continue
        for spec in req.specifier:
            if spec.operator in (">=", "==", "~=") and "*" not in spec.version:
                floors[key] = max(floors.get(key, Version(spec.version)), Version(spec.version))
    lines = [f"{d.name}=={d.version}" for d in by_key.values()]
    return lines + ([f"{name}=={version}" for name, version in sorted(floors.items())] if floors_too else [])


def run(cmd: list[str], log: list[str], *, cwd: Path = REPO, env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    start = time.monotonic()
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    log.append(f"$ {' '.join(map(str, cmd))}  ({time.monotonic() - start:.0f} s, exit {result.returncode})")
    if result.returncode != 0:
        log.append((result.stdout + result.stderr).strip()[-6000:])
    return result


def examples_for(dist: Dist, by_key: dict[str, Dist]) -> list[Path]:
    """Experiment files in ``examples/`` and the distribution's own ``examples/`` whose
    ``requires`` names ``dist`` and no other package of this repository."""
    chosen = []
    for path in sorted({*(REPO / "examples").glob("*.yaml"), *(dist.path / "examples").glob("*.yaml")}):
        requires = (yaml.safe_load(path.read_text()) or {}).get("requires") or {}
        named = {canonicalize_name(n) for n in requires} & set(by_key)
        if dist.key in named and named <= {dist.key, "arena-core"}:
            chosen.append(path)
    return chosen


def smoke(dist: Dist, venv: Path, by_key: dict[str, Dist], env: dict[str, str], log: list[str]) -> list[str]:
    """The problems found with ``dist`` installed alone in ``venv`` (empty: none)."""
    arena = str(venv / "bin" / "arena")
    listed = run([arena, "plugins", "--json"], log, env=env)
    if listed.returncode != 0:
        return [f"`arena plugins --json` exited {listed.returncode}"]
    data = json.loads(listed.stdout)
    problems = [f"broken plugin {b['name']}: {b['error']}" for b in data["broken"]]
    plugins = {p["name"]: p for p in data["plugins"] if p["distribution"] == dist.name}
    if dist.key == "arena-core":
        expected = sorted(plugins)
    else:
        expected = dist.entry_points
        problems += [f"`arena plugins` does not list entry point {n}" for n in expected if n not in plugins]
    registered: dict[str, list[str]] = {}
    for name in expected:
        if name in plugins and not plugins[name]["registered"]:
            problems.append(f"plugin {name} registers nothing `arena plugins` can show")
        for kind, names in plugins.get(name, {}).get("registered", {}).items():
            registered.setdefault(kind, []).extend(names)
    calls = [["validate", str(path)] for path in examples_for(dist, by_key)]
    if not calls:  # a launch backend without an example of its own: the quickstart on it
        calls = [["validate", str(REPO / "examples" / "quickstart.yaml"), f"launch.backend={b}"]
                 for b in registered.get("launch_backends", [])]
    calls += [[command, "--help"] for command in registered.get("commands", [])]
    if not calls:
        problems.append("nothing to run: no example in examples/ or its own examples/ requires it alone")
    for call in calls:
        result = run([arena, *call], log, env=env)
        if result.returncode != 0:
            shown = " ".join(str(Path(c).relative_to(REPO)) if c.startswith(str(REPO)) else c for c in call)
            problems.append(f"`arena {shown}` exited {result.returncode}")
    return problems


def check_one(
    dist: Dist, out: Path, tools_python: Path, by_key: dict[str, Dist], python: str, floors: bool = True
) -> tuple[float, list[str], list[str]]:
    """Install ``dist`` alone in a new venv of ``python`` (its dependencies at their floors,
    unless ``floors`` is false: then the newest), smoke-check it, run its tests if it asks for
    that; returns the seconds taken, the problems found and the commands' log."""
    start = time.monotonic()
    log: list[str] = []
    venv = out / "venvs" / f"{dist.key}-{Path(python).name}"
    shutil.rmtree(venv, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(ARENA_STRICT_PLUGINS="0", PYTHONDONTWRITEBYTECODE="1")
    if run([python, "-m", "venv", "--without-pip", str(venv)], log).returncode != 0:
        return time.monotonic() - start, ["could not create a venv"], log
    extras = ["test"] if dist.tests and "test" in dist.extras else []
    constraints = out / "constraints" / f"{dist.key}-{Path(python).name}.txt"
    constraints.parent.mkdir(parents=True, exist_ok=True)
    constraints.write_text("\n".join(floor_constraints(closure(dist, extras, by_key), by_key, floors)) + "\n")
    spec = f"{dist.name}[{','.join(extras)}]" if extras else dist.name
    installed = run(
        [str(tools_python), "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--only-binary", ":all:",
         "--find-links", str(out / "wheelhouse"), "--constraint", str(constraints), spec],
        log, env=env,
    )
    if installed.returncode != 0:
        at = "at their declared lower bounds" if floors else "at their newest versions"
        return time.monotonic() - start, [f"does not install from its wheel with its dependencies {at} (binary wheels only)"], log
    problems = smoke(dist, venv, by_key, env, log)
    if dist.tests:
        tested = run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                      str(dist.path / "tests")], log, env=env, timeout=1800)
        if tested.returncode != 0:
            problems.append(f"its own tests failed (exit {tested.returncode})")
        else:  # e.g. "41 passed, 3 skipped in 60.2s": what ran, on the status line
            log.insert(0, "tests: " + (tested.stdout.strip().splitlines() or ["?"])[-1].strip("= "))
    if not problems:  # 18 venvs of 0.2-0.5 GB each: only a failed one is kept, to look into
        shutil.rmtree(venv, ignore_errors=True)
    return time.monotonic() - start, problems, log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/check_wheels.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "build" / "wheel-check", help="work folder (emptied first)")
    parser.add_argument("--jobs", type=int, default=2, help="distributions built and checked at once")
    parser.add_argument("--only", nargs="*", default=None, help="check only these distributions (all are built)")
    parser.add_argument("--python", default=sys.executable, help="interpreter of the venvs")
    parser.add_argument("--wheelhouse", type=Path, default=None,
                        help="check the sdists and wheels already in this folder (a release's) instead of building them")
    parser.add_argument("--also-python", action="append", default=[], metavar="PYTHON",
                        help="also check arena-core alone under this interpreter (e.g. python3.12), with the newest "
                        "dependencies (floors are checked under --python); repeatable")
    args = parser.parse_args(argv)
    began = time.monotonic()
    out: Path = args.out.absolute()
    shutil.rmtree(out, ignore_errors=True)
    (out / "wheelhouse").mkdir(parents=True)
    dists = discover()
    by_key = {d.key: d for d in dists}
    log: list[str] = []

    tools = out / "tools"
    step = time.monotonic()
    if run([args.python, "-m", "venv", str(tools)], log).returncode or run(
        [str(tools / "bin" / "python"), "-m", "pip", "install", "-q", *TOOLS], log
    ).returncode:
        print("\n".join(log))
        return 1
    tools_python = tools / "bin" / "python"
    print(f"tools ({', '.join(TOOLS)}): {time.monotonic() - step:.0f} s", flush=True)

    step = time.monotonic()

    def build(dist: Dist) -> bool:
        return run([str(tools_python), "-m", "build", "--no-isolation", "--outdir", str(out / "wheelhouse"), str(dist.path)],
                   dist.log).returncode == 0

    if args.wheelhouse is not None:
        for artifact in sorted(args.wheelhouse.iterdir()):
            shutil.copy2(artifact, out / "wheelhouse" / artifact.name)
        failed = [d.name for d in dists if not list((out / "wheelhouse").glob(f"{d.key.replace('-', '_')}-{d.version}-*.whl"))]
        print(f"wheelhouse: {args.wheelhouse} ({len(list(args.wheelhouse.iterdir()))} files)", flush=True)
    else:
        with ThreadPoolExecutor(args.jobs) as pool:
            built = dict(zip([d.name for d in dists], pool.map(build, dists)))
        failed = [name for name, ok in built.items() if not ok]
        artifacts = sorted(p.name for p in (out / "wheelhouse").iterdir())
        print(f"build: {len(artifacts)} files for {len(dists)} distributions in {time.monotonic() - step:.0f} s", flush=True)
    twine = run([str(tools_python), "-m", "twine", "check", "--strict", *map(str, sorted((out / "wheelhouse").iterdir()))], log)
    print(f"twine check --strict: {'ok' if twine.returncode == 0 else 'FAILED'}", flush=True)
    if failed or twine.returncode:
        for d in dists:
            if d.name in failed:
                print(f"\n== {d.name}: no wheel (build failed, or missing from --wheelhouse)\n" + "\n".join(d.log))
        print("\n".join(log))
        return 1

    selected = [d for d in dists if args.only is None or d.name in args.only or d.key in args.only]
    jobs = [(d, args.python) for d in selected] + [(by_key["arena-core"], py) for py in args.also_python]
    failures = 0
    with ThreadPoolExecutor(args.jobs) as pool:
        for (dist, python), (seconds, problems, log) in zip(
            jobs, pool.map(lambda job: check_one(job[0], out, tools_python, by_key, job[1], floors=job[1] == args.python), jobs)
        ):
            tests = " + its tests" if dist.tests else ""
            label = f"{dist.name} ({Path(python).name})" if python != args.python else dist.name
            ran = next((line[len("tests: "):] for line in log if line.startswith("tests: ")), None)
            tests += f": {ran}" if ran else ""
            print(f"{label}: {'ok' if not problems else 'FAILED'} (install alone, smoke{tests}; {seconds:.0f} s)", flush=True)
            if problems:
                failures += 1
                print("".join(f"  - {problem}\n" for problem in problems) + "\n".join(log), flush=True)
    print(f"\n{len(jobs) - failures}/{len(jobs)} checks passed; {time.monotonic() - began:.0f} s in all")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
