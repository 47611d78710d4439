"""The tests of a graph's implications (:mod:`counterfair.model.implications`) on data.

* **A conditional independence** ``V _||_ U | S`` is tested by the generalised
  covariance measure (Shah and Peters 2020): ``V``'s and ``U``'s columns (a number, a
  0/1 indicator, or a category's indicators) are each regressed by least squares on
  ``S``'s columns (a numeric column with at least 10 distinct values by a cubic
  regression spline, so that a curved dependence on ``S`` is not mistaken for a
  violation; fewer values by a straight line; a category by its indicators), and the
  mean of the residuals' products is tested against 0 with its own covariance, a
  chi-square with (columns of V) x (columns of U) degrees of freedom. It needs no
  family: it holds for a mixed, nonlinear or discrete node as long as the regressions
  on ``S`` are right, and with Normal linear nodes it is the partial-correlation test.
* **A vanishing tetrad** is tested with a distribution-free (delta-method) variance: the
  tetrad difference of the residuals' covariances over its influence function's sd.

Both are written here on numpy and scipy's distributions rather than taken from
causal-learn or pgmpy: each would be a large dependency for two short, checked
formulas, and DoWhy's own tests are the reference the benchmark compares with
(``benchmarks/falsify_dowhy.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from counterfair.errors import DataError

from .sfm_columns import SPLINE_DF, SplineBasis

__all__ = ["SMOOTH_VALUES", "TestColumns", "independence_test", "tetrad_test"]

SMOOTH_VALUES = 10
"""A numeric column with at least this many distinct values enters a conditioning set by
its spline."""


@dataclass
class TestColumns:
    """Each column of the data as a test reads it, encoded once.

    ``numeric`` names the columns read as numbers (the others are categories)."""

    data: pd.DataFrame
    numeric: frozenset[str]
    _own: dict[str, np.ndarray] = field(default_factory=dict)
    _given: dict[str, np.ndarray] = field(default_factory=dict)

    def own(self, column: str) -> np.ndarray:
        """The column as the tested side: ``(N, 1)`` for a number, its indicators (the
        first level left out) for a category."""
        if column not in self._own:
            values = self.data[column]
            if column in self.numeric:
                block = values.to_numpy(dtype=float)[:, None]
            else:
                text = values.astype(str).to_numpy()
                levels = np.unique(text)
                block = (text[:, None] == levels[None, 1:]).astype(float)
            self._own[column] = block
        return self._own[column]

    def given(self, column: str) -> np.ndarray:
        """The column as a conditioning variable: its spline, its value or its
        indicators."""
        if column not in self._given:
            if column in self.numeric:
                values = self.data[column].to_numpy(dtype=float)
                if len(np.unique(values)) >= SMOOTH_VALUES:
                    block = SplineBasis.of(values, SPLINE_DF)(values)
                else:
                    block = values[:, None]
            else:
                block = self.own(column)
            self._given[column] = block
        return self._given[column]

    def design(self, given: Sequence[str]) -> np.ndarray:
        return np.hstack([np.ones((len(self.data), 1)), *(self.given(c) for c in given)])


def _residuals(design: np.ndarray, target: np.ndarray) -> np.ndarray:
    coef, *_ = np.linalg.lstsq(design, target, rcond=None)
    return target - design @ coef


def _check_rows(design: np.ndarray, what: str) -> None:
    n, p = design.shape
    if n < p + 10:
        raise DataError(
            f"the test of {what} needs at least {p + 10} rows ({p} columns of the "
            f"conditioning set and 10 more); the data have {n}"
        )


def independence_test(
    columns: TestColumns, node: str, other: str, given: Sequence[str]
) -> tuple[float, int, float]:
    """``node _||_ other | given``: the statistic, its degrees of freedom and p-value."""
    design = columns.design(given)
    _check_rows(design, f"{node} _||_ {other}")
    r_node = _residuals(design, columns.own(node))
    r_other = _residuals(design, columns.own(other))
    products = (r_node[:, :, None] * r_other[:, None, :]).reshape(len(design), -1)
    n, k = products.shape
    mean = products.mean(axis=0)
    centred = products - mean
    cov = centred.T @ centred / n
    statistic = float(n * mean @ np.linalg.pinv(cov, hermitian=True) @ mean)
    return statistic, k, float(stats.chi2.sf(statistic, k))


def tetrad_test(
    columns: TestColumns, indicators: Sequence[str], given: Sequence[str]
) -> tuple[float, float]:
    """``s(a,b) s(c,d) = s(a,c) s(b,d)`` of the residuals of ``indicators`` on ``given``:
    the z statistic and its two-sided p-value."""
    design = columns.design(given)
    _check_rows(design, "the tetrad of " + ", ".join(indicators))
    r = _residuals(design, np.hstack([columns.own(c) for c in indicators]))
    r = r - r.mean(axis=0)
    a, b, c, d = r.T
    s = {pair: float(np.mean(x * y)) for pair, (x, y) in {
        "ab": (a, b), "cd": (c, d), "ac": (a, c), "bd": (b, d)}.items()}
    tau = s["ab"] * s["cd"] - s["ac"] * s["bd"]
    influence = (s["cd"] * (a * b - s["ab"]) + s["ab"] * (c * d - s["cd"])
                 - s["bd"] * (a * c - s["ac"]) - s["ac"] * (b * d - s["bd"]))
    sd = float(np.std(influence) / np.sqrt(len(r)))
    z = tau / sd if sd > 0 else 0.0
    return z, float(2 * stats.norm.sf(abs(z)))
