"""Input checks shared by the audit modules.

Every error message is a module-level format string so that the tests can
build the exact expected text (``pytest.raises(..., match=re.escape(...))``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

LENGTH_MISMATCH = (
    "{name} has length {length} but {other_name} has length {other_length}; "
    "all inputs must have one entry per individual"
)
EMPTY_INPUT = "{name} is empty; at least one individual is needed"
NOT_ONE_DIMENSIONAL = "{name} must be one-dimensional; got shape {shape}"
MISSING_VALUES = "{name} contains {count} missing value(s); drop or impute them first"
NOT_BINARY = (
    "{name} must contain binary labels (0/1 or False/True); found non-binary values {values}"
)
NOT_NUMERIC = "{name} must be numeric; got dtype {dtype}"
NOT_FINITE = "{name} contains {count} non-finite value(s) (inf); all values must be finite"
EMPTY_GROUP = (
    "group {group!r} of attribute {attribute!r} has no members; "
    "remove the unused category or pass data that contains it"
)
EMPTY_SLICE = "{name} has no members (tp + fn + fp + tn == 0)"
UNKNOWN_ATTRIBUTE = "{name} names attribute {attribute!r}, which is not one of {available}"
REFERENCE_NOT_FOUND = (
    "reference group {group!r} not found for attribute {attribute!r}; available groups: {available}"
)
GROUP_NOT_FOUND = "{name} {group!r} not found in {where}; available groups: {available}"
NO_OTHER_GROUP = (
    "every individual belongs to {name} {group!r}; a comparison needs members of another group"
)
VALUE_NOT_FOUND = "{name} {value!r} does not occur in {where}; observed values: {available}"
DUPLICATE_ATTRIBUTE = "protected has duplicate attribute name {attribute!r}"
TAU_OUT_OF_RANGE = "tau must satisfy 0 < tau <= 1; got {tau!r}"
PROBABILITY_OUT_OF_RANGE = "{name} must satisfy 0 < {name} < 1; got {value!r}"
NOT_FINITE_NUMBER = "{name} must be a finite number; got {value!r}"
NEGATIVE_COUNT = "{name} must be a non-negative integer; got {value!r}"
POSITIVE_REQUIRED = "{name} must be positive; got {value!r}"
BAD_CHOICE = "{name} must be one of {choices}; got {value!r}"
NEGATIVE_TOLERANCE = "{name} must be non-negative; got {value!r}"
NOT_TWO_GROUPS = (
    "{name} must have exactly two groups for this measure; found {count}: {available}"
)
NOT_A_COLUMN = "{name} {column!r} is not a column of {where}; columns: {available}"
OUT_OF_RANGE = "{name} must satisfy {low} <= {name} <= {high}; got {value!r}"
NO_POSITIVES = (
    "group {group!r} of attribute {attribute!r} has no {label} outcomes, so its rate cannot "
    "be moved to the target {target:.4g}"
)
NO_PREDICTORS = "y_pred must map at least one predictor name to predictions; got an empty mapping"

_MAX_SHOWN = 10


def _shown(values: Sequence[Any]) -> str:
    """Format at most ``_MAX_SHOWN`` values for an error message."""
    items = [v.item() if isinstance(v, np.generic) else v for v in values[:_MAX_SHOWN]]
    text = repr(items)
    if len(values) > _MAX_SHOWN:
        text = text[:-1] + f", ... ({len(values)} in total)]"
    return text


def as_1d(values: ArrayLike, name: str) -> NDArray[Any]:
    """Return ``values`` as a non-empty one-dimensional array without missing entries.

    Parameters
    ----------
    values
        Array-like input (list, numpy array, pandas Series, ...).
    name
        Argument name used in error messages.

    Returns
    -------
    numpy.ndarray
        One-dimensional array (dtype as inferred by numpy / pandas).

    Raises
    ------
    ValueError
        If the input is not one-dimensional, is empty or contains missing values.
    """
    arr: NDArray[Any]
    if isinstance(values, pd.Series | pd.Index):
        missing = int(values.isna().sum())
        arr = np.asarray(values.to_numpy())
    else:
        arr = np.asarray(values)
        if arr.ndim == 2 and 1 in arr.shape and arr.size > 0:
            arr = arr.reshape(-1)
        missing = int(pd.isna(arr).sum()) if arr.ndim == 1 else 0
    if arr.ndim != 1:
        raise ValueError(NOT_ONE_DIMENSIONAL.format(name=name, shape=arr.shape))
    if arr.size == 0:
        raise ValueError(EMPTY_INPUT.format(name=name))
    if missing:
        raise ValueError(MISSING_VALUES.format(name=name, count=missing))
    return arr


def check_lengths(named: Sequence[tuple[str, int]]) -> None:
    """Raise if the given ``(name, length)`` pairs do not all share the first length."""
    first_name, first_length = named[0]
    for name, length in named[1:]:
        if length != first_length:
            raise ValueError(
                LENGTH_MISMATCH.format(
                    name=name, length=length, other_name=first_name, other_length=first_length
                )
            )


def as_numeric(values: ArrayLike, name: str) -> NDArray[np.float64]:
    """Return a finite float array, or raise naming ``name``."""
    arr = as_1d(values, name)
    if arr.dtype == bool:
        return arr.astype(np.float64)
    if not np.issubdtype(arr.dtype, np.number):
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise TypeError(NOT_NUMERIC.format(name=name, dtype=arr.dtype)) from None
    out = arr.astype(np.float64)
    bad = int((~np.isfinite(out)).sum())
    if bad:
        raise ValueError(NOT_FINITE.format(name=name, count=bad))
    return out


def is_binary(values: NDArray[np.float64]) -> bool:
    """Whether every entry is 0 or 1."""
    return bool(np.all((values == 0.0) | (values == 1.0)))


def as_binary(values: ArrayLike, name: str) -> NDArray[np.float64]:
    """Return a 0/1 float array, or raise naming ``name`` and the offending values."""
    arr = as_1d(values, name)
    if arr.dtype == bool:
        return arr.astype(np.float64)
    try:
        numeric = arr.astype(np.float64)
    except (TypeError, ValueError):
        numeric = None
    if numeric is None or not is_binary(numeric):
        uniques = pd.unique(pd.Series(arr, dtype=object))
        bad = [v for v in uniques if not _is_zero_one(v)]
        raise ValueError(NOT_BINARY.format(name=name, values=_shown(bad)))
    return numeric


def _is_zero_one(value: Any) -> bool:
    try:
        return float(value) in (0.0, 1.0)
    except (TypeError, ValueError):
        return False


def check_tau(tau: float) -> float:
    """Validate the four-fifths style threshold ``0 < tau <= 1``."""
    if not isinstance(tau, int | float) or not (0.0 < float(tau) <= 1.0):
        raise ValueError(TAU_OUT_OF_RANGE.format(tau=tau))
    return float(tau)


def check_open_unit(value: float, name: str) -> float:
    """Validate ``0 < value < 1`` (confidence levels and the like)."""
    if not isinstance(value, int | float) or not (0.0 < float(value) < 1.0):
        raise ValueError(PROBABILITY_OUT_OF_RANGE.format(name=name, value=value))
    return float(value)


def check_finite(value: float, name: str) -> float:
    """Validate a finite real number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(NOT_FINITE_NUMBER.format(name=name, value=value))
    return float(value)


def check_count(value: int, name: str) -> int:
    """Validate a non-negative integer such as a number of bootstrap resamples."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ValueError(NEGATIVE_COUNT.format(name=name, value=value))
    return int(value)


def check_choice(value: str, name: str, choices: Sequence[str]) -> str:
    """Validate that ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(BAD_CHOICE.format(name=name, choices=list(choices), value=value))
    return value


def find_label(labels: Sequence[Hashable], wanted: Hashable) -> int | None:
    """Position of ``wanted`` among ``labels`` (compared with ``==``), or ``None``."""
    for position, label in enumerate(labels):
        try:
            if bool(label == wanted):
                return position
        except (TypeError, ValueError):
            continue
    return None


def shown(values: Sequence[Any]) -> str:
    """Public alias of the value formatter used in messages (for the tests)."""
    return _shown(values)
