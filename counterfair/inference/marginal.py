"""Each row's likelihood given parameter sets, with its latent integrated out.

For a latent ``L`` of exact abduction's form
(:class:`~counterfair.inference.exact_abduction.LatentProblem`: a root with a Normal
prior, each conditioned child with no other latent parent), a row's likelihood of
``L``'s children given a parameter set is

    p(anchors) * int prod_c p_c(y_c | base_c + loading_c L) Normal(L | m, 1 / sqrt(P)) dL

where the Normal children (anchors) and the prior give ``Normal(m, 1 / sqrt(P))`` and
``p(anchors)`` in closed form (``problem.normal_log_marginal``), and the integral over
the other children is, with ``L = m + z / sqrt(P)``, exactly what an integrated fit's
program computes per row: the C++ adaptive Gauss-Hermite quadrature of
``counterfair/stan/quadrature.hpp``, called here through :mod:`counterfair.stan.native`.
Leave-one-out and the integrated fit's node check read their values from here, so the
fit, LOO and the check share one implementation.
"""

from __future__ import annotations

import numpy as np

from counterfair.inference.exact_abduction import LatentProblem
from counterfair.model.params import ParamDraws
from counterfair.stan import native


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
        (:func:`counterfair.inference.exact_abduction.latent_problems`).
    params : ParamDraws
        The same ``S`` parameter sets (the children's dispersions and cutpoints).
    nodes, newton : int
        Gauss-Hermite nodes and Newton steps per row (an integrated fit's rule, or a
        reference rule of many).
    threads : int, optional
        Threads of the library (the values do not depend on them).
    """
    if problem.normal_log_marginal is None:
        raise ValueError("the latent problem was built without its anchors' marginal")
    if not problem.children:
        return problem.normal_log_marginal
    S, N = problem.mean.shape
    root = np.sqrt(problem.precision)  # (S, 1) or (S, N)
    eta, load, y, family, phi, cuts, cut_len = [], [], [], [], [], [], []
    for child in problem.children:
        eq = child.eq
        code = child.family.quadrature_code
        if eq is None or code is None:
            raise ValueError(
                f"child {getattr(eq, 'node', '?')!r} of family {child.family.name!r} is not "
                "covered by the quadrature"
            )
        eta.append(np.broadcast_to(child.base + child.loading * problem.mean, (S, N)))
        load.append(np.broadcast_to(child.loading / root, (S, N)))
        y.append(child.family.stan_values(eq.spec, child.y))
        family.append(code)
        dispersion, cutpoints = child.family.quadrature_parameters(eq, params)
        phi.append(dispersion)
        cuts.append(cutpoints)
        cut_len.append(cutpoints.shape[1])
    loads = np.stack(load, axis=-1)  # (S, N, C)
    shared = bool(np.all(loads == loads[:, :1, :]))  # the same for every row of a set
    values = native.log_marginal_rows(
        y=np.stack(y, axis=-1),
        eta=np.stack(eta, axis=-1),
        load=loads[:, 0, :] if shared else loads,
        family=np.asarray(family),
        phi=np.stack(phi, axis=-1),
        cuts=np.concatenate(cuts, axis=1),
        cut_len=np.asarray(cut_len),
        nodes=nodes,
        newton=newton,
        threads=threads,
    )
    return problem.normal_log_marginal + values
