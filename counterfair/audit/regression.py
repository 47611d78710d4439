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
from numpy.typing import NDArray

from ._groups import GroupLayout
from ._tables import ci_frame, disparities, divide
from .analytic import disparity_intervals, mean_variance, normal_interval
from .bootstrap import Seed, bootstrap, percentile_interval
from .poisson_bootstrap import (
    PoissonAccumulator,
    accumulate,
    seed_word,
    stratified_group_sums,
)

REGRESSION_METRICS: tuple[str, ...] = ("mean_outcome", "mean_prediction", "mean_residual",
                                       "rmse")
"""Measure columns of :attr:`RegressionReport.by_group` (besides ``size``)."""


@dataclass(frozen=True, kw_only=True)
class RegressionReport:
    """Result of :meth:`counterfair.audit.GroupAudit.metrics` (regression); tables indexed
    by ``(attribute, group)``.

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
    interval, n_bootstrap
        Interval level and number of resamples (0: no resampling).
    ci, ratio_ci, difference_ci
        Intervals (columns ``(measure, "lower"|"upper")``) or ``None`` without
        intervals.
    ci_method
        ``"bootstrap"``, ``"poisson"``, ``"analytic"`` or ``None`` (no intervals).
    """

    by_group: pd.DataFrame
    differences: pd.DataFrame
    ratios: pd.DataFrame
    reference: Mapping[str, Hashable]
    interval: float
    n_bootstrap: int
    ci: pd.DataFrame | None = None
    ratio_ci: pd.DataFrame | None = None
    difference_ci: pd.DataFrame | None = None
    ci_method: str | None = None


def _measures(layout: GroupLayout, weights: NDArray[np.float64],
              rows: NDArray[np.intp] | None = None) -> NDArray[np.float64]:
    return _measures_from_sums(layout.group_sums(weights, rows))


def _measures_from_sums(sums: NDArray[np.float64]) -> NDArray[np.float64]:
    """Size and :data:`REGRESSION_METRICS` from sums of ``1, y, pred, r, r**2``."""
    n = sums[:, :1]
    means = divide(sums[:, 1:], n)
    means[:, 3] = np.sqrt(means[:, 3])  # mean squared residual -> RMSE
    return np.column_stack([n[:, 0], means])


def rows_report(
    y: NDArray[np.float64],
    pred: NDArray[np.float64],
    layout: GroupLayout,
    *,
    reference: Mapping[str, Hashable] | None,
    n_bootstrap: int,
    interval: float,
    seed: Seed,
    method: str | None,
    keys: NDArray[np.uint64] | None,
) -> RegressionReport:
    """The report of rows in memory, checked by :class:`~counterfair.audit.GroupAudit`
    with ``task=Regression()`` (whose :meth:`~counterfair.audit.GroupAudit.metrics`
    documents the measures; its ``"analytic"`` intervals: normal intervals ``mean +- z s
    / sqrt(n)`` for the means, the delta method for the RMSE -- normal on the log of the
    mean squared residual, which assumes residuals with finite fourth moments -- and for
    differences and ratios, log scale for the RMSE, linear for the means)."""
    weights = regression_weights(y, pred)
    point = weights[:, :N_POINT_SUMS]
    ref_rows = layout.reference_rows(reference)
    reference_of_row = ref_rows[layout.attribute_of_row]
    bootstrap_intervals = None
    accumulator = None
    if method == "bootstrap":
        def statistic(rows: NDArray[np.intp]) -> NDArray[np.float64]:
            measures = _measures(layout, point, rows)[:, 1:]
            return np.stack([measures, *disparities(measures, reference_of_row)])

        samples = bootstrap(statistic, layout.n, n_resamples=n_bootstrap, seed=seed,
                            strata=layout.strata)
        lower, upper = percentile_interval(samples, interval)
        bootstrap_intervals = [ci_frame(lower[k], upper[k], layout.index,
                                        list(REGRESSION_METRICS)) for k in range(3)]
    elif method == "poisson":
        accumulator = accumulate(layout.strata, point, n_strata=layout.n_strata,
                                 n_replicates=n_bootstrap, seed=seed_word(seed), keys=keys)
    return regression_report(
        layout, layout.stratum_sums(weights), reference=reference, interval=interval,
        n_bootstrap=n_bootstrap, method=method, accumulator=accumulator,
        bootstrap_intervals=bootstrap_intervals)


def regression_weights(y: NDArray[np.float64], pred: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per-row columns whose per-stratum sums make the whole report: ``1, y, pred, r, r**2``
    (the measures, :data:`N_POINT_SUMS` columns) and ``y**2, pred**2, r**4`` (their analytic
    variances), with the residual ``r = y - pred``."""
    residual = y - pred
    squared = residual**2
    return np.column_stack([np.ones_like(y), y, pred, residual, squared, y**2, pred**2,
                            squared**2])


N_POINT_SUMS = 5
"""Leading columns of :func:`regression_weights` that the measures and the bootstraps use."""


def regression_report(
    layout: GroupLayout,
    stratum_sums: NDArray[np.float64],
    *,
    reference: Mapping[str, Hashable] | None,
    interval: float,
    n_bootstrap: int,
    method: str | None,
    accumulator: PoissonAccumulator | None = None,
    bootstrap_intervals: list[pd.DataFrame | None] | None = None,
) -> RegressionReport:
    """The report from per-stratum sums of :func:`regression_weights`.

    Everything but the exact bootstrap is a function of these sums (and, for the Poisson
    bootstrap, of the merged ``accumulator``), so rows that arrive in chunks or Dask
    partitions give the report of all rows at once (:mod:`counterfair.dask.group_audits`).
    The exact bootstrap's tables are computed from the rows and passed in.
    """
    ref_rows = layout.reference_rows(reference)
    reference_of_row = ref_rows[layout.attribute_of_row]
    index = layout.index
    columns = list(REGRESSION_METRICS)
    membership = layout.strata_membership()
    group_sums = membership @ stratum_sums
    values = _measures_from_sums(group_sums[:, :N_POINT_SUMS])
    ratio, difference = disparities(values[:, 1:], reference_of_row)
    by_group = pd.DataFrame(values[:, 1:], index=index, columns=columns)
    by_group.insert(0, "size", np.rint(values[:, 0]).astype(np.int64))

    intervals: list[pd.DataFrame | None] = [None, None, None]
    if method == "bootstrap":
        if bootstrap_intervals is None:
            raise ValueError("the exact bootstrap's intervals are computed from the rows")
        intervals = bootstrap_intervals
    elif method == "poisson":
        if accumulator is None:
            raise ValueError("the Poisson bootstrap needs its accumulator")
        intervals = _poisson_tables(layout, accumulator, stratum_sums[:, :N_POINT_SUMS],
                                    membership, reference_of_row, interval)
    elif method == "analytic":
        intervals = _analytic_tables(layout, group_sums, reference_of_row, interval)
    return RegressionReport(
        by_group=by_group,
        differences=pd.DataFrame(difference, index=index, columns=columns),
        ratios=pd.DataFrame(ratio, index=index, columns=columns),
        reference=layout.reference_labels(ref_rows),
        interval=interval,
        n_bootstrap=n_bootstrap,
        ci=intervals[0],
        ratio_ci=intervals[1],
        difference_ci=intervals[2],
        ci_method=method,
    )


def _poisson_tables(layout: GroupLayout, accumulator: PoissonAccumulator,
                    observed: NDArray[np.float64], membership: NDArray[np.float64],
                    reference_of_row: NDArray[np.intp],
                    interval: float) -> list[pd.DataFrame | None]:
    """Percentile intervals of the chunked, stratum-rescaled Poisson bootstrap."""
    sums = stratified_group_sums(accumulator, observed, membership)
    replicates = []
    for b in range(accumulator.n_replicates):
        measures = _measures_from_sums(sums[:, :, b])[:, 1:]
        replicates.append(np.stack([measures, *disparities(measures, reference_of_row)]))
    lower, upper = percentile_interval(np.stack(replicates), interval)
    return [ci_frame(lower[k], upper[k], layout.index, list(REGRESSION_METRICS))
            for k in range(3)]


def _analytic_tables(layout: GroupLayout, group_sums: NDArray[np.float64],
                     reference_of_row: NDArray[np.intp],
                     interval: float) -> list[pd.DataFrame | None]:
    """Normal intervals of the means, delta method for the RMSE and the disparities, from
    per-group sums of :func:`regression_weights`."""
    n, s_y, s_p, s_r, s_r2, s_y2, s_p2, s_r4 = group_sums.T
    mse = divide(s_r2, n)
    values = np.column_stack([divide(s_y, n), divide(s_p, n), divide(s_r, n), np.sqrt(mse)])
    variances = np.column_stack([
        mean_variance(n, s_y, s_y2),
        mean_variance(n, s_p, s_p2),
        mean_variance(n, s_r, s_r2),
        divide(mean_variance(n, s_r2, s_r4), 4.0 * mse),  # d sqrt(m) = dm / (2 sqrt(m))
    ])
    lower, upper = normal_interval(values, variances, interval)
    # RMSE: normal on log MSE (positive, right-skewed), then back through the square root
    log_lower, log_upper = normal_interval(np.log(np.where(mse > 0, mse, np.nan)),
                                           divide(mean_variance(n, s_r2, s_r4), mse**2),
                                           interval)
    lower[:, 3], upper[:, 3] = np.exp(log_lower / 2.0), np.exp(log_upper / 2.0)
    (ratio_lower, ratio_upper), (diff_lower, diff_upper) = disparity_intervals(
        values, variances, reference_of_row, interval,
        log_scale=np.array([False, False, False, True]))  # means: linear; RMSE: log scale
    names = list(REGRESSION_METRICS)
    return [ci_frame(lower, upper, layout.index, names),
            ci_frame(ratio_lower, ratio_upper, layout.index, names),
            ci_frame(diff_lower, diff_upper, layout.index, names)]
