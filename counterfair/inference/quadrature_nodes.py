"""How many Gauss-Hermite nodes an integrated fit needs, checked on its own rows.

An integrated fit (``SCM.fit(latents="integrated")``) integrates each row's latent out
of its non-Normal children by adaptive Gauss-Hermite quadrature
(:mod:`counterfair.stan.integrated`). Its error depends on how far the row's integrand
is from a Gaussian: on the loadings per standard deviation of the latent and on the
counts. The fixed default, :data:`counterfair.stan.integrated.GH_NODES` (9), meets
1e-6 per row up to loadings of about 0.6; the law school's LSAT loading is about 0.013
per standard deviation, where 3 nodes are as exact as 9 and the gradient costs half.

When the fit is warm-started, the pilot's posterior draws are at hand before NUTS
starts: :func:`choose_nodes` computes every training row's log marginal at
:data:`CHECK_SETS` of them with each rule of :data:`NODE_CHOICES` x
:data:`NEWTON_CHOICES` and with a reference rule (:data:`REFERENCE_NODES` nodes, Newton
run to convergence), and keeps the cheapest rule (fewest nodes, then fewest Newton
steps) whose worst error over the rows and sets is below :data:`NODE_TOLERANCE` (a
tenth of the 1e-6 per row the integrated fit promises). The values come from the C++
the fit program runs (:mod:`counterfair.inference.latent_rows`), so the check measures the
very rule the fit will use, Newton steps included. The pilot ran on a subsample, so its
posterior is wider than the full data's and the check covers the region NUTS will
visit. A categorical child is checked like the others. Without a pilot, or when the
check cannot run (two latents per row, which the latent problems do not describe), the
fit keeps the default.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from counterfair.inference import latent_problem
from counterfair.inference.latent_rows import REFERENCE_NEWTON, REFERENCE_NODES
from counterfair.inference.loo import pointwise_log_likelihood
from counterfair.model.params import ParamDraws
from counterfair.stan.integrated import GH_NODES, NEWTON_STEPS

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

logger = logging.getLogger(__name__)

NODE_CHOICES = (3, 5, 7, GH_NODES)
"""The node counts tried, fewest first."""

NEWTON_CHOICES = (1, 2, NEWTON_STEPS)
"""The Newton step counts tried with each node count, fewest first. Each step costs one
evaluation of every child per row: on the law school rows (LSAT's loading about 0.03
per sd of K, so the start, the Normal approximation's mode, is nearly the mode) one step
left the worst error at 6.7e-08, as two did, and cut the quadrature's time per row from
about 95 to 80 ns (a C++ microbenchmark of the 17,432 rows, idle machine)."""


NODE_TOLERANCE = 1e-7
"""Largest error of a row's log marginal that a rule may make on the check."""

CHECK_SETS = 6
"""Parameter sets of the pilot's posterior the check runs at."""


@dataclass(frozen=True)
class QuadratureRule:
    """The quadrature an integrated fit ran with, and how it was chosen.

    Attributes
    ----------
    nodes : int
        Gauss-Hermite nodes per row.
    newton : int
        Newton steps to each row's mode.
    max_error : float or None
        Worst error of a row's log marginal against :data:`REFERENCE_NODES` nodes at
        the checked parameter sets (None: not checked).
    checked_sets, checked_rows : int
        Parameter sets and rows of the check (0 when not checked).
    reason : str
        Why these nodes.
    """

    nodes: int
    newton: int
    max_error: float | None
    checked_sets: int
    checked_rows: int
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def default_rule(reason: str) -> QuadratureRule:
    """The fixed default rule (:data:`~counterfair.stan.integrated.GH_NODES` nodes)."""
    return QuadratureRule(GH_NODES, NEWTON_STEPS, None, 0, 0, reason)


def choose_nodes(
    scm: SCM,
    params: ParamDraws,
    codes: Mapping[str, np.ndarray],
    observed: Mapping[str, np.ndarray],
    *,
    seed: int | None = None,
    source: str = "the pilot's",
) -> QuadratureRule:
    """The cheapest rule of :data:`NODE_CHOICES` x :data:`NEWTON_CHOICES` within
    :data:`NODE_TOLERANCE` of the reference on every row.

    Parameters
    ----------
    scm : SCM
        The model (its latents are the integrated ones).
    params : ParamDraws
        Posterior draws of the structural parameters (the start's: the pilot's or the
        Laplace approximation's); :data:`CHECK_SETS` of them are picked with ``seed``.
    source : str
        Whose draws they are, for the rule's reason (``"the pilot's"``).
    codes, observed : mapping
        The training rows' protected codes and observed values.
    """
    if not latent_problem.supports_exact(scm, scm.observed):
        return default_rule(
            "the default: the check (on exact abduction's latent problems) does not cover "
            f"node {latent_problem.unsupported_node(scm, scm.observed)!r}"
        )
    if params.n > CHECK_SETS:
        pick = np.sort(np.random.default_rng(seed).choice(params.n, CHECK_SETS, replace=False))
        params = params.take(pick)
    reference = pointwise_log_likelihood(
        scm, params, codes, observed, method="quadrature", nodes=REFERENCE_NODES,
        newton=REFERENCE_NEWTON,
    )
    n_rows = reference.shape[1]
    errors: dict[tuple[int, int], float] = {}
    for nodes in NODE_CHOICES:
        for newton in NEWTON_CHOICES:
            values = pointwise_log_likelihood(
                scm, params, codes, observed, method="quadrature", nodes=nodes, newton=newton
            )
            gap = np.abs(values - reference)
            error = float(np.max(gap)) if np.all(np.isfinite(gap)) else float("inf")
            errors[nodes, newton] = error
            if error <= NODE_TOLERANCE:
                logger.info(
                    "integrated latents: %d Gauss-Hermite nodes and %d Newton steps per row "
                    "(worst error %.1e on %d rows x %d parameter sets; tried %s)",
                    nodes, newton, error, n_rows, params.n, _tried(errors),
                )
                return QuadratureRule(
                    nodes, newton, error, params.n, n_rows,
                    f"the cheapest rule within {NODE_TOLERANCE:g} of {REFERENCE_NODES} nodes "
                    f"on every training row at {params.n} of {source} posterior draws",
                )
    worst = errors[GH_NODES, NEWTON_STEPS]
    logger.info(
        "integrated latents: %d Gauss-Hermite nodes and %d Newton steps per row, the most "
        "tried (worst error %.1e on %d rows x %d parameter sets, above %g)",
        GH_NODES, NEWTON_STEPS, worst, n_rows, params.n, NODE_TOLERANCE,
    )
    return QuadratureRule(
        GH_NODES, NEWTON_STEPS, worst, params.n, n_rows,
        f"no rule of {list(NODE_CHOICES)} nodes x {list(NEWTON_CHOICES)} Newton steps was "
        f"within {NODE_TOLERANCE:g}: the most of both",
    )


def _tried(errors: Mapping[tuple[int, int], float]) -> str:
    return ", ".join(f"{n} nodes/{k} steps: {v:.1e}" for (n, k), v in errors.items())
