"""The ``wandb`` result sink: an arena experiment as Weights & Biases runs.

Configured in the experiment::

    tracking:
      step: 12000              # optional: the checkpoint's training step (the x-axis)
      wandb:
        project: my-policy
        per: experiment        # one W&B run per arena experiment, or `run`: one per arena run
        group: null            # default: the experiment's id (arena.sinks.experiment_group)
        mode: null             # online / offline / disabled; null: W&B's own default ($WANDB_MODE)
        api_key_env: WANDB_API_KEY   # the NAME of the variable holding the key, never the key

What is logged (``per: experiment``), by the process that builds the experiment's result
(``arena run`` on the local backend or with ``--wait``; ``arena collect`` for a cluster
submission), into one W&B run named ``<experiment>/<label>`` (:meth:`SinkContext.tracker_name`:
the label is ``tracking.label``, else ``step<tracking.step>``), in W&B group ``group``:

- config: the resolved experiment (``experiment.yaml``'s data) and ``arena.provenance``;
- summary and one history row: :func:`arena.sinks.experiment_metrics`, i.e. per run
  ``<run>/success_rate``, ``<run>/ci95_low`` / ``ci95_high``, ``<run>/n``, ``<run>/k``, each
  episode metric ``<run>/metrics/<key>`` and the episode return ``<run>/return`` with their
  ``…/ci95_low`` / ``…/ci95_high``, and the same under ``evaluated/`` for the run marked
  ``role: evaluated`` (nothing is pooled over runs); with ``tracking.step`` the row carries
  ``checkpoint_step`` = step and every metric uses it as its x-axis (``wandb.define_metric``).

**A failed evaluation is marked failed** (a run ``failed`` or ``cancelled``: its numbers are
not the policy's): the summary's ``failed`` is true and ``failures`` says why (one line per
run), each such run logs ``<run>/failed`` = 1 in place of ``n``/``k`` zeros, the W&B run gets
the tag ``failed`` (in a series: ``failed:<label>``) and finishes with exit code 1, which W&B
shows as a failed run.

**One curve per training run.** With ``tracking.series`` (``arena watch`` sets it to the
watch's id; with ``tracking.step`` and no series, the experiment's name:
:func:`arena.sinks.default_series`, so a training loop calling ``arena.evaluate`` draws one
curve) every evaluation logs into *one* W&B run, id derived from the series, resumed by
each evaluation (``resume="allow"``), one history row per checkpoint at ``checkpoint_step``:
W&B's users read a training curve as one run's chart against a step metric, which a group of
one-point runs does not draw. Offline, each evaluation writes its own ``offline-run-*``
folder with that run id; ``wandb sync`` merges them into the one run.
- ``episodes``: a table with one row per episode (run, episode index, seed, outcome, steps,
  duration, task);
- artifacts: the report (``index.html``, type ``arena-report``) and at most ``max_videos``
  episode videos (``videos/<run>/<file>`` entries of a ``arena-videos`` artifact).

With ``per: run`` every ``arena run-one`` logs its run (one W&B run per arena run, or per
shard, named ``<experiment>/<run>/<label>``, in the same group; with a series, one W&B run per
arena run and series): episodes as they finish (table rows), the run's
metrics at its end (``success_rate``, ``ci95_low``, ``ci95_high``, ``n``, ``k``, ``errors``);
the experiment's process still logs the experiment's run as above, without the episode table.
Processes on other machines find each other through the group only; nothing is shared but
the W&B project.

W&B facts used (wandb 0.31): ``wandb.init(project, entity, group, name, job_type, config,
dir, mode, reinit="create_new")``, ``run.define_metric(name, step_metric=...)``,
``run.log(dict)``, ``run.summary.update``, ``wandb.init(id=..., resume="allow")``, ``wandb.Table``, ``wandb.Artifact.add_file``,
``run.log_artifact``, ``run.finish`` (https://docs.wandb.ai/ref/python/).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from arena.sinks import ResultSink, SinkConfig, SinkContext, experiment_metrics, failures, rate_metrics, roles_of

#: Columns of the ``episodes`` table, in order.
EPISODE_COLUMNS = ("run", "episode_index", "seed", "outcome", "steps", "duration_s", "task")
STEP_METRIC = "checkpoint_step"


class WandbConfig(SinkConfig):
    """Options of the ``wandb`` sink."""

    project: str = Field(..., min_length=1, description="W&B project")
    entity: str | None = Field(None, description="W&B entity (team or user); null: the key's default")
    per: Literal["experiment", "run"] = Field("experiment", description="one W&B run per arena experiment or per arena run")
    group: str | None = Field(None, description="W&B group; null: the experiment's id (shared by its processes)")
    mode: Literal["online", "offline", "disabled"] | None = Field(None, description="null: W&B's default ($WANDB_MODE)")
    dir: str | None = Field(None, description="where W&B writes its files; null: <output_dir>/wandb")
    tags: list[str] = Field(default_factory=list, description="tags of every W&B run")
    max_videos: int = Field(4, ge=0, description="episode videos uploaded with the experiment's run")
    api_key_env: str | None = Field("WANDB_API_KEY", description="NAME of the variable holding the W&B key")


class WandbSink(ResultSink):
    """Logs arena's events to W&B as the module docstring describes."""

    Config = WandbConfig

    def __init__(self, config: WandbConfig, context: SinkContext) -> None:
        super().__init__(config, context)
        self.config: WandbConfig = config
        self.started: dict[str, Any] | None = None
        self.run: Any = None
        self.rows: list[list[Any]] = []
        self.failed: list[str] = []

    # -- events ------------------------------------------------------------------------------
    def experiment_started(self, config: dict[str, Any], provenance: dict[str, Any] | None) -> None:
        self.started = {"experiment": config, "provenance": provenance}

    def episode_finished(self, run: str, record: dict[str, Any]) -> None:
        if self.config.per == "run":
            self.rows.append(_row(run, record))

    def run_finished(self, run: str, result: dict[str, Any]) -> None:
        if self.config.per != "run":
            return
        failed = failures({**result, "run": run})
        wb = self._open(self.context.tracker_name(), job_type="arena-run", config=None,
                        series=f"{self.context.series}-{self.context.run}" if self.context.series else None, failed=failed)
        self._log(wb, rate_metrics(result), failed)
        if self.rows:
            wb.log(self._table(self.rows))

    def experiment_finished(self, result: dict[str, Any], report: Path | None, videos: list[Path]) -> None:
        import wandb

        config = self.started or {"experiment": _snapshot(self.context.output_dir), "provenance": result.get("provenance")}
        failed = failures(result)
        wb = self._open(self.context.tracker_name(), job_type="arena-experiment", config=config, series=self.context.series,
                        failed=failed)
        self._log(wb, experiment_metrics(result, roles_of(self.context.output_dir)), failed)
        if self.config.per == "experiment":
            rows = [_row(run, r) for run, records in _records(self.context.output_dir, result).items() for r in records]
            wb.log(self._table(rows))
        if report is not None:
            artifact = wandb.Artifact(f"{_safe(self.context.group)}-report", type="arena-report")
            artifact.add_file(str(report), name="index.html")
            wb.log_artifact(artifact)
        chosen = videos[: self.config.max_videos]
        if chosen:
            artifact = wandb.Artifact(f"{_safe(self.context.group)}-videos", type="arena-videos")
            for video in chosen:
                artifact.add_file(str(video), name=f"videos/{_relative(video, self.context.output_dir)}")
            wb.log_artifact(artifact)

    def close(self) -> None:
        if self.run is not None:
            self.run.finish(exit_code=1 if self.failed else 0)  # W&B shows a run that exits non-zero as failed
            self.run = None

    # -- W&B ---------------------------------------------------------------------------------
    def _open(
        self, name: str, *, job_type: str, config: dict[str, Any] | None, series: str | None = None, failed: list[str] = ()
    ) -> Any:
        if self.run is not None:
            return self.run
        import wandb

        self.failed = list(failed)
        tags = list(self.config.tags)
        if failed:  # a series' run is tagged with the evaluation that failed, not as a whole
            label = self.context.label or (f"step{self.context.step}" if self.context.step is not None else None)
            tags.append(f"failed:{label}" if series and label else "failed")

        cfg = self.config
        directory = Path(cfg.dir) if cfg.dir else self.context.output_dir / "wandb"
        directory.mkdir(parents=True, exist_ok=True)
        settings = wandb.Settings(silent=True, console="off", x_disable_stats=True)
        resume: dict[str, Any] = {}
        if series:  # every evaluation of the series logs into one W&B run (the module docstring)
            resume = {"id": _safe(series)[:64], "resume": "allow"}
            name = f"{self.context.series_name()}" + (f"/{self.context.run}" if self.context.run else "")
        self.run = wandb.init(
            **resume,
            project=cfg.project,
            entity=cfg.entity,
            group=cfg.group or (self.context.series if series else self.context.group),
            name=name,
            job_type=job_type,
            tags=tags,
            config={"arena": {**(config or {}), "group": self.context.group, "step": self.context.step,
                              "label": self.context.label, "series": self.context.series}},
            dir=str(directory),
            mode=cfg.mode,
            reinit="create_new",
            settings=settings,
        )
        if self.context.step is not None:
            self.run.define_metric(STEP_METRIC)
            self.run.define_metric("*", step_metric=STEP_METRIC)
        return self.run

    def _log(self, wb: Any, metrics: dict[str, float], failed: list[str]) -> None:
        row: dict[str, Any] = dict(metrics)
        if self.context.step is not None:
            row[STEP_METRIC] = self.context.step
        wb.log(row)
        # the summary says whether this (the latest) evaluation failed, and why
        wb.summary.update({**row, "failed": bool(failed), "failures": "; ".join(failed)})

    def _table(self, rows: list[list[Any]]) -> dict[str, Any]:
        import wandb

        return {"episodes": wandb.Table(columns=list(EPISODE_COLUMNS), data=rows)}


def _row(run: str, record: dict[str, Any]) -> list[Any]:
    return [run, record.get("episode_index"), record.get("seed"), record.get("outcome"), record.get("steps"),
            record.get("duration_s"), record.get("task")]


def _records(output_dir: Path, result: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    from arena.results.run_summary import collect_run_records

    out = {}
    for run in result.get("runs") or {}:
        records = collect_run_records(output_dir / run)
        out[run] = sorted((r.model_dump(mode="json", by_alias=True) for r in records), key=lambda r: r["episode_index"])
    return out


def _snapshot(output_dir: Path) -> dict[str, Any] | None:
    import yaml

    try:
        data = yaml.safe_load((output_dir / "experiment.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def _relative(path: Path, base: Path) -> str:
    try:
        return str(Path(path).relative_to(base))
    except ValueError:
        return Path(path).name


def _safe(name: str) -> str:
    """An artifact name: letters, digits, ``-``, ``_`` and ``.`` only."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name) or "arena"
