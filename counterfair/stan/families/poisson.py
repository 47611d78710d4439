"""The Poisson family's Stan: count data, ``poisson_log_glm``, quadrature code 1."""

from __future__ import annotations

from counterfair.stan.families.base import POISSON_CODE, CountStan


class PoissonStan(CountStan):
    """Poisson counts: no parameter of their own."""

    name = "poisson"
    glm = "poisson_log_glm"
    plain = "poisson_log"
    quadrature_code = POISSON_CODE
