"""Interval tables of :meth:`~counterfair.audit.GroupAudit.metrics`: exact, Poisson, analytic."""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from ._confusion import RATE_METRICS, confusion_rates
from ._groups import GroupLayout
from ._tables import ci_frame, disparities, divide
from .analytic import binomial_variance, disparity_intervals, share_intervals, wilson_interval
from .bootstrap import Seed, bootstrap, percentile_interval
from .poisson_bootstrap import PoissonAccumulator, stratified_group_sums


def bootstrap_tables(
    layout: GroupLayout,
    weights: NDArray[np.float64],
    reference_of_row: NDArray[np.intp],
    n_bootstrap: int,
    interval: float,
    seed: Seed,
) -> list[pd.DataFrame | None]:
    attribute_of_row = layout.attribute_of_row

    def statistic(rows: NDArray[np.intp]) -> NDArray[np.float64]:
        return _replicate(layout.group_sums(weights, rows), attribute_of_row, reference_of_row)

    samples = bootstrap(statistic, layout.n, n_resamples=n_bootstrap, seed=seed,
                        strata=layout.strata)
    lower, upper = percentile_interval(samples, interval)
    return [ci_frame(lower[k], upper[k], layout.index, RATE_METRICS) for k in range(3)]


def _replicate(sums: NDArray[np.float64], attribute_of_row: NDArray[np.intp],
               reference_of_row: NDArray[np.intp]) -> NDArray[np.float64]:
    """Rates, ratios and differences ``(3, G, len(RATE_METRICS))`` of one replicate."""
    _, rates = confusion_rates(sums, attribute_of_row)
    ratio, difference = disparities(rates, reference_of_row)
    return np.stack([rates, ratio, difference])


def poisson_tables(
    layout: GroupLayout,
    accumulator: PoissonAccumulator,
    observed: NDArray[np.float64],
    membership: NDArray[np.float64],
    reference_of_row: NDArray[np.intp],
    interval: float,
) -> list[pd.DataFrame | None]:
    """Percentile intervals of the chunked, stratum-rescaled Poisson bootstrap, from the
    merged accumulator and the observed per-stratum sums."""
    sums = stratified_group_sums(accumulator, observed, membership)
    attribute_of_row = layout.attribute_of_row
    samples = np.stack([_replicate(sums[:, :, b], attribute_of_row, reference_of_row)
                        for b in range(accumulator.n_replicates)])
    lower, upper = percentile_interval(samples, interval)
    return [ci_frame(lower[k], upper[k], layout.index, RATE_METRICS) for k in range(3)]


def analytic_tables(
    layout: GroupLayout,
    strata: NDArray[np.float64],
    membership: NDArray[np.float64],
    reference_of_row: NDArray[np.intp],
    interval: float,
) -> list[pd.DataFrame | None]:
    """Wilson intervals of the rates, delta-method intervals of ratios and differences.

    The share of all positive decisions (``predicted_positive_rate``) is not a binomial
    proportion of the group; it gets :func:`~counterfair.audit.analytic.share_intervals`
    with the variance of each group's count of positive decisions given the sizes of
    its strata, ``sum_s pp_s (n_s - pp_s) / n_s``.
    """
    n, pos, pp, tp = (membership @ strata).T
    fp, fn = pp - tp, pos - tp
    tn = n - pos - fp
    attribute_of_row = layout.attribute_of_row
    all_pp = np.bincount(attribute_of_row, weights=pp)[attribute_of_row]
    # successes and trials in the order of RATE_METRICS
    successes = np.column_stack([pos, pp, pp, tp, tn, fp, fn, tp, fp, fn, tp + tn, tn])
    trials = np.column_stack([n, n, all_pp, pos, tn + fp, fp + tn, fn + tp, tp + fp, tp + fp,
                              fn + tn, n, tn + fn])
    lower, upper = wilson_interval(successes, trials, interval)
    values = divide(successes, trials)
    (ratio_lower, ratio_upper), (diff_lower, diff_upper) = disparity_intervals(
        values, binomial_variance(successes, trials), reference_of_row, interval)
    share = RATE_METRICS.index("predicted_positive_rate")
    stratum_var = divide(strata[:, 2] * (strata[:, 0] - strata[:, 2]), strata[:, 0])
    bounds = share_intervals(pp, membership @ stratum_var, attribute_of_row, reference_of_row,
                             interval)
    for (low, high), (share_low, share_high) in zip(
            [(lower, upper), (ratio_lower, ratio_upper), (diff_lower, diff_upper)], bounds,
            strict=True):
        low[:, share], high[:, share] = share_low, share_high
    return [ci_frame(lower, upper, layout.index, RATE_METRICS),
            ci_frame(ratio_lower, ratio_upper, layout.index, RATE_METRICS),
            ci_frame(diff_lower, diff_upper, layout.index, RATE_METRICS)]
