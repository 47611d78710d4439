"""What level-valued families (ordinal, categorical) share: levels, codes and indicators.

A level-valued node holds one of ``K`` declared levels. Internally (numpy, the
forward simulator, counterfactual frames' arithmetic) its values are the codes
``0 .. K-1`` in declared order; the Stan data holds ``1 .. K`` with
``n_levels_<node>`` beside it, so programs stay data-independent. Levels are
declared on the spec, as labels (``levels=("low", "mid", "high")``, compared
with the column's values as strings) or as a count (``levels=3``: the column
holds the codes ``0, 1, 2``), so validation, simulation and parameter shapes
never need the data.

As a parent, a level-valued node enters its children's linear predictors as
reference-coded indicators: one column per level other than code 0, with a
vector of effects ``beta_<child>_<node>``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.model.families.base import Family, Statistic, row_label, share_statistic
from counterfair.model.nodes import Observed

if TYPE_CHECKING:
    pass

UNKNOWN_LEVEL = (
    "column {column!r} is {family} node with levels {levels}; value {value!r} at row "
    "{row!r} is not one of them"
)
"""Error when a level-valued column holds a value outside its declared levels."""

NO_LEVELS = (
    "{family} node needs its levels: levels=('a', 'b', 'c') lists them (in order), "
    "levels=K means integer codes 0 .. K-1; got {levels!r}"
)
"""Error when a level-valued spec is declared without (valid) levels."""


NEEDS_FIT = (
    "column {column!r}: the levels of {family} node {column!r} are read from the training "
    "rows when the SCM is fitted; fit it first, or declare them (levels=...)"
)
"""Error when a spec whose levels come from the data is used before a fit read them."""

SINGLE_LEVEL = (
    "column {column!r} is {family} node and holds a single value ({value!r}) in the training "
    "rows; it needs at least 2 levels: declare them (levels=...) or use more rows"
)
"""Error when levels read from the data are fewer than two."""

ORDINAL_STRINGS = (
    "column {column!r} is an Ordinal node without levels, and its values are not numbers "
    "({values}); their order cannot be guessed: give it, lowest first, e.g. "
    "levels: [{example}] in the SCM file or Ordinal(levels=({quoted}))"
)
"""Error when an Ordinal node without levels holds strings (their order is unknown)."""


def level_key(value: object) -> str:
    """A value as a level label: ``'6'`` for 6 and 6.0, ``'True'`` for booleans, else ``str``.

    Numbers that are whole print without a decimal part, so that a column read as
    floats (a CSV column with a missing value elsewhere) matches levels read as
    integers.
    """
    item = getattr(value, "item", None)
    if callable(item):
        value = item()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def distinct_levels(series: pd.Series) -> tuple[str, ...]:
    """The distinct non-missing values of a column as level labels, in order.

    The categories of a pandas Categorical column in their order (those present);
    numbers in numeric order; anything else sorted as strings.
    """
    present = series.dropna()
    if isinstance(series.dtype, pd.CategoricalDtype):
        seen = {level_key(v) for v in present.unique()}
        return tuple(level_key(c) for c in series.cat.categories if level_key(c) in seen)
    values = list(present.unique())
    numeric = pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
    if numeric:
        values = sorted(values, key=float)
        labels = [level_key(v) for v in values]
        return tuple(dict.fromkeys(labels))  # 1 and 1.0 are one level
    return tuple(sorted({level_key(v) for v in values}))


def is_numeric_column(series: pd.Series) -> bool:
    """Whether a column holds numbers (not booleans, strings or categories)."""
    return (
        pd.api.types.is_numeric_dtype(series)
        and not pd.api.types.is_bool_dtype(series)
        and not isinstance(series.dtype, pd.CategoricalDtype)
    )


class LevelSpec(Protocol):
    """What a level-valued spec provides."""

    @property
    def n_levels(self) -> int: ...

    @property
    def labels(self) -> tuple[str, ...] | None: ...


def normalise_levels(levels: object, family: str) -> tuple[str, ...] | int | None:
    """Check declared levels: a count of at least 2, or at least 2 distinct labels.

    ``None`` (no levels) stays ``None``: they are read from the training rows at fit
    time (:meth:`LevelFamily.levels_from_data`).

    Raises
    ------
    ValueError
        Saying how to declare the levels.
    """
    if levels is None:
        return None
    if isinstance(levels, int) and not isinstance(levels, bool):
        if levels < 2:
            raise ValueError(NO_LEVELS.format(family=family, levels=levels))
        return levels
    if isinstance(levels, str | bool) or not hasattr(levels, "__iter__"):
        raise ValueError(NO_LEVELS.format(family=family, levels=levels))
    labels = tuple(str(level) for level in levels)
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise ValueError(NO_LEVELS.format(family=family, levels=levels))
    return labels


def _spec(spec: Observed) -> LevelSpec:
    assert hasattr(spec, "n_levels") and hasattr(spec, "labels")
    return spec


def _article(spec: Observed) -> str:
    name = type(spec).__name__
    return f"{'an' if name[0] in 'AEIOU' else 'a'} {name}"


class LevelFamily(Family):
    """Base of level-valued families: levels read and checked, codes, frame columns (their
    Stan data and indicator columns: :mod:`counterfair.stan.families.levels`)."""

    ordered_levels: bool = False
    """Whether data frame columns are ordered Categoricals."""

    def levels_from_data(self, spec: Observed, series: pd.Series, column: str) -> Observed | None:
        if getattr(spec, "levels", None) is not None:
            return None
        labels = self.read_levels(series, column)
        if len(labels) < 2:
            raise errors.DataError(
                SINGLE_LEVEL.format(
                    column=column, family=_article(spec), value=labels[0] if labels else None
                )
            )
        reference = getattr(spec, "reference", None)
        if reference is not None and str(reference) not in labels:
            raise errors.DataError(
                f"column {column!r}: reference level {reference!r} of {_article(spec)} node "
                f"is not among the levels of the training rows {list(labels)}"
            )
        return dataclasses.replace(spec, levels=labels)  # type: ignore[call-arg]

    def read_levels(self, series: pd.Series, column: str) -> tuple[str, ...]:
        """The levels of a training column (sorted: :func:`distinct_levels`)."""
        return distinct_levels(series)

    def column_values(self, spec: Observed, series: pd.Series, column: str) -> np.ndarray:
        level_spec = _spec(spec)
        labels = level_spec.labels
        if getattr(spec, "levels", 0) is None:
            raise errors.DataError(NEEDS_FIT.format(column=column, family=_article(spec)))
        if labels is None:
            values = super().column_values(spec, series, column)
            bad = (values < 0) | (values >= level_spec.n_levels) | (values != np.round(values))
            if bad.any():
                i = int(np.argmax(bad))
                raise errors.DataError(
                    UNKNOWN_LEVEL.format(
                        column=column,
                        family=_article(spec),
                        levels=list(range(level_spec.n_levels)),
                        value=float(values[i]),
                        row=row_label(series.index, i),
                    )
                )
            return values
        lookup = {label: code for code, label in enumerate(labels)}
        raw = series.to_numpy(dtype=object)
        codes = np.empty(raw.shape[0])
        for i, value in enumerate(raw):
            code = lookup.get(str(value))
            if code is None:
                code = lookup.get(level_key(value))
            if code is None:
                item = getattr(value, "item", None)
                raise errors.DataError(
                    UNKNOWN_LEVEL.format(
                        column=column,
                        family=_article(spec),
                        levels=list(labels),
                        value=item() if callable(item) else value,
                        row=row_label(series.index, i),
                    )
                )
            codes[i] = code
        return codes

    def n_levels(self, spec: Observed) -> int | None:
        return _spec(spec).n_levels

    def coefficient_scale(self, values: np.ndarray) -> float:
        return float(2.0 / np.sqrt(max(values.shape[0], 1)))

    def frame_column(self, spec: Observed, values: np.ndarray) -> Any:
        codes = np.asarray(values).astype(np.int64)
        labels = _spec(spec).labels
        if labels is None:
            return codes
        return pd.Categorical.from_codes(
            codes, categories=list(labels), ordered=self.ordered_levels
        )

    def check_statistics(self, spec: Observed) -> dict[str, Statistic]:
        level_spec = _spec(spec)
        labels = level_spec.labels or tuple(str(k) for k in range(level_spec.n_levels))
        return {f"share of {label}": share_statistic(code) for code, label in enumerate(labels)}

    def parent_levels(self, spec: Observed) -> int | None:
        return _spec(spec).n_levels
