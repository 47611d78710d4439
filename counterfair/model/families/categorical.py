"""The categorical family: ``K`` unordered levels, softmax with a reference level.

Level ``k`` (code ``k``, ``0 .. K-1``, code 0 the reference level) has
probability ``softmax(0, eta_1, .., eta_{K-1})_k``, one linear predictor per
non-reference level, each with its own intercept and coefficients:

* ``alpha_<node>``: ``vector[K-1]``, the intercepts;
* ``beta_<node>_<parent>``: ``matrix[L, K-1]`` for a parent entering as ``L``
  indicator columns (a categorical protected or level-valued parent),
  ``row_vector[K-1]`` for a parent entering as one column;
* ``lambda_<node>_<latent>``: ``row_vector[K-1]``, the loadings.

In the fit's posterior (``fit.idata``, ``fit.summary()``, the diagnostics table) each of
them has a last axis ``<node>_level`` over the non-reference levels, after the parent's
axis for a matrix (``<parent>_effect`` for a protected parent, ``<parent>_level`` for a
level-valued one, ``<by>_level`` for the extra loadings of ``loading_by``): the entries
read ``beta_K_A[b, drug]`` (:func:`counterfair.stan.data.coords_and_dims`); the weights
of its smooth terms and interactions keep arviz's default axes.

Stan (its emitter, :mod:`counterfair.stan.families.categorical`):
``categorical_logit_glm(x, append_row(0, alpha), with_reference(beta))``
with the latents as extra columns of ``x`` (``with_reference`` prepends the
reference level's zero column; it joins the program's functions block).
Because the loadings are vectors, none of them can carry a latent's sign
constraint: the positive loading goes to the latent's first child of another
family (an SCM whose latent has only categorical children is refused), and a
latent with a categorical child is sampled directly rather than anchored
(:mod:`counterfair.stan.anchoring`). That costs mixing when the latent also has
Normal children: on 1,000 simulated rows with a Normal, an ordinal, a negative
binomial and a categorical child of one latent (4 chains of 500 + 500) the
Normal child's sigma had a bulk ESS of 55 and R-hat 1.08; the test SCM whose
categorical node has no latent parent (so the latent is anchored) reaches R-hat
1.007 with 500 + 1,000 (``tests/_models.py::families_scm``). Anchoring
through a categorical child (its latent column written as the anchored mean
plus ``z / sqrt(P)``) is left to do.

As a parent, a categorical node enters its children's linear predictors as
reference-coded indicators of its levels (:mod:`counterfair.model.families.levels`).

**Across worlds** (coupled counterfactuals) the node follows the Gumbel-max
structural equation ``x = argmax_k (l_k + g_k)`` with logits ``l`` and
independent standard Gumbel noise ``g`` (Oberst and Sontag, 2019, "Counterfactual
off-policy evaluation with Gumbel-max structural causal models"). Its categories
have no order, so no CDF coupling applies. Given the factual category ``y``,
the noise is drawn from its posterior by the top-down construction (Maddison et
al., 2014): the largest perturbed logit is ``Gumbel(logsumexp(l))`` and is
``y``'s, every other perturbed logit is a Gumbel of location ``l_k`` truncated
below it. The counterfactual category is ``argmax_k (l'_k + g_k)``: with
identical logits it is ``y``, and it stays ``y`` whenever ``y``'s logit rises by
at least as much as every other level's (counterfactual stability).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from scipy.special import logsumexp, softmax

from counterfair.model.families.base import protected_effect
from counterfair.model.families.levels import LevelFamily, normalise_levels
from counterfair.model.nodes import Observed
from counterfair.rng import RandomSource

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation
    from counterfair.model.params import ParamDraws


@dataclass(frozen=True)
class Categorical(Observed):
    """An unordered categorical node: softmax over its levels with a reference level.

    Parameters
    ----------
    levels : sequence of str or int, optional
        The levels (values of the column, compared as strings), or their number
        ``K`` when the column holds the codes ``0 .. K-1``. At least 2. When
        omitted they are read from the training rows at fit time, sorted (numbers
        in numeric order; the categories of a pandas Categorical column in their
        order), and recorded in the fit's SCM (and its saved ``scm.json``).
    reference : str, optional
        The reference level (probabilities relative to it); defaults to the
        first level. Only with level labels (or levels read from the data).

    Notes
    -----
    Every coefficient is a vector over the non-reference levels; see
    :mod:`counterfair.model.families.categorical`. As a parent, the node enters its
    children as indicators of its non-reference levels.

    Examples
    --------
    >>> Categorical(levels=("drug", "theft", "violent"), reference="theft").labels
    ('theft', 'drug', 'violent')
    """

    family: ClassVar[str] = "categorical"
    link: ClassVar[str] = "softmax"
    levels: tuple[str, ...] | int | None = None
    reference: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        levels = normalise_levels(self.levels, "a Categorical")
        object.__setattr__(self, "levels", levels)
        if self.reference is not None and levels is not None and (
            isinstance(levels, int) or str(self.reference) not in levels
        ):
            raise ValueError(
                    f"reference level {self.reference!r} is not one of the levels {levels}"
                )

    @property
    def n_levels(self) -> int:
        """Number of levels ``K``."""
        return self.levels if isinstance(self.levels, int) else len(self.levels or ())

    @property
    def labels(self) -> tuple[str, ...] | None:
        """Level labels in code order, the reference first (None for integer codes)."""
        if isinstance(self.levels, int) or self.levels is None:
            return None
        first = str(self.reference) if self.reference is not None else self.levels[0]
        return (first, *(level for level in self.levels if level != first))


def _spec(spec: Observed) -> Categorical:
    assert isinstance(spec, Categorical)
    return spec


class CategoricalFamily(LevelFamily):
    """Categorical nodes; coupled across worlds by Gumbel-max; a classification task."""

    name = "categorical"
    spec = Categorical
    task = "classifier"
    declares_coefficients = True

    # ------------------------------------------------------------------ numpy
    def parameter_shapes(
        self, eq: NodeEquation, widths: Mapping[str, int]
    ) -> dict[str, tuple[int, ...]]:
        k = _spec(eq.spec).n_levels - 1
        shapes: dict[str, tuple[int, ...]] = {}
        if eq.intercept:
            shapes[eq.intercept] = (k,)
        for pterm in eq.protected:
            if pterm.continuous:
                shapes[pterm.param] = (k,)
            else:
                shapes[pterm.param] = (widths[pterm.parent], k)
        for oterm in eq.observed:
            shapes[oterm.param] = (k,) if oterm.levels is None else (oterm.levels - 1, k)
        for lterm in eq.latent:
            shapes[lterm.param] = (k,)  # extra loadings by group: checked with the terms
        return shapes

    def linear_predictor(
        self,
        eq: NodeEquation,
        params: ParamDraws,
        values: Mapping[str, np.ndarray],
        codes: Mapping[str, np.ndarray],
        reference_coding: bool,
        n_rows: int,
    ) -> np.ndarray:
        """One linear predictor per non-reference level, shape ``(S, N, K-1)``."""
        k = _spec(eq.spec).n_levels - 1
        eta = np.zeros((params.n, n_rows, k))
        if eq.intercept:
            eta += params[eq.intercept][:, None, :]
        for pterm in eq.protected:
            beta = params[pterm.param]
            if pterm.continuous:
                eta += beta[:, None, :] * np.asarray(codes[pterm.parent])[..., None]
            else:
                eta += protected_effect(beta, codes[pterm.parent], reference_coding)
        for oterm in eq.observed:
            beta = params[oterm.param]
            if oterm.levels is not None:
                eta += protected_effect(beta, values[oterm.parent], True)
            else:
                eta += beta[:, None, :] * np.asarray(values[oterm.parent])[..., None]
        for lterm in eq.latent:
            loading = params[lterm.param][:, None, :]
            if lterm.by_param is not None and eq.loading_by is not None:
                level = eq.loading_by.read(values, codes)
                loading = loading + protected_effect(params[lterm.by_param], level, True)
            eta += loading * np.asarray(values[lterm.parent])[..., None]
        for term in eq.bending:  # weights (S, columns, K-1): one curve per level
            eta += term.contribution(params, values, codes)
        return eta

    def mean(self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray) -> np.ndarray:
        """The probability of every level, shape ``(S, N, K)`` (the mean of its indicators)."""
        return np.asarray(softmax(_logits(eta), axis=-1))

    def draw(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, rng: RandomSource
    ) -> np.ndarray:
        logits = _logits(eta)
        return np.argmax(logits + rng.gumbel(size=logits.shape), axis=-1).astype(float)

    def log_likelihood(self, y: np.ndarray, eta: np.ndarray, *args: np.ndarray) -> np.ndarray:
        """Normalised log probability of level code ``y`` (the log softmax at ``y``).

        ``eta`` holds the non-reference levels' linear predictors, ``(S, N, K-1)``;
        ``y`` the level codes, broadcast against ``(S, N)``. The reference level's
        logit is 0, so ``log p(y) = l_y - logsumexp(0, eta_1, .., eta_{K-1})``;
        this is what leave-one-out (:mod:`counterfair.inference.loo`) scores a
        categorical node by.
        """
        logits = _logits(np.asarray(eta, dtype=float))
        code = np.broadcast_to(np.rint(np.asarray(y)).astype(np.int64), logits.shape[:-1])
        chosen = np.take_along_axis(logits, code[..., None], axis=-1)[..., 0]
        return np.asarray(chosen - logsumexp(logits, axis=-1))

    def abduct_noise(
        self,
        eq: NodeEquation,
        params: ParamDraws,
        eta: np.ndarray,
        y: np.ndarray,
        rng: RandomSource,
    ) -> np.ndarray:
        """Gumbel noise of every level given the category ``y``, shape ``(S, N, K)``.

        Top-down: the largest perturbed logit ``M ~ Gumbel(logsumexp(l))`` goes
        to ``y``; level ``k`` gets ``-log(exp(-M) + exp(-G_k))`` with
        ``G_k ~ Gumbel(l_k)``, a Gumbel of location ``l_k`` truncated below
        ``M``. The others are kept a relative ``GUMBEL_MARGIN`` below ``M`` so
        that rounding in ``l' + g`` cannot tie them with ``y`` when the logits
        do not change (a bias of the order of the margin in probability).
        """
        logits = _logits(eta)
        top = logsumexp(logits, axis=-1) + rng.gumbel(size=logits.shape[:-1])
        others = -np.logaddexp(-top[..., None], -(logits + rng.gumbel(size=logits.shape)))
        margin = GUMBEL_MARGIN * (1.0 + np.abs(top) + np.abs(logits).max(axis=-1))
        others = np.minimum(others, (top - margin)[..., None])
        code = np.broadcast_to(np.asarray(y, dtype=np.int64), top.shape)[..., None]
        perturbed = others.copy()
        np.put_along_axis(perturbed, code, top[..., None], axis=-1)
        return perturbed - logits

    def apply_noise(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, noise: np.ndarray
    ) -> np.ndarray:
        """``argmax_k (l_k + g_k)`` with the abducted Gumbel noise ``g`` ``(S, N, K)``."""
        return np.argmax(_logits(eta) + noise, axis=-1).astype(float)


GUMBEL_MARGIN = 1e-9
"""Relative gap kept between the factual category's perturbed logit and the others'."""


def _logits(eta: np.ndarray) -> np.ndarray:
    """Every level's logit: 0 for the reference level, then ``eta`` ``(S, N, K-1)``."""
    return np.concatenate([np.zeros((*eta.shape[:-1], 1)), eta], axis=-1)
