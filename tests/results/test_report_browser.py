"""The report in a real browser: at a laptop's width (1,400 px) no table needs a scroll bar
and nothing leaves the page; at a phone's width only the tables scroll, inside their own
boxes; chart rows are all one line and alike. Measured in headless Chromium (the element
widths, ``scrollWidth`` against ``clientWidth``), with a screenshot kept for a look.

Chromium is Debian's (``make test`` installs it as root: ``scripts/setup-system.sh``); without it the test skips.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from arena.results.aggregate import build_experiment_result
from arena.results.report import render_report
from arena.outputs.records import EpisodeRecord, RecordWriter, write_json_atomic

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium (run once: sudo scripts/setup-system.sh)")

# libero_10's longest task names (LIBERO's own, as `arena libero tasks libero_10` lists them).
TASKS = [
    "LIVING_ROOM_SCENE5_put_the_white_mug_on_the_left_plate_and_put_the_yellow_and_white_mug_on_the_right_plate",
    "LIVING_ROOM_SCENE6_put_the_white_mug_on_the_plate_and_put_the_chocolate_pudding_to_the_right_of_the_plate",
    "KITCHEN_SCENE4_put_the_black_bowl_in_the_bottom_drawer_of_the_cabinet_and_close_it",
    "STUDY_SCENE1_pick_up_the_book_and_place_it_in_the_back_compartment_of_the_caddy",
]
POLICIES = {"expert": "libero_expert", "zero": "zero_action", "random": "random_action"}

# Runs in the page after it loaded (--dump-dom prints the DOM then): what overflows, as JSON.
MEASURE = """
<script>
(function () {
  const wide = (e) => e.scrollWidth > e.clientWidth + 1;
  const lines = (e) => {  // how many lines the text of e takes: the distinct tops of its boxes
    const range = document.createRange();
    range.selectNodeContents(e);
    return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
  };
  const out = {
    viewport: document.documentElement.clientWidth,
    page: document.documentElement.scrollWidth,
    scrolling_tables: [...document.querySelectorAll("div.scroll")].filter(wide).map(
      (e) => (e.previousElementSibling && e.previousElementSibling.textContent.trim().slice(0, 60)) + " | " +
             e.querySelector("thead").textContent.replace(/\\s+/g, " ").trim().slice(0, 60)),
    charts: [...document.querySelectorAll(".chart")].map((chart) => ({
      label: chart.getAttribute("aria-label"),
      overflows: wide(chart),
      rows: [...chart.querySelectorAll(".chart-row:not(.chart-axis)")].map((row) => ({
        height: row.getBoundingClientRect().height,
        label_lines: lines(row.querySelector(".chart-label")),
        whisker: [...row.querySelectorAll(".ci, .errorbar")].map((w) => {
          const s = getComputedStyle(w);
          return w.classList.contains("ci") ? s.height : s.borderLeftWidth + " " + s.backgroundSize;
        }).join(),
      })),
    })),
    numbers_visible: [...document.querySelectorAll("#runs + .scroll td.num")].every(
      (td) => td.getBoundingClientRect().right <= document.documentElement.clientWidth + 1),
  };
  const top = window.parent.document;  // the framing page, which --dump-dom prints
  const pre = top.createElement("pre");
  pre.id = "arena-measure";
  pre.textContent = JSON.stringify(out);
  top.body.appendChild(pre);
})();
</script>
"""


def _report_dir(out: Path) -> Path:
    """A LIBERO-like experiment: per long task, an expert and the zero and random baselines."""
    runs = {}
    for t, task in enumerate(TASKS):
        for who, policy in POLICIES.items():
            run = f"long{t}_{who}"
            outcomes = ["success"] * {"expert": 9, "zero": 0, "random": 1}[who]
            outcomes += ["timeout"] * (10 - len(outcomes))
            runs[run] = {
                "task": f"libero_10/{task}", "policy": {"type": policy, "variant": None}, "num_envs": 2, "seed": 0,
                "num_episodes": 10,
                "work_items": [{"run": run, "episode_index": i, "seed": i} for i in range(10)],
            }
            with RecordWriter(out / run / "episodes.jsonl") as writer:
                for i, outcome in enumerate(outcomes):
                    writer.write(EpisodeRecord(
                        run=run, episode_index=i, seed=i, env_id=i % 2, task=f"libero_10/{task}",
                        policy={"type": policy, "variant": None}, outcome=outcome, steps=520,
                    ))
            write_json_atomic(out / run / "run_result.json", {"run": run, "state": "completed", "error": None})
    write_json_atomic(out / "manifest.json", {"format_version": 1, "experiment": "libero_long", "runs": runs})
    (out / "experiment.yaml").write_text("runs: {}\n")
    return out


def _chromium(page: Path, profile: Path, size: tuple[int, int], *args: str) -> subprocess.CompletedProcess:
    argv = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", "--hide-scrollbars", f"--window-size={size[0]},{size[1]}", *args, page.as_uri(),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _framed(page_html: str, width: int, height: int, script: str = "") -> str:
    """The report in an iframe ``width`` CSS pixels wide: its viewport, media queries included,
    is that wide whatever the browser's smallest window (headless Chromium's is ~500 px)."""
    inner = page_html.replace("</body>", script + "</body>")
    return (
        '<!DOCTYPE html><html><body style="margin:0">'
        f'<iframe style="border:0;display:block;width:{width}px;height:{height}px" srcdoc="{html.escape(inner, quote=True)}">'
        "</iframe></body></html>"
    )


def _measure(page_html: str, tmp_path: Path, width: int) -> dict:
    page = tmp_path / f"measure-{width}.html"
    page.write_text(_framed(page_html, width, 1000, MEASURE))
    dom = _chromium(page, tmp_path / f"profile-{width}", (max(width, 800), 1000), "--dump-dom").stdout
    found = re.search(r'<pre id="arena-measure">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    return json.loads(html.unescape(found.group(1)))


def _rows_alike(charts: list[dict]) -> None:
    for chart in charts:
        assert not chart["overflows"], chart["label"]
        rows = chart["rows"]
        assert rows, chart["label"]
        assert len({r["height"] for r in rows}) == 1, (chart["label"], [r["height"] for r in rows])
        assert all(r["label_lines"] == 1 for r in rows), (chart["label"], rows)
        whiskers = {r["whisker"] for r in rows if r["whisker"]}
        assert len(whiskers) == 1, (chart["label"], whiskers)
        # Whole pixels: a 1.5 px line in rows 25.6 px apart was drawn 1 px, then 2 px, row by row.
        assert float(rows[0]["height"]).is_integer(), rows[0]
        assert all(float(v).is_integer() for v in re.findall(r"([\d.]+)px", next(iter(whiskers)))), whiskers


def test_report_fits_a_laptop_and_a_phone(tmp_path):
    out = _report_dir(tmp_path / "out")
    page_html = render_report(out)
    assert "<script" not in page_html.lower()  # the measuring script goes into a copy only

    laptop = _measure(page_html, tmp_path, 1400)
    assert laptop["viewport"] == 1400
    assert laptop["page"] <= laptop["viewport"], laptop  # nothing leaves the page
    assert laptop["scrolling_tables"] == [], laptop["scrolling_tables"]  # no table needs a scroll bar
    assert laptop["numbers_visible"]  # k/n, rate and 95% CI on screen
    _rows_alike(laptop["charts"])

    phone = _measure(page_html, tmp_path, 390)
    assert phone["viewport"] == 390
    assert phone["page"] <= phone["viewport"], phone  # wide tables scroll in their own boxes only
    _rows_alike(phone["charts"])

    for width in (1400, 390):  # kept in the test's directory for a look
        shot = tmp_path / f"report-{width}.png"
        page = tmp_path / f"shot-{width}.html"
        page.write_text(_framed(page_html, width, 2400))
        _chromium(page, tmp_path / f"profile-shot-{width}", (max(width, 800), 2400), f"--screenshot={shot}")
        assert shot.stat().st_size > 10_000  # a page was drawn


def test_comparisons_against_baselines_come_before_baselines_against_each_other(tmp_path):
    page_html = render_report(_report_dir(tmp_path / "out"))
    table = page_html[page_html.index('id="compare"'):page_html.index('id="compare-chart"')]
    pairs = re.findall(r"<td>(long\d_\w+) <span", table)
    firsts, seconds = pairs[0::2], pairs[1::2]
    kinds = ["baselines" if "expert" not in a + b else "asked" for a, b in zip(firsts, seconds)]
    assert kinds == ["asked"] * 8 + ["baselines"] * 4, list(zip(firsts, seconds))
    assert table.count("Baselines against each other") == 1
    chart = page_html[page_html.index('id="compare-chart"'):page_html.index('id="latency"')]
    labels = re.findall(r'class="chart-label">([^<]+)<', chart)
    assert labels == [f"{a} − {b}" for a, b in zip(firsts, seconds)]


# -- what leads a matrix's report and a checkpoint series' page ------------------------------------
CHECKPOINTS = {"s5000": 5000, "s10000": 10000, "s15000": 15000}
MW_TASKS = ("reach-v3", "push-v3")


def _matrix_dir(out: Path) -> Path:
    """``eval`` expanded by a matrix over 3 checkpoints × 2 tasks, as ``experiment.yaml`` keeps
    it (the expanded runs, no ``matrix`` section), and a zero-action baseline per task; 10
    episodes a run."""
    runs, snapshot = {}, {}
    plan = [(f"eval.{label}-{task}", "lerobot_remote", task, 2 + 3 * c - t, f"/ckpts/step_{step}/pretrained_model")
            for c, (label, step) in enumerate(CHECKPOINTS.items()) for t, task in enumerate(MW_TASKS)]
    plan += [(f"zero_{task}", "zero_action", task, 1, None) for task in MW_TASKS]
    for run, policy_type, task, successes, checkpoint in plan:
        policy = {"type": policy_type, "variant": None}
        snapshot[run] = {"environment": {"type": "metaworld", "task": task}, "policy": {"type": policy_type},
                         "server": {"checkpoint": checkpoint}}
        runs[run] = {"task": task, "policy": policy, "num_envs": 1, "seed": 0, "num_episodes": 10,
                     "work_items": [{"run": run, "episode_index": i, "seed": i} for i in range(10)]}
        with RecordWriter(out / run / "episodes.jsonl") as writer:
            for i in range(10):
                writer.write(EpisodeRecord(run=run, episode_index=i, seed=i, env_id=0, task=task, policy=policy,
                                           outcome="success" if i < successes else "failure", steps=50))
        write_json_atomic(out / run / "run_result.json", {"run": run, "state": "completed", "error": None})
    write_json_atomic(out / "manifest.json", {"format_version": 1, "experiment": "act_checkpoints", "runs": runs})
    (out / "experiment.yaml").write_text(json.dumps({"name": "act_checkpoints", "runs": snapshot}))
    return out


def _watch_page(out: Path) -> str:
    """``arena watch``'s page over three checkpoints of one run (each evaluation's result as
    ``arena run`` writes it)."""
    from arena.results.curve import gather, render_page

    checkpoints = {}
    for c, (label, step) in enumerate(CHECKPOINTS.items()):
        where = out / label
        k = 2 + 3 * c
        write_json_atomic(where / "experiment_result.json", {"runs": {"reach": {
            "success_rate": k / 10, "k": k, "n": 10, "ci95": [max(0.0, k / 10 - 0.25), min(1.0, k / 10 + 0.25)]}}})
        checkpoints[f"step_{step}"] = {"step": step, "state": "done", "output_dir": str(where)}
    return render_page(gather(out, checkpoints), "watch: act")


#: Runs in each framed page: its extent, and where its leading plot and table are.
LEAD = """<script>
(function () {
  const box = (sel) => { const e = document.querySelector(sel); if (!e) return null;
    const r = e.getBoundingClientRect(); return {top: r.top, right: r.right, width: r.width}; };
  const out = {page_name: document.title, viewport: document.documentElement.clientWidth,
               page: document.documentElement.scrollWidth, plot: box("svg.series-plot, svg.curve"),
               table: box("table.matrix, section.quantity table")};
  const pre = window.parent.document.createElement("pre");
  pre.className = "arena-measure"; pre.textContent = JSON.stringify(out); window.parent.document.body.appendChild(pre);
})();
</script>"""


def test_matrix_and_checkpoint_series_lead_with_their_comparison(tmp_path):
    out = _matrix_dir(tmp_path / "matrix")
    result = build_experiment_result(out)
    [matrix] = result["matrices"]
    assert [a["key"] for a in matrix["axes"]] == ["server.checkpoint", "environment.task"]
    assert matrix["axes"][0]["labels"] == list(CHECKPOINTS) and matrix["axes"][0]["steps"] == CHECKPOINTS
    assert matrix["rows"] == list(CHECKPOINTS) and matrix["columns"] == list(MW_TASKS)
    cell = matrix["cells"]["s15000 | push-v3"]  # 2 + 3*2 - 1 = 7 of 10: the run's own rate
    assert (cell["run"], cell["k"], cell["n"]) == ("eval.s15000-push-v3", 7, 10)
    assert [c["step"] for c in matrix["series"]["lines"]["reach-v3"]] == [5000, 10000, 15000]
    assert result["by_group"] == {}  # no suite pools the checkpoints' tasks
    [zero] = matrix["beside"]  # the baseline runs, a row below the matrix's
    assert zero["label"] == "zero_action" and zero["cells"]["push-v3"]["run"] == "zero_push-v3"
    page = render_report(out, result)
    first = page[page.index("</nav>"):].split("<h2", 1)[1]
    assert first.startswith(' id="matrix-1">Success versus checkpoint step'), first[:120]
    assert "Overall (episode-weighted)" not in page and "A matrix:" in page
    assert "70.0%" in page and "7/10" in page  # a cell: rate, interval, k/n
    assert "zero_<wbr>action <span class=\"small\">(not in the matrix)</span>" in page
    # each run is listed once open: the chart and the task table, which repeat it, are folded
    assert '<details class="fold" id="chart">' in page and '<details class="fold" id="tasks">' in page
    watch = _watch_page(tmp_path / "watch")

    frames = [(page, 1280), (page, 390), (watch, 1280), (watch, 390)]
    measure = tmp_path / "measure.html"
    measure.write_text("".join(_framed(p, w, 1000, LEAD) for p, w in frames))
    dom = _chromium(measure, tmp_path / "profile", (1400, 1000), "--dump-dom").stdout
    got = [json.loads(html.unescape(m)) for m in re.findall(r'<pre class="arena-measure">(.*?)</pre>', dom, re.S)]
    assert len(got) == 4, dom[-2000:]
    for seen, (_, width) in zip(sorted(got, key=lambda g: (g["page_name"], -g["viewport"])), frames):
        assert seen["viewport"] == width and seen["page"] <= width, seen  # nothing leaves the page
        plot, table = seen["plot"], seen["table"]
        assert plot["top"] < 1000 and plot["right"] <= width, seen  # the curve on the first screen
        assert plot["width"] >= min(600, width - 40), seen  # at a readable size
        assert table["top"] < (1000 if width > 400 else 2000), seen  # its table right below it
    shot = tmp_path / "lead.png"  # the four first screens side by side, kept for a look
    side = '<div style="display:flex;gap:8px;align-items:flex-start">{}</div>'.format(
        "".join(_framed(p, w, 1000).replace("<!DOCTYPE html><html><body style=\"margin:0\">", "").replace("</body></html>", "")
                for p, w in frames))
    (tmp_path / "shot.html").write_text(f'<!DOCTYPE html><html><body style="margin:0">{side}</body></html>')
    _chromium(tmp_path / "shot.html", tmp_path / "profile", (1280 * 2 + 390 * 2 + 32, 1000), f"--screenshot={shot}")
    assert shot.stat().st_size > 10_000
