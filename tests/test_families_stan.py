"""The newer families on real Stan: parameter recovery, sign identification, abduction
and counterfactuals with ordinal, negative binomial, categorical and continuous
protected nodes.

Data come from counterfair's own forward simulator (``SCM.sample``): 1,000 rows of
``_models.families_scm`` with known parameters (``_models.FAMILIES_TRUTH``). The
recovery checks fit all of them (4 chains of 500 + 1,000, about 85 s on CmdStan) and, with
the MCMC abduction of new rows (a program of its own; new rows are abducted exactly by
default), are ``slow``; the other tests use a short fit on 300 rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _models import (
    CATEGORIES,
    FAMILIES_TRUTH,
    FAMILY_LEVELS,
    families_data,
    families_fit,
    families_small_fit,
    stacked,
)
from _seeds import shifted
from _tolerances import coverage_floor

import counterfair as cf


@pytest.fixture(scope="module")
def fit(stan_backend: str) -> cf.Fit:
    """The short fit on 300 rows."""
    return families_small_fit().fit


@pytest.fixture(scope="module")
def full_fit(stan_backend: str) -> cf.Fit:
    """The recovery fit on all 1,000 rows."""
    return families_fit().fit


def _training(fit: cf.Fit, rows: int, n_samples: int, seed: int = shifted(0)) -> cf.Abduction:
    """The fit's own draws for its first ``rows`` training rows (no abduction needed)."""
    return fit.abduct(n_samples=n_samples, seed=seed).take_rows(np.arange(rows))


def _draws(fit: cf.Fit, name: str) -> np.ndarray:
    return stacked(fit, name).reshape(fit.params().n, -1)


@pytest.mark.slow
@pytest.mark.headline
@pytest.mark.stan
def test_parameters_are_recovered(full_fit: cf.Fit) -> None:
    fit = full_fit
    assert families_fit().convergence_warnings() == []
    assert fit.diagnostics.max_rhat < 1.01
    assert fit.diagnostics.divergences == 0
    covered, missed = [], []
    for name, true_value in FAMILIES_TRUTH.items():
        draws = _draws(fit, name)
        truth = np.asarray(true_value, dtype=float).ravel()
        assert draws.shape[1] == truth.size, name
        low, high = np.quantile(draws, [0.05, 0.95], axis=0)
        for j, value in enumerate(truth):
            covered.append(bool(low[j] <= value <= high[j]))
            if not covered[-1]:
                missed.append(f"{name}[{j}]: {value} outside [{low[j]:.3f}, {high[j]:.3f}]")
    # a calibrated posterior fails this with probability <= 1e-3
    assert sum(covered) >= coverage_floor(len(covered)), missed


@pytest.mark.slow
@pytest.mark.headline
@pytest.mark.stan
@pytest.mark.parametrize("name", ["phi_C", "cutpoints_O"])
def test_dispersion_and_cutpoints_are_recovered(full_fit: cf.Fit, name: str) -> None:
    """Within 3 posterior sds of the truth, and the posterior far narrower than the prior."""
    draws = _draws(full_fit, name)
    truth = np.atleast_1d(np.asarray(FAMILIES_TRUTH[name], dtype=float))
    mean, sd = draws.mean(axis=0), draws.std(axis=0)
    assert np.all(np.abs(mean - truth) < 3 * sd), (mean, sd, truth)
    assert np.all(sd < 0.5 * np.maximum(np.abs(truth), 1.0)), sd


@pytest.mark.stan
def test_sign_of_the_latent_is_fixed_by_its_ordinal_first_child(fit: cf.Fit) -> None:
    """lambda_O_U > 0 by construction; every chain agrees, and U tracks the true latent."""
    loading = np.asarray(fit.idata.posterior["lambda_O_U"].values)  # (chain, draw)
    assert np.all(loading > 0)
    assert np.all(loading.mean(axis=1) > 0.5)
    others = np.asarray(fit.idata.posterior["lambda_C_U"].values).mean(axis=1)
    assert np.all(others > 0)  # no chain in the reflected mode
    latent = np.asarray(fit.idata.posterior["U"].values).mean(axis=(0, 1))
    assert np.corrcoef(latent, families_data()["U"].iloc[:300])[0, 1] > 0.6


@pytest.mark.stan
def test_new_rows_are_abducted_exactly(fit: cf.Fit) -> None:
    """Ordinal, negative binomial and Normal children of U: exact abduction, no program."""
    rows = fit.scm.sample(40, params=FAMILIES_TRUTH, seed=shifted(99))
    abduction = fit.abduct(rows.drop(columns="U"), n_samples=100, seed=shifted(3))
    assert abduction.engine == "exact"
    assert abduction.latents["U"].shape == (100, 40)
    estimate = abduction.latents["U"].mean(axis=0)
    assert np.corrcoef(estimate, rows["U"])[0, 1] > 0.5


@pytest.mark.slow
@pytest.mark.headline
@pytest.mark.stan
def test_new_rows_are_abducted_by_mcmc(full_fit: cf.Fit) -> None:
    fit = full_fit
    rows = fit.scm.sample(40, params=FAMILIES_TRUTH, seed=shifted(99))
    abduction = fit.abduct(rows.drop(columns="U"), n_samples=100, seed=shifted(3), engine="mcmc")
    assert abduction.engine == "mcmc"
    assert abduction.latents["U"].shape == (100, 40)
    estimate = abduction.latents["U"].mean(axis=0)
    assert np.corrcoef(estimate, rows["U"])[0, 1] > 0.5


@pytest.mark.stan
def test_counterfactuals_with_ordinal_count_and_continuous_parents(fit: cf.Fit) -> None:
    rows = families_data().drop(columns="U").head(25)
    same = fit.counterfactual(
        rows, {"A": rows["A"].astype(str).to_numpy()}, abduction=_training(fit, 25, 20)
    )
    factual = same[same["world"] == "factual"].reset_index(drop=True)
    counter = same[same["world"] == "counterfactual"].reset_index(drop=True)
    for node in ("O", "C", "X"):
        pd.testing.assert_series_equal(factual[node], counter[node])
    assert counter["O"].dtype == pd.CategoricalDtype(list(FAMILY_LEVELS), ordered=True)

    flipped = fit.counterfactual(rows, {"A": "b"}, abduction=_training(fit, 25, 20),
        seed=shifted(4))
    before = flipped[flipped["world"] == "factual"].reset_index(drop=True)
    after = flipped[flipped["world"] == "counterfactual"].reset_index(drop=True)
    was_a = after["row"].isin(rows.index[rows["A"] == "a"]).to_numpy()
    assert was_a.any() and not was_a.all()
    for node in ("O", "K", "C"):  # moved (in some draws) where A changed, kept where not
        changed = before[node].to_numpy() != after[node].to_numpy()
        assert changed[was_a].any() and not changed[~was_a].any(), node

    older = fit.counterfactual(rows, {"age": 2.0}, abduction=_training(fit, 25, 20),
        seed=shifted(4))
    cf_world = older[older["world"] == "counterfactual"]
    assert (cf_world["age"] == 2.0).all()
    # age is a parent of K and C only: O and X keep their factual values
    fact_world = older[older["world"] == "factual"]
    np.testing.assert_array_equal(cf_world["X"].to_numpy(), fact_world["X"].to_numpy())
    assert (cf_world["O"].to_numpy() == fact_world["O"].to_numpy()).all()
    assert (cf_world["K"].to_numpy() != fact_world["K"].to_numpy()).any()
    # beta_C_age > 0: raising age raises the mean count
    assert cf_world["C"].mean() > fact_world["C"].mean()
    assert older.attrs["do"] == {"age": 2.0}


@pytest.mark.stan
def test_interventional_samples_of_the_new_families(fit: cf.Fit) -> None:
    low = fit.interventional(400, {"age": -1.0}, n_samples=10, seed=shifted(1))
    high = fit.interventional(400, {"age": 1.0}, n_samples=10, seed=shifted(1))
    assert set(np.unique(low["O"])) <= {0.0, 1.0, 2.0}
    assert set(np.unique(low["K"])) <= {0.0, 1.0, 2.0}
    assert high["C"].mean() > low["C"].mean()


@pytest.mark.stan
def test_counterfactual_audit_swaps_categorical_attributes_only(fit: cf.Fit) -> None:
    rows = families_data().drop(columns="U").head(20)

    def predictor(frame: pd.DataFrame) -> np.ndarray:
        return np.asarray(frame["C"], dtype=float)

    training = _training(fit, 20, 10)
    report = cf.audit.counterfactual_fairness(
        fit, rows, predictor, abduction=training,
        settings=cf.audit.AuditSettings(seed=shifted(1), keep_samples=True),
    )
    assert set(report.changes["attribute"]) == {"A"}
    with pytest.raises(ValueError, match="'age' is continuous"):
        cf.audit.counterfactual_fairness(
            fit, rows, predictor, settings=cf.audit.AuditSettings(attributes=["age"]),
            abduction=training,
        )


@pytest.mark.stan
def test_interventions_on_observed_nodes_propagate_to_their_descendants(fit: cf.Fit) -> None:
    """O -> K -> C: do(O) moves K only where O changed and C only where K changed; X stays."""
    rows = families_data().drop(columns="U").head(30)
    training = _training(fit, 30, 20)
    frame = fit.counterfactual(rows, {"O": "high"}, abduction=training, seed=shifted(2))
    before = frame[frame["world"] == "factual"].reset_index(drop=True)
    after = frame[frame["world"] == "counterfactual"].reset_index(drop=True)
    assert (after["O"] == "high").all()
    np.testing.assert_array_equal(after["X"].to_numpy(), before["X"].to_numpy())
    moved = (before["O"] != "high").to_numpy()
    k_changed = before["K"].to_numpy() != after["K"].to_numpy()
    assert k_changed[moved].any() and not k_changed[~moved].any()
    c_changed = before["C"].to_numpy() != after["C"].to_numpy()
    assert not c_changed[~k_changed].any()

    # one value per row, and the factual values give the factual world back
    same = fit.counterfactual(rows, {"K": rows["K"].astype(str).to_numpy()}, abduction=training)
    before = same[same["world"] == "factual"].reset_index(drop=True)
    after = same[same["world"] == "counterfactual"].reset_index(drop=True)
    for node in ("O", "K", "C", "X"):
        assert (before[node].to_numpy() == after[node].to_numpy()).all(), node

    with pytest.raises(cf.errors.DataError, match=r"column 'O' is an Ordinal node .* 'medium'"):
        fit.counterfactual(rows, {"O": "medium"}, abduction=training)
    with pytest.raises(
        cf.errors.DataError, match=r"'nope', which is not a protected or observed node"
    ):
        fit.counterfactual(rows, {"nope": 1}, abduction=training)

    drug = fit.interventional(500, {"K": "drug"}, n_samples=10, seed=shifted(3))
    violent = fit.interventional(500, {"K": "violent"}, n_samples=10, seed=shifted(3))
    assert (drug["K"] == 1.0).all()  # codes in interventional samples: theft 0, drug 1
    assert drug["C"].mean() > violent["C"].mean()  # beta_C_K: drug +0.4, violent -0.3


@pytest.mark.stan
def test_fair_learner_of_a_categorical_target_is_multiclass_and_fair(fit: cf.Fit) -> None:
    """K (categorical, three levels) predicted from U alone: class probabilities per row,
    labels from them, no change under do(A); a multi-class baseline that reads A does
    change, its label change is 0 or 1 per sample, and a probability audit of more
    than two classes is refused with a message naming the classes."""
    from sklearn.linear_model import LogisticRegression

    from counterfair.audit import AuditSettings, counterfactual_fairness

    train = families_data().drop(columns="U").iloc[:300]
    rows = families_data().drop(columns="U").iloc[300:340]
    learner = cf.FairLearner(
        fit,
        target="K",
        features=cf.inputs.Latent(),
        n_samples=20,
        seed=shifted(0),
    ).fit(train)
    assert list(learner.classes_) == sorted(CATEGORIES)
    proba = learner.predict_proba(rows)
    assert proba.shape == (40, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    assert np.ptp(proba[:, 0]) > 0.01  # depends on the row's abducted U
    labels = learner.predict(rows)
    assert set(labels) <= set(CATEGORIES)
    fair = counterfactual_fairness(
        fit, rows, learner, settings=AuditSettings(attributes=["A"], n_samples=10),
    )
    assert fair.overall.iloc[0]["mean_abs_change"] == 0.0
    bound = counterfactual_fairness(
        fit, rows, learner.predict, settings=AuditSettings(attributes=["A"], n_samples=10),
    )
    assert bound.overall.iloc[0]["mean_abs_change"] == 0.0  # string labels, bound method
    with pytest.raises(ValueError, match="3 classes"):
        counterfactual_fairness(
            fit, rows, learner.predict_proba,
            settings=AuditSettings(attributes=["A"], n_samples=5, response="probability"),
        )

    full = cf.full_predictor(fit.scm, "K", estimator=LogisticRegression(max_iter=1000))
    full.fit(train)
    unfair = counterfactual_fairness(
        fit, rows, full, settings=AuditSettings(attributes=["A"], n_samples=10, keep_samples=True),
    )
    changes = unfair.changes["change"].to_numpy()
    assert set(np.unique(changes)) <= {0.0, 1.0} and changes.mean() > 0.0
    flips = unfair.changes["flip_change"].to_numpy()
    assert set(np.unique(flips)) <= {0.0, 1.0}  # the flip test counts changed labels too
    assert np.isnan(unfair.overall.iloc[0]["wasserstein"])
    with pytest.raises(ValueError, match="3 classes"):
        counterfactual_fairness(
            fit, rows, full,
            settings=AuditSettings(attributes=["A"], n_samples=5, response="probability"),
        )
