"""Attribution of a perturbation sweep's success: numbers checked against scipy and statsmodels on
the same counts, and a sweep run end to end (records, fingerprints, experiment_result, report)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from arena.outputs.records import EpisodeRecord
from arena.results.attribution import firth_logistic, level_rows, logistic_model

sm = pytest.importorskip("statsmodels.api")
scipy_stats = pytest.importorskip("scipy.stats")


def _records(run: str, outcomes: list[bool], seed0: int = 100) -> list[EpisodeRecord]:
    return [EpisodeRecord(run=run, episode_index=i, seed=seed0 + i, outcome="success" if ok else "failure")
            for i, ok in enumerate(outcomes)]


RNG = np.random.default_rng(0)
NOMINAL = (RNG.random(60) < 0.8).tolist()
# a level that loses some of nominal's successes and gains a few: discordant both ways
NOISY = [ok and RNG.random() > 0.35 or (not ok and RNG.random() < 0.2) for ok in NOMINAL]
DELAY = [ok and RNG.random() > 0.1 for ok in NOMINAL]
SWEEP = {"nominal": "s.nominal", "levels": {"s.noise-20": {"image_noise": 20}, "s.delay-2": {"action_delay": 2}}}
RECORDS = {"s.nominal": _records("s.nominal", NOMINAL), "s.noise-20": _records("s.noise-20", NOISY),
           "s.delay-2": _records("s.delay-2", DELAY)}


def test_paired_difference_matches_scipy_and_statsmodels_mcnemar():
    from statsmodels.stats.contingency_tables import mcnemar

    rows = {r["run"]: r for r in level_rows(SWEEP, RECORDS)}
    row = rows["s.noise-20"]
    lost = sum(a and not b for a, b in zip(NOMINAL, NOISY))
    gained = sum(b and not a for a, b in zip(NOMINAL, NOISY))
    assert (row["lost"], row["gained"]) == (lost, gained) and row["design"] == "paired"
    assert row["difference"] == pytest.approx((sum(NOISY) - sum(NOMINAL)) / 60)
    assert row["p_value"] == pytest.approx(scipy_stats.binomtest(min(lost, gained), lost + gained, 0.5).pvalue)
    table = [[sum(a and b for a, b in zip(NOISY, NOMINAL)), gained], [lost, sum(not a and not b for a, b in zip(NOISY, NOMINAL))]]
    assert row["p_value"] == pytest.approx(mcnemar(table, exact=True).pvalue)


def test_different_seeds_make_the_comparison_unpaired_and_say_why():
    records = dict(RECORDS, **{"s.noise-20": _records("s.noise-20", NOISY, seed0=900)})
    row = {r["run"]: r for r in level_rows(SWEEP, records)}["s.noise-20"]
    assert row["design"] == "unpaired" and "seeds differ" in row["design_reason"]


def test_glm_terms_are_each_levels_log_odds_ratio_with_seed_clustered_errors():
    model = logistic_model(SWEEP, RECORDS)
    assert model["status"] == "ok" and model["method"] == "glm-binomial-cluster-robust" and model["clusters"] == 60

    def logit(v):
        p = sum(v) / len(v)
        return math.log(p / (1 - p))

    terms = {t["term"]: t for t in model["terms"]}
    assert terms["image_noise=20"]["log_odds_ratio"] == pytest.approx(logit(NOISY) - logit(NOMINAL), abs=1e-8)
    assert terms["action_delay=2"]["log_odds_ratio"] == pytest.approx(logit(DELAY) - logit(NOMINAL), abs=1e-8)
    # the sandwich by hand: bread (X'WX)^-1, meat summed over seeds, statsmodels' small-sample factor
    x = np.array([[1, 0, 0]] * 60 + [[1, 1, 0]] * 60 + [[1, 0, 1]] * 60, float)
    y = np.array(NOMINAL + NOISY + DELAY, float)
    groups = np.tile(np.arange(60), 3)
    beta = np.array([model["intercept"], terms["image_noise=20"]["log_odds_ratio"], terms["action_delay=2"]["log_odds_ratio"]])
    p = 1 / (1 + np.exp(-x @ beta))
    bread = np.linalg.inv(x.T @ (x * (p * (1 - p))[:, None]))
    scores = np.array([x[groups == g].T @ (y - p)[groups == g] for g in range(60)])
    n, k, g = len(y), x.shape[1], 60
    cov = bread @ (scores.T @ scores) @ bread * (g / (g - 1)) * ((n - 1) / (n - k))
    assert terms["image_noise=20"]["se"] == pytest.approx(math.sqrt(cov[1, 1]), rel=1e-6)
    assert terms["action_delay=2"]["se"] == pytest.approx(math.sqrt(cov[2, 2]), rel=1e-6)
    low, high = terms["action_delay=2"]["ci95"]
    assert (high - low) / 2 == pytest.approx(1.959964 * terms["action_delay=2"]["se"], rel=1e-5)


def test_a_cell_that_solved_everything_falls_back_to_firth_which_is_haldanes_logit_when_saturated():
    records = dict(RECORDS, **{"s.nominal": _records("s.nominal", [True] * 60)})
    model = logistic_model(SWEEP, records)
    assert model["method"] == "firth-penalized-logistic" and "every episode of 60 solved" in model["note"]
    terms = {t["term"]: t for t in model["terms"]}

    def haldane(v):
        return math.log((sum(v) + 0.5) / (len(v) - sum(v) + 0.5))

    assert terms["action_delay=2"]["log_odds_ratio"] == pytest.approx(haldane(DELAY) - haldane([True] * 60), abs=1e-6)
    beta, _ = firth_logistic([[1.0]] * 10, [1] * 10)
    assert beta[0] == pytest.approx(math.log(10.5 / 0.5))


def test_the_firth_note_says_how_many_more_cells_it_does_not_list():
    levels = {f"s.noise-{v}": {"image_noise": v} for v in (10, 20, 40, 80)}
    sweep = {"nominal": "s.nominal", "levels": levels}
    records = {name: _records(name, [True] * 12) for name in ("s.nominal", *levels)}
    model = logistic_model(sweep, records)
    assert model["method"] == "firth-penalized-logistic", model
    assert model["note"].count("every episode of 12 solved") == 3 and "; and 2 more)" in model["note"], model["note"]


def test_holm_over_every_level_matches_statsmodels(tmp_path):
    from statsmodels.stats.multitest import multipletests

    from arena.results.attribution import attribution

    runs = {name: {} for name in RECORDS}
    result = attribution(tmp_path, runs, RECORDS)
    # without a snapshot the levels come from the records: give them through the protocol
    assert result is None  # no record carries perturbations and no snapshot names them
    records = {name: [r.model_copy(update={"protocol": {"perturbations": SWEEP["levels"].get(name, {})}}) for r in rs]
               for name, rs in RECORDS.items()}
    result = attribution(tmp_path, runs, records)
    rows = result["sweeps"]["s"]["rows"]
    expected = multipletests([r["p_value"] for r in rows], method="holm")[1]
    assert [r["p_holm"] for r in rows] == pytest.approx(list(expected))
    assert result["sweeps"]["s"]["reading"].startswith("nominal ")


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory):
    from arena.testing import run_tiny_experiment

    out = tmp_path_factory.mktemp("sweep") / "out"
    experiment = {
        "shared": {"environment": {"type": "arena.testing.envs:ToyReachEnv", "image_size": 8},
                   "policy": {"type": "arena.testing.policies:ToyReachExpert"},
                   "environment_builder": {"num_envs": 4, "seed": 0}, "rollout_limit": {"num_episodes": 24}},
        "runs": {"toy": {}},
        "perturbations": {"factors": {"image_noise": [40], "action_delay": [2]}},
    }
    outcome = run_tiny_experiment(experiment, out)
    assert outcome.exit_code == 0, outcome.explain()
    return outcome


def test_sweep_records_fingerprints_result_and_report(sweep_run):
    from arena.outputs.fingerprint import fingerprint_differences

    result = sweep_run.result
    assert list(result["runs"]) == ["toy.nominal", "toy.image_noise-40", "toy.action_delay-2"]
    nominal = sweep_run.episodes("toy.nominal")
    noisy = sweep_run.episodes("toy.image_noise-40")
    assert [r["seed"] for r in nominal] == [r["seed"] for r in noisy]
    assert nominal[0]["protocol"] is None  # the nominal run is today's run
    assert noisy[0]["protocol"] == {"perturbations": {"image_noise": 40.0}}
    assert fingerprint_differences({"benchmark": "x"}, {"benchmark": "x", **noisy[0]["protocol"]}) == [
        {"key": "protocol.perturbations.image_noise", "a": "(absent)", "b": 40.0}]
    # the state-reading expert ignores the images: same outcome on every seed
    assert [r["outcome"] for r in nominal] == [r["outcome"] for r in noisy]
    sweep = result["attribution"]["sweeps"]["toy"]
    rows = {r["run"]: r for r in sweep["rows"]}
    assert rows["toy.image_noise-40"]["difference"] == 0 and rows["toy.action_delay-2"]["difference"] < 0
    assert set(sweep["curves"]) == {"image_noise", "action_delay"}
    assert sweep["model"]["status"] == "ok"
    html = (sweep_run.output_dir / "index.html").read_text()
    assert "What drives failure" in html and "action_delay" in html and "<svg" in html


def test_sinks_get_the_same_attribution_numbers_under_names_mlflow_accepts(sweep_run):
    from arena.sinks import experiment_metrics

    metrics = experiment_metrics(sweep_run.result)
    sweep = sweep_run.result["attribution"]["sweeps"]["toy"]
    row = {r["run"]: r for r in sweep["rows"]}["toy.action_delay-2"]
    assert metrics["attribution/toy/toy.action_delay-2/difference"] == row["difference"]
    assert metrics["attribution/toy/toy.action_delay-2/ci95_low"] == row["ci95"][0]
    assert metrics["attribution/toy/toy.action_delay-2/p_holm"] == row["p_holm"]
    term = {t["term"]: t for t in sweep["model"]["terms"]}["action_delay=2"]
    assert metrics["attribution/toy/model/action_delay-2/log_odds_ratio"] == term["log_odds_ratio"]
    validation = pytest.importorskip("mlflow.utils.validation")
    for key in metrics:
        validation._validate_metric_name(key)


def test_a_sweep_is_not_reported_as_a_suite_and_its_report_leads_with_the_failure_drivers(sweep_run):
    assert "toy" not in sweep_run.result["by_group"] and sweep_run.result["group_comparisons"] == []
    html = (sweep_run.output_dir / "index.html").read_text()
    first_section = html[html.index("</nav>"):].split("<h2", 1)[1]
    assert first_section.startswith(' id="drivers">What drives failure'), first_section[:200]
    # no rate pooled over the nominal run and its perturbed levels
    assert "Overall (episode-weighted)" not in html and "A perturbation sweep:" in html


def test_compare_refuses_a_perturbed_run_against_a_nominal_one_unless_forced(tmp_path):
    from arena.results.compare import compare_experiments
    from arena.results.compare import check_comparable
    from arena.testing import run_tiny_experiment
    from arena.errors import ConfigError

    def run(name, perturbations):
        environment = {"type": "arena.testing.envs:ToyReachEnv", "image_size": 8, "perturbations": perturbations}
        outcome = run_tiny_experiment({"runs": {"toy": {
            "environment": environment, "policy": {"type": "arena.testing.policies:ToyReachExpert"},
            "environment_builder": {"num_envs": 2, "seed": 0}, "rollout_limit": {"num_episodes": 4}}}}, tmp_path / name)
        assert outcome.exit_code == 0, outcome.explain()
        return outcome.output_dir

    nominal, noisy = run("nominal", {}), run("noisy", {"image_noise": 20})
    data = compare_experiments(nominal, noisy)
    with pytest.raises(ConfigError, match=r"environment.perturbations.image_noise: .*\(A\) vs 20 \(B\)"):
        check_comparable(data, nominal, noisy, force=False)
    assert check_comparable(data, nominal, noisy, force=True)


def test_compare_pair_of_a_perturbed_run_and_its_nominal_one_agrees_with_the_attribution(sweep_run):
    """`arena compare OUT OUT --pair toy.nominal:toy.action_delay-2` answers as the report's
    "What drives failure" section does: paired on the same seeds, the same difference and p."""
    from arena.results.compare import check_comparable, compare_experiments, notes

    out = sweep_run.output_dir
    data = compare_experiments(out, out, [("toy.nominal", "toy.action_delay-2")])
    assert check_comparable(data, out, out, force=False) == []  # not refused, nothing forced
    row = data["runs"][0]
    assert row["design"] == "paired", row["design_reason"]
    attribution = {r["run"]: r for r in sweep_run.result["attribution"]["sweeps"]["toy"]["rows"]}["toy.action_delay-2"]
    assert row["difference"] == pytest.approx(attribution["difference"])
    assert row["p_value"] == pytest.approx(attribution["p_value"])
    assert any("measures the perturbation: environment.perturbations.action_delay" in line for line in notes(data))
    # two perturbed levels of one sweep: the same seeds too
    data = compare_experiments(out, out, [("toy.image_noise-40", "toy.action_delay-2")])
    assert check_comparable(data, out, out, force=False) == []
    assert data["runs"][0]["design"] == "paired"


def test_full_factorial_model_has_one_term_per_level_and_curves_from_single_factor_runs(tmp_path):
    from arena.results.attribution import attribution

    rng = np.random.default_rng(1)
    levels = {"s.nominal": {}, "s.a-1": {"action_delay": 1}, "s.b-5": {"image_noise": 5.0},
              "s.a-1--b-5": {"action_delay": 1, "image_noise": 5.0}}
    p = {"s.nominal": 0.8, "s.a-1": 0.5, "s.b-5": 0.75, "s.a-1--b-5": 0.45}
    records = {name: [r.model_copy(update={"protocol": {"perturbations": lv}})
                      for r in _records(name, (rng.random(80) < p[name]).tolist())] for name, lv in levels.items()}
    result = attribution(tmp_path, {n: {} for n in levels}, records)["sweeps"]["s"]
    assert {t["term"] for t in result["model"]["terms"]} == {"action_delay=1", "image_noise=5.0"}
    assert {f: [pt["run"] for pt in c] for f, c in result["curves"].items()} == {
        "action_delay": ["s.nominal", "s.a-1"], "image_noise": ["s.nominal", "s.b-5"]}
    # main effects of a 2x2 design, as statsmodels fits them from the same episodes
    x = [[1.0, float("a-1" in n), float("b-5" in n)] for n in levels for _ in range(80)]
    y = [int(r.outcome == "success") for n in levels for r in records[n]]
    reference = sm.GLM(np.array(y, float), np.array(x), family=sm.families.Binomial()).fit()
    terms = {t["term"]: t["log_odds_ratio"] for t in result["model"]["terms"]}
    assert terms["action_delay=1"] == pytest.approx(reference.params[1]) and terms["image_noise=5.0"] == pytest.approx(reference.params[2])


@pytest.fixture(scope="module")
def breaking_sweep(tmp_path_factory):
    """A sweep over object_mass where 6 crashes the toy simulator in the episodes of seeds 1, 3
    and 5 and 12 cannot be built at all (the expert solves every episode that runs)."""
    from arena.testing import run_tiny_experiment

    out = tmp_path_factory.mktemp("breaking") / "out"
    environment = {"type": "arena.testing.envs:CrashingToyEnv", "cameras": False, "crash_seeds": [1, 3, 5],
                   "crash_step": 1, "crash_mode": "raise", "crash_from_object_mass": 5, "unbuildable_from_object_mass": 10}
    experiment = {
        "shared": {"environment": environment, "policy": {"type": "arena.testing.policies:ToyReachExpert"},
                   "environment_builder": {"num_envs": 1, "seed": 0},
                   "rollout_limit": {"num_episodes": 8, "max_episode_steps": 10}},
        "runs": {"toy": {}},
        "perturbations": {"factors": {"object_mass": [6, 12]}},
    }
    outcome = run_tiny_experiment(experiment, out)
    assert outcome.exit_code == 3, outcome.explain()  # error episodes and a failed run
    return outcome


def test_a_level_that_crashes_the_simulator_shows_its_errors_in_its_row_the_reading_and_the_report(breaking_sweep):
    """object_mass=6 crashed 3 of 8 episodes: it used to read 5/5, +0 points, as harmless as
    nominal, the errors neither in the row nor in "What drives failure"."""
    from arena.sinks import experiment_metrics

    sweep = breaking_sweep.result["attribution"]["sweeps"]["toy"]
    row = {r["run"]: r for r in sweep["rows"]}["toy.object_mass-6"]
    assert (row["k"], row["n"], row["errors"], row["episodes"], row["error_rate"]) == (5, 5, 3, 8, 3 / 8)
    assert row["error_note"] == "3 episodes errored: environment step failed: RuntimeError: toy simulator failed"
    # the paired test says how errors were treated: the three seeds are left out, and counted
    assert row["design"] == "paired" and row["excluded_pairs"] == 3
    assert "5 episode pairs; 3 with an error episode on either side left out" in row["design_reason"]
    assert "object_mass=6: 3 of 8 episodes errored (environment step failed: RuntimeError: toy simulator failed)" in sweep["reading"]
    assert sweep["model"]["errors_excluded"] == 3
    assert "error episodes are an outcome of their level" in breaking_sweep.result["attribution"]["methods"]["errors"]
    html = (breaking_sweep.output_dir / "index.html").read_text()
    drivers = html[html.index('id="drivers"'):]
    assert "3/8 (37.5%)" in drivers and "3 with an error episode on either side left out" in drivers
    assert "3 error episodes left out" in drivers
    metrics = experiment_metrics(breaking_sweep.result)
    assert metrics["attribution/toy/toy.object_mass-6/errors"] == 3
    assert metrics["attribution/toy/toy.object_mass-6/error_rate"] == pytest.approx(0.375)


def test_a_level_whose_environment_cannot_be_built_is_listed_as_not_run_and_the_model_still_fits(breaking_sweep):
    """object_mass=12 could not build its environment: it used to show "0/0 unpaired (no episode
    index recorded by both runs)", the reading named only the level that ran and the model said
    "not estimable: singular design" (its level's column was all zeros)."""
    sweep = breaking_sweep.result["attribution"]["sweeps"]["toy"]
    row = {r["run"]: r for r in sweep["rows"]}["toy.object_mass-12"]
    assert row["status"] == "not run" and row["design"] == "not run"
    assert "could not build the environment" in row["not_run_reason"]
    assert "cannot build a scene with object_mass 12" in row["not_run_reason"]
    assert "no episode index recorded by both runs" not in row["design_reason"]
    assert row["difference"] is None and row["p_value"] is None and row.get("p_holm") is None
    assert "object_mass=12 could not run: could not build the environment: RuntimeError: toy simulator: cannot build" \
        in sweep["reading"]
    model = sweep["model"]
    assert model["status"] == "ok", model.get("reason")
    assert [t["term"] for t in model["terms"]] == ["object_mass=6"] and model["omitted"] == ["object_mass=12"]
    html = (breaking_sweep.output_dir / "index.html").read_text()
    drivers = html[html.index('id="drivers"'):]
    assert "could not run: could not build the environment" in drivers and "No term for object_mass=12 (could not run)" in drivers
    assert "singular design" not in drivers and "not run" in drivers  # the plot says it where the point would be


def test_firth_on_a_full_rank_design_converges_where_full_newton_steps_diverged_and_the_reason_says_which():
    """nominal 0/3, two levels 1/1 each: Firth's estimates are Haldane's logits, but full Newton
    steps cycled until the information matrix was singular, reported as "singular design"."""
    records = {"s.nominal": _records("s.nominal", [False] * 3), "s.noise-20": _records("s.noise-20", [True]),
               "s.delay-2": _records("s.delay-2", [True])}
    model = logistic_model(SWEEP, records)
    assert model["status"] == "ok" and model["method"] == "firth-penalized-logistic", model.get("reason")

    def haldane(k, n):
        return math.log((k + 0.5) / (n - k + 0.5))

    terms = {t["term"]: t for t in model["terms"]}
    assert terms["image_noise=20"]["log_odds_ratio"] == pytest.approx(haldane(1, 1) - haldane(0, 3), abs=1e-6)
    # what failed is named: iterations that do not converge are not a singular design
    from arena.results.attribution import FirthDiverged

    x = [[1.0, 0.0, 0.0]] * 3 + [[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]]
    with pytest.raises(FirthDiverged, match=r"^Firth's iterations did not converge in 2 iterations"):
        firth_logistic(x, [0, 0, 0, 1, 1], iterations=2)
    with pytest.raises(ValueError, match=r"^singular design"):
        firth_logistic([[1.0, 1.0]] * 4, [0, 1, 0, 1])


def test_a_singular_design_names_the_levels_that_cannot_be_told_apart():
    """Two factors changed only together (no run changes one alone): their effects cannot be
    separated, and the reason says which terms."""
    levels = {"s.nominal": {}, "s.a-1--b-5": {"action_delay": 1, "image_noise": 5.0}}
    records = {name: [r.model_copy(update={"protocol": {"perturbations": lv}})
                      for r in _records(name, NOMINAL[:20] if name == "s.nominal" else NOISY[:20])] for name, lv in levels.items()}
    model = logistic_model({"nominal": "s.nominal", "levels": {"s.a-1--b-5": levels["s.a-1--b-5"]}}, records)
    assert model["status"] == "not estimable"
    assert model["reason"].startswith("singular design: action_delay=1, image_noise=5.0 cannot be told apart"), model["reason"]


def test_a_nominal_run_that_could_not_run_is_named_in_the_reading_and_no_level_is_compared(tmp_path):
    from arena.results.attribution import attribution

    records = {name: [r.model_copy(update={"protocol": {"perturbations": SWEEP["levels"].get(name, {})}}) for r in rs]
               for name, rs in RECORDS.items()}
    records["s.nominal"] = []
    runs = {name: {} for name in RECORDS}
    runs["s.nominal"] = {"state": "failed", "error": "could not build the environment: RuntimeError: no display"}
    # without a snapshot the nominal run's (absent) perturbations are its nominal values
    sweep = attribution(tmp_path, runs, records)["sweeps"]["s"]
    assert sweep["reading"].startswith("no perturbed level has episodes to compare; nominal could not run: could not "
                                       "build the environment: RuntimeError: no display"), sweep["reading"]
    for row in sweep["rows"]:
        assert row["status"] == "ran" and row["difference"] is None
        assert row["design_reason"] == "the nominal run could not run: could not build the environment: RuntimeError: no display"
