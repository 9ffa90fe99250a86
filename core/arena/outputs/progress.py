"""Live progress of an experiment, read from its runs' ``status.json`` files.

Every backend's runs write ``<output_dir>/<run>/status.json`` (and ``shards/<K>/status.json``),
so one watcher serves them all. On a terminal: rich progress bars — one for the runs, one for
all episodes with the success counts so far, one per active run. Elsewhere (Slurm logs, CI,
``| tee``), where bars turn into garbage: one plain line every ``interval_s`` seconds
(``$ARENA_PROGRESS_INTERVAL_S``, default 30), when a run finishes and once more at the end
(so a log never ends on a stale count), e.g.::

    [arena] 12:03:04 runs 3/9 finished (1 running) | episodes 41/90 | success 22/38 | errors 0
    [arena] 12:04:10 runs 9/9 finished: 2 completed, 7 cancelled | episodes 27/90 | success: metaworld_expert_remote 9/9, zero_action 0/18 | errors 0

Successes are counted per policy type when runs have different ones: a count pooled across
policies would mean nothing (the report says the same).

and, once a run has finished with less than it planned, ``| partial: reach_zero (cancelled,
4 of 10 episodes)``.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from arena.outputs.layout import STATUS_FILE, run_dir as run_directory, work_dirs
from arena.outputs.records import FINAL_STATES, partial_note, read_json

PROGRESS_INTERVAL_ENV = "ARENA_PROGRESS_INTERVAL_S"


def read_progress(output_dir: str | os.PathLike[str], runs: list[str], totals: dict[str, int] | None = None) -> dict[str, dict[str, Any]]:
    """Per run: ``state``, ``episodes_done``, ``episodes_total``, ``successes``, ``errors``.

    Shards' status files are summed; a run without any is ``pending`` with 0 done.
    """
    output_dir = Path(output_dir)
    out: dict[str, dict[str, Any]] = {}
    for name in runs:
        paths = [d / STATUS_FILE for d in work_dirs(run_directory(output_dir, name))]
        found = [s for s in (read_json(p) for p in paths) if isinstance(s, dict)]
        shard_rows = [s for s in found if s.get("shard")] or found[:1]
        states = [str(s.get("state", "pending")) for s in found] or ["pending"]
        state = next((s for s in ("running", "starting_server", "failed", "cancelled", "pending") if s in states), states[0])
        if all(s in FINAL_STATES for s in states):
            state = next((s for s in ("failed", "cancelled") if s in states), "completed")
        total = (totals or {}).get(name)
        if any(isinstance(s.get("stop"), dict) for s in found):  # stopped early by its rule: complete
            total = None
        out[name] = {
            "state": state,
            "episodes_done": sum(int(s.get("episodes_done") or 0) for s in shard_rows),
            "episodes_total": total if total is not None else sum(int(s.get("episodes_total") or 0) for s in shard_rows),
            "successes": sum(int(s.get("successes") or 0) for s in shard_rows),
            "errors": sum(int(s.get("errors") or 0) for s in shard_rows),
            "restarts": sum(int(s.get("restarts") or 0) for s in shard_rows),
        }
    return out


def runs_text(progress: dict[str, dict[str, Any]]) -> str:
    """``runs 3/9 finished (1 running)``; finished runs that did not complete are counted as
    what they are: ``runs 9/9 finished: 2 completed, 7 cancelled``."""
    states = [p["state"] for p in progress.values()]
    finished = [s for s in states if s in FINAL_STATES]
    running = sum(1 for s in states if s in ("running", "starting_server"))
    text = f"runs {len(finished)}/{len(states)} finished"
    if any(s != "completed" for s in finished):
        order = ["completed", *sorted({s for s in finished if s != "completed"})]
        text += ": " + ", ".join(f"{finished.count(s)} {s}" for s in order if finished.count(s))
    return text + (f" ({running} running)" if running else "")


def success_text(progress: dict[str, dict[str, Any]], policies: dict[str, str] | None = None) -> str:
    """``success 22/38`` (successes / episodes without error) when every run has the same
    policy type (``policies``: run -> type; None: one policy), else one count per type:
    ``success: metaworld_expert_remote 9/9, zero_action 0/18``."""
    groups: dict[str, list[int]] = {}
    for name, p in progress.items():
        counts = groups.setdefault((policies or {}).get(name, ""), [0, 0])
        counts[0] += p["successes"]
        counts[1] += p["episodes_done"] - p["errors"]
    if len(groups) <= 1:
        k, n = next(iter(groups.values()), [0, 0])
        return f"success {k}/{n}"
    return "success: " + ", ".join(f"{policy} {k}/{n}" for policy, (k, n) in sorted(groups.items()))


def summary_line(progress: dict[str, dict[str, Any]], policies: dict[str, str] | None = None) -> str:
    """One plain-text line for logs (see the module docstring); ``policies``: run -> policy type."""
    ep_done = sum(p["episodes_done"] for p in progress.values())
    ep_total = sum(p["episodes_total"] or 0 for p in progress.values())
    errors = sum(p["errors"] for p in progress.values())
    restarts = sum(p.get("restarts", 0) for p in progress.values())
    line = (
        f"[arena] {time.strftime('%H:%M:%S')} {runs_text(progress)} | "
        f"episodes {ep_done}/{ep_total} | {success_text(progress, policies)} | errors {errors}"
    )
    partial = [
        f"{name} ({note.removeprefix('partial: ')})"
        for name, p in progress.items()
        if p["state"] in FINAL_STATES
        and (note := partial_note(p["state"], p["episodes_done"], p["episodes_total"] or None, p["errors"]))
    ]
    line += f" | watchdog restarts {restarts}" if restarts else ""
    return line + (f" | partial: {', '.join(partial)}" if partial else "")


class ProgressWatcher:
    """Shows progress of ``runs`` under ``output_dir`` from a background thread while a backend runs.

    ``console`` is a rich ``Console``: bars when it is a terminal, plain lines otherwise
    (``plain=True`` forces lines); ``policies`` (run -> policy type) keeps success counts of
    different policies apart. Use as a context manager around the blocking submit.
    """

    def __init__(
        self,
        output_dir: str | os.PathLike[str],
        runs: list[str],
        console: Any,
        *,
        totals: dict[str, int] | None = None,
        policies: dict[str, str] | None = None,
        interval_s: float | None = None,
        plain: bool | None = None,
        refresh_s: float = 0.5,
    ) -> None:
        self.output_dir = Path(output_dir)
        self.runs = list(runs)
        self.console = console
        self.totals = totals or {}
        self.policies = policies or {}
        if interval_s is None:
            try:
                interval_s = float(os.environ.get(PROGRESS_INTERVAL_ENV, "30"))
            except ValueError:
                interval_s = 30.0
        self.interval_s = max(0.05, interval_s)
        self.plain = (not getattr(console, "is_terminal", False)) if plain is None else plain
        self.refresh_s = refresh_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._progress: Any = None
        self._said: str | None = None  # the last plain line printed, without its time

    def __enter__(self) -> ProgressWatcher:
        if self.console is None or not self.runs:
            return self
        if not self.plain:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[note]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=False,
            )
            self._progress.start()
        self._thread = threading.Thread(target=self._loop, name="arena-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        try:
            if self.plain and self._thread is not None:
                self._say(read_progress(self.output_dir, self.runs, self.totals))
            else:
                self._update()
        except Exception:
            pass
        if self._progress is not None:
            self._progress.stop()

    # -- the loop --------------------------------------------------------------------------
    def _loop(self) -> None:
        last_line = 0.0
        finished: set[str] = set()
        while not self._stop.wait(self.refresh_s if not self.plain else min(self.refresh_s, self.interval_s)):
            try:
                progress = read_progress(self.output_dir, self.runs, self.totals)
            except Exception:  # a half-written directory never stops the run
                continue
            if self.plain:
                newly = {n for n, p in progress.items() if p["state"] in FINAL_STATES} - finished
                now = time.monotonic()
                if newly or now - last_line >= self.interval_s:
                    finished |= newly
                    last_line = now
                    self._say(progress, again=True)
            else:
                self._render(progress)

    def _say(self, progress: dict[str, dict[str, Any]], *, again: bool = False) -> None:
        """Print the plain line of ``progress``; at the end (``again=False``) only if it says
        something the last one did not."""
        line = summary_line(progress, self.policies)
        said = line.split(" ", 2)[2]  # without "[arena] HH:MM:SS"
        if again or said != self._said:
            self._said = said
            self.console.print(line, highlight=False, markup=False, soft_wrap=True)

    def _update(self) -> None:
        if self._progress is not None:
            self._render(read_progress(self.output_dir, self.runs, self.totals))

    def _render(self, progress: dict[str, dict[str, Any]]) -> None:
        bars = self._progress
        if not hasattr(self, "_tasks"):
            self._tasks: dict[str, Any] = {
                "__runs__": bars.add_task("runs", total=len(self.runs), note=""),
                "__episodes__": bars.add_task("episodes", total=1, note=""),
            }
        done = sum(1 for p in progress.values() if p["state"] in FINAL_STATES)
        runs_note = runs_text(progress).partition(": ")[2].partition(" (")[0]  # "2 completed, 7 cancelled"
        bars.update(self._tasks["__runs__"], completed=done, note=runs_note)
        ep_done = sum(p["episodes_done"] for p in progress.values())
        ep_total = sum(p["episodes_total"] or 0 for p in progress.values()) or 1
        errors = sum(p["errors"] for p in progress.values())
        bars.update(
            self._tasks["__episodes__"],
            completed=ep_done,
            total=ep_total,
            note=success_text(progress, self.policies) + (f", errors {errors}" if errors else ""),
        )
        for name, p in progress.items():
            active = p["state"] in ("running", "starting_server")
            if name not in self._tasks and active:
                self._tasks[name] = bars.add_task(f"  {name}", total=p["episodes_total"] or 1, note="")
            if name in self._tasks:
                note = f"success {p['successes']}/{p['episodes_done'] - p['errors']}"
                if p["errors"]:
                    note += f", errors {p['errors']}"
                if p["state"] not in ("running",):
                    note += f" [{p['state']}]"
                bars.update(self._tasks[name], completed=p["episodes_done"], total=p["episodes_total"] or 1, note=note)
