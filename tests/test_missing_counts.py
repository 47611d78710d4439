"""``missing="model"`` for a count with children: summed over ``0..K`` where missing.

A Poisson or negative binomial mediator ``C`` (``A -> C -> Y``, ``A -> Y``, ``Y``
Normal) with about 30 % of its values hidden at random given ``A``. The fit sums each
row that misses ``C`` over the counts ``0..K`` (``K`` twice the largest observed count
plus 10). Checked here:

* the plan and the program (the bound, the vectorised terms, the draws and the share of
  ``K``);
* the draws of the missing counts against the exact posterior of each row's count given
  its ``Y``, ``A`` and the draw's parameters, computed here with scipy over ``0..200``:
  the mean of the draws and the mean of the exact posterior means agree to Monte Carlo
  error, summed over the rows;
* recovery of the simulation's coefficients;
* the training rows' abduction fills the counts with the draws;
* a bound too low (rows whose ``Y`` says their count is far above every observed one) is
  warned, naming the node and the bound.
"""

from __future__ import annotations

import logging
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from _models import dag
from _seeds import shifted
from scipy import stats

import counterfair as cf
from counterfair.rows.missing import count_bound, hole_plan

TRUTH = {"alpha_C": 0.8, "beta_C_A": 0.4, "alpha_Y": 0.5, "beta_Y_A": 0.3, "beta_Y_C": 0.6}
PHI = 4.0
"""The negative binomial's dispersion in the simulation."""


def _scm(family: str) -> cf.SCM:
    count = cf.Poisson() if family == "poisson" else cf.NegativeBinomial()
    return cf.SCM(dag(
        {"A": cf.Protected(levels=("a0", "a1")), "C": count, "Y": cf.Normal()},
        [("A", "C"), ("A", "Y"), ("C", "Y")],
    ))


def _data(family: str, n: int, seed: int) -> pd.DataFrame:
    """``n`` rows of the SCM, about 30 % of ``C`` hidden at random given ``A``."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, n)
    mu = np.exp(TRUTH["alpha_C"] + TRUTH["beta_C_A"] * a)
    if family == "poisson":
        c = rng.poisson(mu)
    else:
        c = rng.negative_binomial(PHI, PHI / (PHI + mu))
    y = TRUTH["alpha_Y"] + TRUTH["beta_Y_A"] * a + TRUTH["beta_Y_C"] * c + rng.normal(size=n)
    hidden = rng.random(n) < np.where(a == 1, 0.4, 0.2)
    frame = pd.DataFrame({
        "A": np.where(a == 1, "a1", "a0"), "C": c.astype(float), "Y": y,
    })
    frame.loc[hidden, "C"] = np.nan
    return frame


def _exact_posterior(fit: cf.Fit, rows: pd.DataFrame, family: str) -> np.ndarray:
    """P(C = k | Y, A, draw s) for each draw s, row and k in 0..200, shape (S, rows, 201)."""
    post = fit.idata.posterior
    flat = {name: post[name].values.reshape(-1) for name in
            ("alpha_C", "alpha_Y", "beta_Y_C", "sigma_Y")}
    flat["beta_C_A"] = post["beta_C_A"].values.reshape(-1)
    flat["beta_Y_A"] = post["beta_Y_A"].values.reshape(-1)
    a = (rows["A"].to_numpy() == "a1").astype(float)[None, :, None]
    y = rows["Y"].to_numpy()[None, :, None]
    k = np.arange(201.0)[None, None, :]

    def col(name: str) -> np.ndarray:
        return flat[name][:, None, None]

    mu = np.exp(col("alpha_C") + col("beta_C_A") * a)
    if family == "poisson":
        prior = stats.poisson.logpmf(k, mu)
    else:
        phi = post["phi_C"].values.reshape(-1)[:, None, None]
        prior = stats.nbinom.logpmf(k, phi, phi / (phi + mu))
    mean_y = col("alpha_Y") + col("beta_Y_A") * a + col("beta_Y_C") * k
    lp = prior + stats.norm.logpdf(y, mean_y, col("sigma_Y"))
    lp -= lp.max(axis=-1, keepdims=True)
    p = np.exp(lp)
    return p / p.sum(axis=-1, keepdims=True)


def test_the_plan_sums_a_count_with_children_up_to_its_bound() -> None:
    assert hole_plan(_scm("poisson"), {"C": 7, "Y": 0}) == {"C": "sum"}
    assert hole_plan(_scm("negative_binomial"), {"C": 7, "Y": 2}) == {"C": "sum", "Y": "omit"}
    assert count_bound(pd.Series([0.0, 3.0, np.nan, 12.0])) == 34
    assert count_bound(pd.Series([np.nan, np.nan])) == 10
    program = _scm("poisson").stan_code(holes={"C": "sum"})
    assert "int<lower=0> K_C;" in program
    assert "matrix[N_mis_C, (K_C + 1)] lp" in program
    assert "lp[:, k] += (k - 1) * eta - rate - lgamma(k);" in program
    assert "D_Y_C[:, 1 + (n_levels_A - 1)] = rep_vector(k - 1, N_mis_C);" in program
    assert "C_draw[i] = categorical_rng(softmax(lp[i]')) - 1;" in program
    assert "C_top = fmax(C_top, exp(lp[i, K_C + 1] - log_sum_exp(lp[i])));" in program
    nb = _scm("negative_binomial").stan_code(holes={"C": "sum"})
    assert "log_total = log(phi_C) + log1p_exp(eta - log(phi_C));" in nb


@pytest.mark.stan
@pytest.mark.parametrize("family", ["poisson", "negative_binomial"])
def test_summed_counts_are_drawn_from_their_exact_posterior(
    family: str, stan_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    frame = _data(family, 600, shifted(41))
    bound = count_bound(frame["C"])
    with caplog.at_level(logging.INFO, logger="counterfair"), \
            warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        fit = _scm(family).fit(frame, missing="model", chains=2, draws=500, seed=shifted(42))
    assert fit.holes == {"C": "sum"}
    said = caplog.text
    assert f"'C' has {frame['C'].isna().sum():,} missing value(s), summed over the counts " \
        f"0..{bound}" in said
    assert f"'C' summed over 0..{bound}; the largest posterior share of {bound}" in said
    assert not [w for w in warned if "summed the missing counts" in str(w.message)]
    post = fit.idata.posterior
    draws = post["C_draw"]
    assert draws.dims[-1] == "C_missing_row"
    values = draws.values.reshape(-1, draws.shape[-1]).astype(float)
    assert values.min() >= 0 and np.all(values == np.rint(values))
    assert float(post["C_top"].max()) < 1e-6
    # against the exact posterior of each missing row's count, draw by draw
    rows = frame.loc[draws["C_missing_row"].values]
    exact = _exact_posterior(fit, rows, family)
    k = np.arange(exact.shape[-1])
    mean = (exact * k).sum(axis=-1)  # (S, rows)
    var = (exact * k**2).sum(axis=-1) - mean**2
    n_draws = values.shape[0]
    gap = (values.mean(axis=0) - mean.mean(axis=0)).sum()
    se = np.sqrt(var.mean(axis=0).sum() / n_draws)  # given the draw, rows independent
    assert abs(gap) < 4.5 * se, (gap, se)
    # the count's share of high values follows Y: the draws are not the prior's
    assert np.corrcoef(values.mean(axis=0), rows["Y"])[0, 1] > 0.8
    # recovery of the simulation's coefficients
    for name, truth in TRUTH.items():
        x = post[name].values.ravel()
        assert abs(x.mean() - truth) < 4.5 * x.std(), (name, x.mean(), truth)
    # the training rows' abduction fills the missing counts with the draws
    own = fit.abduct(fit.rows, n_samples=50, seed=shifted(43))
    filled = own.observed["C"][:, own.holes["C"]]
    assert filled.min() >= 0 and np.all(filled == np.rint(filled))
    assert set(np.unique(filled)) <= set(np.unique(values))


@pytest.mark.stan
def test_a_bound_too_low_is_warned_naming_the_node(stan_backend: str) -> None:
    frame = _data("poisson", 400, shifted(44))
    bound = count_bound(frame["C"])
    # rows whose Y says their missing count is far above every observed one
    far = frame.index[frame["C"].isna()][:5]
    frame.loc[far, "Y"] = TRUTH["alpha_Y"] + TRUTH["beta_Y_C"] * (bound + 40)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        _scm("poisson").fit(frame, missing="model", chains=2, draws=200, seed=shifted(45))
    said = [str(w.message) for w in warned if issubclass(w.category, cf.errors.ConvergenceWarning)]
    pattern = (rf"summed the missing counts of 'C' over 0\.\.{bound} \(twice the largest "
               rf"observed count plus 10\), and {bound} holds .* larger counts are likely there")
    assert [m for m in said if re.search(pattern, m)], said


# ------------------------------------------------ ordinal and categorical children
def _children_scm() -> cf.SCM:
    """A Bernoulli ``E`` (summed where missing) with an ordinal child ``O``, a categorical
    child ``Q`` and a Normal child ``Y``."""
    return cf.SCM(dag(
        {"A": cf.Protected(levels=("a0", "a1")), "E": cf.Bernoulli(),
         "O": cf.Ordinal(levels=("p", "q", "r", "s")), "Q": cf.Categorical(levels=("x", "y", "z")),
         "Y": cf.Normal()},
        [("A", "E"), ("A", "O"), ("E", "O"), ("E", "Q"), ("A", "Y"), ("E", "Y")],
    ))


def test_ordinal_and_categorical_children_of_a_summed_node_are_vectors() -> None:
    program = _children_scm().stan_code(holes={"E": "sum"})
    assert "lp[i, k] += ordered_logistic_lpmf(O[mis_E[i]] | eta[i], cutpoints_O);" in program
    assert "lp[i, k] += categorical_logit_lpmf(Q[mis_E[i]] | eta[i]');" in program
    assert "matrix[N_mis_E, n_levels_Q] eta = rep_matrix(append_row(0.0, alpha_Q)', N_mis_E)" \
        in program
    assert "_glm(" not in program[program.index("// E summed"):]  # no GLM call per row


@pytest.mark.stan
def test_a_summed_node_with_ordinal_and_categorical_children_draws_its_exact_posterior(
    stan_backend: str,
) -> None:
    """Each missing ``E`` drawn by the program against its exact posterior given the row's
    ``O``, ``Q``, ``Y``, ``A`` and the draw's parameters, computed here from the
    equations: the posterior share of ``E = 1`` agrees to Monte Carlo error, summed over
    the rows."""
    scm = _children_scm()
    params = {
        "alpha_E": -0.2, "beta_E_A": [0.8], "beta_O_A": [0.4], "beta_O_E": 1.2,
        "cutpoints_O": [-1.0, 0.2, 1.3], "alpha_Q": [0.3, -0.2], "beta_Q_E": [1.0, -0.8],
        "alpha_Y": 0.1, "beta_Y_A": [0.3], "beta_Y_E": 0.7, "sigma_Y": 1.0,
    }
    data = scm.sample(800, params=params, seed=shifted(61))
    rng = np.random.default_rng(shifted(62))
    holes = data.copy()
    holes.loc[rng.random(len(data)) < 0.3, "E"] = np.nan
    fit = scm.fit(holes, missing="model", chains=2, draws=500, seed=shifted(63))
    assert fit.holes == {"E": "sum"}
    post = fit.idata.posterior
    draws = post["E_draw"]
    rows = holes.loc[draws["E_missing_row"].values]
    values = draws.values.reshape(-1, draws.shape[-1]).astype(float)

    def flat(name: str) -> np.ndarray:
        x = post[name].values
        return x.reshape(x.shape[0] * x.shape[1], -1)  # (S, width)

    a = (rows["A"].to_numpy() == "a1").astype(float)[None, :]
    levels_o = {level: i for i, level in enumerate(("p", "q", "r", "s"))}
    levels_q = {level: i for i, level in enumerate(("x", "y", "z"))}
    o = rows["O"].map(levels_o).to_numpy()
    q = rows["Q"].map(levels_q).to_numpy()
    cuts = flat("cutpoints_O")
    logs, q_terms = [], []
    for e in (0.0, 1.0):
        eta_e = flat("alpha_E") + flat("beta_E_A") * a
        lp = e * eta_e - np.log1p(np.exp(eta_e))
        eta_o = flat("beta_O_A") * a + flat("beta_O_E") * e  # (S, rows)
        edges = np.concatenate(
            [np.full((len(cuts), 1), -np.inf), cuts, np.full((len(cuts), 1), np.inf)], axis=1
        )
        upper = np.take_along_axis(edges, np.broadcast_to(o + 1, eta_o.shape), axis=1)
        lower = np.take_along_axis(edges, np.broadcast_to(o, eta_o.shape), axis=1)
        lp += np.log(stats.logistic.cdf(upper - eta_o) - stats.logistic.cdf(lower - eta_o))
        eta_q = np.concatenate(
            [np.zeros((len(cuts), 1)), flat("alpha_Q") + flat("beta_Q_E") * e], axis=1
        )  # (S, 3): the same in every row but for E
        log_soft = eta_q - np.log(np.exp(eta_q).sum(axis=1, keepdims=True))
        lp += log_soft[:, q]
        q_terms.append(log_soft[:, q])
        mean_y = flat("alpha_Y") + flat("beta_Y_A") * a + flat("beta_Y_E") * e
        lp += stats.norm.logpdf(rows["Y"].to_numpy()[None, :], mean_y, flat("sigma_Y"))
        logs.append(lp)
    share = 1.0 / (1.0 + np.exp(logs[0] - logs[1]))  # P(E = 1 | row, draw s)
    n_draws = values.shape[0]
    gap = (values.mean(axis=0) - share.mean(axis=0)).sum()
    se = np.sqrt((share * (1 - share)).mean(axis=0).sum() / n_draws)
    assert abs(gap) < 4.5 * se, (gap, se)

    def z2(p: np.ndarray) -> float:
        """Mean over the rows of the squared z of the draws' mean against ``p``'s (given
        the draw's parameters, the program's draws are independent Bernoullis)."""
        sd = np.sqrt((p * (1 - p)).mean(axis=0) / n_draws)
        return float(np.mean(((values.mean(axis=0) - p.mean(axis=0)) / sd) ** 2))

    assert z2(share) < 1.6, z2(share)  # chi-square(1) per row: mean 1, sd 0.1 here
    # and the check can fail: leave the categorical child's term out and the rows disagree
    odds = (logs[0] - q_terms[0]) - (logs[1] - q_terms[1])
    assert z2(1.0 / (1.0 + np.exp(odds))) > 5, z2(1.0 / (1.0 + np.exp(odds)))
