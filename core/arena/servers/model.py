"""The Model protocol arena's policy server hosts.

``arena_register_servers`` registers ``model_factory(**options) -> Model``. The server calls
``load()`` before ``/readyz`` turns ready, sends ``metadata()`` to every new connection, and
answers each request with ``infer(obs)``. A model that also has ``infer_batch`` gets
concurrent requests grouped into one call.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Model(Protocol):
    def metadata(self) -> dict[str, Any]:
        """The dict sent once to every new connection (openpi: ``policy.metadata``)."""
        ...

    def load(self) -> None:
        """Load weights; runs before ``/readyz`` reports ready. May take minutes."""
        ...

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        """Answer one request: a dict of numpy arrays, strings and numbers."""
        ...
