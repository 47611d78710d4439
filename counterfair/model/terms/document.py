"""Terms in the SCM file: a term as a JSON object and back, and its JSON Schema."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from counterfair import errors
from counterfair.model.nodes import Prior
from counterfair.model.terms.declare import (
    GP_KERNELS,
    MIN_BASIS,
    SMOOTH_BASES,
    TERM_KINDS,
    Term,
)


def term_document(term: Term) -> dict[str, Any]:
    """A term as the SCM file writes it (``{"term": "smooth", ...}``): the fields that
    name parents, and every other field whose value is not its default."""
    from dataclasses import MISSING, fields

    from counterfair.model.nodes import plain

    out: dict[str, Any] = {"term": term.kind}
    for f in fields(term):
        value = getattr(term, f.name)
        if f.default is not MISSING:
            default: Any = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:  # a required field: the parents
            out[f.name] = plain(value)
            continue
        if value != default:
            out[f.name] = plain(value)
    return out


def term_from_document(where: str, entry: object) -> Term:
    """A term from its SCM-file form (``{"term": "smooth", "parent": "age", ...}``).

    ``where`` is the JSON path named in errors (``nodes.income.terms[0]``).
    """
    from dataclasses import fields

    if not isinstance(entry, Mapping) or entry.get("term") not in TERM_KINDS:
        raise errors.SCMError(
            f"{where}: a term is {{'term': one of {sorted(TERM_KINDS)}, ...}}, got {entry!r}"
        )
    cls = TERM_KINDS[str(entry["term"])]
    known = {f.name for f in fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in entry.items():
        if key == "term":
            continue
        if key not in known:
            raise errors.SCMError(f"{where}.{key}: not a field of a {entry['term']} term")
        if key.startswith("prior") and value is not None:
            if not isinstance(value, Mapping) or set(value) != {"family", "args"}:
                raise errors.SCMError(
                    f"{where}.{key}: a prior is {{'family': ..., 'args': [...]}}, got {value!r}"
                )
            try:
                value = Prior(str(value["family"]), tuple(value["args"]))
            except (TypeError, ValueError) as error:
                raise errors.SCMError(f"{where}.{key}: {error}") from error
        kwargs[key] = value
    try:
        return cls(**kwargs)
    except errors.SCMError as error:
        raise errors.SCMError(f"{where}: {error}") from error
    except (TypeError, ValueError) as error:
        raise errors.SCMError(f"{where}: {error}") from error


TERM_SCHEMA: dict[str, Any] = {
    "type": "array",
    "description": "Mechanisms that bend, added to the parents' linear terms: smooth "
    "functions of a numeric parent and interactions of two parents.",
    "items": {
        "type": "object",
        "properties": {
            "term": {"enum": sorted(TERM_KINDS)},
            "parent": {
                "oneOf": [
                    {"type": "string"},
                    {"type": "array", "items": {"type": "string"}, "minItems": 1},
                ]
            },
            "first": {"type": "string"},
            "second": {"type": "string"},
            "k": {"type": "integer", "minimum": MIN_BASIS},
            "basis": {"enum": list(SMOOTH_BASES)},
            "kernel": {"enum": list(GP_KERNELS)},
            "by": {"type": ["string", "null"]},
            "lower": {"type": ["number", "array", "null"], "items": {"type": "number"}},
            "upper": {"type": ["number", "array", "null"], "items": {"type": "number"}},
            "prior": {"type": ["object", "null"]},
            "prior_sd": {"type": "object"},
            "prior_lengthscale": {"type": "object"},
            "column": {"type": "string"},
            "slopes": {"type": "array", "items": {"type": "string"}},
            "levels": {"type": ["array", "null"], "items": {"type": "string"}},
        },
        "required": ["term"],
        "additionalProperties": False,
    },
}
"""JSON Schema of a spec's ``terms`` in the SCM file."""
