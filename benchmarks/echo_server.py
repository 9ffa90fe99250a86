"""The floor of benchmark 1: a bare websockets server answering every message with 2 bytes."""

from __future__ import annotations

import asyncio
import sys

from websockets.asyncio.server import ServerConnection, serve


async def _reply(ws: ServerConnection) -> None:
    async for _ in ws:
        await ws.send(b"ok")


async def _main(port: int) -> None:
    async with serve(_reply, "127.0.0.1", port, compression=None, max_size=None) as server:
        print(f"listening on ws://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
        await asyncio.Future()


def main() -> None:
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1]) if "--port" in args else 0
    asyncio.run(_main(port))
