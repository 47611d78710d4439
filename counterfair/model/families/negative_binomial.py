"""The negative binomial family: overdispersed counts, log link, learned dispersion phi.

``x ~ NegativeBinomial2(mu = exp(eta), phi)``: mean ``mu`` and variance
``mu + mu^2 / phi``, so a small ``phi`` is strong overdispersion and
``phi -> infinity`` is the Poisson. Stan: ``neg_binomial_2_log_glm`` with a
design matrix, ``neg_binomial_2_log`` without. numpy draws it as the
gamma-Poisson mixture ``x ~ Poisson(g)``, ``g ~ Gamma(phi, mu / phi)``; its CDF
and quantile (coupled counterfactuals) are scipy's ``nbinom`` with ``n = phi``
and ``p = phi / (phi + mu)``, which for a fixed ``phi`` increases
stochastically with ``mu``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from scipy.special import expit
from scipy.stats import nbinom

from counterfair.model.families.base import CountFamily
from counterfair.model.nodes import Observed, Prior
from counterfair.rng import RandomSource

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation
    from counterfair.model.params import ParamDraws

NOT_COUNT = (
    "column {column!r} is a NegativeBinomial node and needs non-negative integer counts; "
    "value {value!r} at row {row!r} is not (round it first, e.g. df[{column!r}].round())"
)
"""Error when a negative binomial column holds a value that is not a count."""

MAX_LOG_MEAN = 50.0
"""Largest log mean a numpy draw, CDF or quantile uses."""


def dispersion_prior() -> Prior:
    """Gamma(2, 0.1) on phi: mean 20, vanishing at 0, weak over 0.5 .. 100."""
    return Prior("gamma", (2.0, 0.1))


@dataclass(frozen=True)
class NegativeBinomial(Observed):
    """An overdispersed count node, log link: variance ``mu + mu^2 / phi``.

    Parameters
    ----------
    prior_dispersion : Prior
        Prior of the dispersion ``phi`` (default gamma(2, 0.1), as Juarez and
        Steel (2010) for a Student-t's degrees of freedom: it keeps phi off 0
        and leaves it free between strong overdispersion and near-Poisson).

    Examples
    --------
    >>> NegativeBinomial().family
    'negative_binomial'
    """

    family: ClassVar[str] = "negative_binomial"
    link: ClassVar[str] = "log"
    prior_dispersion: Prior = field(default_factory=dispersion_prior)


class NegativeBinomialFamily(CountFamily):
    """Negative binomial counts, coupled across worlds by their CDF (monotone in mu).

    Exact abduction applies: in ``eta`` the log likelihood is
    ``y * eta - (y + phi) * log(exp(eta) + phi)`` plus terms free of ``eta``,
    concave with second derivative ``-(y + phi) q (1 - q)``, ``q = mu / (mu + phi)``.
    """

    name = "negative_binomial"
    spec = NegativeBinomial
    not_count = NOT_COUNT
    extra_parameters = ("phi",)

    def coefficient_scale(self, values: np.ndarray) -> float:
        """``1 / sqrt(information)`` of a log-mean weight, the dispersion taken from the
        moments (``phi = m^2 / (v - m)``): each row informs it by ``m phi / (m + phi)``,
        not by ``m`` as a Poisson row does. With the Poisson's ``1 / sqrt(total)`` the
        Census salaries (mean 50,000, variance 37,505 times the mean) got a scale of
        3e-5 where the posterior sds are near 6e-3, and CmdStan's optimizer, whose
        steps are in those units, stopped far from the mode (the Laplace start failed)."""
        y = np.asarray(values, dtype=float)
        n = max(y.shape[0], 1)
        m = max(float(y.mean()) if y.size else 0.0, 1e-12)
        excess = float(y.var()) - m if y.size else 0.0
        if excess <= 1e-12 * m:  # no overdispersion in the moments: the Poisson's
            return super().coefficient_scale(values)
        phi = m * m / excess
        return float(1.0 / np.sqrt(n * m * phi / (m + phi)))

    def parameter_shapes(
        self, eq: NodeEquation, widths: Mapping[str, int]
    ) -> dict[str, tuple[int, ...]]:
        return {eq.param("phi"): ()}

    def check_parameter(self, eq: NodeEquation, name: str, value: np.ndarray) -> str | None:
        return None if np.all(value > 0) else "must be positive"

    def mean(self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray) -> np.ndarray:
        return np.exp(eta)

    def draw(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, rng: RandomSource
    ) -> np.ndarray:
        phi = params[eq.param("phi")][:, None]
        mu = np.exp(np.minimum(eta, MAX_LOG_MEAN))
        rate = rng.gamma(np.broadcast_to(phi, mu.shape), mu / phi)
        return rng.poisson(rate).astype(float)

    def likelihood_arguments(
        self, eq: NodeEquation, params: ParamDraws, y: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """``log(phi)`` per set, broadcast over rows."""
        log_phi = np.log(params[eq.param("phi")])[:, None]
        return (np.broadcast_to(log_phi, (log_phi.shape[0], np.shape(y)[-1])),)

    def log_likelihood(self, y: np.ndarray, eta: np.ndarray, *args: np.ndarray) -> np.ndarray:
        (log_phi,) = args
        return np.asarray(y * eta - (y + np.exp(log_phi)) * np.logaddexp(eta, log_phi))

    def derivatives(
        self, y: np.ndarray, eta: np.ndarray, *args: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        (log_phi,) = args
        q = expit(eta - log_phi)  # mu / (mu + phi)
        weight = y + np.exp(log_phi)
        return y - weight * q, -weight * q * (1.0 - q)

    def scipy_distribution(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray
    ) -> tuple[Any, tuple[np.ndarray, ...]]:
        return nbinom, _scipy_parameters(eq, params, eta)

    def moments(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        n, _ = _scipy_parameters(eq, params, eta)
        mu = np.exp(np.minimum(eta, MAX_LOG_MEAN))
        return mu, mu + mu**2 / n


def _scipy_parameters(
    eq: NodeEquation, params: ParamDraws, eta: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """scipy's ``nbinom`` ``(n, p)`` of NB2(exp(eta), phi): ``phi`` and ``phi / (phi + mu)``."""
    phi = np.broadcast_to(params[eq.param("phi")][:, None], np.shape(eta))
    mu = np.exp(np.minimum(eta, MAX_LOG_MEAN))
    return phi, phi / (phi + mu)
