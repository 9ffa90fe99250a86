"""``FaultKnobs``: the fault knobs every policy-server double shares (core's and the plugins').

A double counts the inferences it receives (1-based; per double object, so per process for a
double in its own process; a batch of ``k`` requests counts ``k``) and, before answering, asks
:meth:`FaultKnobs.before_inference` what to do. The knobs, the same name and meaning in
:class:`arena.testing.doubles.FaultInjector` (arena's server and the openpi-like one),
``arena_gr00t.testing.Gr00tDouble`` and ``arena_dreamzero.testing.DreamZeroDouble``:

* ``never_reply`` (a plain attribute a test may flip): nothing is answered;
* ``hang_from_request``: from that inference on, the model hangs for good (the server may still
  answer other messages: health checks, handshakes, pings, depending on the double);
* ``restart_on_request``: that inference is dropped and the server restarts, losing its state
  (an in-process double listens again on the same port; a double in its own process exits, for
  its supervisor to start it again);
* ``fail_on_request``: that inference (an int, or a collection of them) fails the way the real
  server reports a failure (a traceback text frame, an ``{"error": ...}`` reply), with the
  message ``injected failure on <unit> <n>``;
* ``first_delay_s`` / ``infer_delay_s``: every inference that is answered (or fails) first
  blocks ``infer_delay_s`` seconds, the first one ``first_delay_s`` instead when given.

When several apply to one inference: restart, then hang, then the delay, then the failure.
What a hang or a restart looks like on the wire is each double's (it owns the transport).
"""

from __future__ import annotations

import argparse
import enum
import threading
import time
from collections.abc import Collection
from typing import Any, ClassVar

__all__ = ["Fault", "FaultKnobs", "InjectedFailure", "add_fault_arguments", "fault_options"]


class Fault(enum.Enum):
    """What a double does with an inference instead of answering it."""

    HANG = "hang"
    RESTART = "restart"


class InjectedFailure(RuntimeError):
    """Raised by :meth:`FaultKnobs.before_inference` for a ``fail_on_request`` inference."""


class FaultKnobs:
    """Mixin holding the fault knobs (module doc) and the inference counter ``inferences``.

    A double calls :meth:`init_faults` in its constructor and :meth:`before_inference` before
    each inference; ``fault_unit`` names one inference in the failure message (``request``,
    ``get_action``, ``inference``).
    """

    fault_unit: ClassVar[str] = "request"

    def init_faults(
        self,
        *,
        never_reply: bool = False,
        hang_from_request: int | None = None,
        restart_on_request: int | None = None,
        fail_on_request: int | Collection[int] | None = None,
        infer_delay_s: float = 0.0,
        first_delay_s: float | None = None,
    ) -> None:
        """Set the knobs (module doc); counting starts at 0."""
        self.never_reply = never_reply
        self.hang_from_request = hang_from_request
        self.restart_on_request = restart_on_request
        self.fail_on_request = fail_on_request
        self.infer_delay_s = infer_delay_s
        self.first_delay_s = first_delay_s
        self.inferences = 0
        self._fault_lock = threading.Lock()

    def count_inferences(self, count: int = 1) -> range:
        """Count ``count`` inferences arriving together; returns their 1-based numbers."""
        with self._fault_lock:
            first = self.inferences + 1
            self.inferences += count
        return range(first, first + count)

    def fault_for(self, numbers: range) -> Fault | None:
        """The fault of the inferences ``numbers`` (one, or a batch), without counting them."""
        if self.restart_on_request is not None and self.restart_on_request in numbers and self.restart_allowed():
            return Fault.RESTART
        if self.never_reply or (self.hang_from_request is not None and numbers[-1] >= self.hang_from_request):
            return Fault.HANG
        return None

    def restart_allowed(self) -> bool:
        """Whether ``restart_on_request`` still applies (a double may allow one restart only)."""
        return True

    def failing(self, numbers: range) -> int | None:
        """The first of ``numbers`` that ``fail_on_request`` names, else ``None``."""
        fail = self.fail_on_request
        if fail is None:
            return None
        wanted = {fail} if isinstance(fail, int) else set(fail)
        return next((n for n in numbers if n in wanted), None)

    def delay_s(self, numbers: range) -> float:
        """Seconds the inferences ``numbers`` block before they are answered."""
        if 1 in numbers and self.first_delay_s is not None:
            return self.first_delay_s
        return self.infer_delay_s

    def before_inference(self, count: int = 1) -> Fault | None:
        """Count ``count`` inferences and apply the knobs: returns :class:`Fault` when the
        double must hang or restart instead of answering; otherwise sleeps the delay and
        returns ``None`` (answer normally).

        Raises:
            InjectedFailure: a ``fail_on_request`` inference (after its delay).
        """
        numbers = self.count_inferences(count)
        fault = self.fault_for(numbers)
        if fault is None:
            self.apply_delay_and_failure(numbers)
        return fault

    def apply_delay_and_failure(self, numbers: range) -> None:
        """Sleep the delay of the inferences ``numbers``, then fail them if one is to fail.

        Raises:
            InjectedFailure: ``injected failure on <fault_unit> <n>``.
        """
        delay = self.delay_s(numbers)
        if delay:
            time.sleep(delay)
        failed = self.failing(numbers)
        if failed is not None:
            raise InjectedFailure(f"injected failure on {self.fault_unit} {failed}")


def add_fault_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the knobs as options of a process double's command line (``--never-reply``,
    ``--hang-from-request N``, ``--restart-on-request N``, ``--fail-on-request N``,
    ``--first-delay-s S``, ``--infer-delay-s S``); read them back with :func:`fault_options`."""
    g = parser.add_argument_group("faults")
    g.add_argument("--never-reply", action="store_true", help="answer no inference")
    g.add_argument("--hang-from-request", type=int, default=None, help="this inference and later ones never answer")
    g.add_argument("--restart-on-request", type=int, default=None, help="drop this inference and restart (1-based)")
    g.add_argument("--fail-on-request", type=int, default=None, help="this inference fails like the real server's")
    g.add_argument("--first-delay-s", type=float, default=None, help="the first inference blocks this long")
    g.add_argument("--infer-delay-s", type=float, default=0.0, help="every inference blocks this long")
    return parser


def fault_options(args: argparse.Namespace) -> dict[str, Any]:
    """The knobs parsed by :func:`add_fault_arguments`, as keyword arguments of a double."""
    return {
        "never_reply": args.never_reply,
        "hang_from_request": args.hang_from_request,
        "restart_on_request": args.restart_on_request,
        "fail_on_request": args.fail_on_request,
        "first_delay_s": args.first_delay_s,
        "infer_delay_s": args.infer_delay_s,
    }
