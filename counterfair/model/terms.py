"""Mechanisms that bend: smooth terms and interactions in a node's linear predictor.

By default every parent enters an observed node's linear predictor additively and
linearly (:mod:`counterfair.model.equation`). A spec's ``terms=`` adds, on top of
those linear terms:

* :class:`Smooth` -- a smooth function of one numeric parent (a continuous protected
  attribute such as age, or a Normal or count parent), either a penalised B-spline
  (``basis="ps"``: P-splines, Eilers and Marx 1996, in their mixed-model form, so
  that the wiggliness has a learned sd as in mgcv's and brms's ``s(x)``) or a
  Hilbert-space approximate Gaussian process (``basis="hsgp"``: Solin and Särkkä
  2020; Riutort-Mayol et al. 2023, as brms's ``gp(x, k=)``), optionally one curve per
  level of a categorical parent (``by=``);
* :class:`Interaction` -- the product of two parents (protected x observed, observed x
  observed; a categorical parent enters as its reference-coded indicators).

The linear term of each parent stays: a smooth term adds only what bends (the
penalised part of a P-spline lies outside the null space of its difference penalty,
which is the constant and the straight line), so ``terms=()`` is today's GLM and a
smooth whose sd shrinks to 0 falls back to it.

What a term learns from the training rows (the range of its parent: the spline's
knots and the GP's centre and scale) is kept in the term itself
(:meth:`Smooth.learned`): :func:`learn_terms` returns the spec with every range
filled in, the fit keeps that spec, and the same knots apply to new rows and to
counterfactual rows. A value outside the training range is clipped for the bending
part only (the straight line goes on), with one warning naming the node and the number
of rows (:func:`outside_range`), never NaN.

Every term is evaluated by the one function :func:`term_effect` in numpy (shape
``(S, N)``, for parent values of shape ``(N,)`` or ``(S, N)``: a counterfactual world
recomputes each node's bending terms from its parents' values in that world), and
written into the Stan programs as extra columns of the node's design matrix
(:func:`term_columns`: the very same basis, passed as data) with the coefficient
declarations and priors of :meth:`EquationTerm.stan_parameters`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from counterfair import errors
from counterfair.logs import user_stacklevel
from counterfair.model.nodes import Prior

OUTSIDE_RANGE = (
    "node {node!r}, term {label}: {count} row(s) have a parent value outside the training "
    "range [{lower:g}, {upper:g}]; the smooth part is held at its boundary value there and "
    "only the straight line extrapolates"
)

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
    parent : str
        A numeric parent: a continuous protected attribute, or a Normal, Poisson or
        negative binomial parent.
    k : int
        Basis size (default 10): B-splines of degree 3 for ``"ps"`` (``k - 2``
        penalised columns: the straight line is the parent's own linear term), sine
        functions for ``"hsgp"`` (``k`` columns).
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
    lower, upper : float, optional
        The parent's range the basis spans. Learned from the training rows (their
        minimum and maximum) when the SCM is fitted; give them to fix the knots.
    """

    kind: ClassVar[str] = "smooth"
    parent: str
    k: int = 10
    basis: str = "ps"
    kernel: str = "exp_quad"
    by: str | None = None
    prior_sd: Prior = field(default_factory=half_normal_prior)
    prior_lengthscale: Prior = field(default_factory=lengthscale_prior)
    lower: float | None = None
    upper: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.parent, str):
            raise errors.SCMError(
                f"a Smooth term takes one parent by name, got {self.parent!r}; an HSGP in "
                "two or more dimensions is not supported: add one Smooth per parent"
            )
        if self.basis not in SMOOTH_BASES:
            raise errors.SCMError(
                f"Smooth({self.parent!r}): basis must be one of {SMOOTH_BASES}, got {self.basis!r}"
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
            value = getattr(self, name)
            if value is not None:
                if not math.isfinite(float(value)):
                    raise errors.SCMError(
                        f"Smooth({self.parent!r}): {name} must be finite, got {value!r}"
                    )
                object.__setattr__(self, name, float(value))
        if self.lower is not None and self.upper is not None and not self.upper > self.lower:
            raise errors.SCMError(
                f"Smooth({self.parent!r}): upper ({self.upper}) must exceed lower ({self.lower})"
            )

    @property
    def label(self) -> str:
        """How the term is written in messages: ``s(age)``, ``s(age, by=sex)``."""
        by = f", by={self.by}" if self.by else ""
        name = "s" if self.basis == "ps" else "gp"
        return f"{name}({self.parent}{by})"

    @property
    def parents(self) -> tuple[str, ...]:
        """The parents the term reads."""
        return (self.parent,) if self.by is None else (self.parent, self.by)

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


# ---------------------------------------------------------------------- parents' kinds
@dataclass(frozen=True)
class ParentKind:
    """How a term reads one parent.

    ``source`` is ``"codes"`` for a protected attribute (its codes, or a continuous
    one's values) and ``"values"`` for an observed parent; ``levels`` is the Stan
    expression of its number of levels for a categorical parent, None for a number.
    """

    name: str
    source: str
    levels: str | None

    def read(self, values: Mapping[str, np.ndarray], codes: Mapping[str, np.ndarray]) -> Any:
        """The parent's values (or level codes) in one world."""
        return (codes if self.source == "codes" else values)[self.name]


# ---------------------------------------------------------------------- bases
def _difference_transform(k: int) -> np.ndarray:
    """``T`` (``k x (k - 2)``): B-spline coefficients ``T z`` of the penalised part.

    The second-order difference penalty ``D'D`` has the straight lines as its null
    space; its other eigenvectors ``U``, scaled by ``1 / sqrt(eigenvalue)``, turn the
    penalty into ``z'z`` (the mixed-model form of a P-spline). Signs are fixed (the
    largest entry of each column positive) so that the transform is the same on every
    machine.
    """
    d = np.diff(np.eye(k), PENALTY_ORDER, axis=0)
    eigenvalues, vectors = np.linalg.eigh(d.T @ d)
    keep = vectors[:, PENALTY_ORDER:] / np.sqrt(eigenvalues[PENALTY_ORDER:])
    signs = np.sign(keep[np.argmax(np.abs(keep), axis=0), np.arange(keep.shape[1])])
    return np.asarray(keep * signs, dtype=float)


def _spline_basis(x: np.ndarray, term: Smooth) -> np.ndarray:
    """The penalised P-spline columns of ``x`` (any shape), shape ``x.shape + (k - 2,)``.

    The B-spline basis is formulaic's stateful ``basis_spline`` at equally spaced knots
    over the learned range, with values outside it clipped to the boundary.
    """
    from formulaic.transforms import basis_spline

    assert term.lower is not None and term.upper is not None
    interior = np.linspace(term.lower, term.upper, term.k - SPLINE_DEGREE + 1)[1:-1]
    flat = np.clip(np.ravel(np.asarray(x, dtype=float)), term.lower, term.upper)
    columns = basis_spline(
        flat,
        knots=interior,
        degree=SPLINE_DEGREE,
        include_intercept=True,
        lower_bound=term.lower,
        upper_bound=term.upper,
        extrapolation="clip",
        _state={},
    )
    basis = np.column_stack([np.asarray(columns[key], dtype=float) for key in columns])
    out = basis @ _difference_transform(term.k)
    return out.reshape(*np.shape(x), term.k - PENALTY_ORDER)


def hsgp_frequencies(k: int) -> np.ndarray:
    """Square roots of the Laplacian eigenvalues of an HSGP basis: ``pi j / (2 c)``."""
    return np.pi * np.arange(1, k + 1) / (2.0 * HSGP_BOUNDARY)


def _hsgp_basis(x: np.ndarray, term: Smooth) -> np.ndarray:
    """The HSGP eigenfunctions at ``x`` (standardised to ``[-1, 1]``, clipped), ``(..., k)``."""
    assert term.lower is not None and term.upper is not None
    centre = 0.5 * (term.lower + term.upper)
    half = 0.5 * (term.upper - term.lower)
    z = np.clip((np.asarray(x, dtype=float) - centre) / half, -1.0, 1.0)
    omega = hsgp_frequencies(term.k)
    return np.sin((z[..., None] + HSGP_BOUNDARY) * omega) / np.sqrt(HSGP_BOUNDARY)


def smooth_basis(x: np.ndarray, term: Smooth) -> np.ndarray:
    """The bending columns of a smooth term at ``x``: shape ``x.shape + (width,)``."""
    if not term.learned:
        raise errors.SCMError(
            f"term {term.label}: its range is not known yet; fit the SCM first (the range "
            "is learned from the training rows) or give lower= and upper="
        )
    return _spline_basis(x, term) if term.basis == "ps" else _hsgp_basis(x, term)


def smooth_width(term: Smooth) -> int:
    """Number of bending columns of one curve."""
    return term.k - PENALTY_ORDER if term.basis == "ps" else term.k


# ---------------------------------------------------------------------- per equation
@dataclass(frozen=True)
class EquationTerm:
    """One bending term of one node's equation: its parents' kinds and Stan names.

    Attributes
    ----------
    node : str
        The node whose linear predictor the term enters.
    term : Smooth or Interaction
        The declared term (with its learned range once fitted).
    parents : tuple of ParentKind
        How each parent is read (``parents[0]`` the smooth's parent or the first
        factor; ``parents[1]`` the ``by`` parent or the second factor).
    param : str
        Name of the term's coefficient vector (the posterior's ``s_<node>_<parent>``,
        ``gp_<node>_<parent>``, ``beta_<node>_<first>_x_<second>``): what numpy reads.
    """

    node: str
    term: Term
    parents: tuple[ParentKind, ...]
    param: str
    predictors: str | None = None

    # ``predictors``: for a node with one linear predictor per non-reference level (a
    # categorical node), the Stan number of predictors (``n_levels_<node> - 1``); the
    # weights are then a matrix with one column per predictor, one curve each.

    @property
    def stem(self) -> str:
        """The name without its prefix: ``<node>_<parent>[_by_<by>]``."""
        return self.param.split("_", 1)[1]

    def numpy_names(self) -> list[str]:
        """Parameters numpy reads besides ``param`` (a group effect's sds, for new groups)."""
        return [f"sdu_{self.stem}"] if isinstance(self.term, GroupEffect) else []

    def sampled_names(self) -> list[str]:
        """Names of the fit program's own parameters of the term (besides ``param``)."""
        if isinstance(self.term, Interaction):
            return []
        if isinstance(self.term, GroupEffect):
            return [f"zu_{self.stem}"]
        if self.term.basis == "ps":
            return [f"zs_{self.stem}", f"sds_{self.stem}"] + (
                [f"bs_{self.stem}"] if self.term.by else []
            )
        names = [f"zgp_{self.stem}", f"sdgp_{self.stem}", f"lsgp_{self.stem}"]
        return names + ([f"bs_{self.stem}"] if self.term.by else [])

    # ---------------------------------------------------------------- widths
    def width(self) -> str:
        """Stan expression of the term's number of columns."""
        term = self.term
        if isinstance(term, GroupEffect):
            return f"{groups_name(term.column)} * {1 + len(term.slopes)}"
        if isinstance(term, Interaction):
            first, second = self.parents
            return " * ".join(
                f"({p.levels} - 1)" if p.levels is not None else "1" for p in (first, second)
            )
        curve = str(smooth_width(term))
        if term.by is None:
            return curve
        levels = self.parents[1].levels
        return f"({levels} - 1) + {levels} * {curve}"

    def n_columns(self, n_levels: Mapping[str, int]) -> int:
        """The term's number of columns, given each categorical parent's number of levels."""
        term = self.term
        if isinstance(term, GroupEffect):
            assert term.levels is not None
            return len(term.levels) * (1 + len(term.slopes))
        if isinstance(term, Interaction):
            out = 1
            for parent in self.parents:
                if parent.levels is not None:
                    out *= n_levels[parent.name] - 1
            return out
        curve = smooth_width(term)
        if term.by is None:
            return curve
        count = n_levels[self.parents[1].name]
        return (count - 1) + count * curve

    def columns(
        self,
        values: Mapping[str, np.ndarray],
        codes: Mapping[str, np.ndarray],
        n_levels: Mapping[str, int],
    ) -> np.ndarray:
        """The term's design columns for rows of one world, ``(N, width)`` (Stan's data).

        ``n_levels`` gives the number of levels of each categorical parent.
        """
        term = self.term
        if isinstance(term, GroupEffect):
            assert term.levels is not None
            code = np.asarray(codes[term.column], dtype=np.int64)
            onehot = np.zeros((code.shape[0], len(term.levels)))
            seen = code >= 0  # a group unseen in training: no column (its effect is drawn)
            onehot[np.flatnonzero(seen), code[seen]] = 1.0
            blocks = [onehot]
            for parent in self.parents:
                x = np.asarray(parent.read(values, codes), dtype=float)
                blocks.append(onehot * x[:, None])
            return np.concatenate(blocks, axis=1)
        if isinstance(term, Interaction):
            pieces = [_indicator_or_value(p, values, codes, n_levels) for p in self.parents]
            a, b = pieces
            return (a[:, :, None] * b[:, None, :]).reshape(a.shape[0], -1)
        x = np.asarray(self.parents[0].read(values, codes), dtype=float)
        basis = smooth_basis(x, term)
        if term.by is None:
            return basis
        by = self.parents[1]
        count = n_levels[by.name]
        level = np.asarray(by.read(values, codes), dtype=np.int64)
        onehot = np.eye(count)[level]  # (N, L)
        linear = onehot[:, 1:] * x[:, None]
        curves = (onehot[:, :, None] * basis[:, None, :]).reshape(x.shape[0], -1)
        return np.concatenate([linear, curves], axis=1)

    # ---------------------------------------------------------------- numpy
    def effect(
        self,
        coefficients: np.ndarray,
        values: Mapping[str, np.ndarray],
        codes: Mapping[str, np.ndarray],
        sds: np.ndarray | None = None,
    ) -> np.ndarray:
        """The term's contribution to the linear predictor, ``(S, N)`` (or ``(S, N, C)``).

        ``coefficients`` is ``(S, width)`` (``(S, width, C)`` for a categorical
        node's ``C`` predictors); parent values are ``(N,)`` or ``(S, N)``. The
        columns of :meth:`columns` times the coefficients, with each categorical
        parent's indicator looked up rather than built (a counterfactual world has
        ``S x N`` rows). ``sds`` are a group effect's sds ``(S, 1 + slopes)``: a group
        unseen in training draws its effects from them.
        """
        s = coefficients.shape[0]
        trailing = coefficients.shape[2:]
        term = self.term
        if isinstance(term, GroupEffect):
            assert sds is not None
            return _group_effect(self, coefficients, sds, values, codes)
        if isinstance(term, Interaction):
            return _interaction_effect(self.parents, coefficients, values, codes)
        x = np.asarray(self.parents[0].read(values, codes), dtype=float)
        outside = outside_range(term, x)
        if outside:
            warnings.warn(
                OUTSIDE_RANGE.format(
                    node=self.node, label=term.label, count=outside, lower=term.lower,
                    upper=term.upper,
                ),
                errors.RangeWarning,
                stacklevel=user_stacklevel(),
            )
        basis = smooth_basis(x, term)  # (..., N, q)
        q = basis.shape[-1]
        if term.by is None:
            return _contract(basis, coefficients, s)
        level = np.asarray(self.parents[1].read(values, codes), dtype=np.int64)
        count = (coefficients.shape[1] + 1) // (q + 1)
        linear = coefficients[:, : count - 1]
        curves = coefficients[:, count - 1 :].reshape(s, count, q, *trailing)
        index = np.broadcast_to(level, (s, level.shape[-1]))
        padded = np.concatenate([np.zeros((s, 1, *trailing)), linear], axis=1)
        slope = np.take_along_axis(padded, index.reshape(index.shape + (1,) * len(trailing)), 1)
        chosen = np.take_along_axis(
            curves, index.reshape(index.shape + (1,) * (1 + len(trailing))), axis=1
        )  # (S, N, q, *trailing)
        wide = np.broadcast_to(basis, (s, *basis.shape[-2:]))
        bend = np.einsum("snq,snq...->sn...", wide, chosen)
        x_b = np.broadcast_to(x, (s, x.shape[-1])).reshape((s, x.shape[-1]) + (1,) * len(trailing))
        return np.asarray(slope * x_b + bend)

    # ---------------------------------------------------------------- Stan
    def stan_parameters(self, prior_weights: Prior, scaled: str) -> list[tuple[str, str]]:
        """(declaration, comment) of the fit program's parameters of the term."""
        term = self.term
        width = self.width()
        if isinstance(term, GroupEffect):
            count = 1 + len(term.slopes)
            return [
                (
                    f"matrix[{groups_name(term.column)}, {count}] zu_{self.stem}",
                    f"standardised group effects {term.label} on {self.node}",
                ),
                (
                    f"vector<lower=0>[{count}] sdu_{self.stem}",
                    f"sds of the group effects {term.label} (intercept, then slopes)",
                ),
            ]
        if isinstance(term, Interaction):
            kind = (
                f"vector{scaled}[{width}]"
                if self.predictors is None
                else f"matrix{scaled}[{width}, {self.predictors}]"
            )
            return [(f"{kind} {self.param}", f"interaction {term.label} on {self.node}")]
        stem = self.stem
        out: list[tuple[str, str]] = []
        curve = smooth_width(term)
        if self.predictors is not None:  # one curve per predictor of a categorical node
            curves = self.predictors
        elif term.by is not None:
            levels = self.parents[1].levels
            out.append(
                (
                    f"vector{scaled}[{levels} - 1] bs_{stem}",
                    f"extra slope of {term.parent} on {self.node} per non-reference level of "
                    f"{term.by}",
                )
            )
            curves = f"{levels}"
        else:
            curves = "1"
        if term.basis == "ps":
            out += [
                (
                    f"matrix[{curve}, {curves}] zs_{stem}",
                    f"standardised spline weights of {term.label}",
                ),
                (
                    f"vector<lower=0>[{curves}] sds_{stem}",
                    f"sd of the bending part of {term.label}",
                ),
            ]
        else:
            out += [
                (
                    f"matrix[{curve}, {curves}] zgp_{stem}",
                    f"standardised HSGP weights of {term.label}",
                ),
                (f"vector<lower=0>[{curves}] sdgp_{stem}", f"magnitude of the GP {term.label}"),
                (f"vector<lower=0>[{curves}] lsgp_{stem}", f"length scale of the GP {term.label}"),
            ]
        return out

    def stan_transformed(self) -> list[tuple[str, str]]:
        """(definition, comment) of the effective coefficients (fit program)."""
        term = self.term
        if isinstance(term, Interaction):
            return []
        if isinstance(term, GroupEffect):
            return [
                (
                    f"vector[{self.width()}] {self.param} = "
                    f"to_vector(diag_post_multiply(zu_{self.stem}, sdu_{self.stem}))",
                    f"effects {term.label}: every group's intercept, then each slope's",
                )
            ]
        stem = self.stem
        width = self.width()
        if self.predictors is not None:  # a matrix: one column of weights per predictor
            if term.basis == "ps":
                weights = f"zs_{stem} * diag_matrix(sds_{stem})"
            else:
                spd = f"hsgp_spd_{term.kernel}(omega_{stem}, sdgp_{stem}, lsgp_{stem})"
                weights = f"zgp_{stem} .* {spd}"
            return [
                (
                    f"matrix[{width}, {self.predictors}] {self.param} = {weights}",
                    f"weights of the columns of {term.label}, one column per level of {self.node}",
                )
            ]
        if term.basis == "ps":
            weights = f"zs_{stem} * diag_matrix(sds_{stem})"
        else:
            spd = _spd_expression(term, stem)
            weights = (
                f"diag_pre_multiply({spd}, zgp_{stem})"
                if term.by is None
                else (f"zgp_{stem} .* {spd}")
            )
        body = f"to_vector({weights})"
        if term.by is not None:
            body = f"append_row(bs_{stem}, {body})"
        return [
            (f"vector[{width}] {self.param} = {body}", f"weights of the columns of {term.label}")
        ]

    def stan_priors(self, prior_weights: Prior) -> list[str]:
        """Prior statements of the term's parameters (fit program)."""
        term = self.term
        if isinstance(term, Interaction):
            target = self.param if self.predictors is None else f"to_vector({self.param})"
            return [f"{target} ~ {(term.prior or prior_weights).stan()};"]
        if isinstance(term, GroupEffect):
            return [
                f"to_vector(zu_{self.stem}) ~ std_normal();",
                f"sdu_{self.stem} ~ {term.prior_sd.stan()};",
            ]
        stem = self.stem
        lines = [f"bs_{stem} ~ {prior_weights.stan()};"] if term.by else []
        if term.basis == "ps":
            return [
                *lines,
                f"to_vector(zs_{stem}) ~ std_normal();",
                f"sds_{stem} ~ {term.prior_sd.stan()};",
            ]
        return [
            *lines,
            f"to_vector(zgp_{stem}) ~ std_normal();",
            f"sdgp_{stem} ~ {term.prior_sd.stan()};",
            f"lsgp_{stem} ~ {term.prior_lengthscale.stan()};",
        ]

    def stan_data_declaration(self) -> str:
        """The abduction program's data array of the effective coefficients."""
        if self.predictors is not None:
            return f"array[S] matrix[{self.width()}, {self.predictors}] {self.param}"
        return f"array[S] vector[{self.width()}] {self.param}"

    def stan_data_extra(self) -> list[tuple[str, str]]:
        """The abduction program's data arrays of :meth:`numpy_names` (with comments)."""
        if not isinstance(self.term, GroupEffect):
            return []
        count = 1 + len(self.term.slopes)
        return [
            (
                f"array[S] vector<lower=0>[{count}] sdu_{self.stem}",
                f"sds of the group effects {self.term.label}",
            )
        ]


def _spd_expression(term: Smooth, stem: str) -> str:
    """Stan expression of the square root of the spectral density at the basis frequencies.

    A ``(k x curves)`` matrix when ``by`` is given, else a ``k`` vector.
    """
    omega = f"omega_{stem}"
    sd, ls = f"sdgp_{stem}", f"lsgp_{stem}"
    if term.by is None:
        sd, ls = f"{sd}[1]", f"{ls}[1]"
        if term.kernel == "exp_quad":
            return (
                f"{sd} * sqrt(sqrt(2 * pi()) * {ls}) * exp(-0.25 * square({ls}) * square({omega}))"
            )
        return f"{sd} * 2 * (sqrt(3) / {ls})^1.5 * inv(square(sqrt(3) / {ls}) + square({omega}))"
    # one curve per level: the spd of level l in column l
    return f"hsgp_spd_{term.kernel}({omega}, {sd}, {ls})"


HSGP_FUNCTIONS = {
    "exp_quad": """\
  // square root of the exp-quad spectral density at frequencies omega, one column per curve
  matrix hsgp_spd_exp_quad(vector omega, vector sd, vector ls) {
    matrix[rows(omega), rows(sd)] out;
    for (l in 1:rows(sd)) {
      out[:, l] = sd[l] * sqrt(sqrt(2 * pi()) * ls[l]) * exp(-0.25 * square(ls[l]) * square(omega));
    }
    return out;
  }""",
    "matern32": """\
  // square root of the Matern 3/2 spectral density at frequencies omega, one column per curve
  matrix hsgp_spd_matern32(vector omega, vector sd, vector ls) {
    matrix[rows(omega), rows(sd)] out;
    for (l in 1:rows(sd)) {
      out[:, l] = sd[l] * 2 * (sqrt(3) / ls[l])^1.5 * inv(square(sqrt(3) / ls[l]) + square(omega));
    }
    return out;
  }""",
}
"""Stan functions of HSGP terms with one curve per level (``by=``)."""


def spd(term: Smooth, sd: np.ndarray, lengthscale: np.ndarray) -> np.ndarray:
    """Square root of the spectral density at the basis frequencies, ``(S, k)`` (numpy)."""
    omega = hsgp_frequencies(term.k)
    sd, ls = np.asarray(sd)[:, None], np.asarray(lengthscale)[:, None]
    if term.kernel == "exp_quad":
        return np.asarray(sd * np.sqrt(np.sqrt(2 * np.pi) * ls) * np.exp(-0.25 * ls**2 * omega**2))
    rate = np.sqrt(3.0) / ls
    return np.asarray(sd * 2.0 * rate**1.5 / (rate**2 + omega**2))


def groups_name(column: str) -> str:
    """Stan data name of the number of groups of a grouping column."""
    return f"n_groups_{column}"


UNSEEN_BASE = 2**62
"""Codes of groups unseen in training are ``-1 - (hash % UNSEEN_BASE)``: negative, and the
same for a level whatever the rows around it (chunks, worlds, partitions)."""


def unseen_code(column: str, level: str) -> int:
    """The (negative) code of a group never seen in training, stable across runs."""
    import hashlib

    digest = hashlib.sha256(f"{column}\x00{level}".encode()).digest()
    return -1 - int.from_bytes(digest[:8], "little") % UNSEEN_BASE


def group_codes(
    terms: Sequence[Term], frame: Any, *, node_names: Sequence[str] = ()
) -> dict[str, np.ndarray]:
    """Codes of the grouping columns of learned group effects: 0-based, negative if unseen.

    Raises
    ------
    DataError
        If a grouping column is missing or has missing values (naming it).
    """
    import logging

    out: dict[str, np.ndarray] = {}
    for term in terms:
        if not isinstance(term, GroupEffect) or term.levels is None or term.column in out:
            continue
        if term.column not in frame.columns:
            raise errors.DataError(
                f"column {term.column!r} is missing: it is the grouping column of "
                f"{term.label}; columns: {list(frame.columns)}"
            )
        series = frame[term.column]
        if series.isna().any():
            row = series.index[int(np.argmax(series.isna().to_numpy()))]
            raise errors.DataError(f"column {term.column!r} has a missing value at row {row!r}")
        labels = series.astype(str).to_numpy()
        index = {level: i for i, level in enumerate(term.levels)}
        codes = np.array([index.get(label, -1) for label in labels], dtype=np.int64)
        unseen = sorted({str(v) for v in labels[codes < 0]})
        if unseen:
            lookup = {level: unseen_code(term.column, level) for level in unseen}
            codes[codes < 0] = [lookup[str(v)] for v in labels[codes < 0]]
            shown = ", ".join(repr(v) for v in unseen[:5]) + (", ..." if len(unseen) > 5 else "")
            logging.getLogger("counterfair").info(
                "column %r: %d group(s) never seen in training (%s): their effects are drawn "
                "from the population distribution",
                term.column, len(unseen), shown,
            )
        out[term.column] = codes
    return out


def _group_effect(
    equation_term: EquationTerm,
    coefficients: np.ndarray,
    sds: np.ndarray,
    values: Mapping[str, np.ndarray],
    codes: Mapping[str, np.ndarray],
) -> np.ndarray:
    """A group effect's contribution; an unseen group's effects drawn from ``Normal(0, sd)``."""
    term = equation_term.term
    assert isinstance(term, GroupEffect) and term.levels is not None
    s = coefficients.shape[0]
    count = 1 + len(term.slopes)
    groups = len(term.levels)
    effects = coefficients.reshape(s, count, groups)  # column-major: intercepts, then slopes
    code = np.asarray(codes[term.column], dtype=np.int64)
    n = code.shape[-1]
    index = np.broadcast_to(code, (s, n))
    seen = index >= 0
    safe = np.where(seen, index, 0)
    xs = [np.ones((s, n))] + [
        np.broadcast_to(np.asarray(p.read(values, codes), dtype=float), (s, n))
        for p in equation_term.parents
    ]
    out = np.zeros((s, n))
    for j in range(count):
        chosen = np.take_along_axis(effects[:, j, :], safe, axis=1)
        out += np.where(seen, chosen, 0.0) * xs[j]
    if not seen.all():
        for key in np.unique(index[~seen]):
            generator = np.random.Generator(np.random.Philox(key=int(-key)))
            draw = generator.standard_normal((s, count)) * np.asarray(sds).reshape(s, count)
            at = index == key
            for j in range(count):
                out += np.where(at, draw[:, j : j + 1] * xs[j], 0.0)
    return out


def _indicator_or_value(
    parent: ParentKind,
    values: Mapping[str, np.ndarray],
    codes: Mapping[str, np.ndarray],
    n_levels: Mapping[str, int],
) -> np.ndarray:
    raw = np.asarray(parent.read(values, codes))
    if parent.levels is None:
        return raw.astype(float)[:, None]
    return np.asarray(np.eye(n_levels[parent.name])[raw.astype(np.int64)][:, 1:], dtype=float)


def _contract(basis: np.ndarray, coefficients: np.ndarray, s: int) -> np.ndarray:
    """``sum_q basis[..., n, q] * coefficients[s, q, ...]`` as ``(S, N, ...)``."""
    if basis.ndim == 2:  # shared by every set
        return np.asarray(np.einsum("nq,sq...->sn...", basis, coefficients))
    return np.asarray(np.einsum("snq,sq...->sn...", basis, coefficients))


def _interaction_effect(
    parents: tuple[ParentKind, ...],
    coefficients: np.ndarray,
    values: Mapping[str, np.ndarray],
    codes: Mapping[str, np.ndarray],
) -> np.ndarray:
    s = coefficients.shape[0]
    trailing = coefficients.shape[2:]
    raws = [np.asarray(p.read(values, codes)) for p in parents]
    n = max(np.shape(r)[-1] for r in raws)
    product = np.ones((s, n) + (1,) * len(trailing))
    weight = coefficients
    for parent, raw in zip(parents, raws, strict=True):
        if parent.levels is None:
            value = np.broadcast_to(raw.astype(float), (s, n))
            product = product * value.reshape((s, n) + (1,) * len(trailing))
    categorical = [(p, r) for p, r in zip(parents, raws, strict=True) if p.levels is not None]
    if not categorical:
        return np.asarray(product * weight[:, 0][:, None])
    _, raw = categorical[0]
    index = np.broadcast_to(raw.astype(np.int64), (s, n))
    padded = np.concatenate([np.zeros((s, 1, *trailing)), weight], axis=1)
    chosen = np.take_along_axis(padded, index.reshape(index.shape + (1,) * len(trailing)), axis=1)
    return np.asarray(product * chosen)


# ---------------------------------------------------------------------- learning ranges
def learn_range(node: str, term: Smooth, x: np.ndarray) -> Smooth:
    """The term with its range learned from the training values ``x`` of its parent.

    Raises
    ------
    SCMError
        Naming the node and the term, when the parent has fewer distinct values than
        the basis has functions (``k``), or a single value.
    """
    distinct = np.unique(np.asarray(x, dtype=float))
    if distinct.shape[0] < term.k:
        raise errors.SCMError(
            f"node {node!r}, term {term.label}: {term.parent!r} has {distinct.shape[0]} distinct "
            f"value(s) in the training rows, fewer than the basis size k={term.k}; lower k"
        )
    lower = term.lower if term.lower is not None else float(distinct[0])
    upper = term.upper if term.upper is not None else float(distinct[-1])
    return replace(term, lower=lower, upper=upper)


def outside_range(term: Smooth, x: np.ndarray) -> int:
    """Number of rows whose parent value lies outside the term's training range."""
    if not term.learned:
        return 0
    assert term.lower is not None and term.upper is not None
    values = np.asarray(x, dtype=float)
    outside = np.asarray((values < term.lower) | (values > term.upper))
    if outside.ndim > 1:
        outside = np.asarray(outside.any(axis=tuple(range(outside.ndim - 1))))
    return int(outside.sum())


def term_document(term: Term) -> dict[str, Any]:
    """A term as the SCM file writes it (``{"term": "smooth", ...}``)."""
    from dataclasses import fields

    from counterfair.model.nodes import plain

    names = ("parent", "first", "second", "column")
    out: dict[str, Any] = {"term": term.kind}
    defaults = type(term)(*(getattr(term, f.name) for f in fields(term) if f.name in names))
    for f in fields(term):
        value = getattr(term, f.name)
        if f.name in names or value != getattr(defaults, f.name):
            out[f.name] = plain(value)
    return out


# ---------------------------------------------------------------------- building
def parent_kind(node: str, parent: str, specs: Mapping[str, Any], label: str) -> ParentKind:
    """How a term of ``node`` reads ``parent`` (an error naming both when it cannot)."""
    from counterfair.model.families import family_of
    from counterfair.model.nodes import Latent, Observed, Protected

    spec = specs.get(parent)
    if spec is None:
        raise errors.SCMError(f"node {node!r}, term {label}: {parent!r} is not a node of the SCM")
    if isinstance(spec, Latent):
        raise errors.SCMError(
            f"node {node!r}, term {label}: {parent!r} is a latent; a latent enters linearly "
            "(group-specific loadings: loading_by=)"
        )
    if isinstance(spec, Protected):
        levels = None if spec.continuous else f"n_levels_{parent}"
        return ParentKind(parent, "codes", levels)
    assert isinstance(spec, Observed)
    if family_of(spec).parent_levels(spec) is not None:
        return ParentKind(parent, "values", f"n_levels_{parent}")
    return ParentKind(parent, "values", None)


def _binary(spec: Any) -> bool:
    return getattr(spec, "family", None) == "bernoulli"


def equation_terms(
    node: str,
    spec: Any,
    parents: Sequence[str],
    specs: Mapping[str, Any],
    predictors: str | None = None,
) -> tuple[tuple[EquationTerm, ...], ParentKind | None]:
    """The bending terms and the ``loading_by`` parent of one node, checked.

    Raises
    ------
    SCMError
        Naming the node and the term: a parent that is not a parent of the node, a
        smooth term of a binary or categorical parent, a ``by=`` that is not
        categorical, an interaction of two categorical parents; or a ``loading_by``
        that is not a categorical parent of a node with a latent parent.
    """
    from counterfair.model.nodes import Latent

    out: list[EquationTerm] = []
    for term in check_terms(node, spec.terms):
        if isinstance(term, GroupEffect) and term.column in specs:
            raise errors.SCMError(
                f"node {node!r}, term {term.label}: {term.column!r} is a node of the SCM; a "
                "group effect is by a column that is not a node (a node enters as a parent)"
            )
        for parent in term.parents:
            if parent not in parents:
                raise errors.SCMError(
                    f"node {node!r}, term {term.label}: {parent!r} is not a parent of {node!r} "
                    "(add the edge first)"
                )
        kinds = tuple(parent_kind(node, p, specs, term.label) for p in term.parents)
        if isinstance(term, GroupEffect):
            for kind in kinds:
                if kind.levels is not None:
                    raise errors.SCMError(
                        f"node {node!r}, term {term.label}: slope of {kind.name!r}, which is "
                        "categorical; group slopes are of numeric parents"
                    )
            if predictors is not None:
                raise errors.SCMError(
                    f"node {node!r}, term {term.label}: group effects of a categorical node are "
                    "not supported yet"
                )
            out.append(EquationTerm(node, term, kinds, f"u_{node}_{term.column}"))
            continue
        if isinstance(term, Smooth):
            if kinds[0].levels is not None or _binary(specs[term.parent]):
                raise errors.SCMError(
                    f"node {node!r}, term {term.label}: {term.parent!r} is binary or categorical; "
                    "a smooth term needs a numeric parent (an interaction or the parent's own "
                    "level effects cover a categorical one)"
                )
            if term.by is not None and kinds[1].levels is None:
                raise errors.SCMError(
                    f"node {node!r}, term {term.label}: by={term.by!r} is not categorical; by= "
                    "takes a categorical protected attribute or an ordinal or categorical parent"
                )
            stem = f"{node}_{term.parent}" + (f"_by_{term.by}" if term.by else "")
            prefix = "s" if term.basis == "ps" else "gp"
            if predictors is not None and term.by is not None:
                raise errors.SCMError(
                    f"node {node!r}, term {term.label}: by= on a categorical node is not "
                    "supported yet (it has one curve per level of its own)"
                )
            out.append(EquationTerm(node, term, kinds, f"{prefix}_{stem}", predictors))
        else:
            if kinds[0].levels is not None and kinds[1].levels is not None:
                raise errors.SCMError(
                    f"node {node!r}, term {term.label}: both parents are categorical, which is "
                    "not supported; interact a categorical parent with a numeric one"
                )
            out.append(
                EquationTerm(
                    node, term, kinds, f"beta_{node}_{term.first}_x_{term.second}", predictors
                )
            )
    by = None
    if spec.loading_by is not None:
        label = f"loading_by={spec.loading_by}"
        if spec.loading_by not in parents:
            raise errors.SCMError(
                f"node {node!r}, {label}: {spec.loading_by!r} is not a parent of {node!r}"
            )
        by = parent_kind(node, spec.loading_by, specs, label)
        if by.levels is None:
            raise errors.SCMError(
                f"node {node!r}, {label}: {spec.loading_by!r} is not categorical; loadings differ "
                "by the level of a categorical protected attribute or an ordinal or categorical "
                "parent"
            )
        if not any(isinstance(specs[p], Latent) for p in parents):
            raise errors.SCMError(
                f"node {node!r}, {label}: {node!r} has no latent parent, so it has no loading"
            )
    return tuple(out), by


def learn_terms(spec: Any, node: str, values: Mapping[str, np.ndarray]) -> Any:
    """``spec`` with the range of each smooth term learned from training values.

    ``values`` holds the training values of the node's numeric parents (protected
    continuous ones included). A term whose range was given keeps it.
    """
    terms = check_terms(node, spec.terms)
    if all(t.learned for t in terms):
        return spec
    learned: list[Term] = []
    for t in terms:
        if isinstance(t, Smooth) and not t.learned:
            learned.append(learn_range(node, t, values[t.parent]))
        elif isinstance(t, GroupEffect) and not t.learned:
            learned.append(learn_groups(node, t, values[t.column]))
        else:
            learned.append(t)
    return replace(spec, terms=tuple(learned))


def learn_groups(node: str, term: GroupEffect, labels: Any) -> GroupEffect:
    """The group effect with its groups learned from the training column (sorted).

    Raises
    ------
    SCMError
        Naming the node and the term, when the column has a single level.
    """
    levels = tuple(sorted({str(v) for v in np.asarray(labels, dtype=object)}))
    if len(levels) < 2:
        raise errors.SCMError(
            f"node {node!r}, term {term.label}: the grouping column {term.column!r} has a "
            f"single level {levels} in the training rows; a group effect needs at least 2"
        )
    return replace(term, levels=levels)


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
            "parent": {"type": "string"},
            "first": {"type": "string"},
            "second": {"type": "string"},
            "k": {"type": "integer", "minimum": MIN_BASIS},
            "basis": {"enum": list(SMOOTH_BASES)},
            "kernel": {"enum": list(GP_KERNELS)},
            "by": {"type": ["string", "null"]},
            "lower": {"type": ["number", "null"]},
            "upper": {"type": ["number", "null"]},
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
