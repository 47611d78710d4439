"""Node specifications: what each node of a structural causal model is (the public module).

Every node of the user's ``networkx.DiGraph`` carries one of these frozen dataclasses
under the attribute :data:`SPEC_KEY` (``"spec"``): :class:`Protected` and
:class:`Latent` roots, and one observed family per distribution (:class:`Normal`,
:class:`Poisson`, :class:`Bernoulli`, :class:`NegativeBinomial`, :class:`Ordinal`,
:class:`Categorical`). The base classes live in :mod:`counterfair.model.nodes`, the
families in :mod:`counterfair.model.families` (which build on the base classes); this module
gathers both, so that the arrows run one way: nodes -> families -> specs.
"""

from __future__ import annotations

from counterfair.model.families import (
    OBSERVED_FAMILIES,
    Bernoulli,
    Categorical,
    NegativeBinomial,
    Normal,
    Ordinal,
    Poisson,
)
from counterfair.model.nodes import (
    MAX_IMPLICIT_LEVELS,
    PRIOR_FAMILIES,
    PROTECTED_KINDS,
    SPEC_KEY,
    Latent,
    NodeSpec,
    Observed,
    Prior,
    Protected,
    inv_gamma_prior,
    levels_tuple,
    normal_prior,
    stan_real,
)

__all__ = [
    "MAX_IMPLICIT_LEVELS",
    "OBSERVED_FAMILIES",
    "PRIOR_FAMILIES",
    "PROTECTED_KINDS",
    "SPEC_KEY",
    "Bernoulli",
    "Categorical",
    "Latent",
    "NegativeBinomial",
    "NodeSpec",
    "Normal",
    "Observed",
    "Ordinal",
    "Poisson",
    "Prior",
    "Protected",
    "inv_gamma_prior",
    "levels_tuple",
    "normal_prior",
    "stan_real",
]
