"""One bending term of one node's equation: design columns, numpy effect, Stan text.

Every term is evaluated by :meth:`EquationTerm.effect` in numpy (shape ``(S, N)``, or
``(S, N, C)`` for a categorical node's ``C`` predictors) and written into the Stan
programs as extra columns of the node's design matrix (:meth:`EquationTerm.columns`:
the very same basis, passed as data) with the declarations and priors of
:meth:`EquationTerm.stan_parameters`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from counterfair import errors
from counterfair.logs import user_stacklevel
from counterfair.model.nodes import Prior, stan_real
from counterfair.model.terms.bases import OUTSIDE_RANGE, outside_range, smooth_basis, smooth_width
from counterfair.model.terms.declare import HSGP_BOUNDARY, GroupEffect, Interaction, Smooth, Term
from counterfair.model.terms.group_codes import groups_name
from counterfair.model.terms.stan_functions import (
    HSGP_FUNCTIONS,
    SUM_TO_ZERO_FUNCTION,
    dims_suffix,
    spd_expression,
)


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
        x, surface = self._inputs(values, codes)
        basis = smooth_basis(surface, term)
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
        x, surface = self._inputs(values, codes)
        self._warn_outside(term, surface)
        basis = smooth_basis(surface, term)  # (..., N, q)
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

    def _inputs(
        self, values: Mapping[str, np.ndarray], codes: Mapping[str, np.ndarray]
    ) -> tuple[np.ndarray, Any]:
        """A smooth's first input, and what its basis reads (that input, or both of a
        surface's inputs broadcast to one shape)."""
        term = self.term
        assert isinstance(term, Smooth)
        xs = [np.asarray(p.read(values, codes), dtype=float) for p in self.parents[: term.dims]]
        if term.dims == 1:
            return xs[0], xs[0]
        pair = tuple(np.broadcast_arrays(*xs))
        return pair[0], pair

    def _warn_outside(self, term: Smooth, surface: Any) -> None:
        """One warning per input with values outside the training range (count of rows)."""
        inputs = (surface,) if term.dims == 1 else surface
        for margin, x in zip(term.margins(), inputs, strict=True):
            outside = outside_range(margin, x)
            if outside:
                lower, upper = margin.span()
                warnings.warn(
                    OUTSIDE_RANGE.format(
                        node=self.node, label=term.label, count=outside, lower=lower, upper=upper
                    ),
                    errors.RangeWarning,
                    stacklevel=user_stacklevel(),
                )

    def contribution(
        self,
        params: Mapping[str, np.ndarray],
        values: Mapping[str, np.ndarray],
        codes: Mapping[str, np.ndarray],
    ) -> np.ndarray:
        """:meth:`effect` with the term's own parameters read from ``params`` (by name)."""
        sds = [params[name] for name in self.numpy_names()]
        return self.effect(params[self.param], values, codes, sds[0] if sds else None)

    # ---------------------------------------------------------------- Stan
    def stan_parameters(self, prior_weights: Prior, scaled: str) -> list[tuple[str, str]]:
        """(declaration, comment) of the fit program's parameters of the term."""
        term = self.term
        width = self.width()
        if isinstance(term, GroupEffect):
            count = 1 + len(term.slopes)
            groups = groups_name(term.column)
            columns = str(count) if self.predictors is None else f"{count} * ({self.predictors})"
            return [
                (
                    f"matrix[{groups} - 1, {columns}] zu_{self.stem}",
                    f"standardised group effects {term.label} on {self.node}, in the "
                    "sum-to-zero basis",
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
        curves = "1"
        if term.by is not None:
            levels = self.parents[1].levels
            kind = (
                f"vector{scaled}[{levels} - 1]"
                if self.predictors is None
                else f"matrix{scaled}[{levels} - 1, {self.predictors}]"
            )
            out.append(
                (
                    f"{kind} bs_{stem}",
                    f"extra slope of {term.parent} on {self.node} per non-reference level of "
                    f"{term.by}",
                )
            )
            curves = f"{levels}"
        if self.predictors is not None:  # one curve per predictor of a categorical node
            curves = self.predictors if term.by is None else f"{curves} * ({self.predictors})"
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

    def stan_transformed_data(self) -> list[tuple[str, str]]:
        """(definition, comment) of the fit program's transformed data of the term."""
        term = self.term
        if isinstance(term, GroupEffect):
            groups = groups_name(term.column)
            return [
                (
                    f"matrix[{groups}, {groups} - 1] Q_{self.stem} = sum_to_zero_basis({groups})",
                    f"orthonormal basis of the effects of {term.label} that sum to zero",
                )
            ]
        if isinstance(term, Smooth) and term.basis == "hsgp":
            k = term.k
            omega = f"pi() * linspaced_vector({k}, 1, {k}) / {stan_real(2.0 * HSGP_BOUNDARY)}"
            if term.dims == 1:
                return [
                    (
                        f"vector[{k}] omega_{self.stem} = {omega}",
                        f"frequencies of the HSGP basis of {term.label}",
                    )
                ]
            square = f"square({omega})"
            return [
                (
                    f"vector[{k} * {k}] omega_{self.stem} = sqrt(to_vector(rep_matrix({square}, "
                    f"{k}) + rep_matrix({square}', {k})))",
                    f"length of the frequency vector of each basis function of {term.label} "
                    "(first parent's index fastest)",
                )
            ]
        return []

    def stan_functions(self) -> list[str]:
        """Stan functions the fit program needs for the term."""
        term = self.term
        if isinstance(term, GroupEffect):
            return [SUM_TO_ZERO_FUNCTION]
        if not isinstance(term, Smooth) or term.basis != "hsgp":
            return []
        if term.by is not None or self.predictors is not None:
            return [HSGP_FUNCTIONS[term.kernel + dims_suffix(term)]]
        return []

    def stan_transformed(self) -> list[tuple[str, str]]:
        """(definition, comment) of the effective coefficients (fit program)."""
        term = self.term
        if isinstance(term, Interaction):
            return []
        width = self.width()
        stem = self.stem
        if isinstance(term, GroupEffect):
            count = 1 + len(term.slopes)
            groups = groups_name(term.column)
            centred = f"Q_{stem} * zu_{stem}"
            if self.predictors is None:
                body = f"to_vector(diag_post_multiply({centred}, sdu_{stem}))"
                return [
                    (
                        f"vector[{width}] {self.param} = {body}",
                        f"effects {term.label}: every group's intercept, then each slope's",
                    )
                ]
            sds = f"rep_vector(sdu_{stem}[1], {groups})"
            for j in range(2, count + 1):
                sds = f"append_row({sds}, rep_vector(sdu_{stem}[{j}], {groups}))"
            body = f"diag_pre_multiply({sds}, to_matrix({centred}, {width}, {self.predictors}))"
            return [
                (
                    f"matrix[{width}, {self.predictors}] {self.param} = {body}",
                    f"effects {term.label}: every group's intercept, then each slope's, one "
                    f"column per level of {self.node}",
                )
            ]
        if term.basis == "ps":
            weights = f"zs_{stem} * diag_matrix(sds_{stem})"
        elif term.by is None and self.predictors is None:
            spd = spd_expression(term, stem)
            weights = f"diag_pre_multiply({spd}, zgp_{stem})"
        else:
            spd = (
                f"hsgp_spd_{term.kernel}{dims_suffix(term)}(omega_{stem}, sdgp_{stem}, lsgp_{stem})"
            )
            weights = f"zgp_{stem} .* {spd}"
        if self.predictors is not None:  # a matrix: one column of weights per predictor
            if term.by is not None:
                levels = self.parents[1].levels
                curves = f"{levels} * {smooth_width(term)}"
                matrix = f"to_matrix({weights}, {curves}, {self.predictors})"
                weights = f"append_row(bs_{stem}, {matrix})"
            return [
                (
                    f"matrix[{width}, {self.predictors}] {self.param} = {weights}",
                    f"weights of the columns of {term.label}, one column per level of {self.node}",
                )
            ]
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
            groups = groups_name(term.column)
            return [
                # unit marginal variance of each group's effect under the sum-to-zero basis
                f"to_vector(zu_{self.stem}) ~ normal(0.0, inv_sqrt(1.0 - inv({groups})));",
                f"sdu_{self.stem} ~ {term.prior_sd.stan()};",
            ]
        stem = self.stem
        lines = [f"to_vector(bs_{stem}) ~ {prior_weights.stan()};"] if term.by else []
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


def _group_effect(
    equation_term: EquationTerm,
    coefficients: np.ndarray,
    sds: np.ndarray,
    values: Mapping[str, np.ndarray],
    codes: Mapping[str, np.ndarray],
) -> np.ndarray:
    """A group effect's contribution, ``(S, N)`` (``(S, N, C)`` for a categorical node).

    ``coefficients`` is ``(S, groups x (1 + slopes))`` (every group's intercept, then each
    slope's), with a trailing ``C`` axis for a categorical node's predictors. A group
    unseen in training draws its effects from ``Normal(0, sd)``: the same draw for every
    row of that group (keyed by its code), one per parameter set and predictor.
    """
    term = equation_term.term
    assert isinstance(term, GroupEffect) and term.levels is not None
    s = coefficients.shape[0]
    trailing = coefficients.shape[2:]
    pad = (1,) * len(trailing)
    count = 1 + len(term.slopes)
    groups = len(term.levels)
    effects = coefficients.reshape(s, count, groups, *trailing)  # intercepts, then slopes
    code = np.asarray(codes[term.column], dtype=np.int64)
    n = code.shape[-1]
    index = np.broadcast_to(code, (s, n))
    seen = index >= 0
    safe = np.where(seen, index, 0).reshape(s, n, *pad)
    seen_ = seen.reshape(s, n, *pad)
    xs = [np.ones((s, n, *pad))] + [
        np.broadcast_to(np.asarray(p.read(values, codes), dtype=float), (s, n)).reshape(s, n, *pad)
        for p in equation_term.parents
    ]
    out = np.zeros((s, n, *trailing))
    for j in range(count):
        chosen = np.take_along_axis(effects[:, j], safe, axis=1)
        out += np.where(seen_, chosen, 0.0) * xs[j]
    if not seen.all():
        scale = np.asarray(sds).reshape(s, count, *pad)
        for key in np.unique(index[~seen]):
            generator = np.random.Generator(np.random.Philox(key=int(-key)))
            draw = generator.standard_normal((s, count, *trailing)) * scale
            at = (index == key).reshape(s, n, *pad)
            for j in range(count):
                out += np.where(at, draw[:, j][:, None] * xs[j], 0.0)
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
