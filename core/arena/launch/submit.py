"""``arena run`` and the submission commands: the launch stage between plan and records.

``run_experiment`` resolves the output directory, writes the snapshot (``experiment.yaml``)
and ``manifest.json``, hands the runs to the backend named by ``launch.backend`` and, once
they are done (local, or ``--wait``), builds ``experiment_result.json`` and ``index.html``.
``status``/``cancel``/``collect`` dispatch to the backend named in ``submission.json``.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from arena.errors import ConfigError, LaunchError
from arena.launch.base import Submission
from arena.launch.planning import plan_servers

if TYPE_CHECKING:
    from rich.console import Console

    from arena.config import ResolvedExperiment
    from arena.launch.base import LaunchBackend

EXIT_OK, EXIT_CONFIG, EXIT_FAILED, EXIT_INTERRUPTED = 0, 2, 3, 130


def make_backend(experiment: ResolvedExperiment, name: str | None = None) -> LaunchBackend:
    """Instantiate the launch backend ``name`` (default ``launch.backend``) with its options."""
    from arena.plugins import get_registry

    name = name or experiment.launch.backend
    registry = get_registry()
    if name not in registry.launch_backends:
        known = ", ".join(sorted(registry.launch_backends))
        raise ConfigError(f"unknown launch backend '{name}' (registered: {known})", file=experiment.source, key="launch.backend")
    return registry.launch_backends[name](experiment.launch.options(name))


def default_output_dir(experiment: ResolvedExperiment) -> Path:
    return Path("outputs") / experiment.name / datetime.now().strftime("%Y-%m-%d_%H-%M-%S")


def run_experiment(
    experiment: ResolvedExperiment,
    *,
    output_dir: Path | None = None,
    wait: bool = False,
    dry_run: bool = False,
    console: Console | None = None,
) -> int:
    """Execute ``experiment`` with its launch backend; returns the exit code of ``arena run``.

    0 when every run completed without ``error`` episodes, 3 otherwise, 130 when interrupted.

    Raises:
        ConfigError: the experiment cannot run as configured (exit code 2).
    """
    from arena.config import write_snapshot
    from arena.rollout.workitems import write_manifest

    servers = plan_servers(experiment)
    backend = make_backend(experiment)
    out = Path(output_dir) if output_dir is not None else default_output_dir(experiment)
    if dry_run:
        _print_dry_run(experiment, servers, backend, out, console)
        return EXIT_OK
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"output directory {out} is not empty; choose another --output-dir", file=experiment.source)
    if hasattr(backend, "check"):
        backend.check(experiment, servers)
    out.mkdir(parents=True, exist_ok=True)
    write_snapshot(experiment, out / "experiment.yaml")
    write_manifest(experiment, out)
    _say(console, f"experiment [bold]{experiment.name}[/]: {len(experiment.runs)} run(s) -> {out}")
    try:
        submission = backend.submit(experiment, servers, out, wait=wait, console=console)
    except KeyboardInterrupt:
        _finish_report(out, console)
        return EXIT_INTERRUPTED
    if backend.name != "local" and not wait:
        _say(console, f"submitted to {backend.name}; follow it with `arena status {out}`")
        return EXIT_OK
    backend.collect(submission)
    return _finish_report(out, console)


def _finish_report(out: Path, console: Console | None) -> int:
    from arena.results.aggregate import build_experiment_result
    from arena.results.report import write_report

    result = build_experiment_result(out)
    report = write_report(out)
    if console is not None:
        _print_summary(result, console)
    _say(console, f"report: {report}")
    ok = all(r.get("state") == "completed" and not r.get("errors") for r in result["runs"].values())
    return EXIT_OK if ok else EXIT_FAILED


def read_run_statuses(output_dir: Path) -> dict[str, dict[str, Any]]:
    """Each run's status.json (runs of the snapshot without one are ``pending``)."""
    names = _run_names(output_dir)
    statuses: dict[str, dict[str, Any]] = {}
    for name in names:
        path = output_dir / name / "status.json"
        try:
            statuses[name] = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            statuses[name] = {"state": "pending"}
    return statuses


def _run_names(output_dir: Path) -> list[str]:
    snapshot = output_dir / "experiment.yaml"
    try:
        data = yaml.safe_load(snapshot.read_text()) or {}
    except FileNotFoundError:
        raise LaunchError(f"{output_dir} has no experiment.yaml: is it an arena output directory?") from None
    return list((data.get("runs") or {}).keys())


def _backend_for(submission: Submission) -> LaunchBackend:
    from arena.plugins import get_registry

    registry = get_registry()
    cls = registry.launch_backends.get(submission.backend)
    if cls is None:
        raise LaunchError(
            f"{submission.output_dir} was submitted with the '{submission.backend}' backend, which is not installed"
        )
    return cls(cls.Config())


def submission_status(output_dir: Path) -> dict[str, dict[str, Any]]:
    submission = Submission.load(output_dir)
    return _backend_for(submission).status(submission)


def cancel_submission(output_dir: Path) -> None:
    submission = Submission.load(output_dir)
    _backend_for(submission).cancel(submission)


def collect_submission(output_dir: Path) -> Path:
    from arena.results.aggregate import build_experiment_result
    from arena.results.report import write_report

    submission = Submission.load(output_dir)
    _backend_for(submission).collect(submission)
    build_experiment_result(output_dir)
    return write_report(output_dir)


# -- printing ---------------------------------------------------------------------------------
def _say(console: Console | None, text: str) -> None:
    if console is not None:
        console.print(text, highlight=False)


def _print_dry_run(experiment, servers, backend, out: Path, console: Console | None) -> None:
    doc = {
        "backend": backend.name,
        "output_dir": str(out),
        "runs": {name: run.to_dict() for name, run in experiment.runs.items()},
        "servers": {
            name: ({"external": f"{p.host}:{p.port}"} if p.external else p.task.model_dump(exclude_defaults=False))
            for name, p in servers.items()
        },
    }
    text = yaml.safe_dump(doc, sort_keys=False)
    spec = backend.plan(experiment, servers, out)
    if console is None:
        print(text)
        print(spec)
    else:
        console.print(text, highlight=False, markup=False)
        console.print(spec, highlight=False, markup=False)


def _print_summary(result: dict[str, Any], console: Console) -> None:
    from rich.table import Table

    table = Table("run", "state", "success", "rate", "95% CI", "failure", "timeout", "error")
    for name, r in result["runs"].items():
        rate = r.get("success_rate")
        ci = r.get("ci95") or [None, None]
        table.add_row(
            name,
            str(r.get("state")),
            f"{r.get('k', 0)}/{r.get('n', 0)}",
            "-" if rate is None else f"{100 * rate:.0f}%",
            "-" if ci[0] is None else f"{100 * ci[0]:.0f}–{100 * ci[1]:.0f}%",
            str(r.get("counts", {}).get("failure", 0)),
            str(r.get("counts", {}).get("timeout", 0)),
            str(r.get("counts", {}).get("error", 0)),
        )
    console.print(table)
