"""arena's wire benchmarks: ``python -m benchmarks [--quick] [--only NAME] [--json PATH]``.

Each benchmark reports ratios against baselines measured in the same run (so a slow or busy
machine shifts both sides), and every number is the median of at least five repeats.

1. ``roundtrip``: one DROID-sized request (~301 KB) to a no-op model, arena's client vs
   ``openpi-client``, each against arena's server and the openpi-like double, with a bare
   websocket send/tiny-reply floor;
2. ``codec``: encode + decode of the same request, arena vs ``openpi_client.msgpack_numpy``;
3. ``throughput``: env-steps/s of ``RemoteChunkReplayPolicy`` with a synthetic env against a
   model costing 20 ms + 1 ms per batch item: dynamic batching with concurrent requests vs
   requests one after another.
"""
