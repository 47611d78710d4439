"""Pre-processing bias mitigation for training a learner: reweighing and parametrised
undersampling.

* :func:`reweighing_weights` -- Kamiran and Calders (2012):
  ``W(a, y) = P(A = a) P(Y = y) / P(A = a, Y = y)``; in the weighted data ``A`` and ``Y``
  are independent. Pass the weights as ``sample_weight`` to the estimator's ``fit``.
* :func:`undersample` -- Cesaro's parametrised undersampling with ``d in [-1, 1]``: the
  positive rate of the reference (privileged, favoured) group ``F`` is moved to
  ``f(d) = a d^2 + b d + c`` and that of the other rows ``U`` to
  ``u(d) = a d^2 - b d + c`` with ``a = (PR_F + PR_U) / 2 - PR_D``,
  ``b = (PR_F - PR_U) / 2`` and ``c = PR_D`` (``PR_D``: positive rate of all the data).
  ``d = 1`` leaves the rates unchanged, ``d = 0`` equalises them at ``PR_D`` and
  ``d = -1`` swaps them.  A group's rate is lowered by dropping positives and raised by
  dropping negatives, so no row is ever duplicated.

Both take the protected attribute's value per row (``attribute``) and the labels
(``y_true``), as the audits of :mod:`counterfair.audit` measure what they change. The
checks are the audits' own (same messages), written here because ``learn`` and ``audit``
never import each other.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

Seed = int | np.random.Generator | None
"""A seed or a ``numpy.random.Generator`` (the audits' ``seed=``)."""

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
EMPTY_GROUP = (
    "group {group!r} of attribute {attribute!r} has no members; "
    "remove the unused category or pass data that contains it"
)
GROUP_NOT_FOUND = "{name} {group!r} not found in {where}; available groups: {available}"
NO_OTHER_GROUP = (
    "every individual belongs to {name} {group!r}; a comparison needs members of another group"
)
NOT_FINITE_NUMBER = "{name} must be a finite number; got {value!r}"
OUT_OF_RANGE = "{name} must satisfy {low} <= {name} <= {high}; got {value!r}"
NO_POSITIVES = (
    "group {group!r} of attribute {attribute!r} has no {label} outcomes, so its rate cannot "
    "be moved to the target {target:.4g}"
)

_MAX_SHOWN = 10


def _shown(values: list[Any]) -> str:
    """At most ``_MAX_SHOWN`` values for an error message."""
    items = [v.item() if isinstance(v, np.generic) else v for v in values[:_MAX_SHOWN]]
    text = repr(items)
    if len(values) > _MAX_SHOWN:
        text = text[:-1] + f", ... ({len(values)} in total)]"
    return text


def _one_dimensional(values: ArrayLike, name: str) -> NDArray[Any]:
    """``values`` as a non-empty 1-D array without missing entries, or raise naming ``name``."""
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


def _same_lengths(first: tuple[str, int], other: tuple[str, int]) -> None:
    if other[1] != first[1]:
        raise ValueError(LENGTH_MISMATCH.format(name=other[0], length=other[1],
                                                other_name=first[0], other_length=first[1]))


def _binary(values: ArrayLike, name: str) -> NDArray[np.float64]:
    """A 0/1 float array, or raise naming ``name`` and the offending values."""
    arr = _one_dimensional(values, name)
    if arr.dtype == bool:
        return arr.astype(np.float64)
    try:
        numeric = arr.astype(np.float64)
    except (TypeError, ValueError):
        numeric = None
    if numeric is None or not bool(np.all((numeric == 0.0) | (numeric == 1.0))):
        uniques = pd.unique(pd.Series(arr, dtype=object))
        bad = [v for v in uniques if not _is_zero_one(v)]
        raise ValueError(NOT_BINARY.format(name=name, values=_shown(bad)))
    return numeric


def _is_zero_one(value: Any) -> bool:
    try:
        return float(value) in (0.0, 1.0)
    except (TypeError, ValueError):
        return False


def _codes(values: NDArray[Any], name: str) -> NDArray[np.intp]:
    """Integer codes of one categorical variable (an unused category is an error)."""
    series = pd.Series(values)
    if isinstance(series.dtype, pd.CategoricalDtype):
        codes = series.cat.codes.to_numpy().astype(np.intp)
        counts = np.bincount(codes, minlength=len(series.cat.categories))
        for label, count in zip(series.cat.categories, counts, strict=True):
            if count == 0:
                raise ValueError(EMPTY_GROUP.format(group=label, attribute=name))
        return codes
    try:
        found, _ = pd.factorize(series, sort=True)
    except TypeError:
        found, _ = pd.factorize(series, sort=False)
    return np.asarray(found, dtype=np.intp)


def _reference_rows(attribute: ArrayLike, reference: Hashable) -> NDArray[np.bool_]:
    """``True`` where ``attribute == reference``; raise when either side is empty."""
    values = _one_dimensional(attribute, "attribute")
    mask = np.asarray(pd.Series(values, dtype=object) == reference, dtype=bool)
    if not mask.any():
        labels = sorted({str(v) for v in pd.unique(pd.Series(values, dtype=object))})
        raise ValueError(GROUP_NOT_FOUND.format(name="reference group", group=reference,
                                                where="attribute", available=_shown(labels)))
    if mask.all():
        raise ValueError(NO_OTHER_GROUP.format(name="reference group", group=reference))
    return mask


def reweighing_weights(attribute: ArrayLike, y_true: ArrayLike) -> pd.Series:
    """Weights ``P(A = a) P(Y = y) / P(A = a, Y = y)`` per individual.

    Parameters
    ----------
    attribute
        The protected attribute's value (group) per individual (any number of groups).
    y_true
        Labels (any discrete values).

    Returns
    -------
    pandas.Series
        One positive weight per individual; the weights sum to the number of individuals.
    """
    a = _one_dimensional(attribute, "attribute")
    y = _one_dimensional(y_true, "y_true")
    _same_lengths(("attribute", a.size), ("y_true", y.size))
    a_codes = _codes(a, "attribute")
    y_codes = _codes(y, "y_true")
    n = a.size
    p_a = np.bincount(a_codes) / n
    p_y = np.bincount(y_codes) / n
    joint = np.bincount(a_codes * (y_codes.max() + 1) + y_codes) / n
    p_ay = joint[a_codes * (y_codes.max() + 1) + y_codes]
    return pd.Series(p_a[a_codes] * p_y[y_codes] / p_ay, name="weight")


@dataclass(frozen=True, kw_only=True)
class UndersamplingPlan:
    """Target positive rates of :func:`undersample` (``F``: the reference group, ``U``: the
    other rows).

    Attributes
    ----------
    d
        The parameter in [-1, 1].
    rate_reference, rate_other, rate_overall
        ``PR_F``, ``PR_U`` and ``PR_D`` before sampling.
    target_reference, target_other
        ``f(d)`` and ``u(d)`` (clipped to [0, 1]).
    """

    d: float
    rate_reference: float
    rate_other: float
    rate_overall: float
    target_reference: float
    target_other: float


def undersampling_targets(rate_reference: float, rate_other: float,
                          rate_overall: float, d: float) -> tuple[float, float]:
    """``(f(d), u(d))`` for the given positive rates (see the module docstring)."""
    if isinstance(d, bool) or not isinstance(d, int | float) or not math.isfinite(d):
        raise ValueError(NOT_FINITE_NUMBER.format(name="d", value=d))
    d = float(d)
    if not -1.0 <= d <= 1.0:
        raise ValueError(OUT_OF_RANGE.format(name="d", low=-1, high=1, value=d))
    a = (rate_reference + rate_other) / 2.0 - rate_overall
    b = (rate_reference - rate_other) / 2.0
    c = rate_overall
    return a * d * d + b * d + c, a * d * d - b * d + c


def _keep_counts(n_pos: int, n_neg: int, target: float, group: Hashable,
                 attribute: str) -> tuple[int, int]:
    """Numbers of positives and negatives to keep so that their rate is ``target``."""
    rate = n_pos / (n_pos + n_neg)
    if np.isclose(target, rate):
        return n_pos, n_neg
    if target < rate:  # drop positives: n_pos' / (n_pos' + n_neg) = target
        if n_neg == 0:
            raise ValueError(NO_POSITIVES.format(group=group, attribute=attribute,
                                                 label="negative", target=target))
        return min(n_pos, round(target * n_neg / (1.0 - target))), n_neg
    if n_pos == 0:  # raise the rate by dropping negatives
        raise ValueError(NO_POSITIVES.format(group=group, attribute=attribute,
                                             label="positive", target=target))
    return n_pos, min(n_neg, round(n_pos * (1.0 - target) / target))


def undersample(
    attribute: ArrayLike,
    y_true: ArrayLike,
    *,
    reference: Hashable,
    d: float,
    seed: Seed = 0,
) -> tuple[NDArray[np.intp], UndersamplingPlan]:
    """Rows to keep so that the positive rates become ``f(d)`` and ``u(d)``.

    Parameters
    ----------
    attribute
        The protected attribute's value (group) per individual; ``reference`` versus
        every other value.
    y_true
        Binary labels (1: positive / favourable).
    reference
        The reference group ``F`` (Cesaro's privileged, favoured group).
    d
        Parameter in [-1, 1] (1: unchanged, 0: equal rates, -1: rates swapped).
    seed
        Seed of the random choice of the dropped rows.

    Returns
    -------
    tuple
        Sorted positions of the kept rows, and the :class:`UndersamplingPlan`.
    """
    y = _binary(y_true, "y_true")
    ref = _reference_rows(attribute, reference)
    _same_lengths(("attribute", ref.size), ("y_true", y.size))
    rates = (float(y[ref].mean()), float(y[~ref].mean()), float(y.mean()))
    f, u = undersampling_targets(*rates, d)
    # the quadratic can leave [0, 1] for extreme rates (e.g. PR_F near 1 and PR_U near 0)
    f, u = float(np.clip(f, 0.0, 1.0)), float(np.clip(u, 0.0, 1.0))
    rng = np.random.default_rng(seed)
    kept = []
    for mask, target, label in ((ref, f, reference), (~ref, u, f"not {reference}")):
        positives = np.flatnonzero(mask & (y == 1))
        negatives = np.flatnonzero(mask & (y == 0))
        n_pos, n_neg = _keep_counts(positives.size, negatives.size, target, label,
                                    "attribute")
        kept.append(rng.choice(positives, size=n_pos, replace=False))
        kept.append(rng.choice(negatives, size=n_neg, replace=False))
    plan = UndersamplingPlan(d=float(d), rate_reference=rates[0], rate_other=rates[1],
                             rate_overall=rates[2], target_reference=f, target_other=u)
    return np.sort(np.concatenate(kept)).astype(np.intp), plan


__all__ = ["UndersamplingPlan", "reweighing_weights", "undersample", "undersampling_targets"]
