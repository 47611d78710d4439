"""Warm start of large fits: metric scaling, option checks, and a real warm-started fit."""

from __future__ import annotations

import arviz as az
import numpy as np
import pytest
from _models import law_level2_fit, law_level2_scm, law_train, quietly
from _seeds import shifted

import counterfair as cf
from counterfair.stan import backend as stan_backend
from counterfair.stan.warm_start import MIN_WARMUP, WarmStart, full_data_metric, pilot_rows


def test_full_data_metric_scales_structural_parameters_and_spreads_per_row_ones() -> None:
    pilot = np.array([1.0, 3.0, 2.0, 10.0, 20.0, 30.0])  # z (3 rows), alpha, beta[2]
    layout = [("z_K", 3), ("alpha", 1), ("beta", 2)]
    metric = full_data_metric(pilot, layout, {"z_K"}, n_pilot=3, n_full=6)
    np.testing.assert_allclose(metric, [2.0] * 6 + [5.0, 10.0, 15.0])
    with pytest.raises(ValueError, match="covers 5 entries, the metric has 6"):
        full_data_metric(pilot, [("z_K", 3), ("alpha", 2)], {"z_K"}, 3, 6)


def test_pilot_rows_are_a_seeded_subsample() -> None:
    rows = pilot_rows(100, 30, seed=shifted(4))
    assert len(set(rows.tolist())) == 30 and list(rows) == sorted(rows)
    np.testing.assert_array_equal(rows, pilot_rows(100, 30, seed=shifted(4)))
    assert len(pilot_rows(10, 30, seed=shifted(4))) == 10


def test_short_warmup_is_refused() -> None:
    start = WarmStart(np.ones(3), 0.1, {}, 2000, 1.0)
    with pytest.raises(ValueError, match=f"warmup >= {MIN_WARMUP}"):
        start.sampler_args(MIN_WARMUP - 1)
    args = start.sampler_args(300)
    assert args["init_phase"] + args["metric_window"] + args["term_phase"] == 300


def test_warm_start_needs_cmdstan_and_owns_the_adaptation_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scm, data = law_level2_scm(), law_train().drop(columns="K")
    with pytest.raises(ValueError, match="warm_start=True needs the cmdstanpy back end"):
        scm.fit(data, backend="pystan", warm_start=True)
    with pytest.raises(ValueError, match="warm_start must be"):
        scm.fit(data, backend="pystan", warm_start="always")  # type: ignore[arg-type]
    monkeypatch.setattr(stan_backend, "cmdstan_available", lambda: True)
    with pytest.raises(ValueError, match=r"sets \['stepsize'\] itself"):
        scm.fit(data, backend="cmdstanpy", warm_start=True, stepsize=0.1)


@pytest.mark.stan
@pytest.mark.skipif(not stan_backend.cmdstan_available(), reason="CmdStan is not installed")
def test_warm_started_fit_has_the_same_posterior(stan_backend: str) -> None:
    if stan_backend != "cmdstanpy":
        pytest.skip("warm start is CmdStan only")
    reference = law_level2_fit().fit  # 4 chains of 500 + 1,000 without warm start
    scm, data = law_level2_scm(), law_train().drop(columns="K")
    fit = quietly(
        scm.fit, data, chains=2, warmup=200, draws=1000, seed=shifted(5), warm_start=True,
        progress=False,
    )  # 1,000 draws: with 500, seed shift 3 gave R-hat 1.026 at a bulk ESS of 159
    assert fit.warm_start is not None and fit.warm_start.pilot_rows == len(data)
    assert fit.diagnostics.divergences == 0
    assert fit.diagnostics.max_rhat < 1.02
    for name in scm.parameter_names():
        a, b = _draws(fit, name), _draws(reference, name)
        # the two fits sample the same posterior independently: their means and sds differ
        # by Monte Carlo error alone, within 4 MCSE of the difference (from each fit's ESS)
        for method, statistic in (("mean", np.mean), ("sd", np.std)):
            gap = np.abs(statistic(a, axis=(0, 1)) - statistic(b, axis=(0, 1)))
            se = np.hypot(_mcse(a, method), _mcse(b, method))
            assert np.all(gap < 4 * se), (name, method, gap, se)


def _draws(fit: cf.Fit, name: str) -> np.ndarray:
    """Draws of ``name`` as (chain, draw, entries)."""
    values = np.asarray(fit.idata.posterior[name].values, dtype=float)
    return values.reshape(values.shape[0], values.shape[1], -1)


def _mcse(draws: np.ndarray, method: str) -> np.ndarray:
    """Monte Carlo standard error of the posterior mean or sd of each entry of (chain,
    draw, entries) draws, from arviz's ESS of the mean: sd / sqrt(ESS) for the mean; for
    the sd, arviz's formula (the delta method on the variance, with the ESS of the
    squared deviations; ``az.mcse(method="sd")`` itself fails under numba on numpy 2)."""
    out = []
    for j in range(draws.shape[2]):
        x = draws[:, :, j]
        if method == "mean":
            out.append(x.std() / np.sqrt(float(az.ess(x, method="mean"))))
            continue
        squared = (x - x.mean()) ** 2
        variance = squared.mean()
        var_of_var = (np.mean(squared**2) - variance**2) / float(az.ess(squared, method="mean"))
        out.append(np.sqrt(var_of_var / variance / 4))
    return np.array(out)

