"""``arena watch CHECKPOINT_DIR --experiment exp.yaml KEY={checkpoint} ...``: evaluate each new checkpoint.

Every ``poll_s`` seconds the watch lists the entries (files or folders) directly under
``CHECKPOINT_DIR`` whose name fully matches ``pattern`` (a Python regex; its named group
``step``, when present, is the checkpoint's training step, an int). An entry is a
*candidate* once its size and newest modification time (over every file below it) have not
changed for ``settle_s`` seconds, so a checkpoint still being written is not read. Candidates
are evaluated in order of step (then name), each once, at most ``jobs`` at a time, each by
``arena run EXPERIMENT OVERRIDES --output-dir WATCH_DIR/<folder>`` in its own process (the same
code path as ``arena run``). ``<folder>`` is the checkpoint's name less a file's extension
(``ckpt_100.npz`` -> ``ckpt_100/``, so the listing does not show a folder as a file); a name
another checkpoint's folder already has gets the extension back as ``_npz`` (``ckpt_100_npz/``),
then ``-2``, ``-3``... (:func:`output_name`). A checkpoint is known by its name in
``watch.json``, whose ``output_dir`` is used as written: an evaluation recorded by an earlier
arena, whose folders kept the extension (``ckpt_100.npz/``), is neither redone nor moved, and
is resumed or retried in its folder. In every override ``{checkpoint}`` becomes the entry's
absolute path and ``{step}`` its step; ``tracking.step=<step>`` is added when the pattern gives one, so
the result sinks log against it, with ``tracking.label=<name>`` and ``tracking.series=<the
watch's id>`` (:func:`series_id`), so each tracker puts every checkpoint on one curve (W&B: one
run; MLflow: one series run, a child per checkpoint; :mod:`arena.sinks`).

Before a candidate is evaluated, :func:`unreadable` checks that its files are whole (an
``.npz`` / ``.pt`` zip archive, ``.npy`` and ``.safetensors`` headers against the file's size,
``.json`` parses, a sharded checkpoint's ``*.index.json`` has every shard it lists; in a folder,
every such file below it): a checkpoint that is not is ``failed``
at once with the reason ``unreadable checkpoint <name>[/<file>]: <what is wrong>``, not
evaluated and not retried, while the watch goes on; rewritten (its size or time changes), it
is checked again.

One watch owns ``WATCH_DIR``: it holds ``WATCH_DIR/watch.lock`` (its pid and host,
:mod:`arena.folder_lock`) while it runs, and a second ``arena watch`` on the folder is refused
(exit 2) naming the first; the lock of a watch that died (its pid gone) is taken over.

Before each evaluation the experiment is resolved with the checkpoint's overrides and its
setup's fingerprint is recorded with the point (:mod:`arena.watch_setup`: environment, seed,
rollout limit, policy, what the server serves; not the values ``{checkpoint}`` / ``{step}``
set). A checkpoint evaluated under a setup the watch has not seen starts a new *series*
(``watch.json``'s ``series``; its trackers' ``tracking.series`` gets ``-setup<k>``): the watch
prints what changed, the table and the page show its points as ``<run> · setup <k>`` and list
the change, so a changed experiment never reads as a checkpoint's regression.

The state is ``WATCH_DIR/watch.json``: ``{"checkpoints": {NAME: {"step", "path",
"output_dir", "state": "running" | "done" | "failed", "exit_code", "attempts", "reason",
"started_at", "finished_at", "series", "setup_fingerprint"}}, "series": [{"fingerprint",
"setup", "first", "changes"}]}`` (an unreadable checkpoint: ``"unreadable": true``, its file
``fingerprint``, ``attempts`` 0, no ``output_dir``), rewritten atomically at every change. An
evaluation whose ``arena run`` exits 0 is ``done``; any other exit is ``failed`` with its
``reason`` (the failed runs' errors from ``experiment_result.json``, the error episodes' count
and most common reason, else the last line of ``WATCH_DIR/<folder>.log``). A failed evaluation is tried again (``arena run --resume``: its
finished episodes are kept, its error episodes run again) on the watch's next pass, until it
has had ``1 + retries`` attempts; a configuration error (exit 2) is not retried. A watch
started again on the same ``WATCH_DIR`` skips what is ``done``, finishes what was ``running``
when it stopped with ``arena run --resume``, so no checkpoint is evaluated twice, and gives
each checkpoint that failed for a reason other than its own files (a simulator, a server, a
configuration error: a cause that may have been fixed since) ``1 + retries`` attempts of its
own; if the experiment's setup changed since, that checkpoint is evaluated afresh (its earlier
output moved to ``<folder>.setup<k>``). The listing says which of these a failure is.

As each evaluation ends the watch prints every run's success rate with its 95 % interval and
rewrites ``WATCH_DIR/index.html``: success rate and each episode metric against training step,
one line per run, with intervals (:mod:`arena.results.curve`). At the end it prints a table of
every checkpoint and lists the evaluations that failed.

SIGTERM / Ctrl-C stop the evaluations in flight (they end resumable) and the watch.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena.checkpoint_files import unreadable
from arena.errors import ConfigError
from arena.folder_lock import FolderLock
from arena.outputs.layout import MANIFEST_FILE, SUBMISSION_FILE

#: The default pattern: any name; ``step`` is its last run of digits (``ckpt_1000``, ``step-3000.pt``).
DEFAULT_PATTERN = r".*?(?P<step>\d+)\D*"
STATE_FILE = "watch.json"
#: The lock file naming the watch that owns the folder (:mod:`arena.folder_lock`).
LOCK_FILE = "watch.lock"
PLACEHOLDERS = ("{checkpoint}", "{step}")


@dataclass(frozen=True)
class Checkpoint:
    """One entry of the checkpoint directory that matched the pattern."""

    name: str
    path: Path
    step: int | None

    def sort_key(self) -> tuple:
        return (self.step is None, self.step or 0, self.name)


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Raises ConfigError: not a regex, or a ``step`` group that is not a named group."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"--pattern {pattern!r} is not a regular expression: {exc}") from None


def scan(directory: Path, pattern: re.Pattern[str]) -> list[Checkpoint]:
    """The entries directly under ``directory`` whose name fully matches ``pattern``, by step."""
    found = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or entry.name.startswith("."):
            continue
        step_text = match.groupdict().get("step")
        step = int(step_text) if step_text and step_text.isdigit() else None
        found.append(Checkpoint(entry.name, Path(entry.path).resolve(), step))
    return sorted(found, key=Checkpoint.sort_key)


def fingerprint(path: Path) -> tuple[int, float, int]:
    """(total bytes, newest mtime, file count) of a file or of every file below a folder."""
    if path.is_file():
        st = path.stat()
        return (st.st_size, st.st_mtime, 1)
    size, newest, count = 0, path.stat().st_mtime, 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.stat(os.path.join(root, name))
            except FileNotFoundError:
                continue
            size, newest, count = size + st.st_size, max(newest, st.st_mtime), count + 1
    return (size, newest, count)


#: Names in the watch's folder that are not an evaluation's.
_RESERVED = {STATE_FILE, LOCK_FILE, "index.html"}


def output_name(checkpoint: Checkpoint, taken: set[str]) -> str:
    """The folder (under the watch's) that ``checkpoint``'s evaluation writes: its name less a
    file's extension (``ckpt_1.npz`` -> ``ckpt_1``; a folder's name as it is), else with the
    extension written ``_npz``, else that with ``-2``, ``-3``...: the first not in ``taken``
    (the folders of the other checkpoints in ``watch.json``)."""
    name = checkpoint.name
    suffix = Path(name).suffix if not checkpoint.path.is_dir() else ""
    stem = name[: len(name) - len(suffix)] if suffix and len(suffix) < len(name) else name
    candidates = [stem] + ([f"{stem}_{suffix[1:]}"] if stem != name else [])
    for candidate in candidates:
        if candidate not in taken and candidate not in _RESERVED:
            return candidate
    number = 2
    while f"{candidates[-1]}-{number}" in taken:
        number += 1
    return f"{candidates[-1]}-{number}"


def fill(overrides: Sequence[str], checkpoint: Checkpoint, series: str | None = None) -> list[str]:
    """``overrides`` with ``{checkpoint}`` / ``{step}`` replaced, plus ``tracking.step`` (the
    checkpoint's step), ``tracking.label`` (its name) and ``tracking.series`` (the watch's id,
    when given), each unless the overrides set it."""
    step = "" if checkpoint.step is None else str(checkpoint.step)
    out = [o.replace("{checkpoint}", str(checkpoint.path)).replace("{step}", step) for o in overrides]
    added = {"step": checkpoint.step, "label": checkpoint.name, "series": series}
    for key, value in added.items():
        if value is not None and not any(o.startswith(f"tracking.{key}=") for o in overrides):
            out.append(f"tracking.{key}={json.dumps(value) if isinstance(value, str) else value}")
    return out


def series_id(experiment: Path, watch_dir: Path) -> str:
    """The id every evaluation of one watch shares (``tracking.series``):
    ``<experiment>-watch-<8 hex digits of the watch folder's absolute path>``."""
    import hashlib

    digest = hashlib.sha1(str(Path(watch_dir).resolve()).encode()).hexdigest()[:8]
    return f"{Path(experiment).stem}-watch-{digest}"


class WatchState:
    """``watch.json``: what was evaluated, what is in flight."""

    def __init__(self, path: Path) -> None:
        self.path = path
        data: dict[str, Any] = {}
        if path.exists():
            try:
                data = json.loads(path.read_text())
            except ValueError:
                raise ConfigError(f"{path} is not readable JSON: fix or remove it to start the watch afresh") from None
        self.checkpoints: dict[str, dict[str, Any]] = dict(data.get("checkpoints") or {})
        #: The experiment setups seen, in order (:mod:`arena.watch_setup`): ``{"fingerprint",
        #: "setup", "first" (the checkpoint that began it), "changes" (against the one before)}``;
        #: a checkpoint's ``series`` is its 1-based index here.
        self.series: list[dict[str, Any]] = list(data.get("series") or [])

    def save(self) -> None:
        from arena.outputs.records import write_json_atomic

        write_json_atomic(self.path, {"checkpoints": self.checkpoints, "series": self.series})

    def mark(self, name: str, **fields: Any) -> None:
        self.checkpoints.setdefault(name, {}).update(fields)
        self.save()


def _now() -> str:
    from arena.outputs.records import utc_now

    return utc_now()


class Watch:
    """The loop of ``arena watch`` (see the module docstring)."""

    def __init__(
        self,
        checkpoint_dir: Path,
        experiment: Path,
        overrides: Sequence[str],
        watch_dir: Path,
        *,
        pattern: str = DEFAULT_PATTERN,
        settle_s: float = 30.0,
        poll_s: float = 5.0,
        jobs: int = 1,
        max_evaluations: int | None = None,
        retries: int = 2,
        extra_args: Sequence[str] = (),
        allow_imports: Sequence[str] = (),
        say: Callable[[str], None] = lambda text: print(text, file=sys.stderr, flush=True),
    ) -> None:
        if not any(p in o for o in overrides for p in PLACEHOLDERS[:1]):
            raise ConfigError(
                "give the override that takes the checkpoint, with {checkpoint} where its path goes, "
                "e.g. shared.server.checkpoint={checkpoint}"
            )
        if jobs < 1:
            raise ConfigError(f"--jobs must be at least 1, got {jobs}")
        if retries < 0:
            raise ConfigError(f"--retries must be at least 0, got {retries}")
        self.checkpoint_dir = Path(checkpoint_dir)
        self.experiment = Path(experiment).resolve()
        self.overrides = list(overrides)
        self.watch_dir = Path(watch_dir)
        self.pattern = compile_pattern(pattern)
        self.settle_s, self.poll_s, self.jobs = settle_s, poll_s, jobs
        self.max_evaluations = max_evaluations
        self.retries = retries
        self.allow_imports = list(allow_imports)
        self.extra_args = [*extra_args, *(a for m in self.allow_imports for a in ("--allow-import", m))]
        #: attempts a failed checkpoint had before this watch started: a restarted watch gives
        #: it 1 + ``retries`` attempts of its own (its cause may be fixed since)
        self.earlier_attempts: dict[str, int] = {}
        self.say = say
        self.watch_dir.mkdir(parents=True, exist_ok=True)
        self.state = WatchState(self.watch_dir / STATE_FILE)
        self.lock = FolderLock(self.watch_dir / LOCK_FILE, "arena watch")
        self.seen: dict[str, tuple[tuple, float]] = {}  # name -> (fingerprint, since)
        self.running: dict[str, subprocess.Popen] = {}
        self.stopping = False

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> int:
        """Watch until ``max_evaluations`` evaluations are done (forever without one);
        returns 0, 3 when an evaluation failed for good, or 130 / 143 when interrupted / terminated.

        Raises:
            ConfigError: another ``arena watch`` (alive) owns the folder (:mod:`arena.folder_lock`),
                or ``watch.json`` is not readable JSON.
        """
        note = self.lock.acquire()  # one watch per folder; then watch.json as the last owner left it
        previous = signal.signal(signal.SIGTERM, self._on_term) if _main_thread() else None
        try:
            if note:
                self.say(f"arena watch: {note}")
            self.state = WatchState(self.watch_dir / STATE_FILE)
            self._reopen_failed()
            self._resume_interrupted()
            while True:
                self._reap()
                if self._target_reached() and not self.running:
                    self._summary()
                    return 3 if self._failed_for_good() else 0
                for name in self._retriable():
                    if len(self.running) >= self.jobs:
                        break
                    self._retry(name)
                for checkpoint in self._ready():
                    if len(self.running) >= self.jobs or self._would_exceed():
                        break
                    self._start(checkpoint)
                time.sleep(self.poll_s)
        except KeyboardInterrupt:
            self._stop_all()
            self._summary()
            return 143 if self.stopping else 130
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
            self.lock.release()

    def _reopen_failed(self) -> None:
        """A checkpoint an earlier watch gave up on for a reason other than its own files
        (a simulator, a server, a configuration error) gets ``1 + retries`` attempts of this
        watch: its cause may have been fixed since. An unreadable checkpoint is not: it is
        checked again once rewritten."""
        for name, entry in self.state.checkpoints.items():
            if entry.get("state") == "failed" and not entry.get("unreadable"):
                self.earlier_attempts[name] = int(entry.get("attempts") or 1)
                self.say(f"arena watch: {name} failed in an earlier watch after {entry.get('attempts', 1)} attempt(s) "
                         f"({entry.get('reason')}): trying it again")

    def _on_term(self, signum: int, frame: Any) -> None:
        self.stopping = True
        raise KeyboardInterrupt

    def _can_retry(self, name: str) -> bool:
        """A failed evaluation is tried again while this watch gave it at most ``retries``
        retries; never an unreadable checkpoint (it is checked again once rewritten), nor a
        configuration error (exit 2) within one watch (a restarted watch tries both kinds again)."""
        entry = self.state.checkpoints[name]
        earlier = self.earlier_attempts.get(name)
        return (entry.get("state") == "failed" and not entry.get("unreadable")
                and (entry.get("exit_code") != 2 or int(entry.get("attempts") or 1) == earlier)
                and int(entry.get("attempts") or 1) - (earlier or 0) <= self.retries)

    def _failed_for_good(self) -> list[str]:
        return [n for n, c in self.state.checkpoints.items() if c.get("state") == "failed" and not self._can_retry(n)]

    def _done(self) -> int:
        """Evaluations finished for good: done, or failed with no attempt left."""
        return sum(1 for c in self.state.checkpoints.values() if c.get("state") == "done") + len(self._failed_for_good())

    def _retriable(self) -> list[str]:
        entries = self.state.checkpoints
        return [n for n in sorted(entries, key=lambda n: (entries[n].get("step") is None, entries[n].get("step") or 0, n))
                if n not in self.running and self._can_retry(n)]

    def _target_reached(self) -> bool:
        return self.max_evaluations is not None and self._done() >= self.max_evaluations

    def _would_exceed(self) -> bool:
        waiting = sum(1 for n in self._retriable())
        return self.max_evaluations is not None and self._done() + len(self.running) + waiting >= self.max_evaluations

    def _ready(self) -> list[Checkpoint]:
        now = time.monotonic()
        ready = []
        for checkpoint in scan(self.checkpoint_dir, self.pattern):
            try:
                mark = fingerprint(checkpoint.path)
            except FileNotFoundError:
                continue
            entry = self.state.checkpoints.get(checkpoint.name)
            if entry is not None and entry.get("unreadable") and entry.get("fingerprint") != list(mark):
                self.say(f"arena watch: {checkpoint.name} was unreadable and has changed since: checking it again")
                self.state.checkpoints.pop(checkpoint.name)
                self.state.save()
                self._write_page()
            elif checkpoint.name in self.state.checkpoints or checkpoint.name in self.running:
                continue
            seen = self.seen.get(checkpoint.name)
            if seen is None or seen[0] != mark:
                self.seen[checkpoint.name] = (mark, now)
                continue
            if now - seen[1] >= self.settle_s:
                ready.append(checkpoint)
        return ready

    # -- evaluations -------------------------------------------------------------------------
    def _argv(self, checkpoint: Checkpoint, out: Path, series: int | None) -> list[str]:
        """``arena run`` of ``checkpoint`` into ``out``; its trackers' series is the watch's id,
        with ``-setup<k>`` from the experiment's second setup on (a curve per setup)."""
        tracked = series_id(self.experiment, self.watch_dir) + (f"-setup{series}" if series and series > 1 else "")
        return [sys.executable, "-m", "arena", "run", str(self.experiment), *fill(self.overrides, checkpoint, tracked),
                "--output-dir", str(out), *self.extra_args]

    def _assign_series(self, checkpoint: Checkpoint) -> int | None:
        """The series (1-based) ``checkpoint``'s evaluation belongs to, recorded in its entry with
        the experiment's fingerprint (:mod:`arena.watch_setup`): the setup's earlier series, else
        a new one, announced with what changed. ``None`` when the experiment cannot be resolved
        (``arena run`` then says why)."""
        from arena.watch_setup import experiment_setup, setup_changes, setup_fingerprint

        try:
            setup = experiment_setup(self.experiment, fill(self.overrides, checkpoint), self.overrides, self.allow_imports)
        except Exception:  # noqa: BLE001 - a wrong experiment is arena run's to report (exit 2)
            return None
        mark = setup_fingerprint(setup)
        series = self.state.series
        number = next((i + 1 for i, s in enumerate(series) if s.get("fingerprint") == mark), None)
        if number is None:
            changes = setup_changes(series[-1].get("setup") or {}, setup) if series else []
            series.append({"fingerprint": mark, "setup": setup, "first": checkpoint.name, "changes": changes})
            number = len(series)
            if number > 1:
                self.say(f"arena watch: the experiment changed since setup {number - 1} (from {series[-2].get('first')}): "
                         + "; ".join(changes) + f". {checkpoint.name} starts setup {number}: a new series, not joined to "
                         f"the earlier points")
        self.state.mark(checkpoint.name, series=number, setup_fingerprint=mark)
        return number

    def _start(self, checkpoint: Checkpoint) -> None:
        problem = unreadable(checkpoint.path)
        if problem is not None:
            self._refuse(checkpoint, problem)
            return
        taken = {Path(e["output_dir"]).name for n, e in self.state.checkpoints.items() if e.get("output_dir") and n != checkpoint.name}
        out = self.watch_dir / output_name(checkpoint, taken)
        self.state.mark(checkpoint.name, step=checkpoint.step, path=str(checkpoint.path), output_dir=str(out),
                        state="running", exit_code=None, attempts=1, reason=None, started_at=_now(), finished_at=None)
        series = self._assign_series(checkpoint)
        self.say(f"arena watch: evaluating {checkpoint.name}" + (f" (step {checkpoint.step})" if checkpoint.step is not None else "") + f" -> {out}")
        self._spawn(checkpoint.name, self._argv(checkpoint, out, series), out)

    def _refuse(self, checkpoint: Checkpoint, problem: str) -> None:
        """Record a checkpoint :func:`unreadable` found fault with as failed, not evaluated."""
        try:
            mark = list(fingerprint(checkpoint.path))
        except FileNotFoundError:
            mark = None
        self.state.mark(checkpoint.name, step=checkpoint.step, path=str(checkpoint.path), output_dir=None, state="failed",
                        exit_code=None, attempts=0, unreadable=True, fingerprint=mark, reason=f"unreadable checkpoint {problem}",
                        started_at=_now(), finished_at=_now())
        where = problem.split("/", 1)[-1] if checkpoint.path.is_dir() else problem.split(": ", 1)[-1]  # the file in a folder
        self.say(f"arena watch: {checkpoint.name} FAILED, not evaluated: {checkpoint.path} is unreadable: "
                 f"{where} (the watch goes on; rewrite it and it is checked again)")
        self._write_page()

    def _retry(self, name: str) -> None:
        """Try a failed evaluation again: ``arena run --resume`` where ``arena run`` got as far
        as its manifest (finished episodes kept), else afresh into an emptied folder."""
        entry = self.state.checkpoints[name]
        out = Path(entry["output_dir"])
        attempt = int(entry.get("attempts") or 1) + 1
        ordinal = attempt - self.earlier_attempts.get(name, 0)
        of = f"{ordinal} of {1 + self.retries}" + (" in this watch" if name in self.earlier_attempts else "")
        self.say(f"arena watch: trying {name} again (attempt {of}; it failed: {entry.get('reason')})")
        checkpoint = Checkpoint(name, Path(entry["path"]), entry.get("step"))
        before = entry.get("series")
        now = self._assign_series(checkpoint)
        self.state.mark(name, state="running", attempts=attempt, started_at=_now(), finished_at=None)
        if before is not None and now is not None and now != before and out.exists():
            # the experiment changed since: its earlier records are of another setup
            aside = out.with_name(f"{out.name}.setup{before}")
            shutil.rmtree(aside, ignore_errors=True)
            out.rename(aside)
            self.say(f"arena watch: {name} is evaluated afresh under the changed experiment; its earlier output is in {aside}")
        entry = self.state.checkpoints[name]
        if (out / MANIFEST_FILE).exists():
            self._spawn(name, [sys.executable, "-m", "arena", "run", "--resume", str(out)], out)
        else:
            shutil.rmtree(out, ignore_errors=True)
            self._spawn(name, self._argv(checkpoint, out, entry.get("series")), out)

    def _spawn(self, name: str, argv: list[str], out: Path) -> None:
        log = open(_log_of(out), "a")
        try:
            self.running[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            log.close()

    def _resume_interrupted(self) -> None:
        """Finish what a stopped watch left ``running`` (``arena run --resume``)."""
        for name, entry in sorted(self.state.checkpoints.items(), key=lambda kv: (kv[1].get("step") is None, kv[1].get("step") or 0, kv[0])):
            if entry.get("state") != "running" or len(self.running) >= self.jobs:
                continue
            out = Path(entry["output_dir"])
            _wait_for_earlier_run(out, self.say)
            if (out / MANIFEST_FILE).exists():
                self.say(f"arena watch: resuming the interrupted evaluation of {name} in {out}")
                self._spawn(name, [sys.executable, "-m", "arena", "run", "--resume", str(out)], out)
            else:  # stopped before arena run wrote anything: start it as new
                self.state.checkpoints.pop(name)
                self.state.save()

    def _reap(self) -> None:
        for name, proc in list(self.running.items()):
            code = proc.poll()
            if code is None:
                continue
            del self.running[name]
            entry = self.state.checkpoints.get(name, {})
            out = Path(entry.get("output_dir") or self.watch_dir / name)
            if code == 0:
                self.state.mark(name, state="done", exit_code=0, reason=None, finished_at=_now())
            else:
                self.state.mark(name, state="failed", exit_code=code, reason=failure_reason(out, _log_of(out), code),
                                finished_at=_now())
            self._tell(name)
            self._write_page()

    def _tell(self, name: str) -> None:
        """One line per run of the evaluation that just ended: its rate and 95 % interval."""
        from arena.results.curve import gather, point_text

        entry = self.state.checkpoints[name]
        step = f" (step {entry['step']})" if entry.get("step") is not None else ""
        curve = gather(self.watch_dir, {name: entry}, self.state.series)
        rates = [f"{run} {point_text('success_rate', p)}" for run, ps in sorted(curve.points.get("success_rate", {}).items()) for p in ps]
        if entry.get("state") == "done":
            self.say(f"arena watch: {name}{step}: " + ("; ".join(rates) or "no episodes") + f" ({self._done()} done)")
        else:
            left = "; will try again" if self._can_retry(name) else "; no attempt left (a restarted watch tries it again)"
            self.say(f"arena watch: {name}{step} FAILED (exit {entry.get('exit_code')}, attempt {entry.get('attempts', 1)}): "
                     f"{entry.get('reason')}{left}" + (f"; numbers so far: {'; '.join(rates)}" if rates else ""))

    def _write_page(self) -> None:
        from arena.results.curve import write_page

        try:
            write_page(self.watch_dir, self.state.checkpoints, f"arena watch: {self.experiment.stem} over {self.checkpoint_dir.name}/",
                       self.state.series)  # no local path: the page is shared
        except OSError as exc:
            self.say(f"arena watch: could not write {self.watch_dir / 'index.html'}: {exc}")

    def _summary(self) -> None:
        """The table of every evaluated checkpoint, the failed ones listed after it."""
        from arena.results.curve import gather, table_lines

        curve = gather(self.watch_dir, self.state.checkpoints, self.state.series)
        if not self.state.checkpoints:
            return
        self.say("arena watch: summary (success rate [95 % interval] per run)")
        for line in table_lines(curve):
            self.say("  " + line)
        self.say(f"arena watch: curve in {self.watch_dir / 'index.html'}")

    def _stop_all(self) -> None:
        for proc in self.running.values():
            try:
                proc.send_signal(signal.SIGINT)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        for proc in self.running.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()


def _log_of(out: Path) -> Path:
    """The log of the evaluation writing ``out``: ``<out>.log`` beside it."""
    return out.with_name(out.name + ".log")


def failure_reason(out: Path, log: Path, code: int) -> str:
    """Why an evaluation's ``arena run`` exited ``code``: its failed runs' errors, its runs'
    error episodes (their ``error_note``: count and most common reason), else the last line of
    its log."""
    try:
        result = json.loads((out / "experiment_result.json").read_text())
    except (OSError, ValueError):
        result = None
    if isinstance(result, dict):
        runs = result.get("runs") or {}
        failed = [f"run {r}: {d.get('error') or d.get('state')}" for r, d in runs.items() if d.get("state") not in ("completed", None)]
        errors = [f"run {r}: {d.get('error_note') or str(d.get('errors')) + ' error episode(s)'}" for r, d in runs.items() if d.get("errors")]
        if failed or errors:
            return "; ".join(failed + errors)
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    return lines[-1][:500] if lines else f"arena run exited {code}"


def _wait_for_earlier_run(out: Path, say: Callable[[str], None], timeout_s: float = 120.0) -> None:
    """Wait (at most ``timeout_s``) until the ``arena run`` of the stopped watch has exited:
    its children outlive a watch killed alone for as long as they take to notice."""
    try:
        pid = int(json.loads((out / SUBMISSION_FILE).read_text()).get("extra", {}).get("pid") or 0)
    except (OSError, ValueError, TypeError, AttributeError):
        return
    deadline = time.monotonic() + timeout_s
    told = False
    while pid and time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        if not told:
            say(f"arena watch: waiting for process {pid}, which still runs the evaluation in {out}")
            told = True
        time.sleep(0.5)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
