"""Distribution families of observed nodes: one module per family, and their registry.

Every family module defines its spec class (what users put on a node, e.g.
:class:`Poisson`) and a :class:`~counterfair.families.base.Family` holding all
of its behaviour. Adding a family means writing one module and adding its
family object to :data:`FAMILIES` below (and exporting the spec from
``counterfair/__init__.py`` for ``cf.<Spec>``).
"""

from __future__ import annotations

from counterfair.families.base import Family, Task
from counterfair.families.bernoulli import Bernoulli, BernoulliFamily
from counterfair.families.categorical import Categorical, CategoricalFamily
from counterfair.families.negative_binomial import NegativeBinomial, NegativeBinomialFamily
from counterfair.families.normal import Normal, NormalFamily
from counterfair.families.ordinal import Ordinal, OrdinalFamily
from counterfair.families.poisson import Poisson, PoissonFamily
from counterfair.specs import Observed

FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        NormalFamily(),
        PoissonFamily(),
        BernoulliFamily(),
        NegativeBinomialFamily(),
        OrdinalFamily(),
        CategoricalFamily(),
    )
}
"""Every family counterfair can compile, by name (``spec.family``)."""

OBSERVED_FAMILIES: dict[str, type[Observed]] = {
    name: family.spec for name, family in FAMILIES.items()
}
"""Spec class of every family, by name."""


def family_of(spec: Observed) -> Family:
    """The family object of an observed node's spec.

    Raises
    ------
    KeyError
        If the spec's family is not registered.
    """
    return FAMILIES[spec.family]


__all__ = [
    "FAMILIES",
    "OBSERVED_FAMILIES",
    "Bernoulli",
    "Categorical",
    "Family",
    "NegativeBinomial",
    "Normal",
    "Ordinal",
    "Poisson",
    "Task",
    "family_of",
]
