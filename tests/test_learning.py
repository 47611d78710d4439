"""FairLearner (Kusner et al. 2017, Algorithm 1), unfair baselines, counterfactual predictions.

Fair predictors must give exactly the same prediction in the factual world and
in every counterfactual world of their own SCM fit; the Full and Unaware
baselines must not. The level 2 fit is the one shared with ``test_fit.py``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _models import (
    AUX_RACES,
    RACES,
    SEXES,
    aux_data,
    aux_fit,
    aux_scm,
    law_level2_scm,
    law_level3_scm,
    law_test,
    law_train,
    quietly,
)
from _seeds import shifted
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.model_selection import cross_val_score

import counterfair as cf
from counterfair.counterfactual.prediction import counterfactual_predictions
from counterfair.learn import fair as learning
from counterfair.learn.baselines import full_predictor, unaware_predictor
from counterfair.learn.fair import FairLearner

SMALL_FIT = {"chains": 2, "warmup": 300, "draws": 300}
N_TEST = 40


@pytest.fixture(scope="module")
def train() -> pd.DataFrame:
    return law_train().drop(columns="K")


@pytest.fixture(scope="module")
def test_rows() -> pd.DataFrame:
    return law_test().drop(columns="K").iloc[:N_TEST]


def _other_level_dos(rows: pd.DataFrame) -> list[dict[str, np.ndarray]]:
    """Per-row interventions: each of the other race levels, and the other sex."""
    race = np.array([RACES.index(str(v)) for v in rows["race"]])
    sex = np.array([SEXES.index(str(v)) for v in rows["sex"]])
    races = np.asarray(RACES, dtype=object)
    return [
        {"race": races[(race + 1) % 3]},
        {"race": races[(race + 2) % 3]},
        {"sex": np.asarray(SEXES, dtype=object)[1 - sex]},
    ]


# ---------------------------------------------------------------------- fitted predictors
@pytest.fixture(scope="module")
def fair_k(law_fit: cf.Fit, train: pd.DataFrame) -> FairLearner:
    """Level 2 ("Fair K"), reusing the shared SCM fit."""
    learner = FairLearner(
        law_fit,
        target="ZFYA",
        features=cf.inputs.Latent(),
        n_samples=30,
        seed=shifted(0),
    )
    return learner.fit(train)


@pytest.fixture(scope="module")
def fair_add(train: pd.DataFrame, stan_backend: str) -> FairLearner:
    """Level 3 ("Fair Add"): fits its own SCM of UGPA and LSAT; ZFYA is not in the SCM."""
    learner = FairLearner(
        law_level3_scm(),
        target="ZFYA",
        features=cf.inputs.AdditiveNoise(),
        n_samples=30,
        seed=shifted(0),
        fit_args=SMALL_FIT,
    )
    return quietly(learner.fit, train)


@pytest.mark.stan
def test_fitted_attributes(fair_k: FairLearner, fair_add: FairLearner) -> None:
    assert fair_k.feature_names_ == ["K"]
    assert fair_add.feature_names_ == ["UGPA:noise", "LSAT:noise"]
    assert fair_add.scm_fit_.scm.observed == ("UGPA", "LSAT")
    assert fair_k.scm_fit_ is fair_k.model
    # Fair K: predictions move with the abducted knowledge, which tracks ZFYA
    rows = law_test().drop(columns="K")
    predicted = fair_k.predict(rows)
    assert predicted.shape == (len(rows),)
    assert np.corrcoef(predicted, rows["ZFYA"])[0, 1] > 0.2
    draws = fair_k.predict_draws(rows.iloc[:5])
    assert draws.shape == (30, 5)


@pytest.mark.stan
@pytest.mark.parametrize("which", ["fair_k", "fair_add"])
def test_fair_predictions_do_not_move_in_any_counterfactual_world(
    request: pytest.FixtureRequest, test_rows: pd.DataFrame, which: str
) -> None:
    learner: FairLearner = request.getfixturevalue(which)
    for do in _other_level_dos(test_rows):
        result = counterfactual_predictions(
            learner.scm_fit_, test_rows, learner, do=do, n_samples=20, seed=shifted(1)
        )
        assert len(result) == 20 * N_TEST
        assert list(result.columns[:5]) == ["row", "sample", "factual", "counterfactual", "change"]
        np.testing.assert_array_equal(result["change"].to_numpy(), 0.0)
        assert result["factual"].std() > 0


@pytest.mark.stan
@pytest.mark.parametrize("make", [full_predictor, unaware_predictor])
def test_unfair_baselines_move_when_race_changes(
    law_fit: cf.Fit, train: pd.DataFrame, test_rows: pd.DataFrame, make: object
) -> None:
    predictor = make(law_fit.scm, "ZFYA").fit(train)  # type: ignore[operator]
    for do in _other_level_dos(test_rows)[:2]:
        result = counterfactual_predictions(
            law_fit, test_rows, predictor, do=do, n_samples=20, seed=shifted(2)
        )
        assert result["change"].abs().mean() > 0.05
    expected_columns = (
        ["race", "sex", "UGPA", "LSAT"] if make is full_predictor else ["UGPA", "LSAT"]
    )
    assert list(predictor.columns) == expected_columns


def test_baselines_use_the_expected_columns() -> None:
    scm2 = law_level2_scm()
    assert list(full_predictor(scm2, "ZFYA").columns) == ["race", "sex", "UGPA", "LSAT"]
    assert list(full_predictor(scm2, "ZFYA").categorical) == ["race", "sex"]
    assert list(unaware_predictor(scm2, "ZFYA").columns) == ["UGPA", "LSAT"]
    assert list(unaware_predictor(scm2, "ZFYA", exclude=["LSAT"]).columns) == ["UGPA"]


def _yes_no_rows(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    colour = rng.choice(["Black", "White"], n)
    employed = rng.random(n) < np.where(colour == "White", 0.8, 0.6)
    checks = rng.poisson(1 + employed)
    released = rng.random(n) < 1 / (1 + np.exp(-(0.5 + employed - 0.4 * checks)))
    return pd.DataFrame({
        "colour": colour,
        "employed": np.where(employed, "Yes", "No"),
        "checks": checks,
        "released": np.where(released, "Yes", "No"),
    })


def _yes_no_scm() -> cf.SCM:
    import networkx as nx

    g = nx.DiGraph()
    g.add_node("colour", spec=cf.Protected())
    g.add_node("employed", spec=cf.Bernoulli())
    g.add_node("checks", spec=cf.Poisson())
    g.add_node("released", spec=cf.Bernoulli())
    g.add_edges_from([("colour", "employed"), ("colour", "checks"), ("employed", "checks"),
                      ("employed", "released"), ("checks", "released"), ("colour", "released")])
    return cf.SCM(g)


@pytest.mark.parametrize("make", [full_predictor, unaware_predictor])
def test_baselines_read_yes_no_columns_as_the_learners_do(make: Any) -> None:
    """A yes/no feature column is one-hot encoded with its training levels (it raised
    "could not convert string to float: 'Yes'"); the predictions equal those of the same
    estimator on the column coded 0/1 by hand."""
    from sklearn.linear_model import LogisticRegression

    rows = _yes_no_rows(400, shifted(3))
    model = make(_yes_no_scm(), "released", estimator=LogisticRegression()).fit(rows)
    assert model.levels_["employed"] == ["No", "Yes"]
    proba = model.predict_proba(rows)[:, 1]
    assert set(model.predict(rows)) <= {"No", "Yes"}
    by_hand = pd.DataFrame(index=rows.index)
    for column in model.columns:
        if column in ("colour", "employed"):
            for level in sorted(rows[column].unique()):
                by_hand[f"{column}={level}"] = (rows[column] == level).astype(float)
        else:
            by_hand[column] = rows[column].astype(float)
    assert proba.std() > 0
    reference = LogisticRegression().fit(by_hand.to_numpy(), rows["released"])
    np.testing.assert_allclose(proba, reference.predict_proba(by_hand.to_numpy())[:, 1],
                               atol=1e-10)
    unseen = rows.iloc[:3].assign(employed=["Yes", "maybe", "No"])
    with pytest.raises(cf.errors.DataError, match=r"employed.*maybe"):
        model.predict(unseen)

@pytest.mark.stan
def test_predict_abducts_even_if_the_rows_carry_a_latent_column(
    fair_k: FairLearner, test_rows: pd.DataFrame
) -> None:
    with_truth = law_test().iloc[:N_TEST]  # has the true K, as scm.sample() returns it
    assert "K" in with_truth.columns
    np.testing.assert_allclose(fair_k.predict(with_truth), fair_k.predict(test_rows), atol=1e-12)


# ---------------------------------------------------------------------- feature sets
@pytest.mark.stan
def test_non_descendant_features_on_an_scm_that_has_one() -> None:
    data = aux_data().drop(columns="K")
    learner = FairLearner(
        aux_scm(),
        target="P",
        features=cf.inputs.NonDescendants(),
        n_samples=10,
        seed=shifted(1),
        fit_args=SMALL_FIT,
    )
    quietly(learner.fit, data.iloc[:250])
    assert learner.feature_names_ == ["Z"]
    rows = data.iloc[250:]
    probabilities = learner.predict_proba(rows)
    assert probabilities.shape == (len(rows), 2)
    # the only input is the observed Z, so the prediction is a function of Z alone
    direct = learner.estimator_.predict_proba(rows[["Z"]].to_numpy())
    np.testing.assert_allclose(probabilities, direct, atol=1e-12)
    flipped = np.where(rows["race"].astype(str) == AUX_RACES[0], AUX_RACES[1], AUX_RACES[0])
    result = counterfactual_predictions(
        learner.scm_fit_, rows, learner, do={"race": flipped}, n_samples=10, seed=shifted(1)
    )
    np.testing.assert_array_equal(result["change"].to_numpy(), 0.0)


def test_non_descendants_without_any_raises(train: pd.DataFrame) -> None:
    scm = law_level3_scm()
    learner = FairLearner(scm, target="ZFYA", features=cf.inputs.NonDescendants())
    with pytest.raises(cf.errors.FairnessError, match="observed non-descendants"):
        learner.fit(train)


@pytest.mark.parametrize(
    ("features", "node", "path"),
    [
        (["K", "UGPA"], "UGPA", "race -> UGPA"),
        (["LSAT"], "LSAT", "race -> LSAT"),
        (["K", "race"], "race", "race"),
    ],
)
def test_descendant_feature_raises_fairness_error(
    train: pd.DataFrame, features: list[str], node: str, path: str
) -> None:
    learner = FairLearner(law_level2_scm(), target="ZFYA", features=features)
    expected = learning.DESCENDANT_FEATURE.format(node=node, source="race", path=path)
    with pytest.raises(cf.errors.FairnessError, match=re.escape(expected)):
        learner.fit(train)  # raises before any MCMC


def test_descendant_feature_names_the_path_through_an_observed_node() -> None:
    import networkx as nx

    g = nx.DiGraph()
    g.add_node("A", spec=cf.Protected(levels=("a", "b")))
    g.add_node("U", spec=cf.Latent())
    g.add_node("X", spec=cf.Normal())
    g.add_node("W", spec=cf.Normal())
    g.add_node("Y", spec=cf.Normal())
    g.add_edges_from([("A", "X"), ("U", "X"), ("X", "W"), ("U", "Y"), ("W", "Y")])
    learner = FairLearner(cf.SCM(g), target="Y", features=["U", "W"])
    data = pd.DataFrame({"A": ["a", "b"], "X": [0.0, 1.0], "W": [0.0, 1.0], "Y": [0.0, 1.0]})
    with pytest.raises(cf.errors.FairnessError, match=re.escape("(path A -> X -> W)")):
        learner.fit(data)


@pytest.mark.stan
def test_explicit_latent_list_equals_latent_feature_set(
    law_fit: cf.Fit, train: pd.DataFrame, test_rows: pd.DataFrame, fair_k: FairLearner
) -> None:
    explicit = FairLearner(
        law_fit,
        target="ZFYA",
        features=["K"],
        n_samples=30,
        seed=shifted(0),
    ).fit(train)
    assert explicit.feature_names_ == fair_k.feature_names_
    np.testing.assert_allclose(explicit.estimator_.coef_, fair_k.estimator_.coef_)
    np.testing.assert_allclose(explicit.predict(test_rows), fair_k.predict(test_rows))


# ---------------------------------------------------------------------- training variants
@pytest.mark.stan
@pytest.mark.filterwarnings("ignore::counterfair.errors.ConvergenceWarning")
def test_condition_on_target_with_own_fit_uses_the_joint_posterior(train: pd.DataFrame) -> None:
    rows = train.iloc[:200]
    learner = FairLearner(
        law_level2_scm(),
        target="ZFYA",
        features=cf.inputs.Latent(condition_on_target=True),
        n_samples=20,
        seed=shifted(3),
        fit_args=SMALL_FIT,
    ).fit(rows)
    assert learner.scm_fit_.data.shape[0] == 200
    predicted = learner.predict(law_test().drop(columns="K").iloc[:20])
    assert np.all(np.isfinite(predicted)) and predicted.std() > 0


@pytest.mark.stan
def test_condition_on_target_true_and_false_both_fit(
    law_fit: cf.Fit, train: pd.DataFrame, test_rows: pd.DataFrame, fair_k: FairLearner
) -> None:
    with_target = FairLearner(
        law_fit,
        target="ZFYA",
        features=cf.inputs.Latent(condition_on_target=True),
        n_samples=30,
        seed=shifted(0),
    ).fit(train)
    assert fair_k.features.condition_on_target is False
    a, b = with_target.predict(test_rows), fair_k.predict(test_rows)
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))
    assert np.corrcoef(a, b)[0, 1] > 0.9
    # draws conditioned on ZFYA itself are more predictive of it: a steeper slope
    assert with_target.estimator_.coef_[0] > fair_k.estimator_.coef_[0] > 0


@pytest.mark.stan
def test_training_inputs_mean(
    law_fit: cf.Fit, train: pd.DataFrame, test_rows: pd.DataFrame, fair_k: FairLearner
) -> None:
    learner = FairLearner(
        law_fit,
        target="ZFYA",
        features=cf.inputs.Latent(training="mean"),
        n_samples=30,
        seed=shifted(0),
    ).fit(train)
    a, b = learner.predict(test_rows), fair_k.predict(test_rows)
    assert np.corrcoef(a, b)[0, 1] > 0.99
    # regressing on posterior means does not attenuate the slope as single draws do
    assert learner.estimator_.coef_[0] > fair_k.estimator_.coef_[0]


def test_bad_options_are_rejected(train: pd.DataFrame) -> None:
    scm = law_level3_scm()
    with pytest.raises(ValueError, match=r"features= takes a strategy of counterfair\.inputs"):
        FairLearner(scm, target="ZFYA", features="latent").fit(train)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Latent\(training=...\) must be 'samples' or 'mean'"):
        cf.inputs.Latent(training="median")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs a model \\(an SCM or its Fit\\) and a target"):
        FairLearner().fit(train)
    with pytest.raises(ValueError, match="model must be an SCM or a Fit, got DataFrame"):
        FairLearner(train, target="ZFYA").fit(train)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        FairLearner(scm, "ZFYA")  # type: ignore[misc]  # options are keyword-only


# ---------------------------------------------------------------------- scikit-learn
def _level3_learner(**overrides: object) -> FairLearner:
    params: dict[str, object] = {
        "target": "ZFYA",
        "features": cf.inputs.AdditiveNoise(),
        "n_samples": 5,
        "fit_args": {"chains": 1, "warmup": 150, "draws": 150},
        "seed": 4,
    }
    params.update(overrides)
    return FairLearner(law_level3_scm(), **params)  # type: ignore[arg-type]


def test_clone_keeps_params() -> None:
    learner = _level3_learner(n_samples=7, features=cf.inputs.AdditiveNoise(training="mean"))
    copy = clone(learner)
    assert copy is not learner
    original, cloned = learner.get_params(deep=False), copy.get_params(deep=False)
    assert set(original) == set(cloned)
    assert len(original) == 8  # model, target, features, estimator, n_samples, seed, 2 args
    for name in ("target", "features", "n_samples", "fit_args", "seed"):
        assert cloned[name] == original[name], name
    assert cloned["model"].parameter_names() == original["model"].parameter_names()


def test_get_params_set_params_round_trip() -> None:
    learner = _level3_learner()
    params = learner.get_params()
    assert learner.set_params(**params) is learner
    assert learner.get_params() == params
    learner.set_params(n_samples=11, features=cf.inputs.AdditiveNoise(condition_on_target=True))
    assert learner.get_params()["n_samples"] == 11
    assert learner.get_params()["features"].condition_on_target is True
    with pytest.raises(ValueError, match="nope"):
        learner.set_params(nope=1)


@pytest.mark.stan
@pytest.mark.filterwarnings("ignore::counterfair.errors.ConvergenceWarning")
def test_cross_val_score_runs(train: pd.DataFrame) -> None:
    learner = _level3_learner()
    scores = cross_val_score(learner, train, train["ZFYA"], cv=2, error_score="raise")
    assert scores.shape == (2,)
    assert np.all(np.isfinite(scores))
    assert not hasattr(learner, "scm_fit_")  # cross_val_score fits clones


def test_estimator_type_follows_the_target() -> None:
    assert is_regressor(_level3_learner())  # ZFYA is not in the level 3 SCM
    assert not is_classifier(_level3_learner())
    assert is_regressor(FairLearner(law_level2_scm(), target="ZFYA"))
    assert is_classifier(FairLearner(aux_scm(), target="P"))
    assert not is_regressor(FairLearner(aux_scm(), target="P"))


@pytest.mark.stan
def test_bernoulli_target_gives_a_classifier() -> None:
    fit = aux_fit().fit
    data = aux_data().drop(columns="K")
    learner = FairLearner(
        fit,
        target="P",
        features=cf.inputs.Latent(),
        n_samples=20,
        seed=shifted(2),
    ).fit(data)
    assert is_classifier(learner)
    np.testing.assert_array_equal(learner.classes_, [0, 1])
    rows = data.iloc[:50]
    probabilities = learner.predict_proba(rows)
    assert probabilities.shape == (50, 2)
    assert np.all((probabilities >= 0) & (probabilities <= 1))
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    labels = learner.predict(rows)
    assert set(np.unique(labels)) <= {0, 1}
    np.testing.assert_array_equal(labels, (probabilities[:, 1] >= 0.5).astype(int))
    assert 0.0 <= learner.score(rows) <= 1.0
    # K is a strong cause of P: the fair classifier beats the base rate
    assert learner.score(data) > max(data["P"].mean(), 1 - data["P"].mean())
    with pytest.raises(AttributeError, match="classification target only"):
        FairLearner(law_level2_scm(), target="ZFYA").predict_proba(rows)


# Small SCMs built here to exercise code generation, simulation or validation include latents
# that are not identified (e.g. two Normal children with free sds); SCM() warns about them
# (IdentificationWarning), which tests/test_identification.py checks. Not what these tests test.
pytestmark = pytest.mark.toy_latents
