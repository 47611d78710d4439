"""A classifier is audited on its probabilities, and a fair learner's decomposition is the
decomposition of its outputs (issue 49, items 2 and 3).

A small arrest-records SCM fitted by NUTS: colour and sex protected, age an observed
root (a confounder), K a latent, employed (Bernoulli "No"/"Yes") and checks (Poisson)
mediators, released (Bernoulli "No"/"Yes", mostly "Yes") the outcome. The Fair K
classifier predicts "Yes" for almost every row, so its labels hardly move while its
probabilities do:

* ``decompose`` of the learner (default response and ``response="probability"``) has
  TV equal to the raw gap of ``predict_proba(rows)[:, 1]`` between the groups in every
  draw (1e-12), and every term of every draw equal to the decomposition of the same
  function given as a plain callable (1e-12); the same on Dask. Before the fix the
  learner was read from the decomposition's own abduction (latents conditioned on the
  target too), not from its outputs.
* ``counterfactual_fairness`` and the HTML report audit a classifier on its
  probabilities by default and on its labels when asked, and say which; a classifier
  whose labels are constant shows a non-zero change on its probabilities.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from _models import dag, quietly
from _seeds import shifted
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

import counterfair as cf
from counterfair.rows.validated import Rows

pytestmark = pytest.mark.stan

EXACT = 1e-12
TRUTH: dict[str, Any] = {
    "alpha_age": 0.0, "sigma_age": 1.0,
    "alpha_score": 0.0, "beta_score_colour": [0.5], "lambda_score_K": 1.0, "sigma_score": 0.5,
    "alpha_employed": 0.5, "beta_employed_colour": [-0.6], "beta_employed_sex": [0.2],
    "beta_employed_age": 0.3, "lambda_employed_K": 0.8,
    "alpha_checks": 0.2, "beta_checks_colour": [0.5], "beta_checks_age": -0.2,
    "lambda_checks_K": 0.3,
    "alpha_released": 2.5, "beta_released_colour": [-0.4], "beta_released_sex": [0.2],
    "beta_released_age": 0.1, "beta_released_employed": 0.7, "beta_released_checks": -0.2,
    "lambda_released_K": 0.6,
}


def arrest_scm() -> cf.SCM:
    return cf.SCM(
        dag(
            {
                "colour": cf.Protected(levels=("White", "Black")),
                "sex": cf.Protected(levels=("Male", "Female")),
                "age": cf.Normal(),
                "K": cf.Latent(),
                "score": cf.Normal(),
                "employed": cf.Bernoulli(levels=("No", "Yes")),
                "checks": cf.Poisson(),
                "released": cf.Bernoulli(levels=("No", "Yes")),
            },
            [("K", "score"), ("colour", "score"),
             *[(p, "employed") for p in ("colour", "sex", "age", "K")],
             *[(p, "checks") for p in ("colour", "age", "K")],
             *[(p, "released")
               for p in ("colour", "sex", "age", "employed", "checks", "K")]],
        )
    )


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    return arrest_scm().sample(300, params=TRUTH, seed=shifted(91)).drop(columns="K")


@pytest.fixture(scope="module")
def fit(stan_backend: str, rows: pd.DataFrame) -> cf.Fit:
    return quietly(
        arrest_scm().fit, rows, chains=2, warmup=300, draws=300, seed=shifted(92),
        progress=False,
    )


@pytest.fixture(scope="module")
def fair(fit: cf.Fit, rows: pd.DataFrame) -> cf.FairLearner:
    return cf.FairLearner(
        fit,
        target="released",
        features=cf.inputs.Latent(),
        estimator=LogisticRegression(),
        n_samples=10,
        seed=shifted(93),
    ).fit(rows)


def _gap(values: np.ndarray, rows: pd.DataFrame) -> float:
    colour = rows["colour"].astype(str).to_numpy()
    return float(values[colour == "Black"].mean() - values[colour == "White"].mean())


def _plain(learner: cf.FairLearner, rows: pd.DataFrame) -> Any:
    """The learner's function of a row's columns as a plain callable, each row of a world
    keyed by its position in ``rows`` (the ``row`` column of the world's frame)."""
    where = {label: i for i, label in enumerate(rows.index)}

    def probability(frame: pd.DataFrame) -> np.ndarray:
        positions = frame["row"].map(where).to_numpy(dtype=np.int64)
        return np.asarray(learner.predict_proba(Rows.from_frame(frame, positions))[:, 1])

    return probability


def _decompose(fit: cf.Fit, rows: Any, predictor: Any, **options: Any) -> Any:
    return cf.audit.decompose(
        fit, rows, attribute="colour", x0="White", x1="Black", predictor=predictor,
        settings=cf.audit.DecompositionSettings(n_samples=12, seed=shifted(94)), **options,
    )


def test_labels_are_almost_constant(fair: cf.FairLearner, rows: pd.DataFrame) -> None:
    """The setting of the report: the labels say little, the probabilities vary."""
    labels = pd.Series(fair.predict(rows)).value_counts()
    assert labels.index[0] == "Yes" and labels.iloc[0] >= 0.95 * len(rows)
    assert np.ptp(fair.predict_proba(rows)[:, 1]) > 0.05


@pytest.mark.parametrize("response", [None, "probability"])
def test_tv_of_a_learner_is_the_raw_gap_of_its_probabilities(
    fit: cf.Fit, rows: pd.DataFrame, fair: cf.FairLearner, response: str | None
) -> None:
    result = _decompose(fit, rows, fair, response=response)
    gap = _gap(fair.predict_proba(rows)[:, 1], rows)
    assert gap != 0.0
    np.testing.assert_allclose(result.draws["TV"], gap, atol=EXACT, rtol=0)
    assert any("probability of class 'Yes'" in note for note in result.notes)
    residuals = result.identity_residuals().abs().max()
    assert residuals.max() < 1e-10
    plain = _decompose(fit, rows, _plain(fair, rows))
    np.testing.assert_allclose(
        result.draws.to_numpy(), plain.draws.to_numpy(), atol=EXACT, rtol=0
    )
    assert not np.all(result.draws.to_numpy() == 0.0)


def test_labels_are_decomposed_on_request(
    fit: cf.Fit, rows: pd.DataFrame, fair: cf.FairLearner
) -> None:
    result = _decompose(fit, rows, fair, response="prediction")
    labels = (fair.predict(rows) == "Yes").astype(float)
    np.testing.assert_allclose(result.draws["TV"], _gap(labels, rows), atol=EXACT, rtol=0)
    assert any("predicted labels" in note for note in result.notes)


def test_an_unfair_business_necessity_remainder_is_not_zero(
    fit: cf.Fit, rows: pd.DataFrame, fair: cf.FairLearner
) -> None:
    """``--allow IE`` said "+0.0000 [0.0000, 0.0000]": the unfair part is TV minus
    the allowed indirect effect, never all zero for a learner whose groups differ."""
    result = _decompose(fit, rows, fair).allow(("IE",))
    unfair = result.unfair().set_index("effect")
    assert abs(unfair.loc["unfair", "contribution"]) > 1e-6


def test_on_dask_the_decomposition_of_a_learner_is_the_same(
    client: Any, fit: cf.Fit, rows: pd.DataFrame, fair: cf.FairLearner
) -> None:
    dd = pytest.importorskip("dask.dataframe")
    memory = _decompose(fit, rows, fair)
    for n in (1, 3):
        on_dask = _decompose(fit, dd.from_pandas(rows, npartitions=n), fair)
        np.testing.assert_allclose(
            on_dask.draws.to_numpy(), memory.draws.to_numpy(), atol=EXACT, rtol=0
        )


@pytest.fixture(scope="module")
def constant_classifier(rows: pd.DataFrame) -> Any:
    """A pipeline of colour and the mediators whose every label is "Yes"."""
    model = make_pipeline(
        ColumnTransformer(
            [("colour", OneHotEncoder(drop="first"), ["colour"]),
             ("rest", "passthrough", ["checks", "score"])]
        ),
        LogisticRegression(),
    )
    features = rows[["colour", "checks", "score"]]
    y = rows["released"].astype(str)
    model.fit(features, y)
    # shift the intercept so every label is "Yes" while the probabilities still vary
    model[-1].intercept_ = model[-1].intercept_ + 3.0
    assert set(model.predict(features)) == {"Yes"}
    return model


def test_counterfactual_fairness_audits_probabilities_by_default(
    fit: cf.Fit, rows: pd.DataFrame, constant_classifier: Any, fair: cf.FairLearner
) -> None:
    default = cf.audit.counterfactual_fairness(
        fit, rows, constant_classifier,
        settings=cf.audit.AuditSettings(attributes=["colour"], n_samples=10, seed=shifted(1)),
    )
    labels = cf.audit.counterfactual_fairness(
        fit, rows, constant_classifier,
        settings=cf.audit.AuditSettings(
            attributes=["colour"], n_samples=10, seed=shifted(1), response="prediction",
        ),
    )
    assert default.response == "probability" and labels.response == "prediction"
    assert default.compared == "the probability of class 'Yes'"
    assert labels.compared == "the predicted labels"
    assert default.overall["mean_abs_change"].iloc[0] > 1e-4
    assert default.overall["flip_mean_abs_change"].iloc[0] > 1e-4
    assert labels.overall["mean_abs_change"].iloc[0] == 0.0
    assert labels.overall["flip_mean_abs_change"].iloc[0] == 0.0
    assert "audited on the probability of class 'Yes'" in default.summary()
    learner = cf.audit.counterfactual_fairness(
        fit, rows, fair,
        settings=cf.audit.AuditSettings(attributes=["colour"], n_samples=10, seed=shifted(1)),
    )
    assert learner.response == "probability"
    assert learner.overall["flip_mean_abs_change"].iloc[0] > 1e-4


def test_the_report_says_what_was_audited(
    tmp_path: Any, fit: cf.Fit, rows: pd.DataFrame, constant_classifier: Any
) -> None:
    reports = {
        "default": cf.audit.counterfactual_fairness(
            fit, rows, constant_classifier,
            settings=cf.audit.AuditSettings(attributes=["colour"], n_samples=5, seed=shifted(1)),
        ),
        "labels": cf.audit.counterfactual_fairness(
            fit, rows, constant_classifier,
            settings=cf.audit.AuditSettings(
                attributes=["colour"], n_samples=5, seed=shifted(1), response="prediction",
            ),
        ),
    }
    path = cf.audit.write_report(
        tmp_path / "audit.html",
        cf.audit.GroupAudit(
            (rows["released"].astype(str) == "Yes").astype(int).to_numpy(),
            constant_classifier.predict_proba(rows[["colour", "checks", "score"]])[:, 1],
            rows[["colour"]].astype(str),
        ),
        counterfactual=reports,
    )
    text = path.read_text(encoding="utf-8")
    assert "default: the probability of class &#x27;Yes&#x27;" in text or (
        "default: the probability of class 'Yes'" in text
    )
    assert "labels: the predicted labels" in text
