"""The columns the SFM decomposition's nuisance models read, for any of the rows.

* :func:`sfm_frame` encodes the rows of ``x0`` and ``x1`` once: each numeric covariate's
  regression spline (:func:`spline_columns`) or straight line, each category's
  indicators, each grouping column's levels, ``X`` and the outcome;
* :class:`QRMap` maps a model's fixed columns to the orthogonal ``q`` columns it is
  fitted on (:mod:`counterfair.audit.sfm_models` says why);
* :class:`GroupEncoding` is a grouping column's cross-fitted empirical-Bayes means of a
  model's target (``groups="encoded"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .sfm_roles import SMOOTH_VALUES, SFMRoles

__all__ = [
    "FOLDS",
    "Q_LIMIT",
    "SPLINE_DF",
    "GroupEncoding",
    "QRMap",
    "SFMFrame",
    "SplineBasis",
    "covariate_columns",
    "cross_fitted",
    "level_means_of_y",
    "link",
    "sfm_frame",
    "spline_columns",
]

Q_LIMIT = 4.0
"""The largest |value| a model's q column takes on its rows (a unit-variance column
beyond it is scaled down to it)."""

SPLINE_DF = 5
"""B-spline columns of a numeric covariate's cubic regression spline (one is dropped)."""


@dataclass(frozen=True)
class SplineBasis:
    """A numeric covariate's cubic B-spline basis, learned on some rows, for any rows.

    Knots at quantiles of the learning rows' distinct values; a value beyond their range
    is held at its end (the basis is flat outside)."""

    lo: float
    hi: float
    knots: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray, df: int = SPLINE_DF) -> SplineBasis:
        lo, hi = float(values.min()), float(values.max())
        distinct = np.unique(values)
        inner = np.unique(np.quantile(distinct, np.linspace(0, 1, df - 2)[1:-1]))
        return cls(lo, hi, np.concatenate([[lo] * 4, inner, [hi] * 4]))

    def __call__(self, values: np.ndarray) -> np.ndarray:
        """The basis at ``values``, ``(N, df - 1)``: the first column dropped (the
        intercept spans the columns' sum)."""
        from scipy.interpolate import BSpline

        clipped = np.clip(np.asarray(values, dtype=float), self.lo, self.hi)
        basis = BSpline.design_matrix(clipped, self.knots, 3).toarray()
        return np.asarray(basis[:, 1:], dtype=float)


def spline_columns(values: np.ndarray, df: int = SPLINE_DF) -> np.ndarray:
    """A cubic B-spline basis of ``values``, ``(N, df - 1)``: knots at quantiles of the
    distinct values, the first column dropped (the intercept spans the columns' sum)."""
    return SplineBasis.of(values, df)(values)


@dataclass(frozen=True)
class SFMFrame:
    """The rows of ``x0`` and ``x1`` (in the data's order) as the nuisance models read them.

    Attributes
    ----------
    design : numpy.ndarray
        The fixed columns of every covariate of ``Z`` then ``W`` that is not grouped,
        ``(N, p)``: splines, straight lines, indicators.
    design_names : tuple of str
        What each column is (``"age: spline 2"``, ``"race = black"``).
    design_of : tuple of str
        The covariate each column belongs to.
    groups : dict of str to numpy.ndarray
        Each grouping covariate's levels (strings), ``(N,)``.
    x : numpy.ndarray
        ``True`` where ``X = x1``.
    y : numpy.ndarray
        The outcome on its own scale (the positive class's indicator if binary).
    y_fit : numpy.ndarray
        The outcome as the outcome model reads it (standardised if Normal, integers if
        a count, 0/1 if binary).
    y_location, y_scale : float
        The Normal outcome's standardisation (0 and 1 otherwise).
    positive : str or None
        The positive class of a binary outcome.
    bases : dict of str to SplineBasis
        Each smooth covariate's basis (to encode other rows alike: ``sfm_frame(like=)``).
    """

    design: np.ndarray
    design_names: tuple[str, ...]
    design_of: tuple[str, ...]
    groups: dict[str, np.ndarray]
    x: np.ndarray
    y: np.ndarray
    y_fit: np.ndarray
    y_location: float
    y_scale: float
    positive: str | None
    bases: dict[str, SplineBasis] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.x)


def _positive(y: pd.Series) -> str:
    values = sorted(pd.unique(y.astype(str)))
    for negative, positive in (("0", "1"), ("False", "True"), ("0.0", "1.0"), ("no", "yes")):
        if values == [negative, positive]:
            return positive
    return values[1]


def sfm_frame(
    data: pd.DataFrame, roles: SFMRoles, *, like: SFMFrame | None = None
) -> SFMFrame:
    """The rows of ``x0`` and ``x1`` (in their order), encoded for the nuisance models.

    With ``like``, other rows are encoded as ``like``'s were (its splines' knots, its
    outcome's standardisation and positive class); their outcome may then be missing
    from ``data`` (``y`` is NaN)."""
    x_text = data[roles.attribute].astype(str)
    kept = data.loc[x_text.isin((roles.x0, roles.x1)).to_numpy()]
    blocks: list[np.ndarray] = []
    names: list[str] = []
    owners: list[str] = []
    groups: dict[str, np.ndarray] = {}
    bases: dict[str, SplineBasis] = {}
    for column in roles.covariates:
        if column in roles.numeric:
            values = kept[column].to_numpy(dtype=float)
            smooth = column in like.bases if like is not None else (
                len(np.unique(values)) >= SMOOTH_VALUES
            )
            if smooth:
                basis = like.bases[column] if like is not None else SplineBasis.of(values)
                bases[column] = basis
                block = basis(values)
                labels = [f"{column}: spline {j + 1}" for j in range(block.shape[1])]
            else:
                block, labels = values[:, None], [column]
        elif column in roles.categorical:
            text = kept[column].astype(str).to_numpy()
            others = roles.levels[column][1:]
            block = (text[:, None] == np.asarray(others)[None, :]).astype(float)
            labels = [f"{column} = {level}" for level in others]
        else:
            groups[column] = kept[column].astype(str).to_numpy()
            continue
        blocks.append(block)
        names += labels
        owners += [column] * block.shape[1]
    n = len(kept)
    design = np.hstack(blocks) if blocks else np.zeros((n, 0))
    x = kept[roles.attribute].astype(str).to_numpy() == roles.x1
    if like is not None:
        if roles.outcome in kept.columns:
            y, y_fit = _outcome_values(kept[roles.outcome], roles, like.positive)
        else:
            y = y_fit = np.full(n, np.nan)
        return SFMFrame(
            design=design, design_names=tuple(names), design_of=tuple(owners),
            groups=groups, x=x, y=y, y_fit=(y - like.y_location) / like.y_scale
            if roles.family == "normal" else y_fit,
            y_location=like.y_location, y_scale=like.y_scale, positive=like.positive,
            bases=bases,
        )
    positive = _positive(kept[roles.outcome]) if roles.family == "bernoulli" else None
    y, y_fit = _outcome_values(kept[roles.outcome], roles, positive)
    location, scale = 0.0, 1.0
    if roles.family == "normal":
        location, scale = float(y.mean()), float(y.std()) or 1.0
        y_fit = (y - location) / scale
    return SFMFrame(
        design=design, design_names=tuple(names), design_of=tuple(owners), groups=groups,
        x=x, y=y, y_fit=y_fit, y_location=location, y_scale=scale, positive=positive,
        bases=bases,
    )


def _outcome_values(
    column: pd.Series, roles: SFMRoles, positive: str | None
) -> tuple[np.ndarray, np.ndarray]:
    """The outcome on its own scale and as its family reads it (0/1, whole numbers, or
    the values themselves for a Normal, standardised by the caller)."""
    if roles.family == "bernoulli":
        y = (column.astype(str).to_numpy() == positive).astype(float)
        return y, y.astype(np.int64)
    y = column.to_numpy(dtype=float)
    if roles.family == "normal":
        return y, y.copy()
    return y, np.round(y).astype(np.int64)


@dataclass(frozen=True)
class QRMap:
    """The map of any row's fixed columns to the columns one model was fitted on.

    ``q = (d[:, kept] - mean) @ inverse`` where ``mean`` and ``inverse`` (``R^-1``, each
    column scaled to unit variance on the model's rows, and down to a largest absolute
    value of :data:`Q_LIMIT` where it goes beyond) come from the model's own rows.
    """

    kept: np.ndarray
    mean: np.ndarray
    inverse: np.ndarray

    @classmethod
    def of(cls, design: np.ndarray) -> QRMap:
        """The map of a model's rows ``design``; constant columns are left out."""
        if design.shape[1] == 0:
            return cls(np.zeros(0, dtype=int), np.zeros(0), np.zeros((0, 0)))
        spread = design.std(axis=0)
        kept = np.flatnonzero(spread > 1e-12 * np.maximum(1.0, np.abs(design).max(axis=0)))
        d = design[:, kept]
        mean = d.mean(axis=0)
        _, r = np.linalg.qr(d - mean, mode="reduced")
        # drop columns the others span (|R_jj| tiny): pivot them out one at a time
        diag = np.abs(np.diag(r))
        independent = diag > 1e-8 * max(float(diag.max()), 1e-300)
        if not independent.all():
            kept, mean = kept[independent], mean[independent]
            _, r = np.linalg.qr(design[:, kept] - mean, mode="reduced")
        inverse = np.linalg.inv(r) * math.sqrt(max(design.shape[0] - 1, 1))
        # unit variance on the model's rows, but no column beyond |value| Q_LIMIT: a rare
        # level's direction takes values near sqrt(N / n_level) at its rows (36 for 15
        # rows of 20,000), where a weight's Normal(0, 1) prior let exp(eta) of the
        # Census's log-link salary reach 1e12 on other rows; scaled to a largest |value|
        # of 1 instead, every column's prior was too tight (a binary outcome's mediator
        # effect shrunk to 0 on a simulated SFM)
        largest = np.abs((design[:, kept] - mean) @ inverse).max(axis=0)
        return cls(kept, mean, inverse / np.maximum(1.0, largest / Q_LIMIT))

    def __call__(self, design: np.ndarray) -> np.ndarray:
        if self.kept.size == 0:
            return np.zeros((design.shape[0], 0))
        return np.asarray((design[:, self.kept] - self.mean) @ self.inverse)


FOLDS = 5
"""Folds of the cross-fitted encodings of ``groups="encoded"``."""


def link(family: str, mean: np.ndarray) -> np.ndarray:
    """The family's link of a mean: identity, log or logit."""
    if family in ("negative_binomial", "poisson"):
        return np.asarray(np.log(np.maximum(mean, 1e-6)))
    if family == "bernoulli":
        p = np.clip(mean, 1e-4, 1 - 1e-4)
        return np.asarray(np.log(p / (1 - p)))
    return np.asarray(mean, dtype=float)


@dataclass(frozen=True)
class GroupEncoding:
    """A grouping covariate's partially pooled means of a model's target, on its link.

    Each group's mean is shrunk to the overall mean by ``n_g / (n_g + k)`` where ``k``
    is the ratio of the within-group variance to the between-group variance (their
    moment estimates, as in empirical-Bayes random intercepts); a group the model's
    rows never saw gets the overall mean.
    """

    levels: dict[str, float]
    overall: float

    @classmethod
    def learn(cls, groups: np.ndarray, target: np.ndarray, family: str) -> GroupEncoding:
        codes, inverse = np.unique(groups, return_inverse=True)
        n = np.bincount(inverse, minlength=len(codes)).astype(float)
        sums = np.bincount(inverse, weights=target, minlength=len(codes))
        means = sums / n
        overall = float(target.mean())
        within = float(np.mean((target - means[inverse]) ** 2)) if len(target) else 0.0
        between = float(np.average((means - overall) ** 2, weights=n)) - within * len(codes) / max(
            len(target), 1
        )
        k = within / between if between > 0 else float(len(target))
        shrunk = (sums + k * overall) / (n + k)
        values = link(family, shrunk)
        return cls(dict(zip(codes.tolist(), values.tolist(), strict=True)),
                   float(link(family, np.asarray(overall))))

    def __call__(self, groups: np.ndarray) -> np.ndarray:
        get = self.levels.get
        return np.fromiter((get(g, self.overall) for g in groups), float, len(groups))


def cross_fitted(
    groups: np.ndarray, target: np.ndarray, family: str, positions: np.ndarray
) -> np.ndarray:
    """Each training row's encoding learned from the other folds (rows by position mod
    :data:`FOLDS`), so a row's own outcome never enters its covariate."""
    out = np.empty(len(groups))
    fold = positions % FOLDS
    for k in range(FOLDS):
        held = fold == k
        if held.any():
            out[held] = GroupEncoding.learn(groups[~held], target[~held], family)(groups[held])
    return out


def covariate_columns(
    encoded: SFMFrame,
    owners: Sequence[str],
    encodings: Mapping[str, GroupEncoding],
    rows: slice = slice(None),
) -> np.ndarray:
    """An intercept and the columns of the covariates ``owners`` on ``rows``: their
    splines, straight lines and indicators, and each grouping covariate's ``encodings``
    (one column of its encoded means), ``(N, 1 + p)``; the regressors of a
    least-squares projection on some of the covariates (:mod:`counterfair.audit.sfm_split`,
    :mod:`counterfair.audit.sfm_predictor`)."""
    chosen = set(owners)
    mask = np.asarray([owner in chosen for owner in encoded.design_of], dtype=bool)
    design = encoded.design[rows]
    blocks = [np.ones((len(design), 1)), design[:, mask]]
    blocks += [encodings[c](encoded.groups[c][rows])[:, None] for c in encodings if c in chosen]
    return np.hstack(blocks)


def level_means_of_y(encoded: SFMFrame) -> dict[str, GroupEncoding]:
    """Each grouping covariate's levels' shrunk means of y among the rows of ``x1``, on
    y's scale: the column a projection on that covariate reads (:func:`covariate_columns`)
    when no model encoding of it applies."""
    x1 = encoded.x
    return {c: GroupEncoding.learn(encoded.groups[c][x1], encoded.y[x1], "normal")
            for c in encoded.groups}
