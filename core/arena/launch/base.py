"""``LaunchBackend`` and ``Submission``: where runs execute, and the record of having sent them.

A backend turns a resolved experiment into something that runs (``plan`` renders it, ``submit``
starts it) and later answers ``status``, ``cancel`` and ``collect`` for the output directory,
whose ``submission.json`` names the backend. Every backend executes a run through
``arena run-one``, so a run behaves the same on a laptop, in a Slurm step and in an OSMO task.

Resume is a declared capability (:attr:`LaunchBackend.can_resume`): ``arena run --resume``
hands such a backend a :class:`Resume` naming the work items left undone, and the backend
starts ``arena run-one --resume`` for exactly those (whole runs, or only the shards that still
have some); a backend that does not declare it is refused with a clear message.

While ``submit`` runs under ``arena run``, Ctrl-C raises ``KeyboardInterrupt`` and SIGTERM its
subclass :class:`Terminated`: a backend that waits stops what it started and lets it through.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from arena.errors import ConfigError, LaunchError
from arena.fsutil import write_text_atomic
from arena.outputs.layout import SUBMISSION_FILE

if TYPE_CHECKING:
    from rich.console import Console

    from arena.config import ResolvedExperiment
    from arena.launch.exposure import Exposure
    from arena.launch.planning import ServerPlan


class Terminated(KeyboardInterrupt):
    """SIGTERM to ``arena run`` (``arena cancel``, a scheduler stopping it): handled like Ctrl-C
    (runners and servers stopped, finished episodes kept), but ``arena run`` exits 143
    (128 + SIGTERM, the shell's convention) instead of 130."""


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread (elsewhere,
    where Python cannot install handlers, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Submission(BaseModel):
    """What ``submit`` did, persisted as ``<output_dir>/submission.json``.

    ``ids`` maps run name -> shard key ("0" for an unsharded run) -> the backend's id of it
    (a pid, a Slurm job id, an OSMO workflow id).
    """

    model_config = ConfigDict(extra="forbid")

    backend: str
    experiment: str
    output_dir: str
    created_at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat())
    ids: dict[str, dict[str, str]] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)

    def save(self) -> None:
        write_text_atomic(Path(self.output_dir) / SUBMISSION_FILE, self.model_dump_json(indent=2), fsync=False)

    @classmethod
    def load(cls, output_dir: str | Path) -> Submission:
        """Read ``submission.json`` of ``output_dir``.

        Raises:
            ConfigError: ``output_dir`` is not an arena output directory (exit code 2).
            LaunchError: its submission.json is unreadable.
        """
        path = Path(output_dir) / SUBMISSION_FILE
        try:
            return cls.model_validate(json.loads(path.read_text()))
        except (FileNotFoundError, NotADirectoryError):
            raise ConfigError(
                f"{output_dir} has no {SUBMISSION_FILE}: give the output directory of `arena run` "
                "(the one holding experiment.yaml and index.html)"
            ) from None
        except ValueError as exc:
            raise LaunchError(f"{path} is not a valid submission: {exc}") from None


@dataclass(frozen=True)
class Resume:
    """What ``arena run --resume`` asks of a backend: run only the unfinished work items.

    ``remaining`` maps each run handed to ``submit`` to the episode indices of its manifest
    that have no finished record (its other items are done and must not run again);
    ``keep_errors``: records whose outcome is ``error`` count as finished (runners get
    ``--keep-errors``). The runners are started with ``arena run-one --resume``.
    """

    remaining: dict[str, list[int]] = field(default_factory=dict)
    keep_errors: bool = False

    def run_one_flags(self) -> list[str]:
        """The flags every resumed ``arena run-one`` gets."""
        from arena.rollout.invocation import resume_args

        return resume_args(self.keep_errors)

    def shard_has_work(self, run: str, shard: int, shards: int) -> bool:
        """Whether shard ``shard`` of ``shards`` of ``run`` still has an unfinished item
        (items are assigned by ``episode_index % shards``, :func:`arena.rollout.workitems.select_shard`)."""
        return any(index % shards == shard for index in self.remaining.get(run, []))


@dataclass(frozen=True)
class Poll:
    """One look at a submission's jobs (:meth:`LaunchBackend.poll`): whether every one has
    ended, a one-line summary (rich markup, outside text escaped; printed when it changes) and
    notes of what happened since the last look (printed once each)."""

    done: bool
    summary: str = ""
    notes: tuple[str, ...] = ()


class BackendOptions(BaseModel):
    """Base of every backend's options (``launch.<backend>``). Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class LaunchBackend:
    """Where runs execute. Subclasses set ``name`` and ``Config`` and implement the methods."""

    name: ClassVar[str] = ""
    Config: ClassVar[type[BackendOptions]] = BackendOptions
    #: Whether ``submit`` accepts a :class:`Resume` (``arena run --resume``).
    can_resume: ClassVar[bool] = False
    #: Whether ``submit`` always waits until the runs end (the process that submitted runs them:
    #: local, Ray); ``arena run`` then reports without ``--wait`` and shows progress. Such a
    #: backend records ``"waits": true`` and its ``"pid"`` in ``submission.extra``.
    always_waits: ClassVar[bool] = False

    def __init__(self, options: BackendOptions) -> None:
        self.options = options

    def check(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> None:
        """Refuse, before anything starts or is written, what this backend cannot run.

        ``arena validate`` and ``arena run`` call it. The default accepts everything.

        Raises:
            ConfigError: the experiment cannot run on this backend as configured.
            LaunchError: a tool the backend needs (``sbatch``, ``osmo``) is missing.
        """

    def plan(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan], output_dir: Path) -> str:
        """Return the rendered spec (what ``--dry-run`` prints)."""
        raise NotImplementedError

    def exposures(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> dict[str, Exposure]:
        """Per run with a server arena starts: where it binds and whether it requires an API
        key (:mod:`arena.launch.exposure`); ``--dry-run`` and ``provenance.json`` show it.
        The default knows nothing (``{}``)."""
        return {}

    def submit(
        self,
        experiment: ResolvedExperiment,
        servers: dict[str, ServerPlan],
        output_dir: Path,
        *,
        wait: bool,
        console: Console | None = None,
        resume: Resume | None = None,
    ) -> Submission:
        """Start the runs. ``output_dir`` already holds experiment.yaml and manifest.json.

        ``resume`` (only when :attr:`can_resume`): ``output_dir`` is an earlier submission
        whose runs ``experiment`` lists with work left; start only that work, keep the
        earlier records and extend the earlier ``submission.json``.
        """
        raise NotImplementedError

    def poll(self, submission: Submission, console: Console | None = None) -> Poll:
        """Look once at the jobs of ``submission`` (a scheduler's queue, a workflow service) and
        act on what cannot wait (a job that can never start is cancelled and its run failed).
        Backends whose ``submit`` can wait implement it; :meth:`wait` loops over it."""
        raise NotImplementedError

    def wait(self, submission: Submission, console: Console | None = None) -> None:
        """Poll until every job of ``submission`` has ended (``arena run --wait``): the loop every
        backend shares. Each round prints :meth:`poll`'s notes and its summary when it changed,
        then sleeps ``options.poll_interval_s``. Ctrl-C (or SIGTERM) stops waiting only; the
        jobs keep running."""
        interval = float(getattr(self.options, "poll_interval_s", 10.0))
        last = None
        while True:
            seen = self.poll(submission, console)
            for note in seen.notes:
                _print(console, note)
            if seen.summary and seen.summary != last:
                _print(console, seen.summary)
                last = seen.summary
            if seen.done:
                return
            self._sleep(interval)

    @staticmethod
    def _sleep(seconds: float) -> None:
        time.sleep(seconds)

    def prepare_resume(self, output_dir: Path, runs: list[str]) -> None:
        """Before ``arena run --resume`` hands ``runs`` to :meth:`submit`: bring what the earlier
        attempt left in ``output_dir`` into the state this backend's resume starts from (the
        local backend marks the runs ``pending`` again). The default does nothing."""

    def status(self, submission: Submission) -> dict[str, dict[str, Any]]:
        """Per run: the fields of its status.json, with ``state`` mapped onto arena's states."""
        raise NotImplementedError

    def cancel(self, submission: Submission) -> None:
        raise NotImplementedError

    def collect(self, submission: Submission) -> Path:
        """Bring every run's records into ``output_dir``; returns the output directory.

        Also called by ``arena run --resume`` before it counts what is left, so it must be
        safe to call while runs still execute and more than once."""
        return Path(submission.output_dir)


def _print(console: Console | None, text: str) -> None:
    """Print rich markup ``text`` (outside text in it already ``escape``d)."""
    if console is not None:
        console.print(text, highlight=False)
