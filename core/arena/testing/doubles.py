"""A generic openpi-protocol double: arena's policy server around a validator and a reply factory.

Model-specific doubles (``arena_openpi.testing``, ``arena_cosmos.testing``, …) build on it:
the validator checks every key, dtype and shape the real server reads (raising makes the
server answer like a real one: a traceback text frame, then close 1011), and the reply
factory answers like the real model.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from arena.transport.server import PolicyServer

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
