"""Streaming audit statistics against the whole-frame formulas (tools/mutation.py, streaming).

The Wasserstein sketch on hand-computed bins and against scipy within its stated
error bound, its independence of chunking and merge order, its minimal exponent; the
change statistics of a frame cut into chunks and merged against the same summary
computed from the whole frame at once.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted
from scipy import stats

from counterfair.audit import streaming as st


def exactly(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern for the whole message and nothing else."""
    return "^" + re.escape(message) + "$"



def test_sketch_bins_by_hand() -> None:
    sketch = st.HistogramSketch(bins=4)
    assert math.isnan(sketch.width) and math.isnan(sketch.wasserstein())
    sketch.update(np.array([0.0, 1.0]), np.array([2.0, 3.0]))
    assert sketch.exponent == 0 and sketch.width == 1.0 and sketch.error_bound == 1.0
    assert sketch.start == 0
    assert sketch.a.tolist() == [1, 1, 0, 0] and sketch.b.tolist() == [0, 0, 1, 1]
    assert sketch.wasserstein() == 2.0
    # a value beyond four bins: pairs of bins merge (exponent 1, width 2)
    sketch.update(np.array([]), np.array([7.5]))
    assert sketch.exponent == 1 and sketch.start == 0
    assert sketch.a.tolist() == [2, 0, 0, 0] and sketch.b.tolist() == [0, 2, 0, 1]
    assert sketch.wasserstein() == pytest.approx(2.0 * (1.0 + 1.0 / 3.0 + 1.0 / 3.0))
    # negative values: bins aligned on 0, floor towards minus infinity
    neg = st.HistogramSketch(bins=4)
    neg.update(np.array([-1.5, -0.25]), np.array([0.25]))
    assert neg.exponent == -1 and neg.start == -3
    assert neg.a.tolist() == [1, 0, 1, 0] and neg.b.tolist() == [0, 0, 0, 1]
    assert neg.wasserstein() == pytest.approx(0.5 * (0.5 + 0.5 + 1.0))


FINITE_ONLY = "the Wasserstein sketch takes finite values only"


def test_sketch_of_a_constant_and_of_one_empty_sample() -> None:
    sketch = st.HistogramSketch()
    sketch.update(np.full(5, 3.25), np.array([]))
    assert sketch.exponent == st.FINEST_EXPONENT
    assert sketch.width == 2.0**st.FINEST_EXPONENT
    assert sketch.a.sum() == 5 and sketch.b.sum() == 0
    assert math.isnan(sketch.wasserstein())
    sketch.update(np.array([]), np.array([]))  # nothing
    assert sketch.a.sum() == 5
    with pytest.raises(ValueError, match=exactly(FINITE_ONLY)):
        sketch.update(np.array([np.nan]), np.array([1.0]))
    with pytest.raises(ValueError, match=exactly(FINITE_ONLY)):
        sketch.update(np.array([1.0]), np.array([np.inf]))
    with pytest.raises(ValueError, match=exactly("cannot merge sketches of 4096 and 8 bins")):
        sketch.merge(st.HistogramSketch(bins=8))
    before = (sketch.exponent, sketch.start, sketch.a.tolist())
    sketch.merge(st.HistogramSketch())
    assert (sketch.exponent, sketch.start, sketch.a.tolist()) == before


def test_exponent_is_the_smallest_that_fits() -> None:
    sketch = st.HistogramSketch(bins=16)
    gen = np.random.default_rng(shifted(13))
    for _ in range(200):
        low = float(gen.normal() * 10.0 ** gen.integers(-3, 4))
        high = low + float(gen.exponential() * 10.0 ** gen.integers(-3, 4))
        k = sketch._exponent_for(low, high)
        assert sketch._fits(low, high, k)
        assert k == st.FINEST_EXPONENT or not sketch._fits(low, high, k - 1)
    assert sketch._exponent_for(2.0, 2.0) == st.FINEST_EXPONENT
    assert sketch._fits(0.0, 15.0, 0) and not sketch._fits(0.0, 16.0, 0)


@pytest.mark.parametrize("bins", [16, 256, st.SKETCH_BINS])
def test_sketch_distance_within_its_bound(bins: int) -> None:
    gen = np.random.default_rng(shifted(21))
    a = gen.normal(0.0, 1.0, 500)
    b = gen.normal(0.7, 2.0, 300)
    sketch = st.HistogramSketch(bins=bins)
    sketch.update(a, b)
    exact = stats.wasserstein_distance(a, b)
    both = np.concatenate([a, b])
    assert sketch.error_bound <= 2 * (both.max() - both.min()) / bins
    assert abs(sketch.wasserstein() - exact) <= sketch.error_bound
    assert sketch.a.sum() == 500 and sketch.b.sum() == 300


def _state(sketch: st.HistogramSketch) -> tuple[int | None, int, list[int], list[int]]:
    return sketch.exponent, sketch.start, sketch.a.tolist(), sketch.b.tolist()


def test_sketch_does_not_depend_on_chunks_or_merge_order() -> None:
    gen = np.random.default_rng(shifted(34))
    a = np.concatenate([gen.normal(0, 0.01, 50), gen.normal(40, 5, 50)])
    b = gen.normal(5, 3, 100)
    whole = st.HistogramSketch(bins=32)
    whole.update(a, b)
    # small chunks first: the exponent grows as the range does
    chunked = st.HistogramSketch(bins=32)
    for i in range(0, 100, 10):
        chunked.update(a[i:i + 10], b[i:i + 10])
    assert _state(chunked) == _state(whole)
    # pieces merged in two orders, the first piece fine-grained and the second coarse
    pieces = []
    for i in (0, 50):
        piece = st.HistogramSketch(bins=32)
        piece.update(a[i:i + 50], b[i:i + 50])
        pieces.append(piece)
    assert pieces[0].exponent is not None and pieces[1].exponent is not None
    assert pieces[0].exponent < pieces[1].exponent
    for first, second in [(0, 1), (1, 0)]:
        merged = st.HistogramSketch(bins=32)
        merged.merge(pieces[first])
        merged.merge(pieces[second])
        assert _state(merged) == _state(whole)
    left = st.HistogramSketch(bins=32)
    left.update(a[:50], b[:50])
    left.merge(pieces[1])
    assert _state(left) == _state(whole)
    right = st.HistogramSketch(bins=32)
    right.update(a[50:], b[50:])
    right.merge(pieces[0])
    assert _state(right) == _state(whole)
    assert pieces[0].a.sum() == 50  # merging does not change the merged sketch


def changes(s: int, n: int, seed: int) -> dict[str, np.ndarray]:
    gen = np.random.default_rng(shifted(seed))
    factual = gen.normal(0.5, 0.2, (s, n))
    counterfactual = factual + gen.normal(0.0, 0.1, (s, n)) * (np.arange(n) % 3)
    return {
        "factual": factual, "counterfactual": counterfactual,
        "change": counterfactual - factual,
        "flip": gen.normal(0.0, 0.1, n),
        "path": gen.normal(0.0, 0.05, (s, n)),
    }


def frame_of(c: dict[str, np.ndarray], rows: slice) -> pd.DataFrame:
    s = c["change"].shape[0]
    part = {k: (v[:, rows] if v.ndim == 2 else v[rows]) for k, v in c.items()}
    n = part["change"].shape[1]
    return pd.DataFrame({
        "row": np.tile(np.arange(n), s), "sample": np.repeat(np.arange(s), n),
        "factual": part["factual"].ravel(), "counterfactual": part["counterfactual"].ravel(),
        "change": part["change"].ravel(), "flip_change": np.tile(part["flip"], s),
        "path_specific_change": part["path"].ravel(),
    })


def expected(c: dict[str, np.ndarray], tolerance: float, interval: float) -> dict[str, float]:
    change, flip, path = np.abs(c["change"]), np.abs(c["flip"]), np.abs(c["path"])
    by_sample = change.mean(axis=1)
    low, high = np.quantile(by_sample, [(1 - interval) / 2, (1 + interval) / 2])
    return {
        "rows": change.shape[1], "mean_abs_change": change.mean(), "ci_lower": low,
        "ci_upper": high, "max_abs_change": change.max(),
        "share_above_tolerance": (change.mean(axis=0) > tolerance).mean(),
        "wasserstein": stats.wasserstein_distance(c["factual"].ravel(),
                                                  c["counterfactual"].ravel()),
        "flip_mean_abs_change": flip.mean(),
        "flip_share_above_tolerance": (flip > tolerance).mean(),
        "path_specific_mean_abs_change": path.mean(),
        "path_specific_share_above_tolerance": (path.mean(axis=0) > tolerance).mean(),
    }


@pytest.mark.parametrize("with_paths", [True, False])
def test_change_stats_of_chunks_equal_the_whole_frame(with_paths: bool) -> None:
    s, n, tolerance, interval = 7, 30, 0.05, 0.8
    c = changes(s, n, 5)
    parts = []
    for rows in (slice(0, 11), slice(11, 12), slice(12, 30)):
        stats_ = st.ChangeStats(s, tolerance, interval, with_paths=with_paths)
        stats_.update(frame_of(c, rows))
        parts.append(stats_)
    merged = parts[2].merge(parts[0]).merge(parts[1])
    assert merged is parts[2]
    got = merged.result()
    want = expected(c, tolerance, interval)
    assert got["rows"] == n
    keys = [*st.SUMMARY_COLUMNS[3:], *(st.PATH_COLUMNS if with_paths else ())]
    assert sorted(got) == sorted(keys)
    for key in keys:
        if key == "wasserstein":
            assert abs(got[key] - want[key]) <= merged.sketch.error_bound
        else:
            assert got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-15), key
    whole = st.ChangeStats(s, tolerance, interval, with_paths=with_paths)
    whole.update(frame_of(c, slice(0, n)))
    assert whole.result() == pytest.approx(got, rel=1e-12)


def test_change_stats_thresholds_and_checks() -> None:
    stats_ = st.ChangeStats(2, 0.5, 0.9)
    assert stats_.sample_sums.tolist() == [0.0, 0.0] and stats_.max_abs == -math.inf
    change = np.array([[0.5, -1.0, 0.2], [0.5, 0.4, -0.9]])
    stats_.add(change=change, flip=np.array([0.5, -0.6, 0.0]),
               factual=np.zeros((2, 3)), counterfactual=change)
    assert stats_.rows == 3 and stats_.above == 2  # row means 0.5 (not above), 0.7, 0.55
    assert stats_.flip_above == 1 and stats_.flip_sum == pytest.approx(1.1)
    assert stats_.max_abs == 1.0
    assert stats_.sample_sums.tolist() == pytest.approx([1.7, 1.8])
    stats_.add(change=np.zeros((2, 0)), flip=np.zeros(0), factual=np.zeros((2, 0)),
               counterfactual=np.zeros((2, 0)))
    assert stats_.rows == 3
    with pytest.raises(ValueError, match=exactly("changes of 3 samples per row, expected 2")):
        stats_.add(change=np.zeros((3, 1)), flip=np.zeros(1), factual=np.zeros((3, 1)),
                   counterfactual=np.zeros((3, 1)))
    with pytest.raises(ValueError, match=exactly(
            "a chunk of 5 rows x samples is not 2 samples per row")):
        stats_.update(pd.DataFrame({"change": np.zeros(5)}))
    paths = st.ChangeStats(2, 0.5, 0.9, with_paths=True)
    with pytest.raises(ValueError, match=exactly(
            "path-specific statistics need the path-specific changes")):
        paths.add(change=change, flip=np.zeros(3), factual=change, counterfactual=change)
    for other in (st.ChangeStats(3, 0.5, 0.9), st.ChangeStats(2, 0.4, 0.9),
                  st.ChangeStats(2, 0.5, 0.8), paths):
        with pytest.raises(ValueError, match=exactly(
            "cannot merge statistics of different samples or settings")):
            st.ChangeStats(2, 0.5, 0.9).merge(other)
