"""The names of the statistical methods a result carries, each with the line that explains it.

``experiment_result.json`` and ``arena compare --json`` name each figure's method
(``ci_method``, ``test_method``); the report and ``arena compare`` print :data:`METHODS`' line
for each, and :func:`holm_note` beside p-values adjusted together.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Every method name a figure of ``experiment_result.json`` or ``arena compare --json`` may
#: carry, with the one line the report and ``arena compare`` explain it by.
METHODS = {
    "wilson": "Wilson score interval of one run's k/n (fixed number of episodes); also of a boolean (0/1) "
    "episode metric's mean.",
    "stratified-wilson-effective-n": "Wilson interval at a suite's weighted rate with the effective number of "
    "episodes of its tasks (strata), so each task contributes its own variance.",
    "newcombe-hybrid-score": "Newcombe's (1998, method 10) interval for the difference of two independent rates.",
    "newcombe-paired-hybrid-score": "Newcombe's (1998, method 10 for paired data) interval for the difference of "
    "two rates measured on the same episodes (seeds, init states).",
    "mcnemar-exact": "McNemar's exact test: a binomial test on the episodes only one of two paired runs solved.",
    "fisher-exact": "Fisher's exact test of two independent rates (two-sided).",
    "holm": "Holm's step-down adjustment of the p-values shown together (family-wise error 5%).",
    "stratified-adjusted-wald-per-task": "A suite difference: the mean of per-task differences, its variance summed "
    "over tasks (Agresti-Caffo for unpaired tasks, Agresti-Min for paired).",
    "glm-binomial-cluster-robust": "A perturbation sweep's logistic model of success on its factor levels "
    "(statsmodels GLM, Binomial), with standard errors clustered by episode seed (the sweep's runs share seeds).",
    "firth-penalized-logistic": "Firth's (1993) bias-reduced logistic regression, used when a sweep's cell solved "
    "every episode or none (plain maximum likelihood is infinite there); model-based Wald intervals.",
    "betting-confidence-sequence": "Waudby-Smith & Ramdas (2023) betting confidence sequence: valid at every "
    "episode count, so after stopping early too.",
    "betting-bounded-mean": "An episode metric with known bounds (declared by the environment): the hedged "
    "betting confidence interval for the mean of a bounded variable (Waudby-Smith & Ramdas 2023, JRSS-B 86(1), "
    "section 4); valid for any distribution inside the bounds, never outside them, never of zero width.",
    "student-t-clipped": "An episode metric bounded on one side only (latency, a control rate, a return of "
    "non-negative rewards): Student's t interval of the mean with the end past the bound moved onto it (the mean "
    "cannot be past it, so coverage is unchanged); assumes roughly normal episode values.",
    "student-t": "An episode metric without known bounds: Student's t interval of the mean (quantile from "
    "scipy.stats.t); assumes roughly normal episode values.",
}



#: What the report and ``arena compare`` say about Holm-adjusted p-values next to intervals.
HOLM_NOTE = (
    "p-values adjusted for the {m} tests shown (Holm 1979: family-wise error rate 5%); "
    "the intervals beside them are 95% for each difference alone, not adjusted"
)


def holm_note(p_values: Iterable[float | None]) -> str | None:
    """:data:`HOLM_NOTE` for the tested p-values (not ``None``) shown together; ``None`` when
    fewer than two were tested (nothing was adjusted)."""
    tested = sum(p is not None for p in p_values)
    return HOLM_NOTE.format(m=tested) if tested > 1 else None
