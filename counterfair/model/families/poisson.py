"""The Poisson family: counts with a log link (``poisson_log_glm``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from scipy.special import pdtr, pdtrc
from scipy.stats import poisson

from counterfair import errors
from counterfair.model.families.base import CountFamily
from counterfair.model.nodes import Observed
from counterfair.rng import RandomSource

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation
    from counterfair.model.params import ParamDraws

MAX_LOG_RATE = 50.0
"""Largest log rate a numpy draw, CDF or quantile uses (numpy's Poisson sampler
overflows beyond)."""


def _rate(eta: np.ndarray) -> np.ndarray:
    """The rate ``exp(eta)``, ``eta`` clipped at :data:`MAX_LOG_RATE`."""
    return np.exp(np.minimum(eta, MAX_LOG_RATE))


@dataclass(frozen=True)
class Poisson(Observed):
    """A Poisson count node with log link: ``x ~ Poisson(exp(eta(parents)))``."""

    family: ClassVar[str] = "poisson"
    link: ClassVar[str] = "log"


class PoissonFamily(CountFamily):
    """Poisson counts, coupled across worlds by their CDF (``x = F^{-1}(u; exp(eta))``).

    The Poisson CDF decreases in the rate, so with one uniform per unit a
    count never decreases when a parent raises the rate.
    """

    name = "poisson"
    spec = Poisson
    not_count = errors.POISSON_NOT_COUNT

    def mean(self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray) -> np.ndarray:
        return np.exp(eta)

    def draw(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, rng: RandomSource
    ) -> np.ndarray:
        return rng.poisson(_rate(eta)).astype(float)

    def scipy_distribution(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray
    ) -> tuple[Any, tuple[np.ndarray, ...]]:
        return poisson, (_rate(eta),)

    def moments(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        rate = _rate(eta)
        return rate, rate

    def count_cdf(self, dist: Any, *, survival: bool) -> Callable[..., np.ndarray]:
        """scipy's own functions behind ``poisson.cdf`` / ``poisson.sf`` at counts
        ``k >= 0`` (``pdtr`` / ``pdtrc``: the same numbers, without the argument checks)."""
        return pdtrc if survival else pdtr

    def log_likelihood(self, y: np.ndarray, eta: np.ndarray, *args: np.ndarray) -> np.ndarray:
        return y * eta - np.exp(eta)

    def derivatives(
        self, y: np.ndarray, eta: np.ndarray, *args: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        rate = np.exp(eta)
        return y - rate, -rate
