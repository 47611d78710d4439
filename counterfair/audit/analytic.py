"""Analytic intervals of the group audits: Wilson score, delta method, normal theory.

They need one pass over the rows (per-group counts and sums), no resampling, so they
cost O(rows) time and O(groups) memory, and for groups of thousands of rows they agree
with the bootstrap to within its Monte Carlo error (``tests/test_group_intervals.py``).

* A **rate** ``p = x / m`` (selection rate, TPR, FPR, accuracy ...: ``x`` successes among
  ``m`` rows of the group that qualify) gets the Wilson score interval (Wilson 1927):
  the set of ``p`` with ``|x/m - p| <= z sqrt(p (1 - p) / m)``, which stays inside
  [0, 1] and behaves for rates near 0 or 1 and small ``m``. Its variance for the
  disparities below is the binomial ``p (1 - p) / m``.
* A **difference** of a group's value to its reference group's: ``d +- z sqrt(V_g +
  V_ref)``; the two groups are disjoint rows, hence independent.
* A **ratio** ``r = v_g / v_ref`` of positive quantities (rates, RMSE): the delta
  method on the log scale, ``exp(log r +- z sqrt(V_g / v_g**2 + V_ref / v_ref**2))``
  (Katz et al. 1978), which keeps the interval positive and is invariant to swapping
  the two groups. Means that may be near or below zero (regression means), and rates
  of 0, get Fieller's interval (Fieller 1954): the ``r`` with ``(v_g - r v_ref)**2 <=
  z**2 (V_g + r**2 V_ref)``. It is close to the linear delta method ``r +- z sqrt(V_g +
  r**2 V_ref) / |v_ref|`` when ``v_ref`` is many standard errors from zero, and
  unbounded, ``(-inf, inf)``, when ``v_ref`` is not significantly different from zero
  (``v_ref**2 <= z**2 V_ref``): then no finite interval has the stated coverage and
  the bootstrap's percentiles of a ratio with a near-zero denominator are unstable too.
* A **mean** (regression: mean outcome, prediction, residual) gets ``mean +- z s /
  sqrt(n)``; the RMSE gets the delta method on the mean squared residual.
* The reference group's own ratio and difference are exactly 1 and 0, intervals
  included (as in the bootstrap).

These intervals treat the rows of a group as independent draws given the group's size.
The group audits' bootstraps hold the size of every cell of the protected attributes
fixed (all attributes crossed); for a group that is one cell the two agree, and for a
group that spans several cells (race when sex is protected too) the bootstrap's interval
of a rate is narrower by the share of the rate's variance that lies between the cells,
so Wilson's is then slightly conservative. Undefined estimates (no qualifying rows)
give NaN bounds.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._tables import divide
from ._validation import check_open_unit

Bounds = tuple[NDArray[np.float64], NDArray[np.float64]]


def z_value(interval: float) -> float:
    """Two-sided standard normal quantile ``z`` of an interval of mass ``interval``."""
    interval = check_open_unit(interval, "interval")
    return float(NormalDist().inv_cdf(0.5 + interval / 2.0))


def wilson_interval(successes: ArrayLike, trials: ArrayLike, interval: float = 0.95) -> Bounds:
    """Wilson score interval of a binomial proportion, elementwise.

    Parameters
    ----------
    successes
        Number of successes ``x`` (0 <= x <= m).
    trials
        Number of trials ``m``; NaN bounds where ``m == 0``.
    interval
        Two-sided level in (0, 1).

    Returns
    -------
    tuple of numpy.ndarray
        Lower and upper bounds: ``(p + z**2 / (2 m) -+ z sqrt(p (1 - p) / m + z**2 /
        (4 m**2))) / (1 + z**2 / m)`` with ``p = x / m``.
    """
    z = z_value(interval)
    x = np.asarray(successes, dtype=np.float64)
    m = np.asarray(trials, dtype=np.float64)
    p = divide(x, m)
    m_safe = np.where(m > 0, m, np.nan)
    z2 = z * z
    centre = (p + z2 / (2.0 * m_safe)) / (1.0 + z2 / m_safe)
    half = z * np.sqrt(np.clip(p * (1.0 - p), 0.0, None) / m_safe
                       + z2 / (4.0 * m_safe**2)) / (1.0 + z2 / m_safe)
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def binomial_variance(successes: ArrayLike, trials: ArrayLike) -> NDArray[np.float64]:
    """``p (1 - p) / m`` with ``p = x / m`` (NaN where ``m == 0``)."""
    x = np.asarray(successes, dtype=np.float64)
    m = np.asarray(trials, dtype=np.float64)
    p = divide(x, m)
    return divide(p * (1.0 - p), m)


def normal_interval(estimate: ArrayLike, variance: ArrayLike, interval: float) -> Bounds:
    """``estimate +- z sqrt(variance)`` (NaN where either is NaN)."""
    z = z_value(interval)
    est = np.asarray(estimate, dtype=np.float64)
    half = z * np.sqrt(np.clip(np.asarray(variance, dtype=np.float64), 0.0, None))
    return est - half, est + half


def disparity_intervals(
    values: NDArray[np.float64],
    variances: NDArray[np.float64],
    reference_of_row: NDArray[np.intp],
    interval: float,
    *,
    log_scale: bool | NDArray[np.bool_] = True,
) -> tuple[Bounds, Bounds]:
    """Delta-method intervals of ratios and differences to the reference group.

    Parameters
    ----------
    values
        Estimates ``(n_groups, n_measures)``.
    variances
        Their variances, same shape; a group and its reference group are independent
        (disjoint rows of one attribute).
    reference_of_row
        Row of each group's reference group.
    interval
        Two-sided level.
    log_scale
        Per measure (or for all): ratio intervals on the log scale where the ratio is
        positive; Fieller's interval elsewhere.

    Returns
    -------
    tuple
        ``((ratio_lower, ratio_upper), (difference_lower, difference_upper))``.
    """
    z = z_value(interval)
    ref_value = values[reference_of_row]
    ref_var = variances[reference_of_row]
    is_ref = (np.arange(values.shape[0]) == reference_of_row)[:, None]

    difference = values - ref_value
    diff_sd = np.where(is_ref, 0.0, np.sqrt(np.clip(variances + ref_var, 0.0, None)))
    diff_bounds = (difference - z * diff_sd, difference + z * diff_sd)

    ratio = divide(values, ref_value)
    log_ok = (ratio > 0) & ~is_ref & np.broadcast_to(np.asarray(log_scale, dtype=bool),
                                                      ratio.shape)
    log_sd = np.sqrt(np.clip(divide(variances, values**2) + divide(ref_var, ref_value**2),
                             0.0, None))
    log_lower = np.where(log_ok, ratio * np.exp(-z * np.where(log_ok, log_sd, 0.0)), np.nan)
    log_upper = np.where(log_ok, ratio * np.exp(z * np.where(log_ok, log_sd, 0.0)), np.nan)
    fieller_lower, fieller_upper = _fieller(values, variances, ref_value, ref_var, z)
    defined = np.isfinite(ratio)
    ratio_lower = np.where(log_ok, log_lower, np.where(is_ref, ratio, fieller_lower))
    ratio_upper = np.where(log_ok, log_upper, np.where(is_ref, ratio, fieller_upper))
    ratio_lower = np.where(defined, ratio_lower, np.nan)
    ratio_upper = np.where(defined, ratio_upper, np.nan)
    return (ratio_lower, ratio_upper), diff_bounds


def _fieller(a: NDArray[np.float64], var_a: NDArray[np.float64], b: NDArray[np.float64],
             var_b: NDArray[np.float64], z: float) -> Bounds:
    """Fieller's interval of ``a / b`` for independent estimates: the roots of
    ``r**2 (b**2 - z**2 V_b) - 2 a b r + a**2 - z**2 V_a = 0``; ``(-inf, inf)`` when
    ``b**2 <= z**2 V_b``."""
    lead = b**2 - z**2 * var_b
    # with lead > 0 the discriminant z**2 (a**2 V_b + V_a lead) is never negative
    half = np.sqrt(np.clip(z**2 * (a**2 * var_b + var_a * lead), 0.0, None))
    bounded = lead > 0
    safe = np.where(bounded, lead, 1.0)
    lower = np.where(bounded, (a * b - half) / safe, -np.inf)
    upper = np.where(bounded, (a * b + half) / safe, np.inf)
    nan = np.isnan(lead) | np.isnan(half)
    return np.where(nan, np.nan, lower), np.where(nan, np.nan, upper)


def share_intervals(
    counts: NDArray[np.float64],
    count_variances: NDArray[np.float64],
    attribute_of_row: NDArray[np.intp],
    reference_of_row: NDArray[np.intp],
    interval: float,
) -> tuple[Bounds, Bounds, Bounds]:
    """Delta-method intervals of shares ``c_g / T`` (``T``: total over the attribute).

    A group's share of all positive decisions has a denominator shared by all groups of
    its attribute, so its disparities are not those of independent estimates. With
    independent group counts ``c_h`` of variances ``V_h`` and ``T = sum_h c_h``:

    * share ``s = c_g / T``: ``Var = ((1 - s)**2 V_g + s**2 (V_T - V_g)) / T**2``;
    * ratio ``c_g / c_ref`` (the totals cancel): log scale, ``V_g / c_g**2 + V_ref /
      c_ref**2``;
    * difference ``d = (c_g - c_ref) / T``: ``((1 - d)**2 V_g + (1 + d)**2 V_ref + d**2
      (V_T - V_g - V_ref)) / T**2``.

    Returns
    -------
    tuple
        Bounds of the shares, of their ratios and of their differences.
    """
    total = np.asarray(np.bincount(attribute_of_row, weights=counts)[attribute_of_row],
                       dtype=np.float64)
    var_total = np.asarray(
        np.bincount(attribute_of_row, weights=count_variances)[attribute_of_row],
        dtype=np.float64)
    share = divide(counts, total)
    var_share = divide((1.0 - share) ** 2 * count_variances
                       + share**2 * (var_total - count_variances), total**2)
    lower, upper = normal_interval(share, var_share, interval)
    share_bounds = (np.clip(lower, 0.0, 1.0), np.clip(upper, 0.0, 1.0))

    ref = reference_of_row
    is_ref = np.arange(counts.size) == ref
    (ratio_bounds, _) = disparity_intervals(counts[:, None], count_variances[:, None], ref,
                                            interval)
    d = share - share[ref]
    var_d = divide((1.0 - d) ** 2 * count_variances + (1.0 + d) ** 2 * count_variances[ref]
                   + d**2 * (var_total - count_variances - count_variances[ref]), total**2)
    var_d = np.where(is_ref, 0.0, var_d)
    diff_bounds = normal_interval(d, var_d, interval)
    return share_bounds, (ratio_bounds[0][:, 0], ratio_bounds[1][:, 0]), diff_bounds


def mean_variance(n: ArrayLike, total: ArrayLike, total_sq: ArrayLike) -> NDArray[np.float64]:
    """Variance of a group mean, ``s**2 / n``, from ``n``, ``sum v`` and ``sum v**2``.

    ``s**2`` uses ``n - 1``; NaN where ``n < 2``.
    """
    n_ = np.asarray(n, dtype=np.float64)
    mean = divide(np.asarray(total, dtype=np.float64), n_)
    ss = np.asarray(total_sq, dtype=np.float64) - n_ * mean**2
    s2 = divide(np.clip(ss, 0.0, None), np.where(n_ >= 2, n_ - 1.0, 0.0))
    return divide(s2, n_)
