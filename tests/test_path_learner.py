"""The path-specific FairLearner (features="path_specific") and the path-specific audit.

On the linear-Gaussian mediation SCM (tests/_models.py: A -> M -> Y, A -> L -> Y,
A -> Y, M -> L, latent U) with unfair paths [(A, M)] and baseline "0":

* the corrected inputs are the closed forms M - bMA * a and L - bMA * bLM * a;
* a linear regression on them changes by exactly 0 under the path-specific
  do(A = 1), and under the total do(A = 1) by its weight on L times bLA, the
  effect along the fair path A -> L (also its change under the fair paths alone);
* the audit reports the path-specific change of any predictor beside the total
  one and the flip test; every option that would be ignored raises.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from _models import aux_data, aux_fit, mediation_data, mediation_fit
from _seeds import shifted

import counterfair as cf
from counterfair import errors
from counterfair.counterfactual.path_features import corrected_inputs
from counterfair.counterfactual.prediction import counterfactual_predictions, frame_predictions

pytestmark = pytest.mark.stan

UNFAIR = [("A", "M")]
FAIR = [("A", "L"), ("A", "Y")]  # the other paths out of A
N_ROWS = 30
N_SAMPLES = 25
EXACT = 1e-9


@pytest.fixture(scope="module")
def fit(stan_backend: str) -> cf.Fit:
    return mediation_fit().fit


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    return mediation_data().drop(columns="U")


@pytest.fixture(scope="module")
def learner(fit: cf.Fit, data: pd.DataFrame) -> cf.FairLearner:
    return cf.FairLearner(
        fit,
        target="Y",
        features=cf.inputs.PathSpecific(unfair_paths=UNFAIR, baseline="0"),
        n_samples=20,
        seed=shifted(3),
    ).fit(data)


@pytest.fixture(scope="module")
def zeros(data: pd.DataFrame) -> pd.DataFrame:
    """Rows with A = 0 (do(A = 1) moves them)."""
    return data[data["A"].astype(str) == "0"].iloc[:N_ROWS]


@pytest.fixture(scope="module")
def abduction(fit: cf.Fit, zeros: pd.DataFrame) -> cf.Abduction:
    return fit.abduct(zeros, n_samples=N_SAMPLES, seed=shifted(9))


def _coef(abduction: cf.Abduction, name: str) -> np.ndarray:
    return np.asarray(abduction.params[name], dtype=float).reshape(-1)


def test_corrected_inputs_are_the_closed_form(fit: cf.Fit, data: pd.DataFrame) -> None:
    rows = data.iloc[:40]
    ab = fit.abduct(rows, n_samples=10, seed=shifted(2))
    inputs = corrected_inputs(
        fit, ab, target="Y", source="A", unfair_paths=UNFAIR, baseline="0", seed=shifted(0)
    )
    a = ab.codes["A"][None, :].astype(float)
    b_ma, b_lm = _coef(ab, "beta_M_A")[:, None], _coef(ab, "beta_L_M")[:, None]
    np.testing.assert_allclose(inputs[..., 0], ab.latents["U"], atol=EXACT, rtol=0)
    np.testing.assert_allclose(
        inputs[..., 1], ab.observed["M"][None, :] - b_ma * a, atol=EXACT, rtol=0
    )
    np.testing.assert_allclose(
        inputs[..., 2], ab.observed["L"][None, :] - b_ma * b_lm * a, atol=EXACT, rtol=0
    )


def test_learner_inputs_and_prediction(learner: cf.FairLearner, zeros: pd.DataFrame) -> None:
    assert learner.feature_names_ == ["U", "M", "L"]
    draws = learner.predict_draws(zeros)
    assert draws.shape == (20, N_ROWS)
    np.testing.assert_allclose(learner.predict(zeros), draws.mean(axis=0), atol=EXACT, rtol=0)
    # new rows without the target: the target is simulated, not an input
    unlabelled = learner.predict(zeros.drop(columns="Y"))
    assert unlabelled.shape == (N_ROWS,) and np.isfinite(unlabelled).all()


def test_path_specific_change_is_zero_and_total_change_is_the_fair_effect(
    fit: cf.Fit, learner: cf.FairLearner, zeros: pd.DataFrame, abduction: cf.Abduction
) -> None:
    unfair = fit.counterfactual(None, {"A": "1"}, abduction=abduction, unfair_paths=UNFAIR)
    specific = frame_predictions(fit, unfair, learner, abduction=abduction)
    assert np.abs(specific["change"].to_numpy()).max() < EXACT
    total = counterfactual_predictions(fit, zeros, learner, do={"A": "1"}, abduction=abduction)
    weight_l = learner.estimator_.coef_[learner.feature_names_.index("L")]
    expected = weight_l * np.repeat(_coef(abduction, "beta_L_A"), N_ROWS)
    np.testing.assert_allclose(total["change"].to_numpy(), expected, atol=EXACT, rtol=0)
    assert np.abs(expected).min() > 1e-3  # the fair path does move it
    fair_frame = fit.counterfactual(None, {"A": "1"}, abduction=abduction, unfair_paths=FAIR)
    fair = frame_predictions(fit, fair_frame, learner, abduction=abduction)
    np.testing.assert_allclose(fair["change"], total["change"], atol=EXACT, rtol=0)


def test_every_path_corrected_makes_the_total_change_zero(
    fit: cf.Fit, data: pd.DataFrame, zeros: pd.DataFrame, abduction: cf.Abduction
) -> None:
    learner = cf.FairLearner(
        fit,
        target="Y",
        features=cf.inputs.PathSpecific(unfair_paths=[("A", "M"), ("A", "L")], baseline="1"),
        n_samples=5,
        seed=shifted(1),
    ).fit(data)
    total = counterfactual_predictions(fit, zeros, learner, do={"A": "1"}, abduction=abduction)
    assert np.abs(total["change"].to_numpy()).max() < EXACT


def test_audit_reports_the_path_specific_change(
    fit: cf.Fit, learner: cf.FairLearner, zeros: pd.DataFrame
) -> None:
    report = cf.audit.counterfactual_fairness(
        fit, zeros, learner, settings=cf.audit.AuditSettings(unfair_paths=UNFAIR, seed=shifted(1)),
    )
    assert list(report.by_group.columns[-2:]) == [
        "path_specific_mean_abs_change",
        "path_specific_share_above_tolerance",
    ]
    assert report.by_group["path_specific_mean_abs_change"].max() < EXACT
    assert report.overall["mean_abs_change"].iloc[0] > 1e-3  # the fair path A -> L
    assert "path-specific mean |change| 0.0000" in report.summary()

    def weighted(frame: pd.DataFrame) -> np.ndarray:
        return 2.0 * frame["M"].to_numpy() + 3.0 * frame["L"].to_numpy()

    ab = fit.abduct(zeros, n_samples=N_SAMPLES, seed=shifted(4))
    report = cf.audit.counterfactual_fairness(
        fit, zeros, weighted,
        settings=cf.audit.AuditSettings(unfair_paths=UNFAIR, seed=shifted(1), keep_samples=True),
        abduction=ab,
    )
    b_ma, b_lm = _coef(ab, "beta_M_A"), _coef(ab, "beta_L_M")
    expected = np.repeat(2.0 * b_ma + 3.0 * b_ma * b_lm, N_ROWS)
    changes = report.changes
    np.testing.assert_allclose(changes["path_specific_change"], expected, atol=EXACT, rtol=0)
    assert (changes["flip_change"] == 0).all()  # the function ignores A
    # without unfair_paths the report keeps its former columns
    plain = cf.audit.counterfactual_fairness(
        fit, zeros, weighted, abduction=ab,
        settings=cf.audit.AuditSettings(seed=shifted(1), keep_samples=True),
    )
    assert "path_specific_change" not in plain.changes.columns
    assert list(plain.by_group.columns) == list(cf.audit.causal.SUMMARY_COLUMNS)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"unfair_paths": UNFAIR}, "missing 1 required keyword-only argument: 'baseline'"),
        ({"baseline": "0"}, "missing 1 required keyword-only argument: 'unfair_paths'"),
        ({"unfair_paths": [], "baseline": "0"}, "takes a non-empty list of node tuples"),
        ({"unfair_paths": "A>M", "baseline": "0"}, "takes a non-empty list of node tuples"),
        ({"unfair_paths": UNFAIR, "baseline": None}, "PathSpecific needs baseline="),
    ],
)
def test_path_specific_settings_are_checked_when_made(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=re.escape(message)):
        cf.inputs.PathSpecific(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("paths", "baseline", "error", "message"),
    [
        ([("A", "U")], "0", errors.SCMError, "no edge A -> U"),
        ([("M", "Y")], "0", errors.SCMError,
         r"\('M', 'Y'\) starts at 'M', which is not a protected attribute"),
        (UNFAIR, "2", errors.DataError, "'2'"),
    ],
)
def test_path_specific_settings_wrong_for_the_graph_raise_at_fit(
    fit: cf.Fit, data: pd.DataFrame, paths: list[tuple[str, ...]], baseline: str,
    error: type, message: str,
) -> None:
    learner = cf.FairLearner(
        fit,
        target="Y",
        features=cf.inputs.PathSpecific(unfair_paths=paths, baseline=baseline),
        n_samples=2,
        seed=shifted(0),
    )
    with pytest.raises(error, match=message):
        learner.fit(data)


def test_audit_and_prediction_errors(
    fit: cf.Fit, learner: cf.FairLearner, zeros: pd.DataFrame, abduction: cf.Abduction
) -> None:
    frame = fit.counterfactual(None, {"A": "1"}, abduction=abduction, unfair_paths=UNFAIR)
    with pytest.raises(ValueError, match="pass abduction= with frame="):
        frame_predictions(fit, frame, learner)
    with pytest.raises(errors.SCMError, match="coupling='monotone'"):
        cf.audit.counterfactual_fairness(
            fit, zeros, learner,
            settings=cf.audit.AuditSettings(unfair_paths=UNFAIR, coupling="redraw"),
            abduction=abduction,
        )
    with pytest.raises(errors.SCMError, match=r"\('M', 'Y'\) does not start"):
        cf.audit.counterfactual_fairness(
            fit, zeros, learner,
            settings=cf.audit.AuditSettings(unfair_paths=[("A", "M"), ("M", "Y")]),
            abduction=abduction,
        )
    with pytest.raises(errors.SCMError, match="exactly one protected attribute"):
        cf.audit.counterfactual_fairness(
            fit, zeros, learner,
            settings=cf.audit.AuditSettings(unfair_paths=UNFAIR, do={"M": 0.0}),
            abduction=abduction,
        )


def test_classifier_on_discrete_descendants(stan_backend: str) -> None:
    """A Bernoulli target P with a Poisson input C (auxiliary SCM), race -> C unfair: the
    probability's path-specific change is exactly 0 for every row and sample in both
    directions of the swap, labels too; the total change moves through the fair input
    path race -> X."""
    fit = aux_fit().fit
    data = aux_data().drop(columns="K")
    learner = cf.FairLearner(
        fit,
        target="P",
        features=cf.inputs.PathSpecific(unfair_paths=[("race", "C")], baseline="a"),
        n_samples=10,
        seed=shifted(2),
    ).fit(data)
    assert learner.feature_names_ == ["K", "Z", "X", "C"]
    rows = data.iloc[:40]
    for response in ("probability", "prediction"):
        report = cf.audit.counterfactual_fairness(
            fit,
            rows,
            learner,
            settings=cf.audit.AuditSettings(
                unfair_paths=[("race", "C")],
                n_samples=10,
                response=response,  # type: ignore[arg-type]
                keep_samples=True,
            ),
        )
        assert set(report.by_group["from_level"]) == {"a", "b"}
        assert np.abs(report.changes["path_specific_change"]).max() < EXACT
        if response == "probability":
            assert np.abs(report.changes["change"]).mean() > 1e-3
    probability = learner.predict_proba(rows)
    assert probability.shape == (40, 2) and np.allclose(probability.sum(axis=1), 1.0)
