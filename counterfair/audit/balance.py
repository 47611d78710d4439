"""Balance for the positive and the negative class (Kleinberg, Mullainathan, Raghavan 2017).

``balance_positive(a) = E[score | A = a, Y = 1]`` and ``balance_negative(a) =
E[score | A = a, Y = 0]``; a score is balanced when these are equal across groups.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ._groups import Intersections, Protected, build_layout, protected_frame
from ._tables import ci_frame, disparities, divide
from ._validation import (
    as_binary,
    as_numeric,
    check_count,
    check_lengths,
    check_open_unit,
)
from .bootstrap import Seed, bootstrap, percentile_interval

BALANCE_MEASURES: tuple[str, ...] = ("balance_positive", "balance_negative")
"""Columns of :meth:`counterfair.audit.GroupAudit.class_balance`'s estimates."""


def _balance(sums: NDArray[np.float64]) -> NDArray[np.float64]:
    pos, neg, score_pos, score_neg = sums.T
    return np.column_stack([divide(score_pos, pos), divide(score_neg, neg)])


def _class_balance(
    y_true: ArrayLike,
    scores: ArrayLike,
    protected: Protected,
    *,
    intersections: Intersections = True,
    reference: Mapping[str, Hashable] | None = None,
    n_bootstrap: int = 0,
    interval: float = 0.95,
    seed: Seed = 0,
) -> pd.DataFrame:
    """Mean score of each group among actual positives and among actual negatives.

    Parameters
    ----------
    y_true
        Actual binary labels.
    scores
        Real-valued scores (e.g. predicted probabilities).
    protected, intersections, reference
        Groups as in :class:`counterfair.audit.GroupAudit`.
    n_bootstrap, interval, seed
        Stratified percentile bootstrap intervals (0 resamples: none).

    Returns
    -------
    pandas.DataFrame
        Indexed by ``(attribute, group)``; columns ``balance_positive``,
        ``balance_negative``, their differences to the reference group
        (``*_difference``) and, with bootstrap, ``*_lower`` / ``*_upper`` for all four.
        A group without positives (negatives) has NaN for that class.
    """
    y = as_binary(y_true, "y_true")
    s = as_numeric(scores, "scores")
    check_lengths([("y_true", y.size), ("scores", s.size)])
    frame = protected_frame(protected, y.size)
    n_bootstrap = check_count(n_bootstrap, "n_bootstrap")
    interval = check_open_unit(interval, "interval")
    layout = build_layout(frame, intersections)
    weights = np.column_stack([y, 1.0 - y, s * y, s * (1.0 - y)])
    ref_rows = layout.reference_rows(reference)[layout.attribute_of_row]

    def statistic(rows: NDArray[np.intp] | None) -> NDArray[np.float64]:
        values = _balance(layout.group_sums(weights, rows))
        return np.hstack([values, disparities(values, ref_rows)[1]])

    estimate = statistic(None)
    names = [*BALANCE_MEASURES, *(f"{m}_difference" for m in BALANCE_MEASURES)]
    out = pd.DataFrame(estimate, index=layout.index, columns=names)
    if n_bootstrap:
        samples = bootstrap(statistic, layout.n, n_resamples=n_bootstrap, seed=seed,
                            strata=layout.strata)
        lower, upper = percentile_interval(samples, interval)
        ci = ci_frame(lower, upper, layout.index, names)
        for name in names:
            out[f"{name}_lower"] = ci[(name, "lower")]
            out[f"{name}_upper"] = ci[(name, "upper")]
    return out
