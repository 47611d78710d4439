"""The result of a posterior predictive check: a tidy table per node and statistic, and a figure.

Made by :func:`counterfair.inference.ppc.posterior_predictive_check` (``fit.ppc()``); see
:mod:`counterfair.inference.ppc` for what is replicated and how.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import arviz as az
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from counterfair import atomic

INTERVAL = 0.9
"""Central probability of the replicated interval a statistic is flagged outside of."""

MAX_PLOTTED_REPLICATIONS = 50
"""Replications drawn per panel of :meth:`PosteriorPredictiveCheck.plot` unless given."""


@dataclass(frozen=True)
class PosteriorPredictiveCheck:
    """Observed against replicated statistics of every checked node.

    ``str(check)`` is a compact table; in a notebook it renders as HTML.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per node, statistic and group (:attr:`COLUMNS`): ``node``,
        ``family``, ``statistic`` (``mean``, ``variance``, ``share of 0``,
        ``share of <level>``; for a latent, family ``"latent"``, ``covariance of
        <a> and <b>`` of two of its Normal indicators), ``by`` and ``group``
        (the protected attribute or continuous parent the rows were grouped by
        and the group's level or bin ``[low, high)``; both empty for a
        statistic over all rows), ``observed`` (its value on the data), ``replicated_mean``,
        ``replicated_q05`` and ``replicated_q95`` (over the replications),
        ``p_value`` (the share of replications whose statistic is ``>=`` the
        observed one: near 0 or 1 is a misfit) and ``outside_90`` (the
        observed value is outside the replications' 90 % interval).
    observed : dict of str to numpy.ndarray
        Observed values by node, ``(N,)`` (level codes for level-valued nodes).
    replicated : dict of str to numpy.ndarray
        Replications by node, ``(S, N)``.
    families : dict of str to str
        Family of each node.
    discrete : dict of str to bool
        Whether a node's values are integers (counts, 0/1, level codes).
    seed : int or None
        Seed of the replications.
    replication : str
        ``"conditional"`` (each node given its observed parents and the rows'
        posterior latent draws) or ``"marginal"`` (latents from their priors,
        parents replicated too); see :mod:`counterfair.inference.ppc`.
    """

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "node",
        "family",
        "statistic",
        "by",
        "group",
        "observed",
        "replicated_mean",
        "replicated_q05",
        "replicated_q95",
        "p_value",
        "outside_90",
    )

    table: pd.DataFrame
    observed: Mapping[str, np.ndarray]
    replicated: Mapping[str, np.ndarray]
    families: Mapping[str, str]
    discrete: Mapping[str, bool] = field(default_factory=dict)
    seed: int | None = None
    replication: str = "conditional"

    @property
    def nodes(self) -> tuple[str, ...]:
        """The checked nodes, in topological order."""
        return tuple(self.replicated)

    @property
    def n_draws(self) -> int:
        """Number of replications ``S``."""
        return int(next(iter(self.replicated.values())).shape[0]) if self.replicated else 0

    def flagged(self) -> pd.DataFrame:
        """The rows of :attr:`table` whose observed value is outside the 90 % interval."""
        return self.table[self.table["outside_90"]].reset_index(drop=True)

    def overall(self) -> pd.DataFrame:
        """The rows of :attr:`table` over all rows (``by`` empty): today's per-node statistics."""
        return self.table[self.table["by"] == ""].reset_index(drop=True)

    def conditional(self) -> pd.DataFrame:
        """The rows of :attr:`table` within groups (per protected group or parent bin)."""
        return self.table[self.table["by"] != ""].reset_index(drop=True)

    def statistic(self, node: str, name: str, *, by: str = "", group: str = "") -> pd.Series:
        """One row of :attr:`table` (e.g. ``check.statistic("C", "variance")``).

        ``by`` and ``group`` pick a group (``check.statistic("X", "variance",
        by="A", group="b")``); by default the statistic over all rows.

        Raises
        ------
        KeyError
            If the node was not checked or has no such statistic or group.
        """
        table = self.table
        rows = table[
            (table["node"] == node)
            & (table["statistic"] == name)
            & (table["by"] == by)
            & (table["group"] == group)
        ]
        if rows.empty:
            mine = table[table["node"] == node]
            known = list(dict.fromkeys(mine["statistic"]))
            groups = sorted({f"{b}={g}" for b, g in zip(mine["by"], mine["group"], strict=True)
                             if b})
            raise KeyError(
                f"no statistic {name!r} of node {node!r}"
                + (f" in group {by}={group}" if by or group else "")
                + f"; checked nodes: {list(self.nodes)}, statistics of {node!r}: {known}"
                + (f", groups: {groups}" if groups else "")
            )
        return rows.iloc[0]

    # ------------------------------------------------------------------ display
    def _display_table(self) -> pd.DataFrame:
        shown = self.table.copy()
        shown["90% interval"] = [
            f"[{lo:.4g}, {hi:.4g}]"
            for lo, hi in zip(shown["replicated_q05"], shown["replicated_q95"], strict=True)
        ]
        shown["flag"] = np.where(shown["outside_90"], "outside", "")
        columns = ["node", "family", "statistic", "observed", "replicated_mean", "90% interval",
                   "p_value", "flag"]
        if (shown["by"] != "").any():  # conditional statistics: show the overall ones and
            keep = (shown["by"] == "") | shown["outside_90"]  # the flagged groups
            shown = shown[keep]
            columns[3:3] = ["by", "group"]
        return shown[columns]

    def _conditional_line(self) -> str:
        conditional = self.conditional()
        if conditional.empty:
            return ""
        return (
            f"\n{int(conditional['outside_90'].sum())} of {len(conditional)} statistics within "
            "groups (per protected group, per bin of a continuous parent) outside; "
            "shown: the overall statistics and the flagged groups"
        )

    def __str__(self) -> str:
        """A compact table: one line per node and statistic, misfits flagged.

        With conditional statistics, the overall ones and the flagged groups are shown
        (``check.table`` has them all).
        """
        how = (
            "every node given its observed parents and the rows' latent draws"
            if self.replication == "conditional"
            else "every node from replicated parents and latents drawn from their priors"
        )
        header = (
            f"Posterior predictive check ({self.n_draws} {self.replication} replications: "
            f"{how}); {len(self.flagged())} of "
            f"{len(self.table)} statistics outside the replications' 90% interval"
            + self._conditional_line()
        )
        body = self._display_table().to_string(
            index=False, float_format=lambda x: f"{x:.4g}"
        )
        return f"{header}\n{body}"

    def _repr_html_(self) -> str:
        """The compact table as HTML (notebooks)."""
        caption = (
            f"<p>Posterior predictive check: {self.n_draws} {self.replication} replications; "
            f"{len(self.flagged())} of {len(self.table)} statistics outside the 90% interval"
            f"{self._conditional_line().replace(chr(10), '; ')}</p>"
        )
        html = self._display_table().to_html(
            index=False, float_format=lambda x: f"{x:.4g}", border=0
        )
        return caption + html

    def to_csv(self, path: str | Path) -> Path:
        """Write :attr:`table` to a CSV file; return its path."""
        return atomic.write(path, lambda tmp: self.table.to_csv(tmp, index=False))

    # ------------------------------------------------------------------ figure
    def to_inference_data(self) -> az.InferenceData:
        """The replications as ``posterior_predictive`` (one chain) beside ``observed_data``.

        Integer-valued nodes keep an integer dtype, so that ``az.plot_ppc`` draws
        them as step histograms rather than densities.
        """
        predictive = {}
        observed = {}
        for node, reps in self.replicated.items():
            dtype = np.int64 if self.discrete.get(node, False) else float
            predictive[node] = np.asarray(np.rint(reps) if dtype is np.int64 else reps,
                                          dtype=dtype)[None, ...]
            obs = self.observed[node]
            observed[node] = np.asarray(np.rint(obs) if dtype is np.int64 else obs, dtype=dtype)
        dims = {node: ["row"] for node in self.replicated}
        return az.from_dict(
            posterior_predictive=predictive, observed_data=observed, dims=dims
        )

    def plot(
        self,
        nodes: Sequence[str] | None = None,
        *,
        num_pp_samples: int | None = None,
        ncols: int = 3,
        seed: int | None = None,
    ) -> Figure:
        """Observed against replicated distributions, one panel per node (``az.plot_ppc``).

        A Normal node is drawn as kernel densities (``kind="kde"``); integer
        nodes (counts, 0/1, level codes) as step histograms, which ``az.plot_ppc``
        uses for integer data. The title of each panel names the node, its family
        and the observed against replicated variance (or the first statistic).

        Parameters
        ----------
        nodes : sequence of str, optional
            Nodes to draw (default: every checked node).
        num_pp_samples : int, optional
            Replications drawn per panel (default: up to 50).
        ncols : int
            Panels per row.
        seed : int, optional
            Seed of the choice of replications drawn (default: the check's seed).

        Returns
        -------
        matplotlib.figure.Figure
            One axis per node (no pyplot state is touched).

        Raises
        ------
        KeyError
            If a node was not checked.
        """
        chosen = tuple(self.nodes if nodes is None else nodes)
        for node in chosen:
            if node not in self.replicated:
                raise KeyError(f"node {node!r} was not checked; checked nodes: {list(self.nodes)}")
        idata = self.to_inference_data()
        count = num_pp_samples or min(MAX_PLOTTED_REPLICATIONS, self.n_draws)
        ncols = max(1, min(ncols, len(chosen)))
        nrows = math.ceil(len(chosen) / ncols)
        figure = Figure(figsize=(4.2 * ncols, 3.2 * nrows), layout="constrained")
        FigureCanvasAgg(figure)
        axes = figure.subplots(nrows, ncols, squeeze=False).ravel()
        for ax in axes[len(chosen):]:
            ax.remove()
        for node, ax in zip(chosen, axes, strict=False):
            az.plot_ppc(
                idata,
                var_names=[node],
                kind="kde",
                num_pp_samples=count,
                random_seed=self.seed if seed is None else seed,
                ax=ax,
                legend=False,
            )
            if self.discrete.get(node, False):  # the replications' far tail squeezes the bars
                reps, obs = self.replicated[node], self.observed[node]
                top = max(float(obs.max()), float(np.quantile(reps, 0.999)))
                ax.set_xlim(min(float(obs.min()), float(reps.min())) - 0.5, top + 0.5)
            ax.set_title(self._panel_title(node), fontsize=9)
            ax.set_xlabel(node)
        handles, labels = axes[0].get_legend_handles_labels()
        if handles:
            figure.legend(handles, labels, loc="outside lower center", ncols=len(handles),
                          fontsize=8, frameon=False)
        return figure

    def _panel_title(self, node: str) -> str:
        rows = self.table[(self.table["node"] == node) & (self.table["by"] == "")]
        pick = rows[rows["statistic"] == "variance"]
        row = (pick if not pick.empty else rows).iloc[0]
        flag = " (outside 90%)" if row["outside_90"] else ""
        return (
            f"{node} ({self.families[node]}): {row['statistic']} {row['observed']:.3g} vs "
            f"[{row['replicated_q05']:.3g}, {row['replicated_q95']:.3g}]{flag}"
        )
