"""A latent's rows through the shared C++: log marginals and exact draws.

For a latent ``L`` of exact abduction's form
(:class:`~counterfair.inference.latent_problem.LatentProblem`: a root with a Normal
prior, each conditioned child with no other latent parent), the Normal children
(anchors) and the prior give ``Normal(m, 1 / sqrt(P))`` in closed form, and with
``L = m + z / sqrt(P)`` the other children enter as ``base_c + loading_c m +
(loading_c / sqrt(P)) z`` with ``z ~ Normal(0, 1)``: exactly what an integrated fit's
program computes per row, by the C++ of ``counterfair/stan/quadrature.hpp``, called
here through :mod:`counterfair.stan.native`.

* :func:`latent_log_marginal`: each row's likelihood of ``L``'s children with ``L``
  integrated out, ``p(anchors) * int prod_c p_c(...) dz`` (``p(anchors)`` is
  ``problem.normal_log_marginal()``), for leave-one-out and the fit's node check;
* :func:`latent_draws`: exact draws of ``L`` given each parameter set (rejection under
  the tangent hull of its log-concave posterior), for exact abduction of any rows.

The fit, LOO, the node check and exact abduction thus share one implementation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from counterfair.inference.latent_problem import LatentProblem
from counterfair.model.params import ParamDraws
from counterfair.stan import native
from counterfair.stan.families import stan_family
from counterfair.stan.families.base import CATEGORICAL_MORE
from counterfair.stan.integrated import NEWTON_STEPS

REFERENCE_NODES = 40
"""Nodes of the reference rule: the node check's yardstick, and a joint fit's LOO."""

REFERENCE_NEWTON = 50
"""Newton steps of the reference rule (they stop once a step is below 1e-9)."""


def _columns(problem: LatentProblem, params: ParamDraws) -> dict[str, Any]:
    """The library's row arguments for ``problem``'s non-Normal children (z standardised)."""
    S, N = problem.mean.shape
    root = np.sqrt(problem.precision)  # (S, 1) or (S, N)
    eta, load, y, family, phi, cuts, cut_len = [], [], [], [], [], [], []
    for child in problem.children:
        eq = child.eq
        emitter = stan_family(child.family)
        code = emitter.quadrature_code
        if eq is None or code is None:
            raise ValueError(
                f"child {getattr(eq, 'node', '?')!r} of family {child.family.name!r} is not "
                "covered by the quadrature"
            )
        if child.base.ndim == 3:  # categorical: one column per non-reference level
            level = emitter.stan_values(eq, child.y)
            for k in range(child.base.shape[2]):
                eta.append(child.base[..., k] + child.loading[..., k] * problem.mean)
                load.append(np.broadcast_to(child.loading[..., k] / root, (S, N)))
                y.append(level)
                family.append(code if k == 0 else CATEGORICAL_MORE)
                phi.append(np.ones(S))
                cuts.append(np.zeros((S, 0)))
                cut_len.append(0)
            continue
        eta.append(np.broadcast_to(child.base + child.loading * problem.mean, (S, N)))
        load.append(np.broadcast_to(child.loading / root, (S, N)))
        y.append(emitter.stan_values(eq, child.y))
        family.append(code)
        dispersion, cutpoints = emitter.quadrature_parameters(eq, params)
        phi.append(dispersion)
        cuts.append(cutpoints)
        cut_len.append(cutpoints.shape[1])
    C = len(family)
    loads = np.stack(load, axis=-1) if C else np.zeros((S, N, 0))
    # one loading per set for every row (the block path), from the arrays' shapes, so that
    # the path does not depend on which rows a block holds
    shared = problem.precision.shape[1] == 1 and all(
        child.loading.shape[1] == 1 for child in problem.children
    )
    return {
        "y": np.stack(y, axis=-1) if C else np.zeros((N, 0), dtype=int),
        "eta": np.stack(eta, axis=-1) if C else np.zeros((S, N, 0)),
        "load": loads[:, 0, :] if shared else loads,
        "family": np.asarray(family, dtype=int),
        "phi": np.stack(phi, axis=-1) if C else np.zeros((S, 0)),
        "cuts": np.concatenate(cuts, axis=1) if C else np.zeros((S, 0)),
        "cut_len": np.asarray(cut_len, dtype=int),
    }


def latent_log_marginal(
    problem: LatentProblem,
    params: ParamDraws,
    *,
    nodes: int,
    newton: int,
    threads: int | None = None,
) -> np.ndarray:
    """``log p(children of L in row n | theta_s)`` with ``L`` integrated out, ``(S, N)``.

    Parameters
    ----------
    problem : LatentProblem
        The latent's prior, anchors and other children for ``S`` sets and ``N`` rows
        (:func:`counterfair.inference.latent_problem.latent_problems`).
    params : ParamDraws
        The same ``S`` parameter sets (the children's dispersions and cutpoints).
    nodes, newton : int
        Gauss-Hermite nodes and Newton steps per row (an integrated fit's rule, or a
        reference rule of many).
    threads : int, optional
        Threads of the library (the values do not depend on them).
    """
    normal = problem.normal_log_marginal()
    if not problem.children:
        return normal
    values = native.log_marginal_rows(
        **_columns(problem, params), nodes=nodes, newton=newton, threads=threads
    )
    return normal + values


def standard_draws(
    problem: LatentProblem,
    params: ParamDraws,
    *,
    keys: np.ndarray,
    newton: int = NEWTON_STEPS,
    threads: int | None = None,
) -> np.ndarray:
    """Exact draws of ``z = (L - m) sqrt(P)`` per parameter set and row, ``(D, S, N)``
    (arguments as :func:`latent_draws`)."""
    return native.draw_rows(**_columns(problem, params), keys=keys, newton=newton,
                            threads=threads)


def latent_draws(
    problem: LatentProblem,
    params: ParamDraws,
    *,
    keys: np.ndarray,
    newton: int = NEWTON_STEPS,
    threads: int | None = None,
) -> np.ndarray:
    """Exact draws of the latent given each parameter set and row, shape ``(D, S, N)``.

    Parameters
    ----------
    problem : LatentProblem
        As in :func:`latent_log_marginal`.
    params : ParamDraws
        The same ``S`` parameter sets.
    keys : array of uint64, shape (D, S, N)
        One random stream per draw: the same keys give the same draws, whatever rows or
        threads they are drawn with.
    newton : int
        Newton steps to each row's mode before the hull (at least 50 are allowed).
    threads : int, optional
        Threads of the library (the draws do not depend on them).
    """
    z = standard_draws(problem, params, keys=keys, newton=newton, threads=threads)
    return problem.mean + z / np.sqrt(problem.precision)
