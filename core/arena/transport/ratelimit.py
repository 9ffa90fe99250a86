"""Log lines that an attacker or a flood of failing clients cannot multiply without bound.

A server under attack (thousands of connections, each failing) would otherwise write one
traceback per failure: 14.6 MB of accept tracebacks in one measured case (issue 16.3).
:class:`RateLimitedFilter` lets ``burst`` records of each kind through per ``period_s`` and
then one summary line per period saying how many of that kind it held back.
"""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["RateLimitedFilter"]


class RateLimitedFilter(logging.Filter):
    """A :class:`logging.Filter` passing at most ``burst`` records per kind and ``period_s``.

    The kind of a record is its logger name and message template (``record.msg``), so "one
    connection failed" and "accept() ran out of file descriptors" are limited separately. When
    a period with held-back records ends, the next record of that kind carries a note: ``(N
    similar messages suppressed in the last P s)``.
    """

    def __init__(self, burst: int = 5, period_s: float = 10.0) -> None:
        super().__init__()
        self.burst = burst
        self.period_s = period_s
        self._lock = threading.Lock()
        self._state: dict[tuple[str, str], list[float]] = {}  # kind -> [period start, passed, held]

    def filter(self, record: logging.LogRecord) -> bool:
        kind = (record.name, str(record.msg))
        now = time.monotonic()
        with self._lock:
            state = self._state.get(kind)
            if state is None or now - state[0] >= self.period_s:
                held = 0 if state is None else int(state[2])
                self._state[kind] = [now, 1, 0]
                if len(self._state) > 1000:  # bounded: forget the oldest kinds
                    for old in sorted(self._state, key=lambda k: self._state[k][0])[:500]:
                        del self._state[old]
                if held:
                    record.msg = f"{record.msg} ({held} similar messages suppressed in the last {self.period_s:g} s)"
                return True
            if state[1] < self.burst:
                state[1] += 1
                return True
            state[2] += 1
            return False
