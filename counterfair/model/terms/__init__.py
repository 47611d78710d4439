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

from counterfair.model.terms.bases import (
    OUTSIDE_RANGE,
    hsgp_frequencies,
    learn_range,
    outside_range,
    smooth_basis,
    smooth_width,
    spd,
)
from counterfair.model.terms.building import equation_terms, learn_terms, parent_kind
from counterfair.model.terms.declare import (
    GP_KERNELS,
    HSGP_BOUNDARY,
    MIN_BASIS,
    PENALTY_ORDER,
    SMOOTH_BASES,
    SPLINE_DEGREE,
    TERM_KINDS,
    GroupEffect,
    Interaction,
    Smooth,
    Term,
    check_terms,
    half_normal_prior,
    lengthscale_prior,
)
from counterfair.model.terms.document import TERM_SCHEMA, term_document, term_from_document
from counterfair.model.terms.group_codes import (
    UNSEEN_BASE,
    group_codes,
    groups_name,
    learn_groups,
    unseen_code,
)
from counterfair.model.terms.stan_functions import HSGP_FUNCTIONS, SUM_TO_ZERO_FUNCTION
from counterfair.model.terms.term import EquationTerm, ParentKind

__all__ = [
    "GP_KERNELS",
    "HSGP_BOUNDARY",
    "HSGP_FUNCTIONS",
    "MIN_BASIS",
    "OUTSIDE_RANGE",
    "PENALTY_ORDER",
    "SMOOTH_BASES",
    "SPLINE_DEGREE",
    "SUM_TO_ZERO_FUNCTION",
    "TERM_KINDS",
    "TERM_SCHEMA",
    "UNSEEN_BASE",
    "EquationTerm",
    "GroupEffect",
    "Interaction",
    "ParentKind",
    "Smooth",
    "Term",
    "check_terms",
    "equation_terms",
    "group_codes",
    "groups_name",
    "half_normal_prior",
    "hsgp_frequencies",
    "learn_groups",
    "learn_range",
    "learn_terms",
    "lengthscale_prior",
    "outside_range",
    "parent_kind",
    "smooth_basis",
    "smooth_width",
    "spd",
    "term_document",
    "term_from_document",
    "unseen_code",
]
