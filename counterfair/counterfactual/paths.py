"""Path-specific counterfactuals (Avin, Shpitser and Pearl, 2005; Chiappa, 2019).

An intervention ``do(A = a')`` may be let through some causal paths only: the
*unfair* paths see ``a'`` while every other path from ``A`` keeps the factual
``a``. The paths are given as node tuples starting at ``A``; a tuple
``(A, V1, ..., Vk)`` stands for every directed path from ``A`` that begins with
it, so ``(A, V)`` is every path whose first edge is ``A -> V``.

Semantics
---------
Every node ``V`` is evaluated as the end of the paths from ``A`` to it. Inside
that evaluation a node ``W`` is computed in a *path context*: the directed path
``tau = (W, ..., V)`` through which its value reaches ``V``. Then

* a parent ``P`` of ``W`` is itself evaluated in the context ``(P,) + tau``;
* where ``A`` is a parent of ``W``, the value of ``A`` seen along the path
  ``(A,) + tau`` is ``a'`` if that path begins with one of the unfair tuples,
  and the factual ``a`` otherwise;
* latents keep their abducted draws, a Normal node is its linear predictor plus
  its abducted noise, a discrete node applies its abducted (monotone) noise to
  the new linear predictor, and a node none of whose inputs changed keeps its
  factual value -- the same unit, with the same noise, as the factual world.

For ``A -> M -> Y``, ``A -> L -> Y``, ``A -> Y`` with ``unfair_paths=[(A, M)]``
this is the nested counterfactual ``Y(a, M(a'), L(a))``. A node on both a fair
and an unfair path is computed once per context: with
``unfair_paths=[(A, M, Y)]`` and a second path ``A -> M -> Z -> Y``,
``Y = f_Y(a, M(a'), Z(a, M(a)))`` -- ``M`` enters ``Y`` directly with ``a'``
and through ``Z`` with ``a``. Nodes reached from ``A`` through fair paths only
keep their factual values; listing every edge out of ``A`` gives the total
counterfactual of :func:`counterfair.counterfactual.frames.counterfactual_frame`, and
an empty list gives the factual world.

A tuple covers the paths that *begin* with it, so a path that ends before the
tuple does is not covered: ``[(A, M, Y)]`` leaves ``M`` itself factual (the path
``A -> M`` is not unfair) while ``Y`` sees ``M(a')`` through the edge ``M -> Y``.

Whether a path is unfair is decided by its first ``K`` nodes, ``K`` the length
of the longest unfair tuple, so the contexts are memoised on their first
``K - 1`` nodes: each node is computed at most once per distinct such suffix.

A path-specific intervention names one protected attribute: ``do`` must hold
exactly that attribute (the first node of every unfair tuple).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.counterfactual.action import (
    WORLD_COUNTERFACTUAL,
    WORLD_FACTUAL,
    Coupling,
    DoValue,
    check_coupling,
    do_codes,
    recorded_do,
    simulate_missing,
)
from counterfair.counterfactual.world import World
from counterfair.model.evaluate import linear_predictor
from counterfair.rng import RandomSource, RowRandom

if TYPE_CHECKING:
    from counterfair.inference.fit import Abduction, Fit
    from counterfair.model.scm import SCM

UnfairPaths = Sequence[Sequence[str]]
"""Unfair paths: node tuples, each starting at the intervened protected attribute."""

SHORT_PATH = "unfair path {path!r} has fewer than two nodes; give (A, V, ...) with edge A -> V"
UNKNOWN_PATH_NODE = "unfair path {path!r} names {node!r}, which is not a node of the SCM"
NOT_AN_EDGE = "unfair path {path!r} is not a directed path of the graph: there is no edge {edge}"
WRONG_SOURCE = (
    "unfair path {path!r} does not start at the intervened attribute {source!r}; every "
    "unfair path starts at the protected attribute set by do()"
)
PATHS_DO = (
    "unfair_paths= needs do() on exactly one protected attribute (the first node of every "
    "unfair path), got do() on {nodes}"
)
PATHS_REDRAW = (
    "unfair_paths= needs coupling='monotone': a node on a fair and an unfair path must "
    "share its noise across its contexts, which coupling='redraw' does not"
)
NOT_PROTECTED = (
    "unfair path {path!r} starts at {node!r}, which is not a protected attribute; "
    "protected: {protected}"
)


def check_paths(scm: SCM, source: str, unfair_paths: UnfairPaths) -> tuple[tuple[str, ...], ...]:
    """The unfair paths as tuples, checked to be directed paths of the graph from ``source``.

    Raises
    ------
    SCMError
        Naming the path: fewer than two nodes, a node not in the SCM, a
        missing edge, or a first node other than ``source``.
    """
    graph = scm.graph
    out = []
    for raw in unfair_paths:
        path = tuple(str(node) for node in raw) if not isinstance(raw, str) else (raw,)
        if len(path) < 2:
            raise errors.SCMError(SHORT_PATH.format(path=path))
        for node in path:
            if node not in scm.specs:
                raise errors.SCMError(UNKNOWN_PATH_NODE.format(path=path, node=node))
        if path[0] != source:
            raise errors.SCMError(WRONG_SOURCE.format(path=path, source=source))
        for parent, child in itertools.pairwise(path):
            if not graph.has_edge(parent, child):
                raise errors.SCMError(NOT_AN_EDGE.format(path=path, edge=f"{parent} -> {child}"))
        out.append(path)
    return tuple(out)


def mediator_paths(
    scm: SCM, attribute: str, mediators: Sequence[str]
) -> tuple[tuple[str, ...], ...]:
    """The directed paths from ``attribute`` that enter a mediator, cut at the first one.

    Every path from ``attribute`` that runs through a mediator begins with exactly one of
    these tuples (the part up to its first mediator), so, given as the paths that see
    ``x0`` (:func:`counterfair.counterfactual.paths.path_specific_values`), they hold the
    mediators at their ``x0`` values while every other path sees ``x1``. Mediators that
    are not descendants of ``attribute`` have no such path.
    """
    graph = scm.graph
    chosen = set(mediators)
    caused = scm.descendants(attribute)
    found: list[tuple[str, ...]] = []
    for mediator in (n for n in scm.nodes if n in chosen and n in caused):
        for path in nx.all_simple_paths(graph, attribute, mediator):
            if chosen.isdisjoint(path[1:-1]):
                found.append(tuple(str(node) for node in path))
    return check_paths(scm, attribute, found) if found else ()


def direct_paths(
    scm: SCM, attribute: str, mediators: Sequence[str], ends: Sequence[str]
) -> tuple[tuple[str, ...], ...]:
    """The directed paths from ``attribute`` to the nodes ``ends`` that touch no mediator.

    They carry the direct effect of ``attribute`` on whatever reads ``ends`` (with
    :func:`mediator_paths`, every path from ``attribute`` to an end is one or the other).
    A tuple covers the paths that begin with it, so a direct path into ``v`` would also
    cover a path ``attribute -> ... -> v -> W`` that continues into a mediator ``W``;
    :func:`shared_prefix` finds such a node.
    """
    chosen = set(mediators)
    caused = scm.descendants(attribute)
    found: list[tuple[str, ...]] = []
    for end in (n for n in scm.nodes if n in set(ends) and n in caused and n not in chosen):
        for path in nx.all_simple_paths(scm.graph, attribute, end):
            if chosen.isdisjoint(path[1:]):
                found.append(tuple(str(node) for node in path))
    return check_paths(scm, attribute, found) if found else ()


def shared_prefix(
    scm: SCM, direct: Sequence[tuple[str, ...]], mediators: Sequence[str]
) -> tuple[str, str] | None:
    """A node ``v`` ending a direct path and an ancestor of a mediator ``W`` (``(v, W)``),
    or ``None``: then no direct path is the beginning of a mediated one."""
    for path in direct:
        end = path[-1]
        for mediator in mediators:
            if mediator in scm.descendants(end):
                return end, mediator
    return None


def path_source(scm: SCM, unfair_paths: UnfairPaths) -> str:
    """The protected attribute the unfair paths start at (that of the first path).

    Raises
    ------
    SCMError
        Naming the path: the first path does not start at a protected
        attribute, or another path starts elsewhere.
    """
    paths = [tuple(str(node) for node in path) for path in unfair_paths]
    if not paths or not paths[0]:
        raise errors.SCMError(SHORT_PATH.format(path=paths[0] if paths else ()))
    source = paths[0][0]
    if source not in scm.protected:
        raise errors.SCMError(
            NOT_PROTECTED.format(path=paths[0], node=source, protected=list(scm.protected))
        )
    for path in paths[1:]:
        if path[:1] != (source,):
            raise errors.SCMError(WRONG_SOURCE.format(path=path, source=source))
    return source


def _do_source(scm: SCM, do: Mapping[str, DoValue]) -> str:
    nodes = list(do)
    if len(nodes) != 1 or nodes[0] not in scm.protected:
        raise errors.SCMError(PATHS_DO.format(nodes=nodes))
    return nodes[0]


def path_specific_values(
    scm: SCM,
    abduction: Abduction,
    *,
    source: str,
    layers: Sequence[tuple[Sequence[tuple[str, ...]], np.ndarray]],
    default_codes: np.ndarray,
    rng: RandomSource,
    simulated: Mapping[str, np.ndarray] | None = None,
    simulated_noise: Mapping[str, np.ndarray] | None = None,
    world_codes: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Path-specific values of every observed node, shape ``(S, N)`` (see the module docstring).

    Parameters
    ----------
    scm : SCM
        The model.
    abduction : Abduction
        Joint samples of parameters and latents, with the factual values.
    source : str
        The protected attribute ``A``.
    layers : sequence of (paths, codes)
        Checked path prefixes (:func:`check_paths`) and the codes of ``A``,
        shape ``(N,)``, seen along the paths that begin with one of them; the
        first layer that matches a path wins. A path-specific counterfactual
        has one layer, ``(unfair_paths, a')``.
    default_codes : numpy.ndarray
        Codes of ``A`` seen along every other path (the factual ``a`` for a
        path-specific counterfactual), shape ``(N,)``.
    rng : RowRandom or numpy.random.Generator
        Source of the abducted noise of discrete descendants (monotone coupling);
        with a :class:`~counterfair.rng.RowRandom` each node draws from
        ``rng.child("propagate", node)``, as in
        :func:`counterfair.counterfactual.action.propagate`.
    simulated, simulated_noise : mapping, optional
        Factual values (and Normal noise) of nodes absent from the rows.
    world_codes : mapping, optional
        Codes of the other protected attributes (default: factual).
    """
    s, n = abduction.n_samples, len(abduction.data)
    params = abduction.params
    given = dict(simulated or {})
    reference = scm.coding == "reference"
    codes = {**abduction.codes, **(world_codes or {})}
    factual: dict[str, np.ndarray] = {**abduction.latents}
    for node in scm.observed:
        source_values = given[node] if node in given else abduction.observed[node]
        factual[node] = np.broadcast_to(source_values, (s, n))
    moved = [p for p in scm.protected if p != source and np.any(codes[p] != abduction.codes[p])]
    if any(np.any(c != abduction.codes[source]) for c in [default_codes, *(c for _, c in layers)]):
        moved.append(source)
    descendants = scm.descendants(moved) if moved else frozenset()
    normal = [
        d
        for d in scm.observed
        if d in descendants and scm.equations[d].family.additive_noise and d not in given
    ]
    noise = abduction.noise(scm, normal)
    noise.update(simulated_noise or {})
    shared: dict[str, np.ndarray] = {}
    for node in scm.observed:  # the unit's discrete noise, once per node, in propagate's order
        eq = scm.equations[node]
        if node in descendants and not eq.family.additive_noise:
            factual_eta = linear_predictor(
                eq, params, factual, abduction.codes, reference_coding=reference, n_rows=n
            )
            node_rng = rng.child("propagate", node) if isinstance(rng, RowRandom) else rng
            shared[node] = eq.family.abduct_noise(
                eq, params, factual_eta, factual[node], node_rng
            )
    depth = max((len(p) for paths, _ in layers for p in paths), default=1) - 1
    memo: dict[tuple[str, ...], np.ndarray] = {}

    def seen_along(path: tuple[str, ...]) -> np.ndarray:
        for paths, layer_codes in layers:
            if any(path[: len(t)] == t for t in paths):
                return layer_codes
        return default_codes

    def value(context: tuple[str, ...]) -> np.ndarray:
        key = context[: max(depth, 1)]
        node = key[0]
        if node not in descendants:
            return factual[node]
        if key in memo:
            return memo[key]
        eq = scm.equations[node]
        values: dict[str, np.ndarray] = {**abduction.latents}
        for oterm in eq.observed:
            values[oterm.parent] = value((oterm.parent, *key))
        seen = dict(codes)
        seen[source] = seen_along((source, *key))
        eta = linear_predictor(eq, params, values, seen, reference_coding=reference)
        changed = np.zeros((s, n), dtype=bool)
        for pterm in eq.protected:
            changed |= np.broadcast_to(seen[pterm.parent] != abduction.codes[pterm.parent], (s, n))
        for oterm in eq.observed:
            changed |= ~np.isclose(
                values[oterm.parent], factual[oterm.parent], rtol=1e-12, atol=1e-12
            )
        if eq.family.additive_noise:
            fresh = eta + noise[node]
        else:
            fresh = eq.family.apply_noise(eq, params, eta, shared[node])
            fresh = np.where(np.isnan(fresh), factual[node], fresh)
        memo[key] = np.where(changed, fresh, factual[node])
        return memo[key]

    out: dict[str, np.ndarray] = {**abduction.latents}
    for node in scm.observed:
        out[node] = value((node,))
    return out


def path_specific_frame(
    fit: Fit,
    abduction: Abduction,
    do: Mapping[str, DoValue],
    unfair_paths: UnfairPaths,
    *,
    seed: int | None = None,
    coupling: Coupling = "monotone",
) -> pd.DataFrame:
    """Factual and path-specific counterfactual values of every node, per row and sample.

    The layout is that of :func:`counterfair.counterfactual.frames.counterfactual_frame`:
    the counterfactual world holds, for every node, its path-specific value (the
    module docstring), and the protected column holds ``a'``, the level seen
    along the unfair paths (a predictor reading ``A`` directly reads it along
    its own edge ``A -> prediction``, taken as unfair).
    ``frame.attrs["unfair_paths"]`` lists the checked paths.

    Raises
    ------
    SCMError
        If ``do`` is not on exactly one protected attribute, an unfair path
        does not start there or is not a directed path of the graph, or
        ``coupling`` is ``"redraw"``.
    """
    if check_coupling(coupling) != "monotone":
        raise errors.SCMError(PATHS_REDRAW)
    scm = fit.scm
    source = _do_source(scm, do)
    paths = check_paths(scm, source, unfair_paths)
    rng = abduction.row_random(seed)
    cf_codes = do_codes(fit, do, abduction)
    simulated, simulated_noise = simulate_missing(scm, abduction, rng)
    factual_values: dict[str, np.ndarray] = {**abduction.latents}
    factual_values.update(abduction.factual_values())
    factual_values.update(simulated)
    noise = {**abduction.noise(scm), **simulated_noise}
    cf_values = path_specific_values(
        scm,
        abduction,
        source=source,
        layers=[(paths, cf_codes[source])],
        default_codes=abduction.codes[source],
        rng=rng,
        simulated=simulated,
        simulated_noise=simulated_noise,
    )
    frame = pd.concat(
        [
            World(
                name=WORLD_FACTUAL, abduction=abduction, codes=abduction.codes,
                values=factual_values, noise=noise,
            ).frame(scm, fit.encoding),
            World(
                name=WORLD_COUNTERFACTUAL, abduction=abduction, codes=cf_codes,
                values=cf_values, noise=noise,
            ).frame(scm, fit.encoding),
        ],
        ignore_index=True,
    )
    frame.attrs["do"] = recorded_do({source: do[source]})
    frame.attrs["simulated"] = sorted(simulated)
    frame.attrs["coupling"] = "monotone"
    frame.attrs["unfair_paths"] = [list(p) for p in paths]
    return frame
