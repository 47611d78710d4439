"""The posterior of one latent per row given parameter sets, as exact abduction sees it.

When every latent is a root with a Normal prior and no conditioned child has more than
one latent parent, the latents are independent given the data and each row's posterior
of a latent ``L`` given a parameter set is one-dimensional: its Normal prior times its
conditioned children's likelihoods. :func:`latent_problems` writes it as a
:class:`LatentProblem`:

* the Normal children (the *anchors* of :mod:`counterfair.stan.anchoring`) and the prior
  combine in closed form into ``Normal(m, 1 / sqrt(P))`` with
  ``P = 1 / scale^2 + sum_k lambda_k^2 / sigma_k^2`` and
  ``m = (loc / scale^2 + sum_k lambda_k / sigma_k^2 * r_k) / P`` (``r_k``: anchor ``k``'s
  residual given its other parents), and the anchors' own density with ``L`` integrated
  out, ``normal_log_marginal()`` (computed when asked);
* the other children (families with ``exact = True``) keep their linear predictor
  without ``L`` (``base``) and their loading; a categorical child keeps one of each per
  non-reference level (``base`` ``(S, N, K-1)``, loading ``(S, 1, K-1)``).

Exact abduction (:mod:`counterfair.inference.exact_abduction`), leave-one-out and the
integrated fit's node check (:mod:`counterfair.inference.latent_rows`) all start here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.stats import norm

from counterfair.model.evaluate import latent_loading, linear_predictor, sigma_of
from counterfair.model.families import Family
from counterfair.model.params import ParamDraws
from counterfair.model.specs import Latent
from counterfair.stan.families import stan_family

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation
    from counterfair.model.scm import SCM


# ---------------------------------------------------------------------- applicability
def _covered(family: Family) -> bool:
    """Whether a latent's child of ``family`` has a place in its latent problem: a Normal
    child, an ``exact`` family, or a categorical one (one column per non-reference level
    in the C++ quadrature and draws, the log softmax on exact abduction's grid)."""
    return (
        family.additive_noise or family.exact or stan_family(family).quadrature_code is not None
    )


def unsupported_node(scm: SCM, conditioned: Collection[str]) -> str | None:
    """The first node that prevents exact abduction, or None when it applies.

    Exact abduction needs every latent to be a root with a Normal prior, and
    every conditioned child of a latent to have exactly one latent parent and a
    family with additive noise (an anchor), with ``exact = True`` or categorical, so
    that the latents are independent and one-dimensional given the data.

    Parameters
    ----------
    scm : SCM
        The model.
    conditioned : collection of str
        Observed nodes the latents are conditioned on.
    """
    for latent in scm.latents:
        if not isinstance(scm.specs[latent], Latent) or scm.parents(latent):
            return latent
    for node in scm.observed:
        if node not in conditioned:
            continue
        eq = scm.equations[node]
        if len(eq.latent) > 1:
            return node
        if eq.latent and not _covered(eq.family):
            return node
    return None


def unsupported_child(scm: SCM, latent: str) -> str | None:
    """The first node that keeps ``latent`` out of the latent problems, or None.

    ``latent`` itself when it is not a root with a Normal prior; else the first observed
    child with another latent parent, or of a family neither Normal nor ``exact``.
    """
    if not isinstance(scm.specs[latent], Latent) or scm.parents(latent):
        return latent
    for node in scm.children(latent):
        eq = scm.equations.get(node)
        if eq is None:
            continue
        if len(eq.latent) > 1 or not _covered(eq.family):
            return node
    return None


def supports_exact(scm: SCM, conditioned: Collection[str]) -> bool:
    """Whether exact abduction applies (otherwise callers fall back to MCMC)."""
    return unsupported_node(scm, conditioned) is None


def require_exact(scm: SCM, conditioned: Collection[str]) -> None:
    """Raise a ValueError naming the node that prevents exact abduction, if any."""
    node = unsupported_node(scm, conditioned)
    if node is None:
        return
    if node in scm.latents:
        reason = "is not a root latent with a Normal prior"
    elif len(scm.equations[node].latent) > 1:
        parents = [t.parent for t in scm.equations[node].latent]
        reason = f"has more than one latent parent {parents}, so the latents are not independent"
    else:
        reason = f"has family {scm.equations[node].spec.family!r}"
    raise ValueError(f"exact abduction does not apply: node {node!r} {reason}; use engine='mcmc'")


# ---------------------------------------------------------------------- per-latent terms
@dataclass(frozen=True)
class LatentChild:
    """A non-Normal conditioned child: ``eta = base + loading * L``, value ``y``."""

    family: Family
    base: np.ndarray  # (S, N); categorical: (S, N, K-1), one per non-reference level
    loading: np.ndarray  # (S, 1), or (S, N) with loading_by; categorical: (S, 1, K-1)
    y: np.ndarray  # (N,)
    args: tuple[np.ndarray, ...] = ()  # the family's own parameters, each (S, N)
    eq: NodeEquation | None = None  # its equation (the C++ quadrature's parameters)


@dataclass(frozen=True)
class LatentProblem:
    """The posterior of one latent: Normal part ``N(mean, 1/sqrt(precision))`` and others."""

    mean: np.ndarray  # (S, N)
    precision: np.ndarray  # (S, 1), or (S, N) with group-specific loadings
    children: tuple[LatentChild, ...]
    # the prior's (loc, scale) and each anchor's (loading, sigma, residual without the
    # latent): what normal_log_marginal() needs; None where not kept
    prior: tuple[float, float] | None = None
    anchors: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...] = ()

    def normal_log_marginal(self) -> np.ndarray:
        """Log density of the anchors with the latent integrated out, ``(S, N)``.

        The prior and the anchors are Gaussian in the latent, so at ``L = m``:
        ``p(r) = p(r | m) p(m) / p(m | r)`` with ``p(m | r) = sqrt(P / (2 pi))``.
        """
        if self.prior is None:
            raise ValueError("the latent problem was built without its prior and anchors")
        loc, scale = self.prior
        mean = self.mean
        out = norm.logpdf(mean, loc=loc, scale=scale) + 0.5 * np.log(
            2.0 * np.pi / self.precision
        )
        for loading, sigma, residual in self.anchors:
            out = out + norm.logpdf(residual, loc=loading * mean, scale=sigma)
        return np.asarray(out)

    def rows(self, index: slice) -> LatentProblem:
        """The same problem restricted to a block of rows."""
        return LatentProblem(
            self.mean[:, index],
            _row_slice(self.precision, index),
            tuple(
                LatentChild(
                    c.family,
                    c.base[:, index],
                    _row_slice(c.loading, index),
                    c.y[index],
                    tuple(a[:, index] for a in c.args),
                    c.eq,
                )
                for c in self.children
            ),
            self.prior,
            tuple(
                (_row_slice(loading, index), _row_slice(sigma, index), residual[:, index])
                for loading, sigma, residual in self.anchors
            ),
        )


def _row_slice(array: np.ndarray, index: slice) -> np.ndarray:
    """Rows ``index`` of an ``(S, N)`` array; an ``(S, 1)`` array (shared by rows) as is."""
    return array if array.shape[1] == 1 else array[:, index]


def latent_problem(
    scm: SCM,
    latent: str,
    conditioned: Collection[str],
    params: ParamDraws,
    observed: Mapping[str, np.ndarray],
    codes: Mapping[str, np.ndarray],
    n_rows: int,
) -> LatentProblem:
    """Prior and anchors of ``latent`` in closed form, and its other conditioned children."""
    spec = scm.specs[latent]
    assert isinstance(spec, Latent)
    reference = scm.coding == "reference"
    values = {**observed, latent: np.zeros(n_rows)}
    precision = np.full((params.n, 1), 1.0 / spec.scale**2)
    information = np.full((params.n, n_rows), spec.loc / spec.scale**2)
    children: list[LatentChild] = []
    anchors: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # loading, sd, residual
    for node in scm.children(latent):
        eq = scm.equations.get(node)
        if eq is None or node not in conditioned:
            continue
        base = linear_predictor(
            eq, params, values, codes, reference_coding=reference, n_rows=n_rows
        )
        loading = latent_loading(eq, eq.latent[0], params, values, codes)  # (S, 1) or (S, N)
        y = np.asarray(observed[node], dtype=float)
        if eq.family.additive_noise:  # an anchor: the formulas of stan.anchoring
            sigma = sigma_of(eq, params)
            variance = sigma**2
            precision = precision + loading**2 / variance
            information = information + loading / variance * (y[None, :] - base)
            anchors.append((loading, sigma, y[None, :] - base))
        else:
            args = tuple(
                np.broadcast_to(a, (params.n, n_rows))
                for a in eq.family.likelihood_arguments(eq, params, y)
            )
            children.append(LatentChild(eq.family, base, loading, y, args, eq))
    return LatentProblem(
        information / precision,
        precision,
        tuple(children),
        (spec.loc, spec.scale),
        tuple(anchors),
    )


def latent_problems(
    scm: SCM,
    params: ParamDraws,
    codes: Mapping[str, np.ndarray],
    observed: Mapping[str, np.ndarray],
    conditioned: Collection[str],
) -> dict[str, LatentProblem]:
    """Every latent's problem (a ValueError naming the node where they do not apply)."""
    require_exact(scm, conditioned)
    n_rows = count_rows(codes, observed)
    return {
        latent: latent_problem(scm, latent, conditioned, params, observed, codes, n_rows)
        for latent in scm.latents
    }


def count_rows(codes: Mapping[str, np.ndarray], observed: Mapping[str, np.ndarray]) -> int:
    for array in [*codes.values(), *observed.values()]:
        return int(np.shape(array)[-1])
    raise ValueError("no protected codes or observed values given: cannot tell the number of rows")
