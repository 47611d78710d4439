"""The Normal family: identity link, additive Gaussian noise with a learned or fixed sd."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from counterfair.model.families.base import (
    Family,
    Statistic,
    mean_statistic,
    variance_statistic,
)
from counterfair.model.nodes import Observed, Prior, check_constant, inv_gamma_prior
from counterfair.rng import RandomSource

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation
    from counterfair.model.params import ParamDraws


@dataclass(frozen=True)
class Normal(Observed):
    """A Normal node with identity link: ``x = mu(parents) + sigma * eps``.

    Parameters
    ----------
    sigma : float, optional
        Fix the residual standard deviation (e.g. ``1.0`` for ZFYA in the paper);
        when omitted, sigma is learned with an inverse-gamma prior on sigma^2.
    prior_variance : Prior
        Prior of sigma^2 when learned (default inverse-gamma(1, 1)).
    """

    family: ClassVar[str] = "normal"
    link: ClassVar[str] = "identity"
    sigma: float | None = None
    prior_variance: Prior = field(default_factory=inv_gamma_prior)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.sigma is not None:
            sigma = check_constant(self.sigma, "a fixed sigma")
            if not sigma > 0:
                raise ValueError(f"a fixed sigma must be positive and finite, got {self.sigma}")
            object.__setattr__(self, "sigma", sigma)


def sigma_of(eq: NodeEquation, params: ParamDraws) -> np.ndarray:
    """Residual sd of a Normal node per set, shape ``(S, 1)``."""
    fixed = eq.sigma_fixed
    if fixed is not None:
        return np.full((params.n, 1), fixed)
    assert eq.sigma is not None
    return params[eq.sigma][:, None]


class NormalFamily(Family):
    """Normal nodes: ``normal_id_glm``; noise abducted exactly and reused across worlds."""

    name = "normal"
    spec = Normal
    task = "regressor"
    additive_noise = True
    def frame_column(self, spec: Observed, values: np.ndarray) -> Any:
        return values

    def check_statistics(self, spec: Observed) -> dict[str, Statistic]:
        return {"mean": mean_statistic, "variance": variance_statistic}

    def check_parameter(self, eq: NodeEquation, name: str, value: np.ndarray) -> str | None:
        return None

    def mean(self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray) -> np.ndarray:
        return eta

    def draw(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, rng: RandomSource
    ) -> np.ndarray:
        return eta + sigma_of(eq, params) * rng.standard_normal(eta.shape)
