"""Privileged versus unprivileged: the three group measures of Cesaro's study.

With ``A = 1`` the privileged group and ``A = 0`` everyone else:

* statistical parity difference ``P(Y^ = 1 | A = 0) - P(Y^ = 1 | A = 1)``;
* equal opportunity difference ``TPR(A = 0) - TPR(A = 1)``;
* disparate impact ``P(Y^ = 1 | A = 0) / P(Y^ = 1 | A = 1)``, unfair when ``<= tau``
  (``tau = 0.8``: a ratio of exactly 80 % is already disparate impact).

Negative differences and ratios below 1 favour the privileged group.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ._tables import divide
from ._validation import (
    GROUP_NOT_FOUND,
    NO_OTHER_GROUP,
    as_1d,
    as_binary,
    check_count,
    check_lengths,
    check_open_unit,
    check_tau,
    shown,
)
from .analytic import binomial_variance, disparity_intervals
from .bootstrap import Seed, bootstrap, percentile_interval, resolve_ci_method
from .poisson_bootstrap import accumulate, seed_word, stratified_group_sums

TWO_GROUP_MEASURES: tuple[str, ...] = (
    "statistical_parity_difference",
    "equal_opportunity_difference",
    "disparate_impact",
)
"""Rows of the table returned by :meth:`counterfair.audit.GroupAudit.two_group`."""


def privileged_indicator(protected: ArrayLike, privileged: Hashable,
                         name: str = "protected") -> NDArray[np.bool_]:
    """``True`` where ``protected == privileged``; raise when either side is empty."""
    values = as_1d(protected, name)
    mask = np.asarray(pd.Series(values, dtype=object) == privileged, dtype=bool)
    if not mask.any():
        labels = sorted({str(v) for v in pd.unique(pd.Series(values, dtype=object))})
        raise ValueError(GROUP_NOT_FOUND.format(name="privileged group", group=privileged,
                                                where=name, available=shown(labels)))
    if mask.all():
        raise ValueError(NO_OTHER_GROUP.format(name="privileged group", group=privileged))
    return mask


def _rate(values: NDArray[np.float64]) -> float:
    return float(values.mean()) if values.size else float("nan")


def _measures(y: NDArray[np.float64], pred: NDArray[np.float64],
              priv: NDArray[np.bool_]) -> NDArray[np.float64]:
    rate_u, rate_p = _rate(pred[~priv]), _rate(pred[priv])
    tpr_u = _rate(pred[~priv & (y == 1)])
    tpr_p = _rate(pred[priv & (y == 1)])
    ratio = rate_u / rate_p if rate_p > 0 else float("nan")
    return np.array([rate_u - rate_p, tpr_u - tpr_p, ratio])


def _analytic(y: NDArray[np.float64], pred: NDArray[np.float64], strata: NDArray[np.intp],
              interval: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Delta-method bounds of the three measures (unprivileged = row 0, reference row 1)."""
    n = np.bincount(strata, minlength=2).astype(np.float64)
    selected = np.bincount(strata, weights=pred, minlength=2)
    positives = np.bincount(strata, weights=y, minlength=2)
    true_pos = np.bincount(strata, weights=y * pred, minlength=2)
    successes = np.column_stack([selected, true_pos]).astype(np.float64)
    trials = np.column_stack([n, positives])
    (ratio_lower, ratio_upper), (diff_lower, diff_upper) = disparity_intervals(
        divide(successes, trials), binomial_variance(successes, trials), np.array([1, 1]),
        interval)
    return (np.array([diff_lower[0, 0], diff_lower[0, 1], ratio_lower[0, 0]]),
            np.array([diff_upper[0, 0], diff_upper[0, 1], ratio_upper[0, 0]]))


def _two_group_measures(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    protected: ArrayLike,
    *,
    privileged: Hashable,
    tau: float = 0.8,
    n_bootstrap: int = 0,
    interval: float = 0.95,
    seed: Seed = 0,
    ci_method: str = "auto",
) -> pd.DataFrame:
    """Statistical parity difference, equal opportunity difference and disparate impact.

    Parameters
    ----------
    y_true
        Actual binary labels (1: favourable).
    y_pred
        Binary decisions (1: favourable).
    protected
        Protected attribute; the rows equal to ``privileged`` form ``A = 1``, all others
        ``A = 0``.
    privileged
        Label of the privileged group.
    tau
        Disparate-impact threshold in (0, 1]: unfair when the ratio is ``<= tau``.
    n_bootstrap, interval, seed
        Percentile bootstrap interval, stratified by ``A`` (0 resamples: NaN bounds).
    ci_method
        As in :class:`counterfair.audit.GroupAudit`: ``"auto"`` (exact bootstrap up
        to 100,000 rows, Poisson bootstrap above), ``"bootstrap"``, ``"poisson"``
        (chunked, memory independent of the rows) or ``"analytic"`` (delta method: normal
        intervals for the two differences, log scale for disparate impact).

    Returns
    -------
    pandas.DataFrame
        Rows :data:`TWO_GROUP_MEASURES`, columns ``estimate, lower, upper`` and
        ``unfair`` (disparate impact only: ``ratio <= tau``; ``<NA>`` elsewhere or when
        undefined).
    """
    y = as_binary(y_true, "y_true")
    pred = as_binary(y_pred, "y_pred")
    priv = privileged_indicator(protected, privileged)
    check_lengths([("y_true", y.size), ("y_pred", pred.size), ("protected", priv.size)])
    tau = check_tau(tau)
    n_bootstrap = check_count(n_bootstrap, "n_bootstrap")
    interval = check_open_unit(interval, "interval")
    method = resolve_ci_method(ci_method, n_bootstrap=n_bootstrap, n_rows=y.size, seed=seed)
    estimate = _measures(y, pred, priv)
    strata = priv.astype(np.intp)  # 0: unprivileged, 1: privileged
    if method == "analytic":
        lower, upper = _analytic(y, pred, strata, interval)
    elif method == "poisson":
        values = np.column_stack([np.ones_like(y), pred, y, y * pred])
        accumulator = accumulate(strata, values, n_strata=2, n_replicates=n_bootstrap,
                                 seed=seed_word(seed))
        observed = np.vstack([values[strata == g].sum(axis=0) for g in (0, 1)])
        sums = stratified_group_sums(accumulator, observed, np.eye(2))
        rate, tpr = divide(sums[:, 1], sums[:, 0]), divide(sums[:, 3], sums[:, 2])
        samples = np.column_stack([rate[0] - rate[1], tpr[0] - tpr[1],
                                   divide(rate[0], rate[1])])
        lower, upper = percentile_interval(samples, interval)
    else:
        samples = bootstrap(lambda rows: _measures(y[rows], pred[rows], priv[rows]), y.size,
                            n_resamples=n_bootstrap if method else 0, seed=seed, strata=strata)
        lower, upper = percentile_interval(samples, interval)
    unfair = pd.array([pd.NA, pd.NA, pd.NA], dtype="boolean")
    if np.isfinite(estimate[2]):
        unfair[2] = bool(estimate[2] <= tau)
    return pd.DataFrame({"estimate": estimate, "lower": lower, "upper": upper,
                         "unfair": unfair},
                        index=pd.Index(list(TWO_GROUP_MEASURES), name="measure"))
