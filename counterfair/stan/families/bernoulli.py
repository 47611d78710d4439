"""The Bernoulli family's Stan: 0/1 data, ``bernoulli_logit_glm``, quadrature code 3."""

from __future__ import annotations

from typing import TYPE_CHECKING

from counterfair.stan.families.base import BERNOULLI_CODE, StanFamily

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation


class BernoulliStan(StanFamily):
    """Binary nodes: their 0/1 codes (labels are read into codes before Stan sees them)."""

    name = "bernoulli"
    glm = "bernoulli_logit_glm"
    plain = "bernoulli_logit"
    quadrature_code = BERNOULLI_CODE

    def data_declarations(self, eq: NodeEquation) -> list[str]:
        return [f"array[N] int<lower=0, upper=1> {eq.node};  // observed {eq.node} (0/1)"]
