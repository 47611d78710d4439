"""Group measures for regression outcomes (e.g. first-year average grade, ZFYA).

Per group: mean outcome, mean prediction, mean residual (``y_true - y_pred``: positive
means the group is *under*-predicted) and RMSE, with differences and ratios to the
reference group and optional bootstrap intervals.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ._groups import GroupLayout, Intersections, Protected, build_layout, protected_frame
from ._tables import ci_frame, disparities, divide
from ._validation import as_numeric, check_count, check_lengths, check_open_unit
from .bootstrap import Seed, bootstrap, percentile_interval

REGRESSION_METRICS: tuple[str, ...] = ("mean_outcome", "mean_prediction", "mean_residual",
                                       "rmse")
"""Measure columns of :attr:`RegressionReport.by_group` (besides ``size``)."""


@dataclass(frozen=True, kw_only=True)
class RegressionReport:
    """Result of :func:`regression_metrics`; tables indexed by ``(attribute, group)``.

    Attributes
    ----------
    by_group
        ``size`` and :data:`REGRESSION_METRICS` per group.
    differences
        Each measure minus the reference group's.
    ratios
        Each measure divided by the reference group's (NaN where that is 0; mean residual
        ratios are only meaningful when residuals share a sign).
    reference
        Reference group of each attribute.
    confidence, n_bootstrap
        Interval level and number of resamples.
    ci, ratio_ci, difference_ci
        Bootstrap percentile intervals (columns ``(measure, "lower"|"upper")``) or
        ``None`` when ``n_bootstrap == 0``.
    """

    by_group: pd.DataFrame
    differences: pd.DataFrame
    ratios: pd.DataFrame
    reference: Mapping[str, Hashable]
    confidence: float
    n_bootstrap: int
    ci: pd.DataFrame | None = None
    ratio_ci: pd.DataFrame | None = None
    difference_ci: pd.DataFrame | None = None


def _measures(layout: GroupLayout, weights: NDArray[np.float64],
              rows: NDArray[np.intp] | None = None) -> NDArray[np.float64]:
    sums = layout.group_sums(weights, rows)
    n = sums[:, :1]
    means = divide(sums[:, 1:], n)
    means[:, 3] = np.sqrt(means[:, 3])  # mean squared residual -> RMSE
    return np.column_stack([n[:, 0], means])


def regression_metrics(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    protected: Protected,
    *,
    intersections: Intersections = True,
    reference: Mapping[str, Hashable] | None = None,
    n_bootstrap: int = 0,
    confidence: float = 0.95,
    seed: Seed = 0,
) -> RegressionReport:
    """Per-group regression measures with differences and ratios to a reference group.

    Parameters
    ----------
    y_true, y_pred
        Observed and predicted real outcomes.
    protected, intersections, reference
        As in :func:`counterfair.audit.group_metrics` (default reference:
        :data:`~counterfair.audit.REFERENCE_RULE`).
    n_bootstrap
        Bootstrap resamples (0: none), stratified by all protected attributes crossed.
    confidence
        Level of the intervals.
    seed
        Seed of the bootstrap.

    Returns
    -------
    RegressionReport
    """
    y = as_numeric(y_true, "y_true")
    pred = as_numeric(y_pred, "y_pred")
    check_lengths([("y_true", y.size), ("y_pred", pred.size)])
    frame = protected_frame(protected, y.size)
    n_bootstrap = check_count(n_bootstrap, "n_bootstrap")
    confidence = check_open_unit(confidence, "confidence")

    layout = build_layout(frame, intersections)
    residual = y - pred
    weights = np.column_stack([np.ones_like(y), y, pred, residual, residual**2])
    ref_rows = layout.reference_rows(reference)
    reference_of_row = ref_rows[layout.attribute_of_row]
    index = layout.index
    columns = list(REGRESSION_METRICS)

    values = _measures(layout, weights)
    ratio, difference = disparities(values[:, 1:], reference_of_row)
    by_group = pd.DataFrame(values[:, 1:], index=index, columns=columns)
    by_group.insert(0, "size", values[:, 0].astype(np.int64))

    intervals: list[pd.DataFrame | None] = [None, None, None]
    if n_bootstrap:
        def statistic(rows: NDArray[np.intp]) -> NDArray[np.float64]:
            measures = _measures(layout, weights, rows)[:, 1:]
            return np.stack([measures, *disparities(measures, reference_of_row)])

        samples = bootstrap(statistic, layout.n, n_resamples=n_bootstrap, seed=seed,
                            strata=layout.strata)
        lower, upper = percentile_interval(samples, confidence)
        intervals = [ci_frame(lower[k], upper[k], index, columns) for k in range(3)]
    return RegressionReport(
        by_group=by_group,
        differences=pd.DataFrame(difference, index=index, columns=columns),
        ratios=pd.DataFrame(ratio, index=index, columns=columns),
        reference=layout.reference_labels(ref_rows),
        confidence=confidence,
        n_bootstrap=n_bootstrap,
        ci=intervals[0],
        ratio_ci=intervals[1],
        difference_ci=intervals[2],
    )
