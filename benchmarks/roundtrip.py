"""Benchmark 1: round trip of a DROID request against a no-op model.

arena's :class:`PolicyClient` vs ``openpi_client.WebsocketClientPolicy``, each against arena's
server and the openpi-like double (every server in its own process), plus the floor: a bare
``websockets`` sync client sending the same (pre-encoded) bytes to a bare server that answers
with 2 bytes.
"""

from __future__ import annotations

import sys
from typing import Any

from openpi_client.websocket_client_policy import WebsocketClientPolicy
from websockets.sync.client import connect

from arena.testing.doubles import ServerProcess
from arena.transport import PolicyClient, packb
from benchmarks.common import droid_request, interleaved_medians, table


class _EchoProcess(ServerProcess):
    MODULES = {**ServerProcess.MODULES, "echo": "benchmarks.echo_server"}


def run(quick: bool) -> dict[str, Any]:
    request = droid_request()
    payload = packb(request)
    servers = {
        "arena server": _EchoProcess("arena", "--action-shape", "15", "8"),
        "openpi-like server": _EchoProcess("openpi-like", "--action-shape", "15", "8"),
        "bare websockets": _EchoProcess("echo"),
    }
    closers: list[Any] = []
    try:
        for server in servers.values():
            server.start()
        cases: dict[str, Any] = {}
        for label in ("arena server", "openpi-like server"):
            port = servers[label].port
            ours = PolicyClient("127.0.0.1", port)
            ours.connect()
            theirs = WebsocketClientPolicy("127.0.0.1", port)
            closers += [ours.close, theirs._ws.close]
            cases[f"arena client | {label}"] = lambda c=ours: c.infer(request)
            cases[f"openpi-client | {label}"] = lambda c=theirs: c.infer(request)
        floor = connect(f"ws://127.0.0.1:{servers['bare websockets'].port}", compression=None, max_size=None)
        closers.append(floor.close)

        def bare() -> None:
            floor.send(payload)
            floor.recv()

        cases["bare websockets send | bare websockets"] = bare
        medians = interleaved_medians(cases, iterations=60 if quick else 300, repeats=5 if quick else 7)
    finally:
        for close in closers:
            try:
                close()
            except Exception:  # noqa: BLE001
                pass
        for server in servers.values():
            server.stop()
    floor_s = medians["bare websockets send | bare websockets"]
    rows = []
    ratios = {}
    for label in ("arena server", "openpi-like server"):
        ours, theirs = medians[f"arena client | {label}"], medians[f"openpi-client | {label}"]
        ratios[label] = ours / theirs
        rows.append([label, f"{ours * 1e3:.3f}", f"{theirs * 1e3:.3f}", f"{ours / theirs:.2f}x",
                     f"{floor_s * 1e3:.3f}"])
    text = table(
        ["server (301,439 B request)", "arena client ms", "openpi-client ms", "arena / openpi",
         "bare websockets floor ms"],
        rows,
    )
    return {"name": "roundtrip", "table": text, "medians_s": medians, "ratios": ratios}


if __name__ == "__main__":  # pragma: no cover
    print(run("--quick" in sys.argv)["table"])
