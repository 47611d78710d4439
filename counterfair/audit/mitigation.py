"""Pre-processing bias mitigation: reweighing and parametrised undersampling.

* :func:`reweighing_weights` -- Kamiran and Calders (2012):
  ``W(a, y) = P(A = a) P(Y = y) / P(A = a, Y = y)``; in the weighted data ``A`` and ``Y``
  are independent.
* :func:`undersample` -- Cesaro's parametrised undersampling with ``d in [-1, 1]``: the
  positive rate of the privileged (favoured) group is moved to
  ``f(d) = a d^2 + b d + c`` and that of the unprivileged group to
  ``u(d) = a d^2 - b d + c`` with ``a = (PR_F + PR_U) / 2 - PR_D``,
  ``b = (PR_F - PR_U) / 2`` and ``c = PR_D`` (``PR_D``: positive rate of all the data).
  ``d = 1`` leaves the rates unchanged, ``d = 0`` equalises them at ``PR_D`` and
  ``d = -1`` swaps them.  A group's rate is lowered by dropping positives and raised by
  dropping negatives, so no row is ever duplicated.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ._groups import encode
from ._validation import (
    NO_POSITIVES,
    OUT_OF_RANGE,
    as_1d,
    as_binary,
    check_finite,
    check_lengths,
)
from .bootstrap import Seed
from .two_groups import privileged_indicator


def reweighing_weights(protected: ArrayLike, y_true: ArrayLike) -> pd.Series:
    """Weights ``P(A = a) P(Y = y) / P(A = a, Y = y)`` per individual.

    Parameters
    ----------
    protected
        Group per individual (any number of groups).
    y_true
        Labels (any discrete values).

    Returns
    -------
    pandas.Series
        One positive weight per individual; the weights sum to the number of individuals.
    """
    a = as_1d(protected, "protected")
    y = as_1d(y_true, "y_true")
    check_lengths([("protected", a.size), ("y_true", y.size)])
    a_codes, _ = encode(a, "protected")
    y_codes, _ = encode(y, "y_true")
    n = a.size
    p_a = np.bincount(a_codes) / n
    p_y = np.bincount(y_codes) / n
    joint = np.bincount(a_codes * (y_codes.max() + 1) + y_codes) / n
    p_ay = joint[a_codes * (y_codes.max() + 1) + y_codes]
    return pd.Series(p_a[a_codes] * p_y[y_codes] / p_ay, name="weight")


@dataclass(frozen=True, kw_only=True)
class UndersamplingPlan:
    """Target positive rates of :func:`undersample` (``F``: privileged, ``U``: other).

    Attributes
    ----------
    d
        The parameter in [-1, 1].
    rate_privileged, rate_unprivileged, rate_overall
        ``PR_F``, ``PR_U`` and ``PR_D`` before sampling.
    target_privileged, target_unprivileged
        ``f(d)`` and ``u(d)`` (clipped to [0, 1]).
    """

    d: float
    rate_privileged: float
    rate_unprivileged: float
    rate_overall: float
    target_privileged: float
    target_unprivileged: float


def undersampling_targets(rate_privileged: float, rate_unprivileged: float,
                          rate_overall: float, d: float) -> tuple[float, float]:
    """``(f(d), u(d))`` for the given positive rates (see the module docstring)."""
    d = check_finite(d, "d")
    if not -1.0 <= d <= 1.0:
        raise ValueError(OUT_OF_RANGE.format(name="d", low=-1, high=1, value=d))
    a = (rate_privileged + rate_unprivileged) / 2.0 - rate_overall
    b = (rate_privileged - rate_unprivileged) / 2.0
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
    protected: ArrayLike,
    y_true: ArrayLike,
    *,
    privileged: Hashable,
    d: float,
    seed: Seed = 0,
) -> tuple[NDArray[np.intp], UndersamplingPlan]:
    """Rows to keep so that the positive rates become ``f(d)`` and ``u(d)``.

    Parameters
    ----------
    protected
        Group per individual; ``privileged`` versus every other value.
    y_true
        Binary labels (1: positive / favourable).
    privileged
        Label of the privileged group ``F``.
    d
        Parameter in [-1, 1] (1: unchanged, 0: equal rates, -1: rates swapped).
    seed
        Seed of the random choice of the dropped rows.

    Returns
    -------
    tuple
        Sorted positions of the kept rows, and the :class:`UndersamplingPlan`.
    """
    y = as_binary(y_true, "y_true")
    priv = privileged_indicator(protected, privileged)
    check_lengths([("protected", priv.size), ("y_true", y.size)])
    rates = (float(y[priv].mean()), float(y[~priv].mean()), float(y.mean()))
    f, u = undersampling_targets(*rates, d)
    # the quadratic can leave [0, 1] for extreme rates (e.g. PR_F near 1 and PR_U near 0)
    f, u = float(np.clip(f, 0.0, 1.0)), float(np.clip(u, 0.0, 1.0))
    rng = np.random.default_rng(seed)
    kept = []
    for mask, target, label in ((priv, f, privileged), (~priv, u, f"not {privileged}")):
        positives = np.flatnonzero(mask & (y == 1))
        negatives = np.flatnonzero(mask & (y == 0))
        n_pos, n_neg = _keep_counts(positives.size, negatives.size, target, label,
                                    "protected")
        kept.append(rng.choice(positives, size=n_pos, replace=False))
        kept.append(rng.choice(negatives, size=n_neg, replace=False))
    plan = UndersamplingPlan(d=float(d), rate_privileged=rates[0], rate_unprivileged=rates[1],
                             rate_overall=rates[2], target_privileged=f,
                             target_unprivileged=u)
    return np.sort(np.concatenate(kept)).astype(np.intp), plan
