"""Test helpers: vla-eval's real server code serving the dummy model, in or out of process.

* :func:`served` -- ``with served(**options) as (model, port)``: a
  :class:`~arena_vla_eval.dummy.DummyModelServer` behind vla-eval's ``serve_async`` on
  127.0.0.1, in a thread of this process (tests read what the model saw);
* :func:`main` -- the same server as a process for :class:`arena.testing.doubles.ServerProcess`
  (``ServerProcess("arena_vla_eval.testing", "--args.chunk_size=4", port=P)``): it takes
  ``--host``, ``--port`` and the model's ``--args.KEY=VALUE`` and prints ``listening on
  ws://HOST:PORT`` once bound, so a test can kill it and start it again on the same port.

Both need ``vla-eval`` (the plugin's ``test`` extra).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["main", "served"]


@contextmanager
def served(**options: Any) -> Iterator[tuple[Any, int]]:
    """``(model, port)``: a dummy model behind vla-eval's ``serve_async``, stopped on exit."""
    import anyio.from_thread
    from vla_eval.model_servers.serve import serve_async

    from arena_vla_eval.dummy import DummyModelServer

    model = DummyModelServer(**options)
    with anyio.from_thread.start_blocking_portal() as portal:
        future, port = portal.start_task(serve_async, model, "127.0.0.1", 0)
        try:
            yield model, port
        finally:
            future.cancel()


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main(argv: list[str] | None = None) -> None:
    """``--host H --port P [--args.KEY=VALUE ...]``: serve until killed."""
    import anyio
    from vla_eval.model_servers.serve import serve_async

    from arena_vla_eval.dummy import DummyModelServer

    parser = argparse.ArgumentParser(description="vla-eval's serve_async with arena's dummy model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    known, rest = parser.parse_known_args(argv)
    options = {}
    for item in rest:
        key, sep, value = item.removeprefix("--args.").partition("=")
        if not item.startswith("--args.") or not sep:
            parser.error(f"unknown argument {item!r} (expected --args.KEY=VALUE)")
        options[key] = _value(value)
    model = DummyModelServer(**options)

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            port = await tg.start(serve_async, model, known.host, known.port)
            print(f"listening on ws://{known.host}:{port}", flush=True)

    anyio.run(run)
