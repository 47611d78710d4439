"""Distribution families of observed nodes: one module per family, and their registry.

Every family module defines its spec class (what users put on a node, e.g.
:class:`Poisson`) and a :class:`~counterfair.model.families.base.Family` holding its
back-end neutral behaviour: value validation, the shapes and checks of its own
parameters, how the node enters its children, numpy mean and draw, CDF and quantile,
log likelihood and its derivatives, noise handling across worlds and its
scikit-learn task. Its Stan text (data and parameter declarations, priors, the
sampling statement, a GLM function where Stan has one, its code in the C++
quadrature) is written by its emitter in :mod:`counterfair.stan.families`.

==========================  ==========  =====================================  ==========
family (spec)               link        Stan (with columns / without)          own params
==========================  ==========  =====================================  ==========
``Normal``                  identity    ``normal_id_glm`` / ``normal``          ``sigma``
``Poisson``                 log         ``poisson_log_glm`` / ``poisson_log``   --
``Bernoulli``               logit       ``bernoulli_logit_glm`` / ...           --
``NegativeBinomial``        log         ``neg_binomial_2_log_glm`` / ...        ``phi``
``Ordinal``                 logit       ``ordered_logistic_glm`` / ...          ``cutpoints``
``Categorical``             softmax     ``categorical_logit_glm`` / ...         vectors
==========================  ==========  =====================================  ==========

Adding a family: write ``counterfair/model/families/<name>.py`` with a spec class
(a frozen dataclass deriving from :class:`~counterfair.model.specs.Observed` with a
``family`` name) and a :class:`~counterfair.model.families.base.Family` subclass that
overrides what differs from the defaults (count or binary data, one linear
predictor, no parameter of its own); add an instance to :data:`FAMILIES` below.
Then its Stan emitter, ``counterfair/stan/families/<name>.py`` (a
:class:`~counterfair.stan.families.base.StanFamily` subclass), with an instance in
:data:`counterfair.stan.families.STAN_FAMILIES`. Exporting the spec as ``cf.<Spec>``
is one more line in ``_ATTRIBUTES`` of ``counterfair/__init__.py`` and one in its
stub ``counterfair/__init__.pyi``.
"""

from __future__ import annotations

from counterfair.model.families.base import Family, Task
from counterfair.model.families.bernoulli import Bernoulli, BernoulliFamily
from counterfair.model.families.categorical import Categorical, CategoricalFamily
from counterfair.model.families.negative_binomial import NegativeBinomial, NegativeBinomialFamily
from counterfair.model.families.normal import Normal, NormalFamily
from counterfair.model.families.ordinal import Ordinal, OrdinalFamily
from counterfair.model.families.poisson import Poisson, PoissonFamily
from counterfair.model.nodes import Observed

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
