"""Group measures, disparities and parity verdicts for binary classifiers.

For every group of every protected attribute (and for intersections such as
``"race x sex"``) the confusion matrix of the binary decisions is tabulated and turned
into rates.  Disparities are ratios and differences to a reference group; a group
*passes* a parity criterion when ``tau <= ratio <= 1 / tau`` (the four-fifths rule for
``tau = 0.8``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ._classification_intervals import analytic_tables, bootstrap_tables, poisson_tables
from ._confusion import COUNT_COLUMNS as COUNT_COLUMNS
from ._confusion import RATE_METRICS as RATE_METRICS
from ._confusion import confusion_rates
from ._groups import GroupLayout
from ._tables import disparities
from ._validation import (
    NEGATIVE_TOLERANCE,
    as_numeric,
    check_choice,
    check_finite,
    is_binary,
)
from .bootstrap import Seed
from .poisson_bootstrap import PoissonAccumulator, accumulate, seed_word

PARITY_CRITERIA: dict[str, str] = {
    "selection_rate_parity": "predicted_prevalence",
    "share_of_positives_parity": "predicted_positive_rate",
    "false_positive_parity": "fpr",
    "false_negative_parity": "fnr",
    "fdr_parity": "fdr",
    "for_parity": "for",
    "npv_parity": "npv",
}
"""Parity criterion -> the rate whose ratio to the reference group is judged.

``selection_rate_parity`` (demographic / statistical parity; formerly
``proportional_parity``) compares the share of each group that receives a positive
decision. ``share_of_positives_parity`` (formerly ``equal_parity``) compares each
group's share of *all* positive decisions, which depends on group sizes: it is not a
selection-rate test. The former names are in :data:`RENAMED_CRITERIA`.

The omission rate of the issue tracker is the false omission rate ``for``; its parity
criterion is ``for_parity`` (NPV parity judges the complementary rate ``1 - for``).
"""

RENAMED_CRITERIA: dict[str, str] = {
    "equal_parity": "share_of_positives_parity",
    "proportional_parity": "selection_rate_parity",
}
"""Former criterion name -> current name."""

JOINT_CRITERIA: dict[str, tuple[str, ...]] = {"equalized_odds": ("tpr", "fpr")}
"""Criteria judged jointly on several rates: a group passes only if every rate passes."""

CRITERION_EXPLANATIONS: dict[str, str] = {
    "selection_rate_parity": "The same share of each group is given a positive decision "
                             "(selection rate; demographic / statistical parity).",
    "share_of_positives_parity": "Each group holds the same share of all positive "
                                 "decisions, whatever its size (not a selection rate).",
    "false_positive_parity": "Among people who are truly negative, each group is wrongly "
                             "given a positive decision equally often.",
    "false_negative_parity": "Among people who are truly positive, each group is wrongly "
                             "given a negative decision equally often.",
    "fdr_parity": "Among positive decisions, each group has the same share of mistakes.",
    "for_parity": "Among negative decisions, each group has the same share of mistakes "
                  "(false omission rate).",
    "npv_parity": "A negative decision is equally reliable in each group "
                  "(negative predictive value).",
    "equalized_odds": "True-positive and false-positive rates are both equal across groups.",
}
"""One plain-language line per criterion, shown in the report's summary table."""


def binary_decisions(
    y_pred: ArrayLike, threshold: float = 0.5, name: str = "y_pred"
) -> NDArray[np.float64]:
    """Return 0/1 decisions: binary input as is, scores as ``score >= threshold``."""
    scores = as_numeric(y_pred, name)
    if is_binary(scores):
        return scores
    threshold = check_finite(threshold, "threshold")
    return (scores >= threshold).astype(np.float64)


def _band(values: NDArray[np.float64], low: float, high: float) -> pd.arrays.BooleanArray:
    passed = pd.array((values >= low) & (values <= high), dtype="boolean")
    passed[np.isnan(values)] = pd.NA
    return passed


def _joint(parts: list[pd.arrays.BooleanArray]) -> pd.arrays.BooleanArray:
    """Kleene AND: False if any part fails, NA if none fails but one is undefined."""
    out = parts[0].copy()
    for part in parts[1:]:
        out = out & part
    return out


def _band_verdicts(table: pd.DataFrame, low: float, high: float) -> pd.DataFrame:
    out = {criterion: _band(table[metric].to_numpy(dtype=np.float64), low, high)
           for criterion, metric in PARITY_CRITERIA.items()}
    for criterion, metrics in JOINT_CRITERIA.items():
        out[criterion] = _joint([_band(table[m].to_numpy(dtype=np.float64), low, high)
                                 for m in metrics])
    return pd.DataFrame(out, index=table.index)


def _verdicts(ratios: pd.DataFrame, tau: float) -> pd.DataFrame:
    """Nullable-boolean pass/fail per criterion (NA where the ratio is undefined)."""
    return _band_verdicts(ratios, tau, 1.0 / tau)


def _fmt(group: Hashable) -> str:
    return repr(group) if isinstance(group, str) else str(group)


@dataclass(frozen=True, kw_only=True)
class GroupReport:
    """Result of :meth:`counterfair.audit.GroupAudit.metrics` (classification).

    All tables are indexed by the MultiIndex ``(attribute, group)``; intersections appear
    as attributes named like ``"race x sex"`` with groups like ``"Black x Female"``.

    Attributes
    ----------
    by_group
        Counts (:data:`COUNT_COLUMNS`) and rates (:data:`RATE_METRICS`) per group.
    ratios
        Each rate divided by the reference group's rate (NaN where that rate is 0).
    differences
        Each rate minus the reference group's rate.
    verdicts
        Pass (``True``) / fail (``False``) per criterion of :data:`PARITY_CRITERIA` and
        :data:`JOINT_CRITERIA` (equalized odds: TPR and FPR ratios both in the band),
        nullable boolean with ``<NA>`` where a ratio is undefined.
    reference
        Reference group of each attribute.
    tau
        Parity threshold; a group passes when ``tau <= ratio <= 1 / tau``.
    threshold
        Score threshold used when predictions were scores.
    interval
        Level of the intervals.
    n_bootstrap
        Number of bootstrap resamples (0: no resampling).
    ci, ratio_ci, difference_ci
        Intervals of ``by_group`` rates, ``ratios`` and ``differences``: columns
        MultiIndex ``(measure, "lower"|"upper")``; ``None`` without intervals.
    ci_method
        How the intervals were computed: ``"bootstrap"`` (exact stratified bootstrap,
        percentile), ``"poisson"`` (chunked Poisson bootstrap, percentile),
        ``"analytic"`` (Wilson / delta method) or ``None`` (no intervals).
    """

    by_group: pd.DataFrame
    ratios: pd.DataFrame
    differences: pd.DataFrame
    verdicts: pd.DataFrame
    reference: Mapping[str, Hashable]
    tau: float
    threshold: float
    interval: float
    n_bootstrap: int
    ci: pd.DataFrame | None = None
    ratio_ci: pd.DataFrame | None = None
    difference_ci: pd.DataFrame | None = None
    ci_method: str | None = None

    def failures(self) -> pd.DataFrame:
        """Long table of failing groups: criterion, attribute, group, metric, ratio.

        A failing joint criterion (equalized odds) contributes one row per failing rate.
        """
        rows = []
        checks = [(c, m) for c, m in PARITY_CRITERIA.items()]
        checks += [(c, m) for c, ms in JOINT_CRITERIA.items() for m in ms]
        band = _band_verdicts(self.ratios, self.tau, 1.0 / self.tau)
        for criterion, metric in checks:
            failed = self.verdicts[criterion].eq(False).fillna(False).to_numpy(dtype=bool)
            if criterion in JOINT_CRITERIA:
                own = pd.Series(_band(self.ratios[metric].to_numpy(dtype=np.float64),
                                      self.tau, 1.0 / self.tau), index=band.index)
                failed &= own.eq(False).fillna(False).to_numpy(dtype=bool)
            for (attribute, group), ratio in self.ratios[metric][failed].items():
                rows.append((criterion, attribute, group, metric, float(ratio)))
        return pd.DataFrame(rows, columns=["criterion", "attribute", "group", "metric", "ratio"])

    def epsilon_verdicts(self, epsilon: float, *, on: str = "difference") -> pd.DataFrame:
        """Pass/fail per criterion with a tolerance ``epsilon`` instead of ``tau``.

        Parameters
        ----------
        epsilon
            Non-negative tolerance.
        on
            ``"difference"``: a group passes when ``|rate - reference rate| <= epsilon``;
            ``"ratio"``: when ``exp(-epsilon) <= rate / reference rate <= exp(epsilon)``
            (a bound on the log-ratio, as in epsilon-differential fairness).

        Returns
        -------
        pandas.DataFrame
            Nullable booleans like :attr:`verdicts` (same columns and index).
        """
        on = check_choice(on, "on", ("difference", "ratio"))
        epsilon = check_finite(epsilon, "epsilon")
        if epsilon < 0:
            raise ValueError(NEGATIVE_TOLERANCE.format(name="epsilon", value=epsilon))
        if on == "difference":
            return _band_verdicts(self.differences, -epsilon, epsilon)
        return _band_verdicts(self.ratios, float(np.exp(-epsilon)), float(np.exp(epsilon)))

    def summary_table(self) -> pd.DataFrame:
        """One row per criterion, readable at a glance.

        Columns: ``criterion`` (plain name), ``meaning`` (one line), ``measure`` (rate(s)
        compared), ``verdict`` (``"pass"``, ``"FAIL"`` or ``"n/a"`` when no group fails
        but some ratio is undefined), ``failing groups`` (with their ratios) and
        ``worst ratio`` (farthest from 1 on the log scale, over all groups).
        """
        rows = []
        criteria: dict[str, tuple[str, ...]] = {c: (m,) for c, m in PARITY_CRITERIA.items()}
        criteria.update(JOINT_CRITERIA)
        failures = self.failures()
        for criterion, metrics in criteria.items():
            verdict = self.verdicts[criterion]
            failed = failures[failures["criterion"] == criterion]
            if len(failed):
                word = "FAIL"
            elif verdict.isna().any():
                word = "n/a"
            else:
                word = "pass"
            ratios = self.ratios[list(metrics)].to_numpy(dtype=np.float64).ravel()
            finite = ratios[np.isfinite(ratios) & (ratios > 0)]
            worst = float(finite[np.argmax(np.abs(np.log(finite)))]) if finite.size else np.nan
            groups = ", ".join(
                f"{a} = {_fmt(g)} ({m} {r:.3g})"
                for a, g, m, r in failed[["attribute", "group", "metric", "ratio"]]
                .itertuples(index=False)
            )
            rows.append({
                "criterion": criterion.replace("_", " "),
                "meaning": CRITERION_EXPLANATIONS[criterion],
                "measure": " and ".join(metrics) + " ratio",
                "verdict": word,
                "failing groups": groups or "none",
                "worst ratio": worst,
            })
        return pd.DataFrame(rows)

    def summary(self) -> str:
        """Short text naming, per criterion, the groups that fail (or cannot be judged)."""
        lines = [
            f"Parity verdicts at tau = {self.tau:g}: a group passes when "
            f"{self.tau:g} <= ratio to its reference group <= {1.0 / self.tau:.4g}.",
            "Reference groups: "
            + "; ".join(f"{a} = {_fmt(g)}" for a, g in self.reference.items()) + ".",
        ]
        for criterion, metric in PARITY_CRITERIA.items():
            verdict = self.verdicts[criterion]
            ratio = self.ratios[metric]
            failed = verdict.eq(False).fillna(False).to_numpy(dtype=bool)
            unknown = verdict.isna().to_numpy()
            label = f"{criterion.replace('_', ' ')} ({metric} ratio)"
            if not failed.any():
                text = "all groups pass" if not unknown.any() else "no group fails"
            else:
                text = "FAILS for " + ", ".join(
                    f"{a} = {_fmt(g)} ({r:.3g})" for (a, g), r in ratio[failed].items()
                )
            if unknown.any():
                text += "; undefined (reference rate 0 or no cases) for " + ", ".join(
                    f"{a} = {_fmt(g)}" for a, g in ratio.index[unknown]
                )
            lines.append(f"- {label}: {text}.")
        return "\n".join(lines)


def rows_report(
    y: NDArray[np.float64],
    decisions: NDArray[np.float64],
    layout: GroupLayout,
    *,
    reference: Mapping[str, Hashable] | None,
    tau: float,
    threshold: float,
    n_bootstrap: int,
    interval: float,
    seed: Seed,
    method: str | None,
    keys: NDArray[np.uint64] | None,
) -> GroupReport:
    """The report of rows in memory, checked by :class:`~counterfair.audit.GroupAudit`
    (whose :meth:`~counterfair.audit.GroupAudit.metrics` documents the measures): 0/1
    outcomes and decisions, the groups, the resolved interval ``method`` and the
    Poisson bootstrap's row ``keys`` (``None``: row positions)."""
    weights = classification_weights(y, decisions)
    ref_rows = layout.reference_rows(reference)
    reference_of_row = ref_rows[layout.attribute_of_row]
    bootstrap_intervals = None
    accumulator = None
    if method == "bootstrap":
        bootstrap_intervals = bootstrap_tables(layout, weights, reference_of_row, n_bootstrap,
                                               interval, seed)
    elif method == "poisson":
        accumulator = accumulate(layout.strata, weights, n_strata=layout.n_strata,
                                 n_replicates=n_bootstrap, seed=seed_word(seed), keys=keys)
    return group_report(
        layout, layout.stratum_sums(weights), reference=reference, tau=tau,
        threshold=threshold, interval=interval, n_bootstrap=n_bootstrap, method=method,
        accumulator=accumulator, bootstrap_intervals=bootstrap_intervals)


def classification_weights(y: NDArray[np.float64],
                           decisions: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per-row columns whose per-stratum sums make the whole report: rows, actual
    positives, predicted positives, true positives."""
    return np.column_stack([np.ones_like(y), y, decisions, y * decisions])


def group_report(
    layout: GroupLayout,
    stratum_sums: NDArray[np.float64],
    *,
    reference: Mapping[str, Hashable] | None,
    tau: float,
    threshold: float,
    interval: float,
    n_bootstrap: int,
    method: str | None,
    accumulator: PoissonAccumulator | None = None,
    bootstrap_intervals: list[pd.DataFrame | None] | None = None,
) -> GroupReport:
    """The report from per-stratum sums of :func:`classification_weights`.

    Everything but the exact bootstrap is a function of these sums (and, for the Poisson
    bootstrap, of the merged ``accumulator``), so rows that arrive in chunks or Dask
    partitions give the report of all rows at once (:mod:`counterfair.dask.group_audits`).
    The exact bootstrap's tables are computed from the rows and passed in.
    """
    attribute_of_row = layout.attribute_of_row
    ref_rows = layout.reference_rows(reference)
    reference_of_row = ref_rows[attribute_of_row]
    index = layout.index
    membership = layout.strata_membership()

    counts, rates = confusion_rates(membership @ stratum_sums, attribute_of_row)
    ratio_values, difference_values = disparities(rates, reference_of_row)
    by_group = pd.concat(
        [pd.DataFrame(np.rint(counts).astype(np.int64), index=index,
                      columns=list(COUNT_COLUMNS)),
         pd.DataFrame(rates, index=index, columns=list(RATE_METRICS))],
        axis=1,
    )
    ratios = pd.DataFrame(ratio_values, index=index, columns=list(RATE_METRICS))
    differences = pd.DataFrame(difference_values, index=index, columns=list(RATE_METRICS))

    intervals: list[pd.DataFrame | None] = [None, None, None]
    if method == "bootstrap":
        if bootstrap_intervals is None:
            raise ValueError("the exact bootstrap's intervals are computed from the rows")
        intervals = bootstrap_intervals
    elif method == "poisson":
        if accumulator is None:
            raise ValueError("the Poisson bootstrap needs its accumulator")
        intervals = poisson_tables(layout, accumulator, stratum_sums, membership,
                                   reference_of_row, interval)
    elif method == "analytic":
        intervals = analytic_tables(layout, stratum_sums, membership, reference_of_row,
                                    interval)
    return GroupReport(
        by_group=by_group,
        ratios=ratios,
        differences=differences,
        verdicts=_verdicts(ratios, tau),
        reference=layout.reference_labels(ref_rows),
        tau=tau,
        threshold=threshold,
        interval=interval,
        n_bootstrap=n_bootstrap,
        ci=intervals[0],
        ratio_ci=intervals[1],
        difference_ci=intervals[2],
        ci_method=method,
    )
