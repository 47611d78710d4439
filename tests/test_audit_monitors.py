"""Tests of monitor-style groups (values / ranges), several favourable labels and the
perturbation check without an SCM."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted

from counterfair.audit import GroupSpec, monitor_disparate_impact, perturbation_check
from counterfair.audit._validation import NOT_A_COLUMN


@pytest.fixture
def payload() -> pd.DataFrame:
    rng = np.random.default_rng(shifted(9))
    n = 1000
    return pd.DataFrame({"age": rng.integers(18, 90, n),
                         "sex": rng.choice(["F", "M", "X"], n, p=[0.45, 0.5, 0.05]),
                         "income": rng.normal(50, 10, n)})


def test_membership_with_ranges_and_rest(payload: pd.DataFrame) -> None:
    spec = GroupSpec(feature="age", monitored_ranges=((18, 25),), reference_ranges=((26, 100),))
    groups = spec.membership(payload["age"])
    assert (groups == "monitored").tolist() == payload["age"].between(18, 25).tolist()
    assert (groups == "reference").tolist() == payload["age"].between(26, 100).tolist()
    rest = GroupSpec(feature="sex", monitored_values=("F", "X"))
    assert rest.reference_is_rest
    groups = rest.membership(payload["sex"])
    assert (groups == "reference").tolist() == (payload["sex"] == "M").tolist()
    partial = GroupSpec(feature="sex", monitored_values=("F",), reference_values=("M",))
    assert partial.membership(payload["sex"])[payload["sex"] == "X"].isna().all()


def test_membership_errors() -> None:
    with pytest.raises(ValueError, match="needs values or ranges"):
        GroupSpec(feature="age")
    with pytest.raises(ValueError, match="lower end above its upper end"):
        GroupSpec(feature="age", monitored_ranges=((30, 20),))
    overlap = GroupSpec(feature="age", monitored_ranges=((18, 30),),
                        reference_ranges=((30, 60),))
    with pytest.raises(ValueError, match=re.escape("1 row(s) of 'age' fall in both")):
        overlap.membership([20, 30, 40])


def test_disparate_impact_with_several_favourable_labels(payload: pd.DataFrame) -> None:
    rng = np.random.default_rng(shifted(1))
    decisions = rng.choice(["approved", "partial", "denied"], len(payload))
    spec = GroupSpec(feature="age", monitored_ranges=((18, 25),), reference_ranges=((26, 100),))
    result = monitor_disparate_impact(decisions, payload["age"], spec,
                                      favourable=["approved", "partial"])
    fav = np.isin(decisions, ["approved", "partial"])
    young = payload["age"].between(18, 25).to_numpy()
    assert result.protected_rate == pytest.approx(fav[young].mean())
    assert result.reference_rate == pytest.approx(fav[~young].mean())
    assert result.ratio_percent == pytest.approx(100 * fav[young].mean() / fav[~young].mean())
    assert result.flagged is bool(result.ratio_percent <= 80)
    with pytest.raises(ValueError, match="favourable label"):
        monitor_disparate_impact(decisions, payload["age"], spec, favourable=["maybe"])


def _biased_model(frame: pd.DataFrame) -> np.ndarray:
    """Denies anyone under 26 whose income is below 55; otherwise approves above 45."""
    young = frame["age"].to_numpy() <= 25
    income = frame["income"].to_numpy()
    return np.where(young, np.where(income >= 55, "yes", "no"),
                    np.where(income >= 45, "yes", "no"))


def test_perturbation_check_flips_and_combined_impact(payload: pd.DataFrame) -> None:
    spec = GroupSpec(feature="age", monitored_ranges=((18, 25),), reference_ranges=((26, 100),))
    report = perturbation_check(_biased_model, payload, spec, favourable=["yes"], seed=shifted(2))
    young = payload["age"].between(18, 25).to_numpy()
    income = payload["income"].to_numpy()
    # monitored records swapped to a reference age decide with the 45 cut and vice versa
    expected_flips = (young & (income >= 45) & (income < 55)) | (
        ~young & (income >= 45) & (income < 55))
    assert set(report.flipped.index) == set(payload.index[expected_flips])
    assert report.n_perturbed == len(payload)
    assert (report.flipped["original_decision"] != report.flipped["perturbed_decision"]).all()
    perturbed_young = report.flipped["perturbed_value"].between(18, 25)
    assert (perturbed_young == ~report.flipped["original_value"].between(18, 25)).all()
    # combined disparate impact, computed by hand from payload + perturbed decisions
    original = _biased_model(payload) == "yes"
    swapped = payload.copy()
    swapped["age"] = np.where(young, 40, 20)  # any age in the other range gives the same rule
    after = _biased_model(swapped) == "yes"
    mon = np.concatenate([original[young], after[~young]])
    ref = np.concatenate([original[~young], after[young]])
    assert report.combined_impact.ratio_percent == pytest.approx(100 * mon.mean() / ref.mean())
    assert report.payload_impact.ratio_percent == pytest.approx(
        100 * original[young].mean() / original[~young].mean())
    assert report.payload_impact.flagged is True


def test_perturbation_check_of_a_blind_model_flips_nothing(payload: pd.DataFrame) -> None:
    def blind(frame: pd.DataFrame) -> np.ndarray:
        return np.where(frame["income"].to_numpy() > 50, 1, 0)

    spec = GroupSpec(feature="sex", monitored_values=("F",), reference_values=("M",))
    report = perturbation_check(blind, payload, spec, favourable=[1])
    assert report.flipped.empty
    assert report.n_perturbed == int(payload["sex"].isin(["F", "M"]).sum())
    with pytest.raises(ValueError, match=re.escape(NOT_A_COLUMN.format(
            name="feature", column="race", where="payload",
            available="['age', 'sex', 'income']"))):
        perturbation_check(blind, payload, GroupSpec(feature="race", monitored_values=("a",)),
                           favourable=[1])
