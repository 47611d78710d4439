"""Rows with missing values after a fit of ``missing="model"``: abduction one pattern of
missing columns at a time (:mod:`counterfair.inference.missing_rows`), fair learners
trained on the fit's rows with holes, predicting and audited on rows with holes.

The linear-Gaussian SCM (``U -> X, Y``; ``X -> Y``; ``A`` protected; the noise sds
known) has a closed-form abduction: given the parameters, a row that holds ``X`` but
misses ``Y`` has ``U | X, A ~ N(m, v)`` with ``v = 1 / (1 + l_X^2 / s_X^2)`` and ``m = v
l_X (X - a_X - b_X [A]) / s_X^2``; its missing ``Y`` is a draw of ``Y``'s equation given
``U``. A row that misses ``X`` but holds ``Y`` would need ``X | Y``: refused, naming both.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from _models import LG_SIGMA_X, LG_SIGMA_Y, dag, linear_gaussian_data, linear_gaussian_scm
from _seeds import shifted
from scipy import stats

import counterfair as cf

pytestmark = pytest.mark.filterwarnings("ignore::counterfair.errors.ConvergenceWarning")


@pytest.fixture(scope="module")
def lg_holes_fit(stan_backend: str) -> tuple[cf.Fit, pd.DataFrame]:
    """A fit of the linear-Gaussian SCM on 400 rows, 80 of whose ``Y`` are missing."""
    data = linear_gaussian_data().drop(columns="U")
    holes = data.copy()
    rng = np.random.default_rng(shifted(40))
    holes.loc[holes.index[rng.choice(len(holes), 80, replace=False)], "Y"] = np.nan
    fit = linear_gaussian_scm().fit(
        holes, missing="model", chains=2, warmup=300, draws=300, seed=shifted(41)
    )
    return fit, data


def _new_rows(data: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """200 other rows (new index labels), ``Y`` hidden in a third of them."""
    rows = data.iloc[:200].set_axis(np.arange(200) + 5000).copy()
    rows["X"] = rows["X"] + 0.3  # not the training values
    hide = np.random.default_rng(seed).random(200) < 1 / 3
    rows.loc[hide, "Y"] = np.nan
    return rows, hide


@pytest.mark.stan
def test_new_rows_with_holes_are_abducted_given_what_each_holds(
    lg_holes_fit: tuple[cf.Fit, pd.DataFrame],
) -> None:
    fit, data = lg_holes_fit
    rows, hide = _new_rows(data, shifted(42))
    ab = fit.abduct(rows, n_samples=4000, seed=shifted(43))
    assert ab.engine == "exact" and set(ab.holes) == {"Y"}
    np.testing.assert_array_equal(ab.holes["Y"], hide)
    assert ab.observed["Y"].shape == (4000, 200)
    # the rows that miss Y: their latents are those of the rows without the column,
    # draw for draw (the same rows, the same positions, the same conditioning)
    without = fit.abduct(rows.drop(columns="Y"), n_samples=4000, seed=shifted(43))
    np.testing.assert_array_equal(ab.latents["U"][:, hide], without.latents["U"][:, hide])
    # ... and the closed form of U | X, A given the mean parameters
    p = {k: float(np.ravel(v.mean(axis=0))[0]) for k, v in fit.params().arrays.items()}
    a1 = (rows["A"] == "1").to_numpy()
    x = rows["X"].to_numpy()
    lam = p["lambda_X_U"]
    v = 1 / (1 + lam**2 / LG_SIGMA_X**2)
    m = v * lam * (x - p["alpha_X"] - p["beta_X_A"] * a1) / LG_SIGMA_X**2
    u = ab.latents["U"][:, hide]
    error = np.sqrt(v / 4000)
    assert np.max(np.abs(u.mean(axis=0) - m[hide]) / error) < 4.5
    np.testing.assert_allclose(u.std(axis=0), np.sqrt(v), rtol=0.08)
    # a missing Y is drawn from its equation given each sample's U: residuals N(0, s_Y)
    eta = (p["alpha_Y"] + p["beta_Y_A"] * a1 + p["beta_Y_X"] * x)[None, :] + p[
        "lambda_Y_U"
    ] * ab.latents["U"]
    residual = (ab.observed["Y"] - eta)[:, hide]
    assert abs(residual.mean()) < 4 * LG_SIGMA_Y / np.sqrt(residual.size)
    assert abs(residual.std() / LG_SIGMA_Y - 1) < 0.02
    # the rows that hold Y keep it in every sample
    np.testing.assert_array_equal(ab.observed["Y"][:, ~hide], np.tile(rows["Y"][~hide], (4000, 1)))


@pytest.mark.stan
def test_the_same_numbers_at_every_chunk_size_and_row_order(
    lg_holes_fit: tuple[cf.Fit, pd.DataFrame],
) -> None:
    fit, data = lg_holes_fit
    rows, _ = _new_rows(data, shifted(44))
    options = {"n_samples": 40, "seed": shifted(45)}
    whole = fit.abduct(rows, **options)
    with cf.set_options(chunk_bytes=2**16):
        frame = fit.counterfactual(rows, do={"A": "1"}, **options)
    full = fit.counterfactual(rows, do={"A": "1"}, **options)
    pd.testing.assert_frame_equal(frame, full)
    # the rows in another order, each at its own global position: the same draws per row
    order = np.random.default_rng(shifted(46)).permutation(len(rows))
    shuffled = fit.abduct(rows.iloc[order], positions=order, **options)
    np.testing.assert_array_equal(shuffled.latents["U"], whole.latents["U"][:, order])
    np.testing.assert_array_equal(shuffled.observed["Y"], whole.observed["Y"][:, order])


@pytest.mark.stan
def test_what_new_rows_cannot_hold_is_refused_naming_it(
    lg_holes_fit: tuple[cf.Fit, pd.DataFrame],
) -> None:
    fit, data = lg_holes_fit
    rows, _ = _new_rows(data, shifted(47))
    rows.loc[rows.index[7], "X"] = np.nan  # X missing, its child Y held
    with pytest.raises(cf.errors.DataError, match=r"1 row\(s\) miss 'X' \(first at index label "
                       r"5007\) but hold its descendant 'Y'"):
        fit.abduct(rows)
    # a protected attribute is never modelled as missing
    with pytest.raises(cf.errors.DataError, match="'A'"):
        fit.abduct(rows.assign(A=rows["A"].where(rows.index != 5003)))
    # a fit of complete rows refuses rows with holes, naming the option
    plain = dataclasses.replace(fit, missing=None)
    with pytest.raises(cf.errors.DataError, match="missing='model'"):
        plain.abduct(_new_rows(data, shifted(48))[0])


@pytest.mark.stan
def test_a_fair_learner_trains_on_rows_with_holes_and_predicts_them(
    lg_holes_fit: tuple[cf.Fit, pd.DataFrame],
) -> None:
    fit, data = lg_holes_fit
    missing_y = fit.data["Y"].isna().to_numpy()
    for condition_on_target in (False, True):
        learner = cf.FairLearner(
            fit,
            target="Y",
            features=cf.inputs.Latent(condition_on_target=condition_on_target),
            n_samples=30,
            seed=shifted(49),
        ).fit(fit.data)
        # the estimator saw each sample's own Y where the rows miss it (multiple imputation)
        assert np.isfinite(learner.estimator_.coef_).all()
        rows, _ = _new_rows(data, shifted(50))
        predicted = learner.predict(rows)
        assert np.isfinite(predicted).all() and predicted.shape == (200,)
        # a fair learner of U only: the same prediction in the world where A is changed
        report = cf.audit.counterfactual_fairness(
            fit, rows.drop(columns="Y"), learner,
            settings=cf.audit.AuditSettings(n_samples=20, seed=shifted(51)),
        )
        assert float(report.overall["mean_abs_change"].max()) < 1e-9
    # the predictions of the rows that hold every value do not move with the others' holes
    complete_rows = data.iloc[:50].set_axis(np.arange(50) + 9000)
    with_holes = pd.concat([complete_rows, _new_rows(data, shifted(52))[0]])
    np.testing.assert_allclose(
        learner.predict(with_holes)[:50], learner.predict(complete_rows), rtol=0, atol=1e-12
    )
    assert missing_y.sum() == 80


# ------------------------------------ new rows that miss a node above their evidence
def _level_scm() -> cf.SCM:
    """``U -> E, Y, B, C``; ``A -> E -> Y``, ``A -> Y``: ``E`` Bernoulli, ``Y`` Normal,
    ``B`` and ``C`` Bernoulli (indicators of ``U``, which identify it)."""
    return cf.SCM(dag(
        {"A": cf.Protected(levels=("a0", "a1")), "U": cf.Latent(), "E": cf.Bernoulli(),
         "Y": cf.Normal(), "B": cf.Bernoulli(), "C": cf.Bernoulli()},
        [("A", "E"), ("U", "E"), ("A", "Y"), ("E", "Y"), ("U", "Y"), ("U", "B"), ("U", "C")],
    ))


LEVEL_TRUTH = {
    "alpha_E": -0.3, "beta_E_A": [0.9], "lambda_E_U": 0.8, "alpha_Y": 0.2,
    "beta_Y_A": [0.4], "beta_Y_E": 1.1, "lambda_Y_U": 0.7, "sigma_Y": 0.8,
    "alpha_B": 0.1, "lambda_B_U": 1.2, "alpha_C": -0.2, "lambda_C_U": 1.0,
}


@pytest.mark.stan
def test_new_rows_that_miss_a_binary_node_above_their_evidence_sum_it_out_exactly(
    stan_backend: str,
) -> None:
    """New rows that miss ``E`` but hold its child ``Y``: each sample's ``E`` is drawn with
    probability ``p(Y, B, C, E = e | theta_s)`` (``U`` integrated out) and its ``U`` from the
    abduction at that level. Both are checked against a dense grid over ``U`` computed
    here, per parameter set and row: the share of ``E = 1`` and the mean of ``U``, to
    Monte Carlo error summed over the rows."""
    scm = _level_scm()
    data = scm.sample(700, params=LEVEL_TRUTH, seed=shifted(71)).drop(columns="U")
    rng = np.random.default_rng(shifted(72))
    holes = data.copy()
    holes.loc[rng.random(len(data)) < 0.3, "E"] = np.nan
    fit = scm.fit(holes, missing="model", chains=2, draws=300, seed=shifted(73))
    assert fit.holes == {"E": "sum"}
    new = holes[holes["E"].isna()].iloc[:120]
    new = new.set_axis(new.index + 10_000)
    abduction = fit.abduct(new, n_samples=400, seed=shifted(74))
    assert abduction.engine == "exact"
    params, s = abduction.params, abduction.params.n

    def col(name: str) -> np.ndarray:
        return np.asarray(params[name], dtype=float).reshape(s, -1)[:, :1, None]

    grid = np.linspace(-8, 8, 1601)[None, None, :]
    a = (new["A"].to_numpy() == "a1").astype(float)[None, :, None]
    y = new["Y"].to_numpy()[None, :, None]
    b = new["B"].to_numpy()[None, :, None]
    c = new["C"].to_numpy()[None, :, None]
    log_joint = []
    for e in (0.0, 1.0):
        eta_e = col("alpha_E") + col("beta_E_A") * a + col("lambda_E_U") * grid
        lp = -0.5 * grid**2 + e * eta_e - np.log1p(np.exp(eta_e))
        mean_y = col("alpha_Y") + col("beta_Y_A") * a + col("beta_Y_E") * e \
            + col("lambda_Y_U") * grid
        lp = lp + stats.norm.logpdf(y, mean_y, col("sigma_Y"))
        eta_b = col("alpha_B") + col("lambda_B_U") * grid
        lp = lp + b * eta_b - np.log1p(np.exp(eta_b))
        eta_c = col("alpha_C") + col("lambda_C_U") * grid
        lp = lp + c * eta_c - np.log1p(np.exp(eta_c))
        log_joint.append(lp)  # (S, rows, grid)
    both = np.stack(log_joint)  # (2, S, rows, grid)
    both = np.exp(both - both.max(axis=(0, 3), keepdims=True))
    mass = both.sum(axis=3)  # (2, S, rows)
    share = mass[1] / mass.sum(axis=0)  # P(E = 1 | row, theta_s)
    weights = both.sum(axis=0) / mass.sum(axis=0)[..., None]  # posterior of U on the grid
    u_mean = (weights * grid).sum(axis=-1)
    u_var = (weights * grid**2).sum(axis=-1) - u_mean**2
    drawn_e = abduction.observed["E"]
    assert drawn_e.shape == (s, len(new)) and set(np.unique(drawn_e)) <= {0.0, 1.0}
    gap = (drawn_e - share).sum()
    assert abs(gap) < 4.5 * np.sqrt((share * (1 - share)).sum()), gap
    drawn_u = abduction.latents["U"]
    gap_u = (drawn_u - u_mean).sum()
    assert abs(gap_u) < 4.5 * np.sqrt(u_var.sum()), gap_u
    # per row, the draws follow Y: E = 1 more often where Y is high (beta_Y_E > 0)
    assert np.corrcoef(drawn_e.mean(axis=0), new["Y"])[0, 1] > 0.5
    # the same rows as the fit's own (their labels): the fit's draws, to the same shares
    own = fit.abduct(holes.loc[new.index - 10_000], n_samples=400, seed=shifted(74))
    assert abs(own.observed["E"].mean() - drawn_e.mean()) < 0.05
    # a node without levels above the evidence is still refused, naming both
    cont = cf.SCM(dag(
        {"A": cf.Protected(levels=("a0", "a1")), "W": cf.Normal(), "Y": cf.Normal()},
        [("A", "W"), ("A", "Y"), ("W", "Y")],
    ))
    truth = {"alpha_W": 0.0, "beta_W_A": [0.5], "sigma_W": 1.0, "alpha_Y": 0.1,
             "beta_Y_A": [0.2], "beta_Y_W": 0.8, "sigma_Y": 0.7}
    frame = cont.sample(300, params=truth, seed=shifted(75))
    frame.loc[frame.index[:60], "W"] = np.nan
    cfit = cont.fit(frame, missing="model", chains=1, draws=100, seed=shifted(76))
    with pytest.raises(cf.errors.DataError, match=r"miss 'W' .* but hold its descendant 'Y'.*"
                       r"needs a finite set of levels"):
        cfit.abduct(frame.iloc[:80].set_axis(frame.index[:80] + 1000), n_samples=20)
