"""``arena plan-episodes`` and ``rollout_limit.detect``: episodes needed, checked by simulation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from arena.cli import app
from arena.results.difference_stats import mcnemar_exact
from arena.results.sample_size import detect_warning, episodes_paired, episodes_unpaired
from arena.results.difference_stats import newcombe_difference


def test_formulas_as_written_in_their_sources():
    # Fleiss, Levin & Paik 2003 eq. 4.14 evaluated by hand for 0.25 vs 0.40 (alpha 0.05, power 0.8)
    za, zb, p1, p2 = 1.959963985, 0.841621234, 0.25, 0.40
    pbar = (p1 + p2) / 2
    by_hand = (za * math.sqrt(2 * pbar * (1 - pbar)) + zb * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))) ** 2 / 0.15**2
    assert episodes_unpaired(0.25, 0.15) == math.ceil(by_hand) == 152
    # Connor 1987 eq. 3 by hand: psi 0.1, delta 0.05
    by_hand = (za * math.sqrt(0.1) + zb * math.sqrt(0.1 - 0.05**2)) ** 2 / 0.05**2
    assert episodes_paired(0.05, 0.1) == math.ceil(by_hand) == 312
    assert episodes_unpaired(0.95, 0.1) == episodes_unpaired(0.95, -0.1)  # 1.05 leaves [0, 1]: the other side
    with pytest.raises(ValueError):
        episodes_paired(0.2, 0.1)


def test_the_planned_episodes_give_the_power_asked_for_by_simulation():
    rng = np.random.default_rng(5)
    n = episodes_unpaired(0.5, 0.2)  # 93 per run
    reps = 1500
    ka, kb = rng.binomial(n, 0.5, reps), rng.binomial(n, 0.7, reps)
    hits = sum(newcombe_difference(int(b), n, int(a), n)[1] > 0 for a, b in zip(ka, kb))
    assert abs(hits / reps - 0.8) < 0.05
    m = episodes_paired(0.1, 0.2)  # psi = 0.2 discordant: 15 % of episodes only B solves, 5 % only A
    cells = rng.multinomial(m, [0.15, 0.05, 0.8], reps)
    power = np.mean([mcnemar_exact(int(a), int(b)) < 0.05 for b, a, _ in cells])
    assert 0.7 < power < 0.9  # McNemar's exact test is a little conservative at this n


def test_plan_episodes_prints_both_designs_and_the_saving(tmp_path):
    result = CliRunner().invoke(app, ["plan-episodes", "--baseline", "0.6", "--detect", "0.05", "--paired",
                                      "--discordant", "0.1"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "paired: 312 episodes per run" in result.output and "unpaired runs would need 1471" in result.output
    assert "early stopping" in result.output and "seed 0" in result.output
    as_json = json.loads(CliRunner().invoke(app, ["plan-episodes", "--baseline", "0.6", "--detect", "0.05", "--json"]).output)
    assert as_json["episodes_per_run"] == 1471 and as_json["early_stopping"]["max_episodes"] == 1471
    refused = CliRunner().invoke(app, ["plan-episodes", "--baseline", "0.6", "--detect", "0.05", "--paired"])
    assert refused.exit_code == 2 and "--discordant" in refused.output


def test_validate_warns_when_num_episodes_cannot_resolve_the_declared_difference(tmp_path):
    assert detect_warning(400, 0.1) is None and "388 episodes each" in detect_warning(50, 0.1)
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump({"runs": {"r": {
        "environment": {"type": "metaworld", "task": "reach-v3"}, "policy": {"type": "zero_action"},
        "rollout_limit": {"num_episodes": 50, "detect": 0.1}}}}))
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 0 and "run r: rollout_limit.detect=0.1: 50 episode(s) per run cannot resolve" in result.output
