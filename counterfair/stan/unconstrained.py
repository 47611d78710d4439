"""A fit program's parameters on Stan's unconstrained scale, and back.

NUTS runs on the unconstrained scale: a ``real<lower=0>`` variance is sampled as its
log, a ``real<multiplier=s>`` coefficient as the coefficient over ``s``, ordered
cutpoints as the first cutpoint and the logs of the gaps. The sampler's metric lives
there too, so a metric learned elsewhere (:mod:`counterfair.stan.laplace_start`, from
the Hessian at the mode) must be computed there, and the chains' starting points must
be mapped back to the constrained values CmdStan reads as inits.

:class:`Unconstrained` reads the parameters block of a generated program and applies
Stan's transforms, in Stan's order (declaration order; matrices column-major). It
covers the declarations counterfair generates: ``real``, ``vector``, ``row_vector``
and ``matrix`` with no constraint, ``lower=``, ``offset=`` and ``multiplier=`` (a
number or a scalar data variable), and ``ordered`` / ``positive_ordered`` vectors.
Anything else (an array of parameters, an upper bound, a simplex) raises
:class:`UnsupportedParametersError`, naming the declaration, and the caller falls back to a
start that does not need the transform.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Declaration", "Unconstrained", "UnsupportedParametersError", "declarations"]


class UnsupportedParametersError(ValueError):
    """A parameter declaration whose unconstrained transform is not implemented here."""


_DECLARATION = re.compile(
    r"^(?P<kind>real|vector|row_vector|matrix|ordered|positive_ordered)"
    r"(?:<(?P<constraint>[^>]*)>)?"
    r"(?:\[[^\]]*\])?\s+(?P<name>\w+)\s*$"
)
_CONSTRAINT = re.compile(r"^\s*(lower|offset|multiplier)\s*=\s*(.+?)\s*$")


@dataclass(frozen=True)
class Declaration:
    """One declaration of the parameters block.

    Attributes
    ----------
    name : str
        The parameter's Stan name.
    kind : str
        ``real``, ``vector``, ``row_vector``, ``matrix``, ``ordered`` or
        ``positive_ordered``.
    lower, offset, multiplier : str or None
        The constraint's bounds as written (a number or a data variable's name).
    """

    name: str
    kind: str
    lower: str | None = None
    offset: str | None = None
    multiplier: str | None = None


def _parameters_block(code: str) -> list[str]:
    """The statements of the program's ``parameters`` block, comments removed."""
    match = re.search(r"^parameters\s*\{(.*?)^\}", code, flags=re.M | re.S)
    if match is None:
        return []
    body = re.sub(r"//[^\n]*", "", match.group(1))
    return [s.strip() for s in body.split(";") if s.strip()]


def declarations(code: str) -> list[Declaration]:
    """The parameters block of ``code``, in order.

    Raises
    ------
    UnsupportedParametersError
        For a declaration this module cannot transform (it is quoted).
    """
    found = []
    for statement in _parameters_block(code):
        match = _DECLARATION.match(" ".join(statement.split()))
        if match is None:
            raise UnsupportedParametersError(
                f"parameter declaration {statement!r} is not supported"
            )
        bounds: dict[str, str] = {}
        constraint = match.group("constraint")
        for part in constraint.split(",") if constraint else []:
            piece = _CONSTRAINT.match(part)
            if piece is None:
                raise UnsupportedParametersError(
                    f"constraint {part.strip()!r} of parameter {match.group('name')!r} "
                    "is not supported"
                )
            bounds[piece.group(1)] = piece.group(2)
        kind = match.group("kind")
        if bounds and kind in ("ordered", "positive_ordered"):
            raise UnsupportedParametersError(
                f"constraint on the {kind} parameter {match.group('name')!r} is not supported"
            )
        if "lower" in bounds and ("offset" in bounds or "multiplier" in bounds):
            raise UnsupportedParametersError(
                f"parameter {match.group('name')!r} has a lower bound and an affine transform"
            )
        found.append(Declaration(match.group("name"), kind, **bounds))
    return found


def _value(text: str | None, data: Mapping[str, Any], default: float, name: str) -> float:
    """A bound written as a number or as a scalar data variable."""
    if text is None:
        return default
    try:
        return float(text)
    except ValueError:
        pass
    if text in data and np.ndim(data[text]) == 0:
        return float(data[text])
    raise UnsupportedParametersError(
        f"bound {text!r} of parameter {name!r} is neither a number nor scalar data"
    )


@dataclass(frozen=True)
class Unconstrained:
    """The map between a program's constrained parameters and its unconstrained vector.

    Build it with :meth:`of`; ``shapes`` gives each parameter's constrained shape.
    """

    parts: tuple[tuple[Declaration, tuple[int, ...], float, float], ...]
    """Per parameter: its declaration, shape, and location and scale of its transform."""

    @classmethod
    def of(
        cls, code: str, shapes: Mapping[str, tuple[int, ...]], data: Mapping[str, Any]
    ) -> Unconstrained:
        """The transform of ``code``'s parameters with ``shapes``, bounds read from ``data``."""
        parts = []
        for decl in declarations(code):
            if decl.name not in shapes:
                raise UnsupportedParametersError(f"no shape given for parameter {decl.name!r}")
            if decl.lower is not None:
                location, scale = _value(decl.lower, data, 0.0, decl.name), 1.0
            else:
                location = _value(decl.offset, data, 0.0, decl.name)
                scale = _value(decl.multiplier, data, 1.0, decl.name)
                if not scale > 0:
                    raise UnsupportedParametersError(
                        f"multiplier of parameter {decl.name!r} is {scale}, not positive"
                    )
            parts.append((decl, tuple(int(n) for n in shapes[decl.name]), location, scale))
        return cls(tuple(parts))

    @property
    def size(self) -> int:
        """Number of unconstrained parameters."""
        return sum(int(np.prod(shape)) for _, shape, _, _ in self.parts)

    @property
    def names(self) -> list[str]:
        """The parameters, in Stan's order."""
        return [decl.name for decl, _, _, _ in self.parts]

    def unconstrain(self, values: Mapping[str, Any]) -> np.ndarray:
        """The unconstrained vector of one set of constrained ``values``."""
        pieces = []
        for decl, shape, location, scale in self.parts:
            x = np.asarray(values[decl.name], dtype=float)
            if x.shape != shape:
                raise ValueError(f"parameter {decl.name!r} has shape {x.shape}, expected {shape}")
            x = x.ravel(order="F")
            if decl.kind == "ordered":
                x = np.concatenate([x[:1], np.log(np.diff(x))])
            elif decl.kind == "positive_ordered":
                x = np.log(np.concatenate([x[:1], np.diff(x)]))
            elif decl.lower is not None:
                x = np.log(x - location)
            else:
                x = (x - location) / scale
            pieces.append(x)
        return np.concatenate(pieces) if pieces else np.empty(0)

    def constrain(self, u: np.ndarray) -> dict[str, np.ndarray]:
        """Constrained values (name to array of its shape) of the unconstrained ``u``."""
        u = np.asarray(u, dtype=float)
        if u.shape != (self.size,):
            raise ValueError(f"expected {self.size} unconstrained values, got shape {u.shape}")
        out, position = {}, 0
        for decl, shape, location, scale in self.parts:
            count = int(np.prod(shape))
            x = u[position : position + count]
            position += count
            if decl.kind == "ordered":
                x = np.cumsum(np.concatenate([x[:1], np.exp(x[1:])]))
            elif decl.kind == "positive_ordered":
                x = np.cumsum(np.exp(x))
            elif decl.lower is not None:
                x = location + np.exp(x)
            else:
                x = location + scale * x
            out[decl.name] = x.reshape(shape, order="F")
        return out
