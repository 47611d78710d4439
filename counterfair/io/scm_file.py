"""The SCM file: an SCM document (:mod:`counterfair.io.scm_document`) read back into an SCM.

The document may be written by hand, as JSON or YAML; :func:`read_scm` reads a
file, :func:`scm_from_dict` a parsed document. Errors name the JSON path at
fault (``nodes.LSAT.family``) and the reason.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import networkx as nx
import yaml

from counterfair import atomic, errors
from counterfair._version import __version__
from counterfair.io.scm_document import (
    FORMAT_VERSION,
    SPECIAL_FAMILIES,
    node_families,
    scm_schema,
    scm_to_dict,
)
from counterfair.model.families import OBSERVED_FAMILIES
from counterfair.model.scm import SCM
from counterfair.model.specs import SPEC_KEY, NodeSpec, Prior
from counterfair.model.terms import term_from_document


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


def scm_from_dict(document: Mapping[str, Any]) -> SCM:
    """Build an SCM from a document written by :func:`scm_to_dict` or by hand.

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
        return SCM(graph, coding=document.get("coding", "reference"))
    except errors.SCMError as error:
        message = str(error)
        if message.startswith(("nodes", "coding")):
            raise
        raise errors.SCMError(f"nodes: {message}") from error


class _Loader(yaml.SafeLoader):  # type: ignore[misc]
    """YAML as YAML 1.2 reads booleans: only true/false, so that ``levels: [no, yes]``
    and ``positive: yes`` stay the strings they are in the data (YAML 1.1, PyYAML's
    default, reads yes/no/on/off as booleans)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def parse_yaml(text: str) -> Any:
    """A YAML document, with YAML 1.2 booleans (see :class:`_Loader`)."""
    return yaml.load(text, Loader=_Loader)  # a SafeLoader subclass: no arbitrary objects


def _parse(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise errors.SCMError(f"cannot read SCM file {path}: {error}") from error
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            return parse_yaml(text)
        except yaml.YAMLError as error:
            raise errors.SCMError(f"{path} is not valid YAML: {error}") from error
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise errors.SCMError(f"{path} is not valid JSON: {error}") from error
    raise errors.SCMError(f"{path}: an SCM file ends in .json, .yaml or .yml")


def read_scm(path: str | os.PathLike[str]) -> SCM:
    """Read an SCM file (JSON or YAML), validated against the JSON Schema.

    Parameters
    ----------
    path : str or path-like
        A ``.json``, ``.yaml`` or ``.yml`` file holding an SCM document
        (see ``docs/scm-file.md``).

    Raises
    ------
    SCMError
        Naming the file and, for each problem, the JSON path and the reason
        (an unknown family or field, a wrong type, a parent that is not a node),
        or what the SCM refuses (a cycle, a latent without child, ...).
    """
    file = Path(path)
    if not file.is_file():
        raise errors.SCMError(f"SCM file {file} does not exist")
    try:
        return scm_from_dict(_parse(file))
    except errors.SCMError as error:
        raise errors.SCMError(f"{file}: {error}") from error


def write_scm(scm: SCM, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write ``scm`` as an SCM file, JSON or YAML by the file's suffix.

    The file is written to a temporary sibling and renamed; an existing file is
    replaced only with ``overwrite=True``.
    """
    file = Path(path)
    if file.exists() and not overwrite:
        raise FileExistsError(f"{file} exists; pass overwrite=True to replace it")
    document = scm_to_dict(scm)
    if file.suffix.lower() in (".yaml", ".yml"):
        text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    elif file.suffix.lower() == ".json":
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    else:
        raise errors.SCMError(f"{file}: an SCM file ends in .json, .yaml or .yml")
    return atomic.write(file, text)


def check_data_columns(scm: SCM, columns: Any, *, source: str = "the data") -> None:
    """Every protected and observed node of ``scm`` must be a column.

    Raises
    ------
    DataError
        Naming every node without a column, its family, and the columns there are.
    """
    present = {str(c) for c in columns}
    missing = [n for n in (*scm.protected, *scm.observed) if n not in present]
    if missing:
        described = ", ".join(
            f"{node!r} ({scm_to_dict_family(scm, node)})" for node in missing
        )
        raise errors.DataError(
            f"{source} has no column for node(s) {described} of the SCM; columns: "
            f"{sorted(present)}. Add the column(s), or rename them to the node names"
        )


def scm_to_dict_family(scm: SCM, node: str) -> str:
    """The ``family`` of a node as the SCM file writes it."""
    return str(scm_to_dict(scm)["nodes"][node]["family"])
