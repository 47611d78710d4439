"""The SCM file: an SCM document (:mod:`counterfair.model.scm_document`) in a JSON or
YAML file.

The document may be written by hand; :func:`read_scm` reads a file into an SCM,
:func:`write_scm` writes one (:meth:`SCM.from_dict <counterfair.SCM.from_dict>` and
:meth:`SCM.to_dict <counterfair.SCM.to_dict>` convert a parsed document). Errors name
the file, the JSON path at fault (``nodes.LSAT.family``) and the reason.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

from counterfair import atomic, errors
from counterfair.model.scm import SCM


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
        return SCM.from_dict(_parse(file))
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
    document = scm.to_dict()
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
            f"{node!r} ({file_family(scm, node)})" for node in missing
        )
        raise errors.DataError(
            f"{source} has no column for node(s) {described} of the SCM; columns: "
            f"{sorted(present)}. Add the column(s), or rename them to the node names"
        )


def file_family(scm: SCM, node: str) -> str:
    """The ``family`` of a node as the SCM file writes it."""
    return str(scm.to_dict()["nodes"][node]["family"])
