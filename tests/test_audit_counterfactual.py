"""Counterfactual fairness audit against closed forms on a small linear-Gaussian SCM."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _models import audit_scm

import counterfair as cf
from counterfair.audit import counterfactual_fairness, counterfactual_html

pytestmark = pytest.mark.stan

TRUTH = {"alpha_X": 1.0, "beta_X_A": [0.8], "sigma_X": 0.5}


@pytest.fixture(scope="module")
def fitted(stan_backend: str) -> tuple[cf.Fit, pd.DataFrame]:
    scm = audit_scm()
    data = scm.sample(300, params=TRUTH, seed=11)
    fit = scm.fit(data, chains=4, warmup=400, draws=400, seed=3, progress=False)
    return fit, data.iloc[:60]


def test_unaware_predictor_moves_causally_but_passes_the_flip_test(fitted):
    fit, rows = fitted
    report = counterfactual_fairness(fit, rows, lambda f: 2.0 * f["X"].to_numpy(), n_samples=40)
    overall = report.overall.set_index("attribute").loc["A"]
    beta = np.abs(fit.params()["beta_X_A"][:, 0])
    # X_cf - X = +-beta for every row and sample, so |change| = 2 |beta| on average
    assert overall["mean_abs_change"] == pytest.approx(2 * beta.mean(), rel=0.1)
    assert overall["flip_mean_abs_change"] == 0.0
    assert overall["share_above_tolerance"] == 1.0
    assert overall["ci_lower"] - 1e-12 <= overall["mean_abs_change"] <= overall["ci_upper"] + 1e-12
    assert overall["ci_upper"] > overall["ci_lower"]  # parameter uncertainty is carried


def test_predictor_of_the_protected_column_changes_by_one_in_both_tests(fitted):
    fit, rows = fitted
    report = counterfactual_fairness(
        fit, rows, lambda f: (f["A"].astype(str) == "b").to_numpy(float), n_samples=20
    )
    overall = report.overall.iloc[0]
    assert overall["mean_abs_change"] == pytest.approx(1.0)
    assert overall["flip_mean_abs_change"] == pytest.approx(1.0)
    by_group = report.by_group.set_index(["from_level", "to_level"])
    assert set(by_group.index) == {("a", "b"), ("b", "a")}


def test_constant_predictor_is_counterfactually_fair(fitted):
    fit, rows = fitted
    report = counterfactual_fairness(fit, rows, lambda f: np.zeros(len(f)), n_samples=10)
    assert report.overall["mean_abs_change"].iloc[0] == 0.0
    assert report.overall["wasserstein"].iloc[0] == 0.0
    assert "A:" in report.summary()
    assert "<table>" in counterfactual_html({"constant": report})


def test_bad_arguments_are_named(fitted):
    fit, rows = fitted
    with pytest.raises(ValueError, match="'B' is not a protected node"):
        counterfactual_fairness(fit, rows, lambda f: np.zeros(len(f)), attributes=["B"])
    with pytest.raises(ValueError, match="duplicated index"):
        counterfactual_fairness(fit, pd.concat([rows, rows]), lambda f: np.zeros(len(f)))
