"""The roles of the Standard Fairness Model, checked once against the rows.

The Standard Fairness Model (SFM) of Plečko and Bareinboim's Causal Fairness Analysis
names four sets of columns and no mechanism: the protected attribute ``X``, its
confounders ``Z`` (causes of ``X`` and ``Y`` or merely correlated with ``X``), its
mediators ``W`` (caused by ``X``, causes of ``Y``) and the outcome ``Y``. Its graph is
``Z <-> X``, ``Z -> W``, ``X -> W``, ``{X, Z, W} -> Y``, with no order assumed inside
``Z`` or inside ``W``. :func:`check_sfm_roles` reads the roles the user gives, checks
them against the data (one error naming the column for each mistake, before anything
is fitted) and decides how each covariate enters the nuisance models
(:mod:`counterfair.audit.sfm_models`): a number, a category with few levels, or a
grouping column whose many levels are partially pooled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from counterfair import errors

__all__ = [
    "GROUP_LEVELS",
    "OUTCOME_FAMILIES",
    "SMOOTH_VALUES",
    "SFMRoles",
    "check_sfm_roles",
]

GROUP_LEVELS = 20
"""A categorical covariate with more levels than this enters as a partially pooled
group effect (``(1 | occupation)``) rather than one fixed weight per level."""

SMOOTH_VALUES = 10
"""A numeric covariate with at least this many distinct values gets a penalised spline
on top of its straight line (fewer values: the straight line only)."""

OUTCOME_FAMILIES = ("normal", "negative_binomial", "poisson", "bernoulli")
"""The families an outcome may take (``family=`` of :func:`~counterfair.audit.fit_sfm`)."""


@dataclass(frozen=True)
class SFMRoles:
    """The checked roles, the kinds of the covariates and the outcome's family.

    Attributes
    ----------
    attribute, x0, x1 : str
        ``X`` and its two levels (as strings; TV is ``E[y | x1] - E[y | x0]``).
    outcome : str
        ``Y``.
    confounders, mediators : tuple of str
        ``Z`` and ``W``.
    numeric, categorical, grouped : tuple of str
        How each covariate of ``Z`` and ``W`` enters: a number (standardised, a straight
        line and, with at least :data:`SMOOTH_VALUES` values, a spline), a category with
        at most :data:`GROUP_LEVELS` levels (one weight per level), or a grouping column
        (partially pooled intercepts).
    levels : dict of str to tuple of str
        The levels of every categorical and grouping covariate, over all the rows.
    family : str
        The outcome's family, one of :data:`OUTCOME_FAMILIES`.
    family_reason : str
        Why that family (chosen from the column, or given).
    """

    attribute: str
    x0: str
    x1: str
    outcome: str
    confounders: tuple[str, ...]
    mediators: tuple[str, ...]
    numeric: tuple[str, ...]
    categorical: tuple[str, ...]
    grouped: tuple[str, ...]
    levels: dict[str, tuple[str, ...]]
    family: str
    family_reason: str

    @property
    def covariates(self) -> tuple[str, ...]:
        """``Z`` then ``W``."""
        return (*self.confounders, *self.mediators)


def _names(value: str | Sequence[str] | None, role: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    names = tuple(value)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"{role} are column names (str), got {name!r}")
    return names


def _plain(value: object) -> object:
    """A numpy scalar as the Python value it holds (messages print ``1.5``, not
    ``np.float64(1.5)``)."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def _is_numeric(series: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(series)) and not pd.api.types.is_bool_dtype(
        series
    )


def _choose_family(y: pd.Series, outcome: str) -> tuple[str, str]:
    values = y.to_numpy()
    distinct = pd.unique(values)
    if len(distinct) == 2:
        return "bernoulli", f"{outcome!r} takes two values"
    if not _is_numeric(y):
        raise errors.DataError(
            f"outcome {outcome!r} is neither numeric nor binary (values such as "
            f"{list(distinct[:3])}): decompose a number or a yes/no outcome"
        )
    numbers = values.astype(float)
    integer = bool(np.all(numbers == np.round(numbers)))
    if integer and numbers.min() >= 0:
        mean, var = float(numbers.mean()), float(numbers.var())
        if var > 1.5 * mean:
            return "negative_binomial", (
                f"{outcome!r} is a non-negative whole number whose variance is "
                f"{var / max(mean, 1e-12):,.0f} times its mean: a negative binomial with a "
                "log link models its mean directly, keeps it positive and lets the spread "
                "grow with the mean (as a gamma GLM would); family='normal' models it on "
                "its own scale instead"
            )
        return "poisson", f"{outcome!r} is a count whose variance is near its mean"
    return "normal", f"{outcome!r} is a real number"


def check_sfm_roles(
    data: pd.DataFrame,
    *,
    attribute: str,
    x0: object,
    x1: object,
    outcome: str,
    confounders: str | Sequence[str] | None,
    mediators: str | Sequence[str] | None,
    categorical: str | Sequence[str] | None = None,
    family: str | None = None,
) -> SFMRoles:
    """Check the SFM's roles against ``data`` and decide how each covariate enters.

    Raises
    ------
    DataError
        Naming the column: a column named in two roles, a role naming no column,
        ``X`` with one level, ``x0`` equal to ``x1`` or a level ``X`` does not take, a
        constant mediator, an outcome or covariate with missing values.
    ValueError
        An unknown ``family`` (naming the families).
    """
    if not isinstance(data, pd.DataFrame) or data.empty:
        raise errors.DataError("data must be a non-empty pandas DataFrame")
    z = _names(confounders, "confounders")
    w = _names(mediators, "mediators")
    cats = _names(categorical, "categorical")
    roles: dict[str, list[str]] = {}
    for role, names in (
        ("attribute", (attribute,)), ("outcome", (outcome,)), ("confounders", z),
        ("mediators", w),
    ):
        for name in names:
            roles.setdefault(name, []).append(role)
    for name, where in roles.items():
        if len(where) > 1 or (where[0] in ("confounders", "mediators") and
                              [*z, *w].count(name) > 1):
            named = " and ".join(dict.fromkeys(where))
            raise errors.DataError(
                f"column {name!r} is named more than once ({named}): each column has one "
                "role in the Standard Fairness Model"
            )
    for name, where in roles.items():
        if name not in data.columns:
            raise errors.DataError(
                f"column {name!r} (the {where[0].rstrip('s')}) is not in the data; "
                f"columns: {list(data.columns)}"
            )
    for name in cats:
        if name not in (*z, *w):
            raise errors.DataError(
                f"categorical= names {name!r}, which is neither a confounder nor a mediator"
            )
    if family is not None and family not in OUTCOME_FAMILIES:
        raise ValueError(f"family must be one of {OUTCOME_FAMILIES} or None, got {family!r}")
    missing = [c for c in (attribute, outcome, *z, *w) if data[c].isna().any()]
    if missing:
        counts = ", ".join(f"{c!r} ({int(data[c].isna().sum()):,} rows)" for c in missing)
        raise errors.DataError(
            f"missing values in {counts}: the decomposition needs every named column "
            "complete; drop those rows or fill them first"
        )
    x = data[attribute].astype(str)
    levels = tuple(sorted(pd.unique(x)))
    if len(levels) < 2:
        raise errors.DataError(
            f"attribute {attribute!r} takes one level only ({levels[0]!r}): there is no gap "
            "to decompose"
        )
    s0, s1 = str(x0), str(x1)
    if s0 == s1:
        raise errors.DataError(f"x0 and x1 are both {s0!r}: name two levels of {attribute!r}")
    for name, level in (("x0", s0), ("x1", s1)):
        if level not in levels:
            raise errors.DataError(
                f"{name}={level!r} is not a level of {attribute!r}; its levels: {list(levels)}"
            )
    kept = data.loc[x.isin((s0, s1)).to_numpy()]
    for column in w:
        if kept[column].nunique() < 2:
            raise errors.DataError(
                f"mediator {column!r} is constant ({_plain(kept[column].iloc[0])!r}) in the "
                "rows of "
                f"{s0!r} and {s1!r}: it carries no effect; drop it from the mediators"
            )
    numeric: list[str] = []
    categorical_: list[str] = []
    grouped: list[str] = []
    covariate_levels: dict[str, tuple[str, ...]] = {}
    for column in (*z, *w):
        series = kept[column]
        if _is_numeric(series) and column not in cats:
            numeric.append(column)
            continue
        values = tuple(sorted(pd.unique(series.astype(str))))
        covariate_levels[column] = values
        (grouped if len(values) > GROUP_LEVELS else categorical_).append(column)
    if family is None:
        chosen, reason = _choose_family(kept[outcome], outcome)
    else:
        chosen, reason = family, f"family={family!r} was given"
    y = kept[outcome]
    if chosen in ("negative_binomial", "poisson"):
        numbers = pd.to_numeric(y, errors="coerce")
        bad = numbers.isna() | (numbers < 0) | (numbers != np.round(numbers))
        if bad.any():
            raise errors.DataError(
                f"outcome {outcome!r} has values that are not non-negative whole numbers "
                f"(first: {y[bad].iloc[0]!r}); a {chosen} outcome counts"
            )
    if chosen == "normal" and not _is_numeric(y):
        raise errors.DataError(f"outcome {outcome!r} is not numeric: family='normal' needs numbers")
    if chosen == "bernoulli" and y.nunique() != 2:
        raise errors.DataError(
            f"outcome {outcome!r} takes {y.nunique()} values: family='bernoulli' needs two"
        )
    return SFMRoles(
        attribute=attribute, x0=s0, x1=s1, outcome=outcome, confounders=z, mediators=w,
        numeric=tuple(numeric), categorical=tuple(categorical_), grouped=tuple(grouped),
        levels=covariate_levels, family=chosen, family_reason=reason,
    )
