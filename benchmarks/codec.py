"""Benchmark 2: codec encode + decode of a DROID request, arena vs openpi_client.msgpack_numpy."""

from __future__ import annotations

from typing import Any

from openpi_client import msgpack_numpy as openpi

from arena.transport.codec import Packer, unpackb
from benchmarks.common import droid_request, interleaved_medians, table


def run(quick: bool) -> dict[str, Any]:
    request = droid_request()
    packer = Packer()
    arena_bytes = packer.pack(request)
    assert arena_bytes == openpi.packb(request), "codec is no longer byte-compatible"
    cases = {
        "arena encode+decode": lambda: unpackb(packer.pack(request)),
        "openpi encode+decode": lambda: openpi.unpackb(openpi.packb(request)),
        "arena encode": lambda: packer.pack(request),
        "openpi encode": lambda: openpi.packb(request),
        "arena decode": lambda: unpackb(arena_bytes),
        "openpi decode": lambda: openpi.unpackb(arena_bytes),
    }
    medians = interleaved_medians(cases, iterations=100 if quick else 400, repeats=5 if quick else 9)
    rows = []
    for what in ("encode+decode", "encode", "decode"):
        ours, theirs = medians[f"arena {what}"], medians[f"openpi {what}"]
        rows.append([what, f"{ours * 1e6:.1f}", f"{theirs * 1e6:.1f}", f"{theirs / ours:.2f}x"])
    text = table(["DROID request (301,439 B)", "arena µs", "openpi µs", "speed vs openpi"], rows)
    return {"name": "codec", "table": text, "medians_s": medians,
            "speedup": medians["openpi encode+decode"] / medians["arena encode+decode"]}
