"""``ExperimentResult``: a typed, read-only view of ``experiment_result.json``.

:func:`arena.results.aggregate.build_experiment_result` writes the file (its docstring lists
every key); this model gives the keys a training loop reads their types and keeps every other
key as it is (``extra="allow"``), so a newer file still loads. ``runs[NAME]`` is a
:class:`RunResult`; ``overall`` an :class:`OverallResult`. Rates are fractions in ``[0, 1]``,
``ci95`` is the Wilson 95 % interval ``[low, high]``; ``n`` counts the non-error episodes
(success, failure, timeout), ``k`` the successes.

There is no pooled headline: :attr:`ExperimentResult.success_rate` is the rate of *the policy
under evaluation* (the one run marked ``role: evaluated`` in the experiment, or the only run),
and raises :class:`AmbiguousResult` where that is not declared, because a rate pooled over a
learned policy and its zero-action baseline means nothing. ``overall`` (the pooled numbers
the file keeps) is still there, by that name.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arena.outputs.layout import EXPERIMENT_FILE, EXPERIMENT_RESULT_FILE, REPORT_FILE


class AmbiguousResult(ValueError):
    """The experiment does not say which run is the policy under evaluation."""


class _View(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class RunResult(_View):
    """One run's entry."""

    state: str = Field(description="completed, failed, cancelled, pending, running")
    error: str | None = None
    task: str | None = None
    counts: dict[str, int] = Field(default_factory=dict, description="episodes per outcome: success, failure, timeout, error")
    n: int = 0
    k: int = 0
    success_rate: float | None = Field(None, description="k / n; null when n = 0")
    ci95: list[float | None] = Field(default_factory=lambda: [None, None])
    errors: int = 0
    episodes_total: int | None = None
    partial: bool = False
    error_note: str | None = Field(None, description="why the error episodes errored, one line with a count")


class OverallResult(_View):
    """Pooled over every run."""

    counts: dict[str, int] = Field(default_factory=dict)
    n: int = 0
    k: int = 0
    success_rate: float | None = None
    ci95: list[float | None] = Field(default_factory=lambda: [None, None])
    macro_success_rate: float | None = Field(None, description="the mean of the per-run rates")
    errors: int = 0


class ExperimentResult(_View):
    """``experiment_result.json``, typed; :attr:`output_dir` and :attr:`exit_code` say where it
    was read from and how ``arena run`` ended (not part of the file)."""

    format_version: int = 1
    experiment: str
    created_at: str | None = None
    runs: dict[str, RunResult] = Field(default_factory=dict)
    overall: OverallResult = Field(default_factory=OverallResult)
    output_dir: Path | None = Field(None, exclude=True)
    exit_code: int | None = Field(None, exclude=True)
    roles: dict[str, str] = Field(default_factory=dict, exclude=True, description="run name -> role, from the snapshot")
    selected: list[str] | None = Field(
        None, exclude=True,
        description="the runs this evaluation ran (evaluate(runs=...)); None: every run. The others, listed in runs "
        "with what is on disk (pending without records), are neither its failures nor its headline",
    )

    @property
    def evaluated(self) -> list[str]:
        """The runs of the policy under evaluation: those marked ``role: evaluated`` (a matrix
        run gives several), else the only run; empty when neither. With :attr:`selected`, only
        selected runs: empty when the marked runs were all left out."""
        pool = list(self.runs) if self.selected is None else [name for name in self.runs if name in self.selected]
        marked = [name for name in pool if self.roles.get(name) == "evaluated"]
        if marked:
            return marked
        if any(self.roles.get(name) == "evaluated" for name in self.runs):
            return []  # the policy under evaluation was not selected: another run's rate is not its
        return pool if len(pool) == 1 else []

    @property
    def headline(self) -> RunResult:
        """The result of the policy under evaluation (see :attr:`evaluated`).

        Raises:
            AmbiguousResult: no run, or several, is the policy under evaluation (the message
                names the runs and what to do).
        """
        chosen = self.evaluated
        if len(chosen) == 1:
            return self.runs[chosen[0]]
        names = ", ".join(chosen or self.runs) or "none"
        left_out = [n for n in self.runs if self.roles.get(n) == "evaluated" and n not in (self.selected or self.runs)]
        if chosen:
            why = f"several runs are marked `role: evaluated` ({names})"
        elif left_out:
            why = (f"the runs marked `role: evaluated` ({', '.join(left_out)}) were not among the runs evaluated "
                   f"({', '.join(self.selected or ())})")
        else:
            why = f"experiment '{self.experiment}' has runs {names} and marks none `role: evaluated`"
        raise AmbiguousResult(
            f"{why}: a success rate pooled over them would mean nothing. Read result.runs[NAME].success_rate, "
            "or mark the run of the policy under evaluation `role: evaluated` in the experiment"
        )

    @property
    def success_rate(self) -> float | None:
        """``headline.success_rate``: the policy under evaluation's ``k / n`` (``None`` when it
        has no counted episode). Never pooled over runs.

        Raises:
            AmbiguousResult: as :attr:`headline`.
        """
        return self.headline.success_rate

    @property
    def ci95(self) -> list[float | None]:
        """``headline.ci95``, the Wilson 95 % interval of :attr:`success_rate`."""
        return self.headline.ci95

    @property
    def failures(self) -> list[str]:
        """One line per run (of :attr:`selected`) that did not complete cleanly: failed or
        cancelled (with its error), or with error episodes. Empty when every run is a clean
        measurement."""
        out = []
        for name, run in self.runs.items():
            if self.selected is not None and name not in self.selected:
                continue  # not run by this evaluation
            if run.state != "completed":
                out.append(f"run '{name}' {run.state}" + (f": {run.error}" if run.error else ""))
            elif run.errors:
                out.append(f"run '{name}' has {run.errors} error episode(s) (infrastructure errors, not counted)")
        return out

    @property
    def ok(self) -> bool:
        """``arena run`` exited 0 (when known) and no run failed or has error episodes."""
        return not self.failures and self.exit_code in (0, None)

    @property
    def report(self) -> Path | None:
        """``index.html`` of the output directory, when it exists."""
        path = self.output_dir / REPORT_FILE if self.output_dir is not None else None
        return path if path is not None and path.exists() else None

    def raw(self) -> dict[str, Any]:
        """The file's data, every key included."""
        return self.model_dump(mode="json")

    @classmethod
    def read(
        cls, output_dir: str | os.PathLike[str], exit_code: int | None = None, selected: list[str] | None = None
    ) -> ExperimentResult:
        """Load ``<output_dir>/experiment_result.json``; ``selected``: see :attr:`selected`.

        Raises:
            FileNotFoundError: the experiment's result was not written (e.g. a cluster
                submission not collected yet).
            pydantic.ValidationError: the file does not have the layout above.
        """
        out = Path(output_dir)
        data = json.loads((out / EXPERIMENT_RESULT_FILE).read_text())
        return cls.model_validate(
            {**data, "output_dir": out, "exit_code": exit_code, "roles": _roles(out), "selected": selected}
        )


def _roles(output_dir: Path) -> dict[str, str]:
    """``{run: role}`` of the runs the snapshot (``experiment.yaml``) gives a ``role``."""
    import yaml

    try:
        snapshot = yaml.safe_load((output_dir / EXPERIMENT_FILE).read_text())
    except (OSError, yaml.YAMLError):
        return {}
    runs = snapshot.get("runs") if isinstance(snapshot, dict) else None
    return {str(n): str(r["role"]) for n, r in (runs or {}).items() if isinstance(r, dict) and r.get("role")}
