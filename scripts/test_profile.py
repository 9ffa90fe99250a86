#!/usr/bin/env python3
"""Where the test suite's time goes: wall and CPU seconds per directory and plugin.

Reads the JUnit XML pytest writes (``make test`` passes ``--junitxml``; each test case's
``time`` is its setup, call and teardown in wall seconds, and the root ``conftest.py`` adds a
``cpu_s`` property: CPU seconds of the test process and of the child processes it waited for).
Prints one row per group (``plugins/<name>``, ``backends/<name>``, ``tests/<subfolder>``), the
session's own wall time, and the slowest tests, so every change sees what it costs.

    python scripts/test_profile.py .pytest_cache/arena-junit.xml [--top 25]
    python scripts/test_profile.py .pytest_cache/arena-junit.xml --write-durations tests/durations.json

``--write-durations`` writes each test module's wall seconds as JSON: conftest.py starts the
longest modules first when the suite runs in several processes. Refresh it after a full
``make test`` when modules were added or got much slower or faster.

Standard library only. Exits 0 whatever the tests did; 2 when the file is missing or unreadable.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import PurePosixPath


@dataclass
class Case:
    """One test case of the JUnit file: its node id, outcome and cost."""

    nodeid: str
    outcome: str  # passed | failed | error | skipped
    wall_s: float
    cpu_s: float | None


@dataclass
class Group:
    tests: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    outcomes: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def group_of(nodeid: str) -> str:
    """``plugins/lerobot/tests/test_x.py::t`` -> ``plugins/lerobot``; ``tests/envs/test_x.py::t`` ->
    ``tests/envs``; ``tests/test_x.py::t`` -> ``tests``."""
    parts = PurePosixPath(nodeid.split("::", 1)[0]).parts
    if len(parts) >= 2 and parts[0] in ("plugins", "backends"):
        return "/".join(parts[:2])
    if len(parts) >= 3 and parts[0] == "tests":
        return "/".join(parts[:2])
    return parts[0] if len(parts) > 1 else "(root)"


def _nodeid(case: ET.Element) -> str:
    """pytest writes ``classname="plugins.lerobot.tests.test_x[.Class]"``, ``name="test[param]"``."""
    classname, name = case.get("classname", ""), case.get("name", "")
    dotted = classname.split(".")
    # The module is the longest prefix that names a test file: test_*.py or *_test.py.
    for end in range(len(dotted), 0, -1):
        stem = dotted[end - 1]
        if stem.startswith("test_") or stem.endswith("_test"):
            path = "/".join(dotted[:end]) + ".py"
            return "::".join([path, *dotted[end:], name])
    return "::".join([classname.replace(".", "/"), name])


def read_cases(path: str) -> tuple[list[Case], float | None]:
    """The test cases of a pytest JUnit XML file and the session's wall time (s), if recorded.

    Raises:
        OSError: the file cannot be read.
        xml.etree.ElementTree.ParseError: it is not XML.
    """
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    session = sum(float(s.get("time", 0.0)) for s in suites) if suites else None
    cases = []
    for case in root.iter("testcase"):
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                break
        cpu = None
        for prop in case.iter("property"):
            if prop.get("name") == "cpu_s":
                cpu = float(prop.get("value", 0.0))
        cases.append(Case(_nodeid(case), outcome, float(case.get("time", 0.0)), cpu))
    return cases, session


def report(cases: list[Case], session_s: float | None, top: int) -> str:
    groups: dict[str, Group] = defaultdict(Group)
    for case in cases:
        group = groups[group_of(case.nodeid)]
        group.tests += 1
        group.wall_s += case.wall_s
        group.cpu_s += case.cpu_s or 0.0
        group.outcomes[case.outcome] += 1
    total_wall = sum(c.wall_s for c in cases) or 1.0
    total_cpu = sum(c.cpu_s or 0.0 for c in cases)
    lines = ["", "== test profile: wall and CPU seconds per group (setup and teardown included)"]
    header = f"{'group':<28} {'tests':>6} {'wall s':>9} {'share':>6} {'cpu s':>9} {'cpu/wall':>8}  outcomes"
    lines += [header, "-" * len(header)]
    for name, group in sorted(groups.items(), key=lambda kv: -kv[1].wall_s):
        outcomes = ", ".join(f"{n} {o}" for o, n in sorted(group.outcomes.items()))
        ratio = f"{group.cpu_s / group.wall_s:.2f}" if group.wall_s else "-"
        lines.append(
            f"{name:<28} {group.tests:>6} {group.wall_s:>9.1f} {group.wall_s / total_wall:>6.1%} "
            f"{group.cpu_s:>9.1f} {ratio:>8}  {outcomes}"
        )
    lines.append("-" * len(header))
    lines.append(f"{'all':<28} {len(cases):>6} {total_wall:>9.1f} {'':>6} {total_cpu:>9.1f}")
    if session_s:
        lines.append(
            f"session: {session_s:.1f} s of wall time for {total_wall:.1f} s of test time "
            f"({total_wall / session_s:.2f} tests running at once on average)"
        )
    lines += ["", f"slowest {top} tests (wall s, cpu s):"]
    for case in sorted(cases, key=lambda c: -c.wall_s)[:top]:
        cpu = f"{case.cpu_s:8.1f}" if case.cpu_s is not None else "       -"
        lines.append(f"{case.wall_s:8.1f} {cpu}  {case.nodeid}")
    return "\n".join(lines)


def module_seconds(cases: list[Case]) -> dict[str, float]:
    """Wall seconds per test module (``path/to/test_x.py``), rounded to 0.1 s, sorted by path."""
    seconds: dict[str, float] = defaultdict(float)
    for case in cases:
        seconds[case.nodeid.split("::", 1)[0]] += case.wall_s
    return {module: round(total, 1) for module, total in sorted(seconds.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit", help="pytest's JUnit XML file (--junitxml)")
    parser.add_argument("--top", type=int, default=25, help="how many of the slowest tests to list (default 25)")
    parser.add_argument("--write-durations", metavar="PATH", help="also write each module's wall seconds as JSON to PATH")
    args = parser.parse_args(argv)
    try:
        cases, session = read_cases(args.junit)
    except (OSError, ET.ParseError) as exc:
        print(f"test profile: cannot read {args.junit}: {exc}", file=sys.stderr)
        return 2
    print(report(cases, session, args.top))
    if args.write_durations:
        import json

        with open(args.write_durations, "w") as f:
            json.dump(module_seconds(cases), f, indent=0)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
