"""``python -m benchmarks [--quick] [--only roundtrip|codec|throughput|env_workers] [--json PATH]``;
``python -m benchmarks --gpu [--smoke] [--openpi-server PATH] [--clients 1,8,...]`` (see
:mod:`benchmarks.gpu`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

TARGETS = {
    "roundtrip": "arena client <= 1.0x openpi-client latency (aim <= 0.7x)",
    "codec": "arena encode+decode >= 1.0x openpi's speed (within 10%)",
    "throughput": "batched + concurrent >= 6x one-after-another at 16 envs",
    "env_workers": "franka_kitchen with cameras: workers auto >= 8x workers 0 on a 16-core node",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer iterations (under a minute)")
    parser.add_argument("--only", action="append", choices=sorted(TARGETS), help="run only these")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    gpu = parser.add_argument_group("GPU serving benchmark (python -m benchmarks --gpu)")
    gpu.add_argument("--gpu", action="store_true", help="serve a pi0.5-DROID-sized torch model instead")
    gpu.add_argument("--smoke", action="store_true", help="toy sizes on the CPU (also the default without CUDA)")
    gpu.add_argument("--openpi-server", type=Path, default=None,
                     help="openpi's src/openpi/serving/websocket_policy_server.py, for its row of the table")
    gpu.add_argument("--clients", default=None, help="comma-separated client counts (default 1,8,32,64,128)")
    gpu.add_argument("--duration-s", type=float, default=None, help="measured seconds per row")
    gpu.add_argument("--no-e2e", action="store_true", help="skip the end-to-end franka_kitchen case")
    args = parser.parse_args(argv)
    for name in ("http_proxy", "https_proxy", "ws_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        os.environ.pop(name, None)  # openpi-client would route loopback through a proxy

    if args.gpu or args.smoke:
        from benchmarks import gpu as gpu_benchmark

        if args.openpi_server is not None and not args.openpi_server.is_file():
            parser.error(f"--openpi-server {args.openpi_server}: no such file")
        clients = tuple(int(n) for n in args.clients.split(",")) if args.clients else None
        began = time.perf_counter()
        result = gpu_benchmark.run(args.smoke, args.openpi_server, clients, args.duration_s, e2e=not args.no_e2e)
        result["seconds"] = time.perf_counter() - began
        print("\n" + result["table"] + f"\n\ntotal {result['seconds']:.0f} s", flush=True)
        if args.json is not None:
            args.json.write_text(json.dumps([result], indent=2, default=str))
        return 0

    from benchmarks import codec, env_workers, roundtrip, throughput

    modules = {"roundtrip": roundtrip, "codec": codec, "throughput": throughput, "env_workers": env_workers}
    results = []
    began = time.perf_counter()
    for name in args.only or list(modules):
        start = time.perf_counter()
        result = modules[name].run(args.quick)
        result["seconds"] = time.perf_counter() - start
        results.append(result)
        print(f"\n## {name} (target: {TARGETS[name]}; {result['seconds']:.0f} s)\n")
        print(result["table"], flush=True)
    print(f"\ntotal {time.perf_counter() - began:.0f} s; median call, median of >= 5 repeats; cpus {os.cpu_count()}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
