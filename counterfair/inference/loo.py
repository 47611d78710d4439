"""Model comparison by PSIS-LOO with every row's latents integrated out.

Leave-one-out cross-validation asks how well the model predicts a row it has
not seen. A row's latents are fitted to that row only, so the pointwise
log-likelihood conditional on them (``log p(row | u_n, theta)``) scores a row
by latents that were fitted to it and rewards models with many free latents.
The quantity LOO needs is the row's *marginal* likelihood given a draw
``theta_s`` of the global parameters::

    log p(row_n | theta_s) = log  ∫ p(row_n | u, theta_s) p(u | theta_s) du

computed here for every posterior draw and row, then handed to
:func:`arviz.loo` / :func:`arviz.compare` (Pareto-smoothed importance sampling over
the draws ``s``).

Integration
-----------
* ``"quadrature"``: when every latent is a root with a Normal prior and no
  observed node has two latent parents (the case of exact abduction,
  :func:`counterfair.inference.latent_problem.supports_exact`), the integral factorises
  into one 1-D integral per latent over its children. The Normal children (anchors)
  enter in closed form; the others through the adaptive Gauss-Hermite quadrature an
  integrated fit's program runs (:func:`counterfair.inference.latent_rows.latent_log_marginal`,
  the C++ of ``counterfair/stan/quadrature.hpp``): the same values the fit's log density
  sums. :func:`loo` and :func:`compare` take an integrated fit's own rule
  (``fit.quadrature``), and for a joint fit, whose loadings no check has seen, the
  reference rule (:data:`~counterfair.inference.latent_rows.REFERENCE_NODES` nodes,
  Newton run to convergence); :func:`pointwise_log_likelihood` defaults to the integrated
  fit's default rule (:data:`~counterfair.stan.integrated.GH_NODES` nodes,
  :data:`~counterfair.stan.integrated.NEWTON_STEPS` Newton steps).
* ``"importance"``: otherwise, importance sampling from the latents' prior with
  ``n_draws`` draws per row (default :data:`IMPORTANCE_DRAWS`) and a seed;
  its Monte Carlo error grows when a row pins its latents down tightly.

The log density of each observed node is the family's full normalised density
given its linear predictor (:func:`node_log_density`).
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

import arviz as az
import numpy as np
import pandas as pd
from scipy.special import logsumexp
from scipy.stats import norm

from counterfair import errors
from counterfair.inference import latent_problem
from counterfair.inference.latent_rows import (
    REFERENCE_NEWTON,
    REFERENCE_NODES,
    latent_log_marginal,
)
from counterfair.logs import user_stacklevel
from counterfair.model.evaluate import linear_predictor, sigma_of
from counterfair.model.families.base import CountFamily
from counterfair.model.params import ParamDraws
from counterfair.model.specs import Latent
from counterfair.stan.integrated import GH_NODES, NEWTON_STEPS

if TYPE_CHECKING:  # types only: Fit.loo delegates here
    from counterfair.inference.fit import Fit
    from counterfair.model.scm import SCM

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation

IMPORTANCE_DRAWS = 2000
"""Prior draws of the latents per row in importance sampling."""

PARETO_K_BAD = 0.7
"""Pareto k above which a row's PSIS estimate is unreliable."""

MAX_CELLS = 4_000_000
"""Largest ``draws x rows x nodes`` block built at once."""

__all__ = ["compare", "log_evidence", "loo", "pointwise_log_likelihood"]


# ---------------------------------------------------------------------- densities
def node_log_density(
    eq: NodeEquation, params: ParamDraws, eta: np.ndarray, y: np.ndarray
) -> np.ndarray:
    """Normalised log density (or mass) of value ``y`` of a node given ``eta``, ``(S, M)``.

    ``eta`` has shape ``(S, M)`` and ``y`` shape ``(M,)``. Normal nodes use
    their residual sd; count families their scipy distribution; Bernoulli and
    ordinal nodes their :meth:`~counterfair.model.families.base.Family.log_likelihood`,
    which is already normalised; categorical nodes the log softmax of their
    linear predictors (``eta`` then has shape ``(S, M, K-1)``) at the level code.

    Raises
    ------
    SCMError
        For a family without a log density here, naming the node.
    """
    family = eq.family
    y = np.asarray(y, dtype=float)
    if family.additive_noise:
        return np.asarray(norm.logpdf(y[None, :], loc=eta, scale=sigma_of(eq, params)))
    if isinstance(family, CountFamily):
        dist, args = family.scipy_distribution(eq, params, eta)
        return np.asarray(dist.logpmf(y[None, :], *args))
    if family.name in ("bernoulli", "ordinal"):
        args = tuple(
            np.broadcast_to(a, eta.shape) for a in family.likelihood_arguments(eq, params, y)
        )
        return np.asarray(family.log_likelihood(y[None, :], eta, *args))
    if family.name == "categorical":  # eta (S, M, K-1): the log softmax at the level code
        return np.asarray(family.log_likelihood(y[None, :], eta))
    raise errors.SCMError(
        f"node {eq.node!r} has family {family.name!r}, which has no log density for LOO; "
        "compare models without it"
    )


def integration_method(scm: SCM) -> str:
    """``"quadrature"`` (factorised 1-D Gauss-Hermite), ``"importance"`` or ``"none"``."""
    if not scm.latents:
        return "none"
    return "quadrature" if latent_problem.supports_exact(scm, scm.observed) else "importance"


def _tile(array: np.ndarray, k: int) -> np.ndarray:
    """``(N,)`` to ``(N * k,)``, each value repeated ``k`` times (row-major with nodes last)."""
    return np.repeat(np.asarray(array), k, axis=-1)


def _block_rows(n_sets: int, n_rows: int, k: int) -> list[slice]:
    size = max(1, MAX_CELLS // max(1, n_sets * k))
    return [slice(i, min(i + size, n_rows)) for i in range(0, n_rows, size)]


def _latent_free_terms(
    scm: SCM,
    params: ParamDraws,
    codes: Mapping[str, np.ndarray],
    observed: Mapping[str, np.ndarray],
    n: int,
    conditioned: Collection[str] | None = None,
) -> np.ndarray:
    """The log densities of the ``conditioned`` nodes (default: every observed one)
    without a latent parent, summed, ``(S, N)``."""
    reference = scm.coding == "reference"
    total = np.zeros((params.n, n))
    for node in scm.observed if conditioned is None else conditioned:
        eq = scm.equations[node]
        if eq.latent:
            continue
        eta = linear_predictor(eq, params, observed, codes, reference_coding=reference, n_rows=n)
        total += node_log_density(eq, params, eta, observed[node])
    return total


def _quadrature(
    scm: SCM,
    params: ParamDraws,
    codes: Mapping[str, np.ndarray],
    observed: Mapping[str, np.ndarray],
    n: int,
    nodes: int,
    newton: int,
    conditioned: Collection[str] | None = None,
) -> np.ndarray:
    """``log p(conditioned nodes of row n | theta_s)`` (default: every observed node), the
    latents integrated out by exact abduction's quadrature, ``(S, N)``."""
    given = scm.observed if conditioned is None else tuple(conditioned)
    total = _latent_free_terms(scm, params, codes, observed, n, given)
    problems = latent_problem.latent_problems(scm, params, codes, observed, given)
    for problem in problems.values():
        total += latent_log_marginal(problem, params, nodes=nodes, newton=newton)
    return total


def log_evidence(
    scm: SCM,
    params: ParamDraws,
    codes: Mapping[str, np.ndarray],
    observed: Mapping[str, np.ndarray],
    conditioned: Collection[str],
    n: int,
) -> np.ndarray:
    """``log p(conditioned nodes of row n | theta_s)`` at the fit's quadrature rule."""
    return _quadrature(scm, params, codes, observed, n, GH_NODES, NEWTON_STEPS, conditioned)


def _importance(
    scm: SCM,
    params: ParamDraws,
    codes: Mapping[str, np.ndarray],
    observed: Mapping[str, np.ndarray],
    n: int,
    draws: np.ndarray,
) -> np.ndarray:
    reference = scm.coding == "reference"
    m = draws.shape[-1]
    codes_k = {k: _tile(v, m) for k, v in codes.items()}
    observed_k = {k: _tile(v, m) for k, v in observed.items()}
    values: dict[str, np.ndarray] = dict(observed_k)
    for i, latent in enumerate(scm.latents):  # the same prior draws for every parameter set
        values[latent] = np.broadcast_to(draws[i].reshape(1, n * m), (params.n, n * m))
    log_f = np.zeros((params.n, n * m))
    for node in scm.observed:
        eq = scm.equations[node]
        eta = linear_predictor(
            eq, params, values, codes_k, reference_coding=reference, n_rows=n * m
        )
        log_f = log_f + node_log_density(eq, params, eta, observed_k[node])
    return np.asarray(logsumexp(log_f.reshape(params.n, n, m), axis=-1) - np.log(m))


def pointwise_log_likelihood(
    scm: SCM,
    params: ParamDraws,
    codes: Mapping[str, np.ndarray],
    observed: Mapping[str, np.ndarray],
    *,
    method: str | None = None,
    nodes: int = GH_NODES,
    newton: int = NEWTON_STEPS,
    n_draws: int = IMPORTANCE_DRAWS,
    seed: int = 0,
) -> np.ndarray:
    """``log p(row_n | theta_s)`` with the row's latents integrated out, shape ``(S, N)``.

    Parameters
    ----------
    scm : SCM
        The model.
    params : ParamDraws
        ``S`` draws of the global parameters.
    codes, observed : mapping
        Protected level codes and values of every observed node, each ``(N,)``.
    method : {"quadrature", "importance"}, optional
        Default: :func:`integration_method`. Quadrature needs exact abduction to apply.
    nodes, newton : int
        Gauss-Hermite nodes and Newton steps per latent and row (quadrature): an
        integrated fit's rule by default, more for a reference.
    n_draws, seed : int
        Prior draws per row and their seed (importance sampling); draws depend on
        the row's position only, so results do not depend on chunking.
    """
    chosen = integration_method(scm) if method is None else method
    if chosen not in ("quadrature", "importance", "none"):
        raise ValueError(f"method must be 'quadrature' or 'importance', got {method!r}")
    if chosen == "quadrature" and not latent_problem.supports_exact(scm, scm.observed):
        node = latent_problem.unsupported_node(scm, scm.observed)
        raise errors.SCMError(f"quadrature does not apply: node {node!r}; use 'importance'")
    if nodes < 1 or n_draws < 1 or newton < 0:
        raise ValueError(
            f"nodes and n_draws must be positive and newton non-negative, got {nodes}, "
            f"{n_draws} and {newton}"
        )
    n = latent_problem.count_rows(codes, observed)
    out = np.empty((params.n, n))
    if chosen == "importance":
        rng = np.random.default_rng(seed)
        latent_draws = np.empty((len(scm.latents), n, n_draws))
        for i, latent in enumerate(scm.latents):
            spec = scm.specs[latent]
            assert isinstance(spec, Latent)
            latent_draws[i] = spec.loc + spec.scale * rng.standard_normal((n, n_draws))
    k = n_draws if chosen == "importance" else 1  # (the quadrature keeps no node axis)
    for block in _block_rows(params.n, n, k):
        c = {key: np.asarray(v)[block] for key, v in codes.items()}
        o = {key: np.asarray(v, dtype=float)[block] for key, v in observed.items()}
        m = block.stop - block.start
        if chosen == "quadrature":
            out[:, block] = _quadrature(scm, params, c, o, m, nodes, newton)
        elif chosen == "importance":
            out[:, block] = _importance(scm, params, c, o, m, latent_draws[:, block])
        else:
            out[:, block] = _latent_free_terms(scm, params, c, o, m)
    return out


# ---------------------------------------------------------------------- arviz
def _log_likelihood_idata(fit: Fit, **options: Any) -> tuple[az.InferenceData, str]:
    params = fit.params()
    codes = dict(fit.rows.codes)
    observed = fit.rows.values()
    method = options.pop("method", None) or integration_method(fit.scm)
    if method == "quadrature":
        if fit.quadrature is not None:  # an integrated fit: its own rule
            options.setdefault("nodes", fit.quadrature.nodes)
            options.setdefault("newton", fit.quadrature.newton)
        else:  # no rule was checked for this fit's loadings: the reference rule
            options.setdefault("nodes", REFERENCE_NODES)
            options.setdefault("newton", REFERENCE_NEWTON)
    values = pointwise_log_likelihood(fit.scm, params, codes, observed, method=method, **options)
    posterior = fit.idata.posterior
    chains, draws = posterior.sizes["chain"], posterior.sizes["draw"]
    loglik = values.reshape(chains, draws, -1)
    idata = az.from_dict(
        posterior={"lp_dummy": np.zeros((chains, draws))},
        log_likelihood={"row": loglik},
        coords={"row_id": list(fit.data.index)},
        dims={"row": ["row_id"]},
    )
    return idata, method


def _bad_rows(fit: Fit, pareto_k: np.ndarray, name: str) -> list[Any]:
    bad = list(fit.data.index[np.asarray(pareto_k) > PARETO_K_BAD])
    if bad:
        warnings.warn(
            f"{name}: {len(bad)} row(s) have Pareto k > {PARETO_K_BAD} (rows {bad[:10]}"
            f"{' ...' if len(bad) > 10 else ''}): their PSIS-LOO estimate is unreliable. "
            "Draw more posterior samples, use moment matching, or K-fold cross-validation "
            "for those rows.",
            errors.LOOWarning,
            stacklevel=user_stacklevel(),
        )
    return bad


def loo(fit: Fit, **options: Any) -> pd.DataFrame:
    """PSIS-LOO of a fit with each row's latents integrated out (one-row frame).

    Parameters
    ----------
    fit : Fit
        A fitted SCM.
    **options
        ``method``, ``nodes``, ``newton``, ``n_draws``, ``seed`` of
        :func:`pointwise_log_likelihood`.

    Returns
    -------
    pandas.DataFrame
        Columns ``elpd_loo``, ``se``, ``p_loo``, ``n_bad_k`` (rows with Pareto
        k > 0.7), ``integration``; ``attrs["pareto_k"]`` is the Series of k per row.
    """
    idata, method = _log_likelihood_idata(fit, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # replaced by the warning below
        result = az.loo(idata, pointwise=True)
    pareto_k = np.asarray(result.pareto_k)
    bad = _bad_rows(fit, pareto_k, "fit")
    frame = pd.DataFrame(
        {
            "elpd_loo": [float(result.elpd_loo)],
            "se": [float(result.se)],
            "p_loo": [float(result.p_loo)],
            "n_bad_k": [len(bad)],
            "integration": [method],
        }
    )
    frame.attrs["pareto_k"] = pd.Series(pareto_k, index=fit.data.index, name="pareto_k")
    return frame


def _check_comparable(fits: Mapping[str, Fit]) -> None:
    names = list(fits)
    first = fits[names[0]]
    for name in names[1:]:
        other = fits[name]
        a, b = set(first.scm.observed), set(other.scm.observed)
        if a != b:
            raise errors.SCMError(
                f"cannot compare {names[0]!r} and {name!r}: observed columns differ "
                f"(only in {names[0]!r}: {sorted(a - b)}, only in {name!r}: {sorted(b - a)})"
            )
        if not first.data.index.equals(other.data.index):
            missing = first.data.index.symmetric_difference(other.data.index)
            raise errors.DataError(
                f"cannot compare {names[0]!r} and {name!r}: they were fitted on different rows "
                f"({len(first.data)} vs {len(other.data)} rows; e.g. {list(missing[:5])} "
                "in only one)"
            )
        mine, theirs = first.rows.values(), other.rows.values()
        for column in sorted(a):
            if not np.array_equal(mine[column], theirs[column]):
                raise errors.DataError(
                    f"cannot compare {names[0]!r} and {name!r}: column {column!r} has "
                    "different values"
                )


def compare(fits: Mapping[str, Fit], **options: Any) -> pd.DataFrame:
    """Rank fitted SCMs by PSIS-LOO (latents integrated out), like :func:`arviz.compare`.

    Parameters
    ----------
    fits : mapping of str to Fit
        At least two fits of SCMs over the same observed columns and rows.
    **options
        Passed to :func:`pointwise_log_likelihood` (``nodes``, ``n_draws``, ``seed``).

    Returns
    -------
    pandas.DataFrame
        One row per model, best first: ``rank``, ``elpd_loo``, ``p_loo``,
        ``elpd_diff``, ``weight`` (stacking), ``se``, ``dse``, ``n_bad_k``,
        ``integration``.

    Raises
    ------
    SCMError, DataError
        If the fits observe different columns or rows, naming the difference.
    """
    if len(fits) < 2:
        raise ValueError(f"compare needs at least two fits, got {len(fits)}")
    _check_comparable(fits)
    datasets, methods, bad = {}, {}, {}
    for name, fit in fits.items():
        datasets[name], methods[name] = _log_likelihood_idata(fit, **dict(options))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            k = np.asarray(az.loo(datasets[name], pointwise=True).pareto_k)
        bad[name] = len(_bad_rows(fit, k, name))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        table = az.compare(datasets, ic="loo", method="stacking")
    table = table.drop(columns=[c for c in ("warning", "scale") if c in table.columns])
    table["n_bad_k"] = [bad[name] for name in table.index]
    table["integration"] = [methods[name] for name in table.index]
    return table


