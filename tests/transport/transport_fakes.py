"""Small models and raw peers for the transport tests (127.0.0.1, ephemeral ports only)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any, Awaitable, Callable

import numpy as np
from websockets.asyncio.server import ServerConnection, serve

from arena.transport import packb


class EchoModel:
    """Answers ``{"actions": obs["state"] * 2}``; optional sleep per call and load gate."""

    def __init__(
        self,
        *,
        infer_sleep_s: float = 0.0,
        load_gate: threading.Event | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.infer_sleep_s = infer_sleep_s
        self.load_gate = load_gate
        self._metadata = metadata if metadata is not None else {"reset_pose": [0.0, -1.5, 1.5]}
        self.calls = 0

    def metadata(self) -> dict[str, Any]:
        return self._metadata

    def load(self) -> None:
        if self.load_gate is not None:
            assert self.load_gate.wait(30), "test never released load()"

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        if self.infer_sleep_s:
            time.sleep(self.infer_sleep_s)
        return {"actions": np.asarray(obs["state"]) * 2}


class FailingModel(EchoModel):
    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        if obs.get("fail"):
            raise RuntimeError("model exploded on purpose")
        return super().infer(obs)


class BatchModel(EchoModel):
    """Has ``infer_batch``; records every batch size it saw."""

    def __init__(self) -> None:
        super().__init__()
        self.batch_sizes: list[int] = []

    def infer_batch(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.batch_sizes.append(len(batch))
        time.sleep(0.05)
        return [{"actions": np.asarray(obs["state"]) * 2, "batch": len(batch)} for obs in batch]


def free_port() -> int:
    """A port that nothing listens on (bound then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RawServer:
    """A bare websockets server on a background loop, for peers arena's server would not be:
    one that blocks its event loop, one that sends text acknowledgements."""

    def __init__(self, handler: Callable[[ServerConnection], Awaitable[None]], *, port: int = 0, **kw: Any) -> None:
        self.handler = handler
        self.kw = kw
        self.port = port
        self._bound = threading.Event()
        self._stop: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = self._loop.create_future()
        async with serve(self.handler, "127.0.0.1", self.port, compression=None, **self.kw) as server:
            self.port = server.sockets[0].getsockname()[1]
            self._bound.set()
            await self._stop

    def __enter__(self) -> RawServer:
        self._thread.start()
        assert self._bound.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set_result, None)
        self._thread.join(10)


async def send_metadata(ws: ServerConnection) -> None:
    await ws.send(packb({}))


class GarbageTcpServer:
    """Answers any connection with bytes that are not HTTP (issue openpi #579)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                try:
                    conn.recv(4096)
                    conn.sendall(b"\x00garbage\r\n\r\n")
                except OSError:
                    pass

    def __enter__(self) -> GarbageTcpServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        # shutdown() wakes the thread blocked in accept(); close() alone would leave that
        # accept holding the listening socket, still answering garbage on the port (a later
        # test's server restarting on that port number then met it).
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._thread.join(5)
        self.sock.close()


class BatchSizeModel:
    """``arena serve transport_fakes:BatchSizeModel``: replies with the size of the batch each
    request was inferred in (``{"batch": n}``); every batch takes 50 ms."""

    def metadata(self) -> dict[str, Any]:
        return {}

    def load(self) -> None:
        pass

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        return {"batch": 0}

    def infer_batch(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        time.sleep(0.05)
        return [{"batch": len(batch)} for _ in batch]
