"""A generic openpi-protocol double: arena's policy server around a validator and a reply factory.

Model-specific doubles (``arena_openpi.testing``, ``arena_cosmos.testing``, …) build on it:
the validator checks every key, dtype and shape the real server reads (raising makes the
server answer like a real one: a traceback text frame, then close 1011), and the reply
factory answers like the real model.

For fault and benchmark tests against a real server *process*, ``python -m
arena.testing.doubles`` serves a :class:`ChunkModel` (or a registered model), wrapped in
:class:`FaultInjector` when a fault knob is given (:mod:`arena.testing.faults`), with arena's
server and prints ``listening on ws://HOST:PORT`` once bound; :mod:`arena.testing.openpi_like`
does the same with an openpi-like server.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from arena.testing.faults import Fault, FaultKnobs, add_fault_arguments, fault_options
from arena.transport.policy_server import PolicyServer, serve_until_signalled

Validator = Callable[[dict[str, Any]], None]
ReplyFactory = Callable[[dict[str, Any]], dict[str, Any]]


class RecordingModel(FaultKnobs):
    """A Model that validates each request, records it, and answers with ``reply_factory``.

    Fault knobs (:mod:`arena.testing.faults`): ``infer_delay_s`` makes every inference block
    that long (first call: ``first_delay_s``), ``fail_on_request`` raises on that 1-based
    request number (the server answers a traceback). For hangs and restarts, serve a model
    wrapped in :class:`FaultInjector` in a :class:`ServerProcess`.
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
        self.init_faults(infer_delay_s=infer_delay_s, first_delay_s=first_delay_s, fail_on_request=fail_on_request)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def metadata(self) -> dict[str, Any]:
        return dict(self._metadata)

    def load(self) -> None:
        pass

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(obs)
        if self.before_inference() is not None:  # set by hand: the constructor takes neither
            raise NotImplementedError("RecordingModel cannot hang or restart: serve FaultInjector in a ServerProcess")
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


class FaultInjector(FaultKnobs):
    """Wraps a Model in the fault knobs of :mod:`arena.testing.faults`, for a double in its own
    process (``python -m arena.testing.doubles`` or ``arena.testing.openpi_like``).

    Inferences are counted per process (a batch of ``k`` counts ``k``). ``never_reply`` /
    ``hang_from_request``: the model hangs for good (its server still answers handshakes and
    health checks as long as it runs inference off the event loop: ``--inline-below-ms 0``);
    ``restart_on_request``: the whole process exits with ``os._exit(exit_code)``, a crash its
    supervisor restarts (the local backend's server task does); ``metadata`` replaces the
    model's metadata (a server with another identity) — only once across restarts when
    ``exit_marker`` is given (the file is created just before exiting); ``fail_on_request``:
    the inference raises (the server answers a traceback); ``first_delay_s`` /
    ``infer_delay_s``: it blocks first.
    """

    def __init__(
        self,
        model: Any,
        *,
        exit_marker: str | Path | None = None,
        exit_code: int = 137,
        metadata: dict[str, Any] | None = None,
        **knobs: Any,
    ) -> None:
        self.model = model
        self._metadata = metadata
        self.init_faults(**knobs)
        self.exit_marker = Path(exit_marker) if exit_marker else None
        self.exit_code = exit_code

    def metadata(self) -> dict[str, Any]:
        """``metadata`` when given (the double plays another server), else the model's."""
        if self._metadata is not None:
            return dict(self._metadata)
        return self.model.metadata() if hasattr(self.model, "metadata") else {}

    def load(self) -> None:
        if hasattr(self.model, "load"):
            self.model.load()

    @property
    def requests(self) -> int:
        """Inferences received by this process."""
        return self.inferences

    def restart_allowed(self) -> bool:
        """Not once ``exit_marker`` exists: the process restarted once already."""
        return self.exit_marker is None or not self.exit_marker.exists()

    def _before(self, count: int) -> None:
        fault = self.before_inference(count)
        if fault is Fault.RESTART:
            if self.exit_marker is not None:
                self.exit_marker.touch()
            os._exit(self.exit_code)
        if fault is Fault.HANG:
            threading.Event().wait()  # never answers

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
    add_fault_arguments(p)  # --never-reply, --hang-from-request, --restart-on-request, ...
    p.add_argument("--delay-s", dest="infer_delay_s", type=float, default=argparse.SUPPRESS, help="= --infer-delay-s")
    p.add_argument("--exit-on-request", dest="restart_on_request", type=int, default=argparse.SUPPRESS,
                   help="= --restart-on-request: the process exits (os._exit) on this request, for its supervisor to restart it")
    p.add_argument("--exit-marker", default=None, help="restart only if this file does not exist (creates it)")
    p.add_argument("--metadata", default=None, type=json.loads,
                   help="JSON object the server sends as its metadata, replacing the model's (a server's identity)")
    return p


def chunk_model_from_args(args: argparse.Namespace) -> Any:
    if args.model:
        from arena.plugins import get_registry

        model: Any = get_registry().servers[args.model]()
    else:
        model = ChunkModel(
            tuple(args.action_shape), args.dtype, cost_ms=args.cost_ms, per_item_ms=args.per_item_ms
        )
    knobs = fault_options(args)
    if any(value not in (None, False, 0.0) for value in knobs.values()) or args.metadata is not None:
        model = FaultInjector(model, exit_marker=args.exit_marker, metadata=args.metadata, **knobs)
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
