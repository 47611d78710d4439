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
from .bootstrap import Seed, bootstrap, percentile_interval

TWO_GROUP_MEASURES: tuple[str, ...] = (
    "statistical_parity_difference",
    "equal_opportunity_difference",
    "disparate_impact",
)
"""Rows of the table returned by :func:`two_group_measures`."""


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


def two_group_measures(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    protected: ArrayLike,
    *,
    privileged: Hashable,
    tau: float = 0.8,
    n_bootstrap: int = 0,
    confidence: float = 0.95,
    seed: Seed = 0,
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
    n_bootstrap, confidence, seed
        Percentile bootstrap interval, stratified by ``A`` (0 resamples: NaN bounds).

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
    confidence = check_open_unit(confidence, "confidence")
    estimate = _measures(y, pred, priv)
    samples = bootstrap(lambda rows: _measures(y[rows], pred[rows], priv[rows]), y.size,
                        n_resamples=n_bootstrap, seed=seed, strata=priv.astype(np.intp))
    lower, upper = percentile_interval(samples, confidence)
    unfair = pd.array([pd.NA, pd.NA, pd.NA], dtype="boolean")
    if np.isfinite(estimate[2]):
        unfair[2] = bool(estimate[2] <= tau)
    return pd.DataFrame({"estimate": estimate, "lower": lower, "upper": upper,
                         "unfair": unfair},
                        index=pd.Index(list(TWO_GROUP_MEASURES), name="measure"))
