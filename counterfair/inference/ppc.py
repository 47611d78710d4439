"""Posterior predictive checks: replicate every observed node of a fit's training rows.

For each of ``S`` joint posterior draws of the parameters and of the training
rows' latents (the fit's own draws, :meth:`counterfair.Fit.abduct` with no
arguments), every checked node is drawn afresh from its conditional
distribution by the one forward draw function
(:func:`counterfair.model.evaluate.linear_predictor` and
:func:`~counterfair.model.evaluate.draw_node`, as :mod:`counterfair.model.simulate` does),
given

* the rows' observed protected attributes,
* the latent draws,
* the **observed** values of its observed parents.

This is the *conditional* ("one-step") replication, the default: each node is
checked on its own, given its factual parents, so a misfit shows at the node
whose family is wrong instead of spreading to its descendants as it would with
jointly replicated parents.

Every row has its own latent, drawn given that very row, so the conditional
check cannot see what the latents absorb: a Poisson child of a per-row latent
is a Poisson-lognormal mixture, overdispersed by the latent's loading, and
reproduces the variance of overdispersed counts given the rows' latent draws.
``replication="marginal"`` checks the model as a generator of new individuals
instead: latents are drawn afresh from their priors, and every observed node is
replicated in topological order from its *replicated* parents, given the rows'
protected attributes and the parameter draws (the "mixed" predictive check of
hierarchical models, Gelman, Meng and Stern 1996, with the per-row latents as
the random effects). A family misfit the latents hide in the conditional check
(counts with more zeros, or a longer tail, than a Poisson-lognormal gives)
shows there.

Each node's statistics (:meth:`counterfair.model.families.base.Family.check_statistics`:
mean and variance of a Normal node; mean, variance and share of zeros of a
count; mean and share of zeros of a binary node; the share of every level of an
ordinal or categorical node) are computed on the observed column and on each
replication; :class:`~counterfair.inference.ppc_result.PosteriorPredictiveCheck` holds
the table and draws the figure.

The conditional check uses the data twice (the latents were drawn given these
very rows), so it is conservative: a statistic outside the replications' 90 %
interval is a misfit the latents could not absorb.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.inference.ppc_result import INTERVAL, PosteriorPredictiveCheck
from counterfair.model.evaluate import draw_node, linear_predictor
from counterfair.model.params import ParamDraws
from counterfair.model.specs import Latent

if TYPE_CHECKING:
    from counterfair.inference.fit import Fit
    from counterfair.model.scm import SCM

Replication = Literal["conditional", "marginal"]
"""How :func:`posterior_predictive_check` replicates (see the module docstring)."""

REPLICATIONS: tuple[str, ...] = ("conditional", "marginal")

DEFAULT_DRAWS = 200
"""Replications of :meth:`counterfair.Fit.ppc` unless ``n_draws`` is given."""

UNKNOWN_CHECK_NODE = (
    "cannot check {node!r}: it is not an observed node of the SCM; observed nodes: {observed}"
)
"""Error when ``nodes=`` names something other than an observed node."""


def check_nodes(scm: SCM, nodes: Sequence[str] | str | None) -> tuple[str, ...]:
    """The observed nodes to check, in topological order (default: all of them).

    Raises
    ------
    SCMError
        Naming the first entry that is not an observed node.
    """
    if nodes is None:
        return scm.observed
    wanted = (nodes,) if isinstance(nodes, str) else tuple(nodes)
    if not wanted:
        raise errors.SCMError("nodes= is empty; leave it out to check every observed node")
    for node in wanted:
        if node not in scm.observed:
            raise errors.SCMError(
                UNKNOWN_CHECK_NODE.format(node=node, observed=list(scm.observed))
            )
    return tuple(n for n in scm.observed if n in set(wanted))


def replicate(
    scm: SCM,
    params: ParamDraws,
    latents: Mapping[str, np.ndarray],
    codes: Mapping[str, np.ndarray],
    observed: Mapping[str, np.ndarray],
    nodes: Sequence[str],
    rng: np.random.Generator,
    *,
    joint: bool = False,
) -> dict[str, np.ndarray]:
    """Replicated values of ``nodes``, shape ``(S, N)`` each.

    Each node is drawn given its observed parents' values (``joint=False``) or
    given their replicated values (``joint=True``: every observed node is drawn
    in topological order, as :mod:`counterfair.model.simulate` does).

    Parameters
    ----------
    scm : SCM
        The model.
    params : ParamDraws
        ``S`` parameter sets.
    latents : mapping
        Latent draws by latent node, ``(S, N)`` (paired with ``params``).
    codes : mapping
        Protected level codes (values of continuous ones), ``(N,)``.
    observed : mapping
        Observed values of the nodes and of their observed parents, ``(N,)``
        (level codes for ordinal and categorical nodes).
    nodes : sequence of str
        Observed nodes to replicate.
    rng : numpy.random.Generator
        Source of the fresh draws.
    joint : bool
        Replicate the parents too (the marginal check).
    """
    values: dict[str, np.ndarray] = dict(latents) if joint else {**observed, **latents}
    reference = scm.coding == "reference"
    n_rows = len(next(iter(observed.values()))) if observed else 0
    out: dict[str, np.ndarray] = {}
    wanted = set(nodes)
    for node in scm.observed if joint else nodes:
        eq = scm.equations[node]
        eta = linear_predictor(
            eq, params, values, codes, reference_coding=reference, n_rows=n_rows
        )
        draws = draw_node(eq, params, eta, rng)
        if joint:
            values[node] = draws
        if node in wanted:
            out[node] = draws
    return out


def prior_latents(
    scm: SCM, n_sets: int, n_rows: int, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """Fresh draws of every latent from its prior ``Normal(loc, scale)``, shape ``(S, N)``."""
    out: dict[str, np.ndarray] = {}
    for node in scm.latents:
        spec = scm.specs[node]
        assert isinstance(spec, Latent)
        out[node] = spec.loc + spec.scale * rng.standard_normal((n_sets, n_rows))
    return out


def summarise(
    scm: SCM,
    observed: Mapping[str, np.ndarray],
    replicated: Mapping[str, np.ndarray],
    *,
    seed: int | None = None,
    replication: str = "conditional",
) -> PosteriorPredictiveCheck:
    """The per-node statistics of observed and replicated values, as a check result.

    Parameters
    ----------
    scm : SCM
        The model.
    observed : mapping
        Observed values by node, ``(N,)``.
    replicated : mapping
        Replications by node, ``(S, N)``; the nodes checked.
    seed : int, optional
        The seed the replications were drawn with (recorded).
    replication : str
        How the replications were drawn (recorded).
    """
    lower, upper = (1.0 - INTERVAL) / 2.0, (1.0 + INTERVAL) / 2.0
    records = []
    discrete: dict[str, bool] = {}
    families: dict[str, str] = {}
    for node, reps in replicated.items():
        eq = scm.equations[node]
        families[node] = eq.spec.family
        stan_column = eq.family.stan_values(eq.spec, np.asarray(observed[node][:1], dtype=float))
        discrete[node] = stan_column.dtype.kind in "iu"
        for name, statistic in eq.family.check_statistics(eq.spec).items():
            value = float(statistic(observed[node]))
            draws = np.asarray(statistic(reps), dtype=float)
            q_low, q_high = np.quantile(draws, [lower, upper])
            records.append(
                {
                    "node": node,
                    "family": eq.spec.family,
                    "statistic": name,
                    "observed": value,
                    "replicated_mean": float(draws.mean()),
                    "replicated_q05": float(q_low),
                    "replicated_q95": float(q_high),
                    "p_value": float((draws >= value).mean()),
                    "outside_90": bool(value < q_low or value > q_high),
                }
            )
    return PosteriorPredictiveCheck(
        table=pd.DataFrame.from_records(records, columns=list(PosteriorPredictiveCheck.COLUMNS)),
        observed={node: np.asarray(observed[node]) for node in replicated},
        replicated=dict(replicated),
        families=families,
        discrete=discrete,
        seed=seed,
        replication=replication,
    )


def posterior_predictive_check(
    fit: Fit,
    *,
    n_draws: int | Literal["all"] | None = None,
    seed: int | None = None,
    nodes: Sequence[str] | str | None = None,
    replication: Replication = "conditional",
) -> PosteriorPredictiveCheck:
    """Posterior predictive check of a fit on its training rows; see :meth:`counterfair.Fit.ppc`.

    Raises
    ------
    SCMError
        If ``nodes`` names something other than an observed node.
    ValueError
        If ``n_draws`` is not a positive integer or is more than the fit's draws,
        or ``replication`` is unknown.
    """
    if replication not in REPLICATIONS:
        raise ValueError(
            f"replication must be 'conditional' or 'marginal', got {replication!r}"
        )
    checked = check_nodes(fit.scm, nodes)
    available = fit.params().n
    if n_draws is None:
        n_draws = min(DEFAULT_DRAWS, available)
    elif n_draws == "all":
        n_draws = available
    if isinstance(n_draws, bool) or not isinstance(n_draws, int | np.integer) or n_draws < 1:
        raise ValueError(f"n_draws must be a positive integer, got {n_draws!r}")
    if n_draws > available:
        raise ValueError(
            f"n_draws={n_draws} is more than the fit's {available} posterior draws; "
            f"pass n_draws={available} or fewer (or n_draws='all' for all of them)"
        )
    seed = fit.seed if seed is None else seed
    abduction = fit.abduct(n_samples=n_draws, seed=seed)
    rng = np.random.default_rng(seed)
    joint = replication == "marginal"
    latents = (
        prior_latents(fit.scm, abduction.n_samples, len(abduction.data), rng)
        if joint
        else abduction.latents
    )
    replicated = replicate(
        fit.scm,
        abduction.params,
        latents,
        abduction.codes,
        abduction.observed,
        checked,
        rng,
        joint=joint,
    )
    return summarise(
        fit.scm, abduction.observed, replicated, seed=seed, replication=replication
    )
