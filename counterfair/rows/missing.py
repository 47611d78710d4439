"""Missing values in an SCM's columns: one refusal that names them all, or the rows dropped.

A fit needs every protected and observed column of its rows complete. By default
(``missing="error"``) the door refuses rows with missing values, naming every such
column with its count, the first row of each and how many rows are complete, so that a
user fixes them in one pass and knows what dropping the incomplete rows would cost.
``missing="drop"`` (``--missing drop`` on the command line) fits on the complete rows
instead, with one log line per column, and the fit records what was dropped
(``Fit.missing``). Dropping assumes that the rows are missing completely at random: when
whether a value is missing depends on the protected attributes or the other columns,
the complete rows are not a sample of the population and every estimate may be biased
(the documentation's *Missing values* page).

``missing="model"`` (``--missing model``) keeps every row and treats a missing value of
an observed node as unknown, under missing at random (:func:`hole_plan`): a node without
children leaves the likelihood of the rows where it is missing (its density integrates
to one), a Normal node with children has its missing values sampled with the
parameters, so that its children see them, and a Bernoulli, categorical or ordinal node
with children is summed out of the rows that miss it. The fit records the plan and the
counts.

Rows are numbered as :mod:`pandas` numbers them: by the frame's index labels, which
for a frame read from a CSV file are the 0-based data rows (the header not counted;
a spreadsheet shows row ``label + 2``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.logs import in_words

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

__all__ = [
    "COUNT_FAMILIES",
    "HOLE_KINDS",
    "MISSING_POLICIES",
    "TAIL_SHARE",
    "check_missing_policy",
    "count_bound",
    "drop_incomplete",
    "hole_plan",
    "missing_message",
    "model_record",
    "scm_columns",
]

MISSING_POLICIES = ("error", "drop", "model")
"""What a fit does with missing values: refuse the rows (the default), drop them, or
model them as unknown under missing at random."""

HOLE_KINDS = ("omit", "sample", "sum")
"""How ``missing="model"`` treats a node's missing values: ``omit`` (a node without
children: those rows leave its likelihood), ``sample`` (a Normal node with children:
the values are parameters of the fit) or ``sum`` (a Bernoulli, categorical, ordinal or
count node with children: each row's likelihood is summed over the node's levels, a
count's over ``0..K``, :func:`count_bound`)."""

SUMMED_FAMILIES = ("bernoulli", "categorical", "ordinal", "poisson", "negative_binomial")
"""Discrete families whose missing values ``missing="model"`` sums out: the finite ones over
their levels, the counts over ``0..K`` (:data:`COUNT_FAMILIES`)."""

COUNT_FAMILIES = ("poisson", "negative_binomial")
"""Counts: summed over ``0..K``, ``K`` from the node's observed values
(:func:`count_bound`), the share of the last term checked after the fit."""

_LOG = logging.getLogger(__name__)


def check_missing_policy(missing: object) -> str:
    """``missing`` if it names a policy of :data:`MISSING_POLICIES`, else a ValueError."""
    if missing not in MISSING_POLICIES:
        raise ValueError(
            f"missing must be one of {list(MISSING_POLICIES)}, got {missing!r}"
        )
    return str(missing)


def _label(value: object) -> object:
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def _row_words(index: pd.Index, position: int) -> str:
    """Where a row is, in words that say how rows are counted."""
    if isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1:
        return f"row {position} (0-based data rows)"
    return f"index label {_label(index[position])!r}"


def missing_message(frame: pd.DataFrame, columns: Sequence[str], *, hint: bool = True) -> str:
    """The refusal for ``columns`` of ``frame`` that hold missing values ('' if none).

    Every such column is named with its count and first row; the message ends with the
    number of complete rows (over ``columns``) and, with ``hint``, the option that drops
    the others.
    """
    columns = list(dict.fromkeys(columns))
    missing = frame[columns].isna()
    counts = missing.sum()
    bad = [c for c in columns if counts[c]]
    if not bad:
        return ""
    parts = []
    for column in bad:
        first = int(np.argmax(missing[column].to_numpy()))
        parts.append(
            f"{column!r} {int(counts[column]):,} (first at {_row_words(frame.index, first)})"
        )
    complete = int((~missing.any(axis=1)).sum())
    text = errors.NAN_COLUMNS.format(
        n=len(bad), columns="; ".join(parts), complete=complete, rows=len(frame)
    )
    return text + (in_words(errors.NAN_HINT, errors.NAN_HINT_CLI) if hint else "")


def scm_columns(scm: SCM, frame: pd.DataFrame) -> list[str]:
    """The columns of ``frame`` a fit of ``scm`` reads: protected, observed and the
    grouping columns of bending terms, in the SCM's order."""
    wanted = [*scm.protected, *scm.observed]
    for equation in scm.equations.values():
        for term in equation.bending:
            column = getattr(term.term, "column", None)
            if column is not None:
                wanted.append(column)
    return [c for c in dict.fromkeys(wanted) if c in frame.columns]


def drop_incomplete(data: pd.DataFrame, scm: SCM) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The rows of ``data`` complete in every column a fit of ``scm`` reads, and a record
    of what was dropped: ``{"policy": "drop", "rows": N, "dropped": D, "columns": {column:
    count}}``. One INFO line per column with missing values, and one for the total.

    Raises
    ------
    DataError
        If no row is complete (the message names every column).
    """
    columns = scm_columns(scm, data)
    missing = data[columns].isna()
    counts = {c: int(n) for c, n in missing.sum().items() if n}
    incomplete = missing.any(axis=1).to_numpy()
    record: dict[str, Any] = {
        "policy": "drop", "rows": len(data), "dropped": int(incomplete.sum()), "columns": counts,
    }
    if not counts:
        return data, record
    if incomplete.all():
        raise errors.DataError(missing_message(data, columns, hint=False))
    for column, count in counts.items():
        _LOG.info("missing='drop': column %r has %s missing value(s)", column, f"{count:,}")
    share = record["dropped"] / len(data)
    _LOG.info(
        "missing='drop': fitting on %s of %s rows (%s incomplete rows dropped, %.1f %%); "
        "this assumes the values are missing completely at random",
        f"{len(data) - record['dropped']:,}", f"{len(data):,}", f"{record['dropped']:,}",
        100 * share,
    )
    return data.loc[~incomplete], record


def count_bound(values: Any) -> int:
    """``K``: a missing count with children is summed over ``0..K``, twice the largest
    observed count plus 10 (the fit checks the share of ``K`` in each row's posterior,
    :data:`TAIL_SHARE`)."""
    seen = np.asarray(pd.Series(values).dropna(), dtype=float)
    top = float(seen.max()) if seen.size else 0.0
    return int(2 * np.ceil(top) + 10)


TAIL_SHARE = 1e-6
"""Largest posterior share of the last count summed over (``K``) that the fit accepts
without a warning: above it the truncation may matter."""


def _bending_reader(scm: SCM, node: str) -> str | None:
    """A child whose bending term (or ``loading_by``) reads ``node``, else None."""
    for child in scm.children(node):
        eq = scm.equations.get(child)
        if eq is None:
            continue
        if eq.loading_by is not None and eq.loading_by.name == node:
            return child
        for term in eq.bending:
            if any(p.name == node for p in term.parents):
                return child
    return None


def hole_plan(scm: SCM, counts: dict[str, int]) -> dict[str, str]:
    """How ``missing="model"`` treats each observed node with missing values.

    ``counts`` maps columns to their numbers of missing values. A node without observed
    children is ``"omit"`` (any family: the rows where it is missing leave its
    likelihood, which integrates to one over its values). A Normal node with children,
    read by them as one column of their design, is ``"sample"``: its missing values are
    parameters of the fit, with its own equation as their prior. A Bernoulli,
    categorical or ordinal node with children is ``"sum"``: each row that misses it is
    summed over its levels; so is a count (Poisson, negative binomial) with children, over
    ``0..K`` (:func:`count_bound`).

    Raises
    ------
    DataError
        Naming the column, for what the fit cannot model yet: a protected attribute, the
        grouping column of a bending term, a node a child reads through a bending term or
        ``loading_by``, and a summed node that would meet another unknown in one term
        (:func:`_check_sums`).
    """
    plan: dict[str, str] = {}
    grouping = set(scm_columns(scm, pd.DataFrame(columns=list(counts)))) - set(scm.observed)
    for column, count in counts.items():
        if not count:
            continue
        where = f"column {column!r} has {count:,} missing value(s)"
        if column in scm.protected:
            raise errors.DataError(
                f"{where}: it is a protected attribute, which missing='model' does not "
                "treat as unknown (every row's group must be known); drop those rows first"
            )
        if column not in scm.observed:
            if column in grouping:
                raise errors.DataError(
                    f"{where}: it is the grouping column of a bending term, which "
                    "missing='model' does not treat as unknown; fill it or drop those rows"
                )
            continue
        children = [c for c in scm.children(column) if c in scm.equations]
        if not children:
            plan[column] = "omit"
            continue
        family = scm.equations[column].spec.family
        if family not in ("normal", *SUMMED_FAMILIES):
            raise errors.DataError(
                f"{where}: node {column!r} ({family}) has children {children}, and "
                "missing='model' sums a discrete node out of its children's likelihood "
                f"only for the families {', '.join(SUMMED_FAMILIES)}; use "
                "missing='drop' (which assumes the rows are missing completely at random) "
                "or fill the values"
            )
        reader = _bending_reader(scm, column)
        if reader is not None:
            raise errors.DataError(
                f"{where}: node {column!r} enters {reader!r} through a bending term or "
                "loading_by, which missing='model' does not integrate through yet; use "
                "missing='drop' or fill the values"
            )
        plan[column] = "sample" if family == "normal" else "sum"
    _check_sums(scm, plan, counts)
    return plan


def _check_sums(scm: SCM, plan: dict[str, str], counts: dict[str, int]) -> None:
    """A summed node's equation and its children's must not meet a second summed node
    (one sum per row and term), nor read the latents by group (``loading_by``)."""
    for node, kind in plan.items():
        if kind != "sum":
            continue
        where = f"column {node!r} has {counts[node]:,} missing value(s)"
        eq = scm.equations[node]
        for term in eq.observed:
            if plan.get(term.parent) == "sum":
                raise errors.DataError(
                    f"{where}: its parent {term.parent!r} is summed out too, which "
                    f"missing='model' does not combine with summing {node!r} out yet; use "
                    "missing='drop' or fill one of them"
                )
        if eq.loading_by is not None:
            raise errors.DataError(
                f"{where}: its loadings differ by group (loading_by), which missing='model' "
                "does not sum over yet; use missing='drop' or fill the values"
            )
        for child in scm.children(node):
            ceq = scm.equations.get(child)
            if ceq is None:
                continue
            if plan.get(child) == "sum":
                raise errors.DataError(
                    f"{where}: its child {child!r} is summed out too, which missing='model' "
                    f"does not combine with summing {node!r} out yet; use missing='drop' or "
                    "fill one of them"
                )
            others = [
                t.parent for t in ceq.observed if t.parent != node and plan.get(t.parent) == "sum"
            ]
            if others:
                raise errors.DataError(
                    f"{where}: its child {child!r} has another parent summed out "
                    f"({others[0]!r}), which missing='model' does not combine with summing "
                    f"{node!r} out yet; use missing='drop' or fill one of them"
                )
            if ceq.loading_by is not None:
                raise errors.DataError(
                    f"{where}: the loadings of its child {child!r} differ by group "
                    "(loading_by), which missing='model' does not sum over yet; use "
                    "missing='drop' or fill the values"
                )


def model_record(frame: pd.DataFrame, scm: SCM, plan: dict[str, str]) -> dict[str, Any]:
    """What ``missing="model"`` did, kept with the fit: ``policy``, ``rows``, ``incomplete``
    (rows with a missing value), ``columns`` (counts) and ``plan`` (node -> kind). One
    INFO line per node and one for the rows."""
    columns = scm_columns(scm, frame)
    missing = frame[columns].isna()
    counts = {c: int(n) for c, n in missing.sum().items() if n}
    incomplete = int(missing.any(axis=1).sum())
    words = {
        "omit": "left out of its own likelihood where missing",
        "sample": "its missing values sampled with the parameters",
        "sum": "summed over its levels where missing",
        "sum_count": "summed over the counts 0..{K} where missing (K from its observed "
        "values; the last count's share is checked after the fit)",
    }
    for node, kind in plan.items():
        how = words[kind]
        if kind == "sum" and scm.equations[node].spec.family in COUNT_FAMILIES:
            how = words["sum_count"].format(K=count_bound(frame[node]))
        _LOG.info(
            "missing='model': %r has %s missing value(s), %s", node, f"{counts[node]:,}", how
        )
    if counts:
        _LOG.info(
            "missing='model': fitting on all %s rows, %s of them incomplete (%.1f %%); this "
            "assumes the values are missing at random given the rest of each row",
            f"{len(frame):,}", f"{incomplete:,}", 100 * incomplete / len(frame),
        )
    return {
        "policy": "model", "rows": len(frame), "incomplete": incomplete, "columns": counts,
        "plan": dict(plan),
    }
