"""Levels of the protected attributes and their integer codes.

Level order is fixed at fit time with the reference level first, so code 0 is
always the reference level (whose effect is zero under reference coding). A
continuous protected attribute has no levels: its "codes" are its values, as
floats, so that every function that takes protected codes takes it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.logs import in_words
from counterfair.model.families.base import MAX_VALUE
from counterfair.model.specs import MAX_IMPLICIT_LEVELS, Protected

NUMERIC_PROTECTED = (
    "protected attribute {node!r} is a numeric column with {count} distinct values "
    "(e.g. {examples}); declare {continuous} if it is a number that enters "
    "its children linearly (an age), or {levels} if these values are categories"
)
_CONTINUOUS = ("Protected(kind='continuous')", "kind: continuous on the node in the SCM file")
_LEVELS = (
    "Protected(levels=[...]) (or make the column a pandas Categorical)",
    "its levels in the SCM file ({node}: {{family: protected, levels: [...]}})",
)
"""Error when a numeric protected column with many values has no declared kind or levels."""

NOT_A_NUMBER = (
    "protected attribute {node!r} is continuous and needs finite numbers (of magnitude at "
    "most 1e100); value {value!r} (row {row!r}) is not"
)
"""Error when a continuous protected attribute is given a value that is not a number."""


def _check_implicit_levels(node: str, series: pd.Series) -> None:
    """Refuse a numeric column with many distinct values as implicit categories."""
    if isinstance(series.dtype, pd.CategoricalDtype) or pd.api.types.is_bool_dtype(series):
        return
    if not pd.api.types.is_numeric_dtype(series):
        return
    distinct = np.sort(series.unique())
    if distinct.shape[0] > MAX_IMPLICIT_LEVELS:
        shown = ", ".join(str(v.item() if hasattr(v, "item") else v) for v in distinct[:3])
        raise errors.DataError(
            NUMERIC_PROTECTED.format(
                node=node, count=distinct.shape[0], examples=shown + ", ...",
                continuous=in_words(*_CONTINUOUS), levels=in_words(*_LEVELS).format(node=node),
            )
        )


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
        For each categorical protected node, its levels; ``levels[node][0]`` is
        the reference.
    continuous : frozenset of str
        The continuous protected nodes (no levels; their codes are their values).
    """

    levels: Mapping[str, tuple[str, ...]]
    continuous: frozenset[str] = frozenset()

    @classmethod
    def from_data(cls, specs: Mapping[str, Protected], data: pd.DataFrame) -> Encoding:
        """Fix the levels of each protected node from its spec, else from the data."""
        levels: dict[str, tuple[str, ...]] = {}
        continuous = frozenset(node for node, spec in specs.items() if spec.continuous)
        for node, spec in specs.items():
            if spec.continuous:
                continue
            if spec.levels is None:
                _check_implicit_levels(node, data[node])
            found = spec.levels if spec.levels is not None else _levels_from_column(data[node])
            reference = spec.reference if spec.reference is not None else found[0]
            ordered = (str(reference), *(lv for lv in found if lv != str(reference)))
            if len(ordered) < 2:
                raise errors.DataError(
                    f"protected attribute {node!r} has a single level {ordered} in the data; "
                    f"it needs at least 2 (or declare {in_words(*_LEVELS).format(node=node)})"
                )
            levels[node] = ordered
        return cls(levels=levels, continuous=continuous)

    @property
    def nodes(self) -> tuple[str, ...]:
        """Every protected node, categorical then continuous."""
        return (*self.levels, *sorted(self.continuous))

    def is_continuous(self, node: str) -> bool:
        """Whether ``node`` is a continuous protected attribute."""
        return node in self.continuous

    def n_levels(self, node: str) -> int:
        """Number of levels of a protected node."""
        return len(self.levels[node])

    def code(self, node: str, values: object, index: pd.Index | None = None) -> np.ndarray:
        """Map level values to 0-based integer codes, naming any unseen level.

        A continuous attribute's codes are its values as floats.

        Parameters
        ----------
        node : str
            Protected node.
        values : array-like
            Level values (strings or anything whose ``str()`` is a level).
        index : pandas.Index, optional
            Row labels, used in the error message.
        """
        if node in self.continuous:
            return self._numbers(node, values, index)
        raw = np.asarray(values, dtype=object).ravel()
        keys = pd.Series(raw, dtype=object).astype(str)  # str() of each value, as levels are
        codes = pd.Index(list(self.levels[node])).get_indexer(keys).astype(np.int64)
        if (codes < 0).any():
            i = int(np.argmax(codes < 0))
            row = index[i] if index is not None else i
            row = row.item() if hasattr(row, "item") else row
            value = raw[i].item() if hasattr(raw[i], "item") else raw[i]
            raise errors.DataError(
                errors.UNSEEN_LEVEL.format(
                    node=node, value=value, row=row, levels=list(self.levels[node])
                )
            )
        return codes

    def _numbers(self, node: str, values: object, index: pd.Index | None) -> np.ndarray:
        raw = np.asarray(values, dtype=object).ravel()
        out = np.empty(raw.shape[0])
        for i, value in enumerate(raw):
            try:
                number = float(value)
            except (TypeError, ValueError):
                number = float("nan")
            if not np.isfinite(number) or abs(number) > MAX_VALUE:
                row = index[i] if index is not None else i
                row = row.item() if hasattr(row, "item") else row
                value = value.item() if hasattr(value, "item") else value
                raise errors.DataError(NOT_A_NUMBER.format(node=node, value=value, row=row))
            out[i] = number
        return out

    def codes(self, data: pd.DataFrame) -> dict[str, np.ndarray]:
        """Codes of every protected column of ``data`` (values of continuous ones)."""
        return {node: self.code(node, data[node].to_numpy(), data.index) for node in self.nodes}

    def decode(self, node: str, codes: np.ndarray) -> np.ndarray:
        """Map 0-based codes back to level strings (a continuous node's values unchanged)."""
        if node in self.continuous:
            return np.asarray(codes, dtype=float)
        return np.asarray(self.levels[node], dtype=object)[np.asarray(codes)]

    def column(self, node: str, codes: np.ndarray) -> object:
        """A data frame column of the node: a Categorical of levels, or floats."""
        if node in self.continuous:
            return np.asarray(codes, dtype=float)
        return pd.Categorical.from_codes(
            np.asarray(codes, dtype=np.int64), categories=list(self.levels[node])
        )
