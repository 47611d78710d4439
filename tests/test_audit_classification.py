"""Tests of counterfair.audit.classification against independent computations."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted
from sklearn.metrics import accuracy_score, confusion_matrix, precision_score, recall_score

from counterfair.audit import GroupAudit
from counterfair.audit._validation import (
    EMPTY_GROUP,
    LENGTH_MISMATCH,
    MISSING_VALUES,
    NEGATIVE_COUNT,
    NOT_BINARY,
    NOT_NUMERIC,
    REFERENCE_NOT_FOUND,
    TAU_OUT_OF_RANGE,
    UNKNOWN_ATTRIBUTE,
)
from counterfair.audit.classification import PARITY_CRITERIA, RATE_METRICS
from counterfair.audit.group_audit import Classification

Data = tuple[np.ndarray, np.ndarray, pd.DataFrame]


@pytest.fixture
def data() -> Data:
    rng = np.random.default_rng(shifted(42))
    n = 1500
    protected = pd.DataFrame({
        "race": rng.choice(["White", "Black", "Asian"], size=n, p=[0.55, 0.3, 0.15]),
        "sex": rng.choice(["Female", "Male"], size=n),
    })
    y = rng.integers(0, 2, size=n)
    scores = 0.3 * y + 0.6 * rng.random(n) + 0.1 * (protected["race"] == "White").to_numpy()
    return y, scores, protected


def _expected(y: np.ndarray, p: np.ndarray, total_pp: float) -> dict[str, float]:
    tn, fp, fn, tp = confusion_matrix(y, p, labels=[0, 1]).ravel()
    return {
        "size": len(y),
        "prevalence": y.mean(),
        "predicted_prevalence": p.mean(),
        "predicted_positive_rate": p.sum() / total_pp,
        "tpr": recall_score(y, p),
        "tnr": tn / (tn + fp),
        "fpr": fp / (fp + tn),
        "fnr": fn / (fn + tp),
        "precision": precision_score(y, p),
        "fdr": fp / (fp + tp),
        "for": fn / (fn + tn),
        "accuracy": accuracy_score(y, p),
        "npv": tn / (tn + fn),
    }


def test_group_measures_match_sklearn_per_group_and_intersection(data: Data) -> None:
    y, scores, protected = data
    report = GroupAudit(y, scores, protected, task=Classification(threshold=0.5)).metrics()
    pred = (scores >= 0.5).astype(int)
    keys = {
        "race": protected["race"],
        "sex": protected["sex"],
        "race x sex": protected["race"] + " x " + protected["sex"],
    }
    assert set(report.by_group.index.get_level_values("attribute")) == set(keys)
    for attribute, labels in keys.items():
        for group in labels.unique():
            mask = (labels == group).to_numpy()
            expected = _expected(y[mask], pred[mask], pred.sum())
            row = report.by_group.loc[(attribute, group)]
            for metric, value in expected.items():
                assert row[metric] == pytest.approx(value), (attribute, group, metric)
            assert row["tp"] + row["fp"] + row["fn"] + row["tn"] == row["size"]


def test_predicted_positive_rate_sums_to_one_per_attribute(data: Data) -> None:
    y, scores, protected = data
    report = GroupAudit(y, scores, protected).metrics()
    sums = report.by_group["predicted_positive_rate"].groupby(level="attribute").sum()
    np.testing.assert_allclose(sums.to_numpy(), 1.0)


def test_scores_are_thresholded_and_binary_predictions_used_as_given(data: Data) -> None:
    y, scores, protected = data
    from_scores = GroupAudit(y, scores, protected, task=Classification(threshold=0.6)).metrics()
    from_labels = GroupAudit(
        y, (scores >= 0.6).astype(int), protected, task=Classification(threshold=0.6),
    ).metrics()
    from_bools = GroupAudit(y.astype(bool), scores >= 0.6, protected).metrics()
    pd.testing.assert_frame_equal(from_scores.by_group, from_labels.by_group)
    pd.testing.assert_frame_equal(from_scores.by_group, from_bools.by_group)


def test_reference_defaults_to_first_group_in_order_and_has_ratio_one(data: Data) -> None:
    y, scores, protected = data
    report = GroupAudit(y, scores, protected).metrics()
    for attribute, group in report.reference.items():
        assert group == report.by_group.loc[attribute].index[0]
        np.testing.assert_allclose(report.ratios.loc[(attribute, group)].to_numpy(), 1.0)
        np.testing.assert_allclose(report.differences.loc[(attribute, group)].to_numpy(), 0.0)
    assert report.reference["race"] == sorted(protected["race"].astype(str).unique())[0]


def test_named_reference_and_ratios_against_by_group(data: Data) -> None:
    y, scores, protected = data
    reference = {"race": "Black", "race x sex": ("Asian", "Male")}
    report = GroupAudit(y, scores, protected, reference=reference).metrics()
    assert report.reference["race"] == "Black"
    assert report.reference["race x sex"] == "Asian x Male"
    for attribute, group in report.reference.items():
        ref = report.by_group.loc[(attribute, group), list(RATE_METRICS)].astype(float)
        block = report.by_group.loc[attribute, list(RATE_METRICS)].astype(float)
        np.testing.assert_allclose(report.ratios.loc[attribute].to_numpy(),
                                   (block / ref).to_numpy())
        np.testing.assert_allclose(report.differences.loc[attribute].to_numpy(),
                                   (block - ref).to_numpy())
    same = GroupAudit(y, scores, protected, reference={"race x sex": "Asian x Male"}).metrics()
    pd.testing.assert_frame_equal(same.ratios.loc["race x sex"],
                                  report.ratios.loc["race x sex"])


def test_verdicts_follow_the_tau_band(data: Data) -> None:
    y, scores, protected = data
    tau = 0.8
    report = GroupAudit(y, scores, protected, task=Classification(tau=tau)).metrics()
    for criterion, metric in PARITY_CRITERIA.items():
        ratio = report.ratios[metric]
        expected = (ratio >= tau) & (ratio <= 1 / tau)
        assert not report.verdicts[criterion].isna().any()
        assert report.verdicts[criterion].astype(bool).tolist() == expected.tolist()


def _two_groups() -> tuple[np.ndarray, np.ndarray, pd.Series]:
    # group a: 20 people, 10 predicted positive; group b: 10 people, 4 predicted positive.
    group = pd.Series(["a"] * 20 + ["b"] * 10, name="g")
    pred = np.array([1] * 10 + [0] * 10 + [1] * 4 + [0] * 6)
    y = np.array([1, 0] * 15)
    return y, pred, group


@pytest.mark.parametrize("reference", ["a", "b"])
def test_verdict_flips_exactly_at_tau(reference: str) -> None:
    y, pred, group = _two_groups()
    base = GroupAudit(y, pred, group, reference={"g": reference}).metrics()
    other = "b" if reference == "a" else "a"
    ratio = float(base.ratios.loc[("g", other), "predicted_prevalence"])
    assert ratio == pytest.approx(0.8 if reference == "a" else 1.25)
    # the band is [tau, 1/tau]: the boundary tau is min(ratio, 1/ratio)
    boundary = min(ratio, 1.0 / ratio)
    passes = GroupAudit(
        y, pred, group, task=Classification(tau=boundary - 1e-9), reference={"g": reference},
    ).metrics()
    fails = GroupAudit(
        y, pred, group, task=Classification(tau=boundary + 1e-9), reference={"g": reference},
    ).metrics()
    assert bool(passes.verdicts.loc[("g", other), "selection_rate_parity"]) is True
    assert bool(fails.verdicts.loc[("g", other), "selection_rate_parity"]) is False
    assert bool(fails.verdicts.loc[("g", reference), "selection_rate_parity"]) is True


def test_summary_and_failures_name_failing_groups() -> None:
    y, pred, group = _two_groups()
    report = GroupAudit(y, pred, group, task=Classification(tau=0.9)).metrics()
    failures = report.failures()
    assert ("selection_rate_parity", "g", "b") in set(
        zip(failures["criterion"], failures["attribute"], failures["group"], strict=True))
    text = report.summary()
    assert "tau = 0.9" in text
    assert "selection rate parity (predicted_prevalence ratio): FAILS for g = 'b' (0.8)" in text
    passing = GroupAudit(y, pred, group, task=Classification(tau=0.35)).metrics()
    assert passing.failures().empty
    assert "all groups pass" in passing.summary()


def test_undefined_rates_are_nan_without_warnings() -> None:
    # group b has no actual positives, so its TPR/FNR are undefined; reference FPR is 0.
    group = pd.Series(["a"] * 6 + ["b"] * 4, name="g")
    y = np.array([1, 1, 1, 0, 0, 0, 0, 0, 0, 0])
    pred = np.array([1, 1, 0, 0, 0, 0, 1, 0, 0, 0])
    report = GroupAudit(y, pred, group, n_bootstrap=20).metrics()
    assert np.isnan(report.by_group.loc[("g", "b"), "tpr"])
    assert report.by_group.loc[("g", "a"), "fpr"] == 0.0
    assert np.isnan(report.ratios.loc[("g", "b"), "fpr"])
    assert report.verdicts.loc[("g", "b"), "false_positive_parity"] is pd.NA
    assert "undefined" in report.summary()


def test_single_attribute_has_no_intersection_and_intersections_can_be_chosen(data: Data) -> None:
    y, scores, protected = data
    single = GroupAudit(y, scores, protected["race"]).metrics()
    assert set(single.by_group.index.get_level_values(0)) == {"race"}
    none = GroupAudit(y, scores, protected, intersections=False).metrics()
    assert set(none.by_group.index.get_level_values(0)) == {"race", "sex"}
    chosen = GroupAudit(
        y, scores, {"race": protected["race"], "sex": protected["sex"]},
        intersections=[("sex", "race")],
    ).metrics()
    assert "Male x Black" in chosen.by_group.loc["sex x race"].index


def test_categorical_order_is_kept(data: Data) -> None:
    y, scores, protected = data
    order = ["Asian", "White", "Black"]
    cat = protected.assign(race=pd.Categorical(protected["race"], categories=order))
    report = GroupAudit(y, scores, cat, intersections=False).metrics()
    assert list(report.by_group.loc["race"].index) == order


def test_bootstrap_intervals_are_seeded_and_consistent(data: Data) -> None:
    y, scores, protected = data
    a = GroupAudit(y, scores, protected, n_bootstrap=60, seed=shifted(3)).metrics()
    b = GroupAudit(y, scores, protected, n_bootstrap=60, seed=shifted(3)).metrics()
    c = GroupAudit(y, scores, protected, n_bootstrap=60, seed=shifted(4)).metrics()
    assert a.ci is not None and a.ratio_ci is not None and a.difference_ci is not None
    pd.testing.assert_frame_equal(a.ci, b.ci)
    assert not a.ci.equals(c.ci)
    assert list(a.ci.columns.get_level_values(0).unique()) == list(RATE_METRICS)
    lower = a.ci.xs("lower", axis=1, level="bound")
    upper = a.ci.xs("upper", axis=1, level="bound")
    assert (lower <= upper).all().all()
    # big groups: the estimate lies inside its interval
    est = a.by_group.loc["sex", list(RATE_METRICS)]
    assert (lower.loc["sex"] <= est + 1e-12).all().all()
    assert (est <= upper.loc["sex"] + 1e-12).all().all()
    for attribute, group in a.reference.items():
        ref = a.ratio_ci.loc[(attribute, group)]
        np.testing.assert_allclose(ref.dropna().to_numpy(), 1.0)
    no_ci = GroupAudit(y, scores, protected).metrics()
    assert no_ci.ci is None and no_ci.ratio_ci is None


def test_mismatched_lengths() -> None:
    with pytest.raises(ValueError, match=re.escape(LENGTH_MISMATCH.format(
            name="y_pred", length=3, other_name="y_true", other_length=4))):
        GroupAudit([0, 1, 0, 1], [0, 1, 1], pd.Series(["a"] * 4, name="g")).metrics()
    with pytest.raises(ValueError, match=re.escape(LENGTH_MISMATCH.format(
            name="protected", length=5, other_name="y_true", other_length=4))):
        GroupAudit([0, 1, 0, 1], [0, 1, 1, 0], pd.Series(["a"] * 5, name="g")).metrics()


def test_non_binary_labels_are_named() -> None:
    with pytest.raises(ValueError, match=re.escape(NOT_BINARY.format(
            name="y_true", values="[2, 3]"))):
        GroupAudit([0, 1, 2, 3], [0, 1, 1, 0], pd.Series(list("aabb"), name="g")).metrics()
    with pytest.raises(ValueError, match=re.escape(NOT_BINARY.format(
            name="y_true", values="['yes', 'no']"))):
        GroupAudit(["yes", "no"], [0, 1], pd.Series(list("ab"), name="g")).metrics()


def test_bad_predictions_and_missing_values() -> None:
    group = pd.Series(list("aabb"), name="g")
    with pytest.raises(TypeError, match=re.escape(NOT_NUMERIC.format(name="y_pred",
                                                                      dtype="<U1"))):
        GroupAudit([0, 1, 0, 1], ["a", "b", "c", "d"], group).metrics()
    with pytest.raises(ValueError, match=re.escape(MISSING_VALUES.format(name="y_pred",
                                                                         count=1))):
        GroupAudit([0, 1, 0, 1], [0.1, np.nan, 0.3, 0.9], group).metrics()
    with pytest.raises(ValueError, match=re.escape(MISSING_VALUES.format(
            name="protected['g']", count=1))):
        GroupAudit([0, 1, 0, 1], [0, 1, 0, 1], pd.Series(["a", None, "b", "b"], name="g")).metrics()


def test_empty_group_is_reported() -> None:
    group = pd.Series(pd.Categorical(list("aabb"), categories=["a", "b", "c"]), name="g")
    with pytest.raises(ValueError, match=re.escape(EMPTY_GROUP.format(group="c",
                                                                      attribute="g"))):
        GroupAudit([0, 1, 0, 1], [0, 1, 1, 0], group).metrics()


def test_reference_errors_name_the_group_and_the_choices(data: Data) -> None:
    y, scores, protected = data
    with pytest.raises(ValueError, match=re.escape(REFERENCE_NOT_FOUND.format(
            group="Martian", attribute="race", available="['Asian', 'Black', 'White']"))):
        GroupAudit(y, scores, protected, reference={"race": "Martian"}).metrics()
    with pytest.raises(ValueError, match=re.escape(UNKNOWN_ATTRIBUTE.format(
            name="reference", attribute="age", available=["race", "sex", "race x sex"]))):
        GroupAudit(y, scores, protected, reference={"age": "old"}).metrics()
    with pytest.raises(ValueError, match=re.escape(UNKNOWN_ATTRIBUTE.format(
            name="intersections", attribute="age", available=["race", "sex"]))):
        GroupAudit(y, scores, protected, intersections=[("race", "age")]).metrics()


@pytest.mark.parametrize("tau", [0.0, 1.5, -0.2])
def test_tau_out_of_range(tau: float) -> None:
    with pytest.raises(ValueError, match=re.escape(TAU_OUT_OF_RANGE.format(tau=tau))):
        GroupAudit(
            [0, 1], [0, 1], pd.Series(["a", "b"], name="g"), task=Classification(tau=tau),
        ).metrics()


def test_negative_bootstrap_count() -> None:
    with pytest.raises(ValueError, match=re.escape(NEGATIVE_COUNT.format(name="n_bootstrap",
                                                                         value=-1))):
        GroupAudit([0, 1], [0, 1], pd.Series(["a", "b"], name="g"), n_bootstrap=-1).metrics()
