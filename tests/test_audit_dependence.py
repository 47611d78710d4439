"""Tests of counterfair.audit.dependence against sklearn / scipy / pandas."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted
from scipy.stats import chi2_contingency
from scipy.stats import entropy as scipy_entropy
from sklearn.metrics import mutual_info_score

from counterfair.audit import dependence_measures
from counterfair.audit._validation import (
    BAD_CHOICE,
    GROUP_NOT_FOUND,
    LENGTH_MISMATCH,
    NO_OTHER_GROUP,
    VALUE_NOT_FOUND,
)
from counterfair.audit.dependence import (
    DependenceReport,
    GTest,
    conditional_mutual_information,
    contingency_table,
    g_test,
    mutual_information,
    normalized_mutual_information,
    selection_difference,
    selection_lift,
    total_variation_distance,
)

Data = tuple[np.ndarray, np.ndarray, np.ndarray]


@pytest.fixture
def data() -> Data:
    rng = np.random.default_rng(shifted(5))
    n = 1200
    s = rng.choice(["x", "y", "z"], size=n, p=[0.3, 0.5, 0.2])
    z = rng.integers(0, 3, size=n)
    p = np.where(s == "x", 0.25, 0.45) + 0.1 * z
    o = np.where(rng.random(n) < p, "deny", "grant")
    o[rng.random(n) < 0.1] = "defer"
    return s, o, z


def test_mutual_information_matches_sklearn(data: Data) -> None:
    s, o, _ = data
    assert mutual_information(s, o) == pytest.approx(mutual_info_score(s, o), rel=1e-12)


def test_normalised_mutual_information(data: Data) -> None:
    s, o, _ = data
    h_s = scipy_entropy(pd.Series(s).value_counts().to_numpy())
    h_o = scipy_entropy(pd.Series(o).value_counts().to_numpy())
    expected = mutual_info_score(s, o) / min(h_s, h_o)
    assert normalized_mutual_information(s, o) == pytest.approx(expected)
    assert np.isnan(normalized_mutual_information(s, np.ones(s.size)))


def test_g_statistic_is_two_n_mi_and_matches_scipy(data: Data) -> None:
    s, o, _ = data
    table = contingency_table(s, o).to_numpy()
    expected = chi2_contingency(table, correction=False, lambda_="log-likelihood")
    result = g_test(s, o)
    assert isinstance(result, GTest)
    assert result.statistic == pytest.approx(2 * s.size * mutual_information(s, o))
    assert result.statistic == pytest.approx(expected.statistic)
    assert result.dof == expected.dof == 4
    assert result.p_value == pytest.approx(expected.pvalue)


def test_conditional_mutual_information_by_entropy_decomposition(data: Data) -> None:
    s, o, z = data
    frame = pd.DataFrame({"s": s, "o": o, "z": z})

    def h(*cols: str) -> float:
        return float(scipy_entropy(frame.groupby(list(cols)).size().to_numpy()))

    expected = h("s", "z") + h("o", "z") - h("s", "o", "z") - h("z")
    assert conditional_mutual_information(s, o, z) == pytest.approx(expected)


def test_conditional_g_test_sums_strata(data: Data) -> None:
    s, o, z = data
    stat = 0.0
    dof = 0
    for value in np.unique(z):
        mask = z == value
        res = chi2_contingency(pd.crosstab(s[mask], o[mask]).to_numpy(), correction=False,
                               lambda_="log-likelihood")
        stat += res.statistic
        dof += res.dof
    result = g_test(s, o, given=z)
    assert result.statistic == pytest.approx(stat)
    assert result.statistic == pytest.approx(
        2 * s.size * conditional_mutual_information(s, o, z))
    assert result.dof == dof


def test_lift_difference_and_tvd_match_crosstab(data: Data) -> None:
    s, o, _ = data
    cond = pd.crosstab(s == "x", o, normalize="index")
    plus, minus = cond.loc[True], cond.loc[False]
    assert selection_lift(s, o, protected_group="x", outcome_value="deny") == pytest.approx(
        plus["deny"] / minus["deny"])
    assert selection_difference(s, o, protected_group="x", outcome_value="deny") == (
        pytest.approx(plus["deny"] - minus["deny"]))
    assert total_variation_distance(s, o, protected_group="x") == pytest.approx(
        0.5 * (plus - minus).abs().sum())


def test_binary_tvd_equals_absolute_difference() -> None:
    rng = np.random.default_rng(shifted(0))
    s = rng.integers(0, 2, 400)
    o = (rng.random(400) < 0.3 + 0.2 * s).astype(int)
    tvd = total_variation_distance(s, o, protected_group=1)
    assert tvd == pytest.approx(abs(selection_difference(s, o, protected_group=1)))


def test_independent_data_gives_small_mi_and_large_p() -> None:
    rng = np.random.default_rng(shifted(123))
    s = rng.integers(0, 2, 2000)
    o = rng.integers(0, 2, 2000)
    assert g_test(s, o).p_value > 0.01
    assert selection_lift(s, o, protected_group=1) == pytest.approx(1.0, abs=0.15)


def test_dependence_measures_table_and_bootstrap(data: Data) -> None:
    s, o, z = data
    report = dependence_measures(s, o, protected_group="x", outcome_value="deny", given=z,
                                 n_bootstrap=100, seed=shifted(2))
    table = report.table
    assert list(table.index) == ["lift", "difference", "tvd", "mi", "nmi", "cmi"]
    assert table.loc["lift", "estimate"] == pytest.approx(
        selection_lift(s, o, protected_group="x", outcome_value="deny"))
    assert table.loc["mi", "estimate"] == pytest.approx(mutual_information(s, o))
    assert table.loc["cmi", "estimate"] == pytest.approx(
        conditional_mutual_information(s, o, z))
    assert report.g_test == g_test(s, o, given=z)
    assert (table["lower"] <= table["upper"]).all()
    assert table.loc["lift", "lower"] <= table.loc["lift", "estimate"] <= table.loc["lift",
                                                                                     "upper"]
    again = dependence_measures(s, o, protected_group="x", outcome_value="deny", given=z,
                                n_bootstrap=100, seed=shifted(2))
    pd.testing.assert_frame_equal(report.table, again.table)
    plain = dependence_measures(s, o, protected_group="x", outcome_value="deny", n_bootstrap=0)
    assert "cmi" not in plain.table.index
    assert plain.table["lower"].isna().all()
    assert plain.verdict("lift", 1.0) == "inconclusive"


def _report(lower: float, upper: float) -> DependenceReport:
    table = pd.DataFrame({"estimate": [(lower + upper) / 2], "lower": [lower],
                          "upper": [upper]}, index=pd.Index(["lift"], name="measure"))
    return DependenceReport(table=table, g_test=GTest(0.0, 1, 1.0), protected_group=1,
                            outcome_value=1, interval=0.95, n_bootstrap=100)


def test_verdicts_need_the_interval_to_clear_beta() -> None:
    assert _report(1.3, 1.6).verdict("lift", 1.25) == "discriminatory"
    assert _report(1.25, 1.6).verdict("lift", 1.25) == "discriminatory"
    assert _report(1.2, 1.6).verdict("lift", 1.25) == "inconclusive"
    assert _report(0.9, 1.2).verdict("lift", 1.25) == "protective"
    assert _report(0.9, 1.25).verdict("lift", 1.25) == "inconclusive"
    verdicts = _report(1.3, 1.6).verdicts({"lift": 1.25})
    assert verdicts["lift"] == "discriminatory"
    with pytest.raises(ValueError, match=re.escape(BAD_CHOICE.format(
            name="measure", choices=["lift"], value="odds"))):
        _report(1.0, 2.0).verdict("odds", 1.0)


def test_errors(data: Data) -> None:
    s, o, _ = data
    with pytest.raises(ValueError, match=re.escape(GROUP_NOT_FOUND.format(
            name="protected_group", group="w", where="protected",
            available="['x', 'y', 'z']"))):
        selection_lift(s, o, protected_group="w", outcome_value="deny")
    with pytest.raises(ValueError, match=re.escape(VALUE_NOT_FOUND.format(
            name="outcome_value", value="maybe", where="outcome",
            available="['defer', 'deny', 'grant']"))):
        dependence_measures(s, o, protected_group="x", outcome_value="maybe")
    with pytest.raises(ValueError, match=re.escape(NO_OTHER_GROUP.format(
            name="protected_group", group="x"))):
        total_variation_distance(["x", "x"], [0, 1], protected_group="x")
    with pytest.raises(ValueError, match=re.escape(LENGTH_MISMATCH.format(
            name="outcome", length=3, other_name="protected", other_length=2))):
        mutual_information([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match=re.escape(LENGTH_MISMATCH.format(
            name="given", length=2, other_name="protected", other_length=s.size))):
        conditional_mutual_information(s, o, [0, 1])
