"""PSIS-LOO with integrated latents (``counterfair.inference.loo``): the integral against a closed
form and brute-force Monte Carlo, the ranking of a true SCM against a wrong one, and
the refusals to compare fits over different rows or columns."""

from __future__ import annotations

import functools
import re

import networkx as nx
import numpy as np
import pytest
from _models import (
    LG_SIGMA_X,
    LG_SIGMA_Y,
    aux_fit,
    linear_gaussian_data,
    linear_gaussian_fit,
    quietly,
    shifted,
)
from scipy.special import logsumexp
from scipy.stats import bernoulli, multivariate_normal, poisson

import counterfair as cf
from counterfair.inference.loo import integration_method, node_log_density, pointwise_log_likelihood
from counterfair.model.evaluate import linear_predictor
from counterfair.rows.validated import observed_values


def _inputs(fit: cf.Fit, rows: slice, draws: int) -> tuple:
    params = fit.params().take(np.linspace(0, fit.params().n - 1, draws).astype(int))
    data = fit.data.iloc[rows]
    return params, fit.encoding.codes(data), observed_values(fit.scm, data)


def test_quadrature_equals_the_marginal_normal_closed_form() -> None:
    """Linear-Gaussian SCM: (X, Y) given A is bivariate Normal once U is integrated out."""
    fit = linear_gaussian_fit().fit
    params, codes, observed = _inputs(fit, slice(0, 40), 25)
    got = pointwise_log_likelihood(fit.scm, params, codes, observed)
    a = codes["A"].astype(float)
    for s in range(params.n):
        p = {k: float(np.ravel(v[s])[0]) for k, v in params.items()}
        cx = p["alpha_X"] + p["beta_X_A"] * a
        b = p["beta_Y_X"]
        cy = p["alpha_Y"] + p["beta_Y_A"] * a + b * cx
        # (X, Y) = c + L (U, eps_X, eps_Y), U ~ N(0, 1)
        load = np.array(
            [
                [p["lambda_X_U"], LG_SIGMA_X, 0.0],
                [p["lambda_Y_U"] + b * p["lambda_X_U"], b * LG_SIGMA_X, LG_SIGMA_Y],
            ]
        )
        cov = load @ load.T
        for n in range(len(a)):
            expected = multivariate_normal.logpdf(
                [observed["X"][n], observed["Y"][n]], mean=[cx[n], cy[n]], cov=cov
            )
            assert got[s, n] == pytest.approx(expected, abs=1e-9)


def test_quadrature_equals_brute_force_monte_carlo_with_count_and_binary_children() -> None:
    """aux SCM (K with Normal, Bernoulli and Poisson children): quadrature within 4 MCSE
    of a plain Monte Carlo average over 200,000 prior draws of K, per draw and row."""
    fit = aux_fit().fit
    params, codes, observed = _inputs(fit, slice(0, 12), 4)
    got = pointwise_log_likelihood(fit.scm, params, codes, observed)
    assert integration_method(fit.scm) == "quadrature"
    spec = fit.scm.specs["K"]
    rng = np.random.default_rng(shifted(31))
    m = 200_000
    for n in range(12):
        k = spec.loc + spec.scale * rng.standard_normal(m)
        row_codes = {c: np.repeat(v[n], m) for c, v in codes.items()}
        values = {c: np.repeat(v[n], m) for c, v in observed.items()}
        values["K"] = np.broadcast_to(k, (params.n, m))
        log_f = np.zeros((params.n, m))
        for node in fit.scm.observed:
            eq = fit.scm.equations[node]
            eta = linear_predictor(eq, params, values, row_codes, n_rows=m)
            log_f += node_log_density(eq, params, eta, values[node])
        top = log_f.max(axis=1, keepdims=True)
        w = np.exp(log_f - top)
        estimate = np.log(w.mean(axis=1)) + top[:, 0]
        mcse = w.std(axis=1, ddof=1) / np.sqrt(m) / w.mean(axis=1)  # delta method, log scale
        assert np.all(np.abs(got[:, n] - estimate) <= 4 * mcse + 1e-12), (n, got[:, n], estimate)


def test_node_log_densities_are_the_normalised_scipy_densities() -> None:
    fit = aux_fit().fit
    params, codes, observed = _inputs(fit, slice(0, 30), 3)
    values = {**observed, "K": np.zeros(30)}
    for node, dist in (("C", poisson), ("P", bernoulli)):
        eq = fit.scm.equations[node]
        eta = linear_predictor(eq, params, values, codes)
        got = node_log_density(eq, params, eta, observed[node])
        mean = np.exp(eta) if node == "C" else 1.0 / (1.0 + np.exp(-eta))
        np.testing.assert_allclose(got, dist.logpmf(observed[node][None, :], mean), rtol=1e-10)


def test_importance_sampling_agrees_with_quadrature() -> None:
    """The fallback estimator (prior draws, seed) within 4 MCSE-like bounds of quadrature."""
    fit = linear_gaussian_fit().fit
    params, codes, observed = _inputs(fit, slice(0, 20), 5)
    exact = pointwise_log_likelihood(fit.scm, params, codes, observed, method="quadrature")
    sampled = pointwise_log_likelihood(
        fit.scm, params, codes, observed, method="importance", n_draws=50_000, seed=shifted(3)
    )
    # relative sd of the importance weights is below 20 on these rows: log error < 4 * 20/sqrt(M)
    assert np.max(np.abs(exact - sampled)) < 4 * 20 / np.sqrt(50_000)
    again = pointwise_log_likelihood(
        fit.scm, params, codes, observed, method="importance", n_draws=50_000, seed=shifted(3)
    )
    np.testing.assert_array_equal(sampled, again)


def _no_a_to_x_scm() -> cf.SCM:
    g = nx.DiGraph()
    g.add_node("U", spec=cf.Latent())
    g.add_node("A", spec=cf.Protected(levels=("0", "1")))
    g.add_node("X", spec=cf.Normal(sigma=LG_SIGMA_X))
    g.add_node("Y", spec=cf.Normal(sigma=LG_SIGMA_Y))
    g.add_edges_from([("U", "X"), ("A", "Y"), ("U", "Y"), ("X", "Y")])
    return cf.SCM(g)


@functools.cache
def _wrong_fit() -> cf.Fit:
    data = linear_gaussian_data().drop(columns="U")
    return quietly(
        _no_a_to_x_scm().fit,
        data,
        chains=2,
        warmup=300,
        draws=300,
        seed=shifted(9),
        progress=False,
    )


def test_compare_ranks_the_true_scm_first() -> None:
    """Data simulated with an A -> X effect of 1.0 (sd 0.5): the SCM with the edge wins."""
    table = cf.compare({"without A->X": _wrong_fit(), "true": linear_gaussian_fit().fit})
    assert list(table.index) == ["true", "without A->X"]
    assert set(table.columns) >= {
        "rank",
        "elpd_loo",
        "p_loo",
        "elpd_diff",
        "weight",
        "se",
        "dse",
        "n_bad_k",
        "integration",
    }
    assert table.loc["true", "elpd_diff"] == 0.0
    assert table.loc["without A->X", "elpd_diff"] > 4 * table.loc["without A->X", "dse"]
    assert table["weight"].sum() == pytest.approx(1.0)
    assert (table["integration"] == "quadrature").all()
    single = linear_gaussian_fit().fit.loo()
    assert single.loc[0, "elpd_loo"] == pytest.approx(table.loc["true", "elpd_loo"])


def test_compare_refuses_different_columns() -> None:
    expected = "observed columns differ (only in 'aux': ['C', 'P', 'Z'], only in 'lg': ['Y'])"
    with pytest.raises(cf.errors.SCMError, match=re.escape(expected)):
        cf.compare({"aux": aux_fit().fit, "lg": linear_gaussian_fit().fit})


def test_compare_refuses_different_rows() -> None:
    full = linear_gaussian_fit().fit
    fewer = quietly(
        cf.SCM(full.scm.graph).fit,
        full.data.iloc[:150],
        chains=2,
        warmup=200,
        draws=200,
        seed=shifted(10),
        progress=False,
    )
    with pytest.raises(cf.errors.DataError, match=r"different rows.*400 vs 150"):
        cf.compare({"full": full, "fewer": fewer})


def test_compare_needs_two_fits_and_a_known_method() -> None:
    fit = linear_gaussian_fit().fit
    with pytest.raises(ValueError, match="at least two"):
        cf.compare({"one": fit})
    with pytest.raises(ValueError, match="method must be"):
        fit.loo(method="laplace")


def test_logsumexp_is_used_stably_for_far_rows() -> None:
    """A row far in the tail still gets a finite integrated log-likelihood."""
    fit = linear_gaussian_fit().fit
    params, codes, observed = _inputs(fit, slice(0, 3), 4)
    far = {k: v + 40.0 for k, v in observed.items()}
    got = pointwise_log_likelihood(fit.scm, params, codes, far)
    assert np.all(np.isfinite(got)) and np.all(got < -100)
    assert logsumexp(got) < 0


def test_an_outlying_row_gets_a_pareto_k_warning_naming_it() -> None:
    """Y of row 0 moved 12 (30 residual sds): that row's PSIS estimate is flagged."""
    data = linear_gaussian_data().drop(columns="U").iloc[:60].copy()
    data.iloc[0, data.columns.get_loc("Y")] += 12.0
    fit = quietly(
        linear_gaussian_fit().fit.scm.fit,
        data,
        chains=2,
        warmup=300,
        draws=300,
        seed=shifted(12),
        progress=False,
    )
    with pytest.warns(cf.errors.LOOWarning) as caught:
        table = fit.loo()
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "1 row(s) have Pareto k > 0.7 (rows [0])" in message
    assert "moment matching" in message and "K-fold" in message
    assert table.loc[0, "n_bad_k"] == 1
    assert table.attrs["pareto_k"].idxmax() == 0


def test_quadrature_with_a_categorical_child_equals_a_fine_grid() -> None:
    """A latent with a Normal, a categorical (4 levels) and a Poisson child: LOO's
    quadrature (the library, whose categorical columns are coded 5, 6, 6) equals a
    20,001-point grid integral over the latent, per parameter set and row, to 1e-7."""
    from test_integrated import CATEGORICAL_TRUTH, categorical_child_scm

    from counterfair.model.params import ParamDraws
    from counterfair.rows.validated import Rows

    scm = categorical_child_scm()
    assert integration_method(scm) == "quadrature"
    data = scm.sample(60, params=CATEGORICAL_TRUTH, seed=shifted(41)).drop(columns="U")
    rows = Rows.check(data, scm)
    codes, observed = rows.codes, rows.values()
    params = ParamDraws(
        {
            k: np.stack([np.asarray(v, dtype=float) * f for f in (0.7, 1.0, 1.4)])
            for k, v in CATEGORICAL_TRUTH.items()
        }
    )
    got = pointwise_log_likelihood(scm, params, codes, observed, nodes=40, newton=50)
    grid = np.linspace(-10.0, 10.0, 20_001)
    step = grid[1] - grid[0]
    for n in range(len(data)):
        m = len(grid)
        row_codes = {c: np.repeat(v[n], m) for c, v in codes.items()}
        values = {c: np.repeat(v[n], m) for c, v in observed.items()}
        values["U"] = np.broadcast_to(grid, (params.n, m))
        log_f = np.broadcast_to(-0.5 * grid**2 - 0.5 * np.log(2 * np.pi), (params.n, m))
        for node in scm.observed:
            eq = scm.equations[node]
            eta = linear_predictor(eq, params, values, row_codes, n_rows=m)
            log_f = log_f + node_log_density(eq, params, eta, values[node])
        expected = logsumexp(log_f, axis=1) + np.log(step)
        np.testing.assert_allclose(got[:, n], expected, rtol=0, atol=1e-7, err_msg=f"row {n}")
    # the grid can tell: the loadings of the categorical child matter to the values
    other = ParamDraws({**params.arrays, "lambda_C_U": params["lambda_C_U"] * 1.1})
    moved = pointwise_log_likelihood(scm, other, codes, observed, nodes=40, newton=50)
    assert np.max(np.abs(moved - got)) > 1e-3
