"""``ExperimentResult``: a typed, read-only view of ``experiment_result.json``.

:func:`arena.results.aggregate.build_experiment_result` writes the file (its docstring lists
every key); this model gives the keys a training loop reads their types and keeps every other
key as it is (``extra="allow"``), so a newer file still loads. ``runs[NAME]`` is a
:class:`RunResult`; ``overall`` an :class:`OverallResult`. Rates are fractions in ``[0, 1]``,
``ci95`` is the Wilson 95 % interval ``[low, high]``; ``n`` counts the non-error episodes
(success, failure, timeout), ``k`` the successes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arena.outputs.layout import EXPERIMENT_RESULT_FILE


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

    @property
    def success_rate(self) -> float | None:
        """The pooled success rate (``overall.success_rate``)."""
        return self.overall.success_rate

    @property
    def report(self) -> Path | None:
        """``index.html`` of the output directory, when it exists."""
        path = self.output_dir / "index.html" if self.output_dir is not None else None
        return path if path is not None and path.exists() else None

    def raw(self) -> dict[str, Any]:
        """The file's data, every key included."""
        return self.model_dump(mode="json")

    @classmethod
    def read(cls, output_dir: str | os.PathLike[str], exit_code: int | None = None) -> ExperimentResult:
        """Load ``<output_dir>/experiment_result.json``.

        Raises:
            FileNotFoundError: the experiment's result was not written (e.g. a cluster
                submission not collected yet).
            pydantic.ValidationError: the file does not have the layout above.
        """
        out = Path(output_dir)
        data = json.loads((out / EXPERIMENT_RESULT_FILE).read_text())
        return cls.model_validate({**data, "output_dir": out, "exit_code": exit_code})
