"""The ordinal family's Stan: ordered cutpoints, ``ordered_logistic_glm``, quadrature code 4.

The GLM applies when the linear predictor is a design matrix times coefficients plus a
scalar (the scalar is moved into the cutpoints); with per-row latent terms the statement
is ``ordered_logistic`` of the whole predictor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from counterfair.model.families.ordinal import Ordinal
from counterfair.stan.families.base import ORDINAL_CODE, Index
from counterfair.stan.families.levels import LevelStan

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation
    from counterfair.model.params import ParamDraws


def _spec(eq: NodeEquation) -> Ordinal:
    assert isinstance(eq.spec, Ordinal)
    return eq.spec


class OrdinalStan(LevelStan):
    """Ordinal nodes: ``cutpoints_<node>`` (``ordered`` in the fit, a vector as data)."""

    name = "ordinal"
    glm = "ordered_logistic_glm"
    plain = "ordered_logistic"
    quadrature_code = ORDINAL_CODE

    def parameter_declarations(self, eq: NodeEquation, array_prefix: str) -> list[tuple[str, str]]:
        size = f"{eq.levels} - 1"
        kind = f"vector[{size}]" if array_prefix else f"ordered[{size}]"
        comment = f"cutpoints of {eq.node} (logit scale, increasing)"
        return [(f"{array_prefix}{kind} {eq.param('cutpoints')}", comment)]

    def priors(self, eq: NodeEquation) -> list[str]:
        return [f"{eq.param('cutpoints')} ~ {_spec(eq).prior_cutpoints.stan()};"]

    def statement_arguments(self, eq: NodeEquation, index: Index) -> list[str]:
        return [index(eq.param("cutpoints"))]

    def sampling_statement(
        self,
        eq: NodeEquation,
        design: str | None,
        alpha: str,
        alpha_is_vector: bool,
        beta: str | None,
        arguments: list[str],
        *,
        target: str | None = None,
        size: str = "N",
    ) -> str:
        (cutpoints,) = arguments
        lhs = eq.node if target is None else target
        if beta is not None and not alpha_is_vector:
            # a scalar shift of the linear predictor is a shift of the cutpoints
            cuts = cutpoints if alpha == "0.0" else f"{cutpoints} - ({alpha})"
            return f"{lhs} ~ {self.glm}({design}, {beta}, {cuts});"
        if beta is not None:
            eta = f"{alpha} + {design} * {beta}"
        elif alpha_is_vector:
            eta = alpha
        else:
            eta = f"rep_vector({alpha}, {size})"
        return f"{lhs} ~ {self.plain}({eta}, {cutpoints});"

    def quadrature_parameters(
        self, eq: NodeEquation, params: ParamDraws
    ) -> tuple[np.ndarray, np.ndarray]:
        """No dispersion; the cutpoints per set, ``(S, K - 1)``."""
        cutpoints = np.asarray(params[eq.param("cutpoints")], dtype=float)
        return np.ones(params.n), cutpoints.reshape(params.n, -1)
