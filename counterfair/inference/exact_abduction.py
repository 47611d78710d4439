"""Exact abduction of one-dimensional latents given parameter sets.

Given a parameter set ``s`` and a row ``n``, the posterior of a latent ``L`` is its
Normal prior times the likelihood of each conditioned child of ``L`` (a categorical
child's: the log softmax of its levels' predictors at the observed level). When every
latent is a root with a Normal prior and no conditioned child has more than one latent
parent, each posterior is a one-dimensional density
(:class:`~counterfair.inference.latent_problem.LatentProblem`: the prior and the Normal
children in closed form, ``Normal(m, 1 / sqrt(P))``, times the other children's
likelihoods, each concave in its linear predictor), and needs no MCMC:

* **draws** (:func:`sample_latents`) are exact: rejection sampling under the tangent
  hull of the log-concave density, by the C++ an integrated fit's program uses for its
  training rows (``counterfair/stan/quadrature.hpp``, through
  :func:`counterfair.inference.latent_rows.latent_draws`). Each draw has its own random
  stream, keyed by the row's global position, so the draws do not depend on the chunking;
* **moments** (:func:`posterior_moments`) and the **Laplace approximation**
  (:func:`laplace_approximation`) are computed in numpy on a grid:

  1. The log density is at least ``P``-strongly concave; its mode is found by a
     safeguarded Newton iteration inside a bracket that strong concavity guarantees,
     and the curvature at the mode gives a Laplace scale.
  2. The grid spans :data:`GRID_HALF_WIDTH` Laplace scales either side of the mode,
     widened on a side until the log density there is at least :data:`TAIL_DROP` nats
     below the mode (by concavity the mass beyond is then below ``exp(-TAIL_DROP)``
     times a modest factor). It has :data:`GRID_POINTS` points by default;
     ``tests/test_exact_abduction.py`` checks that more points move posterior means by
     far less than Monte Carlo error.
  3. The density is normalised in log space and taken as piecewise linear between grid
     points; its moments are computed exactly for that piecewise linear density.

Grid work is chunked over rows so that ``S x rows x grid points`` stays below
:data:`MAX_GRID_CELLS` values.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import logsumexp

from counterfair.inference.latent_problem import LatentChild, LatentProblem, latent_problems
from counterfair.inference.latent_rows import latent_draws
from counterfair.model.params import ParamDraws
from counterfair.rng import RowRandom

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

GRID_POINTS = 512
"""Default number of grid points per row and parameter set for posterior moments."""

GRID_HALF_WIDTH = 8.0
"""Initial half-width of the grid, in Laplace scales (a Normal drops 32 nats there)."""

TAIL_DROP = 30.0
"""Nats the log density must drop from the mode to either end of the grid."""

MAX_GRID_CELLS = 500_000
"""Largest ``S x rows x grid points`` array built at once (4 MB of float64: the grid's
dozen passes stay in cache; 1.5x faster than 16 MB blocks on the law school rows)."""

NEWTON_ITERATIONS = 40
"""Iterations of the safeguarded Newton search for the mode (quadratic convergence)."""


# ---------------------------------------------------------------------- log density
def _log_density(problem: LatentProblem, x: np.ndarray) -> np.ndarray:
    """Unnormalised log posterior at ``x`` of shape ``(S, N)`` or ``(S, N, G)``."""
    extra = x.ndim - 2
    with np.errstate(over="ignore"):
        return _log_density_terms(problem, x, extra)


def _child_eta(child: LatentChild, x: np.ndarray, extra: int) -> np.ndarray:
    """The child's linear predictor at ``x`` (``(S, N)`` plus ``extra`` grid axes); a
    categorical child's has a last axis, one per non-reference level."""
    shape = (slice(None), slice(None)) + (None,) * extra
    if child.base.ndim == 3:
        levels = (*shape, slice(None))
        return np.asarray(child.base[levels] + child.loading[levels] * x[..., None])
    return np.asarray(child.base[shape] + child.loading[shape] * x)


def _categorical_derivatives(child: LatentChild, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and second derivative in ``x`` of a categorical child's log softmax at its
    observed level (``(S, N)``): ``l_y - E[l]`` and ``-(E[l^2] - E[l]^2)`` under the level
    probabilities, ``l`` the loadings (0 for the reference level)."""
    eta = _child_eta(child, x, 0)  # (S, N, K-1)
    logits = np.concatenate([np.zeros((*eta.shape[:-1], 1)), eta], axis=-1)
    p = np.exp(logits - logsumexp(logits, axis=-1, keepdims=True))[..., 1:]
    load = np.broadcast_to(child.loading, eta.shape)
    mean = (p * load).sum(axis=-1)
    second = (p * load**2).sum(axis=-1)
    code = np.rint(child.y).astype(np.int64)  # 0 = the reference level
    index = np.broadcast_to(np.maximum(code - 1, 0)[None, :, None], (*eta.shape[:-1], 1))
    chosen = np.where(code[None, :] > 0, np.take_along_axis(load, index, axis=-1)[..., 0], 0.0)
    return chosen - mean, -(second - mean**2)


def _log_density_terms(problem: LatentProblem, x: np.ndarray, extra: int) -> np.ndarray:
    shape = (slice(None), slice(None)) + (None,) * extra
    centred = x - problem.mean[shape]
    out = -0.5 * problem.precision[shape] * centred**2
    for child in problem.children:
        eta = _child_eta(child, x, extra)
        y = child.y[(None, slice(None)) + (None,) * extra]
        args = tuple(a[shape] for a in child.args)
        out = out + child.family.log_likelihood(y, eta, *args)
    return np.asarray(out)


def _gradient_and_curvature(
    problem: LatentProblem, x: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """First and second derivative of the log posterior at ``x`` (shape ``(S, N)``)."""
    gradient = -problem.precision * (x - problem.mean)
    curvature = np.broadcast_to(-problem.precision, x.shape).copy()
    for child in problem.children:
        if child.base.ndim == 3:  # categorical: already in x
            first, second = _categorical_derivatives(child, x)
            gradient = gradient + first
            curvature = curvature + second
            continue
        eta = child.base + child.loading * x
        first, second = child.family.derivatives(child.y[None, :], eta, *child.args)
        gradient = gradient + child.loading * first
        curvature = curvature + child.loading**2 * second
    return gradient, curvature


def _mode(problem: LatentProblem) -> tuple[np.ndarray, np.ndarray]:
    """Mode and curvature there, by Newton's method safeguarded by bisection.

    Strong concavity (curvature at most ``-P``) puts the mode within
    ``|gradient(m)| / P`` of the Normal part's mean ``m``: that is the starting
    bracket, and a Newton step that leaves the current bracket is replaced by
    its midpoint.
    """
    x = problem.mean.copy()
    gradient, curvature = _gradient_and_curvature(problem, x)
    if not problem.children:
        return x, curvature
    reach = np.abs(gradient) / problem.precision
    low, high = x - reach, x + reach
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(NEWTON_ITERATIONS):
            low = np.where(gradient > 0, x, low)
            high = np.where(gradient < 0, x, high)
            step = x - gradient / curvature
            x = np.where((step > low) & (step < high), step, 0.5 * (low + high))
            gradient, curvature = _gradient_and_curvature(problem, x)
    return x, curvature


def _grid_bounds(problem: LatentProblem) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper end of each row's grid, shape ``(S, N)``.

    Each side starts at :data:`GRID_HALF_WIDTH` Laplace scales from the mode and
    doubles until the log density there is :data:`TAIL_DROP` nats below the
    mode; strong concavity caps it at ``sqrt(2 * TAIL_DROP / P)``, where the
    drop is guaranteed.
    """
    mode, curvature = _mode(problem)
    peak = _log_density(problem, mode)
    cap = np.broadcast_to(np.sqrt(2.0 * TAIL_DROP / problem.precision), mode.shape)
    start = np.minimum(GRID_HALF_WIDTH / np.sqrt(-curvature), cap)
    ends = []
    for sign in (-1.0, 1.0):
        width = start.copy()
        for _ in range(64):
            short = (peak - _log_density(problem, mode + sign * width) < TAIL_DROP) & (width < cap)
            if not short.any():
                break
            width = np.where(short, np.minimum(2.0 * width, cap), width)
        ends.append(mode + sign * width)
    return ends[0], ends[1]


# ---------------------------------------------------------------------- grid
@dataclass(frozen=True)
class _Grid:
    """A piecewise linear density on a uniform grid, per parameter set and row.

    ``density`` holds the values at the grid points scaled so the peak is 1;
    ``mass`` the normalised mass of each cell.
    """

    low: np.ndarray  # (S, R)
    step: np.ndarray  # (S, R)
    density: np.ndarray  # (S, R, G)
    mass: np.ndarray  # (S, R, G - 1)


def _grid(problem: LatentProblem, points: int) -> _Grid:
    low, high = _grid_bounds(problem)
    step = (high - low) / (points - 1)
    x = low[..., None] + step[..., None] * np.arange(points)
    log_f = _log_density(problem, x)
    density = np.exp(log_f - log_f.max(axis=-1, keepdims=True))
    mass = 0.5 * (density[..., :-1] + density[..., 1:])
    mass = mass / mass.sum(axis=-1, keepdims=True)
    return _Grid(low, step, density, mass)


def _grid_moments(grid: _Grid) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd of the piecewise linear density, exactly, shape ``(S, R)``."""
    h = grid.step[..., None]
    f0, f1 = grid.density[..., :-1], grid.density[..., 1:]
    total = 0.5 * (f0 + f1)  # per unit step: zeroth moment of the cell / h
    first = (f0 + 2.0 * f1) / 6.0  # integral of t f(t) over the cell / h^2
    second = (f0 + 3.0 * f1) / 12.0  # integral of t^2 f(t) over the cell / h^3
    points = grid.density.shape[-1]
    offset = h * np.arange(points - 1)  # cell starts relative to the grid's low end
    norm = total.sum(axis=-1)
    m1 = (offset * total + h * first).sum(axis=-1) / norm
    m2 = (offset**2 * total + 2.0 * offset * h * first + h**2 * second).sum(axis=-1) / norm
    variance = np.maximum(m2 - m1**2, 0.0)
    return grid.low + m1, np.sqrt(variance)


def _row_blocks(n_sets: int, n_rows: int, points: int) -> list[slice]:
    size = max(1, MAX_GRID_CELLS // max(1, n_sets * points))
    return [slice(i, min(i + size, n_rows)) for i in range(0, n_rows, size)]


# ---------------------------------------------------------------------- public API
def posterior_moments(
    scm: SCM,
    params: ParamDraws,
    codes: Mapping[str, np.ndarray],
    observed: Mapping[str, np.ndarray],
    conditioned: Collection[str],
    *,
    grid_points: int = GRID_POINTS,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Posterior mean and sd of every latent per parameter set and row.

    Parameters
    ----------
    scm : SCM
        The model (see :func:`unsupported_node` for when this applies).
    params : ParamDraws
        ``S`` parameter sets.
    codes : mapping
        0-based protected level codes of the rows, shape ``(N,)``.
    observed : mapping
        Values of the conditioned nodes and of their observed parents, ``(N,)``.
    conditioned : collection of str
        Observed nodes the latents are conditioned on.
    grid_points : int
        Grid points per row and parameter set.

    Returns
    -------
    dict of str to (numpy.ndarray, numpy.ndarray)
        Latent -> (mean, sd), each of shape ``(S, N)``.
    """
    _check_points(grid_points)
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for latent, problem in latent_problems(scm, params, codes, observed, conditioned).items():
        mean = np.empty_like(problem.mean)
        sd = np.empty_like(problem.mean)
        for block in _row_blocks(params.n, mean.shape[1], grid_points):
            mean[:, block], sd[:, block] = _grid_moments(_grid(problem.rows(block), grid_points))
        out[latent] = (mean, sd)
    return out


def laplace_approximation(
    scm: SCM,
    params: ParamDraws,
    codes: Mapping[str, np.ndarray],
    observed: Mapping[str, np.ndarray],
    conditioned: Collection[str],
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Posterior mode of every latent per parameter set and row, and the Laplace sd there.

    The mode is found as for the grid (:func:`_mode`); the sd is
    ``1 / sqrt(-curvature)`` at the mode. Used to centre quadrature
    (:mod:`counterfair.inference.loo`).

    Returns
    -------
    dict of str to (numpy.ndarray, numpy.ndarray)
        Latent -> (mode, sd), each of shape ``(S, N)``.
    """
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for latent, problem in latent_problems(scm, params, codes, observed, conditioned).items():
        mode, curvature = _mode(problem)
        out[latent] = (mode, 1.0 / np.sqrt(-np.broadcast_to(curvature, mode.shape)))
    return out


def sample_latents(
    scm: SCM,
    params: ParamDraws,
    codes: Mapping[str, np.ndarray],
    observed: Mapping[str, np.ndarray],
    conditioned: Collection[str],
    *,
    draws_per_set: int,
    rng: RowRandom | np.random.Generator,
) -> dict[str, np.ndarray]:
    """Draw every latent of every row given each parameter set, exactly.

    Parameters
    ----------
    scm, params, codes, observed, conditioned
        As in :func:`posterior_moments`.
    draws_per_set : int
        Draws per parameter set ``D``.
    rng : RowRandom or numpy.random.Generator
        Source of each draw's random stream. With a :class:`~counterfair.rng.RowRandom`
        each latent draws from its own stream ``child("abduct", latent)``, keyed by the
        rows' global positions, so the draws do not depend on the chunking.

    Returns
    -------
    dict of str to numpy.ndarray
        Latent -> draws of shape ``(D * S, N)``; draw ``j`` belongs to parameter
        set ``j % S``.
    """
    if draws_per_set < 1:
        raise ValueError(f"draws_per_set must be at least 1, got {draws_per_set}")
    out: dict[str, np.ndarray] = {}
    for latent, problem in latent_problems(scm, params, codes, observed, conditioned).items():
        s, n = problem.mean.shape
        if isinstance(rng, RowRandom):
            uniforms = rng.child("abduct", latent).random((draws_per_set, s, n), row_axis=2)
        else:
            uniforms = rng.random((draws_per_set, s, n))
        keys = (uniforms * 2.0**53).astype(np.uint64)  # a uniform's 53 bits: the stream's key
        values = latent_draws(problem, params, keys=keys)
        out[latent] = values.reshape(draws_per_set * s, n)
    return out


def _check_points(grid_points: int) -> None:
    if grid_points < 16:
        raise ValueError(f"grid_points must be at least 16, got {grid_points}")
