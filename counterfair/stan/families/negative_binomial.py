"""The negative binomial family's Stan: ``neg_binomial_2_log_glm`` with dispersion ``phi``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from counterfair.model.families.negative_binomial import NegativeBinomial
from counterfair.stan.families.base import NEGATIVE_BINOMIAL_CODE, CountStan, Index

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation
    from counterfair.model.params import ParamDraws


class NegativeBinomialStan(CountStan):
    """Overdispersed counts: ``phi_<node>`` with its prior, passed to the quadrature."""

    name = "negative_binomial"
    glm = "neg_binomial_2_log_glm"
    plain = "neg_binomial_2_log"
    quadrature_code = NEGATIVE_BINOMIAL_CODE

    def parameter_declarations(self, eq: NodeEquation, array_prefix: str) -> list[tuple[str, str]]:
        comment = f"dispersion of {eq.node} (variance mu + mu^2 / phi)"
        return [(f"{array_prefix}real<lower=0> {eq.param('phi')}", comment)]

    def priors(self, eq: NodeEquation) -> list[str]:
        spec = eq.spec
        assert isinstance(spec, NegativeBinomial)
        return [f"{eq.param('phi')} ~ {spec.prior_dispersion.stan()};"]

    def statement_arguments(self, eq: NodeEquation, index: Index) -> list[str]:
        return [index(eq.param("phi"))]

    def quadrature_parameters(
        self, eq: NodeEquation, params: ParamDraws
    ) -> tuple[np.ndarray, np.ndarray]:
        """``phi`` per set; no cutpoints."""
        return np.asarray(params[eq.param("phi")], dtype=float), np.zeros((params.n, 0))
