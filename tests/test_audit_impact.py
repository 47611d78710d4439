"""Tests of counterfair.audit.impact (disparate impact in percent)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from _seeds import shifted

from counterfair.audit import GroupAudit
from counterfair.audit._validation import (
    BAD_CHOICE,
    GROUP_NOT_FOUND,
    LENGTH_MISMATCH,
    NO_OTHER_GROUP,
)
from counterfair.audit.group_audit import Classification
from counterfair.audit.impact import DisparateImpact

Data = tuple[np.ndarray, np.ndarray]


@pytest.fixture
def data() -> Data:
    rng = np.random.default_rng(shifted(11))
    group = rng.choice(["a", "b", "c"], size=900, p=[0.2, 0.5, 0.3])
    decisions = (rng.random(900) < np.where(group == "a", 0.3, 0.5)).astype(int)
    return decisions, group


def test_ratio_matches_manual_rates(data: Data) -> None:
    decisions, group = data
    result = GroupAudit(None, decisions, group).disparate_impact("a", reference="c")
    rate_a = decisions[group == "a"].mean()
    rate_c = decisions[group == "c"].mean()
    assert result.protected_rate == pytest.approx(rate_a)
    assert result.reference_rate == pytest.approx(rate_c)
    assert result.ratio_percent == pytest.approx(100 * rate_a / rate_c)
    assert result.flagged is bool(100 * rate_a / rate_c <= 80)


def test_default_reference_is_first_other_group_in_order(data: Data) -> None:
    decisions, group = data
    assert GroupAudit(None, decisions, group).disparate_impact("a").reference == "b"
    assert GroupAudit(None, decisions, group).disparate_impact("b").reference == "a"


def test_favourable_zero_uses_the_complement(data: Data) -> None:
    decisions, group = data
    result = GroupAudit(None, decisions, group).disparate_impact("a", favourable=0)
    assert result.protected_rate == pytest.approx(1 - decisions[group == "a"].mean())


def test_flag_flips_at_threshold(data: Data) -> None:
    decisions, group = data
    # rates 0.4 and 0.5: a ratio of exactly 80 %, and 100 * 0.8 is exactly 80
    decisions = np.array([1, 1, 0, 0, 0] + [1] * 5 + [0] * 5)
    group = np.array(["a"] * 5 + ["b"] * 10)
    assert GroupAudit(None, decisions, group).disparate_impact("a").ratio_percent == 80.0

    def flagged_at(tau: float) -> DisparateImpact:
        return GroupAudit(
            None, decisions, group, task=Classification(tau=tau),
        ).disparate_impact("a")

    below, at, above = flagged_at(0.8 + 1e-6), flagged_at(0.8), flagged_at(0.8 - 1e-6)
    assert below.flagged is True
    assert at.flagged is True  # a ratio equal to the threshold is already disparate impact
    assert above.flagged is False


def test_exactly_four_fifths_is_flagged() -> None:
    # monitored rate 0.4, reference rate 0.5: ratio exactly 80 %
    decisions = [1] * 4 + [0] * 6 + [1] * 5 + [0] * 5
    group = ["m"] * 10 + ["r"] * 10
    result = GroupAudit(None, decisions, group).disparate_impact("m", reference="r")
    assert result.ratio_percent == pytest.approx(80.0)
    assert result.flagged is True


def test_undefined_ratio_is_not_flagged() -> None:
    result = GroupAudit(None, [1, 0, 0, 0], ["a", "a", "b", "b"]).disparate_impact("a")
    assert np.isnan(result.ratio_percent)
    assert result.flagged is None


def test_bootstrap_interval(data: Data) -> None:
    decisions, group = data
    one = GroupAudit(None, decisions, group, n_bootstrap=200, seed=shifted(1)).disparate_impact("a")
    two = GroupAudit(None, decisions, group, n_bootstrap=200, seed=shifted(1)).disparate_impact("a")
    assert one.ci_lower == two.ci_lower and one.ci_upper == two.ci_upper
    assert one.ci_lower < one.ratio_percent < one.ci_upper
    series = one.to_series()
    assert series["ratio_percent"] == one.ratio_percent


def test_errors(data: Data) -> None:
    decisions, group = data
    with pytest.raises(ValueError, match=re.escape(GROUP_NOT_FOUND.format(
            name="protected group", group="z", where="protected",
            available="['a', 'b', 'c']"))):
        GroupAudit(None, decisions, group).disparate_impact("z")
    with pytest.raises(ValueError, match=re.escape(GROUP_NOT_FOUND.format(
            name="reference group", group="q", where="protected",
            available="['a', 'b', 'c']"))):
        GroupAudit(None, decisions, group).disparate_impact("a", reference="q")
    with pytest.raises(ValueError, match=re.escape(LENGTH_MISMATCH.format(
            name="protected", length=899, other_name="y_pred", other_length=900))):
        GroupAudit(None, decisions, group[:-1]).disparate_impact("a")
    # scores are decisions at the task's threshold, as in every decision measure
    scored = GroupAudit(None, [0.2, 0.9, 0.5], ["a", "b", "b"]).disparate_impact("b")
    assert scored.protected_rate == 1.0 and scored.reference_rate == 0.0
    with pytest.raises(ValueError, match=re.escape(NO_OTHER_GROUP.format(
            name="protected group", group="a"))):
        GroupAudit(None, [0, 1], ["a", "a"]).disparate_impact("a")
    with pytest.raises(ValueError, match=re.escape(BAD_CHOICE.format(
            name="favourable", choices=[0, 1], value=2))):
        GroupAudit(None, decisions, group).disparate_impact("a", favourable=2)
