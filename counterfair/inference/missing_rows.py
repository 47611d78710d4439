"""Abduction of rows with missing values, for a fit of ``missing="model"``.

Two kinds of rows carry holes (:attr:`counterfair.rows.Rows.holes`):

- the fit's own training rows, whose missing values the fit's posterior holds jointly
  with the parameters and latents (:func:`counterfair.inference.abduct.training_abduction`);
- other rows: new rows, or the training rows abducted with another ``condition_on``.
  Each pattern of missing columns is abducted on its own, conditioning the latents on
  the nodes the rows hold (:func:`abduct_by_pattern`); a node a row misses then takes,
  for each sample, a draw from its equation given the sample's parameters, latents and
  parents (:func:`fill_missing`). Under missing at random this is the row's posterior:
  a node's missing value is informed only by its descendants, and a row whose missing
  node has a descendant among the evidence is refused, naming both (that value's
  posterior would need the descendant's likelihood, which only the fit's own rows have).

The evidence is every node the rows hold (``condition_on=None``), or the nodes given
in ``condition_on``: a node left out of it, such as a learner's target under Kusner et
al.'s Algorithm 1, is not evidence, and a missing parent of it is drawn without it.
Every draw is keyed by the rows' global positions (stream ``("missing", node)``), so the
result does not depend on the chunking.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

from counterfair import errors
from counterfair.inference.abduction import Abduction
from counterfair.model.evaluate import draw_node, linear_predictor
from counterfair.model.params import ParamDraws
from counterfair.rng import RowRandom
from counterfair.rows.rows import Rows

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

__all__ = ["abduct_by_pattern", "fill_missing", "hole_patterns"]

DESCENDANT_IS_EVIDENCE = (
    "{count:,} row(s) miss {node!r} (first at index label {label!r}) but hold its "
    "descendant {child!r}, which is evidence about it: a missing value given its "
    "descendants is drawn only for the rows a missing='model' fit was fitted on. Give "
    "condition_on= without {child!r} (then {child!r} is not evidence), or fill {node!r} "
    "in these rows"
)
"""Refusal of a row whose missing node has a descendant among the evidence."""

PARAMETER_SETS_DIFFER = (
    "the patterns of missing values were abducted with different parameter sets "
    "({engines}): abduct these rows with method='mean' or engine='exact'"
)
"""Refusal when the per-pattern abductions cannot be put back together sample by sample."""


def fill_missing(
    scm: SCM,
    params: ParamDraws,
    latents: Mapping[str, np.ndarray],
    observed: Mapping[str, np.ndarray],
    codes: Mapping[str, np.ndarray],
    holes: Mapping[str, np.ndarray],
    positions: np.ndarray,
    seed: int | None,
    sampled: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """``observed`` with each node's missing values filled per sample, ``(S, N)`` for a
    node with holes.

    ``holes``: node -> mask ``(N,)``, True where missing; ``observed`` holds a
    placeholder there. ``sampled``: node -> ``(S, n_missing)`` values drawn elsewhere
    (the fit's posterior draws of a sampled or summed node); every other missing value
    is drawn from the node's equation given the sample's parameters, latents and
    (filled) parents, in graph order, with the stream ``("missing", node)`` of
    :class:`~counterfair.rng.RowRandom` keyed by ``positions``.
    """
    if not holes:
        return dict(observed)
    sampled = sampled or {}
    out = dict(observed)
    s, n = params.n, len(positions)
    rng = RowRandom(seed, np.asarray(positions, dtype=np.int64))
    reference = scm.coding == "reference"
    for node in scm.observed:  # graph order: a node's parents are filled first
        mask = holes.get(node)
        if mask is None:
            continue
        current = np.asarray(observed[node], dtype=float)
        values = np.array(np.broadcast_to(current, (s, n)) if current.ndim == 2
                          else np.repeat(current[None, :], s, axis=0))
        if node in sampled:
            values[:, mask] = sampled[node]
        else:
            eq = scm.equations[node]
            given = {k: v if v.ndim == 2 else v[None, :] for k, v in out.items()}
            eta = linear_predictor(
                eq, params, {**given, **latents}, dict(codes), reference_coding=reference,
                n_rows=n,
            )
            eta = np.broadcast_to(eta, (s, n, *eta.shape[2:]))
            draw = draw_node(eq, params, eta, rng.child("missing", node))
            values[:, mask] = np.asarray(draw, dtype=float)[:, mask]
        out[node] = values
    return out


def hole_patterns(rows: Rows) -> list[tuple[frozenset[str], np.ndarray]]:
    """The rows' patterns of missing columns: ``(missing nodes, positions in the rows)``,
    the complete rows first when there are any, then by first row."""
    names = sorted(rows.holes)
    if not names:
        return [(frozenset(), np.arange(len(rows)))]
    keys = np.stack([np.asarray(rows.holes[n], dtype=bool) for n in names], axis=1)
    unique, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    order = sorted(range(len(unique)), key=lambda k: (bool(unique[k].any()), int(first[k])))
    return [
        (frozenset(n for n, m in zip(names, unique[k], strict=True) if m),
         np.flatnonzero(inverse == k))
        for k in order
    ]


def _check_evidence(
    scm: SCM, rows: Rows, missing: frozenset[str], where: np.ndarray, evidence: set[str]
) -> None:
    """Refuse a pattern whose missing node has a descendant among the evidence."""
    for node in (n for n in scm.observed if n in missing):
        for child in sorted(nx.descendants(scm.graph, node) & evidence - missing,
                            key=scm.observed.index):
                label = rows.frame.index[int(where[0])]
                label = label.item() if hasattr(label, "item") else label
                raise errors.DataError(
                    DESCENDANT_IS_EVIDENCE.format(
                        count=len(where), node=node, label=label, child=child
                    )
                )


def abduct_by_pattern(
    scm: SCM,
    rows: Rows,
    conditioning: Callable[[Sequence[str]], tuple[str, ...]],
    evidence: Sequence[str] | None,
    abduct_complete: Callable[[Rows, tuple[str, ...]], Abduction],
    seed: int | None,
) -> Abduction:
    """Rows with missing values, abducted one pattern of missing columns at a time.

    ``conditioning(columns)``: the latents' conditioning set for rows that hold
    ``columns``. ``evidence``: the nodes given as ``condition_on`` (None: every node the
    rows hold). ``abduct_complete(rows, conditioned)``: the abduction of complete rows.
    """
    parts: list[tuple[np.ndarray, Abduction]] = []
    frame_columns = list(rows.frame.columns)
    for missing, where in hole_patterns(rows):
        held = [c for c in frame_columns if c not in missing]
        conditioned = conditioning(held)
        known = set(conditioned) if evidence is not None else set(held)
        _check_evidence(scm, rows, missing, where, known)
        sub = Rows.check(
            rows.frame.iloc[where][held], scm, rows.encoding, positions=rows.positions[where]
        )
        parts.append((where, abduct_complete(sub, conditioned)))
    first = parts[0][1]
    for _, part in parts[1:]:
        same = part.params.n == first.params.n and all(
            np.array_equal(part.params[k], first.params[k]) for k in first.params
        )
        if not same:
            engines = sorted({p.engine for _, p in parts})
            raise errors.FairnessError(PARAMETER_SETS_DIFFER.format(engines=", ".join(engines)))
    n, s = len(rows), first.params.n
    order = np.concatenate([where for where, _ in parts])
    back = np.empty(n, dtype=np.int64)
    back[order] = np.arange(n)
    latents = {
        name: np.concatenate([p.latents[name] for _, p in parts], axis=1)[:, back]
        for name in first.latents
    }
    holes = {node: np.asarray(mask, dtype=bool) for node, mask in rows.holes.items()}
    placeholder: dict[str, np.ndarray] = {}
    for node in scm.observed:
        if node not in frame_columns:
            continue
        column = np.zeros((s, n)) if node in holes else np.zeros(n)
        for where, part in parts:
            if node in part.observed:
                column[..., where] = part.observed[node]
        placeholder[node] = column
    codes = dict(rows.codes)
    observed = fill_missing(
        scm, first.params, latents, placeholder, codes, holes, rows.positions, seed
    )
    return Abduction(
        data=rows.frame,
        params=first.params,
        latents=latents,
        codes=codes,
        observed=observed,
        conditioned_on=tuple(dict.fromkeys(n for _, p in parts for n in p.conditioned_on)),
        engine=first.engine,
        positions=rows.positions,
        holes=holes,
    )
