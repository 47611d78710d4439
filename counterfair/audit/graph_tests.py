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

import numpy as np
import pandas as pd
from scipy import stats

from counterfair.errors import DataError

from .sfm_columns import SPLINE_DF, SplineBasis

__all__ = ["SMOOTH_VALUES", "TestColumns", "independence_test", "tetrad_test"]

SMOOTH_VALUES = 10
"""A numeric column with at least this many distinct values enters a conditioning set by
its spline."""


class TestColumns:
    """Every column of the data as the tests read it, encoded once, with their Gram matrix.

    ``numeric`` names the columns read as numbers (the others are categories). Each
    column has two blocks: its *own* (the tested side: the number, or the category's
    indicators with the first level left out) and its *given* form (as a conditioning
    variable: the spline, the number, or the indicators). The blocks, centred and scaled,
    sit side by side in one matrix ``F`` beside an intercept; its Gram matrix ``F'F`` is
    computed once, so each test's regressions are a small solve and one product."""

    def __init__(self, data: pd.DataFrame, numeric: frozenset[str],
                 columns: Sequence[str] | None = None) -> None:
        names = list(columns) if columns is not None else list(data.columns)
        blocks: list[np.ndarray] = [np.ones((len(data), 1))]
        self._own: dict[str, np.ndarray] = {}
        self._given: dict[str, np.ndarray] = {}
        width = 1
        for name in names:
            own, given = _blocks(data[name], name in numeric)
            self._own[name] = np.arange(width, width + own.shape[1])
            blocks.append(own)
            width += own.shape[1]
            if given is None:
                self._given[name] = self._own[name]
            else:
                self._given[name] = np.arange(width, width + given.shape[1])
                blocks.append(given)
                width += given.shape[1]
        features = np.hstack(blocks)
        centre = features[:, 1:].mean(axis=0)
        spread = features[:, 1:].std(axis=0)
        spread[spread == 0] = 1.0
        features[:, 1:] = (features[:, 1:] - centre) / spread
        # column-major: every block is a contiguous slice, read by BLAS without a copy
        self.features = np.asfortranarray(features)
        self.gram = features.T @ features
        self.n = len(data)

    def own(self, column: str) -> np.ndarray:
        """Indices of the column's own block in :attr:`features`."""
        return self._own[column]

    def given(self, given: Sequence[str]) -> np.ndarray:
        """Indices of the intercept and the conditioning blocks of ``given``."""
        return np.concatenate([[0], *(self._given[c] for c in given)]).astype(int)

    def residuals(self, targets: np.ndarray, given: np.ndarray) -> np.ndarray:
        """The least-squares residuals of the ``targets`` columns on the ``given`` ones
        (the intercept among them)."""
        # the columns are centred: the intercept's coefficient is the targets' mean, 0
        given = given[given != 0]
        out = np.empty((self.n, len(targets)), order="F")
        column = 0
        for a, b in _runs(targets):
            out[:, column: column + b - a] = self.features[:, a:b]
            column += b - a
        if len(given) == 0:
            return out
        gss = self.gram[np.ix_(given, given)]
        gst = self.gram[np.ix_(given, targets)]
        beta = np.linalg.pinv(gss, rcond=1e-10, hermitian=True) @ gst
        row = 0
        for a, b in _runs(given):
            out -= self.features[:, a:b] @ beta[row: row + b - a]
            row += b - a
        return out


def _runs(indices: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive runs of sorted-by-block indices as ``(start, stop)`` slices."""
    runs: list[tuple[int, int]] = []
    for i in indices.tolist():
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    return runs


def _blocks(values: pd.Series, numeric: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """A column's own block and its conditioning block (``None``: the same)."""
    if numeric:
        number = values.to_numpy(dtype=float)
        own = number[:, None]
        if len(np.unique(number)) >= SMOOTH_VALUES:
            return own, SplineBasis.of(number, SPLINE_DF)(number)
        return own, None
    text = values.astype(str).to_numpy()
    levels = np.unique(text)
    return (text[:, None] == levels[None, 1:]).astype(float), None


def _check_rows(columns: TestColumns, given: np.ndarray, what: str) -> None:
    n, p = columns.n, len(given)
    if n < p + 10:
        raise DataError(
            f"the test of {what} needs at least {p + 10} rows ({p} columns of the "
            f"conditioning set and 10 more); the data have {n}"
        )


def independence_test(
    columns: TestColumns, node: str, others: Sequence[str], given: Sequence[str]
) -> tuple[float, int, float]:
    """``node _||_ others | given`` (the ``others`` jointly): the statistic, its degrees of
    freedom and p-value."""
    design = columns.given(given)
    _check_rows(columns, design, f"{node} _||_ {', '.join(others)}")
    a = columns.own(node)
    b = np.concatenate([columns.own(o) for o in others])
    r = columns.residuals(np.concatenate([a, b]), design)
    r_node, r_other = r[:, : len(a)], r[:, len(a):]
    products = (r_node[:, :, None] * r_other[:, None, :]).reshape(columns.n, -1)
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
    design = columns.given(given)
    _check_rows(columns, design, "the tetrad of " + ", ".join(indicators))
    r = columns.residuals(np.concatenate([columns.own(c) for c in indicators]), design)
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
