"""Where arena's policy server runs the model: batches, inference threads, encoded replies.

The event loop hands each decoded request to :class:`InferenceEngine` as a :class:`Job`. The
engine either runs it at once on the calling thread (:meth:`InferenceEngine.run_inline`) or
queues it for the inference threads, which group queued jobs into batches
(:class:`BatchQueue`), call the model, **encode** every reply (off the event loop), and hand
the encoded frames back to the loop with one ``call_soon_threadsafe`` per batch. While one
batch runs, the loop keeps receiving and decoding the next; a model that declares
``concurrent_batches = 2`` (thread-safe ``infer_batch``) gets the next batch called while the
current one is still on the accelerator (stacking and host-to-device copies overlap its
compute). When ``infer_batch`` raises, the batch's requests are retried one by one, so a bad
request (a non-finite state, say) fails only its own connection, not its batch-mates.

Memory: a job's observation is released as soon as the model has it, and nothing of a request
(job, observation, exception, traceback) outlives its call: failures cross threads as text.
"""

from __future__ import annotations

import asyncio
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

from arena.transport.codec import Packer
from arena.transport.errors import ProtocolError

__all__ = ["BatchQueue", "Failure", "InferenceEngine", "Job"]

_EMA_WEIGHT = 0.25  # weight of the newest value in the running estimates
_COMPANY = 1.5  # batches recently averaged at least this many requests: wait for company


class Failure:
    """A request that failed: ``text`` is the traceback the connection gets (then 1011)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class Job:
    """One request on its way through the model: the decoded ``obs``, the connection's
    ``prev_total_ms`` (for ``server_timing``), and the loop future that receives the encoded
    reply (``bytes``) or a :class:`Failure`."""

    __slots__ = ("obs", "prev_total_ms", "future", "queued_at")

    def __init__(self, obs: Any, prev_total_ms: float | None, future: asyncio.Future[Any] | None) -> None:
        self.obs = obs
        self.prev_total_ms = prev_total_ms
        self.future = future
        self.queued_at = 0.0


class BatchQueue:
    """Jobs waiting for an inference thread, grouped into batches.

    :meth:`take` returns up to ``max_batch_size`` jobs once one of these holds: the batch is
    full; every serving connection without a request in a running batch has one waiting (no
    more can come, so a lone client never waits); no company is expected (recent batches held
    one request each: a client alone in practice, though others are connected, does not wait
    either); or the oldest job has waited ``max_wait_s``.
    """

    def __init__(self, max_batch_size: int, max_wait_s: float, serving: Callable[[], int]) -> None:
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self._serving = serving
        self._cond = threading.Condition(threading.Lock())
        self._jobs: deque[Job] = deque()
        self._running = 0  # jobs in batches that the model is working on
        self._closed = False
        self.batch_size_estimate = 1.0  # running estimate of recent batch sizes

    def note_batch(self, size: int) -> None:
        """Count a batch of ``size`` in :attr:`batch_size_estimate`."""
        self.batch_size_estimate += _EMA_WEIGHT * (size - self.batch_size_estimate)

    @property
    def expects_company(self) -> bool:
        """Whether recent batches held more than one request (so waiting may fill this one)."""
        return self.batch_size_estimate >= _COMPANY

    def __len__(self) -> int:
        return len(self._jobs)

    @property
    def running(self) -> int:
        return self._running

    def put(self, job: Job) -> None:
        job.queued_at = time.monotonic()
        with self._cond:
            self._jobs.append(job)
            self._cond.notify()

    def take(self) -> list[Job] | None:
        """Block until a batch is due and return it; ``None`` once :meth:`close` was called."""
        with self._cond:
            while True:
                if self._closed:
                    return None
                jobs = self._jobs
                if jobs:
                    waited = time.monotonic() - jobs[0].queued_at
                    if (
                        len(jobs) >= self.max_batch_size
                        or len(jobs) >= self._serving() - self._running
                        or waited >= self.max_wait_s
                        or not self.expects_company
                    ):
                        size = min(len(jobs), self.max_batch_size)
                        batch = [jobs.popleft() for _ in range(size)]
                        self._running += size
                        self.note_batch(size)
                        if jobs:
                            self._cond.notify()  # another inference thread may take the rest
                        return batch
                    self._cond.wait(self.max_wait_s - waited)
                else:
                    self._cond.wait()

    def finished(self, size: int) -> None:
        with self._cond:
            self._running -= size

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class InferenceEngine:
    """Runs ``model`` for the server: ``load()``, then batches from a :class:`BatchQueue`.

    Args:
        model: a :class:`arena.models.model.Model`.
        batching: call ``model.infer_batch`` (else ``model.infer``, one request at a time).
        max_batch_size, max_wait_s: see :class:`BatchQueue`.
        threads: how many batches may be in the model at once (1 unless the model is
            thread-safe and says ``concurrent_batches``).
        serving: how many connections are serving requests now.
        inline_below_ms: :meth:`can_run_inline` says yes while the running estimate of the
            model's inference time (ms) is below this; ``None`` never.
    """

    def __init__(
        self,
        model: Any,
        *,
        batching: bool,
        max_batch_size: int,
        max_wait_s: float,
        threads: int,
        serving: Callable[[], int],
        inline_below_ms: float | None,
    ) -> None:
        self.model = model
        self.batching = batching
        self.queue = BatchQueue(max_batch_size if batching else 1, max_wait_s, serving)
        self.threads = threads
        self.inline_below_ms = inline_below_ms
        self.infer_ms_estimate: float | None = None  # running estimate; None before the first call
        self._serving = serving
        self._loop: asyncio.AbstractEventLoop | None = None
        self._workers: list[threading.Thread] = []
        self._inline_packer = Packer()
        self._idle = asyncio.Event()  # nothing queued or running on the inference threads

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop, loaded: Callable[[str | None], None]) -> None:
        """Start the inference threads; the first runs ``model.load()`` and reports through
        ``loaded(error_text_or_None)`` (called on the loop thread)."""
        self._loop = loop
        self._idle.set()

        def first() -> None:
            error = None
            try:
                self.model.load()
            except BaseException:  # noqa: BLE001 - reported to the server, which fails
                error = traceback.format_exc()
            try:
                loop.call_soon_threadsafe(loaded, error)
            except RuntimeError:  # the loop is closed: the server stopped during load()
                return
            if error is None:
                for index in range(1, self.threads):
                    self._spawn(index, self._work)
                self._work()

        self._spawn(0, first)

    def _spawn(self, index: int, target: Callable[[], None]) -> None:
        name = f"arena-infer-{index}"

        def named() -> None:
            _name_os_thread(name)  # so top -H, py-spy and /proc show which thread is busy
            target()

        # Daemon threads: a SIGTERM during a minutes-long load() or infer() ends the process.
        thread = threading.Thread(target=named, name=name, daemon=True)
        self._workers.append(thread)
        thread.start()

    def stop(self) -> None:
        self.queue.close()

    def join(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds (in all) for the inference threads to end after
        :meth:`stop`; True when none is left (one still in ``load()`` or ``infer()`` is not)."""
        deadline = time.monotonic() + timeout_s
        for thread in self._workers:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._workers)

    # ---- scheduling ----------------------------------------------------------------------

    def prefers_inline(self) -> bool:
        """Whether requests should run on the calling (event-loop) thread: recent inferences
        were short and there is nobody to batch with (batching off, or one connection serving:
        while a request runs inline no other is received, so with several connections batching
        would never get the chance to start).

        That is openpi's server's way (inference on the loop) where it is fastest, without its
        flaw: a first call, or a model that takes ``inline_below_ms`` or longer, goes to the
        inference threads, so pings, handshakes and health checks are answered meanwhile.
        """
        estimate = self.infer_ms_estimate
        return (
            self.inline_below_ms is not None
            and estimate is not None
            and estimate < self.inline_below_ms
            and (not self.batching or self._serving() <= 1)
        )

    def can_run_inline(self) -> bool:
        """:meth:`prefers_inline`, and nothing is queued or running on the inference threads
        (so the model is never called from two threads at once)."""
        return self.prefers_inline() and self.queue.running == 0 and not len(self.queue)

    async def until_idle(self) -> None:
        """Wait until nothing is queued or running on the inference threads (loop thread).

        A request that prefers to run inline waits here rather than joining the queue, so under
        steady load the queue drains and the server settles into running inline.
        """
        if self._idle.is_set():
            await asyncio.sleep(0)  # yield to the loop whatever happens
        else:
            await self._idle.wait()

    def run_inline(self, job: Job) -> bytes | Failure:
        """Run one job on the calling thread; returns its encoded reply or a Failure."""
        return self._run([job], self._inline_packer)[0]

    def submit(self, job: Job) -> None:
        """Queue ``job`` (loop thread); its future receives the encoded reply or a Failure."""
        self._idle.clear()
        self.queue.put(job)

    def _deliver(self, batch: list[Job], replies: list[bytes | Failure]) -> None:
        """On the loop thread: hand each reply to the connection waiting for it."""
        for job, reply in zip(batch, replies):
            future = job.future
            job.future = None
            if future is not None and not future.done():
                future.set_result(reply)
        if self.queue.running == 0 and not len(self.queue):
            self._idle.set()

    # ---- inference threads ---------------------------------------------------------------

    def _work(self) -> None:
        packer = Packer()  # a Packer is not thread-safe: one per thread
        loop = self._loop
        assert loop is not None
        while (batch := self.queue.take()) is not None:
            try:
                replies = self._run(batch, packer)
            finally:
                self.queue.finished(len(batch))
            try:
                loop.call_soon_threadsafe(self._deliver, batch, replies)
            except RuntimeError:  # the loop is closed: the server stopped
                return
            del batch, replies  # nothing of a request outlives its call

    def _run(self, batch: list[Job], packer: Packer) -> list[bytes | Failure]:
        """The encoded reply (or :class:`Failure`) of each job of ``batch``, in order.

        When ``infer_batch`` raises for a batch of several requests, each is retried alone
        (``infer_batch([obs])``): one bad request (e.g. a non-finite state) fails only its own
        connection, and its batch-mates get their replies.
        """
        observations = [job.obs for job in batch]
        for job in batch:
            job.obs = None
        try:
            outcome = self._infer(observations)
            if isinstance(outcome, Failure) and len(batch) > 1:
                replies: list[bytes | Failure] = []
                for i, job in enumerate(batch):
                    alone = self._infer([observations[i]])
                    observations[i] = None  # released as soon as the model had it
                    replies.append(alone if isinstance(alone, Failure) else self._pack([job], *alone, packer)[0])
                return replies
        finally:
            del observations
        if isinstance(outcome, Failure):
            return [outcome] * len(batch)
        return self._pack(batch, *outcome, packer)

    def _infer(self, observations: list[Any]) -> tuple[list[Any], float] | Failure:
        """``(results, infer_ms)`` of one model call on ``observations``, or the Failure."""
        try:
            start = time.perf_counter()
            if self.batching:
                results = self.model.infer_batch(observations)
                if not isinstance(results, (list, tuple)) or len(results) != len(observations):
                    length = f" of length {len(results)}" if hasattr(results, "__len__") else ""
                    raise ProtocolError(
                        f"infer_batch returned {type(results).__name__}{length} for a batch of "
                        f"{len(observations)} requests"
                    )
            else:
                results = [self.model.infer(observations[0])]
            infer_ms = (time.perf_counter() - start) * 1000.0
        except Exception:  # noqa: BLE001 - the waiting connection(s) get the traceback
            return Failure(traceback.format_exc())
        previous = self.infer_ms_estimate
        self.infer_ms_estimate = (
            infer_ms if previous is None else previous + _EMA_WEIGHT * (infer_ms - previous)
        )
        return list(results), infer_ms

    def _pack(self, batch: list[Job], results: list[Any], infer_ms: float, packer: Packer) -> list[bytes | Failure]:
        replies: list[bytes | Failure] = []
        for job, result in zip(batch, results):
            try:
                if isinstance(result, dict):
                    timing = {"infer_ms": infer_ms}
                    if job.prev_total_ms is not None:
                        timing["prev_total_ms"] = job.prev_total_ms
                    result = {**result, "server_timing": timing}
                replies.append(packer.pack(result))
            except Exception:  # noqa: BLE001 - this connection gets the traceback
                replies.append(Failure(traceback.format_exc()))
        return replies


def _name_os_thread(name: str) -> None:
    """Give the calling thread ``name`` at the OS level too (Linux ``prctl``; else nothing)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except Exception:  # noqa: BLE001 - only a diagnostic nicety
        pass


