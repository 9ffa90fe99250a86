"""A generic openpi-protocol double: arena's policy server around a validator and a reply factory.

Model-specific doubles (``arena_openpi.testing``, ``arena_cosmos.testing``, …) build on it:
the validator checks every key, dtype and shape the real server reads (raising makes the
server answer like a real one: a traceback text frame, then close 1011), and the reply
factory answers like the real model.

For fault and benchmark tests against a real server *process*, ``python -m
arena.testing.doubles`` serves a :class:`ChunkModel` (or a registered model wrapped in
:class:`FaultInjector`) with arena's server and prints ``listening on ws://HOST:PORT`` once
bound; :mod:`arena.testing.openpi_like` does the same with an openpi-like server.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from arena.transport.policy_server import PolicyServer, serve_until_signalled

Validator = Callable[[dict[str, Any]], None]
ReplyFactory = Callable[[dict[str, Any]], dict[str, Any]]


class RecordingModel:
    """A Model that validates each request, records it, and answers with ``reply_factory``.

    ``infer_delay_s`` makes every inference block that long (first call: ``first_delay_s``),
    ``fail_on_request`` raises on that 1-based request number.
    """

    def __init__(
        self,
        reply_factory: ReplyFactory,
        validator: Validator | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        infer_delay_s: float = 0.0,
        first_delay_s: float | None = None,
        fail_on_request: int | None = None,
    ) -> None:
        self.reply_factory = reply_factory
        self.validator = validator
        self._metadata = metadata or {}
        self.infer_delay_s = infer_delay_s
        self.first_delay_s = first_delay_s
        self.fail_on_request = fail_on_request
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def metadata(self) -> dict[str, Any]:
        return dict(self._metadata)

    def load(self) -> None:
        pass

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(obs)
            n = len(self.requests)
        delay = self.first_delay_s if (n == 1 and self.first_delay_s is not None) else self.infer_delay_s
        if delay:
            time.sleep(delay)
        if self.fail_on_request is not None and n == self.fail_on_request:
            raise RuntimeError(f"injected failure on request {n}")
        if self.validator is not None:
            self.validator(obs)
        return self.reply_factory(obs)


class OpenPIDouble:
    """An openpi-protocol server on 127.0.0.1 (ephemeral port) in a background thread.

    Use as a context manager; ``host``/``port`` tell where it listens and ``model.requests``
    what it received.
    """

    def __init__(self, model: RecordingModel, *, host: str = "127.0.0.1", port: int = 0, **server_kwargs: Any) -> None:
        self.model = model
        self.server = PolicyServer(model, host=host, port=port, **server_kwargs)

    def __enter__(self) -> OpenPIDouble:
        self.server.start_in_thread()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    @property
    def host(self) -> str:
        return self.server.host

    @property
    def port(self) -> int:
        return self.server.port


class FaultInjector:
    """Wraps a Model: blocks the first (``first_delay_s``) or every (``delay_s``) inference,
    hangs for good from request ``hang_from_request`` on (a hung model whose server still
    answers handshakes and health checks, as long as the server runs it off the event loop:
    ``--inline-below-ms 0``), and kills the whole process with
    ``os._exit(exit_code)`` on request ``exit_on_request`` (1-based, counted per process) —
    only once across restarts when ``exit_marker`` is given (the file is created just before
    exiting)."""

    def __init__(
        self,
        model: Any,
        *,
        first_delay_s: float = 0.0,
        delay_s: float = 0.0,
        exit_on_request: int | None = None,
        exit_marker: str | Path | None = None,
        exit_code: int = 137,
        hang_from_request: int | None = None,
    ) -> None:
        self.model = model
        self.hang_from_request = hang_from_request
        self.first_delay_s = first_delay_s
        self.delay_s = delay_s
        self.exit_on_request = exit_on_request
        self.exit_marker = Path(exit_marker) if exit_marker else None
        self.exit_code = exit_code
        self.requests = 0
        self._lock = threading.Lock()

    def metadata(self) -> dict[str, Any]:
        return self.model.metadata() if hasattr(self.model, "metadata") else {}

    def load(self) -> None:
        if hasattr(self.model, "load"):
            self.model.load()

    def _before(self, count: int) -> None:
        with self._lock:
            self.requests += count
            n = self.requests
        if self.exit_on_request is not None and n >= self.exit_on_request:
            if self.exit_marker is None or not self.exit_marker.exists():
                if self.exit_marker is not None:
                    self.exit_marker.touch()
                os._exit(self.exit_code)
        if self.hang_from_request is not None and n >= self.hang_from_request:
            threading.Event().wait()  # never answers
        delay = self.first_delay_s if n == count and self.first_delay_s else self.delay_s
        if delay:
            time.sleep(delay)

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        self._before(1)
        return self.model.infer(obs)

    def __getattr__(self, name: str) -> Any:  # infer_batch only if the inner model has it
        if name == "infer_batch" and hasattr(self.model, "infer_batch"):
            def infer_batch(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
                self._before(len(batch))
                return self.model.infer_batch(batch)

            return infer_batch
        raise AttributeError(name)


class ChunkModel:
    """A model answering every request with a constant action chunk ``actions (H, A)``.

    Cost model (for batching benchmarks): ``infer`` sleeps ``cost_ms + per_item_ms`` and
    ``infer_batch`` of n requests sleeps ``cost_ms + n * per_item_ms`` (milliseconds).
    """

    def __init__(
        self,
        action_shape: tuple[int, int] = (15, 8),
        dtype: str = "float32",
        *,
        cost_ms: float = 0.0,
        per_item_ms: float = 0.0,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.actions = np.zeros(action_shape, dtype=np.dtype(dtype))
        self.cost_ms = cost_ms
        self.per_item_ms = per_item_ms
        self._metadata = metadata or {}

    def metadata(self) -> dict[str, Any]:
        return dict(self._metadata)

    def load(self) -> None:
        pass

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        if self.cost_ms or self.per_item_ms:
            time.sleep((self.cost_ms + self.per_item_ms) / 1000.0)
        return {"actions": self.actions}

    def infer_batch(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.cost_ms or self.per_item_ms:
            time.sleep((self.cost_ms + len(batch) * self.per_item_ms) / 1000.0)
        return [{"actions": self.actions} for _ in batch]


def chunk_model_arguments(description: str) -> argparse.ArgumentParser:
    """The command-line knobs shared by ``arena.testing.doubles`` and ``arena.testing.openpi_like``."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (printed once bound)")
    p.add_argument("--model", default=None, help="a registered server model instead of the constant chunk")
    p.add_argument("--action-shape", type=int, nargs=2, default=(15, 8), metavar=("H", "A"))
    p.add_argument("--dtype", default="float32", help="dtype of the constant chunk")
    p.add_argument("--cost-ms", type=float, default=0.0, help="ms every inference (batch) costs")
    p.add_argument("--per-item-ms", type=float, default=0.0, help="ms each request of a batch adds")
    p.add_argument("--first-delay-s", type=float, default=0.0, help="the first inference blocks this long")
    p.add_argument("--delay-s", type=float, default=0.0, help="every inference blocks this long")
    p.add_argument("--exit-on-request", type=int, default=None, help="os._exit on this request (1-based)")
    p.add_argument("--exit-marker", default=None, help="exit only if this file does not exist (creates it)")
    p.add_argument("--hang-from-request", type=int, default=None, help="this request and later ones never answer")
    return p


def chunk_model_from_args(args: argparse.Namespace) -> Any:
    if args.model:
        from arena.plugins import get_registry

        model: Any = get_registry().servers[args.model]()
    else:
        model = ChunkModel(
            tuple(args.action_shape), args.dtype, cost_ms=args.cost_ms, per_item_ms=args.per_item_ms
        )
    if args.first_delay_s or args.delay_s or args.exit_on_request is not None or args.hang_from_request is not None:
        model = FaultInjector(
            model,
            first_delay_s=args.first_delay_s,
            delay_s=args.delay_s,
            exit_on_request=args.exit_on_request,
            exit_marker=args.exit_marker,
            hang_from_request=args.hang_from_request,
        )
    return model


def main(argv: list[str] | None = None) -> None:
    """``python -m arena.testing.doubles``: arena's policy server around a ChunkModel."""
    parser = chunk_model_arguments("arena policy server double (inference off the event loop)")
    parser.add_argument("--max-batch-size", type=int, default=None,
                        help="requests per infer_batch call (default: the server's; 1 turns batching off)")
    parser.add_argument("--max-wait-ms", type=float, default=2.0)
    parser.add_argument("--max-connections", type=int, default=None)
    parser.add_argument("--handshake-timeout-s", type=float, default=None)
    parser.add_argument("--ping-interval-s", type=float, default=None)
    parser.add_argument("--inline-below-ms", type=float, default=None)
    parser.add_argument("--api-key-env", default=None, help="NAME of the variable holding the API key")
    args = parser.parse_args(argv)
    api_key = os.environ[args.api_key_env] if args.api_key_env else None
    options = {
        name: value
        for name in ("max_connections", "handshake_timeout_s", "ping_interval_s", "inline_below_ms")
        if (value := getattr(args, name)) is not None
    }
    server = PolicyServer(
        chunk_model_from_args(args), args.host, args.port, api_key=api_key,
        max_batch_size=args.max_batch_size, max_wait_ms=args.max_wait_ms, **options,
    )

    serve_until_signalled(
        lambda: server.serve(on_bound=lambda s: print(f"listening on {s.endpoint}", flush=True))
    )


if __name__ == "__main__":
    main()


class ServerProcess:
    """A double in its own process: ``ServerProcess("arena" | "openpi-like", *cli_args)``, or
    any module whose ``main()`` serves and prints ``listening on SCHEME://HOST:PORT`` (a
    plugin's double, e.g. ``ServerProcess("arena_gr00t.testing")``).

    A context manager; ``port`` is read from the ``listening on`` line. ``kill()`` sends
    SIGKILL (a crash), ``stop()`` SIGTERM then SIGKILL. The child gets a parent-death signal.
    """

    MODULES = {"arena": "arena.testing.doubles", "openpi-like": "arena.testing.openpi_like"}

    def __init__(self, kind: str, *args: str, host: str = "127.0.0.1", port: int = 0,
                 start_timeout_s: float = 60.0, log_path: str | Path | None = None) -> None:
        self.kind = kind
        self.host = host
        entry = f"from {self.MODULES.get(kind, kind)} import main; main()"  # -c: no runpy double import
        self.argv = [sys.executable, "-c", entry, "--host", host, "--port", str(port), *args]
        self.start_timeout_s = start_timeout_s
        self.log_path = Path(log_path) if log_path else None
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ServerProcess:
        from arena.processes import _die_with_parent

        self.proc = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, stderr=None if self.log_path is None else open(self.log_path, "ab"),
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + self.start_timeout_s
        os.set_blocking(self.proc.stdout.fileno(), False)
        buffer = b""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} double exited with code {self.proc.returncode}: {self.argv}")
            chunk = self.proc.stdout.read()
            if chunk:
                buffer += chunk
                for line in buffer.decode(errors="replace").splitlines():
                    if line.startswith("listening on ") and "://" in line:
                        self.port = int(line.rsplit(":", 1)[1])
                        return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"{self.kind} double did not bind within {self.start_timeout_s} s")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
