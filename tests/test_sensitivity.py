"""Sensitivity of the counterfactual audit: a path A -> latent of strength rho, the prior scale.

Checked on the linear-Gaussian SCM (tests/_models.py) against closed forms: X and Y
are Normal in (A, U), so a shift of U by rho * (c(a') - c(a)) in the counterfactual
world moves X by lambda_X_U * rho * (c(a') - c(a)) sample by sample, and a learner
linear in U moves by its coefficient times the shift. The prior-scale weights are
checked against the closed-form Gaussian posterior of U under the wider prior.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _models import (
    LG_SIGMA_X,
    LG_SIGMA_Y,
    aux_data,
    aux_fit,
    linear_gaussian_data,
    linear_gaussian_fit,
)
from _seeds import shifted

import counterfair as cf
from counterfair.counterfactual.frames import counterfactual_frame
from counterfair.counterfactual.prediction import frame_predictions
from counterfair.counterfactual.sensitivity import (
    plot_sensitivity,
    prior_scale_weights,
    shifted_frame,
)

pytestmark = pytest.mark.stan


@pytest.fixture(scope="module")
def lg_fit(stan_backend: str) -> cf.Fit:
    return linear_gaussian_fit().fit


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    return linear_gaussian_data().drop(columns="U").iloc[:30]


@pytest.fixture(scope="module")
def abduction(lg_fit: cf.Fit, rows: pd.DataFrame) -> cf.Abduction:
    return lg_fit.abduct(rows, condition_on=["X", "Y"], n_samples=400, seed=shifted(40))


def _x(frame: pd.DataFrame) -> np.ndarray:
    return frame["X"].to_numpy(dtype=float)


def test_rho_zero_is_the_ordinary_counterfactual_frame(
    lg_fit: cf.Fit, abduction: cf.Abduction
) -> None:
    plain = counterfactual_frame(lg_fit, abduction, {"A": "1"}, seed=shifted(41))
    zero = shifted_frame(lg_fit, abduction, {"A": "1"}, {"U": np.zeros(30)}, seed=shifted(41))
    pd.testing.assert_frame_equal(plain, zero)


def test_shift_moves_x_by_lambda_rho_delta_and_a_latent_learner_by_its_coefficient(
    lg_fit: cf.Fit, rows: pd.DataFrame, abduction: cf.Abduction
) -> None:
    rho = 0.7
    delta = np.where(rows["A"].astype(str) == "1", -1.0, 1.0)  # c: "0" -> 0, "1" -> 1
    do = {"A": np.where(rows["A"].astype(str) == "1", "0", "1")}
    base = frame_predictions(
        lg_fit, shifted_frame(lg_fit, abduction, do, {}, seed=shifted(1)), _x
    )
    moved = frame_predictions(
        lg_fit, shifted_frame(lg_fit, abduction, do, {"U": rho * delta}, seed=shifted(1)), _x
    )
    lam = np.ravel(abduction.params["lambda_X_U"])[:, None]  # (S, 1)
    expected = lam * rho * delta[None, :]
    got = (moved["change"] - base["change"]).to_numpy().reshape(abduction.n_samples, -1)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)

    learner = cf.FairLearner(
        lg_fit,
        target="Y",
        features=cf.inputs.Latent(),
        n_samples=5,
        seed=shifted(42),
    ).fit(linear_gaussian_data().drop(columns="U").iloc[:200])
    coef = float(np.ravel(learner.estimator_.coef_)[0])
    table = cf.sensitivity(
        lg_fit, rows, {"Fair U": learner, "X": _x}, attribute="A",
        rho=(0.0, rho), prior_scale=(1.0, 2.0), abduction=abduction, seed=shifted(1),
    )
    fair = table[table["predictor"] == "Fair U"].set_index(["rho", "prior_scale"])
    # |change| of a learner linear in U is |coef| * rho for every row and sample
    for scale in (1.0, 2.0):
        assert fair.loc[(0.0, scale), "mean_abs_change"] == pytest.approx(0.0, abs=1e-12)
        assert fair.loc[(rho, scale), "mean_abs_change"] == pytest.approx(abs(coef) * rho, rel=1e-9)
    x_rows = table[(table["predictor"] == "X") & (table["prior_scale"] == 1.0)]
    # signed change of X: beta_X_A * delta at rho = 0, plus lambda * rho * delta
    beta = float(np.mean(abduction.params["beta_X_A"]))
    signed = float(np.mean(delta)) * (beta + float(np.mean(lam)) * np.array([0.0, rho]))
    # atol: at rho = 0 the signed changes of the two levels cancel to 0 up to rounding
    np.testing.assert_allclose(
        x_rows.sort_values("rho")["mean_change"], signed, rtol=1e-9, atol=1e-12
    )
    np.testing.assert_allclose(table.loc[table["prior_scale"] == 1.0, "min_ess_share"], 1.0)


def test_prior_scale_weights_match_the_gaussian_posterior(
    lg_fit: cf.Fit, rows: pd.DataFrame, abduction: cf.Abduction
) -> None:
    k = 1.6
    w = prior_scale_weights(lg_fit, abduction, "U", k)
    u = abduction.latents["U"]
    estimate = (w * u).sum(axis=0)
    # self-normalised importance sampling: delta-method standard error per row
    se = np.sqrt((w**2 * (u - estimate) ** 2).sum(axis=0))
    p = {name: np.ravel(abduction.params[name])[:, None] for name in (
        "alpha_X", "beta_X_A", "lambda_X_U", "alpha_Y", "beta_Y_A", "beta_Y_X", "lambda_Y_U"
    )}
    a = rows["A"].astype(str).astype(int).to_numpy()[None, :]
    x, y = rows["X"].to_numpy()[None, :], rows["Y"].to_numpy()[None, :]
    r_x = x - p["alpha_X"] - p["beta_X_A"] * a
    r_y = y - p["alpha_Y"] - p["beta_Y_A"] * a - p["beta_Y_X"] * x
    precision = p["lambda_X_U"] ** 2 / LG_SIGMA_X**2 + p["lambda_Y_U"] ** 2 / LG_SIGMA_Y**2
    m = (p["lambda_X_U"] * r_x / LG_SIGMA_X**2 + p["lambda_Y_U"] * r_y / LG_SIGMA_Y**2) / precision

    def normal(z: np.ndarray, var: np.ndarray) -> np.ndarray:
        return np.exp(-0.5 * z**2 / var) / np.sqrt(var)

    # the weights also tilt the parameter sets by p_k(x, y | theta) / p_1(x, y | theta)
    tilt = normal(m, k**2 + 1 / precision) / normal(m, 1 + 1 / precision)
    tilt = tilt / tilt.sum(axis=0, keepdims=True)
    mean_k = precision * m / (precision + 1 / k**2)
    expected = (tilt * mean_k).sum(axis=0)
    z = np.abs(estimate - expected) / se
    assert z.max() < 4.0, z.max()
    # and the wider prior pulls U less towards 0 than the assumed one
    assert np.mean(np.abs(estimate)) > np.mean(np.abs(u.mean(axis=0)))


def test_plot_and_bad_input(lg_fit: cf.Fit, rows: pd.DataFrame, tmp_path: Path) -> None:
    table = cf.sensitivity(
        lg_fit, rows.iloc[:10], {"X": _x}, attribute="A", rho=(0.0, 0.5), n_samples=10,
        seed=shifted(1),
    )
    path = plot_sensitivity(table, tmp_path / "s.png")
    assert path.stat().st_size > 1000 and not list(tmp_path.glob("*.tmp.png"))
    with pytest.raises(cf.errors.SCMError, match="'X' is not a protected"):
        cf.sensitivity(lg_fit, rows, {"X": _x}, attribute="X")
    with pytest.raises(cf.errors.SCMError, match="'V' is not a latent"):
        cf.sensitivity(lg_fit, rows, {"X": _x}, attribute="A", latent="V")
    with pytest.raises(cf.errors.DataError, match=r"missing: \['1'\]"):
        cf.sensitivity(lg_fit, rows, {"X": _x}, attribute="A", coding={"0": 0.0})
    with pytest.raises(ValueError, match="prior_scale must be positive"):
        cf.sensitivity(lg_fit, rows, {"X": _x}, attribute="A", prior_scale=(0.0,))


def test_shift_reaches_a_non_descendant_of_the_attribute_and_discrete_children(
    stan_backend: str,
) -> None:
    """Auxiliary SCM: Z is a child of K only (no path from race without rho); C is Poisson."""
    fit = aux_fit().fit
    data = aux_data().drop(columns="K").iloc[:40]
    abduction = fit.abduct(data, n_samples=30, seed=shifted(43))
    do = {"race": np.where(data["race"].astype(str) == "a", "b", "a")}
    rho = 0.5
    delta = np.where(data["race"].astype(str) == "a", 1.0, -1.0)
    frame = shifted_frame(fit, abduction, do, {"K": rho * delta}, seed=shifted(2))
    fact, counter = (frame[frame["world"] == w] for w in ("factual", "counterfactual"))
    moved_z = (counter["Z"].to_numpy() - fact["Z"].to_numpy()).reshape(30, -1)
    lam = np.ravel(abduction.params["lambda_Z_K"])[:, None]
    np.testing.assert_allclose(moved_z, lam * rho * delta[None, :], rtol=0, atol=1e-9)
    plain = shifted_frame(fit, abduction, do, {}, seed=shifted(2))
    np.testing.assert_array_equal(plain[plain["world"] == "counterfactual"]["Z"], fact["Z"])
    c = counter["C"].to_numpy()
    assert np.array_equal(c, np.round(c)) and (c >= 0).all()
    # a coupled count moves with the sign of lambda_C_K * shift, or stays (sample by sample)
    base_c = plain[plain["world"] == "counterfactual"]["C"].to_numpy()
    direction = np.sign(np.ravel(abduction.params["lambda_C_K"])[:, None] * delta[None, :])
    moved_c = (c - base_c).reshape(30, -1)
    assert (moved_c * direction >= 0).all() and (moved_c != 0).any()


def test_order_preserving_baseline_maps_the_counterfactual_row_with_its_new_group(
    lg_fit: cf.Fit, rows: pd.DataFrame, abduction: cf.Abduction
) -> None:
    """In the world of do(A = a') the baseline ranks X among group a's training scores."""
    from counterfair.learn.baselines import BaselinePredictor

    train = linear_gaussian_data().drop(columns="U").iloc[100:400]
    base = BaselinePredictor(["A", "X"], "Y", ["A"])
    model = cf.OrderPreservingPredictor(base, attribute="A").fit(train)
    do = {"A": np.where(rows["A"].astype(str) == "1", "0", "1")}
    frame = counterfactual_frame(lg_fit, abduction, do, seed=shifted(3))
    result = frame_predictions(lg_fit, frame, model)
    counter = frame[frame["world"] == "counterfactual"].reset_index(drop=True)
    keys = counter["A"].astype(str).to_numpy(object)
    scores = model.estimator_.predict(counter)
    expected = model.transform_scores(scores, keys, counter.index)
    np.testing.assert_allclose(result["counterfactual"], expected, rtol=0, atol=1e-12)
    assert set(keys) == {"0", "1"} and (result["change"].abs() > 0).mean() > 0.5
    own = frame[frame["world"] == "factual"]["A"].astype(str).to_numpy(object)
    with_own_group = model.transform_scores(scores, own, counter.index)
    assert np.abs(with_own_group - expected).mean() > 0.1  # the group map matters
