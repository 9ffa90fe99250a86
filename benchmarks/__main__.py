"""``python -m benchmarks [--quick] [--only roundtrip|codec|throughput|env_workers] [--json PATH]``."""

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
    args = parser.parse_args(argv)
    for name in ("http_proxy", "https_proxy", "ws_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        os.environ.pop(name, None)  # openpi-client would route loopback through a proxy

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
