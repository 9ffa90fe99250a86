"""How many episodes ``rollout_limit.stop_when`` saves: ``python -m benchmarks.early_stopping [--json PATH]``.

Simulates runs (numpy, fixed seed 0, 2000 replicates, the runs' own grid) of a policy with a
known success rate against a stopping rule, with a planned ``num_episodes``, and prints the
mean / median / 90th-percentile episodes used and how often each decision was taken. The
docs/statistics.md ("Early stopping") quotes the first case (a 0.95-rate policy against a 0.80
threshold, 200 episodes planned). Not part of ``python -m benchmarks`` (that one times wires).
"""

from __future__ import annotations

import argparse
import json

from arena.outputs.stopping import simulate_stopping

CASES = [
    (0.95, {"threshold": 0.80}, 200),
    (0.85, {"threshold": 0.80}, 200),
    (0.50, {"threshold": 0.80}, 200),
    (0.95, {"half_width": 0.05}, 500),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--replicates", type=int, default=2000)
    args = parser.parse_args(argv)
    results = []
    for rate, rule, planned in CASES:
        r = simulate_stopping(rate, rule, planned, replicates=args.replicates, seed=0)
        results.append(r)
        decided = ", ".join(f"{k} {v:.1%}" for k, v in r["decisions"].items() if v)
        print(
            f"rate {rate:.2f}, stop_when {rule}, {planned} planned: mean {r['mean_episodes']:.1f} episodes "
            f"(median {r['median_episodes']:.0f}, p90 {r['p90_episodes']:.0f}), saved {r['saved_fraction']:.1%}; {decided}"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
