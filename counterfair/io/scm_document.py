"""An SCM as a plain JSON document (the SCM file), and back.

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
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from counterfair._version import __version__
from counterfair.model.families import OBSERVED_FAMILIES
from counterfair.model.nodes import plain
from counterfair.model.specs import (
    PRIOR_FAMILIES,
    PROTECTED_KINDS,
    Latent,
    NodeSpec,
    Protected,
)
from counterfair.model.terms import TERM_SCHEMA, term_document

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


def scm_to_dict(scm: SCM) -> dict[str, Any]:
    """The SCM as a JSON-ready document (see the module docstring)."""
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
