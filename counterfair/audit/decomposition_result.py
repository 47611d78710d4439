"""The result of a causal decomposition (:func:`counterfair.audit.decompose`).

:class:`Decomposition` holds every term's posterior draws and their summary table; the
terms and forms are those of Plečko and Bareinboim's Causal Fairness Analysis
(:mod:`counterfair.audit.decomposition` computes them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from counterfair.errors import BAD_ALLOW

from .bootstrap import percentile_interval

__all__ = [
    "DECOMPOSITION_FORMS",
    "DECOMPOSITION_TERMS",
    "EFFECTS",
    "TABLE_COLUMNS",
    "UNFAIR_COLUMNS",
    "Decomposition",
    "allowed_effects",
]

DECOMPOSITION_TERMS: tuple[str, ...] = (
    "TV",
    "Ctf-DE",
    "Ctf-IE",
    "Ctf-SE",
    "NDE",
    "NIE",
    "Exp-SE_x0",
    "Exp-SE_x1",
)
"""Every term, the columns of :attr:`Decomposition.draws`."""

DECOMPOSITION_FORMS: dict[str, tuple[str, ...]] = {
    "x-specific": ("TV", "Ctf-DE", "Ctf-IE", "Ctf-SE"),
    "general": ("TV", "NDE", "NIE", "Exp-SE_x1", "Exp-SE_x0"),
}
"""The terms of each form, in the rows of :attr:`Decomposition.table`."""

TABLE_COLUMNS: tuple[str, ...] = ("term", "form", "mean", "sd", "lower", "upper")
"""Columns of :attr:`Decomposition.table`."""

EFFECTS: dict[str, tuple[str, int]] = {
    "DE": ("Ctf-DE", 1),
    "IE": ("Ctf-IE", -1),
    "SE": ("Ctf-SE", -1),
}
"""Each effect a user may allow (business necessity): its x-specific term and the sign
with which it enters TV (``TV = Ctf-DE - Ctf-IE - Ctf-SE``)."""

UNFAIR_COLUMNS: tuple[str, ...] = (
    "effect", "term", "contribution", "lower", "upper", "excludes_zero"
)
"""Columns of :meth:`Decomposition.unfair`."""


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)
class Decomposition:
    """The causal decomposition of a gap between two groups, with posterior intervals.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per term and form (columns :data:`TABLE_COLUMNS`): ``term``, ``form``
        (``"x-specific"`` or ``"general"``; TV appears in both), the posterior ``mean``
        and ``sd`` over the samples, and the equal-tailed interval ``lower``, ``upper``
        of mass :attr:`interval`.
    draws : pandas.DataFrame
        One row per joint sample of parameters and latents, one column per term
        (:data:`DECOMPOSITION_TERMS`); each entry is the term's average over the rows
        in that sample.
    attribute, x0, x1 : str
        The protected attribute and the two levels compared (TV is ``E[y | x1] -
        E[y | x0]``).
    target : str
        What is decomposed: the outcome node, or ``"predictor <name>"``.
    confounders, mediators : tuple of str
        ``Z`` and ``W``, as chosen or given.
    notes : tuple of str
        What a reader should know: a term that is 0 and why, a mediator that is no
        descendant of the attribute, rows of other levels, ...
    interval : float
        Mass of the intervals.
    n_rows, n_x0, n_x1 : int
        Rows, and rows with ``X = x0`` and with ``X = x1``.
    allowed : tuple of str, optional
        The effects declared a business necessity (:meth:`allow`), or ``None`` when
        none was declared.
    """

    table: pd.DataFrame
    draws: pd.DataFrame
    attribute: str
    x0: str
    x1: str
    target: str
    confounders: tuple[str, ...]
    mediators: tuple[str, ...]
    notes: tuple[str, ...]
    interval: float
    n_rows: int
    n_x0: int
    n_x1: int
    allowed: tuple[str, ...] | None = None

    def allow(self, effects: str | Sequence[str]) -> Decomposition:
        """This decomposition with ``effects`` (any of ``"DE"``, ``"IE"``, ``"SE"``)
        declared a business necessity (``("IE",)``: what runs through the mediators).

        The terms are unchanged; the others are the unfair part of the gap, which
        :meth:`unfair` reports (each disallowed effect's contribution to TV and their
        sum, with intervals) and the summary states. ``allow(())`` allows none.
        """
        return dataclasses.replace(self, allowed=allowed_effects(effects))

    def mean(self, term: str) -> float:
        """The posterior mean of one term (a name of :data:`DECOMPOSITION_TERMS`)."""
        return float(self.draws[_known_term(term)].mean())

    def identity_residuals(self) -> pd.DataFrame:
        """Per sample, TV minus the sum each form gives (0 up to rounding).

        Columns ``x-specific`` (``TV - (Ctf-DE - Ctf-IE - Ctf-SE)``) and ``general``
        (``TV - (NDE - NIE + Exp-SE_x1 - Exp-SE_x0)``).
        """
        d = self.draws
        return pd.DataFrame(
            {
                "x-specific": d["TV"] - (d["Ctf-DE"] - d["Ctf-IE"] - d["Ctf-SE"]),
                "general": d["TV"]
                - (d["NDE"] - d["NIE"] + d["Exp-SE_x1"] - d["Exp-SE_x0"]),
            },
            index=d.index,
        )

    def unfair(self) -> pd.DataFrame:
        """What remains unfair when the effects in :attr:`allowed` are a business necessity.

        One row per disallowed effect (``DE``, ``IE``, ``SE``): its x-specific ``term``,
        its ``contribution`` to TV (``Ctf-DE``, ``-Ctf-IE`` or ``-Ctf-SE``; posterior
        mean) with its equal-tailed interval, and whether the interval excludes 0; then
        a row ``"unfair"`` with their sum per sample -- the part of the gap that no
        declared necessity explains. Without :meth:`allow` every effect is disallowed.
        """
        allowed = self.allowed or ()
        parts = {e: (term, sign) for e, (term, sign) in EFFECTS.items() if e not in allowed}
        columns = {
            effect: sign * self.draws[term].to_numpy(dtype=float)
            for effect, (term, sign) in parts.items()
        }
        total = np.zeros(len(self.draws))
        for values in columns.values():
            total = total + values
        columns["unfair"] = total
        names = list(columns)
        matrix = np.column_stack([columns[name] for name in names])
        lower, upper = percentile_interval(matrix, self.interval)
        records = []
        for i, name in enumerate(names):
            term = parts[name][0] if name in parts else " + ".join(
                f"{'-' if sign < 0 else ''}{term}" for term, sign in parts.values()
            ) or "(none)"
            records.append(
                {
                    "effect": name,
                    "term": term,
                    "contribution": float(matrix[:, i].mean()),
                    "lower": float(lower[i]),
                    "upper": float(upper[i]),
                    "excludes_zero": bool(lower[i] > 0 or upper[i] < 0),
                }
            )
        return pd.DataFrame.from_records(records, columns=list(UNFAIR_COLUMNS))

    def summary(self) -> str:
        """The decomposition in a few lines: the set-up, each form's terms with their
        intervals, the gap's parts in plain words, and the notes."""
        percent = f"{self.interval:.0%}"
        lines = [
            f"Decomposition of the gap in {self.target} between {self.attribute} = "
            f"{self.x1!r} (x1) and {self.attribute} = {self.x0!r} (x0)",
            f"rows: {self.n_rows} ({self.n_x0} with x0, {self.n_x1} with x1); "
            f"{len(self.draws)} posterior samples; {percent} equal-tailed intervals",
            f"confounders Z: {_names(self.confounders)}; mediators W: {_names(self.mediators)}",
            "",
        ]
        identities = {
            "x-specific": "TV = Ctf-DE - Ctf-IE - Ctf-SE",
            "general": "TV = NDE - NIE + Exp-SE_x1 - Exp-SE_x0",
        }
        for form, terms in DECOMPOSITION_FORMS.items():
            lines.append(f"{form}: {identities[form]}")
            block = self.table[self.table["form"] == form].set_index("term")
            for term in terms:
                row = block.loc[term]
                lines.append(
                    f"  {term:<10} {row['mean']:>9.4f}  [{row['lower']:.4f}, {row['upper']:.4f}]"
                )
        lines += [
            "",
            f"in plain words: of the gap TV = {self.mean('TV'):.4f}, "
            f"{self.mean('Ctf-DE'):+.4f} is direct (Ctf-DE), "
            f"{-self.mean('Ctf-IE'):+.4f} runs through the mediators (-Ctf-IE) and "
            f"{-self.mean('Ctf-SE'):+.4f} is spurious, through the confounders (-Ctf-SE)",
        ]
        if self.allowed is not None:
            unfair = self.unfair().set_index("effect")
            allowed = ", ".join(self.allowed) if self.allowed else "(none)"
            total = unfair.loc["unfair"]
            lines += [
                f"business necessity: allowed {allowed}; what remains unfair: "
                f"{total['contribution']:+.4f} [{total['lower']:.4f}, {total['upper']:.4f}]"
                + "".join(
                    f"; {effect} {row['contribution']:+.4f}"
                    for effect, row in unfair.iterrows()
                    if effect != "unfair"
                )
            ]
        if self.notes:
            lines += ["", "notes:", *(f"  - {note}" for note in self.notes)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return (
            f"<Decomposition of {self.target} by {self.attribute} ({self.x0!r} -> "
            f"{self.x1!r}): TV {self.mean('TV'):.4f} = Ctf-DE {self.mean('Ctf-DE'):.4f} "
            f"- Ctf-IE {self.mean('Ctf-IE'):.4f} - Ctf-SE {self.mean('Ctf-SE'):.4f}; "
            f"{self.n_rows} rows, {len(self.draws)} samples>"
        )


def allowed_effects(effects: str | Sequence[str]) -> tuple[str, ...]:
    """The effects of :meth:`Decomposition.allow`, checked, in the order of :data:`EFFECTS`."""
    given = [effects] if isinstance(effects, str) else [str(e) for e in effects]
    for effect in given:
        if effect not in EFFECTS:
            raise ValueError(BAD_ALLOW.format(effect=effect, effects=list(EFFECTS)))
    return tuple(effect for effect in EFFECTS if effect in given)


def _names(nodes: tuple[str, ...]) -> str:
    return ", ".join(nodes) if nodes else "(none)"


def _known_term(term: str) -> str:
    if term not in DECOMPOSITION_TERMS:
        raise KeyError(f"unknown term {term!r}; terms: {list(DECOMPOSITION_TERMS)}")
    return term


def table_of(draws: pd.DataFrame, interval: float) -> pd.DataFrame:
    """One row per form and term: posterior mean, sd and equal-tailed interval."""
    lower, upper = percentile_interval(draws.to_numpy(dtype=float), interval)
    at = {term: i for i, term in enumerate(draws.columns)}
    records = []
    for form, terms in DECOMPOSITION_FORMS.items():
        for term in terms:
            column = draws[term].to_numpy(dtype=float)
            records.append(
                {
                    "term": term,
                    "form": form,
                    "mean": float(column.mean()),
                    "sd": float(column.std(ddof=1)) if column.size > 1 else 0.0,
                    "lower": float(lower[at[term]]),
                    "upper": float(upper[at[term]]),
                }
            )
    return pd.DataFrame.from_records(records, columns=list(TABLE_COLUMNS))
