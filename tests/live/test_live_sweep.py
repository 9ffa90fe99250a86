"""A delay sweep from a matrix over ``execution.delay.steps``: one run per delay on the same
seeds, each compared paired with the ``d = 0`` run, in ``experiment_result.json`` and the report."""

from __future__ import annotations

import html as html_lib
import json
import re
import shutil
import subprocess

from arena.testing.experiments import tiny_experiment

from live_fakes import TiledExpert


def test_matrix_delay_sweep_is_compared_with_delay_zero(run_experiment, policy_server):
    server = policy_server(TiledExpert(16))
    exp = tiny_experiment({"type": "metaworld_expert_remote", "remote_port": server.port, "open_loop_horizon": 16},
                          episodes=3, max_episode_steps=60, external_server=True, run="reach")
    exp["runs"]["sync"] = {**exp["runs"]["reach"]}  # the same run waiting for every chunk: the baseline
    exp["runs"]["reach"]["execution"] = {"mode": "live", "execute_horizon": 8, "hold": "null_action"}
    exp["matrix"] = {"runs": ["reach"], "axes": {"d": {"key": "execution.delay.steps", "values": {"d0": 0, "d4": 4, "d8": 8}}}}
    outcome = run_experiment(exp)
    assert outcome.exit_code == 0, outcome.explain()
    (sweep,) = outcome.result["delay_sweeps"]
    assert [r["run"] for r in sweep["rows"]] == ["reach.d0", "reach.d4", "reach.d8"]
    assert [r["delay"] for r in sweep["rows"]] == [0, 4, 8] and sweep["nominal"] == "reach.d0"
    assert sweep["hold"] == "null_action" and sweep["execute_horizon"] == 8
    assert sweep["sync"]["run"] == "sync" and sweep["sync"]["n"] == 3  # the sync baseline, drawn on the curve
    assert sweep["step_ms"] == 12.5  # Meta-World steps at 80 Hz: the delay axis reads in ms too
    first, *others = sweep["rows"]
    assert first["vs_nominal"] is None and first["stale_ratio"] == 0
    for row in others:
        assert row["vs_nominal"]["design"] == "paired" and row["vs_nominal"]["paired"]["seeds"] == 3
        assert "p_holm" in row["vs_nominal"]
    # 60 steps, s = 8: after the first chunk, d of every 8 steps come from the hold rule
    assert [round(r["stale_ratio"], 3) for r in others] == [round(4 * 7 / 60, 3), round((8 * 6 + 4) / 60, 3)]
    # how old the executed actions were: rows 0..7 of each chunk at d = 0 (mean 3.5 a cycle),
    # rows 4..7 after the first chunk at d = 4; at d = 8 only the first chunk's rows have an age
    # (the null action has none)
    ages = [r["age_mean"] for r in sweep["rows"]]
    assert ages[0] <= 3.5 and ages[2] == 3.5 and ages[1] > 4.5, ages
    assert all(r["age_max"] == 7 for r in sweep["rows"])
    html = (outcome.output_dir / "index.html").read_text()
    assert "age (mean / max)" in html
    assert "Success versus delay" in html and 'class="delay-plot"' in html and "reach.d8" in html
    assert "100 ms</text>" in html and "(50 ms)" in html  # d = 8 on the axis, d = 4 in the table
    assert 'class="sync-baseline"' in html and "the sync baseline, run <strong>sync</strong>" in html
    # the report leads with the answer: the delay curve is the first section, no rate is pooled
    # over the delays, and the delays are not a suite's tasks
    first_section = html[html.index("</nav>"):].split("<h2", 1)[1]
    assert first_section.startswith(' id="delay">Success versus delay'), first_section[:200]
    assert "Overall (episode-weighted)" not in html and "no rate pooled over them" in html
    assert outcome.result["by_group"] == {} and 'id="groups"' not in html
    assert outcome.result["matrices"] == []  # the delay matrix is the sweep above, not a second table
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is not None:  # as a user sees it: the curve on the first screen, nothing off the page
        for width in (1280, 390):
            got = _in_browser(chromium, html, width, outcome.output_dir / f"shot-{width}")
            assert got["page"] <= got["viewport"] == width, got
            assert got["plot_top"] < 1000 and got["plot_right"] <= width, got  # on the first screen, inside it
            assert got["plot_width"] >= min(600, width - 40), got  # a readable size, not a thumbnail


#: Runs in the framed report once it loaded: the page's and the delay plot's extent.
_MEASURE = """<script>
(function () {
  const plot = document.querySelector("svg.delay-plot").getBoundingClientRect();
  const out = {viewport: document.documentElement.clientWidth, page: document.documentElement.scrollWidth,
               plot_top: plot.top, plot_right: plot.right, plot_width: plot.width};
  const pre = window.parent.document.createElement("pre");
  pre.id = "arena-measure"; pre.textContent = JSON.stringify(out); window.parent.document.body.appendChild(pre);
})();
</script>"""


def _in_browser(chromium: str, page_html: str, width: int, where) -> dict:
    """The report framed ``width`` CSS pixels wide in headless Chromium (tests/results/
    test_report_browser.py does the same for plain runs); a screenshot is kept beside it."""
    where.mkdir(parents=True, exist_ok=True)
    framed = ('<!DOCTYPE html><html><body style="margin:0"><iframe style="border:0;display:block;'
              f'width:{width}px;height:1000px" srcdoc="{{}}"></iframe></body></html>')
    page, shot = where / "measure.html", where / "shot.html"
    page.write_text(framed.format(html_lib.escape(page_html.replace("</body>", _MEASURE + "</body>"), quote=True)))
    shot.write_text(framed.format(html_lib.escape(page_html, quote=True)))
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
              f"--user-data-dir={where / 'profile'}", f"--window-size={max(width, 800)},1000"]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    subprocess.run([*common, f"--screenshot={where / 'first-screen.png'}", shot.as_uri()], capture_output=True, timeout=120)
    found = re.search(r'<pre id="arena-measure">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    return json.loads(html_lib.unescape(found.group(1)))


def test_execute_horizons_of_one_delay_study_are_overlaid_on_one_plot_with_a_legend():
    from arena.results.delay import delay_figures, sweep_svg

    def sweep(horizon: int, rates: list[float]) -> dict:
        rows = [{"run": f"s{horizon}.d{d}", "delay": d, "success_rate": r, "ci95": [max(0.0, r - 0.2), min(1.0, r + 0.2)]}
                for d, r in zip((0, 2, 4), rates)]
        return {"task": "push", "policy": "p", "hold": "repeat", "clock": "simulated", "unit": "steps", "step_ms": 100.0,
                "execute_horizon": horizon, "rows": rows, "sync": {"run": "sync", "k": 9, "n": 10, "success_rate": 0.9}}

    other_task = {**sweep(4, [1.0, 0.5, 0.0]), "task": "other"}
    figures = delay_figures([sweep(4, [0.9, 0.6, 0.2]), sweep(8, [0.9, 0.4, 0.1]), other_task])
    assert [[s["execute_horizon"] for s in f] for f in figures] == [[4, 8], [4]]  # s = 4 and 8 share a plot
    svg = sweep_svg(figures[0])
    assert svg.count('class="delay-series"') == 2 and ">s = 4</text>" in svg and ">s = 8</text>" in svg
    assert svg.count('class="sync-baseline"') == 1 and "400 ms</text>" in svg
    assert ">s = 4</text>" not in sweep_svg(figures[1])  # one line needs no legend
