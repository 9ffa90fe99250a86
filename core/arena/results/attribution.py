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

**Errors are an outcome of a level**, never a failure and never silently dropped: every row
(and the nominal rate) carries ``errors``, ``episodes`` and ``error_rate`` beside its success,
with the reason (``error_note``). The paired tests and the model are on non-error episodes: an
episode index with an error on either side is left out of the pairing (``excluded_pairs``), the
model counts what it left out (``errors_excluded``). A level whose run has no non-error episode
(its environment could not be built, or every episode errored) *could not run*: its row says so
with the reason (``status: "not run"``), it gets no term in the model (``omitted``) and the
reading names it, as it names every level with errors (``"object_mass=6: 3 of 8 episodes
errored (...)"``).

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
from arena.results.run_summary import error_note

#: The suffix of a sweep's unperturbed run (:data:`arena.config.sweep.NOMINAL`).
NOMINAL = "nominal"
MODEL_METHOD = "glm-binomial-cluster-robust"
FIRTH_METHOD = "firth-penalized-logistic"
#: How error episodes enter the analyses (``methods.errors``; the report says it too).
ERRORS_TREATMENT = ("error episodes are an outcome of their level, shown beside its success (errors, error_rate), "
                    "never counted as failures; the paired tests leave out an episode index with an error on either "
                    "side (excluded_pairs counts them) and the model leaves out error episodes (errors_excluded); "
                    "a level without a non-error episode could not run and is listed as such, with no term")
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
    """A run's success ``k``/``n`` over non-error episodes (Wilson ``ci95``) and its error
    episodes beside it: ``errors``, ``episodes`` (recorded, errors included), ``error_rate``
    (``errors / episodes``, ``None`` without episodes) and ``error_note`` (why, in one line)."""
    outcomes = _outcomes(records)
    k, n = sum(s for _, s in outcomes.values()), len(outcomes)
    low, high = wilson_interval(k, n)
    errors = sum(r.outcome == "error" for r in records)
    return {"k": k, "n": n, "success_rate": success_rate(k, n), "ci95": [low, high], "errors": errors,
            "episodes": len(records), "error_rate": errors / len(records) if records else None,
            "error_note": error_note(records)}


def _not_run_reason(name: str, rate: Mapping[str, Any], runs: Mapping[str, Any] | None) -> str | None:
    """Why a run has no outcome to compare (no non-error episode), or ``None`` when it has one:
    its run's error (an environment that could not be built), else why its episodes errored,
    else its state."""
    if rate["n"]:
        return None
    run = (runs or {}).get(name)
    run = run if isinstance(run, Mapping) else {}
    if run.get("error"):
        return str(run["error"])
    if rate["errors"]:
        return f"every episode errored ({rate['error_note']})"
    return f"no episode recorded (run {run.get('state') or 'pending'})"


def level_rows(sweep: Mapping[str, Any], records_of: Mapping[str, list[Any]],
               setups: Mapping[str, Any] | None = None, runs: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """One row per perturbed run of ``sweep``: its ``factors`` ``{factor: level}``, its rate
    (``k``, ``n``, ``success_rate``, Wilson ``rate_ci95``), its error episodes beside it
    (``errors``, ``episodes``, ``error_rate``, ``error_note``: errors are an outcome of the
    level, never failures) and :func:`arena.results.difference_stats.compare_rates`' figures
    against the nominal run (``difference`` level − nominal with its ``ci95``, ``p_value``, ...;
    ``lost`` / ``gained`` seeds) (paired on the episode indices both played when their seeds
    agree and their setups differ only in ``environment.perturbations``; ``excluded_pairs``:
    indices both recorded but left out because either episode errored).

    ``status`` is ``"ran"``, or ``"not run"`` when the level has no non-error episode: then
    ``design`` is ``"not run"``, ``not_run_reason`` (also ``design_reason``) says why — the
    run's error (``runs[name]["error"]``, an environment that could not be built), its
    episodes' errors, or its state — and every figure is ``None`` (as it is, with the reason,
    when the nominal run could not run)."""
    from arena.results.difference_stats import pairing_differences

    nominal = sweep["nominal"]
    base = _outcomes(records_of.get(nominal, []))
    nom = _rate(records_of.get(nominal, []))
    nominal_missing = _not_run_reason(nominal, nom, runs)
    base_indices = {r.episode_index for r in records_of.get(nominal, [])}
    rows = []
    for name, levels in sweep["levels"].items():
        own = _outcomes(records_of.get(name, []))
        rate = _rate(records_of.get(name, []))
        errors = {k: rate[k] for k in ("errors", "episodes", "error_rate", "error_note")}
        recorded = {r.episode_index for r in records_of.get(name, [])} & base_indices
        excluded = len(recorded - (set(own) & set(base)))
        missing = _not_run_reason(name, rate, runs)
        if missing is not None:
            figures = compare_rates(0, 0, 0, 0, unpaired_because=missing)
            rows.append({"run": name, "factors": dict(levels), "status": "not run", "not_run_reason": missing,
                         "k": rate["k"], "n": rate["n"], "success_rate": rate["success_rate"], "rate_ci95": rate["ci95"],
                         **errors, "excluded_pairs": 0, **figures, "design": "not run", "lost": None, "gained": None})
            continue
        why = None if nominal_missing is None else f"the nominal run could not run: {nominal_missing}"
        if setups is not None:
            diffs = pairing_differences(setups.get(name), setups.get(nominal))
            if diffs:
                why = "setups differ in " + ", ".join(str(d["key"]) for d in diffs[:3]) + (
                    f" and {len(diffs) - 3} more" if len(diffs) > 3 else "")
        same_seeds = all(base[i][0] == own[i][0] for i in set(base) & set(own))
        if not same_seeds:
            why = why or "episode seeds differ"
        pairs = None
        if why is None:
            pairs = pair_outcomes({i: s for i, (_, s) in own.items()}, {i: s for i, (_, s) in base.items()})
        figures = compare_rates(rate["k"], rate["n"], nom["k"], nom["n"], pairs=pairs, unpaired_because=why)
        if figures["design"] == "paired" and excluded:
            figures["design_reason"] += f"; {excluded} with an error episode on either side left out"
        rows.append({"run": name, "factors": dict(levels), "status": "ran", "not_run_reason": None,
                     "k": rate["k"], "n": rate["n"], "success_rate": rate["success_rate"], "rate_ci95": rate["ci95"],
                     **errors, "excluded_pairs": excluded if figures["design"] == "paired" else 0, **figures,
                     "lost": figures["discordant"][1] if figures.get("discordant") else None,
                     "gained": figures["discordant"][0] if figures.get("discordant") else None})
    return rows


def _cells(sweep: Mapping[str, Any], records_of: Mapping[str, list[Any]]) -> dict[str, Any]:
    """The logistic model's data: ``names`` (one term per factor level), ``x`` rows, ``y``,
    ``groups`` (seeds), ``degenerate`` cells, ``omitted`` (the levels of runs without a
    non-error episode: no column, or the design would be singular) and ``errors`` (error
    episodes left out)."""
    runs = [sweep["nominal"], *sweep["levels"]]
    outcomes = {name: _outcomes(records_of.get(name, [])) for name in runs}
    columns: list[tuple[str, str]] = []
    omitted: list[str] = []
    for name, levels in sweep["levels"].items():
        for factor, level in levels.items():
            key = (factor, repr(level))
            if outcomes[name] and key not in columns:
                columns.append(key)
    for name, levels in sweep["levels"].items():
        if not outcomes[name]:
            omitted += [f"{f}={lv}" for f, lv in levels.items() if (f, repr(lv)) not in columns]
    x: list[list[float]] = []
    y: list[int] = []
    groups: list[int] = []
    degenerate: list[str] = []
    for name in runs:
        levels = sweep["levels"].get(name, {})
        row = [1.0] + [1.0 if levels.get(f) is not None and repr(levels.get(f)) == lv else 0.0 for f, lv in columns]
        ys = [int(s) for _, s in outcomes[name].values()]
        if ys and (all(ys) or not any(ys)):
            degenerate.append(f"{name}: {'every' if all(ys) else 'no'} episode of {len(ys)} solved")
        for seed, success in outcomes[name].values():
            x.append(row)
            y.append(int(success))
            groups.append(int(seed))
    errors = sum(r.outcome == "error" for name in runs for r in records_of.get(name, []))
    return {"names": [f"{f}={lv}" for f, lv in columns], "x": x, "y": y, "groups": groups,
            "degenerate": degenerate, "omitted": list(dict.fromkeys(omitted)), "errors": errors}


def singular_terms(x: Any, names: list[str]) -> list[str] | None:
    """The terms of a design matrix ``x`` (episodes × (intercept + terms), 0/1) that cannot be
    told apart (each is a linear combination of the others: a level that only occurs together
    with another, or never), or ``None`` when ``x`` has full column rank."""
    import numpy as np

    x = np.asarray(x, float)
    rank = np.linalg.matrix_rank(x)
    if rank == x.shape[1]:
        return None
    return [name for i, name in enumerate(names, start=1)
            if np.linalg.matrix_rank(np.delete(x, i, axis=1)) == rank] or list(names)


def logistic_model(sweep: Mapping[str, Any], records_of: Mapping[str, list[Any]]) -> dict[str, Any]:
    """The sweep's logistic model (module docstring): ``status`` (``"ok"``, ``"not estimable"``,
    ``"unavailable"``), ``method``, ``episodes``, ``clusters`` (seeds), ``errors_excluded``
    (error episodes, not in the model), ``omitted`` (levels whose run has no non-error episode:
    no term) and, when ok, ``terms``: per factor level ``{term, factor, level, log_odds_ratio,
    se, ci95 [low, high], odds_ratio, odds_ratio_ci95, p_value}`` (intervals Wald, 95 %, on
    cluster-robust errors). When not estimable, ``reason`` says what failed: ``"singular
    design: ..."`` (naming the terms that cannot be told apart), ``"Firth's iterations
    diverged ..."`` or the GLM's own error."""
    cells = _cells(sweep, records_of)
    names, x, y, groups, degenerate = cells["names"], cells["x"], cells["y"], cells["groups"], cells["degenerate"]
    out: dict[str, Any] = {"method": MODEL_METHOD, "episodes": len(y), "clusters": len(set(groups)),
                           "errors_excluded": cells["errors"], "omitted": cells["omitted"],
                           "formula": "logit P(success) = b0 + sum of level indicators (nominal is the reference)"}
    if not y:
        return {**out, "status": "not estimable", "reason": "no episode"}
    if not names:
        return {**out, "status": "not estimable", "reason": "no perturbed level has an episode (" + ", ".join(cells["omitted"]) + ")"}
    import numpy as np

    tied = singular_terms(x, names)
    if tied is not None:
        return {**out, "status": "not estimable",
                "reason": f"singular design: {', '.join(tied)} cannot be told apart (each level occurs only together with another)"}
    if degenerate:
        return _firth_model(out, names, x, y, degenerate)
    if len(set(groups)) < 2:
        return {**out, "status": "not estimable", "reason": "fewer than two seeds: no cluster-robust error"}
    try:
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
    except Exception as exc:  # the design has full rank: the fit itself failed
        return {**out, "status": "not estimable", "reason": f"the GLM fit failed: {type(exc).__name__}: {exc}"}
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


class FirthDiverged(ValueError):
    """Firth's iterations did not reach finite estimates on a design of full rank."""


def firth_logistic(x: Any, y: Any, *, iterations: int = 1000, tol: float = 1e-7, max_step: float = 5.0) -> tuple[Any, Any]:
    """Firth's bias-reduced logistic regression (Firth 1993, *Biometrika* 80:27–38; Heinze &
    Schemper 2002, *Stat. Med.* 21:2409–2419): ``(beta, covariance)``, the covariance the inverse
    Fisher information at ``beta``. Finite where plain maximum likelihood diverges (a cell that
    solved every episode or none). In a saturated design it is the empirical logit of each cell
    with half a success and half a failure added (the Haldane correction). Steps are cut to
    ``max_step`` in every coordinate and halved until the penalized likelihood rises (as R's
    ``logistf``): full steps from a cell of few episodes overshoot, and used to cycle or leave
    the information matrix singular, which read as a singular design.

    ``x``: episodes × columns (an intercept column first); ``y``: 0/1 per episode.

    Raises:
        ValueError: ``"singular design: ..."``, the columns of ``x`` are linearly dependent.
        FirthDiverged: (a ``ValueError``) the iterations did not stay finite, or did not
            converge in ``iterations``.
    """
    import numpy as np

    x, y = np.asarray(x, float), np.asarray(y, float)
    if np.linalg.matrix_rank(x) < x.shape[1]:
        raise ValueError(f"singular design: rank {np.linalg.matrix_rank(x)} of {x.shape[1]} columns")

    def information(beta: Any) -> tuple[Any, Any]:
        p = 1 / (1 + np.exp(-(x @ beta)))
        return p, x.T @ (x * (p * (1 - p))[:, None])

    def penalized(beta: Any) -> float:
        eta = x @ beta
        sign, logdet = np.linalg.slogdet(information(beta)[1])
        return float(np.sum(y * eta - np.logaddexp(0, eta)) + 0.5 * logdet) if sign > 0 else -math.inf

    beta = np.zeros(x.shape[1])
    current = penalized(beta)
    for done in range(1, iterations + 1):
        p, info = information(beta)
        try:
            inverse = np.linalg.inv(info)
        except np.linalg.LinAlgError:
            raise FirthDiverged(f"Firth's iterations diverged: the information matrix became singular at iteration "
                                f"{done} (estimates {np.round(beta, 2).tolist()})") from None
        w = p * (1 - p)
        hat = np.einsum("ij,jk,ik->i", x * np.sqrt(w)[:, None], inverse, x * np.sqrt(w)[:, None])
        step = inverse @ (x.T @ (y - p + hat * (0.5 - p)))
        if not np.all(np.isfinite(step)):
            raise FirthDiverged(f"Firth's iterations diverged: a non-finite step at iteration {done}")
        size = float(np.max(np.abs(step)))
        if size < tol:
            break
        step = step * min(1.0, max_step / size)
        # step-halving until the penalized likelihood rises (a full step can overshoot into a
        # cycle between two points of one value: their midpoint is higher)
        for _ in range(30):
            value = penalized(beta + step)
            if value > current:
                break
            step = step / 2
        if not value > current:  # no step along it raises the penalized likelihood
            if size < 1e-4:  # at the optimum, to rounding
                break
            raise FirthDiverged(f"Firth's iterations diverged: no step raises the penalized likelihood at iteration "
                                f"{done} (estimates {np.round(beta, 2).tolist()})")
        beta, current = beta + step, value
    else:
        raise FirthDiverged(f"Firth's iterations did not converge in {iterations} iterations "
                            f"(estimates {np.round(beta, 2).tolist()})")
    p, info = information(beta)
    try:
        return beta, np.linalg.inv(info)
    except np.linalg.LinAlgError:
        raise FirthDiverged("Firth's iterations diverged: the information matrix at the estimates is singular") from None


def _firth_model(out: dict[str, Any], names: list[str], x: Any, y: Any, degenerate: list[str]) -> dict[str, Any]:
    """The model when a cell is degenerate: Firth's estimates, model-based Wald intervals."""
    from statistics import NormalDist

    try:
        beta, cov = firth_logistic(x, y)
    except ValueError as exc:  # singular design or diverged: the message says which
        return {**out, "status": "not estimable", "method": FIRTH_METHOD, "reason": str(exc)}
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
            + (f"; and {len(degenerate) - 3} more" if len(degenerate) > 3 else "") + "): Firth's penalized estimates with model-based (not seed-clustered) intervals"}


def factor_curves(sweep: Mapping[str, Any], rows: list[dict[str, Any]], nominal: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per factor, success against level: the nominal point and each run that changes only
    that factor, ``{level, run, k, n, success_rate, ci95, errors, episodes, nominal}`` (in
    order of level when every level is a number, the nominal one where its value falls, e.g.
    after a smaller level; else nominal first, then sweep order; ``success_rate`` ``None`` for a
    level that could not run)."""
    curves: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if len(row["factors"]) != 1:
            continue
        (factor, level), = row["factors"].items()
        curve = curves.setdefault(factor, [{"level": _nominal_value(factor), "run": sweep["nominal"], "nominal": True,
                                             **{k: nominal.get(k) for k in ("k", "n", "success_rate", "ci95", "errors", "episodes")}}])
        curve.append({"level": level, "run": row["run"], "nominal": False, "k": row["k"], "n": row["n"],
                      "success_rate": row["success_rate"], "ci95": row["rate_ci95"], "errors": row.get("errors"),
                      "episodes": row.get("episodes")})
    for factor, curve in curves.items():  # along the axis: by level, the nominal one where its value falls
        if all(isinstance(p["level"], (int, float)) and not isinstance(p["level"], bool) for p in curve):
            curve.sort(key=lambda p: p["level"])
    return curves


#: The most of an error reason the reading quotes.
_READING_REASON_CHARS = 120


def _short(text: str) -> str:
    return text if len(text) <= _READING_REASON_CHARS else text[: _READING_REASON_CHARS - 1] + "…"


def reading(rows: list[dict[str, Any]], nominal: Mapping[str, Any]) -> str:
    """One line naming the largest drops (those significant after Holm first), then every
    level that could not run (``"object_mass=12 could not run: ..."``) and every level with
    error episodes (``"object_mass=6: 3 of 8 episodes errored (...)"``): errors are an outcome
    of the level, and a level whose errors hide its failures must not read as harmless."""

    def levels_of(r: Mapping[str, Any]) -> str:
        return ", ".join(f"{k}={v}" for k, v in r["factors"].items())

    def say(r: dict[str, Any]) -> str:
        sig = "significant" if r.get("significant_holm") else "not significant"
        return f"{levels_of(r)} {100 * r['difference']:+.0f} points ({sig} after Holm)"

    notes = [f"nominal could not run: {_short(str(nominal['not_run_reason']))}"] if nominal.get("not_run_reason") else []
    notes += [f"{levels_of(r)} could not run: {_short(str(r.get('not_run_reason')))}" for r in rows if r.get("status") == "not run"]
    for r in rows:
        if r.get("status") != "not run" and r.get("errors"):
            reason = str(r.get("error_note") or "").partition(": ")[2]
            notes.append(f"{levels_of(r)}: {r['errors']} of {r['episodes']} episodes errored"
                         + (f" ({_short(reason)})" if reason else ""))
    if nominal.get("errors") and not nominal.get("not_run_reason"):
        reason = str(nominal.get("error_note") or "").partition(": ")[2]
        notes.append(f"nominal: {nominal['errors']} of {nominal['episodes']} episodes errored" + (f" ({_short(reason)})" if reason else ""))
    tested = [r for r in rows if r.get("difference") is not None]
    rate = nominal.get("success_rate")
    head = f"nominal {100 * rate:.0f}%; " if rate is not None else ""
    if not tested:
        line = "no perturbed level has episodes to compare"
    else:
        worst = sorted(tested, key=lambda r: r["difference"])[:2]
        if worst[0]["difference"] >= 0:
            line = head + "no perturbed level lowered success"
        else:
            line = head + "largest drops: " + "; ".join(say(r) for r in worst if r["difference"] < 0)
    return "; ".join([line, *notes])


def attribution(output_dir: str | Path, runs: Mapping[str, Any], records_of: Mapping[str, list[Any]],
                setups: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """Every sweep of an experiment analysed (module docstring), or ``None`` without sweeps.

    ``runs``: the runs' entries of ``experiment_result.json`` (their ``error`` says why a level
    could not run). Returns ``{"sweeps": {group: {nominal, nominal_rate, factors, rows, curves,
    model, reading}}, "multiplicity", "methods"}``; rows carry ``p_holm`` / ``significant_holm``;
    ``methods.errors`` says how error episodes were treated.
    """
    from arena.outputs.layout import read_snapshot

    snapshot = read_snapshot(Path(output_dir))
    sweeps = find_sweeps(runs, snapshot, records_of)
    if not sweeps:
        return None
    out: dict[str, Any] = {}
    all_rows: list[dict[str, Any]] = []
    for group, sweep in sweeps.items():
        rows = level_rows(sweep, records_of, setups, runs)
        all_rows += rows
        nominal = _rate(records_of.get(sweep["nominal"], []))
        nominal["not_run_reason"] = _not_run_reason(sweep["nominal"], nominal, runs)
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
                    "adjustment": "holm", "model": MODEL_METHOD, "errors": ERRORS_TREATMENT},
    }
