"""The structural equations in numpy, vectorised over parameter sets and rows.

Arrays of node values have shape ``(S, N)``: ``S`` parameter sets (posterior
draws) by ``N`` rows; inputs of shape ``(N,)`` broadcast over the sets.
Protected attributes are given as 0-based level codes (0 = reference level; a
continuous one as its values), and
so are level-valued observed nodes (ordinal; 0 = lowest level). Everything that
depends on a node's distribution family is in :mod:`counterfair.model.families`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from counterfair.model.equation import LatentTerm, NodeEquation
from counterfair.model.families.base import protected_effect
from counterfair.model.families.normal import sigma_of
from counterfair.model.params import ParamDraws
from counterfair.rng import RandomSource

__all__ = [
    "draw_node",
    "latent_loading",
    "linear_predictor",
    "mean_from_eta",
    "protected_effect",
    "sigma_of",
]


def linear_predictor(
    eq: NodeEquation,
    params: ParamDraws,
    values: Mapping[str, np.ndarray],
    codes: Mapping[str, np.ndarray],
    *,
    reference_coding: bool = True,
    n_rows: int | None = None,
) -> np.ndarray:
    """The linear predictor ``eta`` of one node, shape ``(S, N)``.

    A family that lays out its own coefficients computes it itself (a
    categorical node: shape ``(S, N, K-1)``, one per non-reference level).

    Parameters
    ----------
    eq : NodeEquation
        The node's equation.
    params : ParamDraws
        ``S`` parameter sets.
    values : mapping
        Values of the node's observed and latent parents, ``(N,)`` or ``(S, N)``.
    codes : mapping
        Level codes of its protected parents, ``(N,)`` or ``(S, N)``.
    reference_coding : bool
        Whether protected effects are relative to a reference level.
    n_rows : int, optional
        Number of rows, needed only for a node without parents.
    """
    n = n_rows if n_rows is not None else _n_rows(eq, values, codes)
    if eq.family.declares_coefficients:  # e.g. categorical: one predictor per level
        return eq.family.linear_predictor(eq, params, values, codes, reference_coding, n)
    eta = np.zeros((params.n, n))
    if eq.intercept:
        eta += params[eq.intercept][:, None]
    for pterm in eq.protected:
        if pterm.continuous:  # a continuous protected parent: its value times one weight
            eta += params[pterm.param][:, None] * codes[pterm.parent]
        else:
            eta += protected_effect(params[pterm.param], codes[pterm.parent], reference_coding)
    for oterm in eq.observed:
        if oterm.levels is not None:  # reference-coded indicators of the parent's levels
            eta += protected_effect(params[oterm.param], values[oterm.parent], True)
        else:
            eta += params[oterm.param][:, None] * values[oterm.parent]
    for lterm in eq.latent:
        eta += latent_loading(eq, lterm, params, values, codes) * values[lterm.parent]
    for term in eq.bending:
        eta += term.contribution(params, values, codes)
    return eta


def latent_loading(
    eq: NodeEquation,
    lterm: LatentTerm,
    params: ParamDraws,
    values: Mapping[str, np.ndarray],
    codes: Mapping[str, np.ndarray],
) -> np.ndarray:
    """The loading of a latent parent: ``(S, 1)``, or ``(S, N)`` when it differs by group.

    With the spec's ``loading_by``, each row's loading is the reference level's
    ``lambda`` plus its own level's ``dlambda`` (0 for the reference level).
    """
    loading = params[lterm.param][:, None]
    if lterm.by_param is None or eq.loading_by is None:
        return loading
    level = eq.loading_by.read(values, codes)
    return loading + protected_effect(params[lterm.by_param], level, True)


def _n_rows(
    eq: NodeEquation, values: Mapping[str, np.ndarray], codes: Mapping[str, np.ndarray]
) -> int:
    for term in eq.protected:
        return int(codes[term.parent].shape[-1])
    for oterm in eq.observed:
        return int(values[oterm.parent].shape[-1])
    for lterm in eq.latent:
        return int(values[lterm.parent].shape[-1])
    raise ValueError(f"node {eq.node!r} has no parents: pass its number of rows explicitly")


def mean_from_eta(eq: NodeEquation, params: ParamDraws, eta: np.ndarray) -> np.ndarray:
    """Mean of the node given its linear predictor (its family's inverse link)."""
    return eq.family.mean(eq, params, eta)


def draw_node(
    eq: NodeEquation, params: ParamDraws, eta: np.ndarray, rng: RandomSource
) -> np.ndarray:
    """Draw the node from its conditional distribution given ``eta`` (fresh noise)."""
    return eq.family.draw(eq, params, eta, rng)
