"""Run a tiny experiment end to end, in-process, for tests of arena and of plugins."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass
class ExperimentOutcome:
    """What a finished experiment left behind."""

    exit_code: int
    output_dir: Path
    result: dict[str, Any]

    def episodes(self, run: str) -> list[dict[str, Any]]:
        """The episode records of ``run``, ordered by episode_index."""
        from arena.results.run_summary import collect_run_records

        records = collect_run_records(self.output_dir / run)
        return sorted((r if isinstance(r, dict) else r.model_dump(by_alias=True) for r in records), key=lambda r: r["episode_index"])

    def explain(self) -> str:
        """Exit code, each run's state and error, and every error episode's message: what a
        failing assertion should print (``assert outcome.exit_code == 0, outcome.explain()``)."""
        lines = [f"exit code {self.exit_code}, output {self.output_dir}"]
        for name, run in (self.result.get("runs") or {}).items():
            lines.append(f"run {name}: {run.get('state')}{': ' + str(run['error']) if run.get('error') else ''}")
            try:
                records = self.episodes(name)
            except (OSError, ValueError):
                continue
            for r in records:
                if r.get("outcome") == "error":
                    lines.append(f"  episode {r['episode_index']}: {r.get('error')}")
        return "\n".join(lines)


def tiny_experiment(
    policy: dict[str, Any],
    *,
    task: str = "reach-v3",
    episodes: int = 2,
    max_episode_steps: int = 20,
    num_envs: int = 1,
    seed: int = 0,
    run: str = "run",
    external_server: bool = False,
    recording: dict[str, Any] | None = None,
    environment: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A one-run experiment dict on Meta-World (CPU, seconds): pass it to ``run_experiment``.

    ``policy`` is the run's ``policy`` mapping (``{"type": ...}``); ``external_server`` adds
    ``server: {external: true}`` (the policy's ``remote_host``/``remote_port`` point at a server
    the test started, e.g. with the ``policy_server`` fixture). ``environment`` replaces the
    default ``{"type": "metaworld", "task": task}``.
    """
    body: dict[str, Any] = {
        "environment": environment or {"type": "metaworld", "task": task},
        "policy": dict(policy),
        "environment_builder": {"num_envs": num_envs, "seed": seed},
        "rollout_limit": {"num_episodes": episodes, "max_episode_steps": max_episode_steps},
    }
    if external_server:
        body["server"] = {"external": True}
    if recording is not None:
        body["recording"] = dict(recording)
    return {"runs": {run: body}}


def run_tiny_experiment(
    experiment: dict[str, Any] | str | Path,
    output_dir: Path,
    overrides: list[str] | tuple[str, ...] = (),
) -> ExperimentOutcome:
    """Load ``experiment`` (a dict, YAML text or a path), run it, and return its outcome.

    ``output_dir`` must not exist yet (or be empty).
    """
    from arena.config import load_experiment
    from arena.launch.submit import run_experiment

    output_dir = Path(output_dir)
    if isinstance(experiment, Path) or (isinstance(experiment, str) and "\n" not in experiment and experiment.endswith((".yaml", ".yml"))):
        path = Path(experiment)
    else:
        data = yaml.safe_load(experiment) if isinstance(experiment, str) else experiment
        path = output_dir.parent / f"{output_dir.name}-experiment.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    exp = load_experiment(path, list(overrides))
    code = run_experiment(exp, output_dir=output_dir)
    result_path = output_dir / "experiment_result.json"
    result = json.loads(result_path.read_text()) if result_path.exists() else {}
    return ExperimentOutcome(exit_code=code, output_dir=output_dir, result=result)


def run_arena(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 240.0
) -> subprocess.CompletedProcess:
    """``python -m arena ARGS`` in a fresh interpreter: text ``stdout``/``stderr``, never raises
    on a failing exit code. ``env`` adds variables to this process's; with ``cwd``, ``TMPDIR`` is
    ``cwd`` too (a Slurm dry-run writes its scripts to a temporary directory).

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout`` seconds.
    """
    full_env = {**os.environ, **(env or {})}
    if cwd is not None:
        full_env["TMPDIR"] = str(cwd)
    return subprocess.run(
        [sys.executable, "-m", "arena", *args], capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout
    )


def run_in_child(
    experiment: dict[str, Any], path: Path, output_dir: Path, *args: str,
    env: dict[str, str] | None = None, timeout_s: float = 300,
) -> subprocess.CompletedProcess:
    """Write ``experiment`` to ``path`` (YAML) and run ``python -m arena run PATH --output-dir
    OUTPUT_DIR ARGS`` in a child process (:func:`run_arena`, ``env`` added), as a user would:
    for what an in-process run cannot show (the console, exit codes, processes left behind).
    Returns the finished process, its stdout and stderr captured as text.

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout_s``.
    """
    path.write_text(yaml.safe_dump(experiment, sort_keys=False))
    return run_arena("run", str(path), "--output-dir", str(output_dir), *args, env=env, timeout=timeout_s)


def run_in_session(
    argv: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout_s: float = 300
) -> tuple[int, str]:
    """Run ``argv`` in a session of its own to its end and return ``(exit code, stdout and
    stderr merged)``; whatever of its process group is left when it ends or times out is
    SIGKILLed (a test's ``arena watch`` must not outlive it).

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout_s``.
    """
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, output
