"""What a distribution family of observed nodes must provide, with the common defaults.

A family is a stateless object (one instance per family, kept in the registry
of :mod:`counterfair.model.families`) that holds everything counterfair does
differently for nodes of that family, back-end neutral (numpy and scipy only):

* **data**: which values a column may hold (errors name the column, the value
  and the row), its values as a data frame column, and the rough coefficient
  scale the sampler starts from;
* **parameters**: the shapes of the family's own parameters (and of every
  coefficient for a family that lays them out itself) and their checks;
* **as a parent**: whether the node enters a child as indicators of its levels;
* **numpy**: the mean and a random draw given the linear predictor, used by the
  one forward simulator (:mod:`counterfair.model.simulate`) and by counterfactual
  propagation;
* **noise**: whether the node has additive noise that is abducted exactly and
  reused across worlds (Normal); otherwise how its exogenous noise is abducted
  from a factual value and reused in another world (the coupling of
  counterfactual values, :mod:`counterfair.counterfactual.action`): by default a
  uniform inside the value's CDF interval fed to the quantile function of the
  other world (:meth:`Family.cdf_interval`, :meth:`Family.quantile`), the
  Gumbel-max construction for a categorical node;
* **exact abduction**: the log likelihood in the linear predictor and its first two
  derivatives;
* **learning**: its scikit-learn task (regression or classification).

What the Stan programs say about the family (its data and parameter declarations,
priors, the sampling statement, its columns as a parent, its code in the C++
quadrature) is its emitter's, :class:`counterfair.stan.families.base.StanFamily`, in
:mod:`counterfair.stan.families` (the model never imports it).

Parameter *names* are not made here: the SCM names every Stan identifier
(:meth:`counterfair.SCM._build_equations`), ``<role>_<node>`` for each role in
:attr:`Family.extra_parameters`, and a family reads them from the equation.

The defaults below fit a count or binary family with one linear predictor and
no parameter of its own (Poisson, Bernoulli); a new family overrides what
differs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

import numpy as np
import pandas as pd
from scipy.special import ndtri

from counterfair import errors
from counterfair.model.nodes import Observed
from counterfair.rng import RandomSource

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation
    from counterfair.model.params import ParamDraws

Task = Literal["regressor", "classifier"]
"""The scikit-learn task of a family when its node is a learning target."""

Statistic = Callable[[np.ndarray], np.ndarray]
"""A summary of a node's values over rows: ``(..., N)`` to ``(...)`` (a posterior
predictive check statistic, :mod:`counterfair.inference.ppc`)."""


def mean_statistic(values: np.ndarray) -> np.ndarray:
    """Mean over rows."""
    return np.asarray(values, dtype=float).mean(axis=-1)


def variance_statistic(values: np.ndarray) -> np.ndarray:
    """Sample variance over rows (``ddof=1``)."""
    return np.asarray(values, dtype=float).var(axis=-1, ddof=1)


def share_statistic(value: float) -> Statistic:
    """Share of rows equal to ``value`` (a count, a 0/1 value or a level code)."""

    def share(values: np.ndarray) -> np.ndarray:
        return (np.asarray(values) == value).mean(axis=-1)

    return share

MAX_VALUE = 1e100
"""Largest magnitude of a value in an observed column: the model's arithmetic (squared
residuals, log densities, the grids of exact abduction) stays finite below it."""

TOO_LARGE = (
    "column {column!r} has value {value!r} at row {row!r}, beyond +-{limit:g}; the model's "
    "arithmetic overflows there: rescale the column (e.g. to thousands or to z-scores)"
)
"""Error when an observed column holds a number too large to model."""


def row_label(index: pd.Index | None, position: int) -> object:
    """The label of row ``position`` as a plain Python object (for error messages)."""
    value = index[position] if index is not None else position
    item = getattr(value, "item", None)
    return item() if callable(item) else value


class Family:
    """Behaviour of one distribution family of observed nodes.

    Attributes
    ----------
    name : str
        The family's name (``spec.family`` of its specs).
    spec : type
        Its spec class (the dataclass users put on a node).
    task : {"regressor", "classifier"}
        scikit-learn task of a target of this family.
    additive_noise : bool
        Whether ``x = mu(parents) + sigma * eps`` with a Normal ``eps``: the noise
        is abducted exactly and reused in every world, and the node can anchor
        a latent (:mod:`counterfair.stan.anchoring`). Otherwise its noise is
        abducted by :meth:`abduct_noise` and reused by :meth:`apply_noise`
        (``coupling="monotone"``), or the node is redrawn from its conditional
        distribution where a parent changed (``coupling="redraw"``).
    extra_parameters : tuple of str
        Roles of the family's own parameters besides the linear predictor's
        (e.g. ``("phi",)``); the SCM names them ``<role>_<node>``.
    intercept_allowed : bool
        Whether the linear predictor may have an intercept (not with cutpoints).
    exact : bool
        Whether exact abduction (:mod:`counterfair.inference.exact_abduction`) handles a
        conditioned child of this family (it needs :meth:`log_likelihood` and
        :meth:`derivatives`).
    declares_coefficients : bool
        Whether the family lays out its own coefficients (a categorical node
        has one set per non-reference level) instead of one real per design
        column: it then gives their shapes and computes its linear predictor
        itself (its emitter writes their declarations, priors and sampling
        statement), and its latent loadings cannot carry the sign constraint.
    upper_tail : bool
        Whether the family also has :meth:`survival_interval` and
        :meth:`survival_quantile`: coupled noise in the upper tail (where
        ``F(y - 1) > 0.5``) is then kept on the survival scale, stored as
        ``-v`` with ``v = 1 - u``, so a count far in the tail stays coupled
        instead of losing its interval to rounding (counts).
    """

    name: ClassVar[str]
    spec: ClassVar[type[Observed]]
    task: ClassVar[Task] = "regressor"
    additive_noise: ClassVar[bool] = False
    extra_parameters: ClassVar[tuple[str, ...]] = ()
    intercept_allowed: ClassVar[bool] = True
    exact: ClassVar[bool] = False
    declares_coefficients: ClassVar[bool] = False
    upper_tail: ClassVar[bool] = False

    # ------------------------------------------------------------------ data
    def column_values(self, spec: Observed, series: pd.Series, column: str) -> np.ndarray:
        """Validated values of a column as float64 (level codes from 0 for level families).

        Raises
        ------
        DataError
            Naming the column, the offending value and its row.
        """
        if not (pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series)):
            raise errors.DataError(
                errors.NOT_NUMERIC.format(
                    column=column, node=column, family=self.name, dtype=series.dtype
                )
            )
        values = series.to_numpy(dtype=float)
        bad = ~np.isfinite(values)
        if bad.any():
            i = int(np.argmax(bad))
            raise errors.DataError(
                errors.NOT_FINITE.format(
                    column=column, value=float(values[i]), row=row_label(series.index, i)
                )
            )
        huge = np.abs(values) > MAX_VALUE
        if huge.any():
            i = int(np.argmax(huge))
            raise errors.DataError(
                TOO_LARGE.format(column=column, value=float(values[i]),
                                 row=row_label(series.index, i), limit=MAX_VALUE)
            )
        self.check_values(values, column, series.index)
        return values

    def check_values(self, values: np.ndarray, column: str, index: pd.Index) -> None:
        """Check the finite values of a column against the family's support."""

    def levels_from_data(self, spec: Observed, series: pd.Series, column: str) -> Observed | None:
        """The spec with levels read from the training column, or None when it needs none.

        Level-valued families (ordinal, categorical) and a Bernoulli node of two
        labels read their levels here when the spec declares none
        (:func:`counterfair.model.data_levels.with_levels_from_data`, at fit time).

        Raises
        ------
        DataError
            When the levels cannot be read, naming the column and saying what to declare.
        """
        return None

    def n_levels(self, spec: Observed) -> int | None:
        """Number of levels of a level-valued node (ordinal, categorical), else None."""
        return None

    def coefficient_scale(self, values: np.ndarray) -> float:
        """A rough posterior sd of the node's coefficients (Stan ``multiplier`` only)."""
        spread = float(values.std())
        return float((spread if spread > 0 else 1.0) / np.sqrt(max(values.shape[0], 1)))

    def init_score(self, values: np.ndarray) -> np.ndarray:
        """A roughly linear-scale score of the values, for data-driven initial values."""
        return values.astype(float)

    def frame_column(self, spec: Observed, values: np.ndarray) -> Any:
        """The values as a data frame column (integers by default)."""
        return np.asarray(values).astype(np.int64)

    def check_statistics(self, spec: Observed) -> dict[str, Statistic]:
        """Statistics of the node's posterior predictive check (:mod:`counterfair.inference.ppc`).

        By name, in display order. Counts by default: the mean, the variance and
        the share of zeros (where a Poisson and an overdispersed count differ).
        """
        return {
            "mean": mean_statistic,
            "variance": variance_statistic,
            "share of 0": share_statistic(0),
        }

    # ------------------------------------------------------------------ as a parent
    def parent_levels(self, spec: Observed) -> int | None:
        """Levels when the node enters a child as reference-coded indicators, else None."""
        return None

    # ------------------------------------------------------------------ own coefficients
    def linear_predictor(
        self,
        eq: NodeEquation,
        params: ParamDraws,
        values: Mapping[str, np.ndarray],
        codes: Mapping[str, np.ndarray],
        reference_coding: bool,
        n_rows: int,
    ) -> np.ndarray:
        """The node's linear predictor(s) (``declares_coefficients`` only)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ numpy
    def parameter_shapes(
        self, eq: NodeEquation, widths: Mapping[str, int]
    ) -> dict[str, tuple[int, ...]]:
        """Shape of each parameter the family lays out (``()`` for a scalar).

        Its own parameters (a dispersion, cutpoints), and every coefficient when
        ``declares_coefficients``. ``widths`` gives the number of effects of
        each categorical protected parent (its levels, less the reference under
        reference coding).
        """
        return {}

    def check_parameter(self, eq: NodeEquation, name: str, value: np.ndarray) -> str | None:
        """Why a user-given value of one of the family's own parameters is invalid, or None."""
        return None

    def mean(self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray) -> np.ndarray:
        """Mean of the node given its linear predictor ``eta`` ``(S, N)``."""
        raise NotImplementedError

    def draw(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, rng: RandomSource
    ) -> np.ndarray:
        """A fresh draw of the node given ``eta`` ``(S, N)``, as floats."""
        raise NotImplementedError

    # ------------------------------------------------------------------ coupled noise
    def cdf_interval(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, y: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(F(y - 1), F(y))``: the CDF just below and at the value ``y``, given ``eta``.

        ``F`` is the node's conditional CDF given its linear predictor ``eta``
        ``(S, N)``; ``y`` holds values (level codes for level families) of the
        same shape. A uniform ``u`` in this interval gives back ``y`` through
        :meth:`quantile` at the same ``eta``. Discrete families with an ordered
        support implement it (with :meth:`quantile`).
        """
        raise NotImplementedError(f"the {self.name} family has no CDF interval")

    def quantile(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, u: np.ndarray
    ) -> np.ndarray:
        """The generalised inverse CDF: the smallest ``y`` with ``F(y) >= u``, as floats.

        ``u`` in ``(0, 1]``, shape ``(S, N)`` like ``eta``. Where it cannot be
        computed in floating point (an astronomically large rate), NaN.
        """
        raise NotImplementedError(f"the {self.name} family has no quantile function")

    def survival_interval(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, y: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(S(y), S(y - 1))`` with ``S(k) = P(x > k)`` (families with ``upper_tail``).

        In the upper tail ``F(y - 1)`` rounds to 1 long before the value is
        impossible (a Poisson of rate 1 at 39); the survival function keeps the
        interval's width there.
        """
        raise NotImplementedError(f"the {self.name} family has no survival interval")

    def survival_quantile(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, v: np.ndarray
    ) -> np.ndarray:
        """The smallest ``y`` with ``S(y) <= v`` (the :meth:`quantile` of ``u = 1 - v``)."""
        raise NotImplementedError(f"the {self.name} family has no survival quantile")

    def abduct_noise(
        self,
        eq: NodeEquation,
        params: ParamDraws,
        eta: np.ndarray,
        y: np.ndarray,
        rng: RandomSource,
    ) -> np.ndarray:
        """A draw of the node's exogenous noise given its value ``y`` and predictor ``eta``.

        The noise is what the structural equation ``x = g(eta, noise)`` needs
        besides the parents; :meth:`apply_noise` is ``g``. The default is the
        inverse-CDF equation ``x = F^{-1}(u; eta)`` with ``u ~ Uniform(0, 1)``:
        given ``x = y``, ``u`` is uniform on ``(F(y - 1), F(y)]``
        (:meth:`cdf_interval`). In the upper tail of a family with
        ``upper_tail``, the same uniform is drawn as ``v = 1 - u`` on the
        survival scale and stored as ``-v``. Where the interval has no width in
        floating point even so (a value the model all but rules out), the noise
        is NaN, and the node keeps its factual value in every world.

        Returns
        -------
        numpy.ndarray
            Shape ``(S, N)`` for a uniform (other families may add trailing axes).
        """
        lower, upper = self.cdf_interval(eq, params, eta, y)
        u = lower + (upper - lower) * (1.0 - rng.random(np.shape(lower)))  # in (lower, upper]
        noise = np.where((u > lower) & (u <= upper), u, np.nan)
        if not self.upper_tail:
            return noise
        # upper tail: the uniform as v = 1 - u, drawn in (S(y), S(y - 1)) on the survival
        # scale, where it keeps its precision, and stored as -v (a negative noise)
        tail = lower > 0.5
        if tail.any():
            s_low, s_high = self.survival_interval(eq, params, eta, y)
            v = s_low + (s_high - s_low) * (1.0 - rng.random(np.shape(lower)))
            tail_noise = np.where((v > s_low) & (v < s_high) & (v > 0), -v, np.nan)
            noise = np.where(tail, tail_noise, noise)
        return noise

    def apply_noise(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, noise: np.ndarray
    ) -> np.ndarray:
        """The node's value given ``eta`` and its abducted noise (NaN where the noise is NaN).

        The default is :meth:`quantile`: with a uniform abducted at one ``eta``
        and applied at a larger one, a family whose distribution increases
        stochastically with ``eta`` never gives a smaller value (monotone coupling).
        """
        valid = np.isfinite(noise)
        values = self.quantile(eq, params, eta, np.where(valid & (noise > 0), noise, 0.5))
        tail = valid & (noise < 0)
        if self.upper_tail and tail.any():
            in_tail = self.survival_quantile(eq, params, eta, np.where(tail, -noise, 0.5))
            values = np.where(tail, in_tail, values)
        return np.where(valid, values, np.nan)

    # ------------------------------------------------------------------ exact abduction
    def likelihood_arguments(
        self, eq: NodeEquation, params: ParamDraws, y: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """The family's own parameters as :meth:`log_likelihood` takes them (exact only).

        Each array has shape ``(S, N)`` (broadcast views are fine): one value
        per parameter set and row, e.g. a dispersion repeated over rows, or the
        cutpoints either side of each row's observed level. None by default.
        """
        return ()

    def log_likelihood(self, y: np.ndarray, eta: np.ndarray, *args: np.ndarray) -> np.ndarray:
        """Log likelihood of ``y`` given ``eta``, up to terms free of ``eta`` (exact only).

        It must be concave in ``eta``: exact abduction relies on a log-concave
        posterior. ``args`` are :meth:`likelihood_arguments`, broadcast like ``eta``.
        """
        raise NotImplementedError

    def derivatives(
        self, y: np.ndarray, eta: np.ndarray, *args: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """First and second derivative of :meth:`log_likelihood` in ``eta``."""
        raise NotImplementedError


def check_counts(values: np.ndarray, column: str, index: pd.Index, message: str) -> None:
    """Fail on the first value that is not a non-negative integer, with ``message``."""
    bad = (values < 0) | (values != np.round(values))
    if bad.any():
        i = int(np.argmax(bad))
        raise errors.DataError(
            message.format(column=column, value=float(values[i]), row=row_label(index, i))
        )


def count_coefficient_scale(values: np.ndarray) -> float:
    """Coefficient scale of a log-link count node: 1 / sqrt(total count)."""
    return float(1.0 / np.sqrt(max(values.sum(), 1.0)))


def protected_effect(beta: np.ndarray, codes: np.ndarray, reference_coding: bool) -> np.ndarray:
    """Effect of a categorical parent per set and row (its levels' effects looked up).

    Parameters
    ----------
    beta : numpy.ndarray
        Level effects, shape ``(S, L-1, ...)`` (reference coding) or ``(S, L, ...)``
        (one-hot); trailing axes (one per category of a categorical child) are kept.
    codes : numpy.ndarray
        Level codes, shape ``(N,)`` or ``(S, N)``.
    reference_coding : bool
        Whether level 0 is the reference level with effect 0.
    """
    s = beta.shape[0]
    if reference_coding:
        beta = np.concatenate([np.zeros((s, 1, *beta.shape[2:])), beta], axis=1)
    if np.ndim(codes) == 1:  # one code per row: a gather along the level axis (several
        # times faster than take_along_axis with the codes broadcast to every set)
        return np.asarray(beta[:, np.asarray(codes, dtype=np.int64)])
    index = np.broadcast_to(np.asarray(codes, dtype=np.int64), (s, np.shape(codes)[-1]))
    index = index.reshape(index.shape + (1,) * (beta.ndim - 2))
    return np.take_along_axis(beta, index, axis=1)


QUANTILE_STEPS = 64
"""Most bracketing (and bisection) steps of :func:`count_quantile`."""


def count_quantile(
    cdf: Callable[[np.ndarray, np.ndarray], np.ndarray],
    u: np.ndarray,
    mean: np.ndarray,
    variance: np.ndarray,
    *,
    survival: bool = False,
    where: np.ndarray | None = None,
) -> np.ndarray:
    """The smallest count ``k >= 0`` with ``F(k) >= u``, elementwise, searched from a guess.

    ``cdf(k, index)`` is ``F`` at counts ``k`` for the elements at ``index``
    of the flattened arrays (``-1`` allowed: 0 there). The guess is the
    Cornish-Fisher quantile of a count with that ``mean`` and ``variance`` and
    the third cumulant of a Poisson or negative binomial count, rounded (the
    answer for 99 % of Poisson counts of mean 25 to 50, one count off for the
    rest; further off for small means or far tails, where the search is short);
    the answer is bracketed from it with steps doubling outwards, then found
    by bisection, each step on the elements not yet settled. Every comparison
    uses ``cdf``, the function :meth:`Family.cdf_interval` uses, so a uniform abducted in a value's
    interval gives that value back, and a count never falls where ``F`` does.
    (scipy's ``ppf`` returns NaN at rates above about ``exp(25)``.)

    With ``survival``, ``cdf`` is the survival function ``S(k) = P(x > k)``
    and ``u`` a survival probability ``v``: the result is the smallest ``k``
    with ``S(k) <= v``, the same count as for ``1 - v`` without its rounding.

    With ``where`` (a boolean array shaped like ``u``), only those elements are
    searched (``cdf`` is still given indices of the whole flattened array); the
    others are NaN.

    Returns
    -------
    numpy.ndarray
        The counts as floats, shaped like ``u``; NaN where none was found within
        :data:`QUANTILE_STEPS` steps (counts beyond ``2**53``, where
        neighbouring integers are not distinct floats).
    """
    shape = np.shape(u)
    if where is not None:
        chosen = np.flatnonzero(np.broadcast_to(where, shape))
        out = np.full(int(np.prod(shape)), np.nan)
        out[chosen] = count_quantile(
            lambda k, i: cdf(k, chosen[i]),
            np.ravel(u)[chosen],
            np.ravel(np.broadcast_to(mean, shape))[chosen],
            np.ravel(np.broadcast_to(variance, shape))[chosen],
            survival=survival,
        )
        return out.reshape(shape)
    u = np.ravel(u)
    mean, variance = (np.ravel(np.broadcast_to(a, shape)) for a in (mean, variance))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        level = np.clip(u, 1e-300, 1.0 - 1e-16)
        z = -ndtri(level) if survival else ndtri(level)
        # Cornish-Fisher: mean + sd z + (third cumulant / variance) (z^2 - 1) / 6, with
        # the third cumulant of a Poisson or negative binomial count, 2 v^2 / m - v
        skew = np.where(mean > 0, 2.0 * variance / np.where(mean > 0, mean, 1.0) - 1.0, 1.0)
        guess = mean + np.sqrt(variance) * z + skew * (z * z - 1.0) / 6.0 + 0.5

    def reached(k: np.ndarray, index: np.ndarray) -> np.ndarray:
        """Whether ``F(k) >= u`` (or ``S(k) <= v``) at the elements ``index``."""
        values = cdf(k, index)
        return values <= u[index] if survival else values >= u[index]
    start = np.where(np.isfinite(guess), np.maximum(np.floor(guess), 0.0), 0.0)
    lower, upper = start - 1.0, start  # sought: F(lower) < u <= F(upper)
    step = np.ones_like(start)
    active = np.arange(u.size)
    for _ in range(QUANTILE_STEPS):
        lo, hi, s = lower[active], upper[active], step[active]
        too_high = (lo >= 0) & reached(lo, active)
        too_low = ~too_high & ~reached(hi, active)
        moving = too_high | too_low
        lower[active] = np.where(too_high, np.maximum(lo - s, -1.0), np.where(too_low, hi, lo))
        upper[active] = np.where(too_high, lo, np.where(too_low, hi + s, hi))
        step[active] = np.where(moving, 2.0 * s, s)
        active = active[moving]
        if active.size == 0:
            break
    # every element left the loop with F(lower) < u <= F(upper) (F(-1) = 0), but those
    # still moving after QUANTILE_STEPS steps (no count found: NaN)
    unbracketed = active
    active = np.flatnonzero(upper - lower > 1.0)
    for _ in range(QUANTILE_STEPS):
        if active.size == 0:
            break
        middle = np.floor((lower[active] + upper[active]) / 2.0)
        hit = reached(middle, active)
        upper[active] = np.where(hit, middle, upper[active])
        lower[active] = np.where(hit, lower[active], middle)
        active = active[upper[active] - lower[active] > 1.0]
    exact = upper - lower == 1.0  # the bracket closed: upper is the smallest such count
    exact[unbracketed] = False
    return np.where(exact, upper, np.nan).reshape(shape)


class CountFamily(Family):
    """What the count families (Poisson, negative binomial) share: non-negative integer
    values, a log link, exact abduction, and coupling through their CDF with the upper
    tail on the survival scale.

    A subclass names its scipy distribution (:meth:`scipy_distribution`), its mean
    and variance (:meth:`moments`) and the message for a value that is not a count.
    """

    task = "regressor"
    exact = True
    upper_tail = True
    not_count: ClassVar[str] = ""

    def check_values(self, values: np.ndarray, column: str, index: pd.Index) -> None:
        check_counts(values, column, index, self.not_count)

    def coefficient_scale(self, values: np.ndarray) -> float:
        return count_coefficient_scale(values)

    def init_score(self, values: np.ndarray) -> np.ndarray:
        return np.log1p(values)

    def scipy_distribution(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray
    ) -> tuple[Any, tuple[np.ndarray, ...]]:
        """scipy's discrete distribution and its shape arguments, each shaped like ``eta``."""
        raise NotImplementedError

    def moments(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance given ``eta`` (the starting guess of :func:`count_quantile`)."""
        raise NotImplementedError

    def cdf_interval(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, y: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        dist, args = self.scipy_distribution(eq, params, eta)
        return dist.cdf(y - 1.0, *args), dist.cdf(y, *args)

    def survival_interval(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, y: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        dist, args = self.scipy_distribution(eq, params, eta)
        return dist.sf(y, *args), dist.sf(y - 1.0, *args)

    def abduct_noise(
        self,
        eq: NodeEquation,
        params: ParamDraws,
        eta: np.ndarray,
        y: np.ndarray,
        rng: RandomSource,
    ) -> np.ndarray:
        """:meth:`Family.abduct_noise` with :meth:`count_cdf`, the survival interval
        computed only where the value lies in the upper tail (the same draws)."""
        dist, args = self.scipy_distribution(eq, params, eta)
        shape = np.shape(eta)
        flat = [np.ravel(np.broadcast_to(a, shape)) for a in args]
        value = np.ravel(np.broadcast_to(y, shape)).astype(float)
        cdf = self.count_cdf(dist, survival=False)
        upper = cdf(value, *flat)
        lower = np.zeros_like(upper)
        above = value > 0  # F(-1) = 0
        lower[above] = cdf(value[above] - 1.0, *(a[above] for a in flat))
        lower, upper = lower.reshape(shape), upper.reshape(shape)
        u = lower + (upper - lower) * (1.0 - rng.random(shape))  # in (lower, upper]
        noise = np.where((u > lower) & (u <= upper), u, np.nan)
        tail = np.ravel(lower > 0.5)
        if tail.any():
            sf = self.count_cdf(dist, survival=True)
            at = np.flatnonzero(tail)
            k = value[at]
            flat_low = np.full(value.shape, np.nan)
            flat_high = np.full(value.shape, np.nan)
            flat_low[at] = sf(k, *(a[at] for a in flat))
            flat_high[at] = np.where(
                k > 0, sf(np.maximum(k - 1.0, 0.0), *(a[at] for a in flat)), 1.0
            )
            s_low, s_high = flat_low.reshape(shape), flat_high.reshape(shape)
            v = s_low + (s_high - s_low) * (1.0 - rng.random(shape))
            with np.errstate(invalid="ignore"):
                tail_noise = np.where((v > s_low) & (v < s_high) & (v > 0), -v, np.nan)
            noise = np.where(tail.reshape(shape), tail_noise, noise)
        return noise

    def count_cdf(self, dist: Any, *, survival: bool) -> Callable[..., np.ndarray]:
        """``F(k, *args)`` (or ``S(k, *args)``) at counts ``k >= 0``, as ``dist`` computes
        it: the quantile search's comparisons (by default ``dist.cdf`` / ``dist.sf``)."""
        return cast(Callable[..., np.ndarray], dist.sf if survival else dist.cdf)

    def quantile(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, u: np.ndarray
    ) -> np.ndarray:
        return self._count_quantile(eq, params, eta, u, survival=False)

    def survival_quantile(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, v: np.ndarray
    ) -> np.ndarray:
        return self._count_quantile(eq, params, eta, v, survival=True)

    def apply_noise(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, noise: np.ndarray
    ) -> np.ndarray:
        """:meth:`Family.apply_noise`, each element searched on its own scale only."""
        valid = np.isfinite(noise)
        tail = valid & (noise < 0)
        body = valid & ~tail
        values = self._count_quantile(
            eq, params, eta, np.where(body & (noise > 0), noise, 0.5), survival=False,
            where=body,
        )
        if tail.any():
            in_tail = self._count_quantile(
                eq, params, eta, np.where(tail, -noise, 0.5), survival=True, where=tail
            )
            values = np.where(tail, in_tail, values)
        return np.where(valid, values, np.nan)

    def _count_quantile(
        self,
        eq: NodeEquation,
        params: ParamDraws,
        eta: np.ndarray,
        level: np.ndarray,
        *,
        survival: bool,
        where: np.ndarray | None = None,
    ) -> np.ndarray:
        dist, args = self.scipy_distribution(eq, params, eta)
        flat = [np.ravel(np.broadcast_to(a, np.shape(level))) for a in args]
        function = self.count_cdf(dist, survival=survival)
        mean, variance = self.moments(eq, params, eta)
        return count_quantile(
            lambda k, i: function(k, *(a[i] for a in flat)),
            level,
            mean,
            variance,
            survival=survival,
            where=where,
        )
