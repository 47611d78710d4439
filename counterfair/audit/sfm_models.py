"""The nuisance models of the SFM decomposition, declared with counterfair's own nodes.

The x-specific and general effects of the Standard Fairness Model are identified from
two regressions and no mechanism of any mediator (:mod:`counterfair.audit.sfm`):

* the **outcome model** ``mu_x(z, w) = E[y | X = x, z, w]``, fitted separately on the
  rows of each level ``x`` (so ``X`` interacts with every other term: no effect
  modification by ``X`` is assumed away);
* the **attribute model** ``pi(z) = P(X = x1 | z)``, fitted on the rows of both levels.

Each is an SCM of one observed node whose parents are given roots (counterfair's
continuous :class:`~counterfair.Protected` nodes: columns taken as they are, with no
mechanism and no likelihood), fitted by NUTS in Stan like any SCM, so the families,
group effects, priors, warm starts and diagnostics are the package's own. The terms:

* a numeric covariate with at least :data:`~counterfair.audit.sfm_roles.SMOOTH_VALUES`
  distinct values enters by a cubic regression spline: :data:`SPLINE_DF` B-spline
  columns, knots at quantiles of all the rows so that both levels' rows share them, the
  first dropped (the intercept spans their sum); one with fewer values by a straight
  line;
* a categorical covariate with few levels by its reference-coded indicators;
* one with many levels (occupation, industry), ``groups="pooled"``: by partially pooled
  intercepts in Stan (:class:`~counterfair.GroupEffect`; a group never seen in one
  level's rows gets the population's draw); ``groups="encoded"``: by its groups'
  empirical-Bayes means of the model's target over the rows of both levels
  (:class:`GroupEncoding`: each group's mean shrunk to the overall one by its share of
  the between-group variance, on the link scale), cross-fitted over :data:`FOLDS` folds
  so that no row's outcome enters its own covariate, and one weight per model in Stan.
  The package's group effect enters a Stan program as one indicator column per
  level, so each gradient of the Census's outcome model (10,000 rows of one sex, 777
  occupations and industries) reads 7.8 million cells and NUTS had not finished a
  200-iteration pilot in 4 minutes;
  and pooling within each level of X biases the direct and indirect effects: a group
  common in x0 and rare in x1 is shrunk towards x1's mean in the x1 model, which is
  then read at x0's groups (on a simulated SFM with 300 occupations, Ctf-DE 0.64
  against 0.50, 5 posterior sd, in 5 of 5 data sets; encoded over both levels, within
  2.2 sd). ``"encoded"`` is the default; it carries the groups' means, not their
  posterior uncertainty.

The fixed columns enter through their **QR decomposition** on the model's own rows (as
rstanarm's ``QR = TRUE``): with ``D = Q R`` (centred columns, each of ``Q``'s scaled to
unit variance, and down to a largest absolute value of 4 where a rare level's direction
goes beyond, so that a weight's Normal(0, 1) prior bounds what it does at any row), the
model's weights are those of ``Q``'s columns, which the likelihood barely correlates, so
NUTS takes short trajectories with a diagonal metric. A penalised spline
(:class:`~counterfair.Smooth`) and raw correlated columns were tried first: the spline's
variance parameter gave divergences and R-hat up to 1.1 on a straight-line truth, and
the raw columns of the Census (B-spline columns of one covariate, the indicators of one
category) made NUTS run past 5 minutes on 10,000 rows of one level. Any row, of either
level, is mapped by the same ``R`` of the model's rows: ``(D - mean) R^-1``. A column
constant on a model's rows (a level absent there) is left out of that model.

A Normal outcome is standardised for the fit and put back on its own scale for the
effects; a count's intercept prior is centred at the log of its mean.
"""

from __future__ import annotations

import dataclasses
import math
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np
import pandas as pd

from counterfair.errors import ScaleWarning
from counterfair.model.evaluate import linear_predictor, mean_from_eta
from counterfair.model.nodes import Prior, Protected
from counterfair.model.scm import SCM
from counterfair.model.terms.declare import GroupEffect
from counterfair.rows.rows import Rows

from .sfm_roles import SMOOTH_VALUES, SFMRoles

if TYPE_CHECKING:
    from counterfair.inference.fit import Fit
    from counterfair.model.params import ParamDraws

__all__ = [
    "FOLDS",
    "GROUPINGS",
    "SPLINE_DF",
    "GroupEncoding",
    "NuisanceModel",
    "SFMFrame",
    "fit_nuisance",
    "nuisance_scm",
    "sfm_frame",
    "spline_columns",
]

Q_LIMIT = 4.0
"""The largest |value| a model's q column takes on its rows (a unit-variance column
beyond it is scaled down to it)."""

SPLINE_DF = 5
"""B-spline columns of a numeric covariate's cubic regression spline (one is dropped)."""


def spline_columns(values: np.ndarray, df: int = SPLINE_DF) -> np.ndarray:
    """A cubic B-spline basis of ``values``, ``(N, df - 1)``: knots at quantiles of the
    distinct values, the first column dropped (the intercept spans the columns' sum)."""
    from scipy.interpolate import BSpline

    lo, hi = float(values.min()), float(values.max())
    distinct = np.unique(values)
    inner = np.unique(np.quantile(distinct, np.linspace(0, 1, df - 2)[1:-1]))
    knots = np.concatenate([[lo] * 4, inner, [hi] * 4])
    basis = BSpline.design_matrix(np.clip(values, lo, hi), knots, 3).toarray()
    return np.asarray(basis[:, 1:], dtype=float)


def _safe(name: str) -> str:
    safe = re.sub(r"\W", "_", name).strip("_") or "column"
    return f"c_{safe}" if safe[0].isdigit() else safe


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

    def __len__(self) -> int:
        return len(self.x)


def _positive(y: pd.Series) -> str:
    values = sorted(pd.unique(y.astype(str)))
    for negative, positive in (("0", "1"), ("False", "True"), ("0.0", "1.0"), ("no", "yes")):
        if values == [negative, positive]:
            return positive
    return values[1]


def sfm_frame(data: pd.DataFrame, roles: SFMRoles) -> SFMFrame:
    """The rows of ``x0`` and ``x1`` (in their order), encoded for the nuisance models."""
    x_text = data[roles.attribute].astype(str)
    kept = data.loc[x_text.isin((roles.x0, roles.x1)).to_numpy()]
    blocks: list[np.ndarray] = []
    names: list[str] = []
    owners: list[str] = []
    groups: dict[str, np.ndarray] = {}
    for column in roles.covariates:
        if column in roles.numeric:
            values = kept[column].to_numpy(dtype=float)
            if len(np.unique(values)) >= SMOOTH_VALUES:
                block = spline_columns(values)
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
    positive = None
    location, scale = 0.0, 1.0
    if roles.family == "bernoulli":
        positive = _positive(kept[roles.outcome])
        y = (kept[roles.outcome].astype(str).to_numpy() == positive).astype(float)
        y_fit: np.ndarray = y.astype(np.int64)
    else:
        y = kept[roles.outcome].to_numpy(dtype=float)
        if roles.family == "normal":
            location, scale = float(y.mean()), float(y.std()) or 1.0
            y_fit = (y - location) / scale
        else:
            y_fit = np.round(y).astype(np.int64)
    return SFMFrame(
        design=design, design_names=tuple(names), design_of=tuple(owners), groups=groups,
        x=kept[roles.attribute].astype(str).to_numpy() == roles.x1, y=y, y_fit=y_fit,
        y_location=location, y_scale=scale, positive=positive,
    )


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


def _q_names(count: int, taken: set[str]) -> list[str]:
    out = []
    for j in range(count):
        name = f"q{j + 1}"
        while name in taken:
            name = f"{name}_"
        out.append(name)
    return out


GROUPINGS = ("encoded", "pooled")
"""How a grouping covariate enters (``groups=`` of :func:`~counterfair.audit.decompose_sfm`;
the first is the default)."""

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


def _cross_fitted(
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


@dataclass(frozen=True)
class NuisanceModel:
    """One fitted nuisance model and how to read its mean on any of the rows.

    Attributes
    ----------
    name : str
        ``"outcome | x0"``, ``"outcome | x1"`` or ``"attribute"``.
    fit : Fit
        The fitted one-node SCM.
    node : str
        The node whose mean is read.
    own : numpy.ndarray
        Which of :attr:`SFMFrame.design`'s columns the model reads.
    encodings : dict of str to GroupEncoding
        The grouping covariates entering as their encoded means (``groups="encoded"``).
    qr : QRMap
        The map of the model's fixed columns (its own, then the encodings) to its ``q``.
    columns : tuple of str
        The model's column nodes (``q1``, ...).
    groups : dict of str to str
        Node name of each grouping covariate pooled in Stan (``groups="pooled"``).
    left_out : tuple of str
        Fixed columns constant on the model's rows (or spanned by the others), not in it.
    """

    name: str
    fit: Fit
    node: str
    own: np.ndarray
    encodings: dict[str, GroupEncoding]
    qr: QRMap
    columns: tuple[str, ...]
    groups: dict[str, str]
    left_out: tuple[str, ...]

    def design(self, encoded: SFMFrame, rows: slice | np.ndarray) -> np.ndarray:
        """The model's fixed columns on ``rows`` (the encodings learned on all its rows)."""
        blocks = [encoded.design[rows][:, self.own]]
        blocks += [enc(encoded.groups[c][rows])[:, None] for c, enc in self.encodings.items()]
        return np.hstack(blocks)

    def frame(
        self, encoded: SFMFrame, rows: slice | np.ndarray, design: np.ndarray | None = None
    ) -> pd.DataFrame:
        """The model's columns for ``rows`` of ``encoded`` (its fitted node left out)."""
        q = self.qr(self.design(encoded, rows) if design is None else design)
        out: dict[str, Any] = dict(zip(self.columns, q.T, strict=False))
        for column, node in self.groups.items():
            out[node] = encoded.groups[column][rows]
        return pd.DataFrame(out)

    def means(self, encoded: SFMFrame, rows: slice, params: ParamDraws) -> np.ndarray:
        """The node's mean given its parents on ``rows``, one row per draw: ``(S, N)``."""
        frame = self.frame(encoded, rows)
        scm = self.fit.scm
        checked = Rows.check(frame, scm, self.fit.encoding)
        eq = scm.equations[self.node]
        eta = linear_predictor(
            eq, params, checked.values(()), checked.codes,
            reference_coding=scm.coding == "reference", n_rows=len(frame),
        )
        return np.asarray(mean_from_eta(eq, params, eta), dtype=float)


def _outcome_spec(roles: SFMRoles, encoded: SFMFrame, terms: list[Any]) -> Any:
    from counterfair.model.families.bernoulli import Bernoulli
    from counterfair.model.families.negative_binomial import NegativeBinomial
    from counterfair.model.families.normal import Normal
    from counterfair.model.families.poisson import Poisson

    if roles.family == "normal":
        return Normal(terms=tuple(terms))
    if roles.family == "bernoulli":
        return Bernoulli(terms=tuple(terms))
    mean = max(float(encoded.y.mean()), 1e-3)
    centred = Prior("normal", (math.log(mean), 2.5))
    if roles.family == "poisson":
        return Poisson(terms=tuple(terms), prior_intercept=centred)
    return NegativeBinomial(terms=tuple(terms), prior_intercept=centred)


def nuisance_scm(
    roles: SFMRoles,
    encoded: SFMFrame,
    which: str,
    rows: np.ndarray,
    *,
    name: str,
    groups: str,
) -> tuple[SCM, NuisanceModel, pd.DataFrame]:
    """One nuisance model (``"outcome"`` or ``"attribute"``) on the rows of the mask, not
    yet fitted: its one-node SCM, the model without its fit, and its training frame."""
    from counterfair.model.families.bernoulli import Bernoulli

    covariates = roles.covariates if which == "outcome" else roles.confounders
    own = np.asarray([owner in covariates for owner in encoded.design_of], dtype=bool)
    labels = [v for v, keep in zip(encoded.design_names, own, strict=True) if keep]
    grouped = [c for c in covariates if c in roles.grouped]
    index = np.flatnonzero(rows)
    how = groups
    node = "y" if which == "outcome" else "x"
    family = roles.family if which == "outcome" else "bernoulli"
    encodings: dict[str, GroupEncoding] = {}
    training = [encoded.design[index][:, own]]
    if how == "encoded":
        # learned on the rows of both levels: a group common in x0 and rare in x1 keeps
        # its mean when the x1 model reads it on x0's rows (a mean of x1's rows alone
        # would be shrunk towards x1's overall mean there)
        every = np.arange(len(encoded))
        everybody = encoded.y_fit.astype(float) if which == "outcome" else encoded.x.astype(float)
        for column in grouped:
            levels = encoded.groups[column]
            encodings[column] = GroupEncoding.learn(levels, everybody, family)
            crossed = _cross_fitted(levels, everybody, family, every)
            training.append(crossed[index][:, None])
            labels.append(f"{column}: pooled mean")
        grouped = []
    design = np.hstack(training)
    qr = QRMap.of(design)
    kept = set(qr.kept.tolist())
    left_out = tuple(str(v) for i, v in enumerate(labels) if i not in kept)
    group_nodes = {c: f"g_{_safe(c)}" for c in grouped}
    q_names = _q_names(qr.kept.size, {node, *group_nodes.values()})
    terms = [GroupEffect(g) for g in group_nodes.values()]
    graph = nx.DiGraph()
    if which == "outcome":
        graph.add_node(node, spec=_outcome_spec(roles, encoded, terms))
    else:
        graph.add_node(node, spec=Bernoulli(terms=tuple(terms)))
    for q in q_names:
        graph.add_node(q, spec=Protected(kind="continuous"))
        graph.add_edge(q, node)
    shell = NuisanceModel(
        name=name, fit=None,  # type: ignore[arg-type]
        node=node, own=own, encodings=encodings, qr=qr, columns=tuple(q_names),
        groups=group_nodes, left_out=left_out,
    )
    frame = shell.frame(encoded, index, design)
    frame[node] = encoded.y_fit[index] if which == "outcome" else encoded.x[index].astype(int)
    return SCM(graph), shell, frame


def fit_nuisance(
    roles: SFMRoles,
    encoded: SFMFrame,
    which: str,
    rows: np.ndarray,
    *,
    name: str,
    groups: str,
    fit_options: Mapping[str, Any],
    fit_rows: int | None = None,
    subsample_seed: int = 0,
) -> NuisanceModel:
    """Fit one nuisance model (``"outcome"`` or ``"attribute"``) on the rows of the mask
    (at most ``fit_rows`` of them, drawn with ``subsample_seed``; the QR map and the
    group encodings are learned on all of them)."""
    scm, shell, frame = nuisance_scm(roles, encoded, which, rows, name=name, groups=groups)
    if fit_rows is not None and fit_rows < len(frame):
        chosen = np.random.default_rng(subsample_seed).choice(len(frame), fit_rows, replace=False)
        frame = frame.iloc[np.sort(chosen)].reset_index(drop=True)
    with warnings.catch_warnings():
        # the q columns are scaled on purpose (a largest |value| of 1, so the weights'
        # Normal(0, 1) prior bounds their effect); the scale check's advice to
        # standardise them would name columns the user does not have
        warnings.simplefilter("ignore", ScaleWarning)
        fit = scm.fit(frame, max_rows=None, **fit_options)
    return dataclasses.replace(shell, fit=fit)
