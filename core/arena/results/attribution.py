"""What drives failure: a perturbation sweep's success attributed to its factors.

A *sweep* is a group of runs ``NAME.<suffix>`` (:mod:`arena.config.sweep`) holding a run
``NAME.nominal``; every other run of the group differs from it only in its
``environment.perturbations`` (its *levels*, read from the snapshot, else from the records'
``protocol.perturbations``). Two analyses, over the same episodes:

- **Paired differences** (:func:`level_rows`): each level's run against the nominal run on the
  seeds both played: McNemar's exact test and Newcombe's paired interval
  (:func:`arena.results.difference_stats.compare_rates`, as ``arena compare``), the difference being
  *level − nominal* (negative: the perturbation hurts). Holm's adjustment runs over every level
  of every sweep of the experiment. A run whose setup differs from the nominal in more than its
  perturbations is compared unpaired, saying why.
- **A logistic model** (:func:`logistic_model`): ``logit P(success) = b0 + Σ b_(factor, level)``
  with one indicator per factor level (nominal is the reference), over every non-error episode
  of the sweep, fitted by statsmodels' ``GLM`` (Binomial, logit link) with cluster-robust
  (sandwich) standard errors grouped by episode seed. Why that model: its estimates are the plain
  maximum-likelihood log odds ratios (in a one-at-a-time design, exactly each level's log odds
  ratio against nominal, so they agree with the paired table), while the sandwich errors allow
  any correlation between the episodes of one seed, which the paired design creates; it is GEE
  with an independence working correlation, which unlike an exchangeable one cannot bias the
  estimates when the correlation model is wrong. A level whose run solved every episode or none
  (an expert's nominal run often does) has an infinite maximum-likelihood estimate: the model is
  then Firth's penalized logistic regression (:func:`firth_logistic`, numpy; always finite) with
  model-based intervals, and says so in its ``note``. statsmodels is optional
  (``pip install 'arena-core[report]'``); without it the GLM says so.

:func:`attribution` returns both per sweep with a one-line reading of the largest effects, for
``experiment_result.json``'s ``attribution``, the report's "What drives failure" section and the
result sinks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from arena.outputs.run_stats import success_rate, wilson_interval
from arena.results.difference_stats import compare_rates, holm, pair_outcomes

#: The suffix of a sweep's unperturbed run (:data:`arena.config.sweep.NOMINAL`).
NOMINAL = "nominal"
MODEL_METHOD = "glm-binomial-cluster-robust"
FIRTH_METHOD = "firth-penalized-logistic"
MULTIPLICITY = "Holm-adjusted over the {m} perturbed levels of the experiment's sweeps (family-wise 5%)"


def _perturbations_of(name: str, snapshot: Mapping[str, Any] | None, records: list[Any]) -> dict[str, Any]:
    runs = (snapshot or {}).get("runs") if isinstance(snapshot, Mapping) else None
    run = runs.get(name) if isinstance(runs, Mapping) else None
    env = run.get("environment") if isinstance(run, Mapping) else None
    if isinstance(env, Mapping) and isinstance(env.get("perturbations"), Mapping):
        return dict(env["perturbations"])
    for record in records:
        protocol = getattr(record, "protocol", None)
        if isinstance(protocol, Mapping) and isinstance(protocol.get("perturbations"), Mapping):
            return dict(protocol["perturbations"])
    return {}


def _nominal_value(factor: str) -> Any:
    from arena.envs.perturbations import GENERIC, MUJOCO

    declared = GENERIC.get(factor) or MUJOCO.get(factor)
    return declared.nominal if declared is not None else None


def _unit(factor: str) -> str | None:
    from arena.envs.perturbations import GENERIC, MUJOCO

    declared = GENERIC.get(factor) or MUJOCO.get(factor)
    return declared.unit if declared is not None else None


def find_sweeps(runs: Mapping[str, Any], snapshot: Mapping[str, Any] | None,
                records_of: Mapping[str, list[Any]]) -> dict[str, dict[str, Any]]:
    """``{group: {"nominal": run, "levels": {run: {factor: level}}}}`` for every group holding a
    ``<group>.nominal`` run; a run's levels are its perturbations that differ from the nominal's."""
    sweeps: dict[str, dict[str, Any]] = {}
    for name in runs:
        group, dot, suffix = name.partition(".")
        if dot and suffix == NOMINAL:
            sweeps[group] = {"nominal": name, "levels": {}}
    for group, sweep in sweeps.items():
        base = _perturbations_of(sweep["nominal"], snapshot, records_of.get(sweep["nominal"], []))
        for name in runs:
            if name.partition(".")[0] != group or name == sweep["nominal"]:
                continue
            own = _perturbations_of(name, snapshot, records_of.get(name, []))
            levels = {k: v for k, v in own.items() if base.get(k, _nominal_value(k)) != v}
            if levels:
                sweep["levels"][name] = levels
    return {g: s for g, s in sweeps.items() if s["levels"]}


def _outcomes(records: list[Any]) -> dict[int, tuple[int, bool]]:
    """episode index -> (seed, success) over non-error episodes."""
    return {r.episode_index: (r.seed, r.outcome == "success") for r in records if r.outcome != "error"}


def _rate(records: list[Any]) -> dict[str, Any]:
    outcomes = _outcomes(records)
    k, n = sum(s for _, s in outcomes.values()), len(outcomes)
    low, high = wilson_interval(k, n)
    return {"k": k, "n": n, "success_rate": success_rate(k, n), "ci95": [low, high]}


def level_rows(sweep: Mapping[str, Any], records_of: Mapping[str, list[Any]],
               setups: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """One row per perturbed run of ``sweep``: its ``factors`` ``{factor: level}``, its rate
    (``k``, ``n``, ``success_rate``, Wilson ``rate_ci95``) and
    :func:`arena.results.difference_stats.compare_rates`' figures against the nominal run (``difference``
    level − nominal with its ``ci95``, ``p_value``, ...; ``lost`` / ``gained`` seeds) (paired on the
    episode indices both played when their seeds agree and their setups differ only in
    ``environment.perturbations``)."""
    from arena.results.difference_stats import pairing_differences

    nominal = sweep["nominal"]
    base = _outcomes(records_of.get(nominal, []))
    rows = []
    for name, levels in sweep["levels"].items():
        own = _outcomes(records_of.get(name, []))
        why = None
        if setups is not None:
            diffs = pairing_differences(setups.get(name), setups.get(nominal))
            if diffs:
                why = "setups differ in " + ", ".join(str(d["key"]) for d in diffs[:3])
        same_seeds = all(base[i][0] == own[i][0] for i in set(base) & set(own))
        if not same_seeds:
            why = why or "episode seeds differ"
        pairs = None
        if why is None:
            pairs = pair_outcomes({i: s for i, (_, s) in own.items()}, {i: s for i, (_, s) in base.items()})
        rate = _rate(records_of.get(name, []))
        nom = _rate(records_of.get(nominal, []))
        figures = compare_rates(rate["k"], rate["n"], nom["k"], nom["n"], pairs=pairs, unpaired_because=why)
        rows.append({"run": name, "factors": dict(levels), "k": rate["k"], "n": rate["n"],
                     "success_rate": rate["success_rate"], "rate_ci95": rate["ci95"], **figures,
                     "lost": figures["discordant"][1] if figures.get("discordant") else None,
                     "gained": figures["discordant"][0] if figures.get("discordant") else None})
    return rows


def _cells(sweep: Mapping[str, Any], records_of: Mapping[str, list[Any]]) -> tuple[list[str], list[list[float]], list[int], list[int], list[str]]:
    """``(columns, X rows, y, seed groups, degenerate cells)`` of the logistic model."""
    columns: list[tuple[str, str]] = []
    for levels in sweep["levels"].values():
        for factor, level in levels.items():
            key = (factor, repr(level))
            if key not in columns:
                columns.append(key)
    x: list[list[float]] = []
    y: list[int] = []
    groups: list[int] = []
    degenerate: list[str] = []
    for name in [sweep["nominal"], *sweep["levels"]]:
        levels = sweep["levels"].get(name, {})
        row = [1.0] + [1.0 if levels.get(f) is not None and repr(levels.get(f)) == lv else 0.0 for f, lv in columns]
        outcomes = _outcomes(records_of.get(name, []))
        ys = [int(s) for _, s in outcomes.values()]
        if ys and (all(ys) or not any(ys)):
            degenerate.append(f"{name}: {'every' if all(ys) else 'no'} episode of {len(ys)} solved")
        for seed, success in outcomes.values():
            x.append(row)
            y.append(int(success))
            groups.append(int(seed))
    names = [f"{f}={lv}" for f, lv in columns]
    return names, x, y, groups, degenerate


def logistic_model(sweep: Mapping[str, Any], records_of: Mapping[str, list[Any]]) -> dict[str, Any]:
    """The sweep's logistic model (module docstring): ``status`` (``"ok"``, ``"not estimable"``,
    ``"unavailable"``), ``method``, ``episodes``, ``clusters`` (seeds) and, when ok, ``terms``:
    per factor level ``{term, factor, level, log_odds_ratio, se, ci95 [low, high], odds_ratio,
    odds_ratio_ci95, p_value}`` (intervals Wald, 95 %, on cluster-robust errors)."""
    names, x, y, groups, degenerate = _cells(sweep, records_of)
    out: dict[str, Any] = {"method": MODEL_METHOD, "episodes": len(y), "clusters": len(set(groups)),
                           "formula": "logit P(success) = b0 + sum of level indicators (nominal is the reference)"}
    if not y:
        return {**out, "status": "not estimable", "reason": "no episode"}
    if degenerate:
        return _firth_model(out, names, x, y, degenerate)
    if len(set(groups)) < 2:
        return {**out, "status": "not estimable", "reason": "fewer than two seeds: no cluster-robust error"}
    try:
        import numpy as np
        import statsmodels.api as sm
    except ImportError:
        return {**out, "status": "unavailable",
                "reason": "statsmodels is not installed: pip install 'arena-core[report]'"}
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = sm.GLM(np.asarray(y, float), np.asarray(x, float), family=sm.families.Binomial()).fit(
                cov_type="cluster", cov_kwds={"groups": np.asarray(groups)})
    except Exception as exc:  # e.g. a singular design
        return {**out, "status": "not estimable", "reason": f"{type(exc).__name__}: {exc}"}
    params, bse, pvalues = fit.params, fit.bse, fit.pvalues
    conf = fit.conf_int(0.05)
    if not all(math.isfinite(v) for v in [*params, *bse]):
        return {**out, "status": "not estimable", "reason": "the fit did not converge to finite estimates"}
    terms = []
    for i, name in enumerate(names, start=1):
        factor, _, level = name.partition("=")
        low, high = float(conf[i][0]), float(conf[i][1])
        terms.append({
            "term": name, "factor": factor, "level": level, "log_odds_ratio": float(params[i]), "se": float(bse[i]),
            "ci95": [low, high], "odds_ratio": math.exp(params[i]), "odds_ratio_ci95": [math.exp(low), math.exp(high)],
            "p_value": float(pvalues[i]),
        })
    return {**out, "status": "ok", "intercept": float(params[0]), "terms": terms}


def firth_logistic(x: Any, y: Any, *, iterations: int = 100, tol: float = 1e-10) -> tuple[Any, Any]:
    """Firth's bias-reduced logistic regression (Firth 1993, *Biometrika* 80:27–38; Heinze &
    Schemper 2002, *Stat. Med.* 21:2409–2419): ``(beta, covariance)``, the covariance the inverse
    Fisher information at ``beta``. Finite where plain maximum likelihood diverges (a cell that
    solved every episode or none). In a saturated design it is the empirical logit of each cell
    with half a success and half a failure added (the Haldane correction).

    Raises:
        ValueError: the design is singular.
    """
    import numpy as np

    x, y = np.asarray(x, float), np.asarray(y, float)
    beta = np.zeros(x.shape[1])
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-(x @ beta)))
        w = p * (1 - p)
        info = x.T @ (x * w[:, None])
        try:
            inverse = np.linalg.inv(info)
        except np.linalg.LinAlgError as exc:
            raise ValueError(f"singular design: {exc}") from None
        hat = np.einsum("ij,jk,ik->i", x * np.sqrt(w)[:, None], inverse, x * np.sqrt(w)[:, None])
        step = inverse @ (x.T @ (y - p + hat * (0.5 - p)))
        beta = beta + step
        if np.max(np.abs(step)) < tol:
            break
    p = 1 / (1 + np.exp(-(x @ beta)))
    return beta, np.linalg.inv(x.T @ (x * (p * (1 - p))[:, None]))


def _firth_model(out: dict[str, Any], names: list[str], x: Any, y: Any, degenerate: list[str]) -> dict[str, Any]:
    """The model when a cell is degenerate: Firth's estimates, model-based Wald intervals."""
    from statistics import NormalDist

    try:
        beta, cov = firth_logistic(x, y)
    except ValueError as exc:
        return {**out, "status": "not estimable", "reason": str(exc)}
    z = NormalDist().inv_cdf(0.975)
    terms = []
    for i, name in enumerate(names, start=1):
        factor, _, level = name.partition("=")
        se = math.sqrt(max(float(cov[i][i]), 0.0))
        b = float(beta[i])
        low, high = b - z * se, b + z * se
        p = 2 * (1 - NormalDist().cdf(abs(b) / se)) if se > 0 else None
        terms.append({"term": name, "factor": factor, "level": level, "log_odds_ratio": b, "se": se, "ci95": [low, high],
                      "odds_ratio": math.exp(b), "odds_ratio_ci95": [math.exp(low), math.exp(high)], "p_value": p})
    return {**out, "status": "ok", "method": FIRTH_METHOD, "intercept": float(beta[0]), "terms": terms,
            "note": "a cell's plain maximum-likelihood log odds are infinite (" + "; ".join(degenerate[:3])
            + "): Firth's penalized estimates with model-based (not seed-clustered) intervals"}


def factor_curves(sweep: Mapping[str, Any], rows: list[dict[str, Any]], nominal: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per factor, success against level: the nominal point then each run that changes only
    that factor, ``{level, run, k, n, success_rate, ci95, nominal}`` (levels in sweep order)."""
    curves: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if len(row["factors"]) != 1:
            continue
        (factor, level), = row["factors"].items()
        curve = curves.setdefault(factor, [{"level": _nominal_value(factor), "run": sweep["nominal"], "nominal": True,
                                             **{k: nominal[k] for k in ("k", "n", "success_rate", "ci95")}}])
        curve.append({"level": level, "run": row["run"], "nominal": False, "k": row["k"], "n": row["n"],
                      "success_rate": row["success_rate"], "ci95": row["rate_ci95"]})
    return curves


def reading(rows: list[dict[str, Any]], nominal: Mapping[str, Any]) -> str:
    """One line naming the largest drops (those significant after Holm first)."""
    tested = [r for r in rows if r.get("difference") is not None]
    if not tested:
        return "no perturbed level has episodes to compare"
    worst = sorted(tested, key=lambda r: r["difference"])[:2]

    def say(r: dict[str, Any]) -> str:
        levels = ", ".join(f"{k}={v}" for k, v in r["factors"].items())
        sig = "significant" if r.get("significant_holm") else "not significant"
        return f"{levels} {100 * r['difference']:+.0f} points ({sig} after Holm)"

    rate = nominal.get("success_rate")
    head = f"nominal {100 * rate:.0f}%; " if rate is not None else ""
    if worst[0]["difference"] >= 0:
        return head + "no perturbed level lowered success"
    return head + "largest drops: " + "; ".join(say(r) for r in worst if r["difference"] < 0)


def attribution(output_dir: str | Path, runs: Mapping[str, Any], records_of: Mapping[str, list[Any]],
                setups: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """Every sweep of an experiment analysed (module docstring), or ``None`` without sweeps.

    Returns ``{"sweeps": {group: {nominal, nominal_rate, factors, rows, curves, model,
    reading}}, "multiplicity", "methods"}``; rows carry ``p_holm`` / ``significant_holm``.
    """
    from arena.outputs.layout import read_snapshot

    snapshot = read_snapshot(Path(output_dir))
    sweeps = find_sweeps(runs, snapshot, records_of)
    if not sweeps:
        return None
    out: dict[str, Any] = {}
    all_rows: list[dict[str, Any]] = []
    for group, sweep in sweeps.items():
        rows = level_rows(sweep, records_of, setups)
        all_rows += rows
        nominal = _rate(records_of.get(sweep["nominal"], []))
        factors = sorted({f for levels in sweep["levels"].values() for f in levels})
        out[group] = {
            "nominal": sweep["nominal"], "nominal_rate": nominal,
            "factors": {f: {"unit": _unit(f), "nominal": _nominal_value(f)} for f in factors},
            "rows": rows, "model": None, "curves": None, "reading": None,
        }
    for row, p in zip(all_rows, holm([r.get("p_value") for r in all_rows])):
        row["p_holm"] = p
        row["significant_holm"] = p is not None and p < 0.05
    for group, sweep in sweeps.items():
        entry = out[group]
        entry["curves"] = factor_curves(sweep, entry["rows"], entry["nominal_rate"])
        entry["model"] = logistic_model(sweep, records_of)
        entry["reading"] = reading(entry["rows"], entry["nominal_rate"])
    tested = sum(r.get("p_value") is not None for r in all_rows)
    return {
        "sweeps": out,
        "multiplicity": MULTIPLICITY.format(m=tested),
        "methods": {"paired": "mcnemar-exact + newcombe-paired-hybrid-score (level − nominal)",
                    "adjustment": "holm", "model": MODEL_METHOD},
    }
