"""arena's policy server: hosts any :class:`arena.servers.model.Model` behind the openpi protocol.

Per connection: one binary metadata frame (``model.metadata()``, sent once ``load()`` has
finished), then strictly one request, one reply. Dict replies get
``server_timing = {"infer_ms": float, "prev_total_ms": float}`` (``prev_total_ms`` from the
second request on: the previous request's decode + infer + encode + send time in ms, without the
client's think time). Any exception while handling a message sends one **text** frame with the
traceback and closes with 1011; other connections are not affected.

Unlike openpi's server, inference runs off the event loop (one worker thread), so pings,
handshakes and health checks are answered during long inferences; messages are bounded by
``max_message_bytes`` (close 1009); ``GET /healthz`` answers 200 once bound and ``GET /readyz``
200 once ``load()`` finished (503 before). With ``api_key`` the handshake requires
``Authorization: Api-Key <key>`` (401 otherwise; the health routes stay open).

A model with ``infer_batch(list_of_obs) -> list_of_replies`` and ``max_batch_size > 1`` gets
concurrent requests grouped: the first waiting request opens a window of ``max_wait_ms``;
the batch closes when it is full, when the window ends, or as soon as every open connection
has a request in it (each connection has at most one request in flight, so no more can come:
a lone client never waits for the window). Each reply goes back to its own connection.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hmac
import logging
import queue
import signal
import threading
import time
import traceback
from typing import Any, Awaitable, Callable

from websockets.asyncio.server import ServerConnection
from websockets.asyncio.server import serve as ws_serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from arena.transport.codec import Packer, unpackb
from arena.transport.errors import ProtocolError, TransportError

__all__ = ["PolicyServer", "serve_model"]

log = logging.getLogger("arena.transport.server")

ERROR_CLOSE_REASON = "Internal server error. Traceback included in previous frame."
_START_TIMEOUT_S = 30.0
_CLOSE_TIMEOUT_S = 2.0


class PolicyServer:
    """Serve ``model`` over WebSocket on ``host:port`` (port 0 picks a free one).

    Args:
        model: a :class:`arena.servers.model.Model`.
        host: interface to bind; loopback unless told otherwise.
        port: TCP port; 0 for an ephemeral one (read :attr:`port` once bound).
        api_key: when set, required as ``Authorization: Api-Key <key>``.
        max_message_bytes: largest request accepted (bytes); bigger ones close with 1009.
        max_batch_size: >1 groups concurrent requests into ``model.infer_batch`` calls.
        max_wait_ms: how long the first request of a batch waits for company (ms).
        ping_interval_s, ping_timeout_s: server keepalive; ``None`` disables it.
    """

    def __init__(
        self,
        model: Any,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        api_key: str | None = None,
        max_message_bytes: int = 64 * 2**20,
        max_batch_size: int = 1,
        max_wait_ms: float = 2.0,
        ping_interval_s: float | None = 20.0,
        ping_timeout_s: float | None = 300.0,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.model = model
        self.host = host
        self.port = port
        self.api_key = api_key
        self.max_message_bytes = max_message_bytes
        self.max_batch_size = max_batch_size
        self.max_wait_ms = max_wait_ms
        self.ping_interval_s = ping_interval_s
        self.ping_timeout_s = ping_timeout_s
        self.ready = False
        self.load_error: str | None = None
        self._batching = max_batch_size > 1 and callable(getattr(model, "infer_batch", None))
        self._auth = f"Api-Key {api_key}".encode() if api_key else None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loaded: asyncio.Event | None = None
        self._queue: asyncio.Queue[tuple[Any, asyncio.Future[Any]]] | None = None
        self._executor: _DaemonWorker | None = None
        self._handlers: set[asyncio.Task[Any]] = set()
        self._serving = 0  # connections past their metadata frame
        self._main_task: asyncio.Task[Any] | None = None
        self._thread: threading.Thread | None = None
        self._bound = threading.Event()
        self._thread_error: BaseException | None = None
        self._listening = False

    @property
    def endpoint(self) -> str:
        return f"ws://{self.host}:{self.port}"

    # ---- lifecycle ----------------------------------------------------------------------

    async def serve(self, on_bound: Callable[[PolicyServer], None] | None = None) -> None:
        """Bind, run ``model.load()`` in a worker thread, then serve until cancelled.

        ``on_bound(self)`` is called once the socket is bound (:attr:`port` is then real).
        Raises whatever ``load()`` raised (after closing the listening socket).
        """
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._main_task = asyncio.current_task()
        self._loaded = asyncio.Event()
        self._executor = _DaemonWorker("arena-infer")
        batcher = None
        if self._batching:
            self._queue = asyncio.Queue()
            batcher = asyncio.create_task(self._batch_loop())
        try:
            async with ws_serve(
                self._handle,
                self.host,
                self.port,
                compression=None,
                max_size=self.max_message_bytes,
                ping_interval=self.ping_interval_s,
                ping_timeout=self.ping_timeout_s,
                process_request=self._process_request,
            ) as server:
                self.port = server.sockets[0].getsockname()[1]
                self._listening = True
                self._bound.set()
                if on_bound is not None:
                    on_bound(self)
                log.info("policy server listening on %s (loading model)", self.endpoint)
                try:
                    await loop.run_in_executor(self._executor, self.model.load)
                except Exception:
                    self.load_error = traceback.format_exc()
                    log.error("model.load() failed:\n%s", self.load_error)
                    self._loaded.set()  # waiting connections get the traceback, then 1011
                    raise
                self.ready = True
                self._loaded.set()
                log.info("policy server ready on %s", self.endpoint)
                try:
                    await asyncio.Future()
                finally:
                    await self._cancel_handlers()
        finally:
            self.ready = False
            if batcher is not None:
                batcher.cancel()
            self._executor.shutdown(wait=False)

    async def _cancel_handlers(self) -> None:
        handlers = [task for task in self._handlers if not task.done()]
        for task in handlers:
            task.cancel()
        if handlers:
            await asyncio.wait(handlers)

    def run(self, on_bound: Callable[[PolicyServer], None] | None = None) -> None:
        """Serve in the foreground until SIGINT or SIGTERM (for ``arena serve``)."""
        serve_until_signalled(lambda: self.serve(on_bound=on_bound))
        log.info("policy server on %s stopped", self.endpoint)

    def start_in_thread(self) -> PolicyServer:
        """Serve on a background thread; return once bound (:attr:`port` is then real).

        ``load()`` may still be running: poll :attr:`ready` or ``GET /readyz``.
        """
        if self._thread is not None:
            raise RuntimeError("server already started")

        def target() -> None:
            try:
                asyncio.run(self.serve())
            except asyncio.CancelledError:
                pass
            except BaseException as exc:  # noqa: BLE001 - reported to start_in_thread / stop
                self._thread_error = exc
            finally:
                self._bound.set()

        self._thread = threading.Thread(target=target, name="arena-policy-server", daemon=True)
        self._thread.start()
        if not self._bound.wait(_START_TIMEOUT_S):
            raise TransportError(
                f"{self.endpoint}: server did not bind within {_START_TIMEOUT_S} s"
            )
        if not self._listening:
            raise TransportError(
                f"{self.endpoint}: server failed to start: {self._thread_error}"
            ) from self._thread_error
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop a server started with :meth:`start_in_thread` (or cancel :meth:`serve`)."""
        loop, task = self._loop, self._main_task
        if loop is not None and task is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # loop already closed
                pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    # ---- HTTP ---------------------------------------------------------------------------

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path == "/healthz":
            return connection.respond(200, "OK\n")
        if path == "/readyz":
            if self.ready:
                return connection.respond(200, "OK\n")
            return connection.respond(503, "model is loading\n")
        if self._auth is not None:
            given = request.headers.get("Authorization", "").encode("utf-8", "replace")
            if not hmac.compare_digest(given, self._auth):
                return connection.respond(401, "missing or wrong API key\n")
        return None

    # ---- WebSocket ----------------------------------------------------------------------

    async def _handle(self, ws: ServerConnection) -> None:
        task = asyncio.current_task()
        assert task is not None and self._loaded is not None
        self._handlers.add(task)
        try:
            await self._loaded.wait()
            if self.load_error is not None:
                await self._fail(ws, self.load_error)
                return
            packer = Packer()
            try:
                await ws.send(packer.pack(self.model.metadata()))
            except ConnectionClosed:
                return
            except Exception:
                await self._fail(ws, traceback.format_exc())
                return
            self._serving += 1
            try:
                await self._serve_requests(ws, packer)
            finally:
                self._serving -= 1
        except asyncio.CancelledError:  # server shutting down (see _cancel_handlers)
            try:
                await asyncio.wait_for(ws.close(1001, "server shutting down"), _CLOSE_TIMEOUT_S)
            except (ConnectionClosed, TimeoutError):
                pass
        finally:
            self._handlers.discard(task)

    async def _serve_requests(self, ws: ServerConnection, packer: Packer) -> None:
        prev_total_ms: float | None = None
        while True:
            try:
                message = await ws.recv()
            except ConnectionClosed:
                return
            start = time.perf_counter()
            try:
                if isinstance(message, str):
                    raise ProtocolError("requests must be binary msgpack frames, got a text frame")
                obs = unpackb(message)
                result, infer_ms = await self._infer(obs)
                if isinstance(result, dict):
                    timing = {"infer_ms": infer_ms}
                    if prev_total_ms is not None:
                        timing["prev_total_ms"] = prev_total_ms
                    result = {**result, "server_timing": timing}
                reply = packer.pack(result)
            except Exception:
                await self._fail(ws, traceback.format_exc())
                return
            try:
                await ws.send(reply)
            except ConnectionClosed:
                return
            prev_total_ms = (time.perf_counter() - start) * 1000.0

    async def _fail(self, ws: ServerConnection, text: str) -> None:
        log.error("error while handling a request from %s:\n%s", ws.remote_address, text)
        try:
            await ws.send(text)
            await ws.close(1011, ERROR_CLOSE_REASON)
        except ConnectionClosed:
            pass

    async def _infer(self, obs: Any) -> tuple[Any, float]:
        assert self._loop is not None
        if self._queue is not None:
            future: asyncio.Future[tuple[Any, float]] = self._loop.create_future()
            self._queue.put_nowait((obs, future))
            return await future
        return await self._loop.run_in_executor(self._executor, _timed, self.model.infer, obs)

    async def _batch_loop(self) -> None:
        assert self._queue is not None and self._loop is not None
        queue, loop = self._queue, self._loop
        max_wait_s = self.max_wait_ms / 1000.0
        while True:
            batch = [await queue.get()]
            deadline = loop.time() + max_wait_s
            while len(batch) < min(self.max_batch_size, max(self._serving, 1)):
                if not queue.empty():
                    batch.append(queue.get_nowait())
                    continue
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(queue.get(), remaining))
                except TimeoutError:
                    break
            batch = [(obs, fut) for obs, fut in batch if not fut.done()]
            if not batch:
                continue
            try:
                results, infer_ms = await loop.run_in_executor(
                    self._executor, _timed, self.model.infer_batch, [obs for obs, _ in batch]
                )
                if not isinstance(results, (list, tuple)) or len(results) != len(batch):
                    raise ProtocolError(
                        f"infer_batch returned {type(results).__name__} "
                        f"{'of length ' + str(len(results)) if hasattr(results, '__len__') else ''}"
                        f" for a batch of {len(batch)} requests"
                    )
            except Exception as exc:  # noqa: BLE001 - each waiting connection reports it
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            for (_, fut), result in zip(batch, results):
                if not fut.done():
                    fut.set_result((result, infer_ms))


class _DaemonWorker(concurrent.futures.Executor):
    """One daemon thread running submitted calls in order.

    Unlike ThreadPoolExecutor, its thread does not hold up interpreter exit: a SIGTERM during a
    minutes-long ``load()`` or ``infer()`` ends the process at once.
    """

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._jobs.put((future, fn, args, kwargs))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._jobs.put(None)
        if wait:
            self._thread.join()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn, args, kwargs = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                future.set_exception(exc)


def _timed(fn: Any, arg: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn(arg)
    return result, (time.perf_counter() - start) * 1000.0


def serve_model(model: Any, host: str = "127.0.0.1", port: int = 8000, **kw: Any) -> None:
    """Serve ``model`` in the foreground until SIGINT/SIGTERM (``arena serve``); ``kw`` goes to
    :class:`PolicyServer`."""
    PolicyServer(model, host, port, **kw).run()


def serve_until_signalled(serve: Callable[[], Awaitable[None]]) -> None:
    """Run the coroutine ``serve()`` in a new event loop until SIGINT or SIGTERM cancels it.

    Shared by ``arena serve`` and the test doubles' command-line entry points.
    """

    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await serve()
        except asyncio.CancelledError:
            pass

    asyncio.run(main())
