"""Stratified subsamples: fit NUTS on a part of a large table, keeping stratum shares.

A stratum is one combination of the values of some columns; numeric columns with
more than ``bins`` distinct values are first cut into ``bins`` quantile bins. Each
stratum gets a share of the ``n`` rows proportional to its size, rounded by the
largest-remainder rule (so shares are exact up to rounding: within one row of
``n * count / total``), and its rows are drawn uniformly at random without
replacement. Rows keep their original order.

:func:`counterfair.datasets.law_school.law_school_subsample` and ``SCM.fit(subsample=...)``
both draw through :func:`stratified_positions`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from counterfair.rows.validated import Rows

RowsOrFrame = TypeVar("RowsOrFrame", Rows, pd.DataFrame)

logger = logging.getLogger(__name__)

DEFAULT_BINS = 5
"""Quantile bins a continuous column is cut into when it defines strata."""


def check_size(value: object, name: str, *, total: int | None = None) -> int:
    """Return ``value`` as an int if it is an integer >= 1 (and <= ``total``); else raise.

    Raises
    ------
    ValueError
        Naming ``name``, when ``value`` is not an integer (bools and floats are
        refused), is below 1, or exceeds ``total``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    if total is not None and value > total:
        raise ValueError(f"{name}={value} is larger than the data ({total} rows)")
    return int(value)


def allocate(counts: np.ndarray, n: int) -> np.ndarray:
    """Split ``n`` among strata of sizes ``counts`` in proportion, largest remainders first.

    Ties in the remainder go to the larger stratum, then to the earlier one.
    """
    counts = np.asarray(counts, dtype=np.int64)
    exact = n * counts / counts.sum()
    alloc = np.floor(exact).astype(np.int64)
    order = np.lexsort((np.arange(len(counts)), -counts, -(exact - alloc)))
    alloc[order[: n - int(alloc.sum())]] += 1
    return alloc


def stratified_positions(codes: np.ndarray, n: int, *, seed: int | None) -> np.ndarray:
    """Sorted positions of ``n`` rows drawn within the strata ``codes`` (0..k-1).

    Parameters
    ----------
    codes : numpy.ndarray
        Stratum code of every row, integers from 0 with no gaps.
    n : int
        Rows wanted, ``1 <= n <= len(codes)``.
    seed : int, optional
        Seed of the :func:`numpy.random.default_rng` generator.
    """
    counts = np.bincount(codes)
    alloc = allocate(counts, n)
    rng = np.random.default_rng(seed)
    chosen = [
        rng.choice(np.flatnonzero(codes == k), size=int(alloc[k]), replace=False)
        for k in range(len(counts))
    ]
    return np.sort(np.concatenate(chosen))


def _column_codes(column: pd.Series, bins: int) -> np.ndarray:
    is_numeric = pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)
    if is_numeric and column.nunique(dropna=False) > bins:
        binned = pd.qcut(column, q=bins, labels=False, duplicates="drop")
        return np.asarray(binned.fillna(-1), dtype=np.int64)
    codes, _ = pd.factorize(column, sort=True, use_na_sentinel=False)
    return np.asarray(codes, dtype=np.int64)


def stratum_codes(
    df: pd.DataFrame, columns: Sequence[str], *, bins: int = DEFAULT_BINS
) -> np.ndarray:
    """Stratum code (0..k-1) of every row of ``df``: the combination of ``columns``.

    Numeric columns with more than ``bins`` distinct values are cut into ``bins``
    quantile bins first; other columns count each value as its own level.

    Raises
    ------
    ValueError
        If a column is missing from ``df``.
    """
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"cannot stratify on {missing}: not columns of the data")
    if not columns:
        return np.zeros(len(df), dtype=np.int64)
    parts = np.column_stack([_column_codes(df[c], bins) for c in columns])
    _, codes = np.unique(parts, axis=0, return_inverse=True)
    return np.asarray(codes, dtype=np.int64).reshape(-1)


def fit_rows(
    rows: RowsOrFrame,
    columns: Sequence[str],
    *,
    subsample: int | None,
    max_rows: int | None,
    seed: int | None,
) -> tuple[RowsOrFrame, dict[str, Any] | None]:
    """The rows NUTS runs on, and the record of the subsample (``None`` if all rows).

    With ``subsample=n`` the fit uses ``n`` rows; otherwise, when ``max_rows`` is
    not ``None`` and the data have more rows, it uses ``max_rows`` rows. The rows
    are stratified on ``columns`` and drawn with ``seed``; one INFO line on the
    ``counterfair`` logger says how many rows of how many, and why.

    Raises
    ------
    ValueError
        If ``subsample`` is not an integer in ``1..len(data)`` or ``max_rows`` is
        not ``None`` nor a positive integer.
    """
    total = len(rows)
    if max_rows is not None:
        max_rows = check_size(max_rows, "max_rows")
    if subsample is not None:
        size = check_size(subsample, "subsample", total=total)
        reason = f"subsample={size} was asked for"
    elif max_rows is not None and total > max_rows:
        size = max_rows
        reason = f"the data have more than max_rows={max_rows} rows; pass max_rows=None to fit all"
    else:
        return rows, None
    frame = rows.frame if isinstance(rows, Rows) else rows
    codes = stratum_codes(frame, columns)
    where = stratified_positions(codes, size, seed=seed)
    chosen = rows.take(where) if isinstance(rows, Rows) else rows.iloc[where]
    info: dict[str, Any] = {
        "size": size,
        "total": total,
        "strata": list(columns),
        "n_strata": int(codes.max()) + 1 if len(codes) else 0,
        "reason": reason,
    }
    logger.info(
        "fitting on a stratified subsample of %d of %d rows (%d strata of %s): %s; "
        "abduct all rows afterwards with fit.abduct(data)",
        size, total, info["n_strata"], ", ".join(columns) or "nothing", reason,
    )
    return chosen, info
