"""How many Gauss-Hermite nodes an integrated fit needs, checked on its own rows.

An integrated fit (``SCM.fit(latents="integrated")``) integrates each row's latent out
of its non-Normal children by adaptive Gauss-Hermite quadrature
(:mod:`counterfair.stan.integrated`). Its error depends on how far the row's integrand
is from a Gaussian: on the loadings per standard deviation of the latent and on the
counts. The fixed default, :data:`counterfair.stan.integrated.GH_NODES` (9), meets
1e-6 per row up to loadings of about 0.6; the law school's LSAT loading is about 0.013
per standard deviation, where 3 nodes are as exact as 9 and the gradient costs half.

When the fit is warm-started, the start's posterior draws are at hand before NUTS
starts: :func:`choose_nodes` computes every training row's log marginal at
:data:`CHECK_SETS` of them with each rule of :data:`NODE_CHOICES` x
:data:`NEWTON_CHOICES` and with a reference rule (:data:`REFERENCE_NODES` nodes, Newton
run to convergence), and keeps the cheapest rule (fewest nodes, then fewest Newton
steps) whose error **of the fit's log density** is at most :data:`TOTAL_TOLERANCE` at
every set: the sum over the rows of each row's absolute error (the log density NUTS
samples is the sum of the rows' log marginals, so that sum bounds its error).

Why that sum, and why 0.01: a log density off by ``delta(theta)`` gives the posterior
``p * exp(delta) / const``, whose mean of any ``f`` moves by about
``Cov_p(f, delta) <= sd(f) * sd(delta)`` (to first order); with ``|delta| <= 0.01``
every posterior mean moves by at most a hundredth of its posterior sd, a fifth of the
Monte Carlo error of a fit with a bulk ESS of 400. A row's own error (``max_error``, the
per-row tolerance of 1e-7 the check used before) says nothing of that by itself: on
5,000 rows a rule within 1e-7 per row may still be 5e-4 off in total, and one 4e-7 off
per row is 2e-3 off, both far below what moves the posterior. The per-row bound also
asked the same of 500 rows as of 500,000. A row's error is also what leave-one-out's
``elpd`` inherits (LOO scores an integrated fit with its rule): the same sum bounds it.

The values come from the C++ the fit program runs
(:mod:`counterfair.inference.latent_rows`), so the check measures the very rule the fit
will use, Newton steps included. The start's draws come from the Laplace approximation
or a pilot on a subsample, whose posterior is wider than the full data's: the check
covers the region NUTS will visit. A categorical child is checked like the others.
Without a start's draws, or when the check cannot run (two latents per row, which the
latent problems do not describe), the fit keeps the default.
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

NODE_CHOICES = (3, 5, 7, GH_NODES, 11, 15, 21)
"""The node counts tried, fewest first: beyond the default's 9 where a large loading
makes the rows' integrands skewed (the quadrature takes any count; the cost per row grows
with the nodes, 21 about twice 9's)."""

NEWTON_CHOICES = (1, 2, NEWTON_STEPS)
"""The Newton step counts tried with each node count, fewest first. Each step costs one
evaluation of every child per row: on the law school rows (LSAT's loading about 0.03
per sd of K, so the start, the Normal approximation's mode, is nearly the mode) one step
left the worst error at 6.7e-08, as two did, and cut the quadrature's time per row from
about 95 to 80 ns (a C++ microbenchmark of the 17,432 rows, idle machine)."""


TOTAL_TOLERANCE = 1e-2
"""Largest error of the fit's log density (the sum over the rows of each row's absolute
error) that a rule may make at a checked parameter set: every posterior mean within a
hundredth of its sd (the module's docstring)."""

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
    total_error : float or None
        Worst error of the fit's log density: the largest, over the checked sets, of
        the sum over the rows of each row's absolute error (what :data:`TOTAL_TOLERANCE`
        bounds; None: not checked, or a fit saved before it was recorded).
    """

    nodes: int
    newton: int
    max_error: float | None
    checked_sets: int
    checked_rows: int
    reason: str
    total_error: float | None = None

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
    """The cheapest rule of :data:`NODE_CHOICES` x :data:`NEWTON_CHOICES` whose log density
    (the sum over the rows) is within :data:`TOTAL_TOLERANCE` of the reference's at every
    checked set.

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
    errors: dict[tuple[int, int], tuple[float, float]] = {}  # (total, per row)
    for nodes in NODE_CHOICES:
        for newton in NEWTON_CHOICES:
            values = pointwise_log_likelihood(
                scm, params, codes, observed, method="quadrature", nodes=nodes, newton=newton
            )
            gap = np.abs(values - reference)
            if np.all(np.isfinite(gap)):
                total, row = float(np.max(gap.sum(axis=1))), float(np.max(gap))
            else:
                total = row = float("inf")
            errors[nodes, newton] = (total, row)
            if total <= TOTAL_TOLERANCE:
                logger.info(
                    "integrated latents: %d Gauss-Hermite nodes and %d Newton steps per row "
                    "(error of the log density %.1e over %d rows, worst row %.1e, at %d "
                    "parameter sets; within %g; tried %s)",
                    nodes, newton, total, n_rows, row, params.n, TOTAL_TOLERANCE,
                    _tried(errors),
                )
                return QuadratureRule(
                    nodes, newton, row, params.n, n_rows,
                    f"the cheapest rule whose log density is within {TOTAL_TOLERANCE:g} of "
                    f"{REFERENCE_NODES} nodes' at {params.n} of {source} posterior draws",
                    total_error=total,
                )
    most = (NODE_CHOICES[-1], NEWTON_CHOICES[-1])
    total, row = errors[most]
    logger.info(
        "integrated latents: %d Gauss-Hermite nodes and %d Newton steps per row, the most "
        "tried (error of the log density %.1e over %d rows, worst row %.1e, at %d "
        "parameter sets, above %g: a latent this informative is skewed beyond what "
        "Gauss-Hermite rules follow; check its loadings, or fit with latents='joint')",
        *most, total, n_rows, row, params.n, TOTAL_TOLERANCE,
    )
    return QuadratureRule(
        *most, row, params.n, n_rows,
        f"no rule of {list(NODE_CHOICES)} nodes x {list(NEWTON_CHOICES)} Newton steps was "
        f"within {TOTAL_TOLERANCE:g}: the most of both",
        total_error=total,
    )


def _tried(errors: Mapping[tuple[int, int], tuple[float, float]]) -> str:
    return ", ".join(f"{n} nodes/{k} steps: {v[0]:.1e}" for (n, k), v in errors.items())
