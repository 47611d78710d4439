"""Tests of the shared seeded bootstrap helper."""

from __future__ import annotations

import re

import numpy as np
import pytest
from _seeds import shifted
from scipy import stats

from counterfair.audit._validation import NEGATIVE_COUNT, PROBABILITY_OUT_OF_RANGE
from counterfair.audit.bootstrap import (
    bootstrap,
    bootstrap_interval,
    percentile_interval,
    resample_indices,
)


def test_seeded_resamples_are_reproducible() -> None:
    values = np.arange(50.0)

    def mean(rows: np.ndarray) -> float:
        return float(values[rows].mean())

    a = bootstrap(mean, 50, n_resamples=30, seed=shifted(1))
    b = bootstrap(mean, 50, n_resamples=30, seed=shifted(1))
    c = bootstrap(mean, 50, n_resamples=30, seed=shifted(2))
    assert a.shape == (30,)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_stratified_resamples_keep_stratum_sizes() -> None:
    rng = np.random.default_rng(shifted(0))
    strata = rng.integers(0, 4, 200)
    for _ in range(5):
        rows = resample_indices(200, rng, strata)
        np.testing.assert_array_equal(np.bincount(strata[rows], minlength=4),
                                      np.bincount(strata, minlength=4))


def test_percentile_interval_matches_numpy_quantile() -> None:
    rng = np.random.default_rng(shifted(3))
    samples = rng.normal(size=(500, 3))
    lower, upper = percentile_interval(samples, 0.9)
    np.testing.assert_allclose(lower, np.quantile(samples, 0.05, axis=0))
    np.testing.assert_allclose(upper, np.quantile(samples, 0.95, axis=0))


def test_nan_draws_are_ignored_and_all_nan_gives_nan_without_warning() -> None:
    samples = np.array([[1.0, np.nan], [2.0, np.nan], [np.nan, np.nan], [3.0, np.nan]])
    lower, upper = percentile_interval(samples, 0.5)
    np.testing.assert_allclose([lower[0], upper[0]], np.quantile([1.0, 2.0, 3.0], [0.25, 0.75]))
    assert np.isnan(lower[1]) and np.isnan(upper[1])


def test_mean_interval_covers_the_mean() -> None:
    rng = np.random.default_rng(shifted(8))
    values = rng.normal(loc=2.0, size=400)
    n_resamples = 2000
    lower, upper = bootstrap_interval(lambda rows: values[rows].mean(), values.size,
                                      n_resamples=n_resamples, seed=shifted(0))
    assert lower < values.mean() < upper
    # the 95% percentile interval of a mean is 2 x 1.96 se wide (the bootstrap's se is the
    # plug-in one, ddof=0), up to the Monte Carlo error of its endpoints: the 2.5% quantile
    # of B resamples has sd sqrt(p (1 - p) / B) / density(1.96) se; 4 sds of the width
    z, p = stats.norm.ppf(0.975), 0.025
    se = values.std(ddof=0) / np.sqrt(values.size)
    endpoint_sd = np.sqrt(p * (1 - p) / n_resamples) / stats.norm.pdf(z) * se
    assert abs(float(upper - lower) - 2 * z * se) < 4 * np.sqrt(2) * endpoint_sd


def test_errors() -> None:
    with pytest.raises(ValueError, match=re.escape(NEGATIVE_COUNT.format(name="n_bootstrap",
                                                                         value=-3))):
        bootstrap(lambda rows: 0.0, 5, n_resamples=-3)
    with pytest.raises(ValueError, match=re.escape(PROBABILITY_OUT_OF_RANGE.format(
            name="interval", value=1.5))):
        percentile_interval(np.zeros((3, 2)), 1.5)
