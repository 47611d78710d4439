"""Exact interventional and counterfactual queries on finite discrete SCMs, by enumeration.

:class:`DiscreteSCM` takes a networkx DAG whose nodes carry
:class:`~counterfair.DiscreteNoise` and :class:`~counterfair.Deterministic` specs and
answers ``query(target, given=..., do=...)`` by enumerating every joint state of the
relevant noise roots: each state fixes every node, so

* interventional: ``P(target = t | do) = sum_u P(u) [target_do(u) = t]``;
* counterfactual (Pearl's three steps): abduction ``P(u | given)`` in the factual
  world, action ``do``, prediction ``sum_u P(u | given) [target_do(u) = t]``.

Why a class of its own rather than :meth:`counterfair.SCM`: ``SCM`` validates its
graph for Stan (registered families only, a protected root required, Stan identifiers),
and these specs are neither Stan families nor need a protected node; loosening that
validation would touch every stage of the Stan pipeline, so the discrete engine stands
alone and imports nothing from it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Mapping
from fractions import Fraction
from typing import Any

import networkx as nx
import pandas as pd

from counterfair.errors import DataError, SCMError
from counterfair.model.discrete import Deterministic, DiscreteNoise, DiscreteSpec

SPEC = "spec"
DEFAULT_MAX_STATES = 1_000_000


class DiscreteSCM:
    """A finite discrete structural causal model with exact counterfactuals.

    Parameters
    ----------
    graph : networkx.DiGraph
        A DAG; every node carries a :class:`~counterfair.DiscreteNoise` (a root) or a
        :class:`~counterfair.Deterministic` spec under the attribute ``"spec"``.

    Raises
    ------
    SCMError
        If the graph is not a DAG, a node has no spec or another kind of spec, a noise
        node has parents, noise probabilities are negative or do not sum to 1, or a
        mechanism's levels or parent names are unusable. Messages name the node.

    Examples
    --------
    >>> from fractions import Fraction
    >>> import networkx as nx, counterfair as cf
    >>> g = nx.DiGraph([("U", "X")])
    >>> g.nodes["U"]["spec"] = cf.DiscreteNoise({0: Fraction(1, 4), 1: Fraction(3, 4)})
    >>> g.nodes["X"]["spec"] = cf.Deterministic(lambda U: 1 - U, levels=[0, 1])
    >>> cf.DiscreteSCM(g).query("X")[1]
    Fraction(1, 4)
    """

    def __init__(self, graph: nx.DiGraph) -> None:
        if not isinstance(graph, nx.DiGraph):
            raise SCMError(f"a DiscreteSCM is declared on a networkx.DiGraph, got {type(graph)}")
        if graph.number_of_nodes() == 0:
            raise SCMError("the causal graph has no nodes")
        if not nx.is_directed_acyclic_graph(graph):
            cycle = [edge[0] for edge in nx.find_cycle(graph)]
            raise SCMError(f"the causal graph has a cycle: {cycle}; an SCM must be acyclic")
        position = {node: i for i, node in enumerate(graph.nodes)}
        self._order: tuple[Hashable, ...] = tuple(
            nx.lexicographical_topological_sort(graph, key=lambda n: position[n])
        )
        self._graph = graph.copy()
        self._parents: dict[Hashable, tuple[Hashable, ...]] = {
            n: tuple(sorted(graph.predecessors(n), key=position.__getitem__)) for n in graph
        }
        self._specs: dict[Hashable, DiscreteSpec] = {}
        for node in self._order:
            spec = graph.nodes[node].get(SPEC)
            if isinstance(spec, DiscreteNoise):
                if self._parents[node]:
                    raise SCMError(
                        f"noise node {node!r} has parent(s) {list(self._parents[node])}; "
                        "DiscreteNoise nodes must be roots (use Deterministic for the others)"
                    )
                spec.check(node)
            elif isinstance(spec, Deterministic):
                spec.check(node, self._parents[node])
            elif spec is None:
                raise SCMError(
                    f"node {node!r} has no spec; give it cf.DiscreteNoise({{...}}) or "
                    "cf.Deterministic(function, levels=[...])"
                )
            else:
                raise SCMError(
                    f"node {node!r} has spec {spec!r}; a DiscreteSCM takes only "
                    "DiscreteNoise and Deterministic specs"
                )
            self._specs[node] = spec

    # ------------------------------------------------------------------ structure
    @property
    def nodes(self) -> tuple[Hashable, ...]:
        """All nodes in a topological order (graph order among ties)."""
        return self._order

    @property
    def noise(self) -> tuple[Hashable, ...]:
        """The noise roots, in topological order."""
        return tuple(n for n in self._order if isinstance(self._specs[n], DiscreteNoise))

    def levels(self, node: Hashable) -> tuple[Hashable, ...]:
        """The levels of ``node``."""
        self._check_node(node, "node")
        return tuple(self._specs[node].levels)

    def _check_node(self, node: Hashable, role: str) -> None:
        try:
            known = node in self._specs
        except TypeError:
            known = False
        if not known:
            raise DataError(f"{role} {node!r} is not a node of the SCM; nodes: {list(self._order)}")

    def _check_assignment(self, values: Mapping[Hashable, Any] | None, role: str) -> dict:
        if values is None:
            return {}
        if not isinstance(values, Mapping):
            raise DataError(f"{role} must be a mapping {{node: value}}, got {values!r}")
        checked: dict[Hashable, Any] = {}
        for node, value in values.items():
            self._check_node(node, f"{role} names")
            levels = self._specs[node].levels
            for level in levels:
                if value == level:
                    checked[node] = level
                    break
            else:
                raise DataError(
                    f"{role} sets {node!r} to {value!r}, which is not one of its levels "
                    f"{list(levels)!r}"
                )
        return checked

    # ------------------------------------------------------------------ queries
    def query(
        self,
        target: Hashable,
        *,
        given: Mapping[Hashable, Any] | None = None,
        do: Mapping[Hashable, Any] | None = None,
        max_states: int = DEFAULT_MAX_STATES,
    ) -> pd.Series:
        """The exact distribution of ``target``, interventional or counterfactual.

        Parameters
        ----------
        target : node
            The node whose distribution is returned.
        given : mapping, optional
            Evidence ``{node: value}`` observed in the factual world. When empty, the
            result is the interventional distribution ``P(target | do)``; otherwise the
            counterfactual ``P(target_do | given)``: the noise is abducted from the
            evidence in the factual world, then ``do`` is applied and ``target``
            predicted. With no ``do``, this is the conditional ``P(target | given)``.
        do : mapping, optional
            Intervention ``{node: value}``; any node (noise or endogenous) may be set.
        max_states : int
            Largest number of joint noise states to enumerate (product of the numbers
            of levels of positive probability of the noise roots that are ancestors of
            ``target``, ``given`` or ``do`` nodes; a noise root in ``given`` counts
            once). Larger queries are refused.

        Returns
        -------
        pandas.Series
            Indexed by the levels of ``target`` (named after it), dtype object. Values
            are :class:`fractions.Fraction` when every relevant noise probability is
            exact (Fractions or ints), floats otherwise.

        Raises
        ------
        DataError
            If a node in ``target``, ``given`` or ``do`` is unknown, a value is not one
            of its node's levels, or the evidence has probability 0.
        SCMError
            If there are more than ``max_states`` noise states, or a mechanism raises or
            returns a value outside its levels (the message names the node and its
            parents' values).
        """
        self._check_node(target, "target")
        evidence = self._check_assignment(given, "given")
        action = self._check_assignment(do, "do")
        if isinstance(max_states, bool) or not isinstance(max_states, int) or max_states < 1:
            raise DataError(f"max_states must be a positive integer, got {max_states!r}")
        order = self._relevant_order({target, *evidence, *action})
        noise_nodes = [n for n in order if isinstance(self._specs[n], DiscreteNoise)]
        exact = all(
            isinstance(spec, DiscreteNoise) and spec.exact
            for spec in (self._specs[n] for n in noise_nodes)
        )
        supports, denominator = self._noise_supports(noise_nodes, evidence, exact)
        _check_state_count(supports, noise_nodes, max_states)
        totals, evidence_mass = self._enumerate(
            target, order, noise_nodes, supports, evidence, action
        )
        if evidence:
            if evidence_mass == 0:
                raise DataError(
                    f"the evidence given={dict(evidence)!r} has probability 0 under the "
                    "model; counterfactuals conditioned on it are undefined"
                )
            denominator = evidence_mass
        return _distribution(target, totals, denominator, exact)

    def _relevant_order(self, nodes: set[Hashable]) -> list[Hashable]:
        """``nodes`` and their ancestors, in topological order."""
        relevant = set(nodes)
        for node in list(relevant):
            relevant |= nx.ancestors(self._graph, node)
        return [n for n in self._order if n in relevant]

    def _noise_supports(
        self, noise_nodes: list[Hashable], evidence: Mapping[Hashable, Any], exact: bool
    ) -> tuple[list[list[tuple[Hashable, Any]]], int]:
        """Each noise root's levels of positive probability with their weights, and the
        common denominator of the weights.

        Exact probabilities become integers over a per-node common denominator, so the
        enumeration adds and multiplies ints (fast) and divides once at the end; otherwise
        the weights are floats and the denominator is 1.
        """
        denominator = 1
        supports: list[list[tuple[Hashable, Any]]] = []
        for node in noise_nodes:
            spec = self._specs[node]
            assert isinstance(spec, DiscreteNoise)
            probs = spec.probabilities
            scale = math.lcm(*(Fraction(p).denominator for p in probs.values())) if exact else 1
            denominator *= scale
            support = [(lv, int(p * scale) if exact else float(p)) for lv, p in probs.items()]
            # evidence on a noise root holds in every world: keep only its observed level
            keep = [(lv, p) for lv, p in support if p > 0]
            if node in evidence:
                keep = [(lv, p) for lv, p in keep if lv == evidence[node]]
            supports.append(keep)
        return supports, denominator

    def _enumerate(
        self,
        target: Hashable,
        order: list[Hashable],
        noise_nodes: list[Hashable],
        supports: list[list[tuple[Hashable, Any]]],
        evidence: Mapping[Hashable, Any],
        action: Mapping[Hashable, Any],
    ) -> tuple[dict[Hashable, Any], Any]:
        """Unnormalised mass of each level of ``target`` over every joint noise state, and
        the mass of the states consistent with ``evidence`` (0 without evidence)."""
        plan = [
            (node, spec, self._parents[node])
            for node in order
            if isinstance(spec := self._specs[node], Deterministic)
        ]
        action_plan = [step for step in plan if step[0] not in action]
        cache: dict[tuple[Any, ...], Any] = {}
        totals: dict[Hashable, Any] = {level: 0 for level in self._specs[target].levels}
        evidence_mass: Any = 0
        for combo in itertools.product(*supports):
            weight: Any = 1
            noise_state: dict[Hashable, Any] = {}
            for node, (level, p) in zip(noise_nodes, combo, strict=True):
                noise_state[node] = level
                weight *= p
            if evidence:
                factual = _solve(dict(noise_state), plan, cache)
                if any(factual[n] != v for n, v in evidence.items()):
                    continue
                evidence_mass += weight
                if not action:
                    totals[factual[target]] += weight
                    continue
            world = _solve({**noise_state, **action}, action_plan, cache)
            totals[world[target]] += weight
        return totals, evidence_mass


def _solve(
    state: dict[Hashable, Any], steps: list, cache: dict[tuple[Any, ...], Any]
) -> dict[Hashable, Any]:
    """Fill the deterministic nodes of ``state`` step by step; ``cache`` keeps each
    mechanism's value for given parent values, so it is computed once per query."""
    for node, spec, parents in steps:
        key = (node, *(state[p] for p in parents))
        value = cache.get(key, cache)
        if value is cache:
            value = spec.evaluate(node, {p: state[p] for p in parents})
            cache[key] = value
        state[node] = value
    return state


def _check_state_count(
    supports: list[list[tuple[Hashable, Any]]], noise_nodes: list[Hashable], max_states: int
) -> None:
    """Refuse an enumeration of more than ``max_states`` joint noise states."""
    n_states = math.prod(len(s) for s in supports)
    if n_states > max_states:
        raise SCMError(
            f"the query needs {n_states} joint noise states (noise nodes "
            f"{noise_nodes}), more than max_states={max_states}; raise max_states or "
            "shrink the model"
        )


def _distribution(
    target: Hashable, totals: dict[Hashable, Any], denominator: Any, exact: bool
) -> pd.Series:
    """The normalised masses as a Series over the levels of ``target``."""
    if exact:
        values: list[Any] = [Fraction(v, denominator) for v in totals.values()]
    else:
        values = [float(v) / denominator for v in totals.values()]
    index = pd.Index(list(totals), name=target, dtype=object)
    return pd.Series(values, index=index, dtype=object, name="probability")
