"""Small composable checks of an SCM's graph and specs, each raising an error naming the culprit.

The checks of rows live at their one door, :meth:`counterfair.rows.Rows.check`.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable, Mapping

import networkx as nx

from counterfair import errors
from counterfair.model.discrete import Deterministic, DiscreteNoise
from counterfair.model.families import FAMILIES
from counterfair.model.specs import SPEC_KEY, Latent, NodeSpec, Observed, Protected

_IDENTIFIER = re.compile(r"^[A-Za-z](?:[A-Za-z0-9]|_(?!_))*$")
_STAN_RESERVED = frozenset(
    """
    for in while repeat until if then else true false target functions model data
    parameters quantities transformed generated profile int real complex vector
    row_vector matrix array tuple simplex ordered positive_ordered cholesky_factor_corr
    cholesky_factor_cov corr_matrix cov_matrix unit_vector sum_to_zero_vector lower upper
    offset multiplier print reject fatal_error return break continue void var fvar
    struct typedef export auto extern static complex_vector complex_matrix
    complex_row_vector jacobian
    N S s indicators
    """.split()
)


def _label(value: object) -> object:
    """A row label or value as a plain Python object (no numpy scalar reprs in messages)."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def validate_graph_type(graph: object) -> nx.DiGraph:
    """Check that ``graph`` is a non-empty ``networkx.DiGraph`` (not a multigraph)."""
    if not isinstance(graph, nx.DiGraph) or graph.is_multigraph():
        raise errors.SCMError(errors.NOT_A_DIGRAPH.format(type=type(graph).__name__))
    if graph.number_of_nodes() == 0:
        raise errors.SCMError(errors.EMPTY_GRAPH)
    return graph


def validate_acyclic(graph: nx.DiGraph) -> None:
    """Check that the graph has no directed cycle, naming one if it does."""
    try:
        cycle = nx.find_cycle(graph, orientation="original")
    except nx.NetworkXNoCycle:
        return
    path = " -> ".join(str(edge[0]) for edge in cycle) + f" -> {cycle[0][0]}"
    raise errors.SCMError(errors.CYCLE.format(cycle=path))


def validate_specs(graph: nx.DiGraph) -> dict[str, NodeSpec]:
    """Check that every node carries a known spec; return them by node."""
    specs: dict[str, NodeSpec] = {}
    for node, attrs in graph.nodes(data=True):
        spec = attrs.get(SPEC_KEY)
        if spec is None:
            raise errors.SCMError(errors.MISSING_SPEC.format(node=node))
        if isinstance(spec, DiscreteNoise | Deterministic):
            raise errors.SCMError(
                errors.DISCRETE_SPEC_IN_STAN_SCM.format(node=node, kind=type(spec).__name__)
            )
        if not isinstance(spec, Protected | Latent | Observed):
            raise errors.SCMError(errors.UNKNOWN_SPEC.format(node=node, spec=spec))
        if isinstance(spec, Observed) and spec.family not in FAMILIES:
            raise errors.SCMError(errors.UNKNOWN_SPEC.format(node=node, spec=spec))
        specs[node] = spec
    return specs


def validate_node_names(nodes: Iterable[object]) -> None:
    """Check that node names can be written into a Stan program."""
    for node in nodes:
        if not isinstance(node, str) or not _IDENTIFIER.match(node):
            raise errors.SCMError(errors.BAD_NODE_NAME.format(node=node))
        if node in _STAN_RESERVED or keyword.iskeyword(node) or node.endswith("_"):
            raise errors.SCMError(errors.BAD_NODE_NAME.format(node=node))


def validate_roots(graph: nx.DiGraph, specs: Mapping[str, NodeSpec]) -> None:
    """Check that protected and latent nodes have no parents and latents have children."""
    for node, spec in specs.items():
        parents = sorted(graph.predecessors(node))
        if isinstance(spec, Protected) and parents:
            raise errors.SCMError(errors.PROTECTED_WITH_PARENT.format(node=node, parents=parents))
        if isinstance(spec, Latent):
            if parents:
                raise errors.SCMError(errors.LATENT_WITH_PARENT.format(node=node, parents=parents))
            if graph.out_degree(node) == 0:
                raise errors.SCMError(errors.LATENT_WITHOUT_CHILD.format(node=node))
    if not any(isinstance(spec, Protected) for spec in specs.values()):
        raise errors.SCMError(errors.NO_PROTECTED)


def validate_unique_identifiers(owners: Mapping[str, str], name: str, owner: str) -> None:
    """Record that Stan identifier ``name`` belongs to ``owner``; fail on a clash."""
    if name in owners and owners[name] != owner:
        raise errors.SCMError(errors.NAME_CLASH.format(first=owners[name], second=owner, name=name))
