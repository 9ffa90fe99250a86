"""The work queue: episodes claimed by whichever runner is free, each recorded once.

A run's work items (``(run, episode_index, seed)``) are loaded into one SQLite file on the
output directory's file system (:data:`arena.outputs.layout.QUEUE_FILE`), so every runner that
can write the records can reach it: local processes, Slurm jobs, Ray tasks on a shared file
system. A runner *claims* an item with a lease (``lease_s`` seconds), *renews* it while the
episode runs and *finishes* it with its record. Rules, each one SQL transaction
(``BEGIN IMMEDIATE``, so claims never interleave):

- an item is claimable while ``queued``, or ``leased`` with its lease lapsed (its runner or
  node died, or stopped renewing): the lapsed item goes to exactly one new claimer, and the
  old holder's :meth:`WorkQueue.renew` then answers ``False``;
- the first :meth:`WorkQueue.finish` of an item wins (whichever lease it holds: a late runner
  whose episode did end has a valid result) and stores the record in the file; every later one
  answers ``False``, and its record must be dropped: one record per item;
- :meth:`WorkQueue.release` puts an unfinished item back (a runner that stops early).

``episodes.jsonl`` stays the source every reader uses (status, resume, reports, sinks): a
runner appends a record only after its ``finish`` won. A runner killed between the two leaves
an item done without a record; ``arena run --resume`` reloads the queue from the records, so
it runs again then. (``finish`` may also store the record itself, :meth:`WorkQueue.records`;
runners do not, to keep the file small.)

SQLite's locking needs a file system with working POSIX locks (local disks, NFSv4, Lustre
with ``flock``); the journal stays in ``DELETE`` mode (WAL needs shared memory, which network
file systems lack). Transactions do not fsync (``synchronous = OFF``): the file's locks make
each claim exclusive, a killed process loses nothing the kernel already holds, and only an
operating-system crash could lose or damage the file, which is a coordination aid, not a
record (``arena run --resume`` reloads it from the records, recreating a damaged one). With
fsyncs a claim and a finish took ~50 ms on an ordinary disk; without, well under 1 ms.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Lease", "LeaseKeeper", "WorkQueue"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    run TEXT NOT NULL,
    episode_index INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('queued', 'leased', 'done')),
    owner TEXT,
    lease_until REAL,
    claims INTEGER NOT NULL DEFAULT 0,
    finished_by TEXT,
    record TEXT,
    PRIMARY KEY (run, episode_index)
)
"""


@dataclass(frozen=True)
class Lease:
    """One claim of one item: ``claim`` counts the item's claims (1 on the first), so a
    renewal or release of a lease another runner has since taken over is told apart."""

    run: str
    episode_index: int
    seed: int
    owner: str
    claim: int


class WorkQueue:
    """The queue in the SQLite file ``path`` (created with its table when missing).

    ``clock`` gives the time leases are measured in (seconds; ``time.time``: runners on
    different machines compare the same wall clock, so keep their clocks in sync, e.g. NTP,
    and leases long against the skew). Each call opens its own short transaction, so one
    object may be shared by threads and many processes may use the same file.
    """

    def __init__(self, path: str | os.PathLike[str], *, clock: Callable[[], float] = time.time,
                 busy_timeout_s: float = 60.0) -> None:
        self.path = Path(path)
        self.clock = clock
        self.busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()  # sqlite3 connections are not shared across threads here
        db = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None)
        try:  # small pages keep the file small (set before the first table is created)
            db.execute("PRAGMA page_size = 1024")
            db.execute(_SCHEMA)
        finally:
            db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            db = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None)
            try:
                db.execute("PRAGMA synchronous = OFF")  # see the module: locks, not fsyncs, make claims exclusive
                db.execute("BEGIN IMMEDIATE")
                try:
                    yield db
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
            finally:
                db.close()

    # -- filling -------------------------------------------------------------------------------
    def load(self, run: str, items: Iterable[tuple[int, int]]) -> int:
        """Make ``items`` (``(episode_index, seed)`` pairs) the work of ``run``: each one
        ``queued``, and the run's other items (an earlier attempt's) forgotten. Call it before
        the run's runners start (a fresh run: all items; a resume: those left undone).
        Returns how many items are queued."""
        rows = [(run, int(index), int(seed)) for index, seed in items]
        with self._transaction() as db:
            db.execute("DELETE FROM items WHERE run = ?", (run,))
            db.executemany("INSERT INTO items (run, episode_index, seed, state) VALUES (?, ?, ?, 'queued')", rows)
        return len(rows)

    # -- a runner's calls ----------------------------------------------------------------------
    def claim(self, owner: str, lease_s: float, runs: Iterable[str] | None = None) -> Lease | None:
        """Lease the lowest-index claimable item (of ``runs``, default any run) to ``owner``
        for ``lease_s`` seconds; ``None`` when nothing is claimable now (see :meth:`outstanding`
        for whether something may become claimable later).

        Raises:
            ValueError: ``lease_s`` is not positive.
        """
        if lease_s <= 0:
            raise ValueError(f"lease_s must be positive, got {lease_s}")
        names = None if runs is None else list(runs)
        where = "(state = 'queued' OR (state = 'leased' AND lease_until <= ?))"
        params: list[object] = []
        with self._transaction() as db:
            now = self.clock()
            params.append(now)
            if names is not None:
                if not names:
                    return None
                where += f" AND run IN ({', '.join('?' * len(names))})"
                params.extend(names)
            row = db.execute(
                f"SELECT run, episode_index, seed, claims FROM items WHERE {where} "
                "ORDER BY run, episode_index LIMIT 1", params,
            ).fetchone()
            if row is None:
                return None
            run, index, seed, claims = row
            db.execute(
                "UPDATE items SET state = 'leased', owner = ?, lease_until = ?, claims = ? "
                "WHERE run = ? AND episode_index = ?",
                (owner, now + lease_s, claims + 1, run, index),
            )
        return Lease(run, index, seed, owner, claims + 1)

    def renew(self, lease: Lease, lease_s: float) -> bool:
        """Extend ``lease`` to ``lease_s`` seconds from now; ``False`` when it is no longer held
        (the item was claimed again after the lease lapsed, released or finished)."""
        with self._transaction() as db:
            cur = db.execute(
                "UPDATE items SET lease_until = ? WHERE run = ? AND episode_index = ? AND state = 'leased' AND claims = ?",
                (self.clock() + lease_s, lease.run, lease.episode_index, lease.claim),
            )
            return cur.rowcount == 1

    def finish(self, lease: Lease, record: str | None = None) -> bool:
        """Mark the item of ``lease`` done with ``record`` (its JSON line); ``True`` for the
        first finish of the item, ``False`` for a duplicate (another runner's finish came first):
        the caller then drops its record."""
        with self._transaction() as db:
            cur = db.execute(
                "UPDATE items SET state = 'done', owner = ?, lease_until = NULL, finished_by = ?, record = ? "
                "WHERE run = ? AND episode_index = ? AND state != 'done'",
                (lease.owner, f"{lease.owner}#{lease.claim}", record, lease.run, lease.episode_index),
            )
            return cur.rowcount == 1

    def release(self, lease: Lease) -> bool:
        """Put the item of ``lease`` back in the queue now (its runner stops without finishing
        it); ``False`` when the lease is no longer held."""
        with self._transaction() as db:
            cur = db.execute(
                "UPDATE items SET state = 'queued', owner = NULL, lease_until = NULL "
                "WHERE run = ? AND episode_index = ? AND state = 'leased' AND claims = ?",
                (lease.run, lease.episode_index, lease.claim),
            )
            return cur.rowcount == 1

    # -- readers -------------------------------------------------------------------------------
    def counts(self, run: str | None = None) -> dict[str, int]:
        """``{"queued", "leased", "lapsed", "done"}`` item counts (of ``run``, default all):
        ``lapsed`` leases are counted there, not under ``leased``."""
        with self._transaction() as db:
            now = self.clock()
            query = ("SELECT state, lease_until <= ? AND state = 'leased', COUNT(*) FROM items"
                     + (" WHERE run = ?" if run is not None else "") + " GROUP BY 1, 2")
            rows = db.execute(query, (now, run) if run is not None else (now,)).fetchall()
        counts = {"queued": 0, "leased": 0, "lapsed": 0, "done": 0}
        for state, lapsed, n in rows:
            counts["lapsed" if lapsed else state] += n
        return counts

    def outstanding(self, runs: Iterable[str] | None = None) -> int:
        """Items of ``runs`` (default all) not done yet: queued, leased or lapsed. A runner
        that finds nothing to claim waits while this is positive (a lease may lapse)."""
        names = None if runs is None else list(runs)
        query = "SELECT COUNT(*) FROM items WHERE state != 'done'"
        if names is not None:
            query += f" AND run IN ({', '.join('?' * len(names))})"
        with self._transaction() as db:
            return int(db.execute(query, names or ()).fetchone()[0])

    def records(self, run: str) -> dict[int, str]:
        """The record stored by each finished item of ``run`` (episode index -> JSON line)."""
        with self._transaction() as db:
            rows = db.execute(
                "SELECT episode_index, record FROM items WHERE run = ? AND state = 'done' AND record IS NOT NULL", (run,)
            ).fetchall()
        return {int(i): str(r) for i, r in rows}

    def claims(self, run: str) -> dict[int, int]:
        """How many times each item of ``run`` was claimed (1: once; more: after lapses)."""
        with self._transaction() as db:
            rows = db.execute("SELECT episode_index, claims FROM items WHERE run = ?", (run,)).fetchall()
        return {int(i): int(c) for i, c in rows}


class LeaseKeeper:
    """Renews the leases a runner holds, every ``lease_s / 3`` seconds, on a daemon thread.

    ``hold`` a lease when its episode starts and ``drop`` it when it ends. A lease that can no
    longer be renewed (lapsed and claimed by another runner) is remembered in ``lost``; the
    episode may still finish, and its :meth:`WorkQueue.finish` decides whether it counts.
    """

    def __init__(self, queue: WorkQueue, lease_s: float) -> None:
        self.queue = queue
        self.lease_s = lease_s
        self.held: dict[tuple[str, int], Lease] = {}
        self.lost: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="arena-lease-keeper", daemon=True)
        self._thread.start()

    def hold(self, lease: Lease) -> None:
        with self._lock:
            self.held[(lease.run, lease.episode_index)] = lease

    def drop(self, lease: Lease) -> None:
        with self._lock:
            self.held.pop((lease.run, lease.episode_index), None)

    def _loop(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            with self._lock:
                leases = list(self.held.values())
            for lease in leases:
                try:
                    if not self.queue.renew(lease, self.lease_s):
                        with self._lock:
                            self.lost.add((lease.run, lease.episode_index))
                            self.held.pop((lease.run, lease.episode_index), None)
                except sqlite3.Error:  # a busy or unreachable file: try again next round
                    pass

    def close(self) -> None:
        """Stop renewing (the leases still held lapse unless released)."""
        self._stop.set()
        self._thread.join(timeout=5)
