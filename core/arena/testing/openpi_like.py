"""A double that behaves like openpi's own policy server, event-loop blocking included.

openpi's ``WebsocketPolicyServer`` (``reference/protocols.md`` sections 2.1-2.8) calls the
policy's synchronous ``infer`` *inside* its asyncio handler, so while one inference runs the
event loop is frozen: no pings are answered, no handshakes completed, no other connection
served (openpi issue 717). arena's own server does not do that; this double does, so clients
can be tested against the server users actually run.

What it reproduces:

* ``compression=None``, ``max_size=None`` (no message limit; openpi issue 1043), websockets'
  default keepalive (ping every 20 s, 20 s timeout);
* ``GET /healthz`` -> ``200 OK\\n``; any other plain HTTP request -> 426;
* one binary metadata frame on connect, then strictly one request, one reply; dict replies get
  ``server_timing = {"infer_ms", "prev_total_ms"}`` (the latter from the second request on);
* on any exception: one **text** frame with the traceback, then close 1011 with reason
  ``"Internal server error. Traceback included in previous frame."``; the process keeps serving.

Knobs (constructor or command line): a blocking first/each inference, a failing request number,
and dropping the TCP connection without a close frame on a given request.

Run standalone (prints ``listening on ws://HOST:PORT`` once bound)::

    python -m arena.testing.openpi_like --port 0 --action-shape 15 8 --first-delay-s 60
"""

from __future__ import annotations

import asyncio
import http
import sys
import threading
import time
import traceback
from typing import Any

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from arena.transport.codec import Packer, unpackb
from arena.transport.policy_server import serve_until_signalled

__all__ = ["OpenPILikeServer", "main"]

ERROR_CLOSE_REASON = "Internal server error. Traceback included in previous frame."


class OpenPILikeServer:
    """Serve ``model`` (``metadata()``, ``infer(obs)``) the way openpi's server does.

    Args:
        model: any object with ``infer(obs) -> dict`` and optionally ``metadata() -> dict``.
        host, port: where to listen; port 0 picks a free one (read :attr:`port` once bound).
        drop_tcp_on_request: 1-based request number on which the TCP connection is cut
            without a close frame (no reply is sent).
    """

    def __init__(
        self,
        model: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        drop_tcp_on_request: int | None = None,
    ) -> None:
        self.model = model
        self.host = host
        self.port = port
        self.drop_tcp_on_request = drop_tcp_on_request
        self.requests = 0
        self._stop: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._bound = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"ws://{self.host}:{self.port}"

    async def serve(self, on_bound: Any = None) -> None:
        """Serve until :meth:`stop` (or cancellation)."""
        self._loop = asyncio.get_running_loop()
        self._stop = self._loop.create_future()
        async with serve(
            self._handle,
            self.host,
            self.port,
            compression=None,
            max_size=None,
            process_request=_healthz,
        ) as server:
            self.port = server.sockets[0].getsockname()[1]
            self._bound.set()
            if on_bound is not None:
                on_bound(self)
            await self._stop

    async def _handle(self, ws: ServerConnection) -> None:
        packer = Packer()
        metadata = self.model.metadata() if hasattr(self.model, "metadata") else {}
        await ws.send(packer.pack(metadata))
        prev_total_ms: float | None = None
        while True:
            try:
                start = time.perf_counter()
                message = await ws.recv()
                self.requests += 1
                if self.drop_tcp_on_request is not None and self.requests == self.drop_tcp_on_request:
                    ws.transport.abort()  # RST/FIN without a WebSocket close frame
                    return
                if isinstance(message, str):
                    raise TypeError("a bytes-like object is required, not 'str'")
                obs = unpackb(message)
                infer_start = time.perf_counter()
                result = self.model.infer(obs)  # on the event loop, like openpi
                infer_ms = (time.perf_counter() - infer_start) * 1000.0
                timing = {"infer_ms": infer_ms}
                if prev_total_ms is not None:
                    timing["prev_total_ms"] = prev_total_ms
                result["server_timing"] = timing  # a non-dict result fails here, as in openpi
                await ws.send(packer.pack(result))
                prev_total_ms = (time.perf_counter() - start) * 1000.0
            except ConnectionClosed:
                return
            except Exception:
                try:
                    await ws.send(traceback.format_exc())
                    await ws.close(1011, ERROR_CLOSE_REASON)
                except ConnectionClosed:
                    pass
                return

    # ---- background-thread helpers (tests) -------------------------------------------------

    def start_in_thread(self) -> OpenPILikeServer:
        """Serve on a daemon thread; return once bound."""
        self._thread = threading.Thread(target=lambda: asyncio.run(self.serve()), daemon=True)
        self._thread.start()
        if not self._bound.wait(30):
            raise RuntimeError("openpi-like server did not bind within 30 s")
        return self

    def stop(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(lambda: stop.done() or stop.set_result(None))
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> OpenPILikeServer:
        return self.start_in_thread()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _healthz(connection: ServerConnection, request: Request) -> Response | None:
    if request.path == "/healthz":
        return connection.respond(http.HTTPStatus.OK, "OK\n")
    return None


def main(argv: list[str] | None = None) -> None:
    """Command line: serve a :class:`arena.testing.doubles.ChunkModel` until SIGTERM/SIGINT."""
    from arena.testing.doubles import chunk_model_arguments, chunk_model_from_args

    parser = chunk_model_arguments("openpi-like policy server double (inference on the event loop)")
    parser.add_argument("--drop-tcp-on-request", type=int, default=None,
                        help="cut the TCP connection without a close frame on this request (1-based)")
    args = parser.parse_args(argv)
    server = OpenPILikeServer(
        chunk_model_from_args(args), args.host, args.port, drop_tcp_on_request=args.drop_tcp_on_request
    )

    serve_until_signalled(
        lambda: server.serve(on_bound=lambda s: print(f"listening on {s.endpoint}", flush=True))
    )
    sys.exit(0)


if __name__ == "__main__":
    main()
