"""arena's policy server: hosts any :class:`arena.models.model.Model` behind the openpi protocol.

Per connection: one binary metadata frame (``model.metadata()``, sent once ``load()`` has
finished), then strictly one request, one reply, in order. Dict replies get
``server_timing = {"infer_ms": float, "prev_total_ms": float}`` (``prev_total_ms`` from the
second request on: the previous request's decode + infer + encode + send time in ms, without the
client's think time). Any exception while handling a message sends one **text** frame with the
traceback and closes with 1011; other connections are not affected.

How it keeps an accelerator busy (``arena.transport.inference``): the event loop receives and
decodes requests; inference threads group them into batches (models with ``infer_batch``:
on by default, :data:`DEFAULT_MAX_BATCH_SIZE` requests, :data:`DEFAULT_MAX_WAIT_MS` ms), call
the model and encode the replies, so the loop receives and decodes the next batch while the
model runs the current one. When recent inferences were short and there is nobody to batch
with, a request runs on the loop thread itself, as in openpi's server (no thread hand-off and no
contention for the GIL); a first call or a long inference always runs on an inference thread,
so pings, handshakes and health checks are answered during it.

Unlike openpi's server: messages are bounded by ``max_message_bytes`` (close 1009) and what a
message may build when decoded by its size (:func:`arena.transport.codec.object_budget`);
``GET /healthz`` answers 200 once bound and ``GET /readyz`` 200 once ``load()`` finished (503
before); with ``api_key`` the handshake requires ``Authorization: Api-Key <key>`` (401
otherwise; the health routes stay open). At most ``max_connections`` WebSocket connections are
served (the next handshake gets HTTP 503 saying so); a TCP connection that does not complete
the handshake within ``handshake_timeout_s`` is closed, and TCP connections beyond
``max_connections`` + 128 are closed at once (the open-file limit is raised to fit, or the
caps lowered to fit it), so accept() never runs out of descriptors.
Connections that completed the handshake are never closed for being silent (a simulator may
reset for minutes) as long as they answer keepalive pings. Error logs are rate-limited.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import resource
import signal
import sys
import threading
import time
import traceback
from typing import Any, Awaitable, Callable

from websockets.asyncio.server import ServerConnection
from websockets.asyncio.server import serve as ws_serve
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode
from websockets.http11 import Request, Response

from arena.transport.codec import DEFAULT_MAX_OBJECTS, Packer, unpackb
from arena.transport.errors import ProtocolError, TransportError
from arena.transport.inference import Failure, InferenceEngine, Job
from arena.transport.ratelimit import RateLimitedFilter

__all__ = [
    "DEFAULT_MAX_BATCH_SIZE",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_WAIT_MS",
    "PolicyServer",
    "serve_model",
]

log = logging.getLogger("arena.transport.policy_server")
_limited = RateLimitedFilter()
log.addFilter(_limited)
# websockets' own messages about failed handshakes and connections, rate-limited the same way.
_ws_log = logging.getLogger("arena.transport.policy_server.websockets")
_ws_log.addFilter(_limited)

ERROR_CLOSE_REASON = "Internal server error. Traceback included in previous frame."
DEFAULT_MAX_BATCH_SIZE = 64
"""Requests per ``infer_batch`` call by default (models with ``infer_batch``; others: 1)."""
DEFAULT_MAX_WAIT_MS = 2.0
"""How long the first request of a batch waits for company by default (ms). Nobody waits when
every connection already has a request queued (a lone client never waits)."""
DEFAULT_MAX_CONNECTIONS = 1024
"""WebSocket connections served at once by default: runs x ``num_envs`` of a large experiment
sharing one server (e.g. 16 runs of 64 envs)."""
_HANDSHAKE_BACKLOG = 128  # TCP connections still in their handshake, beyond max_connections
_FD_RESERVE = 64  # open files kept for the model, logs and the listening sockets
_START_TIMEOUT_S = 30.0
_CLOSE_TIMEOUT_S = 2.0


class PolicyServer:
    """Serve ``model`` over WebSocket on ``host:port`` (port 0 picks a free one).

    Args:
        model: a :class:`arena.models.model.Model`.
        host: interface to bind; loopback unless told otherwise.
        port: TCP port; 0 for an ephemeral one (read :attr:`port` once bound).
        api_key: when set, required as ``Authorization: Api-Key <key>``.
        max_message_bytes: largest request accepted (bytes); bigger ones close with 1009.
        max_objects: the most msgpack objects a request may hold however large it is (the
            budget is ``4096 + bytes/8`` below that; :func:`arena.transport.codec.object_budget`).
        max_batch_size: requests per ``model.infer_batch`` call; ``None``:
            :data:`DEFAULT_MAX_BATCH_SIZE` for models with ``infer_batch``, else 1 (1 turns
            batching off: ``model.infer`` one request at a time).
        max_wait_ms: how long the first request of a batch waits for company (ms).
        concurrent_batches: batches the model may run at once (the next one is stacked and
            sent to the device while the current one computes); ``None``: the model's
            ``concurrent_batches`` attribute, else 1. More than 1 needs a thread-safe model.
        inline_below_ms: run a request on the event-loop thread while recent inferences took
            less than this (ms) and there is nobody to batch with; ``None`` or 0 never does.
            The trade-off: a model that hangs during an inline call blocks the loop, so
            handshakes and health checks then time out (clients report a blocked event loop
            and give up within their reconnect bound) instead of being answered.
        max_connections: WebSocket connections served at once; the next handshake gets HTTP
            503 with the reason. TCP connections beyond this plus 128 still in their handshake
            are closed at once.
        handshake_timeout_s: a connection that has not completed the WebSocket handshake by
            then is closed.
        ping_interval_s, ping_timeout_s: server keepalive; ``None`` disables it. A connection
            is closed only when a pong does not come in time, never for silence.
    """

    def __init__(
        self,
        model: Any,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        api_key: str | None = None,
        max_message_bytes: int = 64 * 2**20,
        max_objects: int = DEFAULT_MAX_OBJECTS,
        max_batch_size: int | None = None,
        max_wait_ms: float = DEFAULT_MAX_WAIT_MS,
        concurrent_batches: int | None = None,
        inline_below_ms: float | None = 100.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        handshake_timeout_s: float = 10.0,
        ping_interval_s: float | None = 20.0,
        ping_timeout_s: float | None = 300.0,
    ) -> None:
        can_batch = callable(getattr(model, "infer_batch", None))
        if max_batch_size is None:
            max_batch_size = DEFAULT_MAX_BATCH_SIZE if can_batch else 1
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        if concurrent_batches is None:
            concurrent_batches = int(getattr(model, "concurrent_batches", 1) or 1)
        if concurrent_batches < 1:
            raise ValueError(f"concurrent_batches must be >= 1, got {concurrent_batches}")
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        self.model = model
        self.host = host
        self.port = port
        self.api_key = api_key
        self.max_message_bytes = max_message_bytes
        self.max_objects = max_objects
        self.max_batch_size = max_batch_size
        self.max_wait_ms = max_wait_ms
        self.concurrent_batches = concurrent_batches
        self.inline_below_ms = inline_below_ms
        self.max_connections = max_connections
        self.handshake_timeout_s = handshake_timeout_s
        self.ping_interval_s = ping_interval_s
        self.ping_timeout_s = ping_timeout_s
        self.batching = max_batch_size > 1 and can_batch
        self.ready = False
        self.load_error: str | None = None
        self._auth = f"Api-Key {api_key}".encode() if api_key else None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loaded: asyncio.Event | None = None
        self._engine: InferenceEngine | None = None
        self._handlers: set[asyncio.Task[Any]] = set()
        self._serving = 0  # connections past their metadata frame
        self._admitted = 0  # WebSocket connections accepted by process_request and still open
        self._tcp = 0  # TCP connections open, handshaken or not
        self._tcp_limit = max_connections + _HANDSHAKE_BACKLOG
        self._main_task: asyncio.Task[Any] | None = None
        self._thread: threading.Thread | None = None
        self._bound = threading.Event()
        self._thread_error: BaseException | None = None
        self._listening = False

    @property
    def endpoint(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def describe(self) -> str:
        """The serving settings in words, e.g. ``batches of up to 64, 2 ms wait; at most 1024
        connections``."""
        batching = (
            f"batches of up to {self.max_batch_size}, {self.max_wait_ms:g} ms wait"
            + (f", {self.concurrent_batches} at once" if self.concurrent_batches > 1 else "")
            if self.batching
            else "no batching"
        )
        return f"{batching}; at most {self.max_connections} connections"

    @property
    def connections(self) -> int:
        """WebSocket connections open now (admitted by the handshake)."""
        return self._admitted

    # ---- lifecycle ----------------------------------------------------------------------

    async def serve(self, on_bound: Callable[[PolicyServer], None] | None = None) -> None:
        """Bind, run ``model.load()`` on an inference thread, then serve until cancelled.

        ``on_bound(self)`` is called once the socket is bound (:attr:`port` is then real).
        Raises whatever ``load()`` raised (as :class:`TransportError` with its traceback) after
        closing the listening socket.
        """
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._main_task = asyncio.current_task()
        self._loaded = asyncio.Event()
        self._limit_open_files()
        previous_handler = loop.get_exception_handler()
        loop.set_exception_handler(_quiet_exception_handler)
        engine = InferenceEngine(
            self.model,
            batching=self.batching,
            max_batch_size=self.max_batch_size,
            max_wait_s=self.max_wait_ms / 1000.0,
            threads=self.concurrent_batches,
            serving=lambda: self._serving,
            inline_below_ms=self.inline_below_ms,
        )
        self._engine = engine
        load_done: asyncio.Future[str | None] = loop.create_future()
        try:
            async with ws_serve(
                self._handle,
                self.host,
                self.port,
                compression=None,
                max_size=self.max_message_bytes,
                max_queue=2,  # strictly one request at a time: buffer little per connection
                open_timeout=self.handshake_timeout_s,
                ping_interval=self.ping_interval_s,
                ping_timeout=self.ping_timeout_s,
                process_request=self._process_request,
                create_connection=self._connection_class(),
                logger=_ws_log,
            ) as server:
                self.port = server.sockets[0].getsockname()[1]
                self._listening = True
                self._bound.set()
                if on_bound is not None:
                    on_bound(self)
                log.info("policy server listening on %s (loading model)", self.endpoint)
                engine.start(loop, lambda error: load_done.done() or load_done.set_result(error))
                error = await load_done
                if error is not None:
                    self.load_error = error
                    log.error("model.load() failed:\n%s", error)
                    self._loaded.set()  # waiting connections get the traceback, then 1011
                    raise TransportError(f"{self.endpoint}: model.load() failed:\n{error}")
                self.ready = True
                self._loaded.set()
                log.info("policy server ready on %s (%s)", self.endpoint, self.describe())
                try:
                    await asyncio.Future()
                finally:
                    await self._cancel_handlers()
        finally:
            self.ready = False
            engine.stop()
            loop.set_exception_handler(previous_handler)

    def _limit_open_files(self) -> None:
        """Raise the soft open-file limit as far as the hard one allows and keep the TCP cap
        below it, so accept() never fails for want of a descriptor."""
        try:
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            want = self._tcp_limit + _FD_RESERVE
            if soft != resource.RLIM_INFINITY and soft < want:
                new = want if hard == resource.RLIM_INFINITY else min(want, hard)
                resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
                soft = new
        except (OSError, ValueError):  # pragma: no cover - not permitted: keep what we have
            return
        if soft != resource.RLIM_INFINITY and soft - _FD_RESERVE < self._tcp_limit:
            self._tcp_limit = max(1, soft - _FD_RESERVE)
            self.max_connections = min(self.max_connections, max(1, self._tcp_limit - 16))
            log.warning(
                "open-file limit is %d: serving at most %d connections (raise it with ulimit -n)",
                soft, self.max_connections,
            )

    def _connection_class(self) -> type[ServerConnection]:
        server = self

        class CountedConnection(ServerConnection):
            """Counts TCP connections (closing those beyond the cap before they cost more) and
            remembers the last data frame, so its payload can be let go (:func:`_release_frame`)."""

            admitted = False
            last_data_frame: Frame | None = None

            def process_event(self, event: Any) -> None:
                if isinstance(event, Frame) and event.opcode in _DATA_OPCODES:
                    self.last_data_frame = event
                super().process_event(event)

            def connection_made(self, transport: Any) -> None:
                server._tcp += 1
                super().connection_made(transport)
                if server._tcp > server._tcp_limit:
                    log.warning(
                        "closing a TCP connection at once: %d open, the limit is %d "
                        "(max_connections %d + %d in their handshake)",
                        server._tcp, server._tcp_limit, server.max_connections, _HANDSHAKE_BACKLOG,
                    )
                    transport.abort()

            def connection_lost(self, exc: Exception | None) -> None:
                server._tcp -= 1
                if self.admitted:
                    self.admitted = False
                    server._admitted -= 1
                super().connection_lost(exc)

        return CountedConnection

    async def _cancel_handlers(self) -> None:
        handlers = [task for task in self._handlers if not task.done()]
        for task in handlers:
            task.cancel()
        if handlers:
            await asyncio.wait(handlers)

    def run(self, on_bound: Callable[[PolicyServer], None] | None = None) -> None:
        """Serve in the foreground until SIGINT or SIGTERM (for ``arena serve``).

        Stopped while ``model.load()`` (or an inference) still runs on its thread, the process
        ends here, at once: that thread cannot be interrupted, and an interpreter shutting down
        under a thread inside a C extension (MuJoCo, torch) crashes with SIGSEGV.
        """
        serve_until_signalled(lambda: self.serve(on_bound=on_bound))
        log.info("policy server on %s stopped", self.endpoint)
        if self._engine is not None and not self._engine.join(timeout_s=2.0):
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

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
        if self._admitted >= self.max_connections:
            log.warning(
                "refusing a connection: %d connections open, max_connections is %d",
                self._admitted, self.max_connections,
            )
            return connection.respond(
                503,
                f"server at its connection limit ({self.max_connections} connections); retry "
                f"later or start it with a higher --max-connections\n",
            )
        self._admitted += 1
        connection.admitted = True  # type: ignore[attr-defined]  # CountedConnection
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
            try:
                await ws.send(Packer().pack(self.model.metadata()))
            except ConnectionClosed:
                return
            except Exception:
                await self._fail(ws, traceback.format_exc())
                return
            self._serving += 1
            try:
                await self._serve_requests(ws)
            finally:
                self._serving -= 1
        except asyncio.CancelledError:  # server shutting down (see _cancel_handlers)
            try:
                await asyncio.wait_for(ws.close(1001, "server shutting down"), _CLOSE_TIMEOUT_S)
            except (ConnectionClosed, TimeoutError):
                pass
        finally:
            self._handlers.discard(task)

    async def _serve_requests(self, ws: ServerConnection) -> None:
        engine = self._engine
        loop = self._loop
        assert engine is not None and loop is not None
        max_objects = self.max_objects
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
                job = Job(unpackb(message, max_objects=max_objects), prev_total_ms, None)
            except Exception:
                await self._fail(ws, traceback.format_exc())
                return
            finally:
                _release_frame(ws, message)
                del message  # the frame is not kept while the model runs or the client thinks
            while engine.prefers_inline() and not engine.can_run_inline():
                await engine.until_idle()  # let the queue drain, then run inline (it yields)
            if engine.can_run_inline():
                reply = engine.run_inline(job)
            else:
                job.future = loop.create_future()
                future = job.future
                engine.submit(job)
                reply = await future
                del future
            del job
            if reply.__class__ is Failure:
                await self._fail(ws, reply.text)  # type: ignore[union-attr]
                return
            try:
                await ws.send(reply)  # type: ignore[arg-type]
            except ConnectionClosed:
                return
            del reply
            prev_total_ms = (time.perf_counter() - start) * 1000.0

    async def _fail(self, ws: ServerConnection, text: str) -> None:
        log.error("error while handling a request from %s:\n%s", ws.remote_address, text)
        try:
            await ws.send(text)
            await ws.close(1011, ERROR_CLOSE_REASON)
        except ConnectionClosed:
            pass


_DATA_OPCODES = (Opcode.BINARY, Opcode.TEXT, Opcode.CONT)


def _release_frame(ws: ServerConnection, message: Any) -> None:
    """Let go of the payload of the frame that carried ``message``.

    websockets' frame parser keeps the last frame it parsed (a generator's local variable)
    until the next one arrives, so an idle connection would hold its last request, 64 MiB at
    worst, for as long as the client thinks. Only a frame whose payload *is* ``message`` is
    touched (a pipelined next request is left alone).
    """
    frame = getattr(ws, "last_data_frame", None)
    if frame is not None and frame.data is message:
        frame.data = b""
        ws.last_data_frame = None  # type: ignore[attr-defined]


def _quiet_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler, rate-limited: when accept() runs out of file descriptors,
    asyncio reports it once per pending connection and retry (a flood of tracebacks)."""
    exc = context.get("exception")
    message = context.get("message", "unhandled exception in the event loop")
    if isinstance(exc, OSError) and "accept" in message:
        log.error("%s: %s (new connections wait; open connections are served)", message, exc)
        return
    log.error("%s", message, exc_info=exc if isinstance(exc, BaseException) else None)


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
