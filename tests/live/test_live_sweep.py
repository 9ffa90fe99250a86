"""A delay sweep from a matrix over ``execution.delay.steps``: one run per delay on the same
seeds, each compared paired with the ``d = 0`` run, in ``experiment_result.json`` and the report."""

from __future__ import annotations

from arena.testing.experiments import tiny_experiment

from live_fakes import TiledExpert


def test_matrix_delay_sweep_is_compared_with_delay_zero(run_experiment, policy_server):
    server = policy_server(TiledExpert(16))
    exp = tiny_experiment({"type": "metaworld_expert_remote", "remote_port": server.port, "open_loop_horizon": 16},
                          episodes=3, max_episode_steps=60, external_server=True, run="reach")
    exp["runs"]["reach"]["execution"] = {"mode": "live", "execute_horizon": 8, "hold": "null_action"}
    exp["matrix"] = {"runs": ["reach"], "axes": {"d": {"key": "execution.delay.steps", "values": {"d0": 0, "d4": 4, "d8": 8}}}}
    outcome = run_experiment(exp)
    assert outcome.exit_code == 0, outcome.explain()
    (sweep,) = outcome.result["delay_sweeps"]
    assert [r["run"] for r in sweep["rows"]] == ["reach.d0", "reach.d4", "reach.d8"]
    assert [r["delay"] for r in sweep["rows"]] == [0, 4, 8] and sweep["nominal"] == "reach.d0"
    assert sweep["hold"] == "null_action" and sweep["execute_horizon"] == 8
    first, *others = sweep["rows"]
    assert first["vs_nominal"] is None and first["stale_ratio"] == 0
    for row in others:
        assert row["vs_nominal"]["design"] == "paired" and row["vs_nominal"]["paired"]["seeds"] == 3
        assert "p_holm" in row["vs_nominal"]
    # 60 steps, s = 8: after the first chunk, d of every 8 steps come from the hold rule
    assert [round(r["stale_ratio"], 3) for r in others] == [round(4 * 7 / 60, 3), round((8 * 6 + 4) / 60, 3)]
    html = (outcome.output_dir / "index.html").read_text()
    assert "Success versus delay" in html and 'class="delay-plot"' in html and "reach.d8" in html
    # the report leads with the answer: the delay curve is the first section, no rate is pooled
    # over the delays, and the delays are not a suite's tasks
    first_section = html[html.index("</nav>"):].split("<h2", 1)[1]
    assert first_section.startswith(' id="delay">Success versus delay'), first_section[:200]
    assert "Overall (episode-weighted)" not in html and "no rate pooled over them" in html
    assert outcome.result["by_group"] == {} and 'id="groups"' not in html
