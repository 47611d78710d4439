"""Disparate impact: the favourable-outcome rate of a monitored group relative to a reference.

``disparate impact = 100 * P(favourable | protected_group) / P(favourable | reference)`` in
percent; it is flagged when at or below ``threshold_percent`` (default 80 %): a ratio of
exactly 80 % already counts as disparate impact, as in IBM Watson OpenScale's fairness
monitor and in Cesaro's definition (unfair when ``ratio <= tau``).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ._groups import encode
from ._tables import divide
from ._validation import (
    BAD_CHOICE,
    GROUP_NOT_FOUND,
    NO_OTHER_GROUP,
    as_1d,
    as_binary,
    check_count,
    check_finite,
    check_lengths,
    check_open_unit,
    find_label,
    shown,
)
from .analytic import binomial_variance, disparity_intervals
from .bootstrap import Seed, bootstrap_interval, percentile_interval, resolve_ci_method
from .poisson_bootstrap import accumulate, seed_word, stratified_group_sums


@dataclass(frozen=True, kw_only=True)
class DisparateImpact:
    """Result of :meth:`counterfair.audit.GroupAudit.disparate_impact`.

    Attributes
    ----------
    protected_group, reference
        The two groups compared.
    protected_rate, reference_rate
        Favourable-outcome rates of the two groups.
    ratio_percent
        ``100 * protected_rate / reference_rate`` (NaN when ``reference_rate`` is 0).
    threshold_percent
        Flagging threshold in percent.
    flagged
        ``True`` when ``ratio_percent <= threshold_percent``; ``None`` when undefined.
    ci_lower, ci_upper
        Percentile bootstrap interval of ``ratio_percent`` (NaN without bootstrap).
    interval
        Level of that interval.
    """

    protected_group: Hashable
    reference: Hashable
    protected_rate: float
    reference_rate: float
    ratio_percent: float
    threshold_percent: float
    flagged: bool | None
    ci_lower: float = float("nan")
    ci_upper: float = float("nan")
    interval: float = 0.95

    def to_series(self) -> pd.Series:
        """All fields as a pandas Series (object dtype)."""
        return pd.Series(dict(self.__dict__), dtype=object, name="disparate_impact")


def _rates(favourable: NDArray[np.float64], codes: NDArray[np.intp], a: int, b: int,
           rows: NDArray[np.intp]) -> tuple[float, float]:
    fav = favourable[rows]
    code = codes[rows]
    in_a = code == a
    in_b = code == b
    return float(fav[in_a].mean()), float(fav[in_b].mean())


def _percent(protected_rate: float, reference_rate: float) -> float:
    return 100.0 * protected_rate / reference_rate if reference_rate else float("nan")


def _analytic_percent(fav: NDArray[np.float64], codes: NDArray[np.intp], a: int, b: int,
                      interval: float) -> tuple[float, float]:
    """Log-scale delta-method bounds of ``100 * rate_a / rate_b``."""
    successes = np.array([[fav[codes == a].sum()], [fav[codes == b].sum()]])
    trials = np.array([[float(np.sum(codes == a))], [float(np.sum(codes == b))]])
    (lower, upper), _ = disparity_intervals(divide(successes, trials),
                                            binomial_variance(successes, trials),
                                            np.array([1, 1]), interval)
    return 100.0 * float(lower[0, 0]), 100.0 * float(upper[0, 0])


def _disparate_impact(
    y_pred: ArrayLike,
    protected: ArrayLike,
    *,
    protected_group: Hashable,
    reference: Hashable | None = None,
    favourable: int = 1,
    threshold_percent: float = 80.0,
    n_bootstrap: int = 0,
    interval: float = 0.95,
    seed: Seed = 0,
    ci_method: str = "auto",
) -> DisparateImpact:
    """Favourable rate of ``protected_group`` over that of ``reference``, in percent.

    Parameters
    ----------
    y_pred
        Binary decisions (0/1 or booleans).
    protected
        One protected attribute (group label per individual).
    protected_group
        Group whose treatment is examined.
    reference
        Group compared against; default: the first group in order other than
        ``protected_group`` (category order of a categorical, else sorted; see
        :data:`counterfair.audit.REFERENCE_RULE`).
    favourable
        Which decision (1 or 0) is favourable.
    threshold_percent
        Flag when the ratio is at or below this percentage (default 80).
    n_bootstrap
        Bootstrap resamples for an interval on the ratio (0: none); resampling is
        stratified by group.
    interval
        Level of that interval.
    seed
        Seed of the bootstrap.
    ci_method
        As in :class:`counterfair.audit.GroupAudit`: ``"auto"`` (exact bootstrap up
        to 100,000 rows, Poisson bootstrap above), ``"bootstrap"``, ``"poisson"``
        (chunked, memory independent of the rows) or ``"analytic"`` (delta method on
        the log of the ratio).

    Returns
    -------
    DisparateImpact

    Raises
    ------
    ValueError
        On non-binary decisions, mismatched lengths, or a monitored/reference group that
        does not occur (the message lists the available groups).
    """
    decisions = as_binary(y_pred, "y_pred")
    values = as_1d(protected, "protected")
    check_lengths([("y_pred", decisions.size), ("protected", values.size)])
    if favourable not in (0, 1) or isinstance(favourable, bool):
        raise ValueError(BAD_CHOICE.format(name="favourable", choices=[0, 1], value=favourable))
    threshold_percent = check_finite(threshold_percent, "threshold_percent")
    n_bootstrap = check_count(n_bootstrap, "n_bootstrap")
    interval = check_open_unit(interval, "interval")
    method = resolve_ci_method(ci_method, n_bootstrap=n_bootstrap, n_rows=decisions.size,
                               seed=seed)

    codes, labels = encode(values, "protected")
    a = find_label(labels, protected_group)
    if a is None:
        raise ValueError(GROUP_NOT_FOUND.format(name="protected group", group=protected_group,
                                                where="protected", available=shown(labels)))
    if reference is None:
        if len(labels) < 2:
            raise ValueError(NO_OTHER_GROUP.format(name="protected group", group=protected_group))
        b = 1 if a == 0 else 0  # REFERENCE_RULE: the first group in order, other than a
    else:
        found = find_label(labels, reference)
        if found is None:
            raise ValueError(GROUP_NOT_FOUND.format(name="reference group", group=reference,
                                                    where="protected", available=shown(labels)))
        b = found
    fav = decisions if favourable == 1 else 1.0 - decisions
    all_rows = np.arange(codes.size)
    protected_rate, reference_rate = _rates(fav, codes, a, b, all_rows)
    percent = _percent(protected_rate, reference_rate)
    flagged = None if np.isnan(percent) else bool(percent <= threshold_percent)

    lower = upper = float("nan")
    if method == "analytic":
        lower, upper = _analytic_percent(fav, codes, a, b, interval)
    elif method == "poisson":
        n_groups = len(labels)
        values = np.column_stack([np.ones_like(fav), fav])
        accumulator = accumulate(codes, values, n_strata=n_groups, n_replicates=n_bootstrap,
                                 seed=seed_word(seed))
        observed = np.column_stack([np.bincount(codes, weights=values[:, j],
                                                minlength=n_groups) for j in range(2)]
                                   ).astype(np.float64)
        sums = stratified_group_sums(accumulator, observed, np.eye(n_groups))
        rate = divide(sums[:, 1], sums[:, 0])
        samples = 100.0 * divide(rate[a], rate[b])
        lo, hi = percentile_interval(samples, interval)
        lower, upper = float(lo), float(hi)
    elif method == "bootstrap":
        def statistic(rows: NDArray[np.intp]) -> float:
            return _percent(*_rates(fav, codes, a, b, rows))

        lo, hi = bootstrap_interval(statistic, codes.size, n_resamples=n_bootstrap,
                                    interval=interval, seed=seed, strata=codes)
        lower, upper = float(lo), float(hi)
    return DisparateImpact(
        protected_group=labels[a],
        reference=labels[b],
        protected_rate=protected_rate,
        reference_rate=reference_rate,
        ratio_percent=percent,
        threshold_percent=threshold_percent,
        flagged=flagged,
        ci_lower=lower,
        ci_upper=upper,
        interval=interval,
    )
