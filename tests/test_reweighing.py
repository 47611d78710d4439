"""Tests of reweighing and parametrised undersampling (counterfair.learn.reweighing)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from _seeds import shifted

from counterfair.learn.reweighing import (
    GROUP_NOT_FOUND,
    NO_POSITIVES,
    OUT_OF_RANGE,
    reweighing_weights,
    undersample,
    undersampling_targets,
)


@pytest.fixture
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(shifted(12))
    n = 5000
    a = rng.choice(["M", "F"], n, p=[0.65, 0.35])
    y = (rng.random(n) < np.where(a == "M", 0.32, 0.12)).astype(int)
    return a, y


def test_reweighing_makes_a_and_y_independent(data: tuple[np.ndarray, np.ndarray]) -> None:
    a, y = data
    w = reweighing_weights(a, y).to_numpy()
    assert w.sum() == pytest.approx(a.size)
    total = w.sum()
    for group in ("M", "F"):
        for label in (0, 1):
            joint = w[(a == group) & (y == label)].sum() / total
            marginal = (w[a == group].sum() / total) * (w[y == label].sum() / total)
            assert joint == pytest.approx(marginal)
    # the weighted positive rate is the same in both groups: the overall rate
    rate = {g: np.average(y[a == g], weights=w[a == g]) for g in ("M", "F")}
    assert rate["M"] == pytest.approx(rate["F"]) == pytest.approx(y.mean())
    # explicit formula for one cell
    cell = (a == "F") & (y == 1)
    assert w[cell][0] == pytest.approx((a == "F").mean() * (y == 1).mean() / cell.mean())


def test_reweighing_multi_valued_attribute() -> None:
    rng = np.random.default_rng(shifted(1))
    a = rng.choice(["x", "y", "z"], 600)
    y = rng.choice(["lo", "mid", "hi"], 600)
    w = reweighing_weights(a, y).to_numpy()
    for g in ("x", "y", "z"):
        for v in ("lo", "mid", "hi"):
            assert w[(a == g) & (y == v)].sum() / 600 == pytest.approx(
                (w[a == g].sum() / 600) * (w[y == v].sum() / 600))


def test_target_formulas_at_the_corner_values() -> None:
    f, u = undersampling_targets(0.4, 0.1, 0.3, 1.0)
    assert (f, u) == pytest.approx((0.4, 0.1))
    f, u = undersampling_targets(0.4, 0.1, 0.3, 0.0)
    assert (f, u) == pytest.approx((0.3, 0.3))
    f, u = undersampling_targets(0.4, 0.1, 0.3, -1.0)
    assert (f, u) == pytest.approx((0.1, 0.4))
    a, b, c = (0.4 + 0.1) / 2 - 0.3, (0.4 - 0.1) / 2, 0.3
    f, u = undersampling_targets(0.4, 0.1, 0.3, 0.5)
    assert (f, u) == pytest.approx((a * 0.25 + b * 0.5 + c, a * 0.25 - b * 0.5 + c))
    with pytest.raises(ValueError, match=re.escape(OUT_OF_RANGE.format(name="d", low=-1,
                                                                       high=1, value=1.5))):
        undersampling_targets(0.4, 0.1, 0.3, 1.5)


def _rates(a: np.ndarray, y: np.ndarray, rows: np.ndarray) -> tuple[float, float]:
    return float(y[rows][a[rows] == "M"].mean()), float(y[rows][a[rows] == "F"].mean())


def test_d_one_leaves_the_data_unchanged(data: tuple[np.ndarray, np.ndarray]) -> None:
    a, y = data
    rows, plan = undersample(a, y, reference="M", d=1.0)
    np.testing.assert_array_equal(rows, np.arange(a.size))
    assert plan.target_reference == pytest.approx(plan.rate_reference)
    assert plan.target_other == pytest.approx(plan.rate_other)


def test_d_zero_equalises_and_minus_one_reverses(data: tuple[np.ndarray, np.ndarray]) -> None:
    a, y = data
    before = _rates(a, y, np.arange(a.size))
    rows, plan = undersample(a, y, reference="M", d=0.0, seed=shifted(3))
    after = _rates(a, y, rows)
    assert after[0] == pytest.approx(y.mean(), abs=2e-3)
    assert after[1] == pytest.approx(y.mean(), abs=2e-3)
    assert plan.rate_overall == pytest.approx(y.mean())
    assert np.unique(rows).size == rows.size  # no duplicates
    rows_r, _ = undersample(a, y, reference="M", d=-1.0, seed=shifted(3))
    reversed_rates = _rates(a, y, rows_r)
    assert reversed_rates[0] == pytest.approx(before[1], abs=2e-3)
    assert reversed_rates[1] == pytest.approx(before[0], abs=2e-3)
    again, _ = undersample(a, y, reference="M", d=-1.0, seed=shifted(3))
    np.testing.assert_array_equal(rows_r, again)


def test_undersampling_cannot_raise_a_rate_without_positives() -> None:
    a = np.array(["M"] * 6 + ["F"] * 4)
    y = np.array([1, 1, 1, 0, 0, 0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match=re.escape(NO_POSITIVES.format(
            group="not M", attribute="attribute", label="positive", target=0.3))):
        undersample(a, y, reference="M", d=0.0)


def test_extreme_rates_give_targets_inside_the_unit_interval() -> None:
    # PR_F = 0.95, PR_U = 0.05, small reference group: f(d) dips below 0 near d = -0.6
    a = np.array(["M"] * 20 + ["F"] * 200)
    y = np.array([1] * 19 + [0] + [1] * 10 + [0] * 190)
    f, _ = undersampling_targets(0.95, 0.05, 29 / 220, -0.6)
    assert f < 0
    rows, plan = undersample(a, y, reference="M", d=-0.6)
    assert plan.target_reference == 0.0
    assert y[rows][a[rows] == "M"].tolist() == [0]  # only the negative is kept


def test_the_reference_group_must_be_there_and_not_alone() -> None:
    a = np.array(["M"] * 6 + ["F"] * 4)
    y = np.array([1, 0, 1, 0, 1, 0, 1, 0, 1, 0])
    with pytest.raises(ValueError, match=re.escape(GROUP_NOT_FOUND.format(
            name="reference group", group="X", where="attribute", available="['F', 'M']"))):
        undersample(a, y, reference="X", d=0.0)
    with pytest.raises(ValueError, match="every individual belongs to reference group 'M'"):
        undersample(np.array(["M"] * 10), y, reference="M", d=0.0)
    with pytest.raises(ValueError, match="y_true has length 3 but attribute has length 10"):
        reweighing_weights(a, y[:3])
