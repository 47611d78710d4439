"""Tests of counterfair.audit.slices (two-slice comparisons)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from _seeds import shifted
from sklearn.metrics import confusion_matrix

from counterfair.audit import compare_slices
from counterfair.audit._validation import EMPTY_SLICE, NEGATIVE_COUNT, NOT_BINARY
from counterfair.audit.slices import SLICE_MEASURES, ConfusionCounts

G1 = ConfusionCounts(tp=50, fn=10, fp=20, tn=120)
G2 = ConfusionCounts(tp=20, fn=0, fp=30, tn=50)


def test_worked_example_from_the_issue() -> None:
    result = compare_slices(G1, G2)
    assert list(result.index) == list(SLICE_MEASURES)
    assert result.round(2).tolist() == [0.15, -0.15, -0.17, 0.23, 0.5]
    # the exact values behind the rounded ones (sign convention: g1 - g2)
    np.testing.assert_allclose(
        result.to_numpy(),
        [170 / 200 - 70 / 100, 70 / 200 - 50 / 100, 50 / 60 - 1.0, 120 / 140 - 50 / 80, 0.5],
    )


def test_swapping_slices_flips_the_sign() -> None:
    pd_result = compare_slices(G2, G1)
    np.testing.assert_allclose(pd_result.to_numpy(), -compare_slices(G1, G2).to_numpy())


def test_slice_rates() -> None:
    assert G1.n == 200
    assert G1.accuracy == pytest.approx(0.85)
    assert G1.positive_proportion == pytest.approx(0.35)
    assert G1.recall == pytest.approx(50 / 60)
    assert G1.specificity == pytest.approx(120 / 140)
    assert G1.error_type_ratio == pytest.approx(0.5)
    assert G2.error_type_ratio == 0.0


def test_undefined_ratio_is_nan_without_warning() -> None:
    no_fp = ConfusionCounts(tp=5, fn=2, fp=0, tn=3)
    assert np.isnan(no_fp.error_type_ratio)
    assert np.isnan(compare_slices(no_fp, G1)["error_type_ratio_difference"])
    only_negatives = ConfusionCounts(tp=0, fn=0, fp=1, tn=3)
    assert np.isnan(only_negatives.recall)


def test_from_labels_matches_sklearn() -> None:
    rng = np.random.default_rng(shifted(7))
    y = rng.integers(0, 2, 300)
    scores = rng.random(300)
    counts = ConfusionCounts.from_labels(y, scores, threshold=0.3)
    tn, fp, fn, tp = confusion_matrix(y, (scores >= 0.3).astype(int)).ravel()
    assert (counts.tp, counts.fn, counts.fp, counts.tn) == (tp, fn, fp, tn)


def test_bad_counts_and_empty_slices() -> None:
    with pytest.raises(ValueError, match=re.escape(NEGATIVE_COUNT.format(name="fn", value=-1))):
        ConfusionCounts(tp=1, fn=-1, fp=0, tn=0)
    with pytest.raises(ValueError, match=re.escape(NEGATIVE_COUNT.format(name="tp", value=1.5))):
        ConfusionCounts(tp=1.5, fn=1, fp=0, tn=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape(EMPTY_SLICE.format(name="g2"))):
        compare_slices(G1, ConfusionCounts(0, 0, 0, 0))
    with pytest.raises(ValueError, match=re.escape(NOT_BINARY.format(name="y_true",
                                                                     values="[2]"))):
        ConfusionCounts.from_labels([0, 1, 2], [0, 1, 1])
