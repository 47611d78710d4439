"""The ordinal family: ordered logistic regression with ordered cutpoints.

A node with ``K`` ordered levels (codes ``0 .. K-1``, written ``1 .. K`` in
Stan) has ``P(x <= k | eta) = logit^-1(c_k - eta)`` for cutpoints
``c_0 < .. < c_{K-2}`` (``cutpoints_<node>``, learned). The cutpoints absorb
the intercept, so the linear predictor has none. Stan (its emitter,
:mod:`counterfair.stan.families.ordinal`): ``ordered_logistic_glm``
when the linear predictor is a design matrix times coefficients plus a scalar
(the scalar is moved into the cutpoints), ``ordered_logistic`` when it has
per-row latent terms.

**As a parent**, an ordinal node enters its children's linear predictors as
reference-coded indicators of its levels (the lowest level is the reference):
one effect per level above the lowest, ``beta_<child>_<node>``, a vector like a
protected parent's. An integer score with one slope would be more parsimonious,
but it assumes equally spaced levels, which ordinal data rarely are (COMPAS
``age_cat``: under 25, 25 to 45, over 45); indicators assume nothing about the
spacing, read as contrasts with the lowest level, and cost ``K - 2`` more
coefficients, few for the handful of levels ordinal variables have. It is also
the coding protected and categorical parents use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pandas as pd
from scipy.special import expit, log_expit

from counterfair import errors
from counterfair.model.families.levels import (
    ORDINAL_STRINGS,
    LevelFamily,
    distinct_levels,
    is_numeric_column,
    level_key,
    normalise_levels,
)
from counterfair.model.nodes import Observed, Prior, normal_prior
from counterfair.rng import RandomSource

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation
    from counterfair.model.params import ParamDraws

WITH_INTERCEPT = (
    "an Ordinal node has no intercept (its cutpoints absorb it): drop intercept=True"
)
"""Error when an Ordinal spec asks for an intercept."""


def cutpoint_prior() -> Prior:
    """Normal(0, 5) on every cutpoint (logit scale)."""
    return normal_prior(0.0, 5.0)


@dataclass(frozen=True)
class Ordinal(Observed):
    """An ordered categorical node: ordered logistic with learned cutpoints.

    Parameters
    ----------
    levels : sequence of str or int, optional
        The levels from lowest to highest (values of the column, compared as
        strings), or their number ``K`` when the column holds the codes
        ``0 .. K-1``. At least 2. When omitted they are read from the training
        rows at fit time, for numbers only, in numeric order (or the categories of
        an ordered pandas Categorical column), and recorded in the fit's SCM; a
        column of strings is refused with a message asking for their order.
    prior_cutpoints : Prior
        Prior of every cutpoint (default Normal(0, 5) on the logit scale).
    intercept : bool
        Must stay False: the cutpoints absorb the intercept.

    Notes
    -----
    As a parent, the node enters a child's linear predictor as reference-coded
    indicators of its levels, the lowest being the reference (see
    :mod:`counterfair.model.families.ordinal`).

    Examples
    --------
    >>> Ordinal(levels=("<25", "25-45", ">45")).n_levels
    3
    """

    family: ClassVar[str] = "ordinal"
    link: ClassVar[str] = "logit"
    levels: tuple[str, ...] | int | None = None
    intercept: bool = False
    prior_cutpoints: Prior = field(default_factory=cutpoint_prior)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "levels", normalise_levels(self.levels, "an Ordinal"))
        if self.intercept:
            raise ValueError(WITH_INTERCEPT)

    @property
    def n_levels(self) -> int:
        """Number of levels ``K``."""
        return self.levels if isinstance(self.levels, int) else len(self.levels or ())

    @property
    def labels(self) -> tuple[str, ...] | None:
        """The declared level labels, or None when the levels are integer codes."""
        return None if isinstance(self.levels, int) else self.levels


def _spec(spec: Observed) -> Ordinal:
    assert isinstance(spec, Ordinal)
    return spec


def category_probabilities(cutpoints: np.ndarray, eta: np.ndarray) -> np.ndarray:
    """``P(x <= k)`` for ``k = 0 .. K-2``, shape ``(S, N, K-1)``.

    Cutpoints have shape ``(S, K-1)``, ``eta`` shape ``(S, N)``.
    """
    return np.asarray(expit(cutpoints[:, None, :] - eta[..., None]))


class OrdinalFamily(LevelFamily):
    """Ordinal nodes; a classification task.

    Coupled across worlds by the CDF ``P(x <= k) = logit^-1(c_k - eta)``, which
    decreases in ``eta``: with one uniform per unit a level never falls when a
    parent raises ``eta``.

    Exact abduction applies: with ``lo`` and ``hi`` the cutpoints either side of
    the observed level (``-inf`` below the lowest, ``+inf`` above the highest),
    ``P(x | eta) = F(hi - eta) * F(eta - lo) * (1 - exp(lo - hi))`` for the
    logistic CDF ``F``, so the log likelihood in ``eta`` is
    ``log F(hi - eta) + log F(eta - lo)``, a sum of two concave terms.
    """

    name = "ordinal"
    spec = Ordinal
    task = "classifier"
    exact = True
    extra_parameters = ("cutpoints",)
    intercept_allowed = False
    ordered_levels = True

    # ------------------------------------------------------------------ data
    def read_levels(self, series: pd.Series, column: str) -> tuple[str, ...]:
        """Numbers in numeric order, or an ordered Categorical's categories; strings refused.

        Raises
        ------
        DataError
            When the column holds strings (or booleans): their order is the user's to give.
        """
        if isinstance(series.dtype, pd.CategoricalDtype) and series.dtype.ordered:
            return distinct_levels(series)
        if is_numeric_column(series):
            return distinct_levels(series)
        found = sorted({level_key(v) for v in series.dropna().unique()})
        shown = ", ".join(repr(v) for v in found[:4]) + (", ..." if len(found) > 4 else "")
        raise errors.DataError(
            ORDINAL_STRINGS.format(
                column=column,
                values=shown,
                example=", ".join(found[:3]),
                quoted=", ".join(repr(v) for v in found[:3]),
            )
        )

    # ------------------------------------------------------------------ numpy
    def parameter_shapes(
        self, eq: NodeEquation, widths: Mapping[str, int]
    ) -> dict[str, tuple[int, ...]]:
        return {eq.param("cutpoints"): (_spec(eq.spec).n_levels - 1,)}

    def check_parameter(self, eq: NodeEquation, name: str, value: np.ndarray) -> str | None:
        if value.shape[-1] > 1 and not np.all(np.diff(value, axis=-1) > 0):
            return "must be strictly increasing"
        return None

    def mean(self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray) -> np.ndarray:
        """The expected level code ``sum_k P(x > k)``."""
        below = category_probabilities(params[eq.param("cutpoints")], eta)
        return np.asarray((1.0 - below).sum(axis=-1))

    def draw(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, rng: RandomSource
    ) -> np.ndarray:
        return self.quantile(eq, params, eta, rng.random(eta.shape))

    def cdf_interval(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, y: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        below = category_probabilities(params[eq.param("cutpoints")], eta)
        shape = (*below.shape[:-1], 1)
        cdf = np.concatenate([np.zeros(shape), below, np.ones(shape)], axis=-1)  # F(k - 1)
        code = np.broadcast_to(np.asarray(y, dtype=np.int64), shape[:-1])[..., None]
        lower = np.take_along_axis(cdf, code, axis=-1)[..., 0]
        upper = np.take_along_axis(cdf, code + 1, axis=-1)[..., 0]
        return lower, upper

    def quantile(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, u: np.ndarray
    ) -> np.ndarray:
        below = category_probabilities(params[eq.param("cutpoints")], eta)
        return np.asarray((u[..., None] > below).sum(axis=-1), dtype=float)

    # ------------------------------------------------------------------ exact abduction
    def likelihood_arguments(
        self, eq: NodeEquation, params: ParamDraws, y: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """The cutpoints below and above each row's observed level, shape ``(S, N)``."""
        cutpoints = params[eq.param("cutpoints")]
        s = cutpoints.shape[0]
        padded = np.concatenate(
            [np.full((s, 1), -np.inf), cutpoints, np.full((s, 1), np.inf)], axis=1
        )
        code = np.rint(np.asarray(y)).astype(np.int64).reshape(-1)
        return padded[:, code], padded[:, code + 1]

    def log_likelihood(self, y: np.ndarray, eta: np.ndarray, *args: np.ndarray) -> np.ndarray:
        lower, upper = args
        return np.asarray(log_expit(upper - eta) + log_expit(eta - lower))

    def derivatives(
        self, y: np.ndarray, eta: np.ndarray, *args: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        lower, upper = args
        up = expit(eta - upper)  # 1 - F(hi - eta)
        down = expit(lower - eta)  # 1 - F(eta - lo)
        return down - up, -up * (1.0 - up) - down * (1.0 - down)
