"""The whole workflow on a user's own data (issue 10).

One test (at least) per bullet of the issue: the public API the README uses,
unlabelled and partial rows, probabilities and any scikit-learn model, defaults
that hold still (reference groups, protected attributes as arrays, parity names),
quick runs that never overwrite tracked results, and the COMPAS study's pieces.
Stan-marked tests reuse the cached auxiliary fit of ``_models.py`` (no new program).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _models import AUX_RACES, aux_data, aux_fit, aux_scm
from _seeds import shifted
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from test_decomposition import NOTES_TRUTH, given_fit, notes_rows, notes_scm

import counterfair as cf
from counterfair.audit import AuditSettings, GroupAudit, counterfactual_fairness, reference_levels
from counterfair.audit._groups import REFERENCE_RULE
from counterfair.audit.causal import ABDUCTION_WITH_SETTINGS
from counterfair.audit.classification import PARITY_CRITERIA
from counterfair.counterfactual.prediction import RESPONSES, predict_output
from counterfair.inference.abduct import MISSING_CONDITIONING_COLUMN
from experiments import compas, law_school
from experiments.arguments import run_script


# ---------------------------------------------------------------------- 1. public API
def test_the_names_the_readme_uses_are_exported() -> None:
    for name in (
        "FairLearner",
        "full_predictor",
        "unaware_predictor",
        "BaselinePredictor",
        "counterfactual_predictions",
    ):
        assert name in cf.__all__, name
        assert callable(getattr(cf, name))
    for name in ("load_law_school", "law_school_split", "load_compas", "load_adult"):
        assert name in cf.datasets.__all__, name
        assert name not in cf.__all__, name  # the data sets live in cf.datasets only
    assert callable(cf.audit.counterfactual_fairness)
    assert callable(cf.datasets.law_school_level2)
    assert cf.datasets.DATA_ENV_VAR == "COUNTERFAIR_DATA"


# ---------------------------------------------------------------------- FairLearner options
class _FitCalledError(Exception):
    pass


def _capture_fit(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def fake_fit(self: cf.SCM, data: pd.DataFrame, **kwargs: Any) -> None:
        seen.update(kwargs)
        raise _FitCalledError

    monkeypatch.setattr(cf.SCM, "fit", fake_fit)
    return seen


def test_fit_args_seed_is_passed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _capture_fit(monkeypatch)
    data = aux_data().drop(columns="K")
    learner = cf.FairLearner(aux_scm(), target="P", fit_args={"seed": 0, "chains": 1})
    with pytest.raises(_FitCalledError):
        learner.fit(data)
    assert seen["seed"] == 0 and seen["chains"] == 1 and seen["progress"] is False
    with pytest.raises(_FitCalledError):
        cf.FairLearner(aux_scm(), target="P", seed=shifted(5)).fit(data)
    assert seen["seed"] == shifted(5)


def test_conflicting_or_ignored_fit_args_raise() -> None:
    data = aux_data().drop(columns="K")
    with pytest.raises(ValueError, match="pass the seed once"):
        cf.FairLearner(aux_scm(), target="P", seed=shifted(1), fit_args={"seed": 0}).fit(data)
    fit = given_fit(notes_scm(), notes_rows(200, seed=shifted(2)), NOTES_TRUTH, seed=shifted(3))
    with pytest.raises(ValueError, match="would be ignored: the model is a Fit"):
        cf.FairLearner(fit, target="Y", fit_args={"chains": 1}).fit(fit.data)  # no Stan


def test_a_target_that_is_neither_node_nor_column_is_rejected() -> None:
    data = aux_data().drop(columns="K")
    with pytest.raises(cf.errors.SCMError, match="'two_year_recid' is neither a node of the SCM"):
        cf.FairLearner(aux_scm(), target="two_year_recid").fit(data)


def test_a_protected_target_is_rejected_before_scikit_learn() -> None:
    data = aux_data().drop(columns="K")
    with pytest.raises(cf.errors.FairnessError, match="'race' is a protected attribute"):
        cf.FairLearner(aux_scm(), target="race").fit(data)


# ---------------------------------------------------------------------- 3. probabilities, any model
def test_baselines_have_predict_proba() -> None:
    data = aux_data().drop(columns="K")
    full = cf.full_predictor(aux_scm(), "P", estimator=LogisticRegression()).fit(data)
    proba = full.predict_proba(data)
    assert proba.shape == (len(data), 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(full.classes_, [0, 1])
    regressor = cf.unaware_predictor(aux_scm(), "X", estimator=LinearRegression()).fit(data)
    with pytest.raises(AttributeError, match="has no predict_proba"):
        regressor.predict_proba(data)


def test_a_plain_pipeline_gets_the_columns_it_was_fitted_on() -> None:
    data = aux_data().drop(columns="K")
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(data[["X", "Z"]], data["P"])
    extra = data.assign(row=np.arange(len(data)), world="factual")
    labels = predict_output(model, extra)
    probabilities = predict_output(model, extra, "probability")
    np.testing.assert_array_equal(labels, model.predict(data[["X", "Z"]]))
    np.testing.assert_allclose(probabilities, model.predict_proba(data[["X", "Z"]])[:, 1])
    with pytest.raises(cf.errors.DataError, match="fitted on column 'Z'"):
        predict_output(model, data[["X"]])
    with pytest.raises(TypeError, match="needs a predictor with predict_proba"):
        predict_output(LinearRegression().fit(data[["X"]], data["Z"]), data, "probability")


# ---------------------------------------------------------------------- 4. defaults that hold still
def test_protected_attributes_as_an_array() -> None:
    rng = np.random.default_rng(shifted(0))
    y = rng.integers(0, 2, 200)
    pred = rng.integers(0, 2, 200)
    group = np.where(rng.random(200) < 0.5, "a", "b")
    from_array = GroupAudit(y, pred, group).metrics()
    from_series = GroupAudit(y, pred, pd.Series(group, name="protected")).metrics()
    pd.testing.assert_frame_equal(from_array.by_group, from_series.by_group)
    two = GroupAudit(y, pred, np.column_stack([group, group[::-1]]), intersections=False).metrics()
    assert two.reference == {"protected_0": "a", "protected_1": "a"}


def test_reference_group_is_first_in_order_whatever_the_sizes() -> None:
    rng = np.random.default_rng(shifted(1))
    for share in (0.2, 0.8):  # the largest group flips; the reference must not
        group = np.where(rng.random(300) < share, "African-American", "Caucasian")
        y = rng.integers(0, 2, 300)
        assert GroupAudit(y, y, group).metrics().reference == {"protected": "African-American"}
        ordered = pd.Categorical(group, categories=["Caucasian", "African-American"])
        report = GroupAudit(y, y, pd.Series(ordered, name="race")).metrics()
        assert report.reference == {"race": "Caucasian"}
        impact = GroupAudit(None, y, group).disparate_impact("Caucasian")
        assert impact.reference == "African-American"
    assert "first group in order" in REFERENCE_RULE


def test_reference_levels_of_an_scm() -> None:
    assert reference_levels(aux_scm()) == {"race": AUX_RACES[0]}
    with pytest.raises(ValueError, match="declares no levels"):
        reference_levels(cf.datasets.law_school_level2())


def test_parity_criteria_name_selection_rate_and_share_of_positives() -> None:
    assert PARITY_CRITERIA["selection_rate_parity"] == "predicted_prevalence"
    assert PARITY_CRITERIA["share_of_positives_parity"] == "predicted_positive_rate"
    assert "equal_parity" not in PARITY_CRITERIA
    # 40 of 100 in group a and 10 of 25 in group b are selected: equal selection rates,
    # unequal shares of all positives
    group = np.array(["a"] * 100 + ["b"] * 25)
    pred = np.array([1] * 40 + [0] * 60 + [1] * 10 + [0] * 15)
    verdicts = GroupAudit(pred, pred, group).metrics().verdicts
    assert bool(verdicts.loc[("protected", "b"), "selection_rate_parity"]) is True
    assert bool(verdicts.loc[("protected", "b"), "share_of_positives_parity"]) is False


# ---------------------------------------------------------------------- 5. quick runs, data folder
def test_quick_law_school_without_out_never_writes_the_tracked_results(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import experiments.law_school as law_school

    seen: list[Any] = []
    monkeypatch.setattr(law_school, "run", lambda config: seen.append(config))
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    assert run_script(law_school.main, ["--quick"]) == 0
    out = Path(seen[0].out)
    assert out.parent == tmp_path and out.name.startswith("counterfair-law-school-quick-")
    assert run_script(law_school.main, ["--quick", "--out", str(tmp_path / "mine")]) == 0
    assert Path(seen[1].out) == tmp_path / "mine"


def test_a_missing_data_dir_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    assert run_script(law_school.main, ["--quick", "--data-dir", str(missing)]) == 2  # refused
    assert re.search("does not exist", capsys.readouterr().err)
    assert run_script(compas.main, ["--quick", "--data-dir", str(missing)]) == 2  # refused
    assert re.search("does not exist", capsys.readouterr().err)
    with pytest.raises(FileNotFoundError, match="COUNTERFAIR_DATA"):
        cf.datasets.load_compas(missing)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        cf.datasets.load_law_school(missing)


# ---------------------------------------------------------------------- 7. the COMPAS study
def test_compas_study_pieces() -> None:
    from experiments import compas

    raw = pd.DataFrame(
        {
            "race": ["Caucasian", "African-American", "Hispanic", "Caucasian"] * 5,
            "sex": ["Male", "Female"] * 10,
            "age": np.arange(20, 40),
            "juv_fel_count": 0,
            "juv_misd_count": 1,
            "juv_other_count": 0,
            "priors_count": np.arange(20) % 4,
            "c_charge_degree": ["F", "M"] * 10,
            "two_year_recid": [0, 1, 1, 0] * 5,
        }
    )
    frame, scaling = compas.prepare(raw)
    assert len(frame) == 15 and set(frame["race"]) == {"Caucasian", "African-American"}
    assert frame["juv_count"].eq(1).all() and scaling["age_sd"] > 0
    scm = compas.compas_scm()
    assert set(scm.protected) == {"race", "sex"} and scm.latents == ("U",)
    assert "age_z" in scm.non_descendants()
    assert reference_levels(scm) == {"race": "Caucasian", "sex": "Male"}
    parser = compas.build_parser()
    config = compas.config_from_args(parser.parse_args(["--quick"]), Path("x"))
    assert config.quick and config.scm_rows < compas.CompasConfig().scm_rows


# ---------------------------------------------------------------------- 2./3. Stan: partial rows
@pytest.fixture(scope="module")
def fit(stan_backend: str) -> cf.Fit:
    return aux_fit().fit


@pytest.fixture(scope="module")
def unlabelled() -> pd.DataFrame:
    """New rows without the outcome P (a production payload)."""
    return aux_data().iloc[:60].drop(columns=["K", "P"])


@pytest.mark.stan
def test_rows_without_the_outcome_are_abducted_and_simulated(
    fit: cf.Fit, unlabelled: pd.DataFrame
) -> None:
    abduction = fit.abduct(unlabelled, n_samples=20, seed=shifted(0))
    assert abduction.conditioned_on == ("Z", "X", "C")  # the children of K in the data
    assert fit.latents(unlabelled, n_samples=20, seed=shifted(0))["K"].shape == (20, 60)
    frame = fit.counterfactual(unlabelled, {"race": AUX_RACES[1]}, n_samples=20, seed=shifted(0))
    assert frame.attrs["simulated"] == ["P"]
    assert set(frame["P"].unique()) <= {0, 1}
    factual = frame[frame["world"] == "factual"].reset_index(drop=True)
    counter = frame[frame["world"] == "counterfactual"].reset_index(drop=True)
    same_race = (factual["race"] == counter["race"]).to_numpy()
    np.testing.assert_array_equal(factual["P"][same_race], counter["P"][same_race])
    np.testing.assert_array_equal(factual["Z"], counter["Z"])  # Z is no descendant of race
    full = cf.full_predictor(fit.scm, "P", estimator=LogisticRegression()).fit(
        aux_data().drop(columns="K")
    )
    report = counterfactual_fairness(fit, unlabelled, full, settings=AuditSettings(n_samples=20))
    assert report.overall["mean_abs_change"].iloc[0] > 0


@pytest.mark.stan
def test_conditioning_on_an_absent_column_suggests_condition_on(
    fit: cf.Fit, unlabelled: pd.DataFrame
) -> None:
    assert "condition_on=" in MISSING_CONDITIONING_COLUMN
    with pytest.raises(cf.errors.DataError, match=r"no column 'P'.*condition_on=\['Z', 'X', 'C'\]"):
        fit.abduct(unlabelled, condition_on=["X", "P"], n_samples=5)


@pytest.mark.stan
def test_the_audit_honours_abduction(
    fit: cf.Fit, unlabelled: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    abduction = fit.abduct(unlabelled, method="draws", n_samples=20, seed=shifted(0))
    full = cf.full_predictor(fit.scm, "P", estimator=LogisticRegression()).fit(
        aux_data().drop(columns="K")
    )

    def no_abduction(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("counterfactual_fairness abducted again")

    monkeypatch.setattr(cf.Fit, "abduct", no_abduction)
    report = counterfactual_fairness(
        fit, unlabelled, full, abduction=abduction, settings=AuditSettings(keep_samples=True),
    )
    assert report.changes["sample"].max() == 19
    assert "drop n_samples" in ABDUCTION_WITH_SETTINGS.format(names="n_samples")
    with pytest.raises(ValueError, match="n_samples would be ignored"):
        counterfactual_fairness(
            fit, unlabelled, full, abduction=abduction, settings=AuditSettings(n_samples=10),
        )
    with pytest.raises(ValueError, match="abduct exactly the audited rows"):
        counterfactual_fairness(fit, unlabelled.iloc[:10], full, abduction=abduction)


@pytest.mark.stan
def test_a_fair_learner_s_probabilities_do_not_move(
    fit: cf.Fit, unlabelled: pd.DataFrame
) -> None:
    learner = cf.FairLearner(
        fit,
        target="P",
        features=cf.inputs.Latent(),
        n_samples=10,
        seed=shifted(0),
    ).fit(aux_data().drop(columns="K"))
    abduction = fit.abduct(unlabelled, method="draws", n_samples=20, seed=shifted(0))
    for predictor in (learner, learner.predict_proba):
        report = counterfactual_fairness(
            fit, unlabelled, predictor, abduction=abduction,
            settings=AuditSettings(response="probability", keep_samples=True),
        )
        assert report.overall["mean_abs_change"].iloc[0] == 0.0
        assert report.changes["factual"].between(0, 1).all()
    pipeline = make_pipeline(StandardScaler(), LogisticRegression()).fit(
        aux_data()[["X", "Z"]], aux_data()["P"]
    )
    moved = counterfactual_fairness(
        fit, unlabelled, pipeline, abduction=abduction,
        settings=AuditSettings(response="probability"),
    )
    assert moved.overall["mean_abs_change"].iloc[0] > 0.0
    assert RESPONSES == ("prediction", "probability")


def test_importing_counterfair_prints_nothing(tmp_path: Path) -> None:
    """arviz warns once a day on import (a FutureWarning about its refactor, stamped in the
    user's cache folder); a fresh cache folder makes it fire, and counterfair hides it."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("PYTHONWARNINGS", None)
    done = subprocess.run(
        [sys.executable, "-c", "import counterfair"],
        capture_output=True, text=True, env=env, check=True,
    )
    assert (done.stdout, done.stderr) == ("", "")
