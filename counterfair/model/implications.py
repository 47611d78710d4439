"""What a declared SCM implies about its observed columns, and what it does not.

:func:`implications` derives the testable implications of an SCM's graph over the
columns a data set has (the protected attributes and the observed nodes), latents
included:

* **Conditional independences** of the graph's latent projection, in the ordered local
  Markov form (Richardson 2003): with the columns in a topological order, each column
  ``V`` is independent of the earlier columns outside its Markov blanket, jointly, given
  that blanket, the blanket being ``V``'s district (the columns joined to it by shared
  latent parents, among ``V`` and the earlier columns) and the district's parents. There
  is at most one statement per column, so their number stays linear in the columns.
  Every statement is checked by d-separation in the whole graph (latents unobserved).
  Statements about protected attributes alone are left out: a fit takes their joint law
  as given, and so does this check.
* **Vanishing tetrads**: a latent with at least four Normal indicators (children with no
  other latent parent and no parent the latent causes) implies, once each indicator
  is regressed on the indicators' observed parents, a one-factor covariance: ``s_ij s_kl
  = s_ik s_jl = s_il s_jk`` for every four of them (Spearman; Bollen and Ting 1993).
* **What is not testable**, said as such: a latent with fewer than four Normal
  indicators implies no tetrad, and a column whose every earlier column is in its
  blanket implies no independence.

The statements are what the graph says without its functional forms; their tests are in
:mod:`counterfair.audit.falsification`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import networkx as nx

from .families.normal import Normal
from .nodes import Latent
from .scm import SCM

__all__ = ["MIN_TETRAD_INDICATORS", "Implications", "Independence", "Tetrad", "implications"]

MIN_TETRAD_INDICATORS = 4
"""Normal indicators a latent needs for a vanishing tetrad."""


@dataclass(frozen=True)
class Independence:
    """``node`` is independent of the columns ``others`` (jointly) given ``given``."""

    node: str
    others: tuple[str, ...]
    given: tuple[str, ...]

    def __str__(self) -> str:
        given = ", ".join(self.given)
        return f"{self.node} _||_ {', '.join(self.others)}" + (f" | {given}" if given else "")

    def key(self) -> tuple[frozenset[frozenset[str]], frozenset[str]]:
        """The statement up to the order of its two sides (for one column on each side,
        ``a _||_ b | s`` is ``b _||_ a | s``)."""
        return frozenset((frozenset((self.node,)), frozenset(self.others))), frozenset(self.given)


@dataclass(frozen=True)
class Tetrad:
    """``cov(a, b) cov(c, d) = cov(a, c) cov(b, d)`` for the indicators ``(a, b, c, d)``
    of ``latent``, each with ``given`` (their observed parents) regressed out."""

    latent: str
    indicators: tuple[str, str, str, str]
    given: tuple[str, ...]

    def __str__(self) -> str:
        a, b, c, d = self.indicators
        return f"s({a},{b}) s({c},{d}) = s({a},{c}) s({b},{d})  [{self.latent}]"


@dataclass(frozen=True)
class Implications:
    """The testable implications of an SCM over its columns, and what is not testable.

    Attributes
    ----------
    columns : tuple of str
        The columns the statements are about, in topological order.
    independences : tuple of Independence
    tetrads : tuple of Tetrad
    untestable : tuple of str
        What the graph leaves untested, each with its reason.
    """

    columns: tuple[str, ...]
    independences: tuple[Independence, ...] = ()
    tetrads: tuple[Tetrad, ...] = ()
    untestable: tuple[str, ...] = field(default=())

    def __len__(self) -> int:
        return len(self.independences) + len(self.tetrads)

    def key(self) -> frozenset[object]:
        """The statements as a set that ignores the order of a pair (two graphs with the
        same key imply the same)."""
        return frozenset(
            [i.key() for i in self.independences]
            + [(t.latent, frozenset(t.indicators)) for t in self.tetrads]
        )


def implications(scm: SCM) -> Implications:
    """The conditional independences and vanishing tetrads ``scm`` implies over its
    columns (protected attributes and observed nodes), and what it leaves untestable."""
    return implications_of_graph(
        scm.graph,
        columns=tuple(n for n in scm.nodes if not isinstance(scm.specs[n], Latent)),
        latents=scm.latents,
        protected=scm.protected,
        normal={n for n in scm.observed if isinstance(scm.specs[n], Normal)},
    )


def implications_of_graph(
    graph: nx.DiGraph,
    *,
    columns: tuple[str, ...],
    latents: tuple[str, ...],
    protected: tuple[str, ...] = (),
    normal: set[str] | frozenset[str] = frozenset(),
) -> Implications:
    """:func:`implications` of a bare graph: ``columns`` in a topological order, the
    ``latents`` (roots), the ``protected`` columns (statements among them alone are left
    out) and the columns that are ``normal`` (tetrads are of Normal indicators)."""
    order = [n for n in nx.topological_sort(graph) if n in set(columns)]
    position = {n: i for i, n in enumerate(order)}
    latent_set, protected_set = set(latents), set(protected)
    shares = {n: {lat for lat in graph.predecessors(n) if lat in latent_set} for n in order}
    independences: list[Independence] = []
    untestable: list[str] = []
    for i, node in enumerate(order):
        if node in protected_set:
            continue
        earlier = order[:i]
        blanket = _blanket(graph, node, earlier, shares, latent_set)
        outside = tuple(u for u in earlier if u not in blanket)
        given = tuple(sorted(blanket, key=position.__getitem__))
        if outside and nx.is_d_separator(graph, {node}, set(outside), set(given)):
            independences.append(Independence(node, outside, given))
    others = [u for u in order if u in protected_set]
    if len(others) > 1:
        untestable.append(
            f"the protected attributes {others}: their joint law is taken as given"
        )
    tetrads: list[Tetrad] = []
    for latent in latents:
        indicators = _indicators(graph, latent, order, shares, set(normal))
        if len(indicators) < MIN_TETRAD_INDICATORS:
            untestable.append(
                f"{latent}: {len(indicators)} Normal indicator(s) "
                f"{indicators if indicators else ''} (a tetrad needs "
                f"{MIN_TETRAD_INDICATORS}): its loadings and its law imply nothing here"
            )
            continue
        parents = sorted(
            {p for c in indicators for p in graph.predecessors(c) if p not in latent_set},
            key=position.__getitem__,
        )
        for a, b, c, d in itertools.combinations(indicators, 4):
            tetrads.append(Tetrad(latent, (a, b, c, d), tuple(parents)))
            tetrads.append(Tetrad(latent, (a, b, d, c), tuple(parents)))
    if not independences and not tetrads:
        untestable.append(
            "the graph implies no conditional independence among the columns (every "
            "column's earlier columns are in its Markov blanket) and no tetrad"
        )
    return Implications(tuple(order), tuple(independences), tuple(tetrads), tuple(untestable))


def _blanket(graph: nx.DiGraph, node: str, earlier: list[str], shares: dict[str, set[str]],
             latents: set[str]) -> set[str]:
    """``node``'s Markov blanket among ``node`` and the ``earlier`` columns: its district
    (joined by shared latent parents) and the district's observed parents."""
    pool = set(earlier) | {node}
    district, frontier = {node}, [node]
    while frontier:
        current = frontier.pop()
        for other in pool - district:
            if shares[current] & shares[other]:
                district.add(other)
                frontier.append(other)
    blanket = set(district)
    for member in district:
        blanket |= {p for p in graph.predecessors(member) if p not in latents}
    blanket.discard(node)
    return blanket


def _indicators(graph: nx.DiGraph, latent: str, order: list[str], shares: dict[str, set[str]],
                normal: set[str]) -> list[str]:
    """The latent's Normal children with no other latent parent and no parent that the
    latent causes (so that, their observed parents regressed out, what is left of them
    is the latent and their own noise), in column order."""
    caused = nx.descendants(graph, latent)
    return [
        c for c in order
        if shares[c] == {latent} and c in normal
        and not any(p in caused for p in graph.predecessors(c) if p != latent)
    ]
