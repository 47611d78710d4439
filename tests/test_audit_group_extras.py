"""Tests of the added group measures: NPV, equalized odds, epsilon verdicts, summary table,
two-group measures (SPD, EOD, DI), class balance, normalised conditional MI and KL."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted

from counterfair.audit import GroupAudit
from counterfair.audit._validation import (
    BAD_CHOICE,
    GROUP_NOT_FOUND,
    NEGATIVE_TOLERANCE,
    NO_OTHER_GROUP,
)
from counterfair.audit.classification import CRITERION_EXPLANATIONS, JOINT_CRITERIA, PARITY_CRITERIA
from counterfair.audit.dependence import kl_divergence, normalized_conditional_mutual_information
from counterfair.audit.group_audit import Classification


@pytest.fixture
def data() -> tuple[np.ndarray, np.ndarray, pd.Series]:
    rng = np.random.default_rng(shifted(5))
    n = 3000
    group = pd.Series(rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2]), name="g")
    y = (rng.random(n) < np.where(group == "a", 0.5, 0.35)).astype(int)
    score = np.clip(0.3 * y + rng.random(n) * 0.7 + np.where(group == "c", 0.1, 0.0), 0, 1)
    return y, score, group


def test_npv_matches_counts(data: tuple[np.ndarray, np.ndarray, pd.Series]) -> None:
    y, score, group = data
    report = GroupAudit(y, score, group).metrics()
    pred = score >= 0.5
    for g in ("a", "b", "c"):
        m = (group == g).to_numpy()
        tn = int(((pred == 0) & (y == 0) & m).sum())
        fn = int(((pred == 0) & (y == 1) & m).sum())
        assert report.by_group.loc[("g", g), "npv"] == pytest.approx(tn / (tn + fn))
        assert report.by_group.loc[("g", g), "npv"] == pytest.approx(
            1 - report.by_group.loc[("g", g), "for"])
    assert "npv_parity" in report.verdicts.columns


def test_equalized_odds_is_the_joint_verdict(
        data: tuple[np.ndarray, np.ndarray, pd.Series]) -> None:
    y, score, group = data
    for tau in (0.5, 0.8, 0.9, 0.95):
        report = GroupAudit(y, score, group, task=Classification(tau=tau)).metrics()
        tpr, fpr = report.ratios["tpr"], report.ratios["fpr"]
        expected = ((tpr >= tau) & (tpr <= 1 / tau)) & ((fpr >= tau) & (fpr <= 1 / tau))
        assert report.verdicts["equalized_odds"].astype(bool).tolist() == expected.tolist()
    assert set(JOINT_CRITERIA) == {"equalized_odds"}


def test_equalized_odds_fails_when_only_fpr_differs() -> None:
    # same TPR (0.5) in both groups, FPR 0.5 in a and 0.1 in b
    y = np.array([1] * 10 + [0] * 10 + [1] * 10 + [0] * 10)
    pred = np.array([1] * 5 + [0] * 5 + [1] * 5 + [0] * 5 + [1] * 5 + [0] * 5 + [1] + [0] * 9)
    group = pd.Series(["a"] * 20 + ["b"] * 20, name="g")
    report = GroupAudit(y, pred, group, reference={"g": "a"}).metrics()
    assert bool(report.verdicts.loc[("g", "b"), "false_negative_parity"]) is True
    assert bool(report.verdicts.loc[("g", "b"), "equalized_odds"]) is False
    failures = report.failures()
    joint = failures[failures["criterion"] == "equalized_odds"]
    assert joint[["group", "metric"]].values.tolist() == [["b", "fpr"]]


def test_epsilon_verdicts_on_differences_and_ratios(
        data: tuple[np.ndarray, np.ndarray, pd.Series]) -> None:
    y, score, group = data
    report = GroupAudit(y, score, group).metrics()
    eps = 0.05
    diff = report.epsilon_verdicts(eps, on="difference")
    ratio = report.epsilon_verdicts(eps, on="ratio")
    for criterion, metric in PARITY_CRITERIA.items():
        d = report.differences[metric]
        assert diff[criterion].astype(bool).tolist() == (d.abs() <= eps).tolist()
        r = report.ratios[metric]
        assert ratio[criterion].astype(bool).tolist() == (np.abs(np.log(r)) <= eps).tolist()
    eo = (report.differences["tpr"].abs() <= eps) & (report.differences["fpr"].abs() <= eps)
    assert diff["equalized_odds"].astype(bool).tolist() == eo.tolist()
    # epsilon = 0 passes only the reference group itself
    zero = report.epsilon_verdicts(0.0)
    assert zero.loc[("g", "a")].all()
    with pytest.raises(ValueError, match=re.escape(NEGATIVE_TOLERANCE.format(name="epsilon",
                                                                             value=-0.1))):
        report.epsilon_verdicts(-0.1)
    with pytest.raises(ValueError, match=re.escape(BAD_CHOICE.format(
            name="on", choices=["difference", "ratio"], value="odds"))):
        report.epsilon_verdicts(0.1, on="odds")


def test_summary_table_reads_at_a_glance() -> None:
    group = pd.Series(["a"] * 20 + ["b"] * 10, name="g")
    pred = np.array([1] * 10 + [0] * 10 + [1] * 4 + [0] * 6)
    y = np.array([1, 0] * 15)
    report = GroupAudit(y, pred, group, task=Classification(tau=0.9)).metrics()
    table = report.summary_table()
    assert len(table) == len(PARITY_CRITERIA) + len(JOINT_CRITERIA)
    assert list(table.columns) == ["criterion", "meaning", "measure", "verdict",
                                   "failing groups", "worst ratio"]
    row = table.set_index("criterion").loc["selection rate parity"]
    assert row["verdict"] == "FAIL"
    assert row["failing groups"] == "g = 'b' (predicted_prevalence 0.8)"
    assert row["worst ratio"] == pytest.approx(0.8)
    assert set(table["meaning"]) == set(CRITERION_EXPLANATIONS.values())
    assert all(len(text) < 120 and "\n" not in text for text in table["meaning"])


def test_two_group_measures_match_manual(data: tuple[np.ndarray, np.ndarray, pd.Series]) -> None:
    y, score, group = data
    pred = (score >= 0.5).astype(int)
    table = GroupAudit(y, pred, group, n_bootstrap=100, seed=shifted(3)).two_group(reference="a")
    priv = (group == "a").to_numpy()
    spd = pred[~priv].mean() - pred[priv].mean()
    eod = pred[~priv & (y == 1)].mean() - pred[priv & (y == 1)].mean()
    di = pred[~priv].mean() / pred[priv].mean()
    assert table.loc["statistical_parity_difference", "estimate"] == pytest.approx(spd)
    assert table.loc["equal_opportunity_difference", "estimate"] == pytest.approx(eod)
    assert table.loc["disparate_impact", "estimate"] == pytest.approx(di)
    assert bool(table.loc["disparate_impact", "unfair"]) is bool(di <= 0.8)
    assert (table["lower"] <= table["estimate"]).all()
    assert (table["estimate"] <= table["upper"]).all()
    again = GroupAudit(y, pred, group, n_bootstrap=100, seed=shifted(3)).two_group(reference="a")
    pd.testing.assert_frame_equal(table, again)


def test_two_group_disparate_impact_at_exactly_tau_is_unfair() -> None:
    pred = [1] * 4 + [0] * 6 + [1] * 5 + [0] * 5
    y = [1] * 20
    group = ["u"] * 10 + ["p"] * 10
    table = GroupAudit(y, pred, group).two_group(reference="p")
    assert table.loc["disparate_impact", "estimate"] == pytest.approx(0.8)
    assert bool(table.loc["disparate_impact", "unfair"]) is True


def test_two_group_errors() -> None:
    with pytest.raises(ValueError, match=re.escape(GROUP_NOT_FOUND.format(
            name="privileged group", group="z", where="protected", available="['a', 'b']"))):
        GroupAudit([0, 1], [0, 1], ["a", "b"]).two_group(reference="z")
    with pytest.raises(ValueError, match=re.escape(NO_OTHER_GROUP.format(
            name="privileged group", group="a"))):
        GroupAudit([0, 1], [0, 1], ["a", "a"]).two_group(reference="a")


def test_class_balance_matches_group_means(data: tuple[np.ndarray, np.ndarray, pd.Series]) -> None:
    y, score, group = data
    table = GroupAudit(y, score, group, reference={"g": "b"}, n_bootstrap=50).class_balance()
    for g in ("a", "b", "c"):
        m = (group == g).to_numpy()
        assert table.loc[("g", g), "balance_positive"] == pytest.approx(score[m & (y == 1)].mean())
        assert table.loc[("g", g), "balance_negative"] == pytest.approx(score[m & (y == 0)].mean())
    ref = score[(group == "b").to_numpy() & (y == 1)].mean()
    c_pos = score[(group == "c").to_numpy() & (y == 1)].mean()
    assert table.loc[("g", "c"), "balance_positive_difference"] == pytest.approx(c_pos - ref)
    assert table.loc[("g", "b"), "balance_negative_difference"] == 0.0
    lo, hi = table["balance_positive_lower"], table["balance_positive_upper"]
    assert ((lo <= table["balance_positive"]) & (table["balance_positive"] <= hi)).all()


def test_class_balance_group_without_negatives_is_nan() -> None:
    table = GroupAudit(
        [1, 1, 0, 1], [0.9, 0.8, 0.1, 0.7], pd.Series(list("aabb"), name="g"),
    ).class_balance()
    assert np.isnan(table.loc[("g", "a"), "balance_negative"])
    assert table.loc[("g", "b"), "balance_negative"] == pytest.approx(0.1)


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def test_normalized_conditional_mi_against_direct_formula() -> None:
    rng = np.random.default_rng(shifted(2))
    n = 4000
    z = rng.integers(0, 3, n)
    s = (rng.random(n) < 0.3 + 0.2 * z).astype(int)
    o = (rng.random(n) < 0.2 + 0.3 * s * (z == 1)).astype(int)
    cmi = h_s = h_o = 0.0
    for level in range(3):
        m = z == level
        joint = np.array([[np.mean((s[m] == i) & (o[m] == j)) for j in (0, 1)] for i in (0, 1)])
        ps, po = joint.sum(axis=1), joint.sum(axis=0)
        w = m.mean()
        cmi += w * (_entropy(ps) + _entropy(po) - _entropy(joint.ravel()))
        h_s += w * _entropy(ps)
        h_o += w * _entropy(po)
    value = normalized_conditional_mutual_information(s, o, z)
    assert value == pytest.approx(cmi / min(h_s, h_o))
    assert 0 < value < 1
    constant = np.zeros(n, dtype=int)
    assert np.isnan(normalized_conditional_mutual_information(s, constant, z))


def test_kl_divergence_per_outcome_terms() -> None:
    rng = np.random.default_rng(shifted(4))
    s = rng.choice(["x", "y"], 2000)
    o = np.where(s == "x", rng.choice(["lo", "mid", "hi"], 2000, p=[0.2, 0.3, 0.5]),
                 rng.choice(["lo", "mid", "hi"], 2000, p=[0.5, 0.3, 0.2]))
    kl = kl_divergence(s, o, protected_group="x")
    for value in ("lo", "mid", "hi"):
        p = np.mean(o[s == "x"] == value)
        q = np.mean(o[s == "y"] == value)
        assert kl[value] == pytest.approx(p * np.log(p / q))
    assert kl["total"] == pytest.approx(kl.drop("total").sum())
    assert kl["total"] > 0
    same = kl_divergence(["x", "y", "x", "y"], [0, 0, 1, 1], protected_group="x")
    assert same["total"] == 0.0
