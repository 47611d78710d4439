"""The nuisance models of the SFM decomposition, declared with counterfair's own nodes.

The x-specific and general effects of the Standard Fairness Model are identified from
two regressions and no mechanism of any mediator (:mod:`counterfair.audit.sfm`):

* the **outcome model** ``mu_x(z, w) = E[y | X = x, z, w]``, fitted separately on the
  rows of each level ``x`` (so ``X`` interacts with every other term: no effect
  modification by ``X`` is assumed away);
* the **attribute model** ``pi(z) = P(X = x1 | z)``, fitted on the rows of both levels.

Each is an SCM of one observed node whose parents are the covariates declared as given
roots (counterfair's :class:`~counterfair.Protected` nodes: columns taken as they are,
with no mechanism and no likelihood), fitted by NUTS in Stan like any SCM, so the
families, smooth terms, group effects, priors, warm starts and diagnostics are the
package's own:

* a numeric covariate with at least :data:`~counterfair.audit.sfm_roles.SMOOTH_VALUES`
  distinct values enters by a cubic regression spline: :data:`SPLINE_DF` B-spline
  columns (knots at quantiles of all the rows, so both levels' rows share them; one
  column dropped, as the intercept spans their sum), each standardised and a given
  root with a Normal(0, 1) weight. A penalised spline (:class:`~counterfair.Smooth`) was tried
  first: with thousands of rows per level its variance parameter's funnel gave
  divergences and R-hat up to 1.1 on a straight-line truth, while a handful of fixed
  columns are a well-conditioned GLM that the data pin down. A numeric covariate with
  fewer values enters standardised, by a straight line;
* a categorical covariate with few levels enters by one weight per level;
* one with many levels (occupation, industry) by partially pooled intercepts
  (:class:`~counterfair.GroupEffect`); a group never seen in one level's rows gets the
  population's draw;
* a Normal outcome is standardised for the fit and put back on its own scale for the
  effects; a count's intercept prior is centred at the log of its mean.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np
import pandas as pd

from counterfair.model.evaluate import linear_predictor, mean_from_eta
from counterfair.model.nodes import Prior, Protected
from counterfair.model.scm import SCM
from counterfair.model.terms.declare import GroupEffect
from counterfair.rows.rows import Rows

from .sfm_roles import SMOOTH_VALUES, SFMRoles

if TYPE_CHECKING:
    from counterfair.inference.fit import Fit
    from counterfair.model.params import ParamDraws

__all__ = ["SPLINE_DF", "NuisanceModel", "SFMFrame", "fit_nuisance", "sfm_frame"]

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


def _node_names(columns: tuple[str, ...]) -> dict[str, str]:
    """Stan-safe node names for the columns (letters, digits, underscores; unique)."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for column in columns:
        name = re.sub(r"\W", "_", column).strip("_") or "column"
        if name[0].isdigit():
            name = f"c_{name}"
        base, k = name, 2
        while name in taken or name.endswith("__"):
            name = f"{base}_{k}"
            k += 1
        taken.add(name)
        out[column] = name
    return out


@dataclass(frozen=True)
class SFMFrame:
    """The rows of ``x0`` and ``x1`` as the nuisance models read them.

    Attributes
    ----------
    frame : pandas.DataFrame
        One column per covariate under its node name (numbers standardised, categories
        as strings), the outcome (standardised if Normal, the positive class's
        indicator if binary) and ``X`` as a string.
    names : dict of str to str
        Node name of each column.
    x : numpy.ndarray
        ``True`` where ``X = x1``.
    y : numpy.ndarray
        The outcome on its own scale (the positive class's indicator if binary).
    y_location, y_scale : float
        The Normal outcome's standardisation (0 and 1 otherwise).
    positive : str or None
        The positive class of a binary outcome.
    columns : dict of str to tuple of str
        The node names each numeric covariate enters by (its spline's columns, or its
        standardised value).
    """

    frame: pd.DataFrame
    names: dict[str, str]
    x: np.ndarray
    y: np.ndarray
    y_location: float
    y_scale: float
    positive: str | None
    columns: dict[str, tuple[str, ...]]


def _positive(y: pd.Series) -> tuple[str, str]:
    values = sorted(pd.unique(y.astype(str)))
    for negative, positive in (("0", "1"), ("False", "True"), ("0.0", "1.0"), ("no", "yes")):
        if values == [negative, positive]:
            return negative, positive
    return values[0], values[1]


def sfm_frame(data: pd.DataFrame, roles: SFMRoles) -> SFMFrame:
    """The rows of ``x0`` and ``x1`` (in their order), encoded for the nuisance models."""
    x_text = data[roles.attribute].astype(str)
    kept = data.loc[x_text.isin((roles.x0, roles.x1)).to_numpy()]
    names = _node_names((roles.attribute, roles.outcome, *roles.covariates))
    columns: dict[str, Any] = {}
    expanded: dict[str, tuple[str, ...]] = {}
    taken = set(names.values())
    for column in roles.numeric:
        values = kept[column].to_numpy(dtype=float)
        if len(np.unique(values)) >= SMOOTH_VALUES:
            basis = spline_columns(values)
            nodes = []
            for j in range(basis.shape[1]):
                node = f"{names[column]}_s{j + 1}"
                while node in taken:
                    node += "_"
                taken.add(node)
                b = basis[:, j]  # standardised: unit-scale weights, no tie to the intercept
                columns[node] = (b - b.mean()) / (float(b.std()) or 1.0)
                nodes.append(node)
            expanded[column] = tuple(nodes)
        else:
            sd = float(values.std())
            columns[names[column]] = (values - float(values.mean())) / (sd if sd > 0 else 1.0)
            expanded[column] = (names[column],)
    for column in (*roles.categorical, *roles.grouped):
        columns[names[column]] = kept[column].astype(str).to_numpy()
    x = kept[roles.attribute].astype(str).to_numpy()
    columns[names[roles.attribute]] = x
    positive = None
    location, scale = 0.0, 1.0
    if roles.family == "bernoulli":
        _, positive = _positive(kept[roles.outcome])
        y = (kept[roles.outcome].astype(str).to_numpy() == positive).astype(float)
        columns[names[roles.outcome]] = y.astype(int)
    else:
        y = kept[roles.outcome].to_numpy(dtype=float)
        if roles.family == "normal":
            location, scale = float(y.mean()), float(y.std()) or 1.0
            columns[names[roles.outcome]] = (y - location) / scale
        else:
            columns[names[roles.outcome]] = np.round(y).astype(np.int64)
    frame = pd.DataFrame(columns, index=pd.RangeIndex(len(kept)))
    return SFMFrame(
        frame=frame, names=names, x=x == roles.x1, y=y, y_location=location,
        y_scale=scale, positive=positive, columns=expanded,
    )


def _terms(roles: SFMRoles, encoded: SFMFrame, covariates: tuple[str, ...]) -> list[Any]:
    return [GroupEffect(encoded.names[c]) for c in covariates if c in roles.grouped]


def _root_nodes(
    graph: nx.DiGraph, roles: SFMRoles, encoded: SFMFrame, covariates: tuple[str, ...],
    child: str,
) -> None:
    for column in covariates:
        if column in roles.numeric:
            for node in encoded.columns[column]:
                graph.add_node(node, spec=Protected(kind="continuous"))
                graph.add_edge(node, child)
        elif column in roles.categorical:
            node = encoded.names[column]
            graph.add_node(node, spec=Protected(levels=roles.levels[column]))
            graph.add_edge(node, child)
        # a grouping column is no node: its group effect reads the column


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


@dataclass(frozen=True)
class NuisanceModel:
    """One fitted nuisance model and how to read its mean on rows.

    Attributes
    ----------
    name : str
        ``"outcome | x0"``, ``"outcome | x1"`` or ``"attribute"``.
    fit : Fit
        The fitted one-node SCM.
    node : str
        The node whose mean is read.
    """

    name: str
    fit: Fit
    node: str

    def means(self, frame: pd.DataFrame, params: ParamDraws) -> np.ndarray:
        """The node's mean given its parents on ``frame``, one row per draw: ``(S, N)``."""
        scm = self.fit.scm
        rows = Rows.check(frame, scm, self.fit.encoding)
        eq = scm.equations[self.node]
        eta = linear_predictor(
            eq, params, rows.values(), rows.codes,
            reference_coding=scm.coding == "reference", n_rows=len(frame),
        )
        return np.asarray(mean_from_eta(eq, params, eta), dtype=float)


def nuisance_scm(
    roles: SFMRoles, encoded: SFMFrame, which: str
) -> tuple[SCM, str]:
    """The one-node SCM of a nuisance model (``"outcome"`` or ``"attribute"``) and its node."""
    graph = nx.DiGraph()
    if which == "outcome":
        node = encoded.names[roles.outcome]
        covariates = roles.covariates
        terms = _terms(roles, encoded, covariates)
        graph.add_node(node, spec=_outcome_spec(roles, encoded, terms))
    else:
        from counterfair.model.families.bernoulli import Bernoulli

        node = encoded.names[roles.attribute]
        covariates = roles.confounders
        terms = _terms(roles, encoded, covariates)
        graph.add_node(
            node,
            spec=Bernoulli(levels=(roles.x0, roles.x1), positive=roles.x1, terms=tuple(terms)),
        )
    _root_nodes(graph, roles, encoded, covariates, node)
    return SCM(graph), node


def fit_nuisance(
    roles: SFMRoles,
    encoded: SFMFrame,
    which: str,
    rows: np.ndarray,
    *,
    name: str,
    fit_options: Mapping[str, Any],
) -> NuisanceModel:
    """Fit one nuisance model on the rows selected by the boolean mask ``rows``."""
    scm, node = nuisance_scm(roles, encoded, which)
    frame = encoded.frame.loc[rows].reset_index(drop=True)
    columns = [*scm.protected, *scm.observed]
    columns += [encoded.names[c] for c in roles.grouped if encoded.names[c] not in columns
                and (which == "outcome" or c in roles.confounders)]
    fit = scm.fit(frame[columns], max_rows=None, **fit_options)
    return NuisanceModel(name=name, fit=fit, node=node)
