"""Tests of counterfair.audit.regression against pandas group-bys."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted
from scipy import stats

from counterfair.audit import GroupAudit
from counterfair.audit._validation import (
    LENGTH_MISMATCH,
    NOT_FINITE,
    REFERENCE_NOT_FOUND,
)
from counterfair.audit.group_audit import Regression
from counterfair.audit.regression import REGRESSION_METRICS

Data = tuple[np.ndarray, np.ndarray, pd.DataFrame]


@pytest.fixture
def data() -> Data:
    rng = np.random.default_rng(shifted(9))
    n = 800
    protected = pd.DataFrame({"race": rng.choice(["W", "B", "A"], n, p=[0.5, 0.3, 0.2]),
                              "sex": rng.choice(["F", "M"], n)})
    y = rng.normal(size=n)
    pred = 0.7 * y + 0.3 * rng.normal(size=n) + 0.4 * (protected["race"] == "B").to_numpy()
    return y, pred, protected


def test_group_measures_match_groupby(data: Data) -> None:
    y, pred, protected = data
    report = GroupAudit(y, pred, protected, task=Regression()).metrics()
    frame = protected.assign(y=y, p=pred, r=y - pred)
    frame["race x sex"] = frame["race"] + " x " + frame["sex"]
    for attribute in ["race", "sex", "race x sex"]:
        grouped = frame.groupby(attribute)
        expected = pd.DataFrame({
            "size": grouped.size(),
            "mean_outcome": grouped["y"].mean(),
            "mean_prediction": grouped["p"].mean(),
            "mean_residual": grouped["r"].mean(),
            "rmse": np.sqrt(grouped["r"].apply(lambda r: float(np.mean(r**2)))),
        })
        got = report.by_group.loc[attribute]
        got.index.name = attribute
        pd.testing.assert_frame_equal(got, expected, check_dtype=False)


def test_differences_and_ratios_to_reference(data: Data) -> None:
    y, pred, protected = data
    report = GroupAudit(y, pred, protected, task=Regression(), reference={"race": "B"}).metrics()
    assert report.reference == {"race": "B", "sex": report.reference["sex"],
                                "race x sex": report.reference["race x sex"]}
    metrics = list(REGRESSION_METRICS)
    block = report.by_group.loc["race", metrics]
    ref = block.loc["B"]
    np.testing.assert_allclose(report.differences.loc["race"].to_numpy(), (block - ref).to_numpy())
    np.testing.assert_allclose(report.ratios.loc["race"].to_numpy(), (block / ref).to_numpy())
    np.testing.assert_allclose(report.ratios.loc[("race", "B")].to_numpy(), 1.0)
    np.testing.assert_allclose(report.differences.loc[("race", "B")].to_numpy(), 0.0)
    # group B is over-predicted: negative mean residual (residual = y_true - y_pred)
    assert report.by_group.loc[("race", "B"), "mean_residual"] < 0
    assert (report.differences.loc[["race"], "mean_residual"].drop(("race", "B")) > 0).all()


def _truth(attribute: str, group: str) -> dict[str, float]:
    """Population values of the fixture's measures in a group (y ~ N(0, 1); pred = 0.7 y +
    0.3 e + 0.4 [race == B], so the residual is 0.3 y - 0.3 e - 0.4 [B]): the share of B
    rows is 1 in B, 0 in W and A, and 0.3 in a sex group (race is drawn apart from sex)."""
    race = group.split(" x ")[0] if attribute != "sex" else None
    b = 0.3 if race is None else float(race == "B")
    return {"mean_outcome": 0.0, "mean_prediction": 0.4 * b, "mean_residual": -0.4 * b,
            "rmse": float(np.sqrt(0.09 + 0.09 + 0.16 * b))}


def test_bootstrap(data: Data) -> None:
    y, pred, protected = data
    n_bootstrap = 400
    report = GroupAudit(
        y, pred, protected, task=Regression(), n_bootstrap=n_bootstrap, seed=shifted(1),
    ).metrics()
    assert report.ci is not None and report.difference_ci is not None
    lower = report.ci.xs("lower", axis=1, level="bound")
    upper = report.ci.xs("upper", axis=1, level="bound")
    # 1. the 95% intervals cover the simulated truth: 11 groups x 4 measures, each missing
    # it with probability 0.05; 10 or more misses has probability below 1e-3 even with the
    # nested groups' dependence (a Binomial(44, 0.05) has mean 2.2 and sd 1.4)
    misses = 0
    for attribute, group in report.by_group.index:
        for metric, value in _truth(attribute, group).items():
            inside = lower.loc[(attribute, group), metric] <= value <= upper.loc[
                (attribute, group), metric]
            misses += not inside
    assert misses < 10, misses
    # 2. the width of a group mean's interval is 2 z s / sqrt(n) (the normal theory's,
    # computed here from the rows), within 4 Monte Carlo sds of the bootstrap's percentile
    # endpoints: sd(q_p) = sqrt(p (1 - p) / B) / density(q_p), about 0.13 se each for B=400
    frame = protected.assign(y=y, p=pred)
    z, p = stats.norm.ppf(0.975), 0.025
    endpoint_sd = np.sqrt(p * (1 - p) / n_bootstrap) / stats.norm.pdf(z)  # in units of se
    for attribute in ("race", "sex"):
        for group, part in frame.groupby(attribute):
            for metric, column in (("mean_outcome", "y"), ("mean_prediction", "p")):
                se = part[column].std(ddof=0) / np.sqrt(len(part))
                key = (attribute, group)
                width = upper.loc[key, metric] - lower.loc[key, metric]
                assert abs(width - 2 * z * se) < 4 * np.sqrt(2) * endpoint_sd * se, (
                    attribute, group, metric, width, 2 * z * se)
    for attribute, group in report.reference.items():
        np.testing.assert_allclose(
            report.difference_ci.loc[(attribute, group)].to_numpy(), 0.0)


def test_errors(data: Data) -> None:
    y, pred, protected = data
    with pytest.raises(ValueError, match=re.escape(LENGTH_MISMATCH.format(
            name="y_pred", length=799, other_name="y_true", other_length=800))):
        GroupAudit(y, pred[:-1], protected, task=Regression()).metrics()
    with pytest.raises(ValueError, match=re.escape(NOT_FINITE.format(name="y_pred",
                                                                     count=1))):
        GroupAudit(
            [1.0, 2.0], [1.0, np.inf], pd.Series(["a", "b"], name="g"), task=Regression(),
        ).metrics()
    with pytest.raises(ValueError, match=re.escape(REFERENCE_NOT_FOUND.format(
            group="Z", attribute="race", available="['A', 'B', 'W']"))):
        GroupAudit(y, pred, protected, task=Regression(), reference={"race": "Z"}).metrics()
