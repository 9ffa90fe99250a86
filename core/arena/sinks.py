"""Result sinks: experiment trackers (W&B, MLflow, …) fed with arena's events as they happen.

A sink is a class registered by a plugin through ``arena_register_result_sinks(register)``
(``register(name, sink_cls)``), configured in the experiment's ``tracking`` section under that
name (``tracking: {wandb: {project: demo}}``; options validated with ``sink_cls.Config``, a
:class:`SinkConfig`). ``tracking.step`` (an int, optional) is the training step of the evaluated
checkpoint, passed to every sink as :attr:`SinkContext.step` (``arena watch`` sets it).
Credentials are given by environment-variable NAME only (:meth:`SinkConfig.secret_env_names`);
every run's runner receives those names as it receives the run's ``credentials``.

Events and the process each is raised in:

================================  ===========================================================
``experiment_started``            ``arena run`` (every backend, before the runs are handed over)
``episode_finished``              each ``arena run-one`` (one process per run, on the compute
                                  node for cluster backends), as each record is written
``run_finished``                  each ``arena run-one``, after ``run_result.json`` is written
``experiment_finished``           ``arena run`` once the runs are done (local backend, or
                                  ``--wait``); ``arena collect`` for a cluster submission
================================  ===========================================================

So one experiment's sink exists in several processes at once; :attr:`SinkContext.group` is an
id every process derives alike (from ``manifest.json``'s experiment name and ``created_at``),
for a sink to join its tracker records into one "run per experiment" (a W&B group, an MLflow
parent run).

**Never in the way of a run.** Each sink runs in its own process behind a bounded queue
(:data:`QUEUE_SIZE` events): raising an event never waits; a full queue drops the event with
one logged line; an exception in a sink is logged (on stderr, naming the sink and the event)
and the sink receives the next event; closing waits at most the sink's ``timeout_s`` seconds
from the moment the run is done, then ends the sink's process, so an unreachable tracker (and
its library's own retries, flushes and exit handlers) costs a run at most ``timeout_s``. The records, exit codes and results of
runs never depend on a sink.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from arena.config.tracking import SinkConfig, TrackingConfig  # the section as validated; a sink's Config subclasses SinkConfig
from arena.outputs.layout import EXPERIMENT_RESULT_FILE, MANIFEST_FILE, REPORT_FILE

#: Events one sink's queue holds; more are dropped (logged), never waited for.
QUEUE_SIZE = 1024


def _json_default(value: Any) -> Any:
    """Paths as strings, numpy scalars and arrays as numbers and lists (events to a sink process)."""
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON-able")


@dataclass(frozen=True)
class SinkContext:
    """Where a sink is created.

    ``role`` is ``"experiment"`` in the process raising the experiment's start and end
    (``arena run`` / ``arena collect``) and ``"run"`` in an ``arena run-one`` (then ``run`` names
    its run and ``shard`` is ``(K, N)`` or ``None``). ``group`` is the experiment's id shared by
    all those processes (:func:`experiment_group`); ``step`` the checkpoint's training step;
    ``label`` names this evaluation (``tracking.label``, e.g. the checkpoint's name; default
    ``step<step>`` when there is a step); ``series`` is the id shared by every evaluation of
    one training run (``tracking.series``; ``arena watch`` sets it; with a ``step`` and no
    series, :data:`DEFAULT_SERIES`: the experiment's name), which a tracker draws as one curve
    against ``step``. :meth:`tracker_name` is the name a tracker's run gets.
    """

    experiment: str
    output_dir: Path
    group: str
    role: str
    step: int | None = None
    run: str | None = None
    shard: tuple[int, int] | None = None
    label: str | None = None
    series: str | None = None

    def tracker_name(self, run: str | None = None) -> str:
        """``<experiment>/<run>/<label>`` (the parts that are known; a shard adds
        ``-shard<K>`` to the run): every evaluation's tracker runs differ by name."""
        run = run if run is not None else self.run
        if run is not None and self.shard is not None and run == self.run:
            run = f"{run}-shard{self.shard[0]}"
        label = self.label if self.label is not None else (f"step{self.step}" if self.step is not None else None)
        return "/".join(p for p in (self.experiment, run, label) if p)

    def series_name(self) -> str | None:
        """The name of the tracker run holding the series' curve: ``<experiment>/<series>``, or
        ``<experiment>`` alone for the default series (the experiment's name); ``None``
        without a series."""
        if not self.series:
            return None
        return self.experiment if self.series == self.experiment else f"{self.experiment}/{self.series}"


class ResultSink:
    """Base class of a result sink; override the events you use (each default does nothing).

    Methods are called on the sink's own thread, one at a time, in the order the events
    happened in this process. Payloads are plain JSON-able data.
    """

    Config: ClassVar[type[SinkConfig]] = SinkConfig

    def __init__(self, config: SinkConfig, context: SinkContext) -> None:
        self.config = config
        self.context = context

    def experiment_started(self, config: dict[str, Any], provenance: dict[str, Any] | None) -> None:
        """The experiment starts: ``config`` is the resolved snapshot (``experiment.yaml``'s
        data), ``provenance`` the content of ``provenance.json`` (or ``None``)."""

    def episode_finished(self, run: str, record: dict[str, Any]) -> None:
        """One episode of ``run`` was recorded: ``record`` is its line of ``episodes.jsonl``."""

    def run_finished(self, run: str, result: dict[str, Any]) -> None:
        """``run`` (or this process's shard of it) ended: ``result`` is ``run_result.json``."""

    def experiment_finished(self, result: dict[str, Any], report: Path | None, videos: list[Path]) -> None:
        """The experiment's result is built: ``result`` is ``experiment_result.json``,
        ``report`` the ``index.html`` path, ``videos`` every episode video of the output."""

    def close(self) -> None:
        """The process is done with the sink (flush, finish the tracker's run)."""


def experiment_group(experiment: str, output_dir: str | os.PathLike[str]) -> str:
    """The id of one experiment's output, the same in every process that reads it:
    ``<experiment>-<8 hex digits>`` hashing ``manifest.json``'s ``created_at`` (else the output
    directory's name), so two experiments into equally named directories differ."""
    out = Path(output_dir)
    created = None
    try:
        created = json.loads((out / MANIFEST_FILE).read_text()).get("created_at")
    except (OSError, ValueError, AttributeError):
        pass
    digest = hashlib.sha1(f"{experiment}|{created or out.resolve().name}".encode()).hexdigest()[:8]
    return f"{experiment}-{digest}"


def _log(text: str) -> None:
    print(f"arena: tracking: {text}", file=sys.stderr, flush=True)


class _Worker:
    """One sink in its own process (:mod:`arena.sink_process`) behind a bounded queue.

    A process, not a thread, because a tracker library's own waiting is out of arena's reach in
    a thread: W&B's ``init`` / ``finish`` wait up to 90 s for an unreachable service, and what
    they registered with ``atexit`` holds the interpreter's exit after an abandoned thread;
    MLflow's HTTP client retries for minutes in the background of the process that called it
    (a training script, with ``arena.evaluate()``). A process ends when :meth:`close`'s
    deadline passes (SIGKILL), so ``timeout_s`` bounds the whole time a process
    spends on its sink, the library's shutdown and flush included. Events go to it as JSON lines over
    its stdin, written by a feeder thread, so raising one never waits.
    """

    _STOP = None

    def __init__(self, name: str, cls: type, config: SinkConfig, context: SinkContext) -> None:
        import dataclasses
        import subprocess

        self.name = name
        self.timeout_s = float(config.timeout_s)
        self.dropped = 0
        self.queue: queue.Queue = queue.Queue(QUEUE_SIZE)
        # JSON lines, never pickles: classes travel as import paths, the config as its JSON dump
        head = {
            "sys_path": list(sys.path), "name": name, "cls": f"{cls.__module__}:{cls.__qualname__}",
            "config_cls": f"{type(config).__module__}:{type(config).__qualname__}",
            "config": config.model_dump(mode="json"),
            "context": {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(context).items()},
        }
        head_line = (json.dumps(head, default=_json_default) + "\n").encode()  # fails here if not JSON-able
        self.process = subprocess.Popen([sys.executable, "-m", "arena.sink_process"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        self.feeder = threading.Thread(target=self._feed, args=(head_line,), name=f"arena-sink-{name}", daemon=True)
        self.feeder.start()

    def _feed(self, head: bytes) -> None:
        stdin = self.process.stdin
        try:
            stdin.write(head)
            stdin.flush()
            while True:
                item = self.queue.get()
                try:
                    data = (json.dumps(item, default=_json_default) + "\n").encode()
                except Exception as exc:
                    _log(f"sink '{self.name}': an event could not be sent ({type(exc).__name__}: {exc}); dropped")
                    continue
                stdin.write(data)
                stdin.flush()
                if item is self._STOP:
                    break
        except (BrokenPipeError, OSError, ValueError):  # the sink's process is gone
            pass
        finally:
            try:
                stdin.close()
            except (BrokenPipeError, OSError):
                pass

    def put(self, method: str, args: tuple) -> None:
        try:
            self.queue.put_nowait((method, args))
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1:
                _log(f"sink '{self.name}' is not keeping up (queue of {QUEUE_SIZE} full): dropping events")

    def close(self, deadline: float) -> None:
        import subprocess

        try:
            self.queue.put(self._STOP, timeout=max(0.01, deadline - time.monotonic()))
        except queue.Full:
            pass
        try:
            self.process.wait(max(0.0, deadline - time.monotonic()))
            self.feeder.join(1.0)
            return
        except subprocess.TimeoutExpired:
            pass
        _log(f"sink '{self.name}' did not finish within {self.timeout_s:g} s; abandoning it (the results are unaffected)")
        self.process.kill()  # it ignores SIGINT/SIGTERM (sent to the whole group by Ctrl-C, arena cancel)
        try:
            self.process.wait(5.0)
        except subprocess.TimeoutExpired:
            pass
        self.feeder.join(1.0)


class Sinks:
    """The sinks of one process: raise events without waiting; :meth:`close` at the end.

    Empty (every method a no-op) when the experiment configures no ``tracking``. Use as a
    context manager, or call :meth:`close`.
    """

    def __init__(self, tracking: TrackingConfig | None, context: SinkContext) -> None:
        self.context = context
        self.workers: list[_Worker] = []
        if tracking is None:
            return
        for name, sink in tracking.sinks.items():
            try:
                self.workers.append(_Worker(name, sink.cls, sink.config, context))
            except Exception as exc:  # e.g. a sink class that cannot be sent to another process
                _log(f"sink '{name}' could not start: {type(exc).__name__}: {exc}; its events are dropped")

    def _emit(self, method: str, *args: Any) -> None:
        for worker in self.workers:
            worker.put(method, args)

    def experiment_started(self, config: dict[str, Any], provenance: dict[str, Any] | None) -> None:
        self._emit("experiment_started", config, provenance)

    def episode_finished(self, run: str, record: dict[str, Any]) -> None:
        self._emit("episode_finished", run, record)

    def run_finished(self, run: str, result: dict[str, Any]) -> None:
        if self.workers:
            result = with_returns(result, self.context.output_dir / run)
        self._emit("run_finished", run, result)

    def experiment_finished(self, result: dict[str, Any], report: Path | None, videos: list[Path]) -> None:
        self._emit("experiment_finished", result, report, videos)

    def close(self) -> None:
        """Let every sink finish, waiting at most its ``timeout_s`` (sinks finish in parallel)."""
        start = time.monotonic()
        for worker in self.workers:
            worker.close(start + worker.timeout_s)
        self.workers = []

    def __enter__(self) -> Sinks:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


#: What ``tracking.series`` is when an evaluation gives ``tracking.step`` and no series (a
#: training loop calling ``arena.evaluate(..., tracking.step=N)``): the experiment's name, the
#: same for every evaluation of the loop, so the trackers draw one curve. Another training run
#: evaluated with the same experiment names its own series.
DEFAULT_SERIES = "the experiment's name"


def default_series(experiment_name: str, step: int | None, series: str | None) -> str | None:
    """``series`` as given; else, when there is a ``step``, the experiment's name
    (:data:`DEFAULT_SERIES`); else ``None`` (a one-off evaluation is no curve)."""
    if series is not None:
        return series
    return experiment_name if step is not None else None


def _sinks(experiment: Any, output_dir: str | os.PathLike[str], role: str, **where: Any) -> Sinks:
    """The sinks of a process of ``role`` (``run``: ``where`` names its run and shard)."""
    tracking = getattr(experiment, "tracking", None)
    step = tracking.step if tracking else None
    context = SinkContext(
        experiment=experiment.name,
        output_dir=Path(output_dir),
        group=experiment_group(experiment.name, output_dir) if tracking and tracking.sinks else "",
        role=role,
        step=step,
        label=tracking.label if tracking else None,
        series=default_series(experiment.name, step, tracking.series if tracking else None),
        **where,
    )
    return Sinks(tracking, context)


def run_sinks(experiment: Any, output_dir: str | os.PathLike[str], run: str, shard: tuple[int, int] | None = None) -> Sinks:
    """The sinks of one ``arena run-one`` process (run ``run``, shard ``shard``)."""
    return _sinks(experiment, output_dir, "run", run=run, shard=shard)


def experiment_sinks(experiment: Any, output_dir: str | os.PathLike[str]) -> Sinks:
    """The sinks of the process raising the experiment's start or end."""
    return _sinks(experiment, output_dir, "experiment")


def read_provenance(output_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``provenance.json`` of ``output_dir`` (``None`` when unreadable)."""
    from arena.results.provenance import read_provenance as read

    try:
        data = read(Path(output_dir))
    except Exception:  # provenance is a nicety for a tracker
        return None
    return data if isinstance(data, dict) else None


def rate_metrics(entry: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Numbers a tracker plots for one run's result: ``success_rate``, ``ci95_low`` /
    ``ci95_high`` (the interval valid for it: Wilson's, or the confidence sequence's after an
    early stop), ``n`` (non-error episodes), ``k`` (successes), ``errors``; for each episode
    metric ``metrics/<key>/mean``, ``metrics/<key>/ci95_low`` and ``metrics/<key>/ci95_high``
    (the figures and interval method of :func:`arena.outputs.metrics.summarize_metrics`, as the
    results hold them); the episode return as ``return/mean`` with its interval, when the entry
    carries ``returns`` (:func:`with_returns`); each figure a reference tool names
    (``as_reported``, e.g. ``lerobot-eval/avg_sum_reward/mean`` with its interval). Keys
    prefixed ``prefix/`` when given. Works on
    an ``experiment_result.json`` run entry and on a ``run_result.json``; a missing rate
    (n = 0) or interval is left out. A run that ended ``failed`` or ``cancelled`` adds
    ``failed`` = 1 (and leaves out ``n``, ``k``, ``errors`` when it recorded no episode)."""
    counts = entry.get("counts") or {}
    k = entry.get("k", counts.get("success", 0))
    n = entry.get("n", sum(int(counts.get(o, 0)) for o in ("success", "failure", "timeout")))
    errors = entry.get("errors", counts.get("error", 0))
    failed = entry.get("state") in FAILED_STATES
    out: dict[str, float] = {"failed": 1.0} if failed else {}
    if not (failed and not n and not errors):  # a run that never measured anything logs no zeros
        out.update({"n": float(n), "k": float(k), "errors": float(errors)})
    if entry.get("success_rate") is not None:
        out["success_rate"] = float(entry["success_rate"])
        stop = entry.get("stop") if isinstance(entry.get("stop"), dict) else {}
        ci = stop.get("sequence_ci") or entry.get("ci95") or [None, None]
        if ci[0] is not None and ci[1] is not None:
            out["ci95_low"], out["ci95_high"] = float(ci[0]), float(ci[1])
    named = {f"metrics/{key}": m for key, m in (entry.get("metrics") or {}).items()} if isinstance(entry.get("metrics"), Mapping) else {}
    if isinstance(entry.get("returns"), Mapping):
        named["return"] = entry["returns"]
    reported = entry.get("as_reported") if isinstance(entry.get("as_reported"), Mapping) else {}
    for name, figure in (reported.get("figures") or {}).items():  # e.g. lerobot-eval's avg_sum_reward
        named[f"{reported.get('by') or 'reference'}/{name}"] = figure
    for name, summary in named.items():  # the same mean and interval as the results
        if not isinstance(summary, Mapping):
            continue
        for field, key in (("mean", "mean"), ("ci_low", "ci95_low"), ("ci_high", "ci95_high")):
            if _finite(summary.get(field)):
                out[f"{name}/{key}"] = float(summary[field])
    return {f"{prefix}/{k}" if prefix else k: v for k, v in out.items()}


#: Run states of an evaluation that did not finish: its numbers are not the policy's.
FAILED_STATES = ("failed", "cancelled")


def failures(result: Mapping[str, Any]) -> list[str]:
    """One line per run of ``result`` (``experiment_result.json``, or a ``run_result.json``
    with ``run`` in it) that ended ``failed`` or ``cancelled``: ``run 'NAME' failed: ERROR``.
    Empty when the evaluation finished (a tracker marks it failed otherwise)."""
    runs = result.get("runs")
    entries = runs.items() if isinstance(runs, Mapping) else [(result.get("run", "?"), result)]
    return [f"run '{name}' {entry.get('state')}" + (f": {entry['error']}" if entry.get("error") else "")
            for name, entry in entries if isinstance(entry, Mapping) and entry.get("state") in FAILED_STATES]


def _finite(value: Any) -> bool:
    import math

    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def experiment_metrics(result: Mapping[str, Any], roles: Mapping[str, str] | None = None) -> dict[str, float]:
    """:func:`rate_metrics` of every run (prefix its name) and, where the experiment names
    the policy under evaluation (one run with ``role: evaluated``, or a single run), of that
    run again under ``evaluated/``: the headline a training curve plots; and
    :func:`attribution_metrics`. Nothing is pooled over runs (a rate pooled over a policy and
    its baseline would mean nothing)."""
    runs = result.get("runs") or {}
    out: dict[str, float] = {}
    for name, entry in runs.items():
        out.update(rate_metrics(entry, name))
    marked = [name for name in runs if (roles or {}).get(name) == "evaluated"]
    chosen = marked or (list(runs) if len(runs) == 1 else [])
    if len(chosen) == 1:
        out.update(rate_metrics(runs[chosen[0]], "evaluated"))
    out.update(attribution_metrics(result))
    return out


def _metric_key(*parts: str) -> str:
    """A metric name every tracker accepts (MLflow's: letters, digits, ``_ - . / space``)."""
    import re

    return "/".join(re.sub(r"[^A-Za-z0-9_.\- ]", "_", str(p)) for p in parts)


def attribution_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of the report's "What drives failure" (``experiment_result.json``'s
    ``attribution``, :mod:`arena.results.attribution`), per sweep ``G`` and perturbed run ``R``:
    ``attribution/G/R/difference`` (level − nominal), ``…/ci95_low``, ``…/ci95_high``,
    ``…/p_holm``, ``…/errors`` and ``…/error_rate`` (error episodes, an outcome of the level); per model term ``T`` (``factor=level``, ``=`` written ``-``):
    ``attribution/G/model/T/log_odds_ratio``, ``…/ci95_low``, ``…/ci95_high``. Missing numbers
    are left out."""
    sweeps = ((result.get("attribution") or {}).get("sweeps") or {}) if isinstance(result, Mapping) else {}
    out: dict[str, float] = {}

    def put(key: str, value: Any) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = float(value)

    for group, sweep in sweeps.items():
        for row in sweep.get("rows") or []:
            ci = row.get("ci95") or [None, None]
            for name, value in (("difference", row.get("difference")), ("ci95_low", ci[0]), ("ci95_high", ci[1]),
                                ("p_holm", row.get("p_holm")), ("errors", row.get("errors")),
                                ("error_rate", row.get("error_rate"))):
                put(_metric_key("attribution", group, row.get("run"), name), value)
        model = sweep.get("model") or {}
        for term in model.get("terms") or []:
            ci = term.get("ci95") or [None, None]
            label = str(term.get("term")).replace("=", "-")
            for name, value in (("log_odds_ratio", term.get("log_odds_ratio")), ("ci95_low", ci[0]), ("ci95_high", ci[1])):
                put(_metric_key("attribution", group, "model", label, name), value)
    return out


def roles_of(output_dir: str | os.PathLike[str]) -> dict[str, str]:
    """``{run: role}`` from the output's snapshot (``experiment.yaml``)."""
    from arena.results.experiment_result import _roles

    return _roles(Path(output_dir))


def with_returns(result: Mapping[str, Any], run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``result`` (a run's entry) with ``returns``: the mean episode return over the run's
    counted episodes with its interval (:func:`arena.outputs.metrics.summarize_returns`, inside
    the bounds the environment declared for it in the output's manifest), read from the run's
    records; ``result`` unchanged when there are none."""
    from arena.outputs.layout import MANIFEST_FILE
    from arena.outputs.metrics import summarize_returns
    from arena.results.run_summary import counted_run_records

    try:
        records = counted_run_records(run_dir)
    except OSError:
        return dict(result)
    try:  # the run's entry of <output>/manifest.json (arena.rollout.workitems.write_manifest)
        manifest = json.loads((Path(run_dir).parent / MANIFEST_FILE).read_text())
        bounds = manifest["runs"][Path(run_dir).name].get("metric_bounds")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        bounds = None
    summary = summarize_returns(records, bounds if isinstance(bounds, Mapping) else None)
    return {**result, "returns": summary} if summary else dict(result)


def videos_of(output_dir: str | os.PathLike[str]) -> list[Path]:
    """Every episode video under ``output_dir`` (runs and their shards), sorted."""
    out = Path(output_dir)
    return sorted([*out.glob("*/videos/*"), *out.glob("*/shards/*/videos/*")])


def finish_experiment(sinks: Sinks, output_dir: str | os.PathLike[str]) -> None:
    """Raise ``experiment_finished`` from the output's ``experiment_result.json`` and
    ``index.html`` (nothing when the result was not written)."""
    out = Path(output_dir)
    if not sinks.workers:
        return
    try:
        result = json.loads((out / EXPERIMENT_RESULT_FILE).read_text())
    except (OSError, ValueError):
        return
    report = out / REPORT_FILE
    runs = {name: with_returns(entry, out / name) for name, entry in (result.get("runs") or {}).items()}
    sinks.experiment_finished({**result, "runs": runs}, report if report.exists() else None, videos_of(out))
