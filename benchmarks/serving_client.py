"""One load-generating client of the serving benchmark, in its own process.

``python -m benchmarks.serving_client --port P --warmup-s W --duration-s D`` connects with
``openpi_client.WebsocketClientPolicy`` (the peer users run), sends one request, prints
``ready`` and reads a wall-clock start time ``T`` from stdin (so every client starts together),
then sends DROID requests one after another for ``W + D`` seconds and prints one JSON line: the
latency (seconds) of each request that *started* inside the measured window
``[T + W, T + W + D)``, and the count of errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--warmup-s", type=float, default=2.0)
    parser.add_argument("--duration-s", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name in ("http_proxy", "https_proxy", "ws_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        os.environ.pop(name, None)

    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    from benchmarks.common import droid_request

    request = droid_request(args.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        policy = WebsocketClientPolicy(args.host, args.port)
    policy.infer(request)  # first request on the connection: not measured
    print("ready", flush=True)
    start_at = float(sys.stdin.readline())
    begin = start_at + args.warmup_s
    end = begin + args.duration_s
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)
    latencies: list[float] = []
    errors = 0
    clock = time.perf_counter
    while True:
        now = time.time()
        if now >= end:
            break
        start = clock()
        try:
            policy.infer(request)
        except Exception as exc:  # noqa: BLE001 - counted; a benchmark reports, never hides
            errors += 1
            print(f"client error: {type(exc).__name__}: {exc}", file=sys.stderr)
            break
        if now >= begin:
            latencies.append(clock() - start)
    print(json.dumps({"latencies_s": latencies, "errors": errors}), flush=True)
    try:
        policy._ws.close()
    except Exception:  # noqa: BLE001
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
