"""Bases of smooth terms: P-spline columns, HSGP eigenfunctions and spectral densities.

The range a basis spans is learned from the training rows (:func:`learn_range`) and kept
in the term, so new and counterfactual rows get the same knots; a value outside it is
clipped for the bending part only (:func:`outside_range` counts those rows).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from counterfair import errors
from counterfair.model.terms.declare import (
    HSGP_BOUNDARY,
    PENALTY_ORDER,
    SPLINE_DEGREE,
    Smooth,
)

OUTSIDE_RANGE = (
    "node {node!r}, term {label}: {count} row(s) have a parent value outside the training "
    "range [{lower:g}, {upper:g}]; the smooth part is held at its boundary value there and "
    "only the straight line extrapolates"
)


def _difference_transform(k: int) -> np.ndarray:
    """``T`` (``k x (k - 2)``): B-spline coefficients ``T z`` of the penalised part.

    The second-order difference penalty ``D'D`` has the straight lines as its null
    space; its other eigenvectors ``U``, scaled by ``1 / sqrt(eigenvalue)``, turn the
    penalty into ``z'z`` (the mixed-model form of a P-spline). Signs are fixed (the
    largest entry of each column positive) so that the transform is the same on every
    machine.
    """
    d = np.diff(np.eye(k), PENALTY_ORDER, axis=0)
    eigenvalues, vectors = np.linalg.eigh(d.T @ d)
    keep = vectors[:, PENALTY_ORDER:] / np.sqrt(eigenvalues[PENALTY_ORDER:])
    signs = np.sign(keep[np.argmax(np.abs(keep), axis=0), np.arange(keep.shape[1])])
    return np.asarray(keep * signs, dtype=float)


def _spline_basis(x: np.ndarray, term: Smooth) -> np.ndarray:
    """The penalised P-spline columns of ``x`` (any shape), shape ``x.shape + (k - 2,)``.

    The B-spline basis is formulaic's stateful ``basis_spline`` at equally spaced knots
    over the learned range, with values outside it clipped to the boundary.
    """
    from formulaic.transforms import basis_spline

    lower, upper = term.span()
    interior = np.linspace(lower, upper, term.k - SPLINE_DEGREE + 1)[1:-1]
    flat = np.clip(np.ravel(np.asarray(x, dtype=float)), lower, upper)
    columns = basis_spline(
        flat,
        knots=interior,
        degree=SPLINE_DEGREE,
        include_intercept=True,
        lower_bound=lower,
        upper_bound=upper,
        extrapolation="clip",
        _state={},
    )
    basis = np.column_stack([np.asarray(columns[key], dtype=float) for key in columns])
    out = basis @ _difference_transform(term.k)
    return out.reshape(*np.shape(x), term.k - PENALTY_ORDER)


def hsgp_frequencies(k: int) -> np.ndarray:
    """Square roots of the Laplacian eigenvalues of an HSGP basis: ``pi j / (2 c)``."""
    return np.pi * np.arange(1, k + 1) / (2.0 * HSGP_BOUNDARY)


def _hsgp_basis(x: np.ndarray, term: Smooth) -> np.ndarray:
    """The HSGP eigenfunctions at ``x`` (standardised to ``[-1, 1]``, clipped), ``(..., k)``."""
    lower, upper = term.span()
    centre = 0.5 * (lower + upper)
    half = 0.5 * (upper - lower)
    z = np.clip((np.asarray(x, dtype=float) - centre) / half, -1.0, 1.0)
    omega = hsgp_frequencies(term.k)
    return np.sin((z[..., None] + HSGP_BOUNDARY) * omega) / np.sqrt(HSGP_BOUNDARY)


def smooth_basis(x: Any, term: Smooth) -> np.ndarray:
    """The bending columns of a smooth term at ``x``: shape ``x.shape + (width,)``.

    ``x`` is the parent's values, or for an HSGP surface a pair of arrays (one per
    parent, the same shape): the surface's columns are the products of each parent's
    eigenfunctions, column ``j * k + i`` for function ``i`` of the first parent and
    ``j`` of the second.
    """
    if not term.learned:
        raise errors.SCMError(
            f"term {term.label}: its range is not known yet; fit the SCM first (the range "
            "is learned from the training rows) or give lower= and upper="
        )
    if term.dims == 1:
        return _spline_basis(x, term) if term.basis == "ps" else _hsgp_basis(x, term)
    first, second = (_hsgp_basis(v, m) for v, m in zip(x, term.margins(), strict=True))
    product = second[..., :, None] * first[..., None, :]
    return np.asarray(product.reshape(*product.shape[:-2], term.k * term.k))


def smooth_width(term: Smooth) -> int:
    """Number of bending columns of one curve."""
    if term.basis == "ps":
        return term.k - PENALTY_ORDER
    return int(term.k**term.dims)


def hsgp_norms(term: Smooth) -> np.ndarray:
    """The length of each basis function's frequency vector, in column order (numpy)."""
    omega = hsgp_frequencies(term.k)
    if term.dims == 1:
        return omega
    return np.asarray(np.sqrt(omega[None, :] ** 2 + omega[:, None] ** 2).reshape(-1))


MATERN32_CONSTANT = {1: 4.0, 2: 6.0 * np.pi}
"""``2^D pi^(D/2) Gamma(3/2 + D/2) / Gamma(3/2)`` of the Matern 3/2 spectral density in
``D`` dimensions (Rasmussen and Williams 2006, eq. 4.15)."""


def spd(term: Smooth, sd: np.ndarray, lengthscale: np.ndarray) -> np.ndarray:
    """Square root of the spectral density at the basis frequencies, ``(S, width)`` (numpy).

    Exp-quad: ``S(w) = sd^2 (2 pi)^(D/2) l^D exp(-l^2 w^2 / 2)``; Matern 3/2:
    ``S(w) = sd^2 c_D (sqrt(3) / l)^3 (3 / l^2 + w^2)^(-(3 + D) / 2)``, for a surface
    (``D = 2``) isotropic in the parents' standardised units.
    """
    omega = hsgp_norms(term)
    d = term.dims
    sd, ls = np.asarray(sd)[:, None], np.asarray(lengthscale)[:, None]
    if term.kernel == "exp_quad":
        density = (2 * np.pi) ** (d / 2) * ls**d * np.exp(-0.5 * ls**2 * omega**2)
    else:
        rate = np.sqrt(3.0) / ls
        density = MATERN32_CONSTANT[d] * rate**3 * (rate**2 + omega**2) ** (-(3 + d) / 2)
    return np.asarray(sd * np.sqrt(density))


def learn_range(node: str, term: Smooth, x: Any) -> Smooth:
    """The term with its range learned from the training values ``x`` of its parent.

    ``x`` is the parent's values, or for an HSGP surface a pair of arrays.

    Raises
    ------
    SCMError
        Naming the node and the term, when a parent has fewer distinct values than
        the basis has functions (``k``), or a single value.
    """
    if term.dims > 1:
        margins = [
            learn_range(node, replace(m, by=None), v)
            for m, v in zip(term.margins(), x, strict=True)
        ]
        return replace(
            term,
            lower=tuple(float(m.lower) for m in margins),  # type: ignore[arg-type]
            upper=tuple(float(m.upper) for m in margins),  # type: ignore[arg-type]
        )
    distinct = np.unique(np.asarray(x, dtype=float))
    if distinct.shape[0] < term.k:
        raise errors.SCMError(
            f"node {node!r}, term {term.label}: {term.parent!r} has {distinct.shape[0]} distinct "
            f"value(s) in the training rows, fewer than the basis size k={term.k}; lower k"
        )
    lower = term.lower if term.lower is not None else float(distinct[0])
    upper = term.upper if term.upper is not None else float(distinct[-1])
    return replace(term, lower=lower, upper=upper)


def outside_range(term: Smooth, x: np.ndarray) -> int:
    """Number of rows whose parent value lies outside the term's training range."""
    if not term.learned:
        return 0
    lower, upper = term.span()
    values = np.asarray(x, dtype=float)
    outside = np.asarray((values < lower) | (values > upper))
    if outside.ndim > 1:
        outside = np.asarray(outside.any(axis=tuple(range(outside.ndim - 1))))
    return int(outside.sum())
