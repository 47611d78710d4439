"""An SCM as a plain JSON document (the SCM file), and back: what
:meth:`SCM.to_dict <counterfair.SCM.to_dict>` and
:meth:`SCM.from_dict <counterfair.SCM.from_dict>` call.

The document is what :meth:`counterfair.Fit.save` writes as ``scm.json`` and what a
user may write by hand (JSON or YAML, :func:`counterfair.read_scm`)::

    {
      "format": "counterfair-scm",
      "format_version": 1,
      "coding": "reference",
      "nodes": {
        "race": {"family": "protected", "levels": ["White", "Black"]},
        "K":    {"family": "latent"},
        "LSAT": {"family": "poisson", "parents": ["race", "K"]}
      }
    }

Nodes keep their order (the graph order of the SCM). ``family`` says what a node
is: ``"protected"``, ``"latent"`` or an observed family (``"normal"``,
``"poisson"``, ...); the other keys are the fields of its spec
(:class:`~counterfair.Protected`, :class:`~counterfair.Latent`,
:class:`~counterfair.Normal`, ...), priors as ``{"family": "normal", "args": [0, 1]}``.
A document read back is validated against the JSON Schema (:func:`scm_schema`); errors
name the JSON path at fault (``nodes.LSAT.family``) and the reason. Reading and writing
files is the ``io`` stage's (:mod:`counterfair.io.scm_file`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import jsonschema
import networkx as nx

from counterfair import errors
from counterfair._version import __version__
from counterfair.model.families import OBSERVED_FAMILIES
from counterfair.model.nodes import plain
from counterfair.model.specs import (
    PRIOR_FAMILIES,
    PROTECTED_KINDS,
    SPEC_KEY,
    Latent,
    NodeSpec,
    Prior,
    Protected,
)
from counterfair.model.terms import TERM_SCHEMA, term_document, term_from_document

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

FORMAT = "counterfair-scm"
"""The ``format`` of an SCM document."""

FORMAT_VERSION = 1
"""Version of the SCM document format this counterfair writes and reads."""

SPECIAL_FAMILIES: dict[str, type[NodeSpec]] = {"protected": Protected, "latent": Latent}
"""Node kinds that are not observed families."""


def node_families() -> list[str]:
    """Every allowed value of a node's ``family``."""
    return [*SPECIAL_FAMILIES, *OBSERVED_FAMILIES]


def spec_to_dict(spec: NodeSpec) -> dict[str, Any]:
    """A node spec as a JSON-ready dict: ``family`` and every field of the spec."""
    if isinstance(spec, Protected):
        family = "protected"
    elif isinstance(spec, Latent):
        family = "latent"
    else:
        family = str(getattr(spec, "family"))  # noqa: B009 (class attribute of Observed)
    out: dict[str, Any] = {"family": family}
    for item in dataclasses.fields(spec):
        value = getattr(spec, item.name)
        if item.name == "terms":
            if value:  # only where a node has terms: older readers see the same file
                out["terms"] = [term_document(term) for term in value]
            continue
        if item.name == "loading_by" and value is None:
            continue
        out[item.name] = plain(value)
    return out


def to_dict(scm: SCM) -> dict[str, Any]:
    """The SCM as a JSON-ready document (see the module docstring); :meth:`SCM.to_dict`."""
    nodes: dict[str, Any] = {}
    graph = scm.graph
    for node in graph.nodes:
        entry = spec_to_dict(scm.specs[node])
        parents = scm.parents(node)
        if parents:
            entry["parents"] = list(parents)
        nodes[str(node)] = entry
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "counterfair_version": __version__,
        "coding": scm.coding,
        "nodes": nodes,
    }


# ---------------------------------------------------------------------- JSON Schema
def _prior_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "A prior: a Stan distribution and its arguments, e.g. normal(0, 2.5).",
        "properties": {
            "family": {"enum": sorted(PRIOR_FAMILIES)},
            "args": {"type": "array", "items": {"type": "number"}},
        },
        "required": ["family", "args"],
        "additionalProperties": False,
    }


_LEVELS = {"type": "array", "items": {"type": ["string", "number"]}, "minItems": 2}

_ANNOTATIONS: dict[str, dict[str, Any]] = {
    "Prior": _prior_schema(),
    "bool": {"type": "boolean"},
    "float": {"type": "number"},
    "float | None": {"type": ["number", "null"]},
    "str | None": {"type": ["string", "number", "null"]},
    "str": {"type": "string"},
    "tuple[str, ...] | None": {"anyOf": [_LEVELS, {"type": "null"}]},
    "tuple[Any, ...]": TERM_SCHEMA,
    "tuple[str, ...] | int | None": {
        "anyOf": [_LEVELS, {"type": "integer", "minimum": 2}, {"type": "null"}]
    },
}
"""JSON Schema of a spec field, by its type annotation."""

_FIELDS: dict[tuple[str, str], dict[str, Any]] = {
    ("protected", "kind"): {"enum": list(PROTECTED_KINDS)},
    ("latent", "scale"): {"type": "number", "exclusiveMinimum": 0},
    ("bernoulli", "levels"): {
        "anyOf": [
            {
                "type": "array",
                "description": "the two labels of the column, negative first",
                "items": {"type": ["string", "number", "boolean"]},
                "minItems": 2,
                "maxItems": 2,
            },
            {"type": "null"},
        ]
    },
    ("bernoulli", "positive"): {"type": ["string", "number", "boolean", "null"]},
}
"""Narrower schemas of particular fields."""


def _node_schema(family: str, cls: type[NodeSpec]) -> dict[str, Any]:
    properties: dict[str, Any] = {"family": {"const": family}}
    if family not in SPECIAL_FAMILIES:
        properties["parents"] = {"type": "array", "items": {"type": "string"}}
    for item in dataclasses.fields(cls):
        annotation = str(item.type)
        if (family, item.name) in _FIELDS:
            properties[item.name] = _FIELDS[family, item.name]
        elif annotation in _ANNOTATIONS:
            properties[item.name] = _ANNOTATIONS[annotation]
        else:  # a new family field: give it a schema above
            raise TypeError(f"no JSON Schema for field {item.name!r} of type {annotation!r}")
    return {
        "if": {"properties": {"family": {"const": family}}, "required": ["family"]},
        "then": {"properties": properties, "additionalProperties": False},
    }


def scm_schema() -> dict[str, Any]:
    """The JSON Schema of an SCM document, built from the spec classes.

    It is published as ``counterfair/scm.schema.json`` (a test checks that the
    file equals this function's result).
    """
    classes: dict[str, type[NodeSpec]] = {**SPECIAL_FAMILIES, **OBSERVED_FAMILIES}
    node = {
        "type": "object",
        "description": "A node: its family (protected, latent or an observed family), "
        "its parents (observed nodes only) and the fields of its spec.",
        "properties": {"family": {"enum": node_families()}},
        "required": ["family"],
        "allOf": [_node_schema(name, cls) for name, cls in classes.items()],
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "counterfair structural causal model",
        "type": "object",
        "properties": {
            "format": {"const": FORMAT},
            "format_version": {"type": "integer", "minimum": 1},
            "counterfair_version": {"type": "string"},
            "coding": {"enum": ["reference", "onehot"]},
            "nodes": {"type": "object", "minProperties": 1, "additionalProperties": node},
        },
        "required": ["nodes"],
        "additionalProperties": False,
    }


# ---------------------------------------------------------------------- reading back
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
        if key == "terms":
            if not isinstance(value, list):
                raise errors.SCMError(f"nodes.{node}.terms: a list of terms, got {value!r}")
            value = tuple(
                term_from_document(f"nodes.{node}.terms[{i}]", item)
                for i, item in enumerate(value)
            )
        elif key.startswith("prior_"):
            if not isinstance(value, Mapping) or set(value) != {"family", "args"}:
                raise errors.SCMError(
                    f"nodes.{node}.{key}: a prior is {{'family': ..., 'args': [...]}}, "
                    f"got {value!r}"
                )
            try:
                value = Prior(str(value["family"]), tuple(value["args"]))
            except (TypeError, ValueError) as error:
                raise errors.SCMError(f"nodes.{node}.{key}: {error}") from error
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[key] = value
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as error:
        raise errors.SCMError(f"nodes.{node}: {error}") from error


def _json_path(parts: Any) -> str:
    return ".".join(str(part) for part in parts) or "(document)"


def _check_version(document: Mapping[str, Any]) -> None:
    version = document.get("format_version", FORMAT_VERSION)
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise errors.SCMError(
            f"format_version: this SCM document has format version {version}; this "
            f"counterfair ({__version__}) reads versions up to {FORMAT_VERSION}; upgrade "
            "counterfair"
        )


def validate_document(document: Any) -> None:
    """Check an SCM document against the JSON Schema (:func:`scm_schema`).

    Raises
    ------
    SCMError
        Listing every violation as ``<JSON path>: <reason>``, e.g.
        ``nodes.LSAT.family: 'poison' is not one of ['protected', ...]``.
    """
    if not isinstance(document, Mapping):
        raise errors.SCMError(
            f"(document): an SCM document is a mapping with 'nodes', got {type(document).__name__}"
        )
    _check_version(document)
    validator = jsonschema.Draft202012Validator(scm_schema())
    found = []
    for error in validator.iter_errors(document):
        while error.context:  # anyOf: the most relevant reason among the alternatives
            best = jsonschema.exceptions.best_match(error.context)
            if best is None:
                break
            error = best
        found.append(error)
    if found:
        lines = sorted({f"{_json_path(e.absolute_path)}: {e.message}" for e in found})
        raise errors.SCMError("invalid SCM document:\n  " + "\n  ".join(lines))


def from_dict(document: Mapping[str, Any], cls: type[SCM]) -> SCM:
    """An SCM of class ``cls`` from a document; :meth:`SCM.from_dict`.

    Raises
    ------
    SCMError
        Naming the node and key at fault: an unknown family or field, a parent
        that is not a node, a newer format version, or anything the SCM itself
        refuses (a cycle, a latent without child, ...).
    """
    validate_document(document)
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
    try:
        return cls(graph, coding=document.get("coding", "reference"))
    except errors.SCMError as error:
        message = str(error)
        if message.startswith(("nodes", "coding")):
            raise
        raise errors.SCMError(f"nodes: {message}") from error
