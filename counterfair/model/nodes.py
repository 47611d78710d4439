"""Node specifications: what each node of a structural causal model is.

Every node of the user's ``networkx.DiGraph`` carries one of these frozen
dataclasses under the attribute :data:`SPEC_KEY` (``"spec"``):

* :class:`Protected` -- a protected attribute, a root of the graph: categorical
  (race, sex, ...; the default) or continuous (age; ``kind="continuous"``);
* :class:`Latent` -- an exogenous latent variable (a student's knowledge K), a
  root of the graph, Normal(loc, scale) a priori;
* :class:`Observed` -- the base of every observed node, whose linear predictor is
  built from its parents. Each distribution family (:class:`Normal`,
  :class:`Poisson`, :class:`Bernoulli`, :class:`NegativeBinomial`,
  :class:`Ordinal`, :class:`Categorical`) defines its spec in its own module of
  :mod:`counterfair.model.families`, which builds on this module.

Users import all of them from :mod:`counterfair` or :mod:`counterfair.model.specs`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

SPEC_KEY = "spec"
"""Name of the node attribute that holds a node's spec."""

PRIOR_FAMILIES: dict[str, int] = {
    "normal": 2,
    "student_t": 3,
    "cauchy": 2,
    "lognormal": 2,
    "inv_gamma": 2,
    "gamma": 2,
    "exponential": 1,
}
"""Stan distributions allowed as priors, with their number of arguments."""


MAX_CONSTANT = 1e100
"""Largest magnitude of a number in a spec (a prior argument, a fixed sigma, a latent's
location and scale): squares and sums of such numbers stay finite in float64, and
nothing a model needs is larger."""


def check_constant(value: object, what: str) -> float:
    """``value`` as a float if it is a finite number of magnitude at most :data:`MAX_CONSTANT`.

    Raises
    ------
    ValueError
        Naming ``what`` and the value (a string, a boolean, NaN, infinity, 1e308, ...).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy numbers too
        raise ValueError(f"{what} must be a number, got {value!r}")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float64
        number = math.inf
    if not math.isfinite(number) or abs(number) > MAX_CONSTANT:
        raise ValueError(
            f"{what} must be a finite number of magnitude at most {MAX_CONSTANT:g}, "
            f"got {value!r}"
        )
    return number


def stan_real(value: float) -> str:
    """Format a number as a Stan real literal (always with a decimal point).

    Stan's GLM functions in the Stan bundled with httpstan 4.13 fail at run time
    when a scale is an integer literal, so generated code never emits one.
    """
    if not math.isfinite(value):
        raise ValueError(f"prior and spec constants must be finite, got {value!r}")
    text = repr(float(value))
    return text if ("." in text or "e" in text) else text + ".0"


@dataclass(frozen=True)
class Prior:
    """A prior distribution written as a Stan sampling statement.

    Parameters
    ----------
    family : str
        Name of a Stan distribution, one of :data:`PRIOR_FAMILIES`.
    args : tuple of float
        Its arguments, e.g. ``(0.0, 1.0)`` for ``normal(0, 1)``.

    Examples
    --------
    >>> Prior("normal", (0.0, 2.5)).stan()
    'normal(0.0, 2.5)'
    """

    family: str
    args: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.family not in PRIOR_FAMILIES:
            known = ", ".join(sorted(PRIOR_FAMILIES))
            raise ValueError(f"unknown prior family {self.family!r}; known families: {known}")
        expected = PRIOR_FAMILIES[self.family]
        if len(self.args) != expected:
            raise ValueError(
                f"prior {self.family!r} takes {expected} argument(s), got {len(self.args)}"
            )
        object.__setattr__(
            self,
            "args",
            tuple(check_constant(a, f"argument {i + 1} of prior {self.family!r}")
                  for i, a in enumerate(self.args)),
        )

    def stan(self) -> str:
        """Return the right-hand side of a Stan sampling statement."""
        return f"{self.family}({', '.join(stan_real(a) for a in self.args)})"


def normal_prior(loc: float = 0.0, scale: float = 1.0) -> Prior:
    """Normal(loc, scale) prior, the default for intercepts, weights and loadings."""
    return Prior("normal", (loc, scale))


def inv_gamma_prior(shape: float = 1.0, scale: float = 1.0) -> Prior:
    """Inverse-gamma(shape, scale) prior, the default for a Normal node's variance."""
    return Prior("inv_gamma", (shape, scale))


@dataclass(frozen=True)
class NodeSpec:
    """Base class of every node spec.

    ``role`` says what the node is: ``"protected"``, ``"latent"`` or ``"observed"``.
    """

    role: ClassVar[str] = "node"


PROTECTED_KINDS = ("categorical", "continuous")
"""Kinds of protected attribute."""

MAX_IMPLICIT_LEVELS = 10
"""Most distinct numeric values a protected column may have without declared levels.

A numeric protected column with more (an age in years, say) is almost surely a
number rather than a set of categories: :class:`~counterfair.model.encoding.Encoding`
refuses it and says how to declare it.
"""


@dataclass(frozen=True)
class Protected(NodeSpec):
    """A protected attribute; must be a root of the graph.

    Parameters
    ----------
    levels : sequence of str, optional
        The levels of a categorical attribute. When omitted they are taken from
        the data at fit time (the categories of a pandas Categorical column, else
        the sorted distinct values; a numeric column with more than
        :data:`MAX_IMPLICIT_LEVELS` distinct values is refused, as it is most
        likely a number).
    reference : str, optional
        Reference level for reference (dummy) coding; defaults to the first level.
    kind : {"categorical", "continuous"}
        ``"categorical"`` (default): each level has its own effect on every
        child (reference or one-hot coding). ``"continuous"``: a number (an age)
        that enters every child's linear predictor linearly, one weight
        ``beta_<child>_<node>`` per child; ``do(node=value)`` sets it to any
        number.

    Examples
    --------
    >>> Protected(kind="continuous").continuous
    True
    """

    role: ClassVar[str] = "protected"
    levels: tuple[str, ...] | None = None
    reference: str | None = None
    kind: str = "categorical"

    @property
    def continuous(self) -> bool:
        """Whether the attribute is a number entering its children linearly."""
        return self.kind == "continuous"

    def __post_init__(self) -> None:
        if self.kind not in PROTECTED_KINDS:
            raise ValueError(
                f"a protected attribute's kind is one of {PROTECTED_KINDS}, got {self.kind!r}"
            )
        if self.continuous and (self.levels is not None or self.reference is not None):
            raise ValueError(
                "a continuous protected attribute has no levels or reference level; "
                "drop levels= and reference=, or use kind='categorical'"
            )
        if self.levels is not None:
            levels = tuple(str(level) for level in self.levels)
            if len(levels) < 2:
                raise ValueError(f"a protected attribute needs at least 2 levels, got {levels}")
            if len(set(levels)) != len(levels):
                raise ValueError(f"protected levels must be distinct, got {levels}")
            object.__setattr__(self, "levels", levels)
            if self.reference is not None and str(self.reference) not in levels:
                raise ValueError(
                    f"reference level {self.reference!r} is not one of the levels {levels}"
                )


@dataclass(frozen=True)
class Latent(NodeSpec):
    """An exogenous latent variable, Normal(loc, scale) a priori; a root of the graph.

    Its values are never observed: they are sampled per individual by MCMC
    (abduction). The first child of each latent (in graph order) gets a positive
    loading, which removes the sign ambiguity of (K, w) versus (-K, -w).
    """

    role: ClassVar[str] = "latent"
    kind: ClassVar[str] = "latent"
    loc: float = 0.0
    scale: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "loc", check_constant(self.loc, "a latent's loc"))
        object.__setattr__(self, "scale", check_constant(self.scale, "a latent's scale"))
        if not self.scale > 0:
            raise ValueError(f"a latent's scale must be positive, got {self.scale}")


@dataclass(frozen=True)
class Observed(NodeSpec):
    """An observed node: a distribution family whose linear predictor uses the parents.

    Parameters
    ----------
    intercept : bool
        Include an intercept in the linear predictor (needed with reference coding).
    prior_intercept, prior_weights : Prior
        Priors of the intercept and of every weight and latent loading
        (default Normal(0, 1), as in Kusner et al. 2017).
    terms : sequence of terms, optional
        Mechanisms that bend, added to the linear terms of the parents:
        :class:`~counterfair.model.terms.Smooth` (a smooth function of a numeric
        parent) and :class:`~counterfair.model.terms.Interaction` (the product of
        two parents); see :mod:`counterfair.model.terms`.
    loading_by : str, optional
        A categorical parent (a categorical protected attribute, or an ordinal or
        categorical parent) by whose level every latent's loading on this node
        differs: measurement non-invariance. The loading of the reference level is
        ``lambda_<node>_<latent>``; each other level adds ``dlambda_<node>_<latent>``.
    """

    family: ClassVar[str] = "observed"
    link: ClassVar[str] = "identity"
    role: ClassVar[str] = "observed"
    kind: ClassVar[str] = "observed"
    intercept: bool = True
    prior_intercept: Prior = field(default_factory=normal_prior)
    prior_weights: Prior = field(default_factory=normal_prior)
    terms: tuple[Any, ...] = ()
    loading_by: str | None = None

    def __post_init__(self) -> None:
        terms = self.terms
        if terms is None:
            terms = ()
        elif isinstance(terms, list):
            terms = tuple(terms)
        elif not isinstance(terms, tuple):
            terms = (terms,)
        object.__setattr__(self, "terms", terms)
        if self.loading_by is not None and not isinstance(self.loading_by, str):
            raise ValueError(f"loading_by names one parent, got {self.loading_by!r}")


def levels_tuple(values: Sequence[object]) -> tuple[str, ...]:
    """Return levels as a tuple of strings (the form specs and fits store)."""
    return tuple(str(v) for v in values)


def plain(value: Any) -> Any:
    """``value`` as plain Python, for JSON files and Stan's data: the one converter.

    A :class:`Prior` becomes ``{"family", "args"}``; numpy arrays and scalars become
    lists and numbers; tuples become lists and mappings get string keys, recursively.
    """
    if isinstance(value, Prior):
        return {"family": value.family, "args": list(value.args)}
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy arrays and scalars
        return value.tolist()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return value
