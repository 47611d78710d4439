"""The result of testing a graph's implications (:func:`counterfair.audit.falsify`)."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import pandas as pd

from counterfair.model.implications import Implications

__all__ = ["TABLE_COLUMNS", "VERDICTS", "Falsification"]

TABLE_COLUMNS: tuple[str, ...] = (
    "kind", "statement", "statistic", "df", "p_value", "p_holm", "rejected", "ppc_p",
)
"""Columns of :attr:`Falsification.table`."""

VERDICTS: tuple[str, ...] = ("falsified", "not falsified", "not falsifiable")
"""The verdicts (:attr:`Falsification.verdict`)."""


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)
class Falsification:
    """A graph's testable implications, their tests and the verdict.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per implication (columns :data:`TABLE_COLUMNS`): its ``kind``
        (``"independence"`` or ``"tetrad"``), the ``statement``, the test's
        ``statistic`` (chi-square, or z for a tetrad) and ``df``, its ``p_value``, the
        Holm-adjusted ``p_holm``, whether it is ``rejected`` at :attr:`alpha`, and, when a
        fit was given, its posterior predictive p-value ``ppc_p`` under the fit (NaN
        otherwise).
    implications : Implications
        What the graph implies, and what it leaves untestable.
    alpha : float
        The family-wise error rate of the verdict.
    n_rows : int
    violated_share : float
        The share of the permutation baseline's statements whose own p-value is at most
        ``alpha`` (unadjusted): DoWhy's parental triples for a graph without latents, the
        graph's implications otherwise.
    permutation_shares : tuple of float
        The same share for each randomly relabelled graph.
    permutation_p : float
        The share of relabelled graphs violating no more than the given one (NaN without
        permutations).
    same_implications : float
        The share of relabelled graphs whose every statement holds in the given graph.
    """

    table: pd.DataFrame
    implications: Implications
    alpha: float
    n_rows: int
    violated_share: float
    permutation_shares: tuple[float, ...]
    permutation_p: float
    same_implications: float

    @property
    def verdict(self) -> str:
        """``"falsified"`` (an implication rejected at family-wise level ``alpha``),
        ``"not falsified"`` or ``"not falsifiable"`` (nothing testable)."""
        if len(self.table) == 0:
            return "not falsifiable"
        return "falsified" if bool(self.table["rejected"].any()) else "not falsified"

    @property
    def dowhy_verdict(self) -> str | None:
        """DoWhy's ``falsify_graph`` rule on the permutation baseline: not falsifiable if
        ``same_implications > alpha``, else falsified if ``permutation_p > alpha``, else
        not falsified; ``None`` without permutations."""
        if len(self.table) == 0:
            return "not falsifiable"
        if math.isnan(self.permutation_p):
            return None
        if self.same_implications > self.alpha:
            return "not falsifiable"
        return "falsified" if self.permutation_p > self.alpha else "not falsified"

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the verdict is what it is, in words."""
        out = []
        if len(self.table) == 0:
            out.append("the graph implies nothing these tests can reject")
        else:
            rejected = self.table[self.table["rejected"]]
            out.append(
                f"{len(rejected)} of {len(self.table)} implications rejected at family-wise "
                f"level {self.alpha:g} (Holm)"
                + (": " + "; ".join(rejected["statement"].head(5)) if len(rejected) else "")
            )
        if self.permutation_shares:
            out.append(
                f"{self.violated_share:.0%} of its baseline statements violated at "
                f"{self.alpha:g} (unadjusted); {self.permutation_p:.0%} of "
                f"{len(self.permutation_shares)} randomly relabelled graphs violate no "
                "larger a share, and "
                f"{self.same_implications:.0%} imply nothing the given graph contradicts"
            )
        return (*out, *self.implications.untestable)

    def summary(self) -> str:
        lines = [f"verdict: {self.verdict} ({self.n_rows:,} rows)"]
        lines += [f"  - {r}" for r in self.reasons]
        if len(self.table):
            shown = self.table.assign(p_value=self.table["p_value"].map("{:.3g}".format),
                                      p_holm=self.table["p_holm"].map("{:.3g}".format))
            if shown["ppc_p"].isna().all():
                shown = shown.drop(columns="ppc_p")
            lines += ["", shown.drop(columns="statistic").to_string(index=False)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return f"Falsification(verdict={self.verdict!r}, implications={len(self.table)})"

    def section(self) -> tuple[str, str]:
        """A section of the audit report: ``write_report(..., extra_sections=
        [result.section()])`` puts the verdict, its reasons and the table in the page."""
        return ("Does the data contradict the graph?", self._repr_html_())

    def _repr_html_(self) -> str:
        reasons = "".join(f"<li>{html.escape(r)}</li>" for r in self.reasons)
        table = self.table.to_html(index=False, float_format=lambda v: f"{v:.3g}") \
            if len(self.table) else ""
        return (f"<div><p><strong>verdict: {html.escape(self.verdict)}</strong> "
                f"({self.n_rows:,} rows)</p><ul>{reasons}</ul>{table}</div>")
