"""``arena.evaluate()``: run an experiment from Python (a training loop) and get its result.

The same code path as ``arena run``: :func:`arena.config.load_experiment` with the overrides,
then :func:`arena.launch.submit.run_experiment` (snapshot, manifest, servers, runs, records,
report, result sinks), then :meth:`ExperimentResult.read`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from arena.errors import EvaluationFailed
from arena.outputs.layout import EXPERIMENT_FILE
from arena.results.experiment_result import ExperimentResult


def evaluate(
    experiment: str | os.PathLike[str] | Mapping[str, Any],
    *,
    overrides: Sequence[str] | Mapping[str, Any] = (),
    backend: str | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    wait: bool = True,
    allow_imports: Sequence[str] = (),
    quiet: bool = True,
    check: bool = True,
    runs: Sequence[str] | None = None,
) -> ExperimentResult:
    """Evaluate ``experiment`` (a YAML path, or its data as a mapping) and return its result.

    ``overrides`` are ``KEY=VALUE`` tokens as ``arena run`` takes them, or a mapping
    ``{KEY: value}`` (e.g. ``{"runs.learned.policy.policy_path": path, "tracking.step": 1200}``);
    ``backend`` is ``launch.backend``; ``output_dir`` must not exist or be empty (default:
    ``outputs/<experiment>/<timestamp>``). A cluster backend is waited for (``wait``) so the
    result exists. ``quiet=False`` prints what ``arena run`` prints.

    A failed evaluation never looks like a measured one. With ``check=True`` (the default) a
    run that failed (its server or simulator could not start, it was cancelled) or has error
    episodes raises :class:`arena.errors.EvaluationFailed`, whose message names each such run,
    its error and the output directory (``.result`` holds what was written). With
    ``check=False`` the result is returned as it is: then test ``result.ok`` (``False``) and
    ``result.failures`` (one line per such run) before using a number.

    ``runs`` (``arena run --run``): evaluate only the runs these selectors select (a run's
    name, the name of a run that expanded such as a matrix run, or a glob like ``"eval.*"``:
    :mod:`arena.config.selection`). ``result.runs`` still lists every run, the others
    ``pending`` with no numbers (``success_rate`` ``None``); ``check``, ``result.ok`` and
    ``result.failures`` judge the selected runs, and the headline is a selected run's (a
    ``role: evaluated`` run left out makes it raise ``AmbiguousResult``, never another run's rate).

    The headline ``result.success_rate`` (and ``result.ci95``) is that of the policy under
    evaluation: the run marked ``role: evaluated`` in the experiment, or its only run. It is
    never pooled over runs; with several runs and none marked it raises
    :class:`arena.results.experiment_result.AmbiguousResult`. Every run's numbers are in
    ``result.runs[NAME]`` (``success_rate``, ``ci95``, ``n``, ``k``, ``errors``).

    Returns:
        The typed ``experiment_result.json``, with ``exit_code`` (``arena run``'s: 0 every run
        completed without error episodes, 3 otherwise) and ``output_dir``.

    Raises:
        arena.errors.ConfigError: the experiment or an override is wrong, or a selector of
            ``runs`` selects no run (``arena run`` exit 2).
        arena.errors.EvaluationFailed: ``check`` and a run failed or has error episodes
            (``arena run`` exit 3), or no result was written.
        FileNotFoundError: ``check=False`` and no result was written (the run was interrupted).
    """
    from arena.config import load_experiment, load_experiment_dict
    from arena.launch.submit import run_experiment

    tokens = [f"{k}={_yaml(v)}" for k, v in overrides.items()] if isinstance(overrides, Mapping) else list(overrides)
    if backend:
        tokens.append(f"launch.backend={backend}")
    if isinstance(experiment, Mapping):
        exp = load_experiment_dict(dict(experiment), tokens, allow_imports=allow_imports)
    else:
        exp = load_experiment(experiment, tokens, allow_imports=allow_imports)
    for warning in exp.warnings:
        import warnings

        warnings.warn(f"arena.evaluate: {warning}", UserWarning, stacklevel=2)
    selected = None
    if runs is not None:
        from arena.config.selection import select_runs

        selected = select_runs(exp.runs, [runs] if isinstance(runs, str) else list(runs), source=exp.source)
    console = None
    if not quiet:
        from rich.console import Console

        console = Console(stderr=True)
    out = Path(output_dir) if output_dir is not None else None
    if out is None:
        from arena.launch.submit import claim_output_dir

        # A fresh outputs/<experiment>/<timestamp>[-N] (an exclusive mkdir), handed back empty
        # for run_experiment to claim again: the caller needs to know where the result is.
        out = claim_output_dir(exp, None)
        (out / EXPERIMENT_FILE).unlink()
    code = run_experiment(exp, output_dir=out, wait=wait, console=console, runs=selected)
    try:
        result = ExperimentResult.read(out, exit_code=code, selected=selected)
    except FileNotFoundError:
        if not check:
            raise
        raise EvaluationFailed(f"evaluation of {exp.name} wrote no result (arena run exit {code}); see {out}") from None
    if check and not result.ok:
        failures = result.failures or [f"arena run exited {code}"]
        raise EvaluationFailed(
            f"evaluation of {exp.name} failed, its numbers are not the policy's: " + "; ".join(failures)
            + f" (runner and server logs in {out}; pass check=False to get the partial result)",
            result=result,
            failures=failures,
        )
    return result


def _yaml(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value)
