"""Work items claimed from the work queue, for the rollout's envs (``arena run-one --queue``).

:class:`ClaimedItems` is what the rollout takes items from when a runner shares a run with
others (:mod:`arena.outputs.workqueue`): each ``take`` claims one episode with a lease that a
:class:`~arena.outputs.workqueue.LeaseKeeper` renews while it runs; ``finish`` tells the queue
an episode ended and answers whether its record counts (the first finish of an item does; a
duplicate, from a runner whose lapsed lease another runner took over, is dropped). With
nothing claimable but episodes still leased by other runners, a waiting ``take`` polls until
one of them is finished (nothing more to do) or its lease lapses (claimed here).

The lease length is ``$ARENA_QUEUE_LEASE_S`` seconds (default :data:`DEFAULT_LEASE_S`): a
runner that dies leaves its episodes to others after at most that long.
"""

from __future__ import annotations

import os
import socket
import time

from arena.outputs.workqueue import Lease, LeaseKeeper, WorkQueue
from arena.rollout.workitems import WorkItem

#: Variable holding the lease length in seconds.
LEASE_ENV = "ARENA_QUEUE_LEASE_S"
DEFAULT_LEASE_S = 30.0


def lease_seconds() -> float:
    """``$ARENA_QUEUE_LEASE_S`` (positive seconds), else :data:`DEFAULT_LEASE_S`.

    Raises:
        ValueError: the variable is set but not a positive number.
    """
    text = os.environ.get(LEASE_ENV)
    if not text:
        return DEFAULT_LEASE_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"${LEASE_ENV}={text!r}: expected a positive number of seconds")
    return value


class ClaimedItems:
    """The items of ``run`` this runner claims from ``queue``, as the rollout takes them."""

    def __init__(self, queue: WorkQueue, run: str, *, owner: str | None = None, lease_s: float | None = None,
                 poll_s: float = 0.2) -> None:
        self.queue = queue
        self.run = run
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}"
        self.lease_s = lease_s if lease_s is not None else lease_seconds()
        self.poll_s = poll_s
        self.keeper = LeaseKeeper(queue, self.lease_s)
        self.leases: dict[int, Lease] = {}
        self.dropped: list[int] = []  # episodes whose finish came second (records not kept)

    def take(self, wait: bool = False) -> WorkItem | None:
        """Claim the next item; ``None`` when none is claimable now (``wait=False``) or when
        every item of the run is finished (``wait=True``: polls while others hold leases)."""
        while True:
            lease = self.queue.claim(self.owner, self.lease_s, [self.run])
            if lease is not None:
                self.keeper.hold(lease)
                self.leases[lease.episode_index] = lease
                return WorkItem(self.run, lease.episode_index, lease.seed)
            if not wait or self.queue.outstanding([self.run]) == 0:
                return None
            time.sleep(self.poll_s)

    def finish(self, episode_index: int, record: str | None = None) -> bool:
        """Tell the queue the episode ended (``record``: its JSON line, stored in the queue
        when given); whether it counts."""
        lease = self.leases.pop(episode_index, None)
        if lease is None:  # not claimed here (never happens in a rollout): count it as the queue says
            return False
        self.keeper.drop(lease)
        won = self.queue.finish(lease, record)
        if not won:
            self.dropped.append(episode_index)
        return won

    def remaining(self) -> list[WorkItem]:
        """Items handed out here and not finished (the queue's queued items are no one's yet)."""
        return [WorkItem(self.run, lease.episode_index, lease.seed) for lease in self.leases.values()]

    def close(self) -> None:
        """Stop renewing and put every unfinished claimed item back in the queue."""
        self.keeper.close()
        for lease in list(self.leases.values()):
            try:
                self.queue.release(lease)
            except Exception:  # the queue is unreachable: the lease lapses on its own
                pass
        self.leases.clear()
