"""The vectorised R-hat and bulk ESS equal arviz's, quantity by quantity."""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np
import pytest
from _seeds import shifted

from counterfair.inference.mcmc_stats import bulk_ess, rank_rhat, rhat_and_bulk_ess


def _chains(n_chain: int, n_draw: int, n: int, seed: int) -> np.ndarray:
    """AR(1) chains with varied autocorrelation, offsets and a few constant quantities."""
    rng = np.random.default_rng(seed)
    phi = rng.uniform(-0.3, 0.97, size=n)
    draws = np.empty((n_chain, n_draw, n))
    draws[:, 0] = rng.standard_normal((n_chain, n))
    for t in range(1, n_draw):
        draws[:, t] = phi * draws[:, t - 1] + rng.standard_normal((n_chain, n))
    draws += rng.normal(0, 0.3, size=(n_chain, 1, n))  # chains that disagree a little
    draws[:, :, :2] = 4.0  # constant quantities
    return draws


@pytest.mark.parametrize(("n_chain", "n_draw"), [(2, 400), (4, 101), (2, 9), (1, 300)])
def test_matches_arviz(n_chain: int, n_draw: int) -> None:
    draws = _chains(n_chain, n_draw, 40, seed=n_draw)
    dataset = az.convert_to_dataset({"x": draws})
    expected_ess = np.asarray(az.ess(dataset, method="bulk")["x"].values)
    np.testing.assert_allclose(bulk_ess(draws), expected_ess, rtol=1e-8)
    if n_chain > 1:
        with warnings.catch_warnings():  # arviz divides 0 by 0 for the constant quantities
            warnings.simplefilter("ignore", RuntimeWarning)
            expected_rhat = np.asarray(az.rhat(dataset, method="rank")["x"].values)
        got = rank_rhat(draws)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected_rhat))
        finite = np.isfinite(expected_rhat)
        assert finite.sum() == 38
        np.testing.assert_allclose(got[finite], expected_rhat[finite], rtol=1e-8)


def test_combined_function_equals_the_separate_ones() -> None:
    draws = _chains(3, 60, 25, seed=shifted(1))
    draws[:, :, 5] = np.round(draws[:, :, 5])  # ties: average ranks, as arviz
    rhat, ess = rhat_and_bulk_ess(draws)
    np.testing.assert_array_equal(ess, bulk_ess(draws))
    np.testing.assert_array_equal(rhat, rank_rhat(draws))
    dataset = az.convert_to_dataset({"x": draws[:, :, 5:6]})
    np.testing.assert_allclose(ess[5], az.ess(dataset, method="bulk")["x"].values, rtol=1e-8)


def test_rhat_and_ess_do_not_depend_on_the_block_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of quantities bound the memory; R-hat is exact, ESS equal up to summation order."""
    from counterfair.inference import mcmc_stats

    draws = np.random.default_rng(shifted(4)).normal(size=(2, 200, 301)).cumsum(axis=1)
    whole = mcmc_stats.rhat_and_bulk_ess(draws)
    monkeypatch.setattr(mcmc_stats, "CHUNK_VALUES", 2 * 200 * 7)  # 43 blocks, last one short
    blocked = mcmc_stats.rhat_and_bulk_ess(draws)
    np.testing.assert_array_equal(blocked[0], whole[0])
    np.testing.assert_allclose(blocked[1], whole[1], rtol=1e-12, atol=0)
