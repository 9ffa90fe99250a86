"""The ``mlflow`` result sink: an arena experiment as an MLflow parent run with child runs.

Configured in the experiment::

    tracking:
      step: 12000                 # optional: the checkpoint's training step (the metrics' step)
      mlflow:
        tracking_uri: sqlite:////abs/path/mlflow.db   # null: $MLFLOW_TRACKING_URI, else MLflow's default
        experiment_name: null     # null: the arena experiment's name
        artifact_location: null   # a new MLflow experiment's artifact root (e.g. file:///abs/artifacts)
        per: experiment           # or `run`: a child run per arena run too
        token_env: null           # NAME of the variable holding a tracking server's token

A relative ``tracking_uri`` path is relative to the working directory of each process that
logs (``arena run``, ``arena run-one``, ``arena collect``): give an absolute one, or a server URL.
A new MLflow experiment on a SQLite store (``sqlite:///PATH``) without
``artifact_location`` keeps its artifacts beside the store (``<store's folder>/mlartifacts``),
not in ``./mlruns`` of whichever directory a process ran in.

One **parent run** per arena experiment (tags ``arena.group`` = the experiment's id
:func:`arena.sinks.experiment_group`, ``arena.role`` = ``experiment``; named
``<experiment>/<label>``, :meth:`arena.sinks.SinkContext.tracker_name`): created at the
experiment's start (``arena run``), found again by those tags by every other process
(``arena run-one`` on any machine, ``arena collect``), created by the first that finds none.
It gets the resolved experiment flattened into params (``runs.NAME.policy.type`` …, values
cut at 500 characters), ``experiment.yaml`` and ``provenance.json`` as artifacts, at the
end :func:`arena.sinks.experiment_metrics` as metrics (``<run>/success_rate``,
``<run>/ci95_low``, ``<run>/metrics/<key>``, ``<run>/return`` with their intervals, and
``evaluated/…`` for the run marked ``role: evaluated``; nothing pooled over runs; all at step
``tracking.step``, or 0), the report (``index.html``), ``episodes.json`` (every episode
record, ``per: experiment``) and at most ``max_videos`` videos (``videos/<run>/…``), and ends
``FINISHED``; or, when a run ended ``failed`` or ``cancelled`` (its numbers are not the
policy's), ``FAILED``, with the tag ``arena.failures`` saying why (one line per run) and
``<run>/failed`` = 1 among its metrics in place of ``n``/``k`` zeros.

With ``per: run``, each ``arena run-one`` opens a **child run** (tag ``mlflow.parentRunId``,
``arena.run``, named ``<experiment>/<run>/<label>``, ``-shard<K>`` after the run for a shard):
the run's resolved settings as params (``environment.task``, ``policy.type`` …, and
``tracking.step`` / ``tracking.label``), at its end the run's metrics (``success_rate``,
``ci95_low``, ``ci95_high``, ``n``, ``k``, ``errors``, episode metrics and return with
intervals, at step ``tracking.step``) and ``episodes.json``; it ends ``FINISHED`` when the run
completed, else ``FAILED``. "Step" means the training step only: episodes are rows of
``episodes.json``, not steps of a metric.

**One curve per training run.** With ``tracking.series`` (``arena watch`` sets it; with
``tracking.step`` and no series, the experiment's name: :func:`arena.sinks.default_series`, so
a training loop calling ``arena.evaluate`` draws one curve) the
evaluations of one training run hang under one **series run** (tags ``arena.series``,
``arena.role`` = ``series``, named ``<experiment>/<series>``): each evaluation's parent run is
its child (``mlflow.parentRunId``), and the series run itself gets each evaluation's metrics at
step ``tracking.step``, so its metric charts are the curve. This is MLflow's own idiom for
one training run evaluated many times: nested runs under a parent (as its hyperparameter
sweeps and autologging use) and a metric history keyed by step. The series run is ``RUNNING``
while an evaluation is, and ends with it: ``FINISHED``, or ``FAILED`` when that evaluation
failed (the next evaluation sets it ``RUNNING`` again).

MLflow facts used (3.17): ``MlflowClient(tracking_uri)``, ``get_experiment_by_name``,
``create_experiment``, ``create_run(experiment_id, tags, run_name)``, ``search_runs`` with a
``tags.`name` = 'v'`` filter, ``log_batch(metrics, params)`` (at most 100 params a call),
``log_dict``, ``log_artifact``, ``set_terminated``, ``update_run(run_id, status)`` (https://mlflow.org/docs/latest/python_api/mlflow.client.html).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from arena.sinks import ResultSink, SinkConfig, SinkContext, experiment_metrics, failures, rate_metrics

GROUP_TAG = "arena.group"
ROLE_TAG = "arena.role"
PARAM_CHARS = 500
PARAMS_PER_CALL = 100


class MlflowConfig(SinkConfig):
    """Options of the ``mlflow`` sink."""

    tracking_uri: str | None = Field(None, description="null: $MLFLOW_TRACKING_URI, else MLflow's default")
    experiment_name: str | None = Field(None, description="MLflow experiment; null: the arena experiment's name")
    artifact_location: str | None = Field(
        None, description="where a new MLflow experiment keeps artifacts; null: the tracking server's default"
    )
    per: Literal["experiment", "run"] = Field("experiment", description="a child run per arena run too (`run`)")
    max_videos: int = Field(4, ge=0, description="episode videos logged as artifacts of the parent run")
    token_env: str | None = Field(None, description="NAME of the variable holding the tracking server's token")


class MlflowSink(ResultSink):
    """Logs arena's events to MLflow as the module docstring describes."""

    Config = MlflowConfig

    def __init__(self, config: MlflowConfig, context: SinkContext) -> None:
        super().__init__(config, context)
        self.config: MlflowConfig = config
        self._client: Any = None
        self._experiment_id: str | None = None
        self.parent: str | None = None
        self.child: str | None = None
        self.child_parented = False
        self._series_id: str | None = None
        self.episodes: list[dict[str, Any]] = []

    # -- events ------------------------------------------------------------------------------
    def experiment_started(self, config: dict[str, Any], provenance: dict[str, Any] | None) -> None:
        from mlflow.entities import Param

        client = self.client
        parent = self._parent(create=True)
        params = [Param(k[:250], _text(v)) for k, v in _flatten(config).items()]
        for i in range(0, len(params), PARAMS_PER_CALL):
            client.log_batch(parent, params=params[i : i + PARAMS_PER_CALL])
        client.log_dict(parent, config, "experiment.yaml")
        if provenance is not None:
            client.log_dict(parent, provenance, "provenance.json")

    def episode_finished(self, run: str, record: dict[str, Any]) -> None:
        if self.config.per != "run":
            return
        self.episodes.append(record)
        self._child()  # the child run exists (and shows as running) from the first episode

    def run_finished(self, run: str, result: dict[str, Any]) -> None:
        if self.config.per != "run":
            return
        child = self._child()
        if not self.child_parented and self._wait_for_parent() is not None:  # the parent came after the child
            self.client.set_tag(child, "mlflow.parentRunId", self.parent)
        self._metrics(child, rate_metrics(result))
        if failed := failures({**result, "run": run}):
            self.client.set_tag(child, "arena.failures", "; ".join(failed)[:5000])
        self.client.log_dict(child, {"episodes": self.episodes}, "episodes.json")
        self.client.set_terminated(child, "FINISHED" if result.get("state") == "completed" else "FAILED")
        self.child = None

    def experiment_finished(self, result: dict[str, Any], report: Path | None, videos: list[Path]) -> None:
        from arena.sinks import roles_of

        client = self.client
        parent = self._parent(create=True)
        metrics = experiment_metrics(result, roles_of(self.context.output_dir))
        failed = failures(result)
        self._metrics(parent, metrics)
        if failed:  # its numbers are not the policy's: say so where the run list shows it
            client.set_tag(parent, "arena.failures", "; ".join(failed)[:5000])
        if self.context.series:
            self._metrics(self._series(), metrics)
        if self.config.per == "experiment":
            client.log_dict(parent, {"episodes": _records(self.context.output_dir, result)}, "episodes.json")
        if report is not None:
            client.log_artifact(parent, str(report))
        for video in videos[: self.config.max_videos]:
            rel = _relative(video, self.context.output_dir)
            client.log_artifact(parent, str(video), artifact_path=str(Path("videos") / Path(rel).parent))
        status = "FAILED" if failed else "FINISHED"
        client.set_terminated(parent, status)
        if self.context.series:  # ends with its latest evaluation; the next one reopens it
            client.set_terminated(self._series(), status)

    def close(self) -> None:
        if self.child is not None:  # the run-one process ended before its run_finished
            self.client.set_terminated(self.child, "KILLED")
            self.child = None

    # -- MLflow ------------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            from mlflow.tracking import MlflowClient

            if self.config.token_env and os.environ.get(self.config.token_env):
                os.environ["MLFLOW_TRACKING_TOKEN"] = os.environ[self.config.token_env]
            self._client = _open_store(lambda: MlflowClient(tracking_uri=self.config.tracking_uri), self.config.tracking_uri)
        return self._client

    @property
    def experiment_id(self) -> str:
        if self._experiment_id is None:
            from mlflow.exceptions import MlflowException

            name = self.config.experiment_name or self.context.experiment
            found = self.client.get_experiment_by_name(name)
            if found is None:
                try:
                    location = self.config.artifact_location or beside_store(self.client.tracking_uri)
                    self._experiment_id = self.client.create_experiment(name, artifact_location=location)
                except MlflowException:  # another process created it first
                    found = self.client.get_experiment_by_name(name)
                    if found is None:
                        raise
                    self._experiment_id = found.experiment_id
            else:
                self._experiment_id = found.experiment_id
        return self._experiment_id

    def _find(self, role: str, run: str | None = None) -> str | None:
        query = f"tags.`{GROUP_TAG}` = '{self.context.group}' and tags.`{ROLE_TAG}` = '{role}'"
        if run is not None:
            query += f" and tags.`arena.run` = '{run}'"
        runs = self.client.search_runs([self.experiment_id], filter_string=query, max_results=1, order_by=["attributes.start_time ASC"])
        return runs[0].info.run_id if runs else None

    def _parent(self, *, create: bool) -> str | None:
        if self.parent is None:
            self.parent = self._find("experiment")
        if self.parent is None and create:
            tags = {GROUP_TAG: self.context.group, ROLE_TAG: "experiment", "arena.output_dir": str(self.context.output_dir)}
            if self.context.step is not None:
                tags["arena.step"] = str(self.context.step)
            if self.context.label is not None:
                tags["arena.label"] = self.context.label
            if self.context.series:
                tags["mlflow.parentRunId"] = self._series()
            self.parent = self.client.create_run(self.experiment_id, tags=tags, run_name=self.context.tracker_name()).info.run_id
        return self.parent

    def _series(self) -> str:
        """The series run of ``tracking.series``: found by its tags, else created."""
        if self._series_id is None:
            query = f"tags.`arena.series` = '{self.context.series}' and tags.`{ROLE_TAG}` = 'series'"
            runs = self.client.search_runs([self.experiment_id], filter_string=query, max_results=1, order_by=["attributes.start_time ASC"])
            if runs:
                self._series_id = runs[0].info.run_id
                if runs[0].info.status != "RUNNING":  # ended by the previous evaluation: running again
                    self.client.update_run(self._series_id, status="RUNNING")
            else:
                tags = {"arena.series": str(self.context.series), ROLE_TAG: "series"}
                self._series_id = self.client.create_run(self.experiment_id, tags=tags,
                                                         run_name=self.context.series_name()).info.run_id
        return self._series_id

    def _wait_for_parent(self) -> str | None:
        """The parent run, waiting up to :data:`PARENT_WAIT_S` seconds for the process that
        raises the experiment's start (``arena run``) to create it: a short run can finish
        before that process's sink thread has reached the store."""
        deadline = time.monotonic() + PARENT_WAIT_S
        while self._parent(create=False) is None and time.monotonic() < deadline:
            time.sleep(0.5)
        return self.parent

    def _child(self) -> str:
        if self.child is None:
            tags = {GROUP_TAG: self.context.group, ROLE_TAG: "run", "arena.run": str(self.context.run)}
            parent = self._parent(create=False)
            if parent is not None:
                tags["mlflow.parentRunId"] = parent
            self.child_parented = parent is not None
            if self.context.step is not None:
                tags["arena.step"] = str(self.context.step)
            self.child = self.client.create_run(self.experiment_id, tags=tags, run_name=self.context.tracker_name()).info.run_id
            self._child_params(self.child)
        return self.child

    def _child_params(self, child: str) -> None:
        """The run's resolved settings (``experiment.yaml``'s ``runs.<run>``) and the tracking
        step and label, as the child run's params."""
        from mlflow.entities import Param

        import yaml

        try:
            snapshot = yaml.safe_load((self.context.output_dir / "experiment.yaml").read_text()) or {}
        except (OSError, yaml.YAMLError):
            snapshot = {}
        own = ((snapshot.get("runs") or {}).get(self.context.run) or {}) if isinstance(snapshot, dict) else {}
        flat = _flatten(own)
        for key in ("step", "label", "series"):
            if getattr(self.context, key) is not None:
                flat[f"tracking.{key}"] = getattr(self.context, key)
        params = [Param(k[:250], _text(v)) for k, v in flat.items()]
        for i in range(0, len(params), PARAMS_PER_CALL):
            self.client.log_batch(child, params=params[i : i + PARAMS_PER_CALL])

    def _metrics(self, run_id: str, metrics: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        step = self.context.step if self.context.step is not None else 0
        items = [Metric(key, float(value), now, step) for key, value in metrics.items()]
        for i in range(0, len(items), 1000):
            self.client.log_batch(run_id, metrics=items[i : i + 1000])


def beside_store(tracking_uri: str | None) -> str | None:
    """``file://<folder of the database>/mlartifacts`` for a SQLite store (``sqlite:///PATH``),
    where MLflow would otherwise use ``./mlruns`` of the working directory; ``None`` (the
    store's own default) otherwise: a file store keeps artifacts inside itself, a server has
    its artifact root."""
    from urllib.parse import urlparse

    if not tracking_uri:
        return None
    parsed = urlparse(tracking_uri)
    if parsed.scheme == "sqlite":
        path = tracking_uri.split(":///", 1)[1] if ":///" in tracking_uri else ""
        if not path or path == ":memory:":
            return None
        return (Path(path).resolve().parent / "mlartifacts").as_uri()
    return None  # a file store keeps artifacts inside itself already; a server has its own root


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: data} if prefix else {}


def _text(value: Any) -> str:
    import json

    text = value if isinstance(value, str) else json.dumps(value)
    return text[:PARAM_CHARS]


def _records(output_dir: Path, result: dict[str, Any]) -> list[dict[str, Any]]:
    from arena.results.run_summary import collect_run_records

    out = []
    for run in result.get("runs") or {}:
        records = collect_run_records(output_dir / run)
        out += sorted((r.model_dump(mode="json", by_alias=True) for r in records), key=lambda r: r["episode_index"])
    return out


def _relative(path: Path, base: Path) -> str:
    try:
        return str(Path(path).relative_to(base))
    except ValueError:
        return Path(path).name


#: Seconds a child run waits at its end for the experiment's parent run to appear.
PARENT_WAIT_S = 30.0
#: Seconds :func:`_open_store` keeps trying to open a tracking store another process is creating.
STORE_OPEN_TIMEOUT_S = 30.0


def _open_store(make_client: Callable[[], Any], uri: str | None) -> Any:
    """A client from ``make_client()`` whose store (``uri``) has been opened once, trying again
    while that fails for up to :data:`STORE_OPEN_TIMEOUT_S` seconds.

    ``arena run`` and each ``arena run-one`` open the same store at about the same time; with a
    new SQLite store, one of them may meet the other's table creation (a locked database, a
    table that exists already) on its first call, which would otherwise cost that process's
    first event. A SQLite store is first opened under an exclusive lock on a file beside it
    (``<db>.arena-lock``): MLflow migrates a new database's schema on its first open, and two
    processes migrating at once leave one of them with a stale schema version (alembic's
    "Online migration expected to match one row ... 0 found"). Raises the last error when the
    store still cannot be opened.
    """
    deadline = time.monotonic() + STORE_OPEN_TIMEOUT_S
    delay = 0.05
    uri = str(uri or "")
    lock_path = Path(uri[len("sqlite:///"):] + ".arena-lock") if uri.startswith("sqlite:///") else None
    while True:
        try:
            if lock_path is None:
                client = make_client()
                client.search_experiments(max_results=1)
            else:
                import fcntl

                with open(lock_path, "a") as lock:
                    fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
                    client = make_client()
                    client.search_experiments(max_results=1)
            return client
        except Exception:
            if time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
