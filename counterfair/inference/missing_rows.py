"""Abduction of rows with missing values, for a fit of ``missing="model"``.

Two kinds of rows carry holes (:attr:`counterfair.rows.Rows.holes`):

- the fit's own training rows, whose missing values the fit's posterior holds jointly
  with the parameters and latents (:func:`counterfair.inference.abduct.training_abduction`);
- other rows: new rows, or the training rows abducted with another ``condition_on``.
  Each pattern of missing columns is abducted on its own, conditioning the latents on
  the nodes the rows hold (:func:`abduct_by_pattern`); a node a row misses then takes,
  for each sample, a draw from its equation given the sample's parameters, latents and
  parents (:func:`fill_missing`). Under missing at random this is the row's posterior:
  a node's missing value is informed only by its descendants. A row whose missing
  Bernoulli, categorical or ordinal node has a descendant among the evidence has that
  node summed out exactly (``_abduct_over_levels``: one abduction per level, each
  sample's level drawn by the evidence's likelihood at it); other such rows are
  refused, naming both.

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
from counterfair.inference.abduction_result import Abduction
from counterfair.inference.loo import log_evidence
from counterfair.model.evaluate import draw_node, linear_predictor
from counterfair.model.params import ParamDraws
from counterfair.rng import RowRandom
from counterfair.rows.validated import Rows

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

__all__ = ["abduct_by_pattern", "fill_missing", "hole_patterns"]

LEVEL_FAMILIES = ("bernoulli", "categorical", "ordinal")
"""Families a missing node of new rows is summed out over when it has evidence below it."""

DESCENDANT_IS_EVIDENCE = (
    "{count:,} row(s) miss {node!r} (first at index label {label!r}) but hold its "
    "descendant {child!r}, which is evidence about it: a missing value given its "
    "descendants is drawn for the rows a missing='model' fit was fitted on, and in other "
    "rows for one Bernoulli, categorical or ordinal node per row. Give "
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


def _evidence_below(
    scm: SCM, missing: frozenset[str], evidence: set[str]
) -> list[tuple[str, str]]:
    """``(missing node, its first descendant among the evidence)`` for each missing node
    that has one, in the SCM's order."""
    out = []
    for node in (n for n in scm.observed if n in missing):
        below = sorted(nx.descendants(scm.graph, node) & evidence - missing,
                       key=scm.observed.index)
        if below:
            out.append((node, below[0]))
    return out


def _refuse(rows: Rows, where: np.ndarray, node: str, child: str, why: str = "") -> None:
    label = rows.frame.index[int(where[0])]
    label = label.item() if hasattr(label, "item") else label
    raise errors.DataError(
        DESCENDANT_IS_EVIDENCE.format(count=len(where), node=node, label=label, child=child)
        + why
    )


def _abduct_over_levels(
    scm: SCM,
    rows: Rows,
    where: np.ndarray,
    held: list[str],
    node: str,
    child: str,
    conditioned: tuple[str, ...],
    abduct_complete: Callable[[Rows, tuple[str, ...]], Abduction],
    seed: int | None,
) -> Abduction:
    """Rows that miss the finite-valued ``node`` but hold evidence below it, abducted
    exactly: for each level ``k`` the rows are abducted with ``node = k``, and each
    sample's level is drawn with probability ``p(evidence, node = k | theta_s)`` (the
    latents integrated out by exact abduction's quadrature), its latents then those of
    the abduction at that level. ``conditioned``: the conditioning set of these rows
    with the node held."""
    eq = scm.equations[node]
    if eq.spec.family not in LEVEL_FAMILIES:
        _refuse(rows, where, node, child, (
            f"; summing a missing node out of new rows needs a finite set of levels "
            f"({', '.join(LEVEL_FAMILIES)}), and {node!r} is {eq.spec.family}"
        ))
    levels = 2 if eq.spec.family == "bernoulli" else int(eq.family.parent_levels(eq.spec) or 0)
    given = set(conditioned) | {node}  # the node itself is evidence at each level
    with_node = tuple(n for n in scm.observed if n in given)
    base = Rows.check(
        rows.frame.iloc[where][held], scm, rows.encoding, positions=rows.positions[where]
    )
    known = base.values([n for n in scm.observed if n in held])
    n = len(where)
    parts: list[Abduction] = []
    log_w: list[np.ndarray] = []
    for k in range(levels):
        values = {**known, node: np.full(n, float(k))}
        frame = base.frame.assign(**{node: np.full(n, k)})  # codes: never parsed again
        sub = Rows(frame, base.positions, base.encoding, dict(base.codes), scm, dict(values))
        part = abduct_complete(sub, with_node)
        if parts and not _same_params(part.params, parts[0].params):
            raise errors.FairnessError(
                PARAMETER_SETS_DIFFER.format(engines=f"{parts[0].engine}, {part.engine}")
            )
        try:
            log_w.append(
                log_evidence(scm, part.params, base.codes, values, with_node, n)
            )
        except ValueError as error:  # exact abduction does not apply to these nodes
            _refuse(rows, where, node, child, (
                f"; summing {node!r} out of new rows needs exact abduction, which does not "
                f"apply here ({error})"
            ))
        parts.append(part)
    weights = np.stack(log_w)  # (K, S, N)
    weights = np.exp(weights - weights.max(axis=0, keepdims=True))
    cumulative = np.cumsum(weights / weights.sum(axis=0, keepdims=True), axis=0)
    first = parts[0]
    uniforms = RowRandom(seed, base.positions).child("missing-level", node).random(
        (first.params.n, n), row_axis=1
    )
    chosen = np.minimum((cumulative < uniforms[None]).sum(axis=0), levels - 1)  # (S, N)
    latents = {
        name: np.choose(chosen, [p.latents[name] for p in parts]) for name in first.latents
    }
    observed = {**first.observed, node: chosen.astype(float)}
    return Abduction(
        data=base.frame, params=first.params, latents=latents, codes=dict(base.codes),
        observed=observed, conditioned_on=with_node, engine=first.engine,
        positions=base.positions,
    )


def _same_params(a: ParamDraws, b: ParamDraws) -> bool:
    return a.n == b.n and all(np.array_equal(a[k], b[k]) for k in b)


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
    summed: dict[str, np.ndarray] = {}  # node -> rows whose value the level sum drew
    for missing, where in hole_patterns(rows):
        held = [c for c in frame_columns if c not in missing]
        conditioned = conditioning(held)
        known = set(conditioned) if evidence is not None else set(held)
        below = _evidence_below(scm, missing, known)
        if len(below) > 1:
            _refuse(rows, where, *below[1], (
                f"; only one missing node per row ({below[0][0]!r} here) is summed out of "
                "new rows"
            ))
        if below:
            node, child = below[0]
            part = _abduct_over_levels(  # the node's children count once it is held
                scm, rows, where, held, node, child, conditioning([*held, node]),
                abduct_complete, seed,
            )
            summed.setdefault(node, np.zeros(len(rows), dtype=bool))[where] = True
            parts.append((where, part))
            continue
        sub = Rows.check(
            rows.frame.iloc[where][held], scm, rows.encoding, positions=rows.positions[where]
        )
        parts.append((where, abduct_complete(sub, conditioned)))
    first = parts[0][1]
    for _, part in parts[1:]:
        if not _same_params(part.params, first.params):
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
    to_fill = {  # a value the level sum drew is kept; the others are drawn forward
        node: mask & ~summed[node] if node in summed else mask for node, mask in holes.items()
    }
    observed = fill_missing(
        scm, first.params, latents, placeholder, codes,
        {node: mask for node, mask in to_fill.items() if mask.any()}, rows.positions, seed,
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
