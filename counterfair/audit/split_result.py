"""The result of splitting a decomposition's effects by groups of covariates.

:class:`EffectSplit` holds the parts of the spurious effect by confounder and of the
indirect effect by mediator (:meth:`counterfair.audit.sfm_fit.SFMFit.split` computes them), each
part's posterior draws and their summary, and the decomposition they add up to.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .bootstrap import percentile_interval
from .decomposition_result import Decomposition

__all__ = ["SPLIT_COLUMNS", "EffectSplit"]

SPLIT_COLUMNS: tuple[str, ...] = (
    "effect", "part", "columns", "mean", "sd", "lower", "upper", "share",
)
"""Columns of :attr:`EffectSplit.table`."""


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)
class EffectSplit:
    """The x-specific spurious and indirect effects, each split into ordered parts.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per part (columns :data:`SPLIT_COLUMNS`): the ``effect`` it is a part of
        (``"Ctf-SE"`` or ``"Ctf-IE"``), the ``part``'s label and its ``columns`` (the
        covariates whose move it measures, joined by ``+``), the posterior ``mean`` and
        ``sd``, the equal-tailed interval ``lower``, ``upper`` of mass :attr:`interval`,
        and the part's ``share`` of its effect's posterior mean.
    draws : pandas.DataFrame
        One row per sample, one column per part, named ``"<effect>[<part>]"``; the parts
        of an effect add up to :attr:`decomposition`'s draws of it, draw by draw.
    decomposition : Decomposition
        The decomposition whose effects are split (the same draws).
    order : dict of str to tuple of tuple of str
        Each split effect's groups of covariates, in the order they are moved.
    notes : tuple of str
        How the parts were computed and what they assume.
    interval : float
        Mass of the intervals.
    """

    table: pd.DataFrame
    draws: pd.DataFrame
    decomposition: Decomposition
    order: dict[str, tuple[tuple[str, ...], ...]]
    notes: tuple[str, ...]
    interval: float

    def identity_residuals(self) -> pd.Series:
        """Per split effect, the largest ``|sum of its parts - the effect|`` over draws
        (0 up to rounding)."""
        out = {}
        for effect in self.order:
            parts = [c for c in self.draws.columns if c.startswith(f"{effect}[")]
            total = self.draws[parts].sum(axis=1)
            out[effect] = float(np.max(np.abs(total - self.decomposition.draws[effect])))
        return pd.Series(out, name="max_abs_residual")

    def summary(self) -> str:
        """The parts as a text table, under the decomposition's own summary."""
        lines = [self.decomposition.summary(), "", "Parts (in the order moved):"]
        width = max(len(p) for p in self.table["part"]) if len(self.table) else 4
        for effect, block in self.table.groupby("effect", sort=False):
            mean = self.decomposition.mean(str(effect))
            lines.append(f"  {effect} = {mean:,.4g}")
            for row in block.itertuples():
                lines.append(
                    f"    {row.part:<{width}}  {row.mean:>11,.4g}  [{row.lower:,.4g}, "
                    f"{row.upper:,.4g}]  ({row.share:.0%})"
                )
        if self.notes:
            lines += ["", "Notes:", *(f"  - {note}" for note in self.notes)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        parts = ", ".join(f"{e}: {len(g)} parts" for e, g in self.order.items())
        return f"EffectSplit({parts})"


def split_table(
    draws: pd.DataFrame,
    labels: list[tuple[str, str, str]],
    decomposition: Decomposition,
    interval: float,
) -> pd.DataFrame:
    """The summary of the parts' ``draws``; ``labels`` gives each column's effect, part
    label and covariates, in the columns' order."""
    rows = []
    for column, (effect, part, columns) in zip(draws.columns, labels, strict=True):
        values = draws[column].to_numpy()
        lower, upper = percentile_interval(values, interval)
        whole = decomposition.mean(effect)
        rows.append({
            "effect": effect, "part": part, "columns": columns,
            "mean": float(values.mean()), "sd": float(values.std(ddof=1)),
            "lower": float(lower), "upper": float(upper),
            "share": float(values.mean() / whole) if whole else float("nan"),
        })
    return pd.DataFrame(rows, columns=list(SPLIT_COLUMNS))
