"""LOO-PIT: each observed value's probability integral transform under its leave-one-out predictive.

For node ``X`` of row ``n`` the predictive is the node's own conditional
distribution ``F(x | parents_n, u_n, theta)`` averaged over the fit's joint draws
of the parameters and the row's latents, reweighted to leave the cell ``x_n`` out:
Pareto-smoothed importance weights (:func:`arviz.psislw`) with raw log weights
``-log p(x_n | parents_n, u_{n,s}, theta_s)`` (the node's normalised density,
:func:`counterfair.inference.loo.node_log_density`). Then::

    PIT_n = sum_s w_ns F_s(x_n)                                  (Normal nodes)
    PIT_n = sum_s w_ns [F_s(x_n - 1) + V_n (F_s(x_n) - F_s(x_n - 1))]   (discrete nodes)

with ``V_n ~ Uniform(0, 1)`` (the randomised PIT of discrete values: uniform
under the model despite the ties; categorical levels in code order). Under a
well-specified model the values are close to independent ``Uniform(0, 1)``
draws; a line where the truth bends, a residual sd that is too small or too
large in some rows, or a skewed residual shows as a departure, measured here by
the Kolmogorov-Smirnov distance of their empirical CDF from the uniform one
(:class:`LooPit`; ``table``) and drawn by :meth:`LooPit.plot` (the ECDF minus the
uniform CDF, with the KS 95 % band). Pooled over rows, departures of opposite sign
cancel (a loading too large in one group and too small in another), so the same
summary is also given per protected group and per bin of each continuous parent
(``LooPit.groups``, the groups of :func:`counterfair.inference.ppc.protected_groups`
and :func:`~counterfair.inference.ppc.parent_groups`).

The cell left out is the node's value only: its children in the same row still
inform the row's latents, and a child of ``X`` scores the latents at the observed
``x_n``. For an additive-noise child that information is its noise (free of
``x_n``'s own noise given the latents); for other children the predictive is an
approximation. Rows whose Pareto k exceeds 0.7 are counted per node (``n_bad_k``):
their weights are unreliable, typically for nodes that pin their latent down.

Complements :meth:`counterfair.Fit.ppc` (statistics of replications) and
:func:`counterfair.compare` (LOO of whole rows, the latents integrated out).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import arviz as az
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from scipy.stats import kstest, norm

from counterfair.inference.loo import MAX_CELLS, PARETO_K_BAD, node_log_density
from counterfair.inference.ppc import (
    DEFAULT_BINS,
    MIN_GROUP_ROWS,
    Group,
    check_bins,
    check_nodes,
    parent_groups,
    protected_groups,
)
from counterfair.model.evaluate import linear_predictor, sigma_of
from counterfair.model.params import ParamDraws

if TYPE_CHECKING:  # types only
    from counterfair.inference.fit import Fit
    from counterfair.model.equation import NodeEquation
    from counterfair.model.scm import SCM

KS_BAND = 1.358
"""``c`` of the Kolmogorov-Smirnov 95 % band ``c / sqrt(N)`` drawn by :meth:`LooPit.plot`."""

__all__ = ["LooPit", "cdf_interval", "loo_pit", "pit_values"]


def cdf_interval(
    eq: NodeEquation, params: ParamDraws, eta: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(F(y-), F(y))`` of a node's conditional distribution given ``eta``, each ``(S, M)``.

    Normal nodes: the Normal CDF twice. Counts, 0/1 and ordinal nodes: the family's
    own :meth:`~counterfair.model.families.base.Family.cdf_interval`. Categorical
    nodes: the cumulative level probabilities in code order.
    """
    family = eq.family
    y = np.asarray(y, dtype=float)
    if family.additive_noise:
        cdf = np.asarray(norm.cdf(y[None, :], loc=eta, scale=sigma_of(eq, params)))
        return cdf, cdf
    values = np.broadcast_to(y, eta.shape[:2])
    try:
        lower, upper = family.cdf_interval(eq, params, eta, values)
        return np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    except NotImplementedError:  # unordered levels: the probabilities in code order
        probabilities = np.asarray(family.mean(eq, params, eta))  # (S, M, K)
        cumulative = np.concatenate(
            [np.zeros((*probabilities.shape[:-1], 1)), np.cumsum(probabilities, axis=-1)],
            axis=-1,
        )
        code = np.rint(values).astype(np.int64)[..., None]
        lower = np.take_along_axis(cumulative, code, axis=-1)[..., 0]
        upper = np.take_along_axis(cumulative, code + 1, axis=-1)[..., 0]
        return lower, np.minimum(upper, 1.0)


def pit_values(
    scm: SCM,
    node: str,
    params: ParamDraws,
    latents: Mapping[str, np.ndarray],
    codes: Mapping[str, np.ndarray],
    observed: Mapping[str, np.ndarray],
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """LOO-PIT values of ``node`` for every row, and each row's Pareto k, each ``(N,)``.

    Parameters
    ----------
    scm : SCM
        The model.
    node : str
        An observed node.
    params : ParamDraws
        ``S`` joint posterior draws of the parameters.
    latents : mapping
        The rows' latent draws paired with ``params``, ``(S, N)`` each.
    codes, observed : mapping
        Protected codes and observed values (level codes for level nodes), ``(N,)``.
    rng : numpy.random.Generator
        Source of the randomisation of discrete values.
    """
    eq = scm.equations[node]
    reference = scm.coding == "reference"
    y_all = np.asarray(observed[node], dtype=float)
    n_rows = y_all.shape[0]
    pit = np.empty(n_rows)
    pareto_k = np.empty(n_rows)
    size = max(1, MAX_CELLS // max(1, params.n))
    for start in range(0, n_rows, size):
        block = slice(start, min(start + size, n_rows))
        m = block.stop - block.start
        values = {k: np.asarray(v)[..., block] for k, v in {**observed, **latents}.items()}
        block_codes = {k: np.asarray(v)[block] for k, v in codes.items()}
        eta = linear_predictor(
            eq, params, values, block_codes, reference_coding=reference, n_rows=m
        )
        y = y_all[block]
        log_lik = node_log_density(eq, params, eta, y)  # (S, m)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # high k is reported per node instead
            log_weights, k = az.psislw(-np.asarray(log_lik.T, dtype=float))
        weights = np.exp(np.asarray(log_weights))  # (m, S), each row sums to 1
        lower, upper = cdf_interval(eq, params, eta, y)
        low = np.einsum("ms,sm->m", weights, lower)
        high = np.einsum("ms,sm->m", weights, upper)
        pit[block] = low + rng.random(m) * (high - low)
        pareto_k[block] = np.asarray(k)
    return np.clip(pit, 0.0, 1.0), pareto_k


@dataclass(frozen=True)
class LooPit:
    """LOO-PIT values of every checked node and their departure from uniformity.

    Attributes
    ----------
    pit : pandas.DataFrame
        One column per node, one row per training row (the fit's row index).
    pareto_k : pandas.DataFrame
        The Pareto k of each row's importance weights, shaped like ``pit``.
    table : pandas.DataFrame
        One row per node: ``node``, ``family``, ``n``, ``ks_distance`` (the largest
        gap between the PIT values' empirical CDF and the uniform CDF),
        ``ks_p_value`` (Kolmogorov-Smirnov test against ``Uniform(0, 1)``, treating
        the values as independent), ``mean_pit`` (0.5 when uniform),
        ``share_below_05`` and ``share_above_95`` (0.05 each when uniform: too many
        values in a tail mean the predictive is too narrow or shifted there),
        ``max_pareto_k`` and ``n_bad_k`` (rows with k > 0.7).
    groups : pandas.DataFrame
        The same per node and group of rows (columns ``by`` and ``group`` after
        ``family``): per level of each protected attribute and per quantile bin of a
        continuous protected attribute or continuous observed parent.
    seed : int or None
        Seed of the randomisation of discrete values.
    """

    COLUMNS = (
        "node", "family", "n", "ks_distance", "ks_p_value", "mean_pit",
        "share_below_05", "share_above_95", "max_pareto_k", "n_bad_k",
    )

    pit: pd.DataFrame
    pareto_k: pd.DataFrame
    table: pd.DataFrame
    groups: pd.DataFrame = field(default_factory=pd.DataFrame)
    families: Mapping[str, str] = field(default_factory=dict)
    seed: int | None = None

    @property
    def nodes(self) -> tuple[str, ...]:
        """The checked nodes, in topological order."""
        return tuple(self.pit.columns)

    def __str__(self) -> str:
        """The per-node table, and the groups whose KS p-value is below 0.001."""
        text = (
            f"LOO-PIT of {len(self.nodes)} node(s), {len(self.pit)} rows "
            "(uniform when the model predicts each held-out value well)\n"
            + self.table.to_string(index=False, float_format=lambda x: f"{x:.4g}")
        )
        if not self.groups.empty:
            far = self.groups[self.groups["ks_p_value"] < 0.001]
            text += f"\n{len(far)} of {len(self.groups)} groups with KS p-value < 0.001"
            if not far.empty:
                text += "\n" + far.to_string(index=False, float_format=lambda x: f"{x:.4g}")
        return text

    def _repr_html_(self) -> str:
        """The per-node table as HTML (notebooks)."""
        return self.table.to_html(index=False, float_format=lambda x: f"{x:.4g}", border=0)

    def plot(self, nodes: Sequence[str] | None = None, *, ncols: int = 3) -> Figure:
        """The ECDF of each node's PIT values minus the uniform CDF, with the KS 95 % band.

        A well-specified node stays inside the band; an S shape (below then above
        zero) is a predictive too wide, the mirror image too narrow, a one-sided
        bulge a shifted one.

        Raises
        ------
        KeyError
            If a node was not checked.
        """
        chosen = tuple(self.nodes if nodes is None else nodes)
        for node in chosen:
            if node not in self.pit.columns:
                raise KeyError(f"node {node!r} was not checked; checked nodes: {list(self.nodes)}")
        ncols = max(1, min(ncols, len(chosen)))
        nrows = math.ceil(len(chosen) / ncols)
        figure = Figure(figsize=(4.2 * ncols, 3.0 * nrows), layout="constrained")
        FigureCanvasAgg(figure)
        axes = figure.subplots(nrows, ncols, squeeze=False).ravel()
        for ax in axes[len(chosen):]:
            ax.remove()
        grid = np.linspace(0.0, 1.0, 201)
        for node, ax in zip(chosen, axes, strict=False):
            values = np.sort(self.pit[node].to_numpy())
            ecdf = np.searchsorted(values, grid, side="right") / values.shape[0]
            band = KS_BAND / np.sqrt(values.shape[0])
            ax.fill_between(grid, -band, band, color="0.85", label="KS 95% band")
            ax.plot(grid, ecdf - grid, color="C0", label="ECDF - uniform")
            ax.axhline(0.0, color="0.4", linewidth=0.8)
            row = self.table.set_index("node").loc[node]
            ax.set_title(
                f"{node} ({self.families.get(node, '')}): KS {row['ks_distance']:.3f}, "
                f"p {row['ks_p_value']:.2g}",
                fontsize=9,
            )
            ax.set_xlabel("LOO-PIT")
        handles, labels = axes[0].get_legend_handles_labels()
        figure.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=8,
                      frameon=False)
        return figure


def _summary(pit: np.ndarray, k: np.ndarray) -> dict[str, float | int]:
    test = kstest(pit, "uniform")
    return {
        "n": int(pit.shape[0]),
        "ks_distance": float(test.statistic),
        "ks_p_value": float(test.pvalue),
        "mean_pit": float(pit.mean()),
        "share_below_05": float((pit < 0.05).mean()),
        "share_above_95": float((pit > 0.95).mean()),
        "max_pareto_k": float(k.max()),
        "n_bad_k": int((k > PARETO_K_BAD).sum()),
    }


def loo_pit(
    fit: Fit,
    *,
    nodes: Sequence[str] | str | None = None,
    seed: int | None = None,
    n_bins: int = DEFAULT_BINS,
) -> LooPit:
    """LOO-PIT of every observed node (or ``nodes``) on a fit's training rows.

    Uses every posterior draw of the fit with the rows' own latent draws (the
    fit's joint draws); see the module docstring.

    Parameters
    ----------
    fit : Fit
        A fitted SCM.
    nodes : str or sequence of str, optional
        Observed nodes to check (default: all of them).
    seed : int, optional
        Seed of the randomised PIT of discrete nodes (default: the fit's seed).
    n_bins : int
        Quantile bins of a continuous protected attribute or parent (``groups``).

    Returns
    -------
    LooPit
        ``.pit`` (values per row and node), ``.table`` (KS distance and more per
        node), ``.plot()``.

    Raises
    ------
    SCMError
        If ``nodes`` names something other than an observed node, naming it.
    ValueError
        If ``n_bins`` is not an integer of at least 2.

    Examples
    --------
    >>> result = cf.loo_pit(fit)  # doctest: +SKIP
    >>> result.table[["node", "ks_distance", "ks_p_value"]]  # doctest: +SKIP
    """
    checked = check_nodes(fit.scm, nodes)
    check_bins(n_bins)
    seed = fit.seed if seed is None else seed
    # every joint draw of the parameters and latents
    abduction = fit.abduct(seed=seed).without_holes("LOO-PIT")
    rng = np.random.default_rng(seed)
    index = fit.data.index
    pits: dict[str, np.ndarray] = {}
    ks: dict[str, np.ndarray] = {}
    records: list[dict[str, object]] = []
    grouped: list[dict[str, object]] = []
    protected = protected_groups(
        fit.scm, abduction.codes, labels=fit.encoding.levels, n_bins=n_bins
    )
    for node in checked:
        pit, k = pit_values(
            fit.scm, node, abduction.params, abduction.latents, abduction.codes,
            abduction.observed, rng,
        )
        pits[node], ks[node] = pit, k
        family = fit.scm.equations[node].spec.family
        records.append({"node": node, "family": family, **_summary(pit, k)})
        groups: list[Group] = [
            *protected, *parent_groups(fit.scm, node, abduction.observed, n_bins=n_bins)
        ]
        for group in groups:
            if group.size >= MIN_GROUP_ROWS:
                grouped.append(
                    {"node": node, "family": family, "by": group.by, "group": group.label,
                     **_summary(pit[group.rows], k[group.rows])}
                )
    group_columns = [*LooPit.COLUMNS[:2], "by", "group", *LooPit.COLUMNS[2:]]
    return LooPit(
        pit=pd.DataFrame(pits, index=index),
        pareto_k=pd.DataFrame(ks, index=index),
        table=pd.DataFrame.from_records(records, columns=list(LooPit.COLUMNS)),
        groups=pd.DataFrame.from_records(grouped, columns=group_columns),
        families={node: fit.scm.equations[node].spec.family for node in checked},
        seed=seed,
    )
