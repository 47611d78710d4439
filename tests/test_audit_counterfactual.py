"""Counterfactual fairness audit against closed forms on the linear-Gaussian level 3 SCM.

The fit is the shared level 3 fit of ``tests/_models.py`` (race, sex -> UGPA, LSAT, all
Normal): under do(race), UGPA moves by exactly the fitted race effect in every row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _models import RACES, law_level3_fit, law_train
from _seeds import shifted

import counterfair as cf
from counterfair.audit import AuditSettings, counterfactual_fairness
from counterfair.audit.causal_report import counterfactual_html

pytestmark = pytest.mark.stan


@pytest.fixture(scope="module")
def fitted(stan_backend: str) -> tuple[cf.Fit, pd.DataFrame]:
    rows = law_train().drop(columns=["K", "ZFYA"]).iloc[:60]
    return law_level3_fit().fit, rows


def test_unaware_predictor_moves_causally_but_passes_the_flip_test(fitted):
    fit, rows = fitted
    # posterior samples whose parameters are known here: sample s uses params.take([s])
    abduction = fit.abduct(rows, method="draws", n_samples=40, seed=shifted(3))
    report = counterfactual_fairness(
        fit, rows, lambda f: 2.0 * f["UGPA"].to_numpy(),
        settings=AuditSettings(attributes=["race"], interval=0.9), abduction=abduction,
    )
    overall = report.overall.set_index("attribute").loc["race"]
    by_group = report.by_group.set_index(["from_level", "to_level"])
    # closed form: under do(race = b), UGPA moves by beta_b - beta_a with the sample's
    # parameters (beta_White = 0, the reference) in every row, so 2 UGPA moves by twice that
    effects = abduction.params["beta_UGPA_race"]  # (samples, 2): Black, Asian
    beta = dict(zip(RACES, np.column_stack([np.zeros(len(effects)), effects]).T, strict=True))
    factual = rows["race"].astype(str).to_numpy()
    per_sample = np.array([  # mean |change| over every (row, other level) pair, per sample
        np.mean([abs(2 * (beta[b][s] - beta[a][s])) for a in factual for b in RACES if b != a])
        for s in range(len(effects))
    ])
    assert overall["mean_abs_change"] == pytest.approx(per_sample.mean(), rel=1e-9)
    assert [overall["ci_lower"], overall["ci_upper"]] == pytest.approx(
        np.quantile(per_sample, [0.05, 0.95]), rel=1e-9)
    assert by_group.loc[("White", "Black"), "mean_abs_change"] == pytest.approx(
        np.mean(np.abs(2 * beta["Black"])), rel=1e-9)
    assert overall["flip_mean_abs_change"] == 0.0
    assert overall["share_above_tolerance"] == 1.0
    assert overall["ci_upper"] > overall["ci_lower"]  # parameter uncertainty is carried


def test_predictor_of_the_protected_column_changes_by_one_in_both_tests(fitted):
    fit, rows = fitted
    report = counterfactual_fairness(
        fit, rows, lambda f: (f["sex"].astype(str) == "Male").to_numpy(float),
        settings=AuditSettings(attributes=["sex"], n_samples=20),
    )
    overall = report.overall.iloc[0]
    assert overall["mean_abs_change"] == pytest.approx(1.0)
    assert overall["flip_mean_abs_change"] == pytest.approx(1.0)
    by_group = report.by_group.set_index(["from_level", "to_level"])
    assert set(by_group.index) == {("Female", "Male"), ("Male", "Female")}


def test_constant_predictor_is_counterfactually_fair(fitted):
    fit, rows = fitted
    report = counterfactual_fairness(
        fit, rows, lambda f: np.zeros(len(f)), settings=AuditSettings(n_samples=10),
    )
    assert (report.overall["mean_abs_change"] == 0.0).all()
    assert (report.overall["wasserstein"] == 0.0).all()
    assert set(report.overall["attribute"]) == {"race", "sex"}
    assert "race:" in report.summary() and "sex:" in report.summary()
    assert "<table class=\"audit sortable\">" in counterfactual_html({"constant": report})


def test_bad_arguments_are_named(fitted):
    fit, rows = fitted
    with pytest.raises(ValueError, match="'UGPA' is not a protected node"):
        counterfactual_fairness(
            fit, rows, lambda f: np.zeros(len(f)), settings=AuditSettings(attributes=["UGPA"]),
        )
    with pytest.raises(ValueError, match="duplicated index"):
        counterfactual_fairness(fit, pd.concat([rows, rows]), lambda f: np.zeros(len(f)))
