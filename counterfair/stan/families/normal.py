"""The Normal family's Stan: ``normal_id_glm``, a learned variance or a fixed sd."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from counterfair.model.families.normal import Normal
from counterfair.model.nodes import stan_real
from counterfair.stan.families.base import Index, StanFamily

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation


class NormalStan(StanFamily):
    """Normal nodes: real data, ``sigma2_<node>`` with an inverse-gamma prior (or a fixed
    sd), ``normal_id_glm``; no quadrature code (a Normal child is an anchor)."""

    name = "normal"
    glm = "normal_id_glm"
    plain = "normal"

    def stan_values(self, eq: NodeEquation, values: np.ndarray) -> np.ndarray:
        return values.astype(float)

    def data_declarations(self, eq: NodeEquation) -> list[str]:
        return [f"vector[N] {eq.node};  // observed {eq.node}"]

    def design_column(self, eq: NodeEquation) -> str:
        return f"to_matrix({eq.node})"

    def parameter_declarations(self, eq: NodeEquation, array_prefix: str) -> list[tuple[str, str]]:
        if eq.sigma is None or eq.sigma_fixed is not None:
            return []
        if array_prefix:
            return [(f"{array_prefix}real<lower=0> {eq.sigma}", f"residual sd of {eq.node}")]
        return [(f"real<lower=0> {eq.variance}", f"residual variance of {eq.node}")]

    def transformed_parameters(self, eq: NodeEquation) -> list[tuple[str, str]]:
        if eq.sigma is None or eq.sigma_fixed is not None:
            return []
        return [
            (f"real<lower=0> {eq.sigma} = sqrt({eq.variance})", f"residual sd of {eq.node}")
        ]

    def priors(self, eq: NodeEquation) -> list[str]:
        spec = eq.spec
        assert isinstance(spec, Normal)
        if eq.sigma is None or eq.sigma_fixed is not None:
            return []
        return [f"{eq.variance} ~ {spec.prior_variance.stan()};"]

    def statement_arguments(self, eq: NodeEquation, index: Index) -> list[str]:
        if eq.sigma_fixed is not None:
            return [stan_real(eq.sigma_fixed)]
        assert eq.sigma is not None
        return [index(eq.sigma)]
