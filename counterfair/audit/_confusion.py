"""Confusion counts and rates per group, from per-group sums (shared by the group audits)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ._tables import divide

COUNT_COLUMNS: tuple[str, ...] = ("size", "tp", "fp", "fn", "tn")
"""Count columns of :attr:`GroupReport.by_group`."""

RATE_METRICS: tuple[str, ...] = (
    "prevalence",  # share of actual positives in the group
    "predicted_prevalence",  # share of predicted positives in the group
    "predicted_positive_rate",  # group's share of *all* predicted positives
    "tpr",
    "tnr",
    "fpr",
    "fnr",
    "precision",
    "fdr",
    "for",  # false omission rate FN / (FN + TN): the share of predicted negatives that are positive
    "accuracy",
    "npv",  # negative predictive value TN / (TN + FN) = 1 - for
)
"""Rate columns of :attr:`GroupReport.by_group`; ratios, differences and CIs cover these."""


def confusion_rates(
    sums: NDArray[np.float64], attribute_of_row: NDArray[np.intp]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Counts ``(G, 5)`` and rates ``(G, len(RATE_METRICS))`` from per-group sums.

    ``sums`` columns: number of rows, actual positives, predicted positives, true positives.
    """
    n, pos, pp, tp = sums.T
    fp = pp - tp
    fn = pos - tp
    tn = n - pos - fp
    all_pp = np.bincount(attribute_of_row, weights=pp)[attribute_of_row].astype(np.float64)
    rates = np.column_stack([
        divide(pos, n),
        divide(pp, n),
        divide(pp, all_pp),
        divide(tp, tp + fn),
        divide(tn, tn + fp),
        divide(fp, fp + tn),
        divide(fn, fn + tp),
        divide(tp, tp + fp),
        divide(fp, tp + fp),
        divide(fn, fn + tn),
        divide(tp + tn, n),
        divide(tn, tn + fn),
    ])
    return np.column_stack([n, tp, fp, fn, tn]), rates
