"""Seeded (optionally stratified) nonparametric bootstrap used by every audit module.

The percentile method is used for intervals.  Resampling can be stratified: rows are
then drawn with replacement *within* each stratum, so every stratum keeps its size in
every resample.  The group audits stratify by the cross-classification of all
protected attributes, which keeps every group (and every intersection) non-empty and
of fixed size; the intervals are therefore conditional on the group sizes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import LENGTH_MISMATCH, check_count, check_open_unit

Seed = int | np.random.Generator | None
Statistic = Callable[[NDArray[np.intp]], ArrayLike]


def resample_indices(
    n: int,
    rng: np.random.Generator,
    strata: NDArray[np.intp] | None = None,
) -> NDArray[np.intp]:
    """Draw one bootstrap resample of row positions ``0 .. n-1``.

    Parameters
    ----------
    n
        Number of rows.
    rng
        Random generator to draw from.
    strata
        Optional integer stratum label per row; rows are then resampled within strata.

    Returns
    -------
    numpy.ndarray
        ``n`` row positions drawn with replacement.
    """
    if strata is None:
        return rng.integers(0, n, size=n)
    order = np.argsort(strata, kind="stable")
    sorted_strata = strata[order]
    _, starts, sizes = np.unique(sorted_strata, return_index=True, return_counts=True)
    which = np.repeat(np.arange(starts.size), sizes)
    offsets = np.floor(rng.random(n) * sizes[which]).astype(np.intp)
    picked: NDArray[np.intp] = order[starts[which] + offsets]
    return picked


def bootstrap(
    statistic: Statistic,
    n: int,
    *,
    n_resamples: int,
    seed: Seed = 0,
    strata: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Evaluate ``statistic`` on ``n_resamples`` bootstrap resamples.

    Parameters
    ----------
    statistic
        Function of an array of row positions returning a number or an array of fixed
        shape (NaN allowed where a quantity is undefined in a resample).
    n
        Number of rows in the data.
    n_resamples
        Number of resamples (non-negative).
    seed
        Seed or ``numpy.random.Generator``; the same seed gives the same resamples.
    strata
        Optional stratum label per row for stratified resampling.

    Returns
    -------
    numpy.ndarray
        Array of shape ``(n_resamples, *statistic_shape)``.
    """
    n_resamples = check_count(n_resamples, "n_bootstrap")
    rng = np.random.default_rng(seed)
    codes: NDArray[np.intp] | None = None
    if strata is not None:
        codes = np.unique(np.asarray(strata), return_inverse=True)[1].reshape(-1)
        if codes.size != n:
            raise ValueError(
                LENGTH_MISMATCH.format(name="strata", length=codes.size, other_name="data",
                                       other_length=n)
            )
    draws = [
        np.asarray(statistic(resample_indices(n, rng, codes)), dtype=np.float64)
        for _ in range(n_resamples)
    ]
    if not draws:
        shape = np.shape(np.asarray(statistic(np.arange(n)), dtype=np.float64))
        return np.empty((0, *shape), dtype=np.float64)
    return np.stack(draws)


def percentile_interval(
    samples: NDArray[np.float64],
    interval: float = 0.95,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Percentile bootstrap interval along the first axis, ignoring NaN draws.

    Entries whose draws are all NaN (or with no draws at all) get a NaN interval.

    Parameters
    ----------
    samples
        Array of shape ``(n_resamples, ...)`` as returned by :func:`bootstrap`.
    interval
        Two-sided mass of the interval in (0, 1).

    Returns
    -------
    tuple of numpy.ndarray
        Lower and upper bounds, each of shape ``samples.shape[1:]``.
    """
    interval = check_open_unit(interval, "interval")
    alpha = (1.0 - interval) / 2.0
    shape = samples.shape[1:]
    finite = np.isfinite(samples)
    defined: NDArray[np.bool_] = np.asarray(finite.any(axis=0)) if samples.shape[0] else (
        np.zeros(shape, dtype=bool))
    if not defined.any():
        nan = np.full(shape, np.nan)
        return nan, nan.copy()
    # Undefined entries are filled with 0 so that nanquantile never sees an all-NaN slice,
    # then reset to NaN below.
    safe = np.where(finite, samples, np.nan)
    safe = np.where(defined[None, ...], safe, 0.0)
    lower = np.asarray(np.nanquantile(safe, alpha, axis=0), dtype=np.float64)
    upper = np.asarray(np.nanquantile(safe, 1.0 - alpha, axis=0), dtype=np.float64)
    lower[~defined] = np.nan
    upper[~defined] = np.nan
    return lower, upper


def bootstrap_interval(
    statistic: Statistic,
    n: int,
    *,
    n_resamples: int,
    interval: float = 0.95,
    seed: Seed = 0,
    strata: ArrayLike | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Percentile bootstrap confidence interval of ``statistic`` (see :func:`bootstrap`)."""
    samples = bootstrap(statistic, n, n_resamples=n_resamples, seed=seed, strata=strata)
    return percentile_interval(samples, interval)


CI_METHODS: tuple[str, ...] = ("auto", "bootstrap", "poisson", "analytic")
"""Interval methods of the group audits (``ci_method=``).

* ``"bootstrap"``: the exact stratified bootstrap above, ``n_bootstrap`` materialised
  resamples of row positions (time O(rows x resamples), memory O(rows)).
* ``"poisson"``: the chunked Poisson bootstrap of
  :mod:`counterfair.audit.poisson_bootstrap` (time O(rows x resamples), memory
  O(groups x resamples), the same numbers whatever the chunking).
* ``"analytic"``: Wilson score, delta-method and normal intervals of
  :mod:`counterfair.audit.analytic` (time O(rows), no resampling).
* ``"auto"`` (default): no intervals when ``n_bootstrap == 0``; otherwise ``"bootstrap"``
  up to :data:`EXACT_BOOTSTRAP_MAX_ROWS` rows and ``"poisson"`` above.
"""

EXACT_BOOTSTRAP_MAX_ROWS = 100_000
"""Above this many rows ``ci_method="auto"`` runs the Poisson bootstrap, not the exact one."""


def resolve_ci_method(
    ci_method: str, *, n_bootstrap: int, n_rows: int, row_ids_given: bool = False,
    seed: Seed = 0,
) -> str | None:
    """The interval method to run (``None``: no intervals), refusing ignored options.

    Parameters
    ----------
    ci_method
        One of :data:`CI_METHODS`.
    n_bootstrap
        Requested resamples (validated count).
    n_rows
        Number of rows audited.
    row_ids_given
        Whether ``row_ids`` was passed (only the Poisson bootstrap uses row ids).
    seed
        The seed passed; a seed other than the default 0 is refused with
        ``"analytic"``, which draws nothing.

    Raises
    ------
    ValueError
        For an unknown method (naming the choices), ``n_bootstrap`` or a seed with
        ``"analytic"``, no ``n_bootstrap`` with a bootstrap method, or ``row_ids``
        with a method other than the Poisson bootstrap.
    """
    if not isinstance(ci_method, str) or ci_method not in CI_METHODS:
        raise ValueError(f"ci_method must be one of {list(CI_METHODS)}, got {ci_method!r}")
    method: str | None = ci_method
    if ci_method == "analytic" and n_bootstrap:
        raise ValueError(
            f"n_bootstrap={n_bootstrap} would be ignored: ci_method='analytic' draws no "
            "resamples; drop n_bootstrap or choose ci_method='bootstrap' or 'poisson'")
    if ci_method == "analytic" and (isinstance(seed, np.random.Generator) or (
            seed is not None and seed != 0)):
        raise ValueError(
            f"seed={seed!r} would be ignored: ci_method='analytic' draws no random numbers")
    if ci_method in ("bootstrap", "poisson") and not n_bootstrap:
        raise ValueError(f"ci_method={ci_method!r} needs n_bootstrap >= 1 resamples")
    if ci_method == "auto":
        if not n_bootstrap:
            method = None
        else:
            method = "bootstrap" if n_rows <= EXACT_BOOTSTRAP_MAX_ROWS else "poisson"
    if row_ids_given and method != "poisson":
        raise ValueError(
            f"row_ids would be ignored: only ci_method='poisson' keys its draws by row id "
            f"(the method here is {method!r})")
    return method
