"""Levels of the protected attributes and their integer codes.

Level order is fixed at fit time with the reference level first, so code 0 is
always the reference level (whose effect is zero under reference coding).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.specs import Protected


def _levels_from_column(series: pd.Series) -> tuple[str, ...]:
    if isinstance(series.dtype, pd.CategoricalDtype):
        present = set(series.astype(str).unique())
        return tuple(str(c) for c in series.cat.categories if str(c) in present)
    return tuple(sorted({str(v) for v in series.unique()}))


@dataclass(frozen=True)
class Encoding:
    """Levels of every protected attribute, reference level first.

    Attributes
    ----------
    levels : dict of str to tuple of str
        For each protected node, its levels; ``levels[node][0]`` is the reference.
    """

    levels: Mapping[str, tuple[str, ...]]

    @classmethod
    def from_data(cls, specs: Mapping[str, Protected], data: pd.DataFrame) -> Encoding:
        """Fix the levels of each protected node from its spec, else from the data."""
        levels: dict[str, tuple[str, ...]] = {}
        for node, spec in specs.items():
            found = spec.levels if spec.levels is not None else _levels_from_column(data[node])
            reference = spec.reference if spec.reference is not None else found[0]
            ordered = (str(reference), *(lv for lv in found if lv != str(reference)))
            if len(ordered) < 2:
                raise errors.DataError(
                    f"protected attribute {node!r} has a single level {ordered} in the data; "
                    "it needs at least 2 (or declare Protected(levels=...))"
                )
            levels[node] = ordered
        return cls(levels=levels)

    def n_levels(self, node: str) -> int:
        """Number of levels of a protected node."""
        return len(self.levels[node])

    def code(self, node: str, values: object, index: pd.Index | None = None) -> np.ndarray:
        """Map level values to 0-based integer codes, naming any unseen level.

        Parameters
        ----------
        node : str
            Protected node.
        values : array-like
            Level values (strings or anything whose ``str()`` is a level).
        index : pandas.Index, optional
            Row labels, used in the error message.
        """
        lookup = {level: i for i, level in enumerate(self.levels[node])}
        raw = np.asarray(values, dtype=object).ravel()
        codes = np.empty(raw.shape[0], dtype=np.int64)
        for i, value in enumerate(raw):
            key = str(value)
            if key not in lookup:
                row = index[i] if index is not None else i
                row = row.item() if hasattr(row, "item") else row
                value = value.item() if hasattr(value, "item") else value
                raise errors.DataError(
                    errors.UNSEEN_LEVEL.format(
                        node=node, value=value, row=row, levels=list(self.levels[node])
                    )
                )
            codes[i] = lookup[key]
        return codes

    def codes(self, data: pd.DataFrame) -> dict[str, np.ndarray]:
        """Codes of every protected column of ``data``."""
        return {node: self.code(node, data[node].to_numpy(), data.index) for node in self.levels}

    def decode(self, node: str, codes: np.ndarray) -> np.ndarray:
        """Map 0-based codes back to level strings."""
        return np.asarray(self.levels[node], dtype=object)[np.asarray(codes)]
