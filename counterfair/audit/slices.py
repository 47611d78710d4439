"""Comparison of two slices (groups) from their confusion matrices.

Sign convention: every difference is **slice 1 minus slice 2** (``g1 - g2``).  With
group 1 = (TP 50, FN 10, FP 20, TN 120) and group 2 = (TP 20, FN 0, FP 30, TN 50):

======================================  =============================  ==========
measure                                 g1 vs g2                       difference
======================================  =============================  ==========
accuracy                                170/200 = 0.85 vs 70/100       0.15
positive proportion of predicted labels 70/200 = 0.35 vs 50/100        -0.15
recall (equal opportunity)              50/60 vs 20/20                 -0.17
specificity                             120/140 vs 50/80               0.23
error-type ratio FN / FP                10/20 = 0.5 vs 0/30 = 0        0.5
======================================  =============================  ==========

A rate with a zero denominator (e.g. FN / FP with no false positives) is NaN, and so is
any difference involving it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ._validation import EMPTY_SLICE, NEGATIVE_COUNT, as_binary, check_lengths
from .classification import binary_decisions

SLICE_MEASURES: tuple[str, ...] = (
    "accuracy_difference",
    "positive_proportion_difference",
    "recall_difference",
    "specificity_difference",
    "error_type_ratio_difference",
)
"""Index of the Series returned by :func:`compare_slices`, in order."""


def _ratio(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else float("nan")


@dataclass(frozen=True)
class ConfusionCounts:
    """Confusion matrix of one slice: true/false positives and negatives.

    Parameters
    ----------
    tp, fn, fp, tn
        Non-negative counts.
    """

    tp: int
    fn: int
    fp: int
    tn: int

    def __post_init__(self) -> None:
        for name in ("tp", "fn", "fp", "tn"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
                raise ValueError(NEGATIVE_COUNT.format(name=name, value=value))

    @classmethod
    def from_labels(
        cls, y_true: ArrayLike, y_pred: ArrayLike, *, threshold: float = 0.5
    ) -> ConfusionCounts:
        """Tabulate binary labels against decisions (scores are thresholded ``>=``)."""
        y = as_binary(y_true, "y_true")
        p = binary_decisions(y_pred, threshold)
        check_lengths([("y_true", y.size), ("y_pred", p.size)])
        tp = int(np.sum((y == 1) & (p == 1)))
        fn = int(np.sum((y == 1) & (p == 0)))
        fp = int(np.sum((y == 0) & (p == 1)))
        return cls(tp=tp, fn=fn, fp=fp, tn=int(y.size) - tp - fn - fp)

    @property
    def n(self) -> int:
        """Number of members."""
        return int(self.tp + self.fn + self.fp + self.tn)

    @property
    def accuracy(self) -> float:
        """(TP + TN) / n."""
        return _ratio(self.tp + self.tn, self.n)

    @property
    def positive_proportion(self) -> float:
        """Share of predicted positives, (TP + FP) / n."""
        return _ratio(self.tp + self.fp, self.n)

    @property
    def recall(self) -> float:
        """TP / (TP + FN) (true positive rate)."""
        return _ratio(self.tp, self.tp + self.fn)

    @property
    def specificity(self) -> float:
        """TN / (TN + FP) (true negative rate)."""
        return _ratio(self.tn, self.tn + self.fp)

    @property
    def error_type_ratio(self) -> float:
        """FN / FP (NaN when there are no false positives)."""
        return _ratio(self.fn, self.fp)


def compare_slices(g1: ConfusionCounts, g2: ConfusionCounts) -> pd.Series:
    """Differences ``g1 - g2`` of accuracy, positive proportion, recall, specificity, FN/FP.

    Parameters
    ----------
    g1, g2
        Confusion counts of the two slices.

    Returns
    -------
    pandas.Series
        Indexed by :data:`SLICE_MEASURES`.

    Raises
    ------
    ValueError
        If a slice has no members.
    """
    for name, counts in (("g1", g1), ("g2", g2)):
        if counts.n == 0:
            raise ValueError(EMPTY_SLICE.format(name=name))
    values = [
        g1.accuracy - g2.accuracy,
        g1.positive_proportion - g2.positive_proportion,
        g1.recall - g2.recall,
        g1.specificity - g2.specificity,
        g1.error_type_ratio - g2.error_type_ratio,
    ]
    return pd.Series(values, index=list(SLICE_MEASURES), name="g1 - g2", dtype=np.float64)
