"""Tests of the individual measures: flip counterfactual, consistency, generalized entropy."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted

from counterfair.audit import consistency, flip_counterfactual, generalized_entropy_index
from counterfair.audit._validation import BAD_CHOICE, GROUP_NOT_FOUND, NOT_A_COLUMN, OUT_OF_RANGE
from counterfair.audit.individual import consistency_interval


@pytest.fixture
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(shifted(8))
    n = 400
    return pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n),
                         "a": rng.integers(0, 2, n)})


def _model(frame: pd.DataFrame) -> np.ndarray:
    """A fixed scoring rule that rewards a = 1."""
    z = frame["x1"].to_numpy() + 0.8 * frame["a"].to_numpy() - 0.3
    return 1.0 / (1.0 + np.exp(-z))


def test_flip_counterfactual_matches_manual_flip(frame: pd.DataFrame) -> None:
    report = flip_counterfactual(_model, frame, attribute="a", privileged=1, unprivileged=0,
                                 n_bootstrap=200, seed=shifted(1))
    priv = frame[frame["a"] == 1]
    z = priv["x1"].to_numpy() - 0.3
    expected = 1 / (1 + np.exp(-z)) - 1 / (1 + np.exp(-(z + 0.8)))
    np.testing.assert_allclose(report.per_row.to_numpy(), expected)
    assert list(report.per_row.index) == list(priv.index)
    assert report.mean == pytest.approx(expected.mean())
    assert report.mean < 0  # favours the privileged group
    assert report.lower < report.mean < report.upper
    assert report.n_privileged == len(priv) and report.changed == len(priv)


def test_flip_counterfactual_of_blind_model_is_zero(frame: pd.DataFrame) -> None:
    def blind(f: pd.DataFrame) -> np.ndarray:
        return (f["x1"].to_numpy() > 0).astype(float)

    report = flip_counterfactual(blind, frame, attribute="a", privileged=1, unprivileged=0)
    assert report.mean == 0.0 and report.changed == 0
    assert np.isnan(report.lower)


def test_flip_counterfactual_decisions_count_flips(frame: pd.DataFrame) -> None:
    def decide(f: pd.DataFrame) -> np.ndarray:
        return (_model(f) >= 0.5).astype(float)

    report = flip_counterfactual(decide, frame, attribute="a", privileged=1, unprivileged=0)
    priv = frame[frame["a"] == 1]
    z = priv["x1"].to_numpy() - 0.3
    flips = ((z >= 0) != (z + 0.8 >= 0)).sum()
    assert report.changed == flips
    assert report.mean == pytest.approx(-flips / len(priv))


def test_flip_errors(frame: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match=re.escape(NOT_A_COLUMN.format(
            name="sensitive column", column="sex", where="X", available="['x1', 'x2', 'a']"))):
        flip_counterfactual(_model, frame, attribute="sex", privileged=1, unprivileged=0)
    with pytest.raises(ValueError, match=re.escape(GROUP_NOT_FOUND.format(
            name="privileged group", group=7, where="X['a']", available="['0', '1']"))):
        flip_counterfactual(_model, frame, attribute="a", privileged=7, unprivileged=0)


def _brute_consistency(values: np.ndarray, pred: np.ndarray, k: int) -> float:
    dist = ((values[:, None, :] - values[None, :, :]) ** 2).sum(axis=2)
    np.fill_diagonal(dist, np.inf)
    nearest = np.argsort(dist, axis=1, kind="stable")[:, :k]
    return float(1 - np.abs(pred - pred[nearest].mean(axis=1)).mean())


def test_consistency_against_brute_force(frame: pd.DataFrame) -> None:
    pred = (frame["x1"] + 0.5 * frame["a"] > 0).astype(int).to_numpy()
    value = consistency(frame, pred, exclude=["a"], n_neighbors=5, standardize=False)
    expected = _brute_consistency(frame[["x1", "x2"]].to_numpy(), pred, 5)
    assert value == pytest.approx(expected)
    scaled = frame[["x1", "x2"]].to_numpy()
    scaled = (scaled - scaled.mean(axis=0)) / scaled.std(axis=0)
    assert consistency(frame, pred, exclude=["a"]) == pytest.approx(
        _brute_consistency(scaled, pred, 5))


def test_consistency_interval_is_seeded_covers_the_value_and_shrinks_with_n() -> None:
    rng = np.random.default_rng(shifted(4))

    def sample(n: int) -> tuple[pd.DataFrame, np.ndarray]:
        X = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n)})
        noisy = X["x1"] + rng.normal(scale=1.0, size=n) > 0  # neighbours often disagree
        return X, noisy.astype(int).to_numpy()

    X, pred = sample(300)
    value = consistency(X, pred)
    lower, upper = consistency_interval(X, pred, n_bootstrap=400, seed=shifted(1))
    assert lower < value < upper
    assert (lower, upper) == consistency_interval(X, pred, n_bootstrap=400, seed=shifted(1))
    big_X, big_pred = sample(3000)
    big_lower, big_upper = consistency_interval(big_X, big_pred, n_bootstrap=400, seed=shifted(1))
    assert big_upper - big_lower < 0.6 * (upper - lower)  # about 1 / sqrt(10)
    # identical decisions: a degenerate interval at 1
    assert consistency_interval(X, np.ones(len(X)), n_bootstrap=50) == (1.0, 1.0)
    with pytest.raises(ValueError, match="n_bootstrap must be at least 1"):
        consistency_interval(X, pred, n_bootstrap=0)


def test_consistency_corner_cases(frame: pd.DataFrame) -> None:
    assert consistency(frame, np.ones(len(frame)), exclude=["a"]) == 1.0
    # two far-apart clusters with opposite decisions: perfectly consistent
    X = pd.DataFrame({"x": [0.0, 0.1, 0.2, 10.0, 10.1, 10.2]})
    assert consistency(X, [0, 0, 0, 1, 1, 1], n_neighbors=2) == 1.0
    # alternating decisions on a line with k = 1 neighbours: every neighbour disagrees
    line = pd.DataFrame({"x": [0.0, 1.0, 3.0, 6.0]})
    assert consistency(line, [0, 1, 0, 1], n_neighbors=1) == 0.0
    with pytest.raises(ValueError, match=re.escape(OUT_OF_RANGE.format(
            name="n_neighbors", low=1, high=3, value=4))):
        consistency(line, [0, 1, 0, 1], n_neighbors=4)


def _ge_direct(b: np.ndarray, alpha: float) -> float:
    mu = b.mean()
    return float(np.sum((b / mu) ** alpha - 1) / (b.size * alpha * (alpha - 1)))


@pytest.mark.parametrize("alpha", [2.0, 3.0, 0.5, -1.0])
def test_gei_matches_formula_and_decomposes(alpha: float) -> None:
    rng = np.random.default_rng(int(10 * alpha) + 50)
    n = 900
    y = rng.integers(0, 2, n)
    pred = rng.integers(0, 2, n)
    if alpha < 0:
        pred = np.where(y == 1, 1, pred)  # no zero benefits
    group = rng.choice(["p", "q", "r"], n)
    index = generalized_entropy_index(y, pred, protected=group, alpha=alpha)
    b = pred - y + 1.0
    assert index.total == pytest.approx(_ge_direct(b, alpha))
    assert index.between + index.within == pytest.approx(index.total)
    means = {g: b[group == g].mean() for g in ("p", "q", "r")}
    smoothed = np.array([means[g] for g in group])
    assert index.between == pytest.approx(_ge_direct(smoothed, alpha))
    for g in ("p", "q", "r"):
        assert index.by_group.loc[g, "ge"] == pytest.approx(_ge_direct(b[group == g], alpha))


def test_gei_corner_cases() -> None:
    perfect = generalized_entropy_index([0, 1, 1, 0], [0, 1, 1, 0])
    assert perfect.total == 0.0 and perfect.between == 0.0
    # alpha = 2: GE = CV^2 / 2 of the benefits
    y = np.array([1, 0, 1, 0, 1])
    pred = np.array([0, 1, 1, 0, 1])
    b = pred - y + 1.0
    assert generalized_entropy_index(y, pred).total == pytest.approx(
        (b.std() / b.mean()) ** 2 / 2)
    # a group whose benefits are all 0 adds nothing within, and the sum still holds
    idx = generalized_entropy_index([1, 1, 0, 1], [0, 0, 1, 1], protected=["z", "z", "o", "o"])
    assert idx.by_group.loc["z", "within_contribution"] == 0.0
    assert idx.between + idx.within == pytest.approx(idx.total)
    for alpha in (0.0, 1.0):
        with pytest.raises(ValueError, match=re.escape(BAD_CHOICE.format(
                name="alpha", choices="any real except 0 and 1", value=alpha))):
            generalized_entropy_index([0, 1], [0, 1], alpha=alpha)
    with pytest.raises(ValueError, match="needs positive benefits"):
        generalized_entropy_index([1, 0], [0, 0], alpha=-1.0)


def test_gei_bootstrap_intervals_are_seeded_and_cover_the_estimate() -> None:
    rng = np.random.default_rng(shifted(77))
    y = rng.integers(0, 2, 1500)
    pred = rng.integers(0, 2, 1500)
    group = rng.choice(["p", "q"], 1500)
    one = generalized_entropy_index(y, pred, protected=group, n_bootstrap=100, seed=shifted(4))
    two = generalized_entropy_index(y, pred, protected=group, n_bootstrap=100, seed=shifted(4))
    assert one.ci is not None and two.ci is not None
    pd.testing.assert_frame_equal(one.ci, two.ci)
    assert one.ci.loc["total", "lower"] < one.total < one.ci.loc["total", "upper"]
    assert one.ci.loc["within", "lower"] < one.within < one.ci.loc["within", "upper"]
    assert generalized_entropy_index(y, pred).ci is None
