"""The Stan emitters of the distribution families: one module per family, and their registry.

Each family has two halves: its distribution, back-end neutral (log density and its
derivatives, mean, draws, CDF and quantile, noise and coupling: a
:class:`~counterfair.model.families.base.Family` of :mod:`counterfair.model.families`),
and its Stan emitter here (a :class:`~counterfair.stan.families.base.StanFamily`: data
and parameter declarations, priors, the sampling statement, its columns as a parent,
its code and parameters in the C++ quadrature). Both registries are keyed by the
family's name (``spec.family``); the code generator and the other modules of
:mod:`counterfair.stan` ask :func:`stan_family` for a node's emitter.

Adding a family: its distribution module under ``counterfair/model/families/`` with
its entry in :data:`~counterfair.model.families.FAMILIES`, and its emitter module
here with its entry in :data:`STAN_FAMILIES` below (a family the C++ quadrature
covers also needs a ``case`` in ``counterfair/stan/quadrature.hpp`` and a code in
:mod:`counterfair.stan.families.base`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from counterfair.model.families import FAMILIES, Family
from counterfair.stan.families.base import StanFamily
from counterfair.stan.families.bernoulli import BernoulliStan
from counterfair.stan.families.categorical import CategoricalStan
from counterfair.stan.families.negative_binomial import NegativeBinomialStan
from counterfair.stan.families.normal import NormalStan
from counterfair.stan.families.ordinal import OrdinalStan
from counterfair.stan.families.poisson import PoissonStan

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation

STAN_FAMILIES: dict[str, StanFamily] = {
    emitter.name: emitter
    for emitter in (
        NormalStan(),
        PoissonStan(),
        BernoulliStan(),
        NegativeBinomialStan(),
        OrdinalStan(),
        CategoricalStan(),
    )
}
"""The Stan emitter of every family, by name (``spec.family``)."""

_WITHOUT_EMITTER = sorted(set(FAMILIES) - set(STAN_FAMILIES))
if _WITHOUT_EMITTER:  # a family registered in the model but not here: fail on import
    raise ImportError(f"families without a Stan emitter: {_WITHOUT_EMITTER}")


def stan_family(of: NodeEquation | Family | str) -> StanFamily:
    """The Stan emitter of a node's equation, of a family, or of a family's name.

    Raises
    ------
    KeyError
        If the family has no emitter.
    """
    if isinstance(of, str):
        return STAN_FAMILIES[of]
    if isinstance(of, Family):
        return STAN_FAMILIES[of.name]
    return STAN_FAMILIES[of.spec.family]


__all__ = ["STAN_FAMILIES", "StanFamily", "stan_family"]
