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
from counterfair.families import OBSERVED_FAMILIES
from counterfair.specs import Latent, NodeSpec, Prior, Protected

if TYPE_CHECKING:
    from counterfair.scm import SCM

FORMAT = "counterfair-scm"
"""The ``format`` of an SCM document."""

FORMAT_VERSION = 1
"""Version of the SCM document format this counterfair writes and reads."""

SPECIAL_FAMILIES: dict[str, type[NodeSpec]] = {"protected": Protected, "latent": Latent}
"""Node kinds that are not observed families."""


def node_families() -> list[str]:
    """Every allowed value of a node's ``family``."""
    return [*SPECIAL_FAMILIES, *OBSERVED_FAMILIES]


def _plain(value: Any) -> Any:
    if isinstance(value, Prior):
        return {"family": value.family, "args": list(value.args)}
    if isinstance(value, tuple):
        return list(value)
    return value


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
        out[item.name] = _plain(getattr(spec, item.name))
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


