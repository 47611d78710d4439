"""Statistical dependence between a protected attribute S and an outcome O.

Measures (``s+`` is the protected group, ``s-`` every other individual, ``o`` one
outcome value):

* selection lift ``P(o | s+) / P(o | s-)`` and its difference form
  ``P(o | s+) - P(o | s-)``;
* total variation distance ``1/2 * sum_o |P(o | s+) - P(o | s-)|``;
* mutual information ``I(S; O)`` in **nats** (natural logarithm), its normalised form
  ``I(S; O) / min(H(S), H(O))`` (NaN when either entropy is 0) and the conditional MI
  ``I(S; O | Z) = sum_z P(z) I(S; O | Z = z)`` given a stratifying variable Z;
* the G-test of independence: ``G = 2 N I(S; O)`` (``2 N I(S; O | Z)`` when
  stratified), chi-squared with ``(|S| - 1)(|O| - 1)`` degrees of freedom (summed over
  strata, counting the levels seen in each stratum).

Verdicts use bootstrap intervals: a measure is *discriminatory at level beta* when its
whole interval lies at or above ``beta``, *protective at level beta* when the whole
interval lies below ``beta``, and *inconclusive* otherwise.  Larger values mean stronger
dependence; for lift and difference, pick ``o`` as the outcome whose excess in ``s+`` is
the harm of interest (e.g. the unfavourable decision).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from ._groups import encode
from ._tables import divide
from ._validation import (
    BAD_CHOICE,
    GROUP_NOT_FOUND,
    NO_OTHER_GROUP,
    VALUE_NOT_FOUND,
    as_1d,
    check_count,
    check_finite,
    check_lengths,
    check_open_unit,
    find_label,
    shown,
)
from .bootstrap import Seed, bootstrap, percentile_interval

Verdict = Literal["discriminatory", "protective", "inconclusive"]

# ----------------------------------------------------------------------------- tables


def _encode_pair(
    protected: ArrayLike, outcome: ArrayLike, given: ArrayLike | None = None
) -> tuple[tuple[NDArray[np.intp], list[Hashable]], tuple[NDArray[np.intp], list[Hashable]],
           tuple[NDArray[np.intp], list[Hashable]] | None]:
    s = as_1d(protected, "protected")
    o = as_1d(outcome, "outcome")
    named = [("protected", s.size), ("outcome", o.size)]
    z = None
    if given is not None:
        z = as_1d(given, "given")
        named.append(("given", z.size))
    check_lengths(named)
    return (encode(s, "protected"), encode(o, "outcome"),
            None if z is None else encode(z, "given"))


def _table(s: NDArray[np.intp], o: NDArray[np.intp], n_s: int, n_o: int) -> NDArray[np.float64]:
    flat = np.bincount(s * n_o + o, minlength=n_s * n_o)
    return flat.reshape(n_s, n_o).astype(np.float64)


def contingency_table(protected: ArrayLike, outcome: ArrayLike) -> pd.DataFrame:
    """Counts of ``protected`` (rows) by ``outcome`` (columns)."""
    (s, s_labels), (o, o_labels), _ = _encode_pair(protected, outcome)
    table = _table(s, o, len(s_labels), len(o_labels)).astype(np.int64)
    return pd.DataFrame(table, index=pd.Index(s_labels, name="protected"),
                        columns=pd.Index(o_labels, name="outcome"))


def _entropy(counts: NDArray[np.float64]) -> float:
    total = counts.sum()
    p = counts[counts > 0] / total
    return float(-(p * np.log(p)).sum())


def _mi(table: NDArray[np.float64]) -> float:
    """Plug-in mutual information (nats) of a contingency table of counts."""
    total = table.sum()
    if total == 0:
        return 0.0
    row = table.sum(axis=1, keepdims=True)
    col = table.sum(axis=0, keepdims=True)
    mask = table > 0
    expected = (row @ col)[mask] / total
    observed = table[mask]
    return float(max((observed * np.log(observed / expected)).sum() / total, 0.0))


def _cmi_and_dof(
    s: NDArray[np.intp], o: NDArray[np.intp], z: NDArray[np.intp], n_s: int, n_o: int, n_z: int
) -> tuple[float, int]:
    flat = np.bincount((z * n_s + s) * n_o + o, minlength=n_z * n_s * n_o)
    tables = flat.reshape(n_z, n_s, n_o).astype(np.float64)
    total = tables.sum()
    cmi = 0.0
    dof = 0
    for table in tables:
        weight = table.sum()
        if weight == 0:
            continue
        cmi += float(weight / total) * _mi(table)
        levels_s = int((table.sum(axis=1) > 0).sum())
        levels_o = int((table.sum(axis=0) > 0).sum())
        dof += (levels_s - 1) * (levels_o - 1)
    return cmi, dof


# ------------------------------------------------------------------------ information


def mutual_information(protected: ArrayLike, outcome: ArrayLike) -> float:
    """Mutual information ``I(S; O)`` in nats (natural logarithm), plug-in estimate."""
    (s, s_labels), (o, o_labels), _ = _encode_pair(protected, outcome)
    return _mi(_table(s, o, len(s_labels), len(o_labels)))


def _nmi(table: NDArray[np.float64]) -> float:
    scale = min(_entropy(table.sum(axis=1)), _entropy(table.sum(axis=0)))
    return _mi(table) / scale if scale > 0 else float("nan")


def normalized_mutual_information(protected: ArrayLike, outcome: ArrayLike) -> float:
    """``I(S; O) / min(H(S), H(O))`` in [0, 1]; NaN when S or O is constant."""
    (s, s_labels), (o, o_labels), _ = _encode_pair(protected, outcome)
    return _nmi(_table(s, o, len(s_labels), len(o_labels)))


def conditional_mutual_information(
    protected: ArrayLike, outcome: ArrayLike, given: ArrayLike
) -> float:
    """``I(S; O | Z) = sum_z P(z) I(S; O | Z = z)`` in nats."""
    (s, s_labels), (o, o_labels), z_enc = _encode_pair(protected, outcome, given)
    assert z_enc is not None
    z, z_labels = z_enc
    return _cmi_and_dof(s, o, z, len(s_labels), len(o_labels), len(z_labels))[0]


def _conditional_entropies(
    s: NDArray[np.intp], o: NDArray[np.intp], z: NDArray[np.intp], n_s: int, n_o: int, n_z: int
) -> tuple[float, float]:
    """``H(S | Z)`` and ``H(O | Z)`` in nats."""
    h_s = h_o = 0.0
    total = s.size
    for level in range(n_z):
        rows = z == level
        weight = int(rows.sum())
        if weight == 0:
            continue
        h_s += weight / total * _entropy(np.bincount(s[rows], minlength=n_s).astype(float))
        h_o += weight / total * _entropy(np.bincount(o[rows], minlength=n_o).astype(float))
    return h_s, h_o


def normalized_conditional_mutual_information(
    protected: ArrayLike, outcome: ArrayLike, given: ArrayLike
) -> float:
    """``I(S; O | Z) / min(H(S | Z), H(O | Z))`` in [0, 1].

    NaN when S or O is constant within every stratum of Z (a conditional entropy is 0).
    """
    (s, s_labels), (o, o_labels), z_enc = _encode_pair(protected, outcome, given)
    assert z_enc is not None
    z, z_labels = z_enc
    cmi = _cmi_and_dof(s, o, z, len(s_labels), len(o_labels), len(z_labels))[0]
    scale = min(_conditional_entropies(s, o, z, len(s_labels), len(o_labels), len(z_labels)))
    return cmi / scale if scale > 0 else float("nan")


def kl_divergence(
    protected: ArrayLike, outcome: ArrayLike, *, protected_group: Hashable
) -> pd.Series:
    """Per-outcome terms of ``KL(P(O | s+) || P(O | s-))`` in nats, and their sum.

    The term of outcome ``o`` is ``P(o | s+) * log(P(o | s+) / P(o | s-))`` (0 when
    ``P(o | s+) = 0``; ``inf`` when ``P(o | s+) > 0 = P(o | s-)``).  A term can be
    negative; their sum, the divergence, is not.

    Returns
    -------
    pandas.Series
        Indexed by the outcome values, then ``"total"``.
    """
    (s, s_labels), (o, o_labels), _ = _encode_pair(protected, outcome)
    a, _ = _positions(s_labels, o_labels, s, protected_group, None)
    p_plus, p_minus = _conditionals(_table(s, o, len(s_labels), len(o_labels)), a)
    terms = np.zeros(len(o_labels))
    seen = p_plus > 0
    with np.errstate(divide="ignore"):
        terms[seen] = p_plus[seen] * (np.log(p_plus[seen]) - np.log(p_minus[seen]))
    index = pd.Index([*o_labels, "total"], name="outcome", dtype=object)
    return pd.Series([*terms, float(terms.sum())], index=index, name="kl_divergence")


@dataclass(frozen=True)
class GTest:
    """G-test of independence: statistic ``G``, degrees of freedom and p-value."""

    statistic: float
    dof: int
    p_value: float


def _g_test(info: float, n: int, dof: int) -> GTest:
    g = float(2.0 * n * info)
    p = float(stats.chi2.sf(g, dof)) if dof > 0 else 1.0
    return GTest(statistic=g, dof=dof, p_value=p)


def g_test(protected: ArrayLike, outcome: ArrayLike, *, given: ArrayLike | None = None) -> GTest:
    """G-test of independence of S and O (conditional on ``given`` when provided).

    ``G = 2 N I(S; O)`` with ``I`` in nats; the p-value is the chi-squared upper tail
    (``scipy.stats.chi2.sf``) with ``(|S| - 1)(|O| - 1)`` degrees of freedom, summed over
    the strata of ``given``.  With 0 degrees of freedom the p-value is 1.
    """
    (s, s_labels), (o, o_labels), z_enc = _encode_pair(protected, outcome, given)
    if z_enc is None:
        table = _table(s, o, len(s_labels), len(o_labels))
        dof = (len(s_labels) - 1) * (len(o_labels) - 1)
        return _g_test(_mi(table), s.size, dof)
    z, z_labels = z_enc
    cmi, dof = _cmi_and_dof(s, o, z, len(s_labels), len(o_labels), len(z_labels))
    return _g_test(cmi, s.size, dof)


# --------------------------------------------------------------------- group contrasts


def _positions(
    s_labels: list[Hashable], o_labels: list[Hashable], s: NDArray[np.intp],
    protected_group: Hashable, outcome_value: Hashable | None,
) -> tuple[int, int | None]:
    a = find_label(s_labels, protected_group)
    if a is None:
        raise ValueError(GROUP_NOT_FOUND.format(name="protected_group", group=protected_group,
                                                where="protected", available=shown(s_labels)))
    if bool(np.all(s == a)):
        raise ValueError(NO_OTHER_GROUP.format(name="protected_group", group=protected_group))
    if outcome_value is None:
        return a, None
    v = find_label(o_labels, outcome_value)
    if v is None:
        raise ValueError(VALUE_NOT_FOUND.format(name="outcome_value", value=outcome_value,
                                                where="outcome", available=shown(o_labels)))
    return a, v


def _conditionals(table: NDArray[np.float64], a: int) -> tuple[NDArray[np.float64],
                                                               NDArray[np.float64]]:
    """``P(O | s+)`` and ``P(O | s-)`` from a contingency table."""
    plus = table[a]
    minus = table.sum(axis=0) - plus
    return divide(plus, plus.sum()), divide(minus, minus.sum())


def _contrasts(table: NDArray[np.float64], a: int, v: int) -> tuple[float, float, float]:
    p_plus, p_minus = _conditionals(table, a)
    lift = float(divide(p_plus[v], p_minus[v]))
    return lift, float(p_plus[v] - p_minus[v]), float(0.5 * np.abs(p_plus - p_minus).sum())


def _selection_contrasts(
    protected: ArrayLike, outcome: ArrayLike, protected_group: Hashable, outcome_value: Hashable
) -> tuple[float, float, float]:
    (s, s_labels), (o, o_labels), _ = _encode_pair(protected, outcome)
    a, v = _positions(s_labels, o_labels, s, protected_group, outcome_value)
    assert v is not None
    return _contrasts(_table(s, o, len(s_labels), len(o_labels)), a, v)


def selection_lift(
    protected: ArrayLike, outcome: ArrayLike, *, protected_group: Hashable,
    outcome_value: Hashable = 1,
) -> float:
    """``P(o | s+) / P(o | s-)`` with ``s+ = protected_group`` (NaN if ``P(o | s-) = 0``)."""
    return _selection_contrasts(protected, outcome, protected_group, outcome_value)[0]


def selection_difference(
    protected: ArrayLike, outcome: ArrayLike, *, protected_group: Hashable,
    outcome_value: Hashable = 1,
) -> float:
    """``P(o | s+) - P(o | s-)``, the difference form of the selection lift."""
    return _selection_contrasts(protected, outcome, protected_group, outcome_value)[1]


def total_variation_distance(
    protected: ArrayLike, outcome: ArrayLike, *, protected_group: Hashable
) -> float:
    """``1/2 * sum_o |P(o | s+) - P(o | s-)|`` over all outcome values."""
    (s, s_labels), (o, o_labels), _ = _encode_pair(protected, outcome)
    a, _ = _positions(s_labels, o_labels, s, protected_group, None)
    p_plus, p_minus = _conditionals(_table(s, o, len(s_labels), len(o_labels)), a)
    return float(0.5 * np.abs(p_plus - p_minus).sum())


# ----------------------------------------------------------------------------- report

DEPENDENCE_MEASURES: tuple[str, ...] = ("lift", "difference", "tvd", "mi", "nmi", "cmi")
"""Rows of :attr:`DependenceReport.table` (``cmi`` only when a stratifier is given)."""


@dataclass(frozen=True, kw_only=True)
class DependenceReport:
    """Result of :func:`dependence_measures`.

    Attributes
    ----------
    table
        Rows ``lift, difference, tvd, mi, nmi`` (and ``cmi`` when stratified), columns
        ``estimate, lower, upper`` (bootstrap percentile interval; NaN without bootstrap).
        MI values are in nats.
    g_test
        G-test of independence (conditional on the stratifier when one is given).
    protected_group, outcome_value
        ``s+`` and ``o``.
    interval, n_bootstrap
        Interval level and number of resamples.
    """

    table: pd.DataFrame
    g_test: GTest
    protected_group: Hashable
    outcome_value: Hashable
    interval: float
    n_bootstrap: int

    def verdict(self, measure: str, beta: float) -> Verdict:
        """Verdict for one measure at level ``beta``.

        ``"discriminatory"`` when the interval lies at or above ``beta``,
        ``"protective"`` when it lies below ``beta``, else ``"inconclusive"`` (also
        without bootstrap intervals or when the measure is undefined).
        """
        if measure not in self.table.index:
            raise ValueError(BAD_CHOICE.format(name="measure", choices=list(self.table.index),
                                               value=measure))
        beta = check_finite(beta, "beta")
        lower = float(self.table.loc[measure, "lower"])
        upper = float(self.table.loc[measure, "upper"])
        if lower >= beta:
            return "discriminatory"
        if upper < beta:
            return "protective"
        return "inconclusive"

    def verdicts(self, betas: dict[str, float]) -> pd.Series:
        """Verdicts for several measures, ``{measure: beta}`` -> Series of strings."""
        return pd.Series({m: self.verdict(m, b) for m, b in betas.items()}, dtype=object,
                         name="verdict")


def dependence_measures(
    protected: ArrayLike,
    outcome: ArrayLike,
    *,
    protected_group: Hashable,
    outcome_value: Hashable = 1,
    given: ArrayLike | None = None,
    n_bootstrap: int = 200,
    interval: float = 0.95,
    seed: Seed = 0,
) -> DependenceReport:
    """All dependence measures with bootstrap intervals and the G-test.

    Parameters
    ----------
    protected
        Protected attribute S (any labels).
    outcome
        Outcome O (any labels; e.g. decisions or true labels).
    protected_group
        The group ``s+``; ``s-`` is everyone else.
    outcome_value
        The outcome ``o`` of the lift and difference.
    given
        Optional stratifier Z for the conditional MI and the stratified G-test.
    n_bootstrap
        Bootstrap resamples (0: no intervals).  Resampling is stratified by S (and Z),
        so group sizes are held fixed.
    interval
        Level of the intervals.
    seed
        Seed of the bootstrap.

    Returns
    -------
    DependenceReport
    """
    (s, s_labels), (o, o_labels), z_enc = _encode_pair(protected, outcome, given)
    a, v = _positions(s_labels, o_labels, s, protected_group, outcome_value)
    assert v is not None
    n_bootstrap = check_count(n_bootstrap, "n_bootstrap")
    interval = check_open_unit(interval, "interval")
    n_s, n_o = len(s_labels), len(o_labels)
    measures = list(DEPENDENCE_MEASURES if z_enc is not None else DEPENDENCE_MEASURES[:-1])

    def statistic(rows: NDArray[np.intp]) -> NDArray[np.float64]:
        table = _table(s[rows], o[rows], n_s, n_o)
        values = [*_contrasts(table, a, v), _mi(table), _nmi(table)]
        if z_enc is not None:
            z, z_labels = z_enc
            values.append(_cmi_and_dof(s[rows], o[rows], z[rows], n_s, n_o, len(z_labels))[0])
        return np.asarray(values, dtype=np.float64)

    all_rows = np.arange(s.size)
    estimate = statistic(all_rows)
    strata = s if z_enc is None else z_enc[0] * n_s + s
    samples = bootstrap(statistic, s.size, n_resamples=n_bootstrap, seed=seed, strata=strata)
    lower, upper = percentile_interval(samples, interval)
    table = pd.DataFrame({"estimate": estimate, "lower": lower, "upper": upper},
                         index=pd.Index(measures, name="measure"))
    if z_enc is None:
        test = _g_test(float(estimate[3]), s.size, (n_s - 1) * (n_o - 1))
    else:
        z, z_labels = z_enc
        cmi, dof = _cmi_and_dof(s, o, z, n_s, n_o, len(z_labels))
        test = _g_test(cmi, s.size, dof)
    return DependenceReport(table=table, g_test=test, protected_group=s_labels[a],
                            outcome_value=o_labels[v], interval=interval,
                            n_bootstrap=n_bootstrap)
