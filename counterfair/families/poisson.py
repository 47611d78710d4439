"""The Poisson family: counts with a log link (``poisson_log_glm``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pandas as pd
from scipy.stats import poisson

from counterfair import errors
from counterfair.families.base import (
    Family,
    check_counts,
    count_coefficient_scale,
    count_data_declaration,
    count_quantile,
)
from counterfair.specs import Observed

if TYPE_CHECKING:
    from counterfair.layout import NodeEquation
    from counterfair.params import ParamDraws

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


class PoissonFamily(Family):
    """Poisson counts, coupled across worlds by their CDF (``x = F^{-1}(u; exp(eta))``).

    The Poisson CDF decreases in the rate, so with one uniform per unit a
    count never decreases when a parent raises the rate.
    """

    name = "poisson"
    spec = Poisson
    task = "regressor"
    exact = True
    upper_tail = True
    glm = "poisson_log_glm"
    plain = "poisson_log"

    def check_values(self, values: np.ndarray, column: str, index: pd.Index) -> None:
        check_counts(values, column, index, errors.POISSON_NOT_COUNT)

    def data_declarations(self, eq: NodeEquation) -> list[str]:
        return count_data_declaration(eq.node)

    def coefficient_scale(self, values: np.ndarray) -> float:
        return count_coefficient_scale(values)

    def init_score(self, values: np.ndarray) -> np.ndarray:
        return np.log1p(values)

    def mean(self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray) -> np.ndarray:
        return np.exp(eta)

    def draw(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        return rng.poisson(_rate(eta)).astype(float)

    def cdf_interval(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, y: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        rate = _rate(eta)
        return poisson.cdf(y - 1.0, rate), poisson.cdf(y, rate)

    def quantile(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, u: np.ndarray
    ) -> np.ndarray:
        rate = _rate(eta)
        flat = rate.ravel()
        return count_quantile(lambda k, i: poisson.cdf(k, flat[i]), u, rate, rate)

    def survival_interval(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, y: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        rate = _rate(eta)
        return poisson.sf(y, rate), poisson.sf(y - 1.0, rate)

    def survival_quantile(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, v: np.ndarray
    ) -> np.ndarray:
        rate = _rate(eta)
        flat = rate.ravel()
        return count_quantile(
            lambda k, i: poisson.sf(k, flat[i]), v, rate, rate, survival=True
        )

    def log_likelihood(self, y: np.ndarray, eta: np.ndarray, *args: np.ndarray) -> np.ndarray:
        return y * eta - np.exp(eta)

    def derivatives(
        self, y: np.ndarray, eta: np.ndarray, *args: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        rate = np.exp(eta)
        return y - rate, -rate
