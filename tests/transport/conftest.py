from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from arena.transport import PolicyServer


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # websockets >= 15 honours proxy variables; the real openpi client does not pass proxy=None.
    for name in ("http_proxy", "https_proxy", "ws_proxy", "socks_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture
def start_server() -> Iterator[Callable[..., PolicyServer]]:
    """``start_server(model, **kw)`` -> a PolicyServer on 127.0.0.1:<ephemeral>, stopped after."""
    started: list[PolicyServer] = []

    def start(model: Any, **kw: Any) -> PolicyServer:
        server = PolicyServer(model, "127.0.0.1", 0, **kw).start_in_thread()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
