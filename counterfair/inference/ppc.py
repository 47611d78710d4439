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

Statistics conditional on the parents
-------------------------------------
A misfit of the *mechanism* (a straight line where the truth bends, a loading
that differs by group) can leave a node's overall mean and variance intact: the
residual sd absorbs it. With ``groups=True`` (the default of
:meth:`counterfair.Fit.ppc`) the same statistics are also computed within groups
of rows (:class:`Group`, :func:`protected_groups`, :func:`parent_groups`):

* per level of every categorical protected attribute, and per quantile bin
  (:data:`DEFAULT_BINS`) of every continuous protected attribute;
* per quantile bin of every continuous observed parent of the node (a Normal or
  count parent), conditional replication only (in the marginal replication the
  parents are replicated too, so the observed parent's bins do not hold the
  replicated rows);
* for each latent with two or more Normal children (indicators), the covariance
  of every pair of them, over all rows and per protected group: a loading that
  differs by group changes its indicator's covariances in that group only.

Groups of fewer than :data:`MIN_GROUP_ROWS` rows are left out. The rows of the
table carry ``by`` (the attribute or parent grouped by; empty for the overall
statistics) and ``group`` (its level, or the bin as ``[low, high)``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.inference.ppc_result import INTERVAL, PosteriorPredictiveCheck
from counterfair.model.evaluate import draw_node, linear_predictor
from counterfair.model.families.base import CountFamily
from counterfair.model.params import ParamDraws
from counterfair.model.specs import Latent, Protected
from counterfair.stan.families import stan_family

if TYPE_CHECKING:
    from counterfair.inference.fit import Fit
    from counterfair.model.scm import SCM

Replication = Literal["conditional", "marginal"]
"""How :func:`posterior_predictive_check` replicates (see the module docstring)."""

REPLICATIONS: tuple[str, ...] = ("conditional", "marginal")

DEFAULT_DRAWS = 200
"""Replications of :meth:`counterfair.Fit.ppc` unless ``n_draws`` is given."""

DEFAULT_BINS = 5
"""Quantile bins of a continuous parent or protected attribute in the conditional statistics."""

MIN_GROUP_ROWS = 10
"""Groups of fewer rows get no conditional statistics."""

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


@dataclass(frozen=True)
class Group:
    """A group of rows the statistics are also computed within.

    Attributes
    ----------
    by : str
        The protected attribute or parent that defines it.
    label : str
        Its level, or its bin as ``"[low, high)"`` (the last bin closed, ``"[low, high]"``).
    rows : numpy.ndarray
        Boolean mask over the rows, ``(N,)``.
    """

    by: str
    label: str
    rows: np.ndarray

    @property
    def size(self) -> int:
        """Number of rows in the group."""
        return int(np.count_nonzero(self.rows))


def quantile_bins(by: str, values: np.ndarray, n_bins: int = DEFAULT_BINS) -> list[Group]:
    """Equal-count bins of ``values`` (edges at its quantiles; tied edges merged).

    Raises
    ------
    ValueError
        If ``n_bins`` is not an integer of at least 2.
    """
    check_bins(n_bins)
    x = np.asarray(values, dtype=float)
    edges = np.unique(np.quantile(x, np.linspace(0.0, 1.0, n_bins + 1)))
    if edges.shape[0] < 2:  # a constant column: one bin, nothing to compare
        return []
    index = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, edges.shape[0] - 2)
    out = []
    for i in range(edges.shape[0] - 1):
        close = "]" if i == edges.shape[0] - 2 else ")"
        out.append(Group(by, f"[{edges[i]:.4g}, {edges[i + 1]:.4g}{close}", index == i))
    return out


def check_bins(n_bins: object) -> None:
    """Refuse a number of bins that is not an integer of at least 2."""
    if isinstance(n_bins, bool) or not isinstance(n_bins, int | np.integer) or n_bins < 2:
        raise ValueError(f"n_bins must be an integer of at least 2, got {n_bins!r}")


def protected_groups(
    scm: SCM,
    codes: Mapping[str, np.ndarray],
    *,
    labels: Mapping[str, Sequence[str]] | None = None,
    n_bins: int = DEFAULT_BINS,
) -> list[Group]:
    """One group per level of every categorical protected attribute, per bin of a continuous one.

    Parameters
    ----------
    scm : SCM
        The model.
    codes : mapping
        Protected level codes (values of continuous ones), ``(N,)``.
    labels : mapping, optional
        Level labels of each categorical protected attribute in code order (the
        fit's ``encoding.levels``); default the codes as text.
    n_bins : int
        Quantile bins of a continuous protected attribute.

    Raises
    ------
    SCMError
        If ``codes`` lacks a protected attribute of the SCM, naming it.
    """
    out: list[Group] = []
    for node in scm.protected:
        if node not in codes:
            raise errors.SCMError(
                f"no codes of protected attribute {node!r}; given: {sorted(codes)}"
            )
        spec = scm.specs[node]
        assert isinstance(spec, Protected)
        values = np.asarray(codes[node])
        if spec.continuous:
            out += quantile_bins(node, values, n_bins)
            continue
        names = None if labels is None else labels.get(node)
        for code in np.unique(values.astype(np.int64)):
            label = str(names[code]) if names is not None else str(code)
            out.append(Group(node, label, values == code))
    return out


def continuous_parents(scm: SCM, node: str) -> tuple[str, ...]:
    """The observed parents of ``node`` with a Normal or count family (binned by the check)."""
    out = []
    for parent in scm.parents(node):
        if parent not in scm.observed:
            continue
        family = scm.equations[parent].family
        if family.additive_noise or isinstance(family, CountFamily):
            out.append(parent)
    return tuple(out)


def parent_groups(
    scm: SCM, node: str, observed: Mapping[str, np.ndarray], *, n_bins: int = DEFAULT_BINS
) -> list[Group]:
    """Quantile bins of every continuous observed parent of ``node`` (its observed values)."""
    out: list[Group] = []
    for parent in continuous_parents(scm, node):
        out += quantile_bins(parent, observed[parent], n_bins)
    return out


def indicator_pairs(scm: SCM, nodes: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """For each latent with two or more Normal children among ``nodes``, every pair of them."""
    wanted = set(nodes)
    out: dict[str, list[tuple[str, str]]] = {}
    for latent in scm.latents:
        children = [
            c for c in scm.observed
            if c in wanted and latent in scm.parents(c)
            and scm.equations[c].family.additive_noise
        ]
        pairs = [(a, b) for i, a in enumerate(children) for b in children[i + 1:]]
        if pairs:
            out[latent] = pairs
    return out


def covariance_statistic(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Sample covariance over rows (``ddof=1``): ``(..., N)`` twice to ``(...)``."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    dx = x - x.mean(axis=-1, keepdims=True)
    dy = y - y.mean(axis=-1, keepdims=True)
    return np.asarray((dx * dy).sum(axis=-1) / (x.shape[-1] - 1))


def _record(
    node: str,
    family: str,
    name: str,
    value: float,
    draws: np.ndarray,
    *,
    by: str = "",
    group: str = "",
) -> dict[str, object]:
    lower, upper = (1.0 - INTERVAL) / 2.0, (1.0 + INTERVAL) / 2.0
    q_low, q_high = np.quantile(draws, [lower, upper])
    return {
        "node": node,
        "family": family,
        "statistic": name,
        "by": by,
        "group": group,
        "observed": value,
        "replicated_mean": float(draws.mean()),
        "replicated_q05": float(q_low),
        "replicated_q95": float(q_high),
        "p_value": float((draws >= value).mean()),
        "outside_90": bool(value < q_low or value > q_high),
    }


def _group_records(
    node: str,
    family: str,
    statistics: Mapping[str, Callable[[np.ndarray], np.ndarray]],
    observed: np.ndarray,
    reps: np.ndarray,
    groups: Sequence[Group],
) -> list[dict[str, object]]:
    records = []
    for group in groups:
        if group.size < MIN_GROUP_ROWS:
            continue
        for name, statistic in statistics.items():
            value = float(statistic(observed[group.rows]))
            draws = np.asarray(statistic(reps[:, group.rows]), dtype=float)
            records.append(
                _record(node, family, name, value, draws, by=group.by, group=group.label)
            )
    return records


def _covariance_records(
    scm: SCM,
    observed: Mapping[str, np.ndarray],
    replicated: Mapping[str, np.ndarray],
    groups: Sequence[Group],
) -> list[dict[str, object]]:
    records = []
    n_rows = len(next(iter(replicated.values()))[0]) if replicated else 0
    everyone = Group("", "", np.ones(n_rows, dtype=bool))
    for latent, pairs in indicator_pairs(scm, list(replicated)).items():
        for group in (everyone, *groups):
            if group.size < MIN_GROUP_ROWS:
                continue
            rows = group.rows
            for a, b in pairs:
                value = float(covariance_statistic(observed[a][rows], observed[b][rows]))
                draws = covariance_statistic(replicated[a][:, rows], replicated[b][:, rows])
                records.append(
                    _record(latent, "latent", f"covariance of {a} and {b}", value,
                            np.asarray(draws, dtype=float), by=group.by, group=group.label)
                )
    return records


def summarise(
    scm: SCM,
    observed: Mapping[str, np.ndarray],
    replicated: Mapping[str, np.ndarray],
    *,
    seed: int | None = None,
    replication: str = "conditional",
    protected: Sequence[Group] = (),
    parents: Mapping[str, Sequence[Group]] | None = None,
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
    protected : sequence of Group
        Groups of rows (:func:`protected_groups`) every node's statistics and the
        covariances of each latent's Normal indicators are also computed within.
        Empty (the default): only the overall statistics and covariances.
    parents : mapping of str to sequence of Group, optional
        Further groups per node (:func:`parent_groups`: bins of its continuous parents).
    """
    records: list[dict[str, object]] = []
    discrete: dict[str, bool] = {}
    families: dict[str, str] = {}
    for node, reps in replicated.items():
        eq = scm.equations[node]
        families[node] = eq.spec.family
        stan_column = stan_family(eq).stan_values(eq, np.asarray(observed[node][:1], dtype=float))
        discrete[node] = stan_column.dtype.kind in "iu"
        statistics = eq.family.check_statistics(eq.spec)
        for name, statistic in statistics.items():
            value = float(statistic(observed[node]))
            draws = np.asarray(statistic(reps), dtype=float)
            records.append(_record(node, eq.spec.family, name, value, draws))
        groups = [*protected, *((parents or {}).get(node, ()))]
        records += _group_records(
            node, eq.spec.family, statistics, np.asarray(observed[node]), reps, groups
        )
    records += _covariance_records(scm, observed, replicated, protected)
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
    groups: bool = True,
    n_bins: int = DEFAULT_BINS,
) -> PosteriorPredictiveCheck:
    """Posterior predictive check of a fit on its training rows; see :meth:`counterfair.Fit.ppc`.

    With ``groups`` the statistics are also computed per protected group, per bin
    of each node's continuous parents (conditional replication) and, for the
    Normal indicators of each latent, their covariances (see the module docstring).

    Raises
    ------
    SCMError
        If ``nodes`` names something other than an observed node.
    ValueError
        If ``n_draws`` is not a positive integer or is more than the fit's draws,
        ``replication`` is unknown or ``n_bins`` is not an integer of at least 2.
    """
    if replication not in REPLICATIONS:
        raise ValueError(
            f"replication must be 'conditional' or 'marginal', got {replication!r}"
        )
    check_bins(n_bins)
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
    abduction = fit.abduct(n_samples=n_draws, seed=seed).without_holes(
        "the posterior predictive check"
    )
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
    protected: list[Group] = []
    parents: dict[str, list[Group]] = {}
    if groups:
        protected = protected_groups(
            fit.scm, abduction.codes, labels=fit.encoding.levels, n_bins=n_bins
        )
        if not joint:  # replicated parents do not stay in the observed parents' bins
            parents = {
                node: parent_groups(fit.scm, node, abduction.observed, n_bins=n_bins)
                for node in checked
            }
    return summarise(
        fit.scm,
        abduction.observed,
        replicated,
        seed=seed,
        replication=replication,
        protected=protected,
        parents=parents,
    )
