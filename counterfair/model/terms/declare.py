"""Declared bending terms: :class:`Smooth`, :class:`Interaction` and :class:`GroupEffect`.

What a user writes in a spec's ``terms=`` (and the SCM file reads back): the term's
parents, basis and priors, checked when the term is made. How a term becomes design
columns, Stan declarations and numpy effects lives beside it
(:mod:`counterfair.model.terms.term`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from counterfair import errors
from counterfair.model.nodes import Prior

SMOOTH_BASES = ("ps", "hsgp")
"""Kinds of smooth term: penalised B-splines and Hilbert-space approximate GPs."""

GP_KERNELS = ("exp_quad", "matern32")
"""Covariance functions of an HSGP smooth term."""

SPLINE_DEGREE = 3
"""Degree of the B-spline basis of a ``"ps"`` smooth (cubic)."""

PENALTY_ORDER = 2
"""Order of the difference penalty of a ``"ps"`` smooth: its null space is the straight line."""

HSGP_BOUNDARY = 1.5
"""Boundary factor ``c`` of an HSGP: the basis lives on ``[-c, c]`` of the standardised
parent (the training range maps to ``[-1, 1]``); Riutort-Mayol et al. (2023) advise
``c >= 1.2``."""

MIN_BASIS = 5
"""Smallest basis size ``k`` of a smooth term (a cubic B-spline basis with one interior knot)."""


def half_normal_prior(scale: float = 1.0) -> Prior:
    """Normal(0, scale) on a positive parameter (a half-normal): the default on a smooth's sd."""
    return Prior("normal", (0.0, scale))


def lengthscale_prior() -> Prior:
    """Inverse-gamma(5, 2.5) on an HSGP length scale in standardised units (mean 0.625)."""
    return Prior("inv_gamma", (5.0, 2.5))


@dataclass(frozen=True)
class Smooth:
    """A smooth function of one numeric parent, added to the node's linear predictor.

    Parameters
    ----------
    parent : str or tuple of two str
        A numeric parent: a continuous protected attribute, or a Normal, Poisson or
        negative binomial parent. Two parents make an HSGP surface (``basis="hsgp"``;
        an isotropic kernel over both parents, each scaled to ``[-1, 1]`` by its
        training range; ``by=`` is not supported there).
    k : int
        Basis size (default 10): B-splines of degree 3 for ``"ps"`` (``k - 2``
        penalised columns: the straight line is the parent's own linear term), sine
        functions for ``"hsgp"`` (``k`` columns; ``k`` per parent, ``k * k`` columns,
        for a surface).
    basis : {"ps", "hsgp"}
        Penalised B-splines in the random-effect form (coefficients ``sd * z`` with
        ``z`` standard normal, the sd learned), or a Hilbert-space approximate GP.
    kernel : {"exp_quad", "matern32"}
        Covariance of an HSGP (ignored by ``"ps"``, where another value raises).
    by : str, optional
        A categorical parent (a categorical protected attribute, or an ordinal or
        categorical parent): one curve per level, each with its own sd, plus a
        straight line per non-reference level.
    prior_sd : Prior
        Prior of the sd of the bending part (``"ps"``) or of the GP's magnitude
        (``"hsgp"``), a half-normal(0, 1) by default (on the scale of the linear
        predictor).
    prior_lengthscale : Prior
        Prior of an HSGP's length scale, in units of half the parent's training range
        (inverse-gamma(5, 2.5) by default).
    lower, upper : float or tuple of float, optional
        The parent's range the basis spans (one number per parent for a surface).
        Learned from the training rows (their minimum and maximum) when the SCM is
        fitted; give them to fix the knots.
    """

    kind: ClassVar[str] = "smooth"
    parent: str | tuple[str, ...]
    k: int = 10
    basis: str = "ps"
    kernel: str = "exp_quad"
    by: str | None = None
    prior_sd: Prior = field(default_factory=half_normal_prior)
    prior_lengthscale: Prior = field(default_factory=lengthscale_prior)
    lower: float | tuple[float, ...] | None = None
    upper: float | tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        parent = self.parent
        if not isinstance(parent, str):
            if not isinstance(parent, Sequence) or not all(isinstance(p, str) for p in parent):
                raise errors.SCMError(
                    f"a Smooth term takes a parent by name (or two, for an HSGP surface), "
                    f"got {parent!r}"
                )
            parent = tuple(parent) if len(parent) != 1 else parent[0]
            object.__setattr__(self, "parent", parent)
        if self.basis not in SMOOTH_BASES:
            raise errors.SCMError(
                f"Smooth({self.parent!r}): basis must be one of {SMOOTH_BASES}, got {self.basis!r}"
            )
        if self.dims > 1 and self.basis != "hsgp":
            raise errors.SCMError(
                f"Smooth({self.parent!r}): a smooth of {self.dims} parents is an HSGP surface; "
                "give basis='hsgp'"
            )
        if self.kernel not in GP_KERNELS:
            raise errors.SCMError(
                f"Smooth({self.parent!r}): kernel must be one of {GP_KERNELS}, got {self.kernel!r}"
            )
        if self.basis == "ps" and self.kernel != "exp_quad":
            raise errors.SCMError(
                f"Smooth({self.parent!r}): kernel={self.kernel!r} is an HSGP option and would be "
                "ignored by basis='ps'; use basis='hsgp' or drop kernel="
            )
        if (
            isinstance(self.k, bool)
            or not isinstance(self.k, int | np.integer)
            or self.k < MIN_BASIS
        ):
            raise errors.SCMError(
                f"Smooth({self.parent!r}): k must be an integer of at least {MIN_BASIS}, "
                f"got {self.k!r}"
            )
        object.__setattr__(self, "k", int(self.k))
        for name in ("lower", "upper"):
            object.__setattr__(self, name, self._bounds(name))
        for lower, upper in zip(self._each("lower"), self._each("upper"), strict=True):
            if lower is not None and upper is not None and not upper > lower:
                raise errors.SCMError(
                    f"Smooth({self.parent!r}): upper ({self.upper}) must exceed lower "
                    f"({self.lower})"
                )

    def _bounds(self, name: str) -> float | tuple[float, ...] | None:
        """``lower`` or ``upper`` checked: a number, or one number per parent."""
        value = getattr(self, name)
        if value is None:
            return None
        values = (value,) if self.dims == 1 or isinstance(value, int | float) else value
        if not isinstance(values, Sequence) or len(values) != self.dims:
            raise errors.SCMError(
                f"Smooth({self.parent!r}): {name} takes one number per parent, got {value!r}"
            )
        out = []
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int | float | np.number):
                raise errors.SCMError(
                    f"Smooth({self.parent!r}): {name} must be a number, got {value!r}"
                )
            if not math.isfinite(float(v)):
                raise errors.SCMError(f"Smooth({self.parent!r}): {name} must be finite, got {v!r}")
            out.append(float(v))
        return out[0] if self.dims == 1 else tuple(out)

    def _each(self, name: str) -> tuple[float | None, ...]:
        value = getattr(self, name)
        if value is None:
            return (None,) * self.dims
        return (value,) if isinstance(value, float) else tuple(value)

    def span(self, index: int = 0) -> tuple[float, float]:
        """The learned range ``(lower, upper)`` of input ``index``."""
        lower, upper = self._each("lower")[index], self._each("upper")[index]
        if lower is None or upper is None:
            raise errors.SCMError(f"term {self.label}: its range is not known yet")
        return lower, upper

    @property
    def inputs(self) -> tuple[str, ...]:
        """The parents the smooth function reads (one, or two for an HSGP surface)."""
        return (self.parent,) if isinstance(self.parent, str) else self.parent

    @property
    def dims(self) -> int:
        """Number of parents the smooth function reads."""
        return len(self.inputs)

    def margins(self) -> tuple[Smooth, ...]:
        """One one-parent term per input, with that input's range (its 1-D basis)."""
        if self.dims == 1:
            return (self,)
        lowers, uppers = self._each("lower"), self._each("upper")
        return tuple(
            Smooth(name, k=self.k, basis=self.basis, kernel=self.kernel, lower=lo, upper=up)
            for name, lo, up in zip(self.inputs, lowers, uppers, strict=True)
        )

    @property
    def label(self) -> str:
        """How the term is written in messages: ``s(age)``, ``s(age, by=sex)``, ``gp(x, z)``."""
        by = f", by={self.by}" if self.by else ""
        name = "s" if self.basis == "ps" else "gp"
        return f"{name}({', '.join(self.inputs)}{by})"

    @property
    def parents(self) -> tuple[str, ...]:
        """The parents the term reads: its inputs, then ``by``."""
        return self.inputs if self.by is None else (*self.inputs, self.by)

    @property
    def learned(self) -> bool:
        """Whether its range is known (given, or learned from training rows)."""
        return self.lower is not None and self.upper is not None


@dataclass(frozen=True)
class Interaction:
    """The product of two parents, added to the node's linear predictor.

    Parameters
    ----------
    first, second : str
        Two parents of the node. A numeric parent enters as its value, a categorical
        one (a categorical protected attribute, an ordinal or categorical parent) as
        its indicators of the levels other than the reference (lowest) level, so
        ``Interaction("race", "LSAT")`` gives each non-reference race its own extra
        slope on LSAT. Two categorical parents are not supported.
    prior : Prior, optional
        Prior of the interaction's weights (the node's ``prior_weights`` by default).
    """

    kind: ClassVar[str] = "interaction"
    first: str
    second: str
    prior: Prior | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.first, str) and isinstance(self.second, str)):
            raise errors.SCMError(
                f"an Interaction names two parents, got {self.first!r} and {self.second!r}"
            )
        if self.first == self.second:
            raise errors.SCMError(
                f"Interaction({self.first!r}, {self.second!r}): a parent with itself is a "
                "square; use Smooth for a curve"
            )

    @property
    def label(self) -> str:
        """``race:LSAT``."""
        return f"{self.first}:{self.second}"

    @property
    def parents(self) -> tuple[str, ...]:
        """The parents the term reads."""
        return (self.first, self.second)

    @property
    def learned(self) -> bool:
        """An interaction learns nothing from the rows."""
        return True


@dataclass(frozen=True)
class GroupEffect:
    """Partially pooled intercepts (and slopes) by a grouping column that is not a node.

    A department, a state or a court affects the node but is not a cause of interest:
    each of its levels gets an intercept ``u ~ Normal(0, sd)`` with ``sd`` learned
    (hierarchical, as lme4's and brms's ``(1 | g)``), and with ``slopes=`` also its own
    extra slope on those parents (``(1 + x | g)``; independent effects, no correlation).
    The column is the same in every world (never intervened on). A level never seen in
    training is drawn from the population distribution ``Normal(0, sd)`` (the same draw
    for every row of that level in every world and chunk), with one log line.

    Parameters
    ----------
    column : str
        The grouping column of the data (not a node of the graph).
    slopes : sequence of str
        Numeric parents whose slope also varies by group.
    prior_sd : Prior
        Prior of the groups' sds (half-normal(0, 1) by default).
    levels : sequence of str, optional
        The groups, learned from the training rows (sorted) when the SCM is fitted.
    """

    kind: ClassVar[str] = "group"
    column: str
    slopes: tuple[str, ...] = ()
    prior_sd: Prior = field(default_factory=half_normal_prior)
    levels: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise errors.SCMError(f"a GroupEffect names one grouping column, got {self.column!r}")
        slopes = (self.slopes,) if isinstance(self.slopes, str) else tuple(self.slopes)
        object.__setattr__(self, "slopes", slopes)
        if self.levels is not None:
            object.__setattr__(self, "levels", tuple(str(v) for v in self.levels))

    @property
    def label(self) -> str:
        """``(1 | dept)``, ``(1 + LSAT | dept)``."""
        return f"({' + '.join(['1', *self.slopes])} | {self.column})"

    @property
    def parents(self) -> tuple[str, ...]:
        """The parents the term reads (the slopes' parents; the column is not a node)."""
        return self.slopes

    @property
    def learned(self) -> bool:
        """Whether its groups are known."""
        return self.levels is not None


Term = Smooth | Interaction | GroupEffect
"""A bending term of a node spec's ``terms=``."""

TERM_KINDS: dict[str, type[Smooth] | type[Interaction] | type[GroupEffect]] = {
    "smooth": Smooth,
    "interaction": Interaction,
    "group": GroupEffect,
}
"""Term classes by their ``kind`` (the SCM file's ``term:`` field)."""


def check_terms(node: str, terms: object) -> tuple[Term, ...]:
    """A spec's ``terms=`` as a tuple of terms, or an error naming the node."""
    if terms is None:
        return ()
    if isinstance(terms, Smooth | Interaction | GroupEffect):
        return (terms,)
    if isinstance(terms, str) or not isinstance(terms, Sequence):
        raise errors.SCMError(
            f"node {node!r}: terms= takes a list of cf.Smooth / cf.Interaction, got {terms!r}"
        )
    out = []
    for term in terms:
        if not isinstance(term, Smooth | Interaction | GroupEffect):
            raise errors.SCMError(
                f"node {node!r}: {term!r} is not a term (cf.Smooth, cf.Interaction or "
                "cf.GroupEffect)"
            )
        out.append(term)
    labels = [t.label for t in out]
    for label in labels:
        if labels.count(label) > 1:
            raise errors.SCMError(f"node {node!r}: term {label} is declared twice")
    return tuple(out)
