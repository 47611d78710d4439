"""Group effects' groups: learned levels, codes of the rows, and unseen groups' draws.

A group never seen in training gets a stable negative code (:func:`unseen_code`) and
its effects are drawn from the population distribution, the same draw for every row of
that group in every world, chunk and partition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from counterfair import errors
from counterfair.model.terms.declare import GroupEffect, Term


def groups_name(column: str) -> str:
    """Stan data name of the number of groups of a grouping column."""
    return f"n_groups_{column}"


UNSEEN_BASE = 2**62
"""Codes of groups unseen in training are ``-1 - (hash % UNSEEN_BASE)``: negative, and the
same for a level whatever the rows around it (chunks, worlds, partitions)."""


def unseen_code(column: str, level: str) -> int:
    """The (negative) code of a group never seen in training, stable across runs."""
    import hashlib

    digest = hashlib.sha256(f"{column}\x00{level}".encode()).digest()
    return -1 - int.from_bytes(digest[:8], "little") % UNSEEN_BASE


def group_codes(
    terms: Sequence[Term], frame: Any, *, node_names: Sequence[str] = ()
) -> dict[str, np.ndarray]:
    """Codes of the grouping columns of learned group effects: 0-based, negative if unseen.

    Raises
    ------
    DataError
        If a grouping column is missing or has missing values (naming it).
    """
    import logging

    out: dict[str, np.ndarray] = {}
    for term in terms:
        if not isinstance(term, GroupEffect) or term.levels is None or term.column in out:
            continue
        if term.column not in frame.columns:
            raise errors.DataError(
                f"column {term.column!r} is missing: it is the grouping column of "
                f"{term.label}; columns: {list(frame.columns)}"
            )
        series = frame[term.column]
        if series.isna().any():
            row = series.index[int(np.argmax(series.isna().to_numpy()))]
            raise errors.DataError(f"column {term.column!r} has a missing value at row {row!r}")
        labels = series.astype(str).to_numpy()
        index = {level: i for i, level in enumerate(term.levels)}
        codes = np.array([index.get(label, -1) for label in labels], dtype=np.int64)
        unseen = sorted({str(v) for v in labels[codes < 0]})
        if unseen:
            lookup = {level: unseen_code(term.column, level) for level in unseen}
            codes[codes < 0] = [lookup[str(v)] for v in labels[codes < 0]]
            shown = ", ".join(repr(v) for v in unseen[:5]) + (", ..." if len(unseen) > 5 else "")
            logging.getLogger("counterfair").info(
                "column %r: %d group(s) never seen in training (%s): their effects are drawn "
                "from the population distribution",
                term.column,
                len(unseen),
                shown,
            )
        out[term.column] = codes
    return out


def learn_groups(node: str, term: GroupEffect, labels: Any) -> GroupEffect:
    """The group effect with its groups learned from the training column (sorted).

    Raises
    ------
    SCMError
        Naming the node and the term, when the column has a single level.
    """
    levels = tuple(sorted({str(v) for v in np.asarray(labels, dtype=object)}))
    if len(levels) < 2:
        raise errors.SCMError(
            f"node {node!r}, term {term.label}: the grouping column {term.column!r} has a "
            f"single level {levels} in the training rows; a group effect needs at least 2"
        )
    return replace(term, levels=levels)
