"""The Bernoulli family: 0/1 values with a logit link (``bernoulli_logit_glm``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pandas as pd
from scipy.special import expit

from counterfair import errors
from counterfair.model.families.base import (
    Family,
    Statistic,
    mean_statistic,
    row_label,
    share_statistic,
)
from counterfair.model.nodes import Observed
from counterfair.rng import RandomSource

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation
    from counterfair.model.params import ParamDraws


@dataclass(frozen=True)
class Bernoulli(Observed):
    """A binary (0/1) node with logit link: ``x ~ Bernoulli(logit^-1(eta(parents)))``."""

    family: ClassVar[str] = "bernoulli"
    link: ClassVar[str] = "logit"


class BernoulliFamily(Family):
    """Binary nodes; a classification task.

    Coupled across worlds through ``x = 1[u > 1 - p(eta)]`` with one uniform
    ``u`` per unit (the monotone coupling): a factual 1 stays 1 when ``p``
    rises, and a factual 0 becomes 1 with probability ``(p' - p) / (1 - p)``.
    """

    name = "bernoulli"
    spec = Bernoulli
    task = "classifier"
    exact = True
    glm = "bernoulli_logit_glm"
    plain = "bernoulli_logit"

    def check_values(self, values: np.ndarray, column: str, index: pd.Index) -> None:
        bad = (values != 0) & (values != 1)
        if bad.any():
            i = int(np.argmax(bad))
            raise errors.DataError(
                errors.BERNOULLI_NOT_BINARY.format(
                    column=column, value=float(values[i]), row=row_label(index, i)
                )
            )

    def data_declarations(self, eq: NodeEquation) -> list[str]:
        return [f"array[N] int<lower=0, upper=1> {eq.node};  // observed {eq.node} (0/1)"]

    def coefficient_scale(self, values: np.ndarray) -> float:
        p = float(np.clip(values.mean(), 0.05, 0.95))
        return float(1.0 / np.sqrt(max(values.shape[0], 1) * p * (1.0 - p)))

    def check_statistics(self, spec: Observed) -> dict[str, Statistic]:
        return {"mean": mean_statistic, "share of 0": share_statistic(0)}

    def mean(self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray) -> np.ndarray:
        return np.asarray(expit(eta))

    def draw(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, rng: RandomSource
    ) -> np.ndarray:
        return rng.binomial(1, expit(eta)).astype(float)

    def cdf_interval(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, y: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        below_one = np.asarray(expit(-eta))  # F(0) = 1 - p, exact in the tail p -> 1
        one = y >= 1
        lower = np.where(one, below_one, 0.0)
        upper = np.where(one, 1.0, below_one)
        return lower, upper

    def quantile(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, u: np.ndarray
    ) -> np.ndarray:
        return (u > expit(-eta)).astype(float)

    def log_likelihood(self, y: np.ndarray, eta: np.ndarray, *args: np.ndarray) -> np.ndarray:
        return y * eta - np.logaddexp(0.0, eta)

    def derivatives(
        self, y: np.ndarray, eta: np.ndarray, *args: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        p = expit(eta)
        return y - p, -p * (1.0 - p)
