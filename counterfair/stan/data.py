"""Turn checked rows (:class:`~counterfair.rows.Rows`) into the data of the Stan programs."""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.model.encoding import Encoding
from counterfair.model.families.categorical import Categorical
from counterfair.model.params import ParamDraws
from counterfair.rows.validated import Rows
from counterfair.stan.codegen import abduction_equations
from counterfair.stan.families import stan_family
from counterfair.stan.holes import hole_data

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation
    from counterfair.model.scm import SCM


def _as_stan_column(scm: SCM, node: str, values: np.ndarray) -> np.ndarray:
    eq = scm.equations[node]
    return stan_family(eq).stan_values(eq, values)


def _base_data(scm: SCM, rows: Rows, values: Mapping[str, np.ndarray]) -> dict[str, object]:
    n = len(rows)
    out: dict[str, object] = {"N": n}
    codes, encoding = rows.codes, rows.encoding
    assert encoding is not None
    for node in scm.protected:
        if encoding.is_continuous(node):
            out[node] = codes[node].astype(float)
            continue
        out[f"n_levels_{node}"] = encoding.n_levels(node)
        out[node] = (codes[node] + 1).astype(np.int64)
    for node in scm.observed:
        eq = scm.equations[node]
        out.update(stan_family(eq).stan_data(eq))
        column = values.get(node)
        if column is None:  # not needed by any conditioned equation
            column = np.zeros(n)
        out[node] = _as_stan_column(scm, node, column)
    out.update(bending_data(scm, rows, values))
    return out


def term_levels(scm: SCM, encoding: Encoding) -> dict[str, int]:
    """Number of levels of every categorical node a term may read (protected or observed)."""
    counts = {node: encoding.n_levels(node) for node in encoding.levels}
    for node in scm.observed:
        eq = scm.equations[node]
        count = eq.family.n_levels(eq.spec)
        if count is not None:
            counts[node] = count
    return counts


def bending_data(
    scm: SCM, rows: Rows, values: Mapping[str, np.ndarray]
) -> dict[str, object]:
    """``P_<node>`` and ``F_<node>``: the bending columns of every node that has terms.

    The columns are those numpy evaluates (:meth:`~counterfair.model.terms.EquationTerm.columns`),
    at the knots the terms learned from the training rows. A node whose parents are
    not among ``values`` (not needed by a conditioned equation) gets zeros.
    """
    out: dict[str, object] = {}
    n = len(rows)
    assert rows.encoding is not None
    levels = term_levels(scm, rows.encoding)
    for node in scm.observed:
        eq = scm.equations[node]
        if not eq.bending:
            continue
        available = all(
            p.source == "codes" or p.name in values for t in eq.bending for p in t.parents
        ) and all(getattr(t.term, "column", None) in (None, *rows.codes) for t in eq.bending)
        if available:
            blocks = [t.columns(values, rows.codes, levels) for t in eq.bending]
            matrix = np.concatenate(blocks, axis=1)
        else:
            width = sum(t.n_columns(levels) for t in eq.bending)
            matrix = np.zeros((n, width))
        out[f"P_{node}"] = int(matrix.shape[1])
        out[f"F_{node}"] = matrix
        for term in eq.bending:
            groups = getattr(term.term, "levels", None)
            if groups is not None:
                out[f"n_groups_{term.term.column}"] = len(groups)  # type: ignore[union-attr]
    return out


def fit_data(
    scm: SCM,
    data: Rows | pd.DataFrame,
    encoding: Encoding | None = None,
    holes: Mapping[str, str] | None = None,
) -> dict[str, object]:
    """Data for the fit program: every protected and observed column of the rows.

    ``data``: rows checked at their door (:meth:`~counterfair.rows.Rows.check`), or a
    frame, which is checked there first (under ``encoding``, or one learned from it).
    ``holes``: ``missing="model"``'s plan; the rows' missing values are then described
    for the program (:func:`counterfair.stan.holes.hole_data`).
    """
    rows = Rows.check(data, scm, encoding, missing="model" if holes else "error")
    values = rows.values(holes=True)
    out = _base_data(scm, rows, values)
    for node in scm.observed:
        eq = scm.equations[node]
        hole = rows.holes.get(node)
        held = values[node] if hole is None else values[node][~hole]
        out[f"scale_{node}"] = eq.family.coefficient_scale(held)
    if holes:
        out.update(hole_data(scm, rows, holes))
    return out


def conditioning_nodes(scm: SCM, condition_on: Collection[str] | None) -> tuple[str, ...]:
    """The latents' children to condition on (default: all of them)."""
    candidates = tuple(eq.node for eq in abduction_equations(scm))
    if condition_on is None:
        return candidates
    for node in condition_on:
        if node not in scm.observed:
            raise errors.SCMError(
                f"cannot condition latents on {node!r}: it is not an observed node of the SCM"
            )
    return tuple(n for n in candidates if n in set(condition_on))


def abduction_data(
    scm: SCM,
    data: Rows | pd.DataFrame,
    encoding: Encoding | None,
    params: ParamDraws,
    condition_on: Collection[str],
) -> dict[str, object]:
    """Data for the abduction program: rows, parameter sets and conditioning flags.

    ``data``: checked rows, or a frame checked at the door under ``encoding``.
    """
    rows = Rows.check(data, scm, encoding)
    needed: set[str] = set()
    for node in condition_on:
        needed.add(node)
        needed.update(t.parent for t in scm.equations[node].observed)
    out = _base_data(scm, rows, rows.values(needed))
    out["S"] = params.n
    for eq in abduction_equations(scm):
        out[f"observe_{eq.node}"] = int(eq.node in condition_on)
        for name in eq.parameter_names():
            out[name] = params[name]
    return out


def _row_coord(data: pd.DataFrame) -> list[Any]:
    return list(data.index) if data.index.is_unique else list(range(len(data)))


def _levels(scm: SCM, encoding: Encoding, node: str) -> list[Any] | None:
    """Every level of a categorical protected or level-valued observed node, in code order
    (the reference level first); None for any other node, or levels not known yet.

    Level labels where the spec (or the encoding) has them, else the codes ``0 .. K-1``.
    """
    if node in encoding.levels:
        return list(encoding.levels[node])
    eq = scm.equations.get(node)
    count = None if eq is None else eq.family.n_levels(eq.spec)
    if eq is None or count is None or count < 2:
        return None
    labels = getattr(eq.spec, "labels", None)
    return list(labels) if labels is not None else list(range(count))


class _Axes:
    """The named axes (dims and their coords) of a fit's parameters, as they are made.

    An axis is named after what it runs over and has the same coords wherever it is
    used; :meth:`add` returns None (the parameter keeps arviz's default dims) if one
    name would get two sets of coords, or its levels are not known.
    """

    def __init__(self, coords: dict[str, list[Any]]) -> None:
        self.coords = coords

    def add(self, name: str, values: list[Any] | None) -> str | None:
        if values is None or not values:
            return None
        known = self.coords.setdefault(name, values)
        return name if known == values else None

    def effect(self, scm: SCM, encoding: Encoding, parent: str) -> str | None:
        """The effects of a categorical protected parent: its non-reference levels under
        reference coding, every level under one-hot coding."""
        levels = _levels(scm, encoding, parent)
        if levels is None:
            return None
        return self.add(f"{parent}_effect", levels[1:] if scm.coding == "reference" else levels)

    def level(self, scm: SCM, encoding: Encoding, node: str) -> str | None:
        """The non-reference levels of a node (its indicators as a parent, the predictors of
        a categorical node, the groups of a ``loading_by`` parent)."""
        levels = _levels(scm, encoding, node)
        return None if levels is None else self.add(f"{node}_level", levels[1:])


def _equation_dims(
    scm: SCM, encoding: Encoding, eq: NodeEquation, axes: _Axes
) -> dict[str, list[str | None]]:
    """The dims of an equation's coefficients (None where an axis is not known).

    One axis per dimension of each parameter as the fit program declares it
    (:mod:`counterfair.stan.codegen`, :mod:`counterfair.model.families.categorical`);
    the bending terms' weights keep arviz's dims.
    """
    own: list[str | None] = []  # a categorical node's coefficients: one per non-reference level
    if eq.family.declares_coefficients:
        if not isinstance(eq.spec, Categorical):  # a layout this function does not know
            return {}
        own = [axes.level(scm, encoding, eq.node)]
    dims: dict[str, list[str | None]] = {}
    if eq.intercept and own:
        dims[eq.intercept] = own
    for term in eq.protected:
        parent = [] if term.continuous else [axes.effect(scm, encoding, term.parent)]
        dims[term.param] = parent + own
    for oterm in eq.observed:
        parent = [] if oterm.levels is None else [axes.level(scm, encoding, oterm.parent)]
        dims[oterm.param] = parent + own
    by = eq.loading_by
    for lterm in eq.latent:
        dims[lterm.param] = list(own)
        if lterm.by_param is not None and by is not None:
            dims[lterm.by_param] = [axes.level(scm, encoding, by.name), *own]
    for role, name in eq.extra:
        if role == "cutpoints":  # between each level and the next
            levels = _levels(scm, encoding, eq.node)
            if levels is not None:
                bounds = [f"{low}|{high}" for low, high in itertools.pairwise(levels)]
                dims[name] = [axes.add(f"{eq.node}_cutpoint", bounds)]
    return {name: d for name, d in dims.items() if d}


def coords_and_dims(
    scm: SCM, encoding: Encoding, data: pd.DataFrame, latent_dims: list[str]
) -> tuple[dict[str, list[Any]], dict[str, list[str]]]:
    """Coords and dims of a fit's variables for arviz: latents by row, parameters by level.

    A categorical protected parent's effects run over ``<parent>_effect``; a level-valued
    observed parent's over ``<parent>_level`` (its non-reference levels), as do the extra
    loadings of the levels of a ``loading_by`` parent; a categorical node's coefficients
    have a last axis ``<node>_level`` (one per non-reference level: ``beta_K_A`` is
    ``(A_effect, K_level)``); an ordinal node's cutpoints run over ``<node>_cutpoint``
    (``"low|mid"``, ``"mid|high"``). A parameter with an axis that is not known keeps
    arviz's default dims.
    """
    coords: dict[str, list[Any]] = {"row": _row_coord(data)}
    dims: dict[str, list[str]] = {latent: latent_dims for latent in scm.latents}
    dims.update({f"z_{latent}": latent_dims for latent in scm.latents})
    axes = _Axes(coords)
    for eq in scm.equations.values():
        for name, named in _equation_dims(scm, encoding, eq, axes).items():
            if all(dim is not None for dim in named):
                dims[name] = [dim for dim in named if dim is not None]
    return coords, dims
