"""FairTest-style search for subpopulations with an unwarranted association.

After Tramer et al., "FairTest: discovering unwarranted associations in data-driven
applications" (EuroS&P 2017).  The rows are split at random into a *search* half and a
*test* half:

1. On the search half a decision tree is grown over the user attributes.  At every node
   each candidate binary split (``column == value`` for categories and numbers with at
   most 12 values, ``column <= t`` at deciles for other numbers) is scored by the
   strongest association among its two children, measured by the lower confidence bound
   ``|P(o | s+) - P(o | s-)| - 1.96 SE`` so that small children cannot win by noise;
   the best split is kept if both children have at least ``min_size`` search rows.
   Growth stops at ``max_depth``.
2. On the test half every node of the tree (the root included) is tested: the G-test of
   independence of the protected attribute and the outcome (its conditional form given
   a stratifier when ``given`` is passed), p-values corrected for the number of nodes by
   Holm's method, and the difference with a stratified percentile bootstrap interval.

Because the tree is chosen on data that the tests never see, the corrected p-values keep
their meaning: on data without any association, no subpopulation is reported at level
``alpha`` except with probability at most ``alpha``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ._groups import encode
from ._validation import (
    GROUP_NOT_FOUND,
    VALUE_NOT_FOUND,
    as_1d,
    check_count,
    check_lengths,
    check_open_unit,
    find_label,
    shown,
)
from .bootstrap import Seed, bootstrap, percentile_interval
from .dependence import g_test

Condition = tuple[str, str, Hashable]
"""One split condition ``(column, operator, value)``; operators ``==, !=, <=, >``."""

_MAX_CATEGORIES = 12


@dataclass(frozen=True, kw_only=True)
class SubpopulationReport:
    """Result of :func:`find_subpopulations`.

    Attributes
    ----------
    table
        One row per tree node, sorted by strength of evidence: significant nodes first,
        then by the bound of the difference's interval nearest 0 (largest first).
        Columns: ``node``, ``parent``, ``depth``, ``description``, ``size`` (test rows),
        ``share`` (of all test rows), ``n_protected``, ``difference`` (``P(o | s+) - P(o |
        s-)`` on the test rows), ``lower``, ``upper``, ``g``, ``p_value``, ``p_adjusted``
        (Holm) and ``significant`` (``p_adjusted <= alpha``).
    conditions
        Node id -> the conditions that define it (the root has none).
    alpha
        Family-wise significance level.
    protected_group, outcome_value
        ``s+`` and ``o``.
    interval
        Level of the intervals.
    """

    table: pd.DataFrame
    conditions: dict[int, tuple[Condition, ...]]
    alpha: float
    protected_group: Hashable
    outcome_value: Hashable
    interval: float

    def top(self, k: int = 5) -> pd.DataFrame:
        """The ``k`` strongest *significant* subpopulations (the root excluded)."""
        found = self.table[self.table["significant"] & (self.table["depth"] > 0)]
        return found.head(k)

    def tree_text(self) -> str:
        """The tree as indented text, one node a line with its test-half statistics."""
        by_node = self.table.set_index("node")
        lines: list[str] = []

        def visit(node: int) -> None:
            row = by_node.loc[node]
            mark = " *" if row["significant"] else ""
            lines.append(
                f"{'    ' * int(row['depth'])}[{node}] {row['description']}: n = {row['size']}, "
                f"difference = {row['difference']:+.3f} [{row['lower']:+.3f}, "
                f"{row['upper']:+.3f}], p_adj = {row['p_adjusted']:.3g}{mark}")
            for child in by_node.index[by_node["parent"] == node]:
                visit(int(child))

        visit(0)
        return "\n".join(lines)

    def mask(self, data: pd.DataFrame, node: int) -> NDArray[np.bool_]:
        """Which rows of ``data`` belong to ``node``."""
        return subpopulation_mask(data, self.conditions[node])


def describe(conditions: Sequence[Condition]) -> str:
    """Human-readable conjunction of conditions (``"all"`` for none)."""
    if not conditions:
        return "all"
    return " and ".join(f"{c} {op} {v!r}" if isinstance(v, str) else f"{c} {op} {v:g}"
                        if isinstance(v, float) else f"{c} {op} {v!r}"
                        for c, op, v in conditions)


def subpopulation_mask(data: pd.DataFrame, conditions: Sequence[Condition]) -> NDArray[np.bool_]:
    """Rows of ``data`` satisfying every condition."""
    mask = np.ones(len(data), dtype=bool)
    for column, op, value in conditions:
        values = data[column]
        if op == "==":
            mask &= (values == value).to_numpy(dtype=bool)
        elif op == "!=":
            mask &= (values != value).to_numpy(dtype=bool)
        elif op == "<=":
            mask &= (values <= value).to_numpy(dtype=bool)
        else:
            mask &= (values > value).to_numpy(dtype=bool)
    return mask


def _difference(s_plus: NDArray[np.bool_], hit: NDArray[np.bool_]) -> float:
    n_plus = int(s_plus.sum())
    n_minus = s_plus.size - n_plus
    if n_plus == 0 or n_minus == 0:
        return float("nan")
    return float(hit[s_plus].mean() - hit[~s_plus].mean())


def _credible_difference(s_plus: NDArray[np.bool_], hit: NDArray[np.bool_]) -> float:
    """``|difference| - 1.96 * its standard error``: a split score that small noisy
    children cannot win by chance alone (NaN when a group is absent)."""
    n_plus = int(s_plus.sum())
    n_minus = s_plus.size - n_plus
    if n_plus == 0 or n_minus == 0:
        return float("nan")
    p_plus = float(hit[s_plus].mean())
    p_minus = float(hit[~s_plus].mean())
    se = np.sqrt(p_plus * (1 - p_plus) / n_plus + p_minus * (1 - p_minus) / n_minus)
    return abs(p_plus - p_minus) - 1.96 * float(se)


def _node_statistic(s_plus: NDArray[np.bool_],
                    hit: NDArray[np.bool_]) -> Callable[[NDArray[np.intp]], float]:
    def statistic(rows: NDArray[np.intp]) -> float:
        return _difference(s_plus[rows], hit[rows])
    return statistic


def _candidates(column: pd.Series) -> list[tuple[Condition, Condition]]:
    name = str(column.name)
    numeric = pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)
    uniques = pd.unique(column)
    if numeric and len(uniques) > _MAX_CATEGORIES:
        cuts = np.unique(np.quantile(column.to_numpy(dtype=np.float64),
                                     np.linspace(0.1, 0.9, 9)))
        return [((name, "<=", float(t)), (name, ">", float(t))) for t in cuts]
    values = sorted(uniques, key=str) if len(uniques) > 2 else sorted(uniques, key=str)[:1]
    return [((name, "==", _scalar(v)), (name, "!=", _scalar(v))) for v in values]


def _scalar(value: object) -> Hashable:
    out: Hashable = value.item() if isinstance(value, np.generic) else value
    return out


def _holm(p: NDArray[np.float64]) -> NDArray[np.float64]:
    order = np.argsort(p, kind="stable")
    m = p.size
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out


@dataclass(frozen=True)
class _Encoded:
    """The checked inputs: who is in ``s+``, who has outcome ``o``, the stratifier codes."""

    s_plus: NDArray[np.bool_]
    hit: NDArray[np.bool_]
    z: NDArray[np.intp] | None
    protected_group: Hashable
    outcome_value: Hashable


def _encode_inputs(
    data: pd.DataFrame,
    protected: ArrayLike,
    outcome: ArrayLike,
    given: ArrayLike | None,
    protected_group: Hashable,
    outcome_value: Hashable,
) -> _Encoded:
    """Check the lengths of the inputs and find ``s+`` and ``o`` among their values."""
    s = as_1d(protected, "protected")
    o = as_1d(outcome, "outcome")
    named = [("data", len(data)), ("protected", s.size), ("outcome", o.size)]
    z = None
    if given is not None:
        z = encode(as_1d(given, "given"), "given")[0]
        named.append(("given", z.size))
    check_lengths(named)
    s_codes, s_labels = encode(s, "protected")
    o_codes, o_labels = encode(o, "outcome")
    a = find_label(s_labels, protected_group)
    if a is None:
        raise ValueError(GROUP_NOT_FOUND.format(name="protected_group", group=protected_group,
                                                where="protected", available=shown(s_labels)))
    v = find_label(o_labels, outcome_value)
    if v is None:
        raise ValueError(VALUE_NOT_FOUND.format(name="outcome_value", value=outcome_value,
                                                where="outcome", available=shown(o_labels)))
    return _Encoded(s_plus=s_codes == a, hit=o_codes == v, z=z,
                    protected_group=s_labels[a], outcome_value=o_labels[v])


def _test_half(n: int, test_fraction: float, rng: np.random.Generator) -> NDArray[np.bool_]:
    """A random ``test_fraction`` of the ``n`` rows, as a mask."""
    is_test = np.zeros(n, dtype=bool)
    is_test[rng.permutation(n)[: round(test_fraction * n)]] = True
    return is_test


_Node = tuple[int, int, tuple[Condition, ...], NDArray[np.bool_]]
"""``(node, parent, conditions, mask)`` of one tree node (the root's parent is -1)."""


class _TreeSearch:
    """Grows the tree on the search rows: at each node the candidate split whose better
    child has the largest credible difference, if both children are big enough."""

    def __init__(self, frame: pd.DataFrame, inputs: _Encoded, search: NDArray[np.bool_],
                 max_depth: int, min_size: int) -> None:
        self.frame = frame
        self.s_plus, self.hit = inputs.s_plus, inputs.hit
        self.search = search
        self.max_depth, self.min_size = max_depth, min_size
        self.candidates = {str(c): _candidates(frame[c]) for c in frame.columns}
        self.masks: dict[str, dict[Condition, NDArray[np.bool_]]] = {
            str(c): {} for c in frame.columns
        }
        self.nodes: list[_Node] = []

    def cond_mask(self, condition: Condition) -> NDArray[np.bool_]:
        """The rows meeting one condition (computed once)."""
        cache = self.masks[condition[0]]
        if condition not in cache:
            cache[condition] = subpopulation_mask(self.frame, [condition])
        return cache[condition]

    def best_split(self, conditions: tuple[Condition, ...],
                   mask: NDArray[np.bool_]) -> tuple[Condition, Condition] | None:
        """The best split of the node's search rows (``None`` if no split is allowed)."""
        best: tuple[float, Condition, Condition] | None = None
        in_search = mask & self.search
        for column, splits in self.candidates.items():
            if any(c[0] == column and c[1] == "==" for c in conditions):
                continue
            for left, right in splits:
                lm = in_search & self.cond_mask(left)
                rm = in_search & self.cond_mask(right)
                if lm.sum() < self.min_size or rm.sum() < self.min_size:
                    continue
                scores = [_credible_difference(self.s_plus[m], self.hit[m]) for m in (lm, rm)]
                finite = [x for x in scores if np.isfinite(x)]
                if finite and (best is None or max(finite) > best[0]):
                    best = (max(finite), left, right)
        return None if best is None else (best[1], best[2])

    def grow(self, parent: int, conditions: tuple[Condition, ...],
             mask: NDArray[np.bool_]) -> None:
        """Add the node, then grow its children depth first (left before right)."""
        node = len(self.nodes)
        self.nodes.append((node, parent, conditions, mask))
        if len(conditions) >= self.max_depth:
            return
        split = self.best_split(conditions, mask)
        if split is None:
            return
        for cond in split:
            self.grow(node, (*conditions, cond), mask & self.cond_mask(cond))


def _test_node(
    node: _Node, inputs: _Encoded, is_test: NDArray[np.bool_], test_total: int, *,
    n_bootstrap: int, interval: float, seed: Seed,
) -> dict[str, object]:
    """One node's row of the table, from the test half: difference, bootstrap interval and
    G-test."""
    node_id, parent, conditions, mask = node
    rows_t = np.flatnonzero(mask & is_test)
    sp, ht = inputs.s_plus[rows_t], inputs.hit[rows_t]
    diff = _difference(sp, ht)
    lower = upper = float("nan")
    if rows_t.size and n_bootstrap:
        samples = bootstrap(_node_statistic(sp, ht), rows_t.size, n_resamples=n_bootstrap,
                            seed=seed, strata=sp.astype(np.intp))
        lo, hi = percentile_interval(samples, interval)
        lower, upper = float(lo), float(hi)
    if rows_t.size and sp.any() and (~sp).any():
        test = g_test(sp, ht, given=None if inputs.z is None else inputs.z[rows_t])
        g, p = test.statistic, test.p_value
    else:
        g, p = float("nan"), 1.0
    return {"node": node_id, "parent": parent, "depth": len(conditions),
            "description": describe(conditions), "size": int(rows_t.size),
            "share": rows_t.size / test_total if test_total else float("nan"),
            "n_protected": int(sp.sum()), "difference": diff, "lower": lower,
            "upper": upper, "g": g, "p_value": p}


def _ranked(table: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """``table`` with Holm-adjusted p-values and verdicts, strongest evidence first."""
    table["p_adjusted"] = _holm(table["p_value"].to_numpy(dtype=np.float64))
    table["significant"] = table["p_adjusted"] <= alpha
    near_zero = np.where(np.sign(table["lower"]) == np.sign(table["upper"]),
                         np.minimum(table["lower"].abs(), table["upper"].abs()), 0.0)
    table["_strength"] = np.nan_to_num(near_zero)
    return (table.sort_values(["significant", "_strength", "p_value"],
                              ascending=[False, False, True], kind="stable")
            .drop(columns="_strength").reset_index(drop=True))


@dataclass(frozen=True, kw_only=True)
class SubpopulationSettings:
    """How :func:`find_subpopulations` grows its tree and tests its nodes, checked when
    made.

    ``cf.audit.find_subpopulations(users, race, decisions, protected_group="Black",
    settings=cf.audit.SubpopulationSettings(max_depth=2, alpha=0.01))``.

    Parameters
    ----------
    max_depth
        Maximum depth of the tree (the root has depth 0).
    min_size
        Minimum number of search rows in a child; default ``max(30, 1 % of the rows)``.
    alpha
        Family-wise significance level after Holm's correction over all nodes.
    test_fraction
        Share of rows held out for testing.
    n_bootstrap, interval
        Bootstrap intervals of the difference on the test rows.
    seed
        Seed of the split into halves and of the bootstrap.
    """

    max_depth: int = 3
    min_size: int | None = None
    alpha: float = 0.05
    test_fraction: float = 0.5
    n_bootstrap: int = 200
    interval: float = 0.95
    seed: Seed = 0

    def __post_init__(self) -> None:
        checked = {
            "max_depth": check_count(self.max_depth, "max_depth"),
            "alpha": check_open_unit(self.alpha, "alpha"),
            "test_fraction": check_open_unit(self.test_fraction, "test_fraction"),
            "interval": check_open_unit(self.interval, "interval"),
            "n_bootstrap": check_count(self.n_bootstrap, "n_bootstrap"),
        }
        if self.min_size is not None:
            checked["min_size"] = check_count(self.min_size, "min_size")
        for name, value in checked.items():
            object.__setattr__(self, name, value)


def find_subpopulations(
    data: pd.DataFrame,
    protected: ArrayLike,
    outcome: ArrayLike,
    *,
    protected_group: Hashable,
    outcome_value: Hashable = 1,
    given: ArrayLike | None = None,
    settings: SubpopulationSettings | None = None,
) -> SubpopulationReport:
    """Search a tree of subpopulations for associations between protected attribute and outcome.

    Parameters
    ----------
    data
        User attributes the subpopulations are described by (one row per individual).
    protected
        Protected attribute S; ``s+ = protected_group``, ``s-`` everyone else.
    outcome
        Outcome O (decisions or labels).
    protected_group
        The group ``s+``.
    outcome_value
        The outcome ``o`` whose rate is compared.
    given
        Optional stratifier (e.g. a legitimate explanatory attribute): the G-test then
        is conditional on it (``G = 2 N I(S; O | Z)``).
    settings
        The tree's depth and child size, the significance level, the held-out share,
        the bootstrap and the seed (default: ``SubpopulationSettings()``).

    Returns
    -------
    SubpopulationReport
    """
    inputs = _encode_inputs(data, protected, outcome, given, protected_group, outcome_value)
    options = SubpopulationSettings() if settings is None else settings
    max_depth, alpha, seed = options.max_depth, options.alpha, options.seed
    interval, n_bootstrap = options.interval, options.n_bootstrap
    n = inputs.s_plus.size
    min_size = max(30, n // 100) if options.min_size is None else options.min_size
    min_size = check_count(min_size, "min_size")
    frame = data.reset_index(drop=True)
    rng = np.random.default_rng(seed)
    is_test = _test_half(n, options.test_fraction, rng)

    tree = _TreeSearch(frame, inputs, ~is_test, max_depth, min_size)
    tree.grow(-1, (), np.ones(n, dtype=bool))

    test_total = int(is_test.sum())
    table = pd.DataFrame([
        _test_node(node, inputs, is_test, test_total, n_bootstrap=n_bootstrap,
                   interval=interval, seed=seed)
        for node in tree.nodes
    ])
    return SubpopulationReport(table=_ranked(table, alpha),
                               conditions={n_: c for n_, _, c, _ in tree.nodes},
                               alpha=alpha, protected_group=inputs.protected_group,
                               outcome_value=inputs.outcome_value, interval=interval)
