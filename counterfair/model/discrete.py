"""Node specs of finite discrete structural causal models, whose counterfactuals are exact.

A finite discrete SCM is a networkx DAG whose nodes carry, under the attribute
``"spec"``, either

* :class:`DiscreteNoise` -- an exogenous root with a finite distribution
  (``{level: probability}``; floats or :class:`fractions.Fraction`), or
* :class:`Deterministic` -- an endogenous node whose value is a function of its
  parents' values, taking one of a finite list of levels.

Every source of randomness is thus an explicit noise root, and
:class:`counterfair.DiscreteSCM` answers interventional and counterfactual queries
exactly, by enumerating the joint noise (abduction, action, prediction; Pearl,
*Causality*, 2009, ch. 7). These specs are not Stan families: :class:`counterfair.SCM`
does not accept them (it needs a protected node and Stan-compatible names and
families).
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from numbers import Real
from typing import Any, Literal

from counterfair.errors import SCMError

FLOAT_TOLERANCE = 1e-9
"""How far from 1 float noise probabilities may sum (Fractions must sum to 1 exactly)."""

CallStyle = Literal["keywords", "mapping"]


@dataclass(frozen=True, eq=False)
class DiscreteNoise:
    """An exogenous root with a finite distribution.

    Parameters
    ----------
    probabilities : Mapping
        ``{level: probability}``. Probabilities are floats or
        :class:`fractions.Fraction` (or ints); they must be ``>= 0`` and sum to 1,
        exactly when all are exact (Fractions or ints), to within ``1e-9`` otherwise.
        Levels are hashable values (ints, strings, ...). Exact probabilities give exact
        (Fraction) query results.

    Notes
    -----
    The probabilities are checked when the model is built by
    :class:`counterfair.DiscreteSCM`, so that the error can name the node.

    Examples
    --------
    >>> from fractions import Fraction
    >>> import counterfair as cf
    >>> cf.DiscreteNoise({0: Fraction(1, 2), 1: Fraction(1, 2)}).levels
    (0, 1)
    """

    probabilities: Mapping[Hashable, Any]

    def __post_init__(self) -> None:
        if not isinstance(self.probabilities, Mapping):
            raise SCMError(
                "DiscreteNoise takes a mapping {level: probability}, got "
                f"{type(self.probabilities).__name__}"
            )
        object.__setattr__(self, "probabilities", dict(self.probabilities))

    @property
    def levels(self) -> tuple[Hashable, ...]:
        """The levels, in the order given."""
        return tuple(self.probabilities)

    @property
    def exact(self) -> bool:
        """True when every probability is a Fraction or an int (exact arithmetic)."""
        return all(_is_exact(p) for p in self.probabilities.values())

    def check(self, node: Hashable) -> None:
        """Raise :class:`~counterfair.errors.SCMError` naming ``node`` if the distribution is
        invalid."""
        if not self.probabilities:
            raise SCMError(f"noise node {node!r} has no levels; give {{level: probability}}")
        for level, p in self.probabilities.items():
            if isinstance(p, bool) or not isinstance(p, Real) or not math.isfinite(float(p)):
                raise SCMError(
                    f"noise node {node!r}: probability of level {level!r} must be a finite "
                    f"float or Fraction, got {p!r}"
                )
            if p < 0:
                raise SCMError(
                    f"noise node {node!r}: probability of level {level!r} is {p!r}, "
                    "which is negative"
                )
        total = sum(self.probabilities.values())
        if self.exact:
            if total != 1:
                raise SCMError(
                    f"noise node {node!r}: probabilities sum to {total} (exactly), not 1"
                )
        elif abs(float(total) - 1.0) > FLOAT_TOLERANCE:
            raise SCMError(
                f"noise node {node!r}: probabilities sum to {float(total)!r}, not 1 "
                f"(tolerance {FLOAT_TOLERANCE:g} for floats)"
            )


@dataclass(frozen=True, eq=False)
class Deterministic:
    """An endogenous node: a function of its parents' values with finitely many levels.

    Parameters
    ----------
    function : callable
        Receives the parents' values and returns this node's value. With
        ``call="keywords"`` (default) it is called as ``function(**{parent: value})``,
        so parent names must be Python identifiers (``lambda X, U: ...``); with
        ``call="mapping"`` it receives one dict ``{parent: value}``, for any node names.
        A node without parents is a constant (called with no arguments / an empty dict).
    levels : sequence
        The values this node can take (distinct, hashable). A value outside ``levels``
        is an error naming the node and the parent values, as is a function that
        raises.
    call : {"keywords", "mapping"}
        How the parents' values are passed (see ``function``).

    Notes
    -----
    Keyword arguments make mechanisms read like structural equations
    (``Y := X * max(U, U1)`` is ``lambda X, U, U1: X * max(U, U1)``); the mapping
    form exists because networkx nodes need not be identifiers (``"age group"``).

    Examples
    --------
    >>> import counterfair as cf
    >>> cf.Deterministic(lambda UX: UX, levels=[0, 1]).levels
    (0, 1)
    """

    function: Callable[..., Any]
    levels: Sequence[Hashable]
    call: CallStyle = field(default="keywords", kw_only=True)

    def __post_init__(self) -> None:
        if not callable(self.function):
            raise SCMError(
                f"Deterministic needs a callable function, got {type(self.function).__name__}"
            )
        if self.call not in ("keywords", "mapping"):
            raise SCMError(f"call must be 'keywords' or 'mapping', got {self.call!r}")
        if isinstance(self.levels, (str, bytes)) or not isinstance(self.levels, Sequence):
            raise SCMError(f"levels must be a list of values, got {self.levels!r}")
        object.__setattr__(self, "levels", tuple(self.levels))

    def check(self, node: Hashable, parents: Sequence[Hashable]) -> None:
        """Raise :class:`~counterfair.errors.SCMError` naming ``node`` if the spec cannot work."""
        if not self.levels:
            raise SCMError(f"node {node!r} has no levels; give levels=[...]")
        try:
            distinct = len(set(self.levels))
        except TypeError as exc:
            raise SCMError(f"node {node!r}: levels must be hashable, got {self.levels!r}") from exc
        if distinct != len(self.levels):
            raise SCMError(f"node {node!r}: levels {list(self.levels)!r} repeat a value")
        if self.call == "keywords":
            for parent in parents:
                if not (
                    isinstance(parent, str)
                    and parent.isidentifier()
                    and not keyword.iskeyword(parent)
                ):
                    raise SCMError(
                        f"node {node!r}: parent {parent!r} is not a Python identifier, so it "
                        "cannot be a keyword argument; use Deterministic(..., call='mapping') "
                        "to receive the parents' values as one dict"
                    )

    def evaluate(self, node: Hashable, values: Mapping[Hashable, Any]) -> Any:
        """This node's value given its parents' ``values``; errors name node and values."""
        try:
            if self.call == "keywords":
                out = self.function(**{str(k): v for k, v in values.items()})
            else:
                out = self.function(dict(values))
        except Exception as exc:
            raise SCMError(
                f"the function of node {node!r} raised {type(exc).__name__}: {exc} "
                f"for parent values {dict(values)!r}"
            ) from exc
        for level in self.levels:
            try:
                if out == level and hash(out) == hash(level):
                    return level
            except (TypeError, ValueError):
                break
        raise SCMError(
            f"the function of node {node!r} returned {out!r} for parent values "
            f"{dict(values)!r}, which is not one of its levels {list(self.levels)!r}"
        )


def _is_exact(p: Any) -> bool:
    return isinstance(p, (Fraction, int)) and not isinstance(p, bool)


DiscreteSpec = DiscreteNoise | Deterministic
"""Either kind of discrete node spec."""
