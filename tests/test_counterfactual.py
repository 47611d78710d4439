"""Counterfactuals from a fitted SCM: abduction, action, prediction, and interventional samples.

* A linear-Gaussian SCM checks abduction and counterfactuals against closed forms.
* The level 2 law school fit (shared with ``test_fit.py``) checks the semantics:
  what changes, what stays, how discrete descendants behave, the frame layout
  and the errors.
* The level 3 fit checks that the abducted additive noise is exact.
"""

from __future__ import annotations

import re

import arviz as az
import numpy as np
import pandas as pd
import pytest
from _models import (
    AUX_RACES,
    LG_SIGMA_X,
    LG_SIGMA_Y,
    RACES,
    SEXES,
    aux_data,
    aux_fit,
    law_level3_fit,
    law_test,
    law_train,
    linear_gaussian_data,
    linear_gaussian_fit,
    stacked,
)
from _seeds import shifted

import counterfair as cf
from counterfair import errors
from counterfair.counterfactual import action as counterfactual

LAW_NODES = ["race", "sex", "K", "UGPA", "LSAT", "ZFYA"]
N_ROWS = 30  # law school rows used for counterfactuals
N_SAMPLES = 40  # joint samples per row


def _z_max(estimate: np.ndarray, expected: np.ndarray, se: np.ndarray) -> float:
    return float(np.max(np.abs(estimate - expected) / se))


def _ess(draws: np.ndarray, chains: int) -> np.ndarray:
    """Bulk ESS per column of ``draws`` (S, N) whose S draws are ``chains`` chains in order."""
    s, n = draws.shape
    dataset = az.convert_to_dataset({"v": draws.reshape(chains, s // chains, n)})
    return np.asarray(az.ess(dataset)["v"].to_numpy(), dtype=float)


def _worlds(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    factual = frame[frame["world"] == "factual"].reset_index(drop=True)
    counter = frame[frame["world"] == "counterfactual"].reset_index(drop=True)
    return factual, counter


def _as_matrix(column: pd.Series, n_rows: int) -> np.ndarray:
    """A long-frame column of one world as (S, N)."""
    return column.to_numpy(dtype=float).reshape(-1, n_rows)


# ====================================================================== linear-Gaussian SCM
@pytest.fixture(scope="module")
def lg_fit(stan_backend: str) -> cf.Fit:
    return linear_gaussian_fit().fit


@pytest.fixture(scope="module")
def lg_theta(lg_fit: cf.Fit) -> dict[str, float]:
    """Posterior means of the parameters (every one is a scalar here)."""
    return {name: float(np.ravel(v)[0]) for name, v in lg_fit.params().mean().items()}


@pytest.fixture(scope="module")
def lg_rows() -> pd.DataFrame:
    return linear_gaussian_data().drop(columns="U").iloc[:25]


def _codes(levels: pd.Series) -> np.ndarray:
    return levels.astype(str).astype(int).to_numpy()


def _lg_posterior(
    theta: dict[str, float], rows: pd.DataFrame, with_y: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Closed-form posterior mean and sd of U given x, a (and y) with parameters theta."""
    a, x, y = _codes(rows["A"]), rows["X"].to_numpy(), rows["Y"].to_numpy()
    b, d, f = theta["lambda_X_U"], theta["lambda_Y_U"], theta["beta_Y_X"]
    r1 = x - theta["alpha_X"] - theta["beta_X_A"] * a
    precision = 1.0 + b**2 / LG_SIGMA_X**2
    numerator = b * r1 / LG_SIGMA_X**2
    if with_y:
        r2 = y - theta["alpha_Y"] - theta["beta_Y_A"] * a - f * x
        precision = precision + d**2 / LG_SIGMA_Y**2
        numerator = numerator + d * r2 / LG_SIGMA_Y**2
    return numerator / precision, np.full(len(rows), 1.0 / np.sqrt(precision))


def _lg_total_effect(theta: dict[str, float]) -> float:
    """Change of Y per unit change of A, through X and directly."""
    return theta["beta_Y_A"] + theta["beta_Y_X"] * theta["beta_X_A"]


@pytest.mark.stan
@pytest.mark.parametrize("condition_on", [["X"], ["X", "Y"]])
def test_abduction_matches_gaussian_closed_form(
    lg_fit: cf.Fit,
    lg_theta: dict[str, float],
    lg_rows: pd.DataFrame,
    condition_on: list[str],
) -> None:
    # the default engine (exact for a one-dimensional latent); the MCMC engine is checked
    # against it in test_exact_abduction.py
    chains, draws = 2, 1000
    n = chains * draws
    abduction = lg_fit.abduct(
        lg_rows, condition_on=condition_on, method="mean", n_samples=n, seed=shifted(3)
    )
    assert abduction.engine == "exact"
    assert abduction.conditioned_on == tuple(condition_on)
    u = abduction.latents["U"]
    assert u.shape == (n, len(lg_rows))
    # every sample uses theta
    for name, value in lg_theta.items():
        np.testing.assert_allclose(abduction.params[name].ravel(), value, rtol=1e-12)

    mean, sd = _lg_posterior(lg_theta, lg_rows, with_y="Y" in condition_on)
    # Monte Carlo standard errors: ESS of the draws for the mean, ESS of the
    # squared deviations for the sd, capped at the number of draws
    ess_mean = np.minimum(_ess(u, chains), n)
    ess_var = np.minimum(_ess((u - u.mean(axis=0)) ** 2, chains), n)
    assert _z_max(u.mean(axis=0), mean, sd / np.sqrt(ess_mean)) < 4
    assert _z_max(u.std(axis=0), sd, sd / np.sqrt(2 * ess_var)) < 4
    # conditioning on Y as well must sharpen the posterior
    if "Y" in condition_on:
        assert np.all(sd < _lg_posterior(lg_theta, lg_rows, with_y=False)[1])


@pytest.mark.stan
def test_counterfactual_matches_closed_form_given_theta(
    lg_fit: cf.Fit, lg_theta: dict[str, float], lg_rows: pd.DataFrame
) -> None:
    a = _codes(lg_rows["A"])
    flipped = np.where(a == 1, "0", "1")
    abduction = lg_fit.abduct(lg_rows, method="mean", n_samples=60, seed=shifted(4))
    frame = lg_fit.counterfactual(lg_rows, do={"A": flipped}, abduction=abduction, seed=shifted(4))
    factual, counter = _worlds(frame)
    n = len(lg_rows)
    assert len(frame) == 2 * 60 * n

    step = (1 - a) - a  # A' - A
    x, y = lg_rows["X"].to_numpy(), lg_rows["Y"].to_numpy()
    expected_x = x + lg_theta["beta_X_A"] * step
    expected_y = y + _lg_total_effect(lg_theta) * step
    np.testing.assert_allclose(_as_matrix(counter["X"], n), np.tile(expected_x, (60, 1)), atol=1e-8)
    np.testing.assert_allclose(_as_matrix(counter["Y"], n), np.tile(expected_y, (60, 1)), atol=1e-8)
    np.testing.assert_array_equal(_as_matrix(factual["Y"], n), np.tile(y, (60, 1)))
    np.testing.assert_array_equal(counter["U"].to_numpy(), factual["U"].to_numpy())
    np.testing.assert_array_equal(counter["A"].astype(str).to_numpy(), np.tile(flipped, 60))


@pytest.mark.stan
def test_intervention_on_an_observed_node_matches_closed_form(
    lg_fit: cf.Fit, lg_theta: dict[str, float], lg_rows: pd.DataFrame
) -> None:
    """do(X = x') moves Y by beta_Y_X (x' - x) (its noise is reused); A and U stay."""
    abduction = lg_fit.abduct(lg_rows, method="mean", n_samples=20, seed=shifted(4))
    n, a = len(lg_rows), _codes(lg_rows["A"])
    x, y = lg_rows["X"].to_numpy(), lg_rows["Y"].to_numpy()
    frame = lg_fit.counterfactual(lg_rows, do={"X": x + 1.0}, abduction=abduction, seed=shifted(4))
    factual, counter = _worlds(frame)
    np.testing.assert_allclose(_as_matrix(counter["X"], n), np.tile(x + 1.0, (20, 1)))
    expected_y = y + lg_theta["beta_Y_X"]
    np.testing.assert_allclose(_as_matrix(counter["Y"], n), np.tile(expected_y, (20, 1)), atol=1e-8)
    np.testing.assert_array_equal(counter["U"].to_numpy(), factual["U"].to_numpy())
    np.testing.assert_array_equal(counter["A"].to_numpy(), factual["A"].to_numpy())

    # several nodes at once; an int on the int-coded protected column A
    both = lg_fit.counterfactual(lg_rows, do={"A": 1, "X": 0.0}, abduction=abduction,
        seed=shifted(4))
    _, counter = _worlds(both)
    assert (counter["A"].astype(str) == "1").all() and (counter["X"] == 0.0).all()
    expected_y = y + lg_theta["beta_Y_A"] * (1 - a) + lg_theta["beta_Y_X"] * (0.0 - x)
    np.testing.assert_allclose(_as_matrix(counter["Y"], n), np.tile(expected_y, (20, 1)), atol=1e-8)
    assert both.attrs["do"] == {"A": 1, "X": 0.0}

    # the factual value gives back the factual world
    same = lg_fit.counterfactual(lg_rows, do={"X": x}, abduction=abduction, seed=shifted(4))
    factual, counter = _worlds(same)
    np.testing.assert_array_equal(counter["Y"].to_numpy(), factual["Y"].to_numpy())


@pytest.mark.stan
def test_counterfactual_of_training_rows_uses_the_joint_posterior(
    lg_fit: cf.Fit, lg_theta: dict[str, float]
) -> None:
    rows = lg_fit.data
    a = _codes(rows["A"])
    flipped = np.where(a == 1, "0", "1")
    frame = lg_fit.counterfactual(None, do={"A": flipped}, n_samples=None)
    factual, counter = _worlds(frame)
    n = len(rows)
    s = lg_fit.params().n
    assert len(frame) == 2 * s * n
    step = ((1 - a) - a).astype(float)
    per_sample = (_as_matrix(counter["Y"], n) - _as_matrix(factual["Y"], n)) / step  # (S, N)

    # sample by sample: the total effect of that posterior draw, exactly
    draws = lg_fit.params()
    effect = draws["beta_Y_A"][:, 0] + draws["beta_Y_X"] * draws["beta_X_A"][:, 0]
    np.testing.assert_allclose(per_sample, np.tile(effect[:, None], (1, n)), atol=1e-8)
    # latents are the fit's own draws of each training row
    np.testing.assert_array_equal(_as_matrix(factual["U"], n), stacked(lg_fit, "U").reshape(s, n))

    # over samples: close to the closed form at the posterior means
    chains = lg_fit.idata.posterior.sizes["chain"]
    ess = min(float(_ess(effect[:, None], chains)[0]), s)
    se = effect.std() / np.sqrt(ess)
    assert abs(per_sample.mean(axis=0) - _lg_total_effect(lg_theta)).max() < 4 * se


# ====================================================================== law school semantics
@pytest.fixture(scope="module")
def law_rows() -> pd.DataFrame:
    """New rows with every observed column (no true K), index 1000..1029."""
    return law_test().drop(columns="K").iloc[:N_ROWS]


@pytest.fixture(scope="module")
def law_abduction(law_fit: cf.Fit, law_rows: pd.DataFrame) -> cf.Abduction:
    return law_fit.abduct(law_rows, n_samples=N_SAMPLES, seed=shifted(6))


def _counterfactual(
    fit: cf.Fit,
    abduction: cf.Abduction,
    do: dict[str, object],
    seed: int = shifted(0),
    coupling: counterfactual.Coupling = "monotone",
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    frame = fit.counterfactual(None, do, abduction=abduction, seed=seed, coupling=coupling)  # type: ignore[arg-type]
    return (frame, *_worlds(frame))


def _effect(abduction: cf.Abduction, param: str, codes: np.ndarray) -> np.ndarray:
    """Effect of protected levels ``codes`` (N,) per sample: (S, N), reference level 0."""
    beta = abduction.params[param]
    table = np.concatenate([np.zeros((beta.shape[0], 1)), beta], axis=1)
    return table[:, codes]


def _level_codes(values: pd.Series, levels: tuple[str, ...]) -> np.ndarray:
    lookup = {level: i for i, level in enumerate(levels)}
    return np.array([lookup[str(v)] for v in values])


@pytest.mark.stan
def test_frame_layout(law_fit: cf.Fit, law_abduction: cf.Abduction, law_rows: pd.DataFrame) -> None:
    frame, factual, counter = _counterfactual(law_fit, law_abduction, {"race": "Black"})
    s, n = N_SAMPLES, N_ROWS
    assert list(frame.columns) == [
        "row",
        "sample",
        "world",
        *LAW_NODES,
        "UGPA:noise",
        "ZFYA:noise",
    ]
    assert len(frame) == 2 * s * n
    assert list(frame["world"].unique()) == ["factual", "counterfactual"]
    for world in (factual, counter):
        assert len(world) == s * n
        np.testing.assert_array_equal(world["row"].to_numpy(), np.tile(law_rows.index, s))
        np.testing.assert_array_equal(world["sample"].to_numpy(), np.repeat(np.arange(s), n))
        assert isinstance(world["race"].dtype, pd.CategoricalDtype)
        assert list(world["race"].cat.categories) == list(RACES)
        assert world["LSAT"].dtype == np.int64
        assert world["UGPA"].dtype == np.float64
    assert frame.attrs["do"] == {"race": "Black"}
    # factual world: the data, repeated for every sample
    np.testing.assert_array_equal(
        _as_matrix(factual["UGPA"], n), np.tile(law_rows["UGPA"].to_numpy(), (s, 1))
    )
    np.testing.assert_array_equal(
        factual["race"].astype(str).to_numpy(), np.tile(law_rows["race"].astype(str), s)
    )
    # latents and noise are shared by the two worlds
    for column in ("K", "UGPA:noise", "ZFYA:noise"):
        np.testing.assert_array_equal(counter[column].to_numpy(), factual[column].to_numpy())
    np.testing.assert_array_equal(_as_matrix(factual["K"], n), law_abduction.latents["K"])


@pytest.mark.stan
def test_latents_and_other_protected_attributes_are_unchanged(
    law_fit: cf.Fit, law_abduction: cf.Abduction
) -> None:
    _, factual, counter = _counterfactual(law_fit, law_abduction, {"race": "Asian"})
    assert (counter["race"] == "Asian").all()
    np.testing.assert_array_equal(counter["K"].to_numpy(), factual["K"].to_numpy())
    np.testing.assert_array_equal(
        counter["sex"].astype(str).to_numpy(), factual["sex"].astype(str).to_numpy()
    )


@pytest.mark.stan
def test_non_descendants_keep_their_factual_values() -> None:
    fit = aux_fit().fit
    rows = aux_data().drop(columns="K").iloc[:40]
    assert fit.scm.non_descendants() == ("Z",)
    flipped = np.where(rows["race"].astype(str) == AUX_RACES[0], AUX_RACES[1], AUX_RACES[0])
    abduction = fit.abduct(rows, n_samples=30, seed=shifted(2))
    frame, factual, counter = _counterfactual(fit, abduction, {"race": flipped}, seed=shifted(2))
    np.testing.assert_array_equal(counter["Z"].to_numpy(), factual["Z"].to_numpy())
    np.testing.assert_array_equal(counter["K"].to_numpy(), factual["K"].to_numpy())
    # every row's race changed, so X (Normal) changes by the race effect exactly
    codes = _level_codes(rows["race"], AUX_RACES)
    change = _effect(abduction, "beta_X_race", 1 - codes) - _effect(abduction, "beta_X_race", codes)
    np.testing.assert_allclose(
        _as_matrix(counter["X"], 40) - _as_matrix(factual["X"], 40), change, atol=1e-10
    )
    assert set(np.unique(counter["P"])) <= {0, 1}
    assert frame["P"].dtype == np.int64


@pytest.mark.stan
def test_do_with_the_factual_levels_returns_the_factual_world(
    law_fit: cf.Fit, law_abduction: cf.Abduction, law_rows: pd.DataFrame
) -> None:
    do = {"race": law_rows["race"].astype(str).to_numpy(), "sex": list(law_rows["sex"])}
    _, factual, counter = _counterfactual(law_fit, law_abduction, do, seed=shifted(9))
    columns = [*LAW_NODES, "UGPA:noise", "ZFYA:noise"]
    pd.testing.assert_frame_equal(counter[columns], factual[columns])
    # one level for all rows: the rows already at that level are unchanged too
    _, factual, counter = _counterfactual(law_fit, law_abduction, {"race": "White"},
        seed=shifted(9))
    white = (factual["race"] == "White").to_numpy()
    assert 0 < white.sum() < len(white)
    pd.testing.assert_frame_equal(
        counter.loc[white, columns].reset_index(drop=True),
        factual.loc[white, columns].reset_index(drop=True),
    )


@pytest.mark.stan
def test_poisson_descendant_is_redrawn_where_its_parent_changed(
    law_fit: cf.Fit, law_abduction: cf.Abduction, law_rows: pd.DataFrame
) -> None:
    """coupling="redraw" (the default coupling is checked in test_coupling.py)."""
    _, factual, counter = _counterfactual(
        law_fit, law_abduction, {"race": "Black"}, seed=shifted(1), coupling="redraw"
    )
    changed = (factual["race"] != "Black").to_numpy()
    assert 0 < changed.sum() < len(changed)
    lsat_f, lsat_c = factual["LSAT"].to_numpy(), counter["LSAT"].to_numpy()
    np.testing.assert_array_equal(lsat_c[~changed], lsat_f[~changed])
    # a fresh Poisson draw with mean ~30 rarely equals the factual count
    assert np.mean(lsat_c[changed] != lsat_f[changed]) > 0.7
    # ... and it follows the counterfactual conditional distribution
    race = _level_codes(law_rows["race"], RACES)
    sex = _level_codes(law_rows["sex"], SEXES)
    p, k = law_abduction.params, law_abduction.latents["K"]
    eta = (
        p["alpha_LSAT"][:, None]
        + _effect(law_abduction, "beta_LSAT_race", np.full(N_ROWS, 1))
        + _effect(law_abduction, "beta_LSAT_sex", sex)
        + p["lambda_LSAT_K"][:, None] * k
    ).ravel()[changed]
    mu = np.exp(eta)
    z = (lsat_c[changed] - mu).sum() / np.sqrt(mu.sum())
    assert abs(z) < 4
    # Normal descendants move by exactly the change of the race effect (level 3 noise)
    ugpa_change = _effect(law_abduction, "beta_UGPA_race", np.full(N_ROWS, 1)) - _effect(
        law_abduction, "beta_UGPA_race", race
    )
    np.testing.assert_allclose(
        _as_matrix(counter["UGPA"], N_ROWS) - _as_matrix(factual["UGPA"], N_ROWS),
        ugpa_change,
        atol=1e-10,
    )


@pytest.mark.stan
def test_several_protected_attributes_at_once(
    law_fit: cf.Fit, law_abduction: cf.Abduction, law_rows: pd.DataFrame
) -> None:
    _, factual, counter = _counterfactual(
        law_fit, law_abduction, {"race": "Asian", "sex": "Male"}, seed=shifted(2)
    )
    assert (counter["race"] == "Asian").all() and (counter["sex"] == "Male").all()
    race = _level_codes(law_rows["race"], RACES)
    sex = _level_codes(law_rows["sex"], SEXES)
    asian, male = np.full(N_ROWS, 2), np.full(N_ROWS, 1)
    for node in ("UGPA", "ZFYA"):
        expected = (
            _effect(law_abduction, f"beta_{node}_race", asian)
            - _effect(law_abduction, f"beta_{node}_race", race)
            + _effect(law_abduction, f"beta_{node}_sex", male)
            - _effect(law_abduction, f"beta_{node}_sex", sex)
        )
        np.testing.assert_allclose(
            _as_matrix(counter[node], N_ROWS) - _as_matrix(factual[node], N_ROWS),
            expected,
            atol=1e-10,
        )
    unchanged = np.tile((race == 2) & (sex == 1), N_SAMPLES)
    np.testing.assert_array_equal(
        counter["LSAT"].to_numpy()[unchanged], factual["LSAT"].to_numpy()[unchanged]
    )


@pytest.mark.stan
def test_per_row_do_values(
    law_fit: cf.Fit, law_abduction: cf.Abduction, law_rows: pd.DataFrame
) -> None:
    race = _level_codes(law_rows["race"], RACES)
    target = (race + 1) % 3  # White -> Black -> Asian -> White
    levels = np.asarray(RACES, dtype=object)[target]
    frame, factual, counter = _counterfactual(law_fit, law_abduction, {"race": levels},
        seed=shifted(3))
    np.testing.assert_array_equal(counter["race"].astype(str), np.tile(levels, N_SAMPLES))
    assert frame.attrs["do"] == {"race": list(levels)}
    expected = _effect(law_abduction, "beta_UGPA_race", target) - _effect(
        law_abduction, "beta_UGPA_race", race
    )
    np.testing.assert_allclose(
        _as_matrix(counter["UGPA"], N_ROWS) - _as_matrix(factual["UGPA"], N_ROWS),
        expected,
        atol=1e-10,
    )
    # the same as intervening row by row with one level
    for code, level in enumerate(RACES):
        _, _, single = _counterfactual(law_fit, law_abduction, {"race": level}, seed=shifted(3))
        rows = np.tile(target == code, N_SAMPLES)
        np.testing.assert_allclose(
            single["UGPA"].to_numpy()[rows], counter["UGPA"].to_numpy()[rows], atol=1e-12
        )


@pytest.mark.stan
@pytest.mark.parametrize(
    ("do", "pattern"),
    [
        (
            {"gender": "Male"},
            re.escape(
                errors.UNKNOWN_DO_NODE.format(
                    node="gender", protected=["race", "sex"], observed=["UGPA", "LSAT", "ZFYA"]
                )
            ),
        ),
        ({"UGPA": "high"}, r"column 'UGPA' \(node 'UGPA', normal\) must be numeric"),
        ({"LSAT": 30.5}, r"column 'LSAT' is a Poisson node .* value 30.5 at row 1000"),
        ({"K": "0"}, re.escape(errors.LATENT_DO.format(node="K"))),
        ({"race": "Martian"}, r"protected attribute 'race' has level 'Martian'"),
        ({"sex": ["Male"] * (N_ROWS - 1) + ["Other"]}, r"'sex' has level 'Other' \(row 1029\)"),
        (
            {"race": ["Black"] * (N_ROWS + 1)},
            re.escape(errors.DO_LENGTH.format(node="race", got=N_ROWS + 1, expected=N_ROWS)),
        ),
    ],
)
def test_bad_interventions_raise_data_error(
    law_fit: cf.Fit, law_abduction: cf.Abduction, do: dict[str, object], pattern: str
) -> None:
    with pytest.raises(cf.errors.DataError, match=pattern):
        law_fit.counterfactual(None, do, abduction=law_abduction)  # type: ignore[arg-type]


@pytest.mark.stan
def test_a_column_absent_from_the_rows_is_simulated_in_both_worlds(
    law_fit: cf.Fit, law_rows: pd.DataFrame
) -> None:
    rows = law_rows.drop(columns="ZFYA")
    abduction = law_fit.abduct(rows, condition_on=["UGPA", "LSAT"], n_samples=10, seed=shifted(1))
    frame = law_fit.counterfactual(None, {"race": "Black"}, abduction=abduction)
    assert frame.attrs["simulated"] == ["ZFYA"]
    factual = frame[frame["world"] == "factual"].reset_index(drop=True)
    counter = frame[frame["world"] == "counterfactual"].reset_index(drop=True)
    # the same simulated noise in both worlds: ZFYA moves by its mean's change only
    np.testing.assert_allclose(factual["ZFYA:noise"], counter["ZFYA:noise"])
    unchanged = (factual["race"] == counter["race"]).to_numpy()
    np.testing.assert_allclose(factual["ZFYA"][unchanged], counter["ZFYA"][unchanged])
    # a node given without its observed parent names both
    assert "drop column" in counterfactual.MISSING_PARENT


# ====================================================================== exact noise (level 3)
@pytest.mark.stan
def test_level3_noise_is_data_minus_structural_mean() -> None:
    fit = law_level3_fit().fit
    abduction = fit.abduct()  # training rows, every posterior draw
    s, n = fit.params().n, len(fit.data)
    assert abduction.n_samples == s
    noise = abduction.noise(fit.scm)
    assert set(noise) == {"UGPA", "LSAT"}
    race = _level_codes(fit.data["race"], RACES)
    sex = _level_codes(fit.data["sex"], SEXES)
    for node in ("UGPA", "LSAT"):
        alpha = stacked(fit, f"alpha_{node}")
        beta_race = stacked(fit, f"beta_{node}_race")
        beta_sex = stacked(fit, f"beta_{node}_sex")
        assert beta_race.shape == (s, 2) and beta_sex.shape == (s, 1)
        race_table = np.column_stack([np.zeros(s), beta_race])
        sex_table = np.column_stack([np.zeros(s), beta_sex])
        mu = alpha[:, None] + race_table[:, race] + sex_table[:, sex]
        expected = fit.data[node].to_numpy(dtype=float)[None, :] - mu
        assert noise[node].shape == (s, n)
        np.testing.assert_allclose(noise[node], expected, rtol=0, atol=1e-12)


@pytest.mark.stan
def test_level2_noise_includes_the_latent_term(law_fit: cf.Fit) -> None:
    abduction = law_fit.abduct(n_samples=200, seed=shifted(3))
    n = len(law_fit.data)
    race = _level_codes(law_fit.data["race"], RACES)
    sex = _level_codes(law_fit.data["sex"], SEXES)
    p, k = abduction.params, abduction.latents["K"]
    noise = abduction.noise(law_fit.scm)
    assert set(noise) == {"UGPA", "ZFYA"}
    for node in ("UGPA", "ZFYA"):
        mu = (
            p[f"alpha_{node}"][:, None]
            + _effect(abduction, f"beta_{node}_race", race)
            + _effect(abduction, f"beta_{node}_sex", sex)
            + p[f"lambda_{node}_K"][:, None] * k
        )
        expected = law_fit.data[node].to_numpy(dtype=float)[None, :] - mu
        assert noise[node].shape == (200, n)
        np.testing.assert_allclose(noise[node], expected, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="'LSAT' is poisson"):
        abduction.noise(law_fit.scm, ["LSAT"])


# ====================================================================== interventional
@pytest.mark.stan
def test_interventional_samples(law_fit: cf.Fit) -> None:
    n, n_samples = 2000, 50
    frame = law_fit.interventional(n, {"race": "Black"}, n_samples=n_samples, seed=shifted(4))
    assert list(frame.columns) == ["sample", "unit", *LAW_NODES]
    assert len(frame) == n * n_samples
    assert (frame["race"] == "Black").all()
    assert set(frame["sex"].astype(str)) == set(SEXES)
    assert frame.attrs["do"] == {"race": "Black"}

    draws = law_fit.params()
    male_share = float((law_train()["sex"] == "Male").mean())
    # E[UGPA | do(race = Black)] per posterior draw (E[K] = 0)
    per_draw = (
        draws["alpha_UGPA"].reshape(-1)
        + draws["beta_UGPA_race"][:, 0]  # Black
        + draws["beta_UGPA_sex"][:, 0] * male_share
    )
    # the frame's mean averages 50 parameter draws and n x 50 units: its Monte Carlo error
    # is that of 50 draws of the posterior plus the units' spread
    se = np.sqrt(per_draw.var() / n_samples + frame["UGPA"].var() / len(frame))
    assert abs(frame["UGPA"].mean() - per_draw.mean()) < 4 * se, (frame["UGPA"].mean(), se)
    # K ~ Normal(0, 1) in every unit: mean and sd of n x 50 draws within 4 standard errors
    assert abs(frame["K"].mean()) < 4 / np.sqrt(len(frame))
    assert abs(frame["K"].std() - 1.0) < 4 / np.sqrt(2 * len(frame))
    np.testing.assert_array_equal(frame["LSAT"], np.round(frame["LSAT"]))


@pytest.mark.stan
def test_interventional_errors(law_fit: cf.Fit) -> None:
    with pytest.raises(cf.errors.DataError, match="'gender'"):
        law_fit.interventional(10, {"gender": "Male"}, n_samples=2)
    with pytest.raises(cf.errors.DataError, match=r"'race' has level 'Martian'"):
        law_fit.interventional(10, {"race": "Martian"}, n_samples=2)
    with pytest.raises(cf.errors.DataError, match=re.escape(errors.LATENT_DO.format(node="K"))):
        law_fit.interventional(10, {"K": 1.0}, n_samples=2)


@pytest.mark.stan
def test_interventional_samples_with_an_observed_node_set(law_fit: cf.Fit) -> None:
    frame = law_fit.interventional(50, {"UGPA": 3.0, "race": "Black"}, n_samples=3, seed=shifted(1))
    assert (frame["UGPA"] == 3.0).all() and (frame["race"] == "Black").all()
    assert frame["LSAT"].std() > 0  # the other nodes are still drawn


def test_per_row_do_values_are_not_deep_copied_with_the_frame() -> None:
    import copy

    from counterfair.counterfactual.action import RowValues, recorded_do

    record = recorded_do({"race": np.array(["a", "b"], dtype=object), "sex": "F"})
    assert record == {"race": ["a", "b"], "sex": "F"}
    assert isinstance(record["race"], RowValues)
    frame = pd.DataFrame({"x": [1, 2]})
    frame.attrs["do"] = record
    assert frame.head(1).attrs["do"]["race"] is record["race"]
    assert copy.deepcopy(frame.attrs)["do"]["race"] is record["race"]
