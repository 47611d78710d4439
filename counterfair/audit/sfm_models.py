"""The nuisance models of the SFM decomposition, declared with counterfair's own nodes.

The x-specific and general effects of the Standard Fairness Model are identified from
two regressions and no mechanism of any mediator (:mod:`counterfair.audit.sfm`):

* the **outcome model** ``mu_x(z, w) = E[y | X = x, z, w]``, one model fitted on the
  rows of both levels, in which ``X`` interacts with every other term (so no effect
  modification by ``X`` is assumed away): with ``q`` the fixed columns of ``Z`` and
  ``W`` (below) and ``d = X - p`` (``X`` as 0/1, ``p`` the share of ``x1`` among the
  rows), its linear predictor is ``alpha + q beta + d gamma + (d q) delta``, where the
  interactions' weights ``delta`` have prior sd :data:`INTERACTION_SD` (half of the
  main weights' 1): where the data say that ``x1`` and ``x0`` differ, they do; where
  one level's rows are thin, its curve borrows the other's shape;
* the **attribute model** ``pi(z) = P(X = x1 | z)``, fitted on the rows of both levels.

Why one model and not one per level of ``X`` (as the first version had): ``mu_1`` is
read at the rows of ``x0``, whose mediators ``x1`` may seldom take. A model of the rows
of ``x1`` alone extrapolates there with nothing but its prior: on a simulated binary
SFM whose mediator lies two sds apart between the levels (``tests/_sfm.py``, scenario
``e``), a penalised per-level spline's plug-in Ctf-DE averaged 0.230 over 25 data sets
against a truth of 0.165 (root mean square error 0.082), and one data set's posterior
mean was 5 sds from it; with the interactions above, 0.188 (0.049). Their sd was chosen
on those data sets and on scenario ``c``'s ``X x W`` effect (0.25 shrank ``c``'s
interaction, 1 let ``e``'s extrapolation back in).

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
  intercepts in Stan (:class:`~counterfair.GroupEffect`), shared by both levels of
  ``X``; ``groups="encoded"``: by its groups' empirical-Bayes means of the model's
  target over the rows of both levels (:class:`GroupEncoding`: each group's mean shrunk
  to the overall one by its share of the between-group variance, on the link scale),
  cross-fitted over :data:`FOLDS` folds so that no row's outcome enters its own
  covariate, and one weight (and its interaction with ``X``) in Stan. The package's
  group effect enters a Stan program as one indicator column per level, so each
  gradient of the Census's outcome model (10,000 rows of one sex, 777 occupations and
  industries) reads 7.8 million cells and NUTS had not finished a 200-iteration pilot
  in 4 minutes. ``"encoded"`` is the default; it carries the groups' means, not their
  posterior uncertainty.

The fixed columns enter through their **QR decomposition** on the model's rows (as
rstanarm's ``QR = TRUE``): with ``D = Q R`` (centred columns, each of ``Q``'s scaled to
unit variance, and down to a largest absolute value of 4 where a rare level's direction
goes beyond, so that a weight's Normal(0, 1) prior bounds what it does at any row), the
model's weights are those of ``Q``'s columns, which the likelihood barely correlates, so
NUTS takes short trajectories with a diagonal metric; ``d`` is centred for the same
reason. A penalised spline (:class:`~counterfair.Smooth`) and raw correlated columns
were tried first: the spline's variance parameter gave divergences and R-hat up to 1.1
on a straight-line truth, and the raw columns of the Census (B-spline columns of one
covariate, the indicators of one category) made NUTS run past 5 minutes on 10,000 rows
of one level. Any row is mapped by the same ``R``: ``(D - mean) R^-1``. A column
constant on the model's rows is left out.

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
from counterfair.rows.validated import Rows

from .sfm_columns import (
    FOLDS,
    SPLINE_DF,
    GroupEncoding,
    QRMap,
    SFMFrame,
    cross_fitted,
    sfm_frame,
    spline_columns,
)
from .sfm_roles import SFMRoles

if TYPE_CHECKING:
    from counterfair.inference.fit import Fit
    from counterfair.model.params import ParamDraws

__all__ = [
    "FOLDS",
    "GROUPINGS",
    "INTERACTION_SD",
    "LEVEL_COLUMN",
    "SPLINE_DF",
    "GroupEncoding",
    "NuisanceModel",
    "QRMap",
    "SFMFrame",
    "fit_nuisance",
    "nuisance_scm",
    "sfm_frame",
    "spline_columns",
]
"""(The columns' names are :mod:`counterfair.audit.sfm_columns`'s, kept here too.)"""

def _safe(name: str) -> str:
    safe = re.sub(r"\W", "_", name).strip("_") or "column"
    return f"c_{safe}" if safe[0].isdigit() else safe


def _q_names(count: int, taken: set[str]) -> list[str]:
    out = []
    for j in range(count):
        name = f"q{j + 1}"
        while name in taken:
            name = f"{name}_"
        out.append(name)
    return out


GROUPINGS = ("encoded", "pooled")
"""How a grouping covariate enters (``groups=`` of :class:`~counterfair.audit.SFMSettings`;
the first is the default)."""

INTERACTION_SD = 0.5
"""Prior sd of the weight of each interaction of ``X`` with a fixed column of the outcome
model (on the scale of the main weights, whose prior sd is 1; the module says why)."""

LEVEL_COLUMN = "d"
"""The outcome model's column of ``X`` (``X - p``, scaled to unit variance)."""

@dataclass(frozen=True)
class NuisanceModel:
    """One fitted nuisance model and how to read its mean on any of the rows.

    Attributes
    ----------
    name : str
        ``"outcome"`` or ``"attribute"``.
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
    share : float or None
        The outcome model's ``p``, the share of ``x1`` among its rows (its column
        :data:`LEVEL_COLUMN` is ``X - p`` over ``sqrt(p (1 - p))`` and its interactions
        ``INTERACTION_SD (X - p) q``); ``None`` for the attribute model, which has no
        column of ``X``.
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
    share: float | None = None

    def design(self, encoded: SFMFrame, rows: slice | np.ndarray) -> np.ndarray:
        """The model's fixed columns on ``rows`` (the encodings learned on all its rows)."""
        blocks = [encoded.design[rows][:, self.own]]
        blocks += [enc(encoded.groups[c][rows])[:, None] for c, enc in self.encodings.items()]
        return np.hstack(blocks)

    def frame(
        self,
        encoded: SFMFrame,
        rows: slice | np.ndarray,
        design: np.ndarray | None = None,
        *,
        level: int | None = None,
    ) -> pd.DataFrame:
        """The model's columns for ``rows`` of ``encoded`` (its fitted node left out), with
        ``X`` as the rows have it or, for the outcome model, set to ``level`` (0 for x0,
        1 for x1)."""
        q = self.qr(self.design(encoded, rows) if design is None else design)
        main = self.columns if self.share is None else self.columns[: q.shape[1]]
        out: dict[str, Any] = dict(zip(main, q.T, strict=True))
        if self.share is not None:
            p = self.share
            x = encoded.x[rows].astype(float) if level is None else np.full(len(q), float(level))
            out[LEVEL_COLUMN] = (x - p) / math.sqrt(p * (1.0 - p))
            crossed = INTERACTION_SD * (x - p)[:, None] * q
            out.update(zip(self.columns[q.shape[1] + 1:], crossed.T, strict=True))
        for column, node in self.groups.items():
            out[node] = encoded.groups[column][rows]
        return pd.DataFrame(out)

    def means(
        self, encoded: SFMFrame, rows: slice, params: ParamDraws, *, level: int | None = None
    ) -> np.ndarray:
        """The node's mean given its parents on ``rows`` (``X`` set to ``level`` for the
        outcome model), one row per draw: ``(S, N)``."""
        frame = self.frame(encoded, rows, level=level)
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
        # its mean when mu_1 is read at x0's rows (a mean of x1's rows alone would be
        # shrunk towards x1's overall mean there)
        every = np.arange(len(encoded))
        everybody = encoded.y_fit.astype(float) if which == "outcome" else encoded.x.astype(float)
        for column in grouped:
            levels = encoded.groups[column]
            encodings[column] = GroupEncoding.learn(levels, everybody, family)
            crossed = cross_fitted(levels, everybody, family, every)
            training.append(crossed[index][:, None])
            labels.append(f"{column}: pooled mean")
        grouped = []
    design = np.hstack(training)
    qr = QRMap.of(design)
    kept = set(qr.kept.tolist())
    left_out = tuple(str(v) for i, v in enumerate(labels) if i not in kept)
    group_nodes = {c: f"g_{_safe(c)}" for c in grouped}
    taken = {node, LEVEL_COLUMN, *group_nodes.values()}
    q_names = _q_names(qr.kept.size, taken)
    share = None
    columns = list(q_names)
    if which == "outcome":
        share = float(encoded.x[index].mean())
        if not 0.0 < share < 1.0:
            raise ValueError("the outcome model needs rows of both levels of X")
        interactions = [f"{LEVEL_COLUMN}{q}" for q in q_names]
        if set(interactions) & (taken | set(q_names)):
            interactions = [f"{c}_" for c in interactions]
        columns += [LEVEL_COLUMN, *interactions]
    terms = [GroupEffect(g) for g in group_nodes.values()]
    graph = nx.DiGraph()
    if which == "outcome":
        graph.add_node(node, spec=_outcome_spec(roles, encoded, terms))
    else:
        graph.add_node(node, spec=Bernoulli(terms=tuple(terms)))
    for q in columns:
        graph.add_node(q, spec=Protected(kind="continuous"))
        graph.add_edge(q, node)
    shell = NuisanceModel(
        name=name, fit=None,  # type: ignore[arg-type]
        node=node, own=own, encodings=encodings, qr=qr, columns=tuple(columns),
        groups=group_nodes, left_out=left_out, share=share,
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
