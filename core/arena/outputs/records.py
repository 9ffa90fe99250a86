"""Episode records (``episodes.jsonl``), run status (``status.json``) and result (``run_result.json``).

Files of a work directory (a run's, or a shard's ``<run>/shards/<K>/``; names and paths:
:mod:`arena.outputs.layout`):

- ``episodes.jsonl``: one JSON object per finished episode (:class:`EpisodeRecord`), appended
  and ``fsync``-ed one line at a time, so a crash loses at most the episode in progress. A torn
  last line (a crash mid-write) is reported by :func:`read_records`, never fatal.
  Non-finite numbers (a NaN reward from a physics blow-up, an infinite latency) are not JSON:
  a record writes each as the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` (the names
  JavaScript and Python's ``json`` give them) and lists the fields that held one in
  ``non_finite`` (dotted paths: ``"return"``, ``"latency.mean_ms"``, ``"metrics.coverage"`` —
  the last also when a step's metric value was non-finite and left out of the reduction);
  :func:`read_records` reads them back as ``float`` NaN/inf. Such an episode counts once, with
  its outcome, like any other; the run's results and report flag it (:func:`non_finite_warning`).
- ``status.json``: the run's live state (:class:`StatusWriter`), rewritten atomically.

Run states (:data:`RUN_STATES`): ``pending``, ``starting_server``, ``running``, ``completed``,
``failed`` (aborted by an infrastructure problem) and ``cancelled``.
"""

from __future__ import annotations

import errno
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import to_jsonable_python

from arena.errors import LaunchError, short_repr
from arena.fsutil import write_text_atomic
from arena.outputs.fingerprint import common_fingerprint
from arena.outputs.layout import EPISODES_FILE, EXPERIMENT_FILE, RUN_RESULT_FILE, STATUS_FILE, run_dir, run_names
from arena.outputs.metrics import summarize_metrics
from arena.outputs.run_stats import success_rate, wilson_interval

FORMAT_VERSION = 1
#: Record format versions this arena reads (``arena report`` rebuilds from any of them).
KNOWN_FORMAT_VERSIONS: tuple[int, ...] = (1,)

RUN_STATES: tuple[str, ...] = ("pending", "starting_server", "running", "completed", "failed", "cancelled")
#: States after which a run changes no more.
FINAL_STATES: tuple[str, ...] = ("completed", "failed", "cancelled")
#: States in which a run still holds (or will hold) resources.
LIVE_STATES: tuple[str, ...] = ("pending", "starting_server", "running")

def partial_note(state: str | None, done: int, total: int | None, errors: int) -> str | None:
    """Why a run's numbers cover less than it planned (``"partial: cancelled, 4 of 10
    episodes"``), or ``None`` when it completed every episode without an error.

    ``done``: episodes recorded (errors included); ``total``: episodes planned (``None``:
    unknown); ``errors``: error episodes. Every output that shows a run's numbers (report,
    ``arena compare``, ``arena status``, the progress line) shows this next to them.
    """
    parts = []
    if state not in (None, "completed"):
        parts.append(str(state))
    if total is not None and done < total:
        parts.append(f"{done} of {total} episodes")
    if errors:
        parts.append(f"{errors} error episode{'s' if errors != 1 else ''}")
    return "partial: " + ", ".join(parts) if parts else None


Outcome = Literal["success", "failure", "timeout", "error"]
OUTCOMES: tuple[str, ...] = ("success", "failure", "timeout", "error")


def utc_now() -> str:
    """The current time as an ISO 8601 string in UTC (``2026-01-02T03:04:05.678901+00:00``)."""
    return datetime.now(timezone.utc).isoformat()


class EpisodeRecord(BaseModel):
    """One finished episode: one line of ``episodes.jsonl``.

    ``outcome`` is the policy's (``success``, ``failure``, ``timeout``) or the
    infrastructure's (``error``, with ``error`` giving the reason). ``return`` (the sum of the
    episode's rewards) is spelled ``return_`` in Python. Unknown keys (a newer writer) are kept.
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    format_version: int = FORMAT_VERSION
    run: str
    episode_index: int = Field(ge=0)
    seed: int
    env_id: int | None = Field(None, description="which env of the vectorized batch ran it")
    task: str | None = None
    policy: dict[str, Any] = Field(default_factory=dict, description='{"type": str, "variant": str | None}')
    outcome: Outcome
    error: str | None = None
    steps: int = Field(0, ge=0, description="env steps of the episode")
    duration_s: float = Field(0.0, ge=0, description="wall-clock seconds from reset to end")
    return_: float = Field(0.0, alias="return", description="sum of the episode's rewards")
    latency: dict[str, Any] | None = Field(
        None, description="request latency stats: requests, mean_ms, p50_ms, p95_ms, max_ms"
    )
    server_timing: dict[str, Any] | None = Field(None, description="timing the server sent, if any")
    video: str | None = Field(None, description="video path relative to the run directory")
    trajectory: str | None = Field(
        None, description="recorded observations/actions (.npz, arena.rollout.trajectories), relative to the run directory"
    )
    protocol: dict[str, Any] | None = Field(
        None, description="protocol fingerprint: what makes two runs comparable (arena.outputs.fingerprint)"
    )
    metrics: dict[str, bool | float | None] | None = Field(
        None, description="episode metrics the environment declares, reduced over the episode (arena.outputs.metrics)"
    )
    non_finite: list[str] | None = Field(
        None, description='fields that held a NaN or infinite number, as dotted paths (e.g. "return"); see the module doc'
    )
    finished_at: str = Field(default_factory=utc_now, description="ISO 8601, UTC")

    @model_validator(mode="before")
    @classmethod
    def _read_non_finite(cls, data: Any) -> Any:
        """Turn the strings ``"NaN"``/``"Infinity"``/``"-Infinity"`` at the flagged paths back
        into floats (typed float fields would accept them anyway; free-form ones would not)."""
        if isinstance(data, dict) and isinstance(data.get("non_finite"), list):
            data = dict(data)
            for path in data["non_finite"]:
                if isinstance(path, str):
                    _decode_at(data, path.split("."))
        return data

    @model_validator(mode="after")
    def _flag_non_finite(self) -> EpisodeRecord:
        """List every field holding a non-finite number in ``non_finite`` (kept with the flags
        already there, e.g. a metric whose step values were non-finite)."""
        found: list[str] = []
        _encode_non_finite(self.model_dump(by_alias=True, exclude={"non_finite"}), "", found)
        flags = sorted({*(self.non_finite or ()), *found})
        self.non_finite = flags or None
        return self

    def to_json(self) -> str:
        """One line of ``episodes.jsonl`` (no newline); non-finite numbers as the module doc says."""
        # python mode keeps every float as it is (json mode would turn some into null)
        data = to_jsonable_python(_encode_non_finite(self.model_dump(by_alias=True), "", []), fallback=str)
        return json.dumps(data, separators=(",", ":"), allow_nan=False)


#: A non-finite number in a record, written as a string (module doc).
NON_FINITE_TEXT: dict[str, float] = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _encode_non_finite(value: Any, path: str, found: list[str]) -> Any:
    """``value`` with each non-finite float replaced by its :data:`NON_FINITE_TEXT` string;
    the dotted path of each is appended to ``found``."""
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        found.append(path)
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        value = value.tolist()
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, dict):
        return {k: _encode_non_finite(v, f"{path}.{k}" if path else str(k), found) for k, v in value.items()}
    if isinstance(value, list):
        return [_encode_non_finite(v, f"{path}.{i}" if path else str(i), found) for i, v in enumerate(value)]
    return value


def _decode_at(data: Any, keys: list[str]) -> None:
    """Replace the :data:`NON_FINITE_TEXT` string at ``keys`` (a path) inside ``data`` in place
    (copying the containers on the way, so the caller's input is not changed)."""
    key, rest = keys[0], keys[1:]
    if isinstance(data, dict) and key in data:
        at: Any = key
    elif isinstance(data, list) and key.isdigit() and int(key) < len(data):
        at = int(key)
    else:
        return
    if rest:
        if isinstance(data[at], (dict, list)):
            data[at] = type(data[at])(data[at])
            _decode_at(data[at], rest)
    elif isinstance(data[at], str) and data[at] in NON_FINITE_TEXT:
        data[at] = NON_FINITE_TEXT[data[at]]


def non_finite_episodes(records: Iterable[EpisodeRecord]) -> list[dict[str, Any]]:
    """``[{"episode_index", "seed", "outcome", "fields"}]`` of the records flagging a non-finite
    value (``non_finite``), in record order."""
    return [
        {"episode_index": r.episode_index, "seed": r.seed, "outcome": r.outcome, "fields": list(r.non_finite)}
        for r in records
        if r.non_finite
    ]


#: The words after the count in :func:`non_finite_warning` (readers replace an older one by it).
NON_FINITE_WARNING_START = "episode(s) had non-finite values"


def non_finite_warning(records: Iterable[EpisodeRecord]) -> str | None:
    """The run's warning about episodes with non-finite values (``None`` when there are none):
    they are counted with their outcome; their non-finite numbers are left out of means."""
    flagged = non_finite_episodes(records)
    if not flagged:
        return None
    shown = "; ".join(
        f"episode {f['episode_index']} (seed {f['seed']}, {f['outcome']}): {', '.join(f['fields'])}" for f in flagged[:5]
    )
    more = f"; and {len(flagged) - 5} more" if len(flagged) > 5 else ""
    return (
        f"{len(flagged)} {NON_FINITE_WARNING_START} (NaN or infinity), counted with their outcome; "
        f"those values are left out of means: {shown}{more}"
    )


def _finite(value: Any) -> Any:
    """Replace NaN/inf floats (not valid JSON) with ``None``."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def jsonable(value: Any, max_chars: int = 16384) -> Any:
    """``value`` as plain JSON data for a record (numpy arrays and scalars become lists and
    numbers, anything else its ``str``), or a summary ``{"truncated": true, "chars", "keys"}``
    when its JSON would exceed ``max_chars`` (a server's metadata must not bloat results)."""

    def convert(obj: Any) -> Any:
        import numpy as np

        if isinstance(obj, np.ndarray):
            return obj.tolist() if obj.size <= 256 else f"<ndarray {obj.dtype} {tuple(obj.shape)}>"
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, (bytes, bytearray)):
            return f"<{len(obj)} bytes>"
        if isinstance(obj, (set, frozenset, tuple)):
            return list(obj)
        return str(obj)

    if value is None:
        return None
    try:
        text = json.dumps(_finite(value) if isinstance(value, (dict, list)) else value, default=convert)
    except (TypeError, ValueError, RecursionError):
        text = json.dumps(str(value)[:max_chars])
    if len(text) > max_chars:
        keys = sorted(map(str, value))[:20] if isinstance(value, dict) else None
        return {"truncated": True, "chars": len(text), "keys": keys}
    return json.loads(text)


class RecordWriter:
    """Appends :class:`EpisodeRecord` lines to ``path``; each line is written and fsync-ed.

    Opening a file whose last line is torn (a crash mid-write) first ends that line, so the
    next record starts on a line of its own. Writes are unbuffered, so a line that cannot be
    written is never written later by a flush. Use as a context manager or call :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a+b", buffering=0)  # noqa: SIM115 - closed in close()
        if self._file.seek(0, os.SEEK_END) > 0:
            self._file.seek(-1, os.SEEK_END)
            if self._file.read(1) != b"\n":
                self._append(b"\n")

    def write(self, record: EpisodeRecord) -> None:
        """Append one record durably (``os.fsync``).

        Raises:
            OSError: the line could not be written (disk full, read-only); the file is cut
                back to its previous end, so the records before stay intact and no torn line
                is left.
        """
        self._append(record.to_json().encode("utf-8") + b"\n")

    def _append(self, data: bytes) -> None:
        end = self._file.seek(0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                written = self._file.write(view)
                if not written:  # a regular file that takes no byte: treat as full
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))
                view = view[written:]
            os.fsync(self._file.fileno())
        except OSError as exc:
            try:
                os.ftruncate(self._file.fileno(), end)
            except OSError:  # best effort: a reader skips a torn last line anyway
                pass
            if exc.filename is None:  # os.write's errors do not say which file
                raise OSError(exc.errno, exc.strerror, str(self.path)) from exc
            raise

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_records(path: str | os.PathLike[str]) -> tuple[list[EpisodeRecord], list[str]]:
    """Read ``episodes.jsonl``; returns ``(records, issues)``.

    Never raises on content: a line that is not valid JSON or not a valid record (e.g. the
    torn last line of a crashed run) becomes an issue ``"PATH:LINE: reason"`` and is skipped,
    and so does a record of a ``format_version`` not in :data:`KNOWN_FORMAT_VERSIONS`.
    A missing file gives ``([], [])``.
    """
    path = Path(path)
    if not path.exists():
        return [], []
    records: list[EpisodeRecord] = []
    issues: list[str] = []
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        torn = number == len(lines)  # no newline after it: the writer died mid-line
        try:
            data = json.loads(line.decode("utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            version = data.get("format_version", FORMAT_VERSION)
            if version not in KNOWN_FORMAT_VERSIONS:
                issues.append(
                    f"{path}:{number}: format_version {short_repr(version)} is not one this arena reads "
                    f"({', '.join(map(str, KNOWN_FORMAT_VERSIONS))}); upgrade arena-core to read it"
                )
                continue
            records.append(EpisodeRecord.model_validate(data))
        except (ValueError, ValidationError) as exc:
            what = "torn last line (the run stopped while writing it)" if torn else "unreadable record"
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            issues.append(f"{path}:{number}: {what}: {reason}")
    return records, issues


def merge_records(records: Iterable[EpisodeRecord]) -> list[EpisodeRecord]:
    """One record per ``episode_index``, sorted by index.

    A non-error record wins over an error one (a resumed episode that succeeded replaces its
    error); among records of equal standing the later ``finished_at`` wins (on a tie, the one
    read last).
    """
    best: dict[int, EpisodeRecord] = {}
    for record in records:
        current = best.get(record.episode_index)
        if current is None or _standing(record) >= _standing(current):
            best[record.episode_index] = record
    return [best[i] for i in sorted(best)]


def _standing(record: EpisodeRecord) -> tuple[int, str]:
    return (0 if record.outcome == "error" else 1, record.finished_at)


def count_outcomes(records: Iterable[EpisodeRecord]) -> dict[str, int]:
    """``{"success": k, "failure": .., "timeout": .., "error": ..}``."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for record in records:
        counts[record.outcome] += 1
    return counts


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> Path:
    """Write ``data`` as indented JSON to ``path`` atomically (temp file, fsync, ``os.replace``).

    A reader sees the old file or the new one, never a partial one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_finite(data), indent=2, sort_keys=False, allow_nan=False) + "\n"
    write_text_atomic(path, text)
    return path


def read_json(path: str | os.PathLike[str]) -> Any | None:
    """The JSON content of ``path``, or ``None`` when it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


class StatusWriter:
    """Keeps ``status.json`` current: every :meth:`update` rewrites it atomically.

    Fields: ``state`` (one of :data:`RUN_STATES`), ``episodes_done``, ``episodes_total``,
    ``successes``, ``errors``, ``last_progress_at`` (ISO 8601, UTC; a watchdog's stall
    signal), ``restarts``, ``pid``, plus ``run``, ``shard`` and ``error`` where known.
    """

    def __init__(self, path: str | os.PathLike[str], **initial: Any) -> None:
        self.path = Path(path)
        self.data: dict[str, Any] = {
            "state": "pending",
            "episodes_done": 0,
            "episodes_total": 0,
            "successes": 0,
            "errors": 0,
            "last_progress_at": None,
            "restarts": 0,
            "pid": os.getpid(),
        }
        self.data.update(initial)

    def update(self, **changes: Any) -> dict[str, Any]:
        """Apply ``changes`` and rewrite the file.

        Raises:
            ValueError: ``state`` is not one of :data:`RUN_STATES`.
        """
        state = changes.get("state")
        if state is not None and state not in RUN_STATES:
            raise ValueError(f"unknown run state {state!r}; expected one of {', '.join(RUN_STATES)}")
        self.data.update(changes)
        write_json_atomic(self.path, self.data)
        return dict(self.data)

    #: Same as :meth:`update` (``StatusWriter(path).write(**fields)`` writes a status in one go).
    write = update

    def progress(self, **changes: Any) -> dict[str, Any]:
        """Like :meth:`update`, also setting ``last_progress_at`` to now."""
        return self.update(last_progress_at=utc_now(), **changes)


def read_run_statuses(output_dir: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Each run's ``status.json`` (runs of the directory without a readable one are ``pending``;
    the runs: :func:`arena.outputs.layout.run_names`).

    Raises:
        LaunchError: ``output_dir`` has no ``experiment.yaml`` (not an arena output directory).
    """
    if not (Path(output_dir) / EXPERIMENT_FILE).is_file():
        raise LaunchError(f"{output_dir} has no {EXPERIMENT_FILE}: is it an arena output directory?")
    statuses: dict[str, dict[str, Any]] = {}
    for name in run_names(output_dir):
        status = read_json(run_dir(output_dir, name) / STATUS_FILE)
        statuses[name] = status if isinstance(status, dict) else {"state": "pending"}
    return statuses


def write_run_result(
    run_dir: str | os.PathLike[str],
    *,
    run: str,
    state: str,
    error: str | None = None,
    server: dict[str, Any] | None = None,
    records: Iterable[EpisodeRecord] | None = None,
    episodes_total: int | None = None,
    started_at: str | None = None,
    finished_at: str | None = None,
    shard: Sequence[int] | None = None,
    machine: dict[str, Any] | None = None,
    warnings: Sequence[str] = (),
    model: dict[str, Any] | None = None,
    metric_bounds: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``<run_dir>/run_result.json`` atomically and return its content.

    ``records`` default to the merged records of ``<run_dir>/episodes.jsonl`` (so a backend
    that finalizes a run whose runner died keeps what it recorded). Fields: ``run``, ``state``,
    ``counts`` per outcome, ``episodes``, ``episodes_total``, ``success_rate`` (k/n over
    non-error episodes; ``None`` when n = 0), ``ci95`` ``[low, high]`` (Wilson), ``error``,
    ``started_at``, ``finished_at``, ``server``, ``shard``, ``machine`` (where it ran),
    ``warnings`` (caveats of the numbers that did not stop the run), ``model`` (what
    answered a remote policy: ``policy_type``, ``variant``, ``server_task``, ``checkpoint``,
    ``revision``, ``image``, ``image_digest``, ``server_metadata``; ``None`` for a local one),
    ``protocol`` (the records' common protocol fingerprint, :mod:`arena.outputs.fingerprint`),
    ``metrics`` (the mean and 95 % interval of each episode metric over the counted episodes,
    :func:`arena.outputs.metrics.summarize_metrics`, inside the environment's ``metric_bounds``
    where it declares them; ``None`` when the environment declares no metric), ``non_finite``
    (the episodes whose records flag a non-finite value, :func:`non_finite_episodes`; ``None``
    when none, else also a warning), ``reconnects`` (only when an episode reconnected to its
    policy server: ``count`` summed over the records' ``policy_extras.reconnects``,
    ``episodes``, ``session_reset_episodes``, the latter also a warning).

    Raises:
        ValueError: ``state`` is not one of :data:`RUN_STATES`.
    """
    if state not in RUN_STATES:
        raise ValueError(f"unknown run state {state!r}; expected one of {', '.join(RUN_STATES)}")
    run_dir = Path(run_dir)
    if records is None:
        records, _ = read_records(run_dir / EPISODES_FILE)
    merged = merge_records(records)
    counts = count_outcomes(merged)
    k = counts["success"]
    n = k + counts["failure"] + counts["timeout"]
    low, high = wilson_interval(k, n)
    result = {
        "run": run,
        "state": state,
        "counts": counts,
        "episodes": len(merged),
        "episodes_total": episodes_total,
        "success_rate": success_rate(k, n),
        "ci95": [low, high],
        "error": error,
        "started_at": started_at,
        "finished_at": finished_at or utc_now(),
        "server": server,
        "shard": list(shard) if shard is not None else None,
        "machine": machine,
        "warnings": list(warnings),
        "model": model,
        "protocol": common_fingerprint(r.protocol for r in merged),
        "metrics": summarize_metrics(merged, metric_bounds),
        "non_finite": non_finite_episodes(merged) or None,
    }
    reconnects = [(r, (getattr(r, "policy_extras", None) or {}).get("reconnects")) for r in merged]
    reconnects = [(r, x) for r, x in reconnects if isinstance(x, dict) and x.get("count")]
    if reconnects:
        reset = sorted(r.episode_index for r, x in reconnects if x.get("session_reset"))
        result["reconnects"] = {"count": sum(int(x["count"]) for _, x in reconnects),
                                "episodes": len(reconnects), "session_reset_episodes": reset}
        if reset:
            result["warnings"].append(
                f"{len(reset)} episode(s) reconnected to the policy server mid-episode: a server keeping per-session "
                f"state started them afresh part-way (episodes {', '.join(map(str, reset[:10]))}"
                f"{', ...' if len(reset) > 10 else ''}; policy_extras.reconnects)"
            )
    flagged = non_finite_warning(merged)
    if flagged and flagged not in result["warnings"]:
        result["warnings"].append(flagged)
    write_json_atomic(run_dir / RUN_RESULT_FILE, result)
    return result
