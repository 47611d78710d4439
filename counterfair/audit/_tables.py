"""Small numeric helpers shared by the group audits (safe division, disparity tables)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from numpy.typing import NDArray


def divide(numerator: NDArray[np.float64], denominator: NDArray[np.float64]) -> NDArray[np.float64]:
    """Elementwise ``numerator / denominator`` with NaN where the denominator is 0.

    No floating-point warning is emitted.
    """
    num, den = np.broadcast_arrays(np.asarray(numerator, dtype=np.float64),
                                   np.asarray(denominator, dtype=np.float64))
    out = np.full(num.shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def disparities(
    values: NDArray[np.float64], reference_of_row: NDArray[np.intp]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Ratios and differences of each row to the row of its reference group.

    Parameters
    ----------
    values
        Array ``(n_rows, n_measures)``.
    reference_of_row
        For each row, the row index of its attribute's reference group.

    Returns
    -------
    tuple of numpy.ndarray
        ``values / values[ref]`` (NaN where the reference value is 0) and
        ``values - values[ref]``.
    """
    ref = values[reference_of_row]
    return divide(values, ref), values - ref


def ci_frame(
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
    index: pd.Index,
    measures: Sequence[str],
) -> pd.DataFrame:
    """Interval table: rows ``index``, columns MultiIndex ``(measure, "lower"|"upper")``."""
    columns = pd.MultiIndex.from_product([list(measures), ["lower", "upper"]],
                                         names=["measure", "bound"])
    data = np.empty((lower.shape[0], 2 * len(measures)))
    data[:, 0::2] = lower
    data[:, 1::2] = upper
    return pd.DataFrame(data, index=index, columns=columns)
