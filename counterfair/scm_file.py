"""The SCM file: an SCM document (:mod:`counterfair.scm_document`) read back into an SCM.

The document may be written by hand, as JSON or YAML; :func:`read_scm` reads a
file, :func:`scm_from_dict` a parsed document. Errors name the JSON path at
fault (``nodes.LSAT.family``) and the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import networkx as nx

from counterfair import errors
from counterfair._version import __version__
from counterfair.families import OBSERVED_FAMILIES
from counterfair.scm import SCM
from counterfair.scm_document import FORMAT, FORMAT_VERSION, SPECIAL_FAMILIES, node_families
from counterfair.specs import SPEC_KEY, NodeSpec, Prior


def _spec_from_dict(node: str, entry: Mapping[str, Any]) -> NodeSpec:
    family = entry.get("family")
    classes: dict[str, type[NodeSpec]] = {**SPECIAL_FAMILIES, **OBSERVED_FAMILIES}
    if family not in classes:
        raise errors.SCMError(
            f"nodes.{node}.family: {family!r} is not one of {node_families()}"
        )
    cls = classes[str(family)]
    fields = {item.name: item for item in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in entry.items():
        if key in ("family", "parents"):
            continue
        if key not in fields:
            raise errors.SCMError(
                f"nodes.{node}.{key}: not a field of a {family} node; fields: {sorted(fields)}"
            )
        if key.startswith("prior_"):
            if not isinstance(value, Mapping) or set(value) != {"family", "args"}:
                raise errors.SCMError(
                    f"nodes.{node}.{key}: a prior is {{'family': ..., 'args': [...]}}, "
                    f"got {value!r}"
                )
            value = Prior(str(value["family"]), tuple(value["args"]))
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[key] = value
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as error:
        raise errors.SCMError(f"nodes.{node}: {error}") from error


def scm_from_dict(document: Mapping[str, Any]) -> SCM:
    """Build an SCM from a document written by :func:`scm_to_dict` or by hand.

    Raises
    ------
    SCMError
        Naming the node and key at fault: an unknown family or field, a parent
        that is not a node, a newer format version, or anything the SCM itself
        refuses (a cycle, a latent without child, ...).
    """
    if document.get("format", FORMAT) != FORMAT:
        raise errors.SCMError(f"format: {document.get('format')!r} is not {FORMAT!r}")
    version = document.get("format_version", FORMAT_VERSION)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise errors.SCMError(
            f"format_version: this SCM document has format version {version!r}; this "
            f"counterfair ({__version__}) reads versions up to {FORMAT_VERSION}; upgrade "
            "counterfair"
        )
    nodes = document.get("nodes")
    if not isinstance(nodes, Mapping) or not nodes:
        raise errors.SCMError("nodes: an SCM document needs a non-empty mapping of nodes")
    graph = nx.DiGraph()
    for node, entry in nodes.items():
        if not isinstance(entry, Mapping):
            raise errors.SCMError(f"nodes.{node}: expected a mapping, got {entry!r}")
        graph.add_node(str(node), **{SPEC_KEY: _spec_from_dict(str(node), entry)})
    for node, entry in nodes.items():
        parents = entry.get("parents", [])
        if not isinstance(parents, list):
            raise errors.SCMError(f"nodes.{node}.parents: expected a list, got {parents!r}")
        for parent in parents:
            if str(parent) not in graph:
                raise errors.SCMError(
                    f"nodes.{node}.parents: {parent!r} is not a node; nodes: {list(nodes)}"
                )
            graph.add_edge(str(parent), str(node))
    return SCM(graph, coding=document.get("coding", "reference"))
