"""Chunk-invariant randomness and the chunked row path (issue 19, items 1, 2 and 8).

* :class:`RowRandom` gives a row the same numbers whatever rows surround it, and its
  distributions are right (KS test of the uniforms, moments of the inverse-CDF
  families within 4 standard errors of their closed forms);
* abduction of new rows, counterfactual frames, FairLearner predictions and
  counterfactual predictions are identical for three chunk sizes (about one row,
  a few rows and all rows per chunk), on real Stan fits with ordinal, categorical,
  negative binomial and Bernoulli nodes (the discrete noise path, monotone coupling).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _models import AUX_TRUTH, aux_fit, aux_scm, families_data, families_small_fit
from _seeds import shifted
from scipy import stats
from sklearn.linear_model import LogisticRegression

import counterfair as cf
from counterfair import options
from counterfair.counterfactual.action import slice_do
from counterfair.counterfactual.prediction import (
    counterfactual_predictions_chunk,
    iter_counterfactual_predictions,
    merge_prediction_chunks,
)
from counterfair.learn.baselines import BaselinePredictor
from counterfair.learn.fair import FairLearner
from counterfair.rng import RowRandom, _poisson_quantile, label_key
from counterfair.rows import chunking
from counterfair.rows.validated import Rows

Z_MAX = 4.0
"""Largest |z| of a Monte Carlo moment against its closed form."""

CHUNK_SIZES = (options.MIN_CHUNK_BYTES, 7 * options.MIN_CHUNK_BYTES, options.DEFAULT_CHUNK_BYTES)
"""64 KiB (about one row per chunk for the wide stages), 448 KiB, and 128 MiB (all rows)."""


def _z(draws: np.ndarray, mean: float, var: float) -> float:
    return float((draws.mean() - mean) / np.sqrt(var / draws.size))


# ---------------------------------------------------------------------- RowRandom
def test_a_rows_draws_do_not_depend_on_the_rows_around_it() -> None:
    whole = RowRandom.for_rows(11, 50)
    a = whole.random((3, 50))
    b = whole.standard_normal((3, 50, 4))
    c = whole.random((2, 3, 50), row_axis=2)
    for start, stop in [(0, 1), (7, 19), (40, 50)]:
        part = RowRandom(11, np.arange(start, stop))
        np.testing.assert_array_equal(part.random((3, stop - start)), a[:, start:stop])
        np.testing.assert_array_equal(
            part.standard_normal((3, stop - start, 4)), b[:, start:stop]
        )
        np.testing.assert_array_equal(
            part.random((2, 3, stop - start), row_axis=2), c[:, :, start:stop]
        )
    # rows in another order, and a subset taken from the whole, draw the same numbers
    shuffled = np.array([30, 2, 17])
    np.testing.assert_array_equal(RowRandom(11, shuffled).random((3, 3)), a[:, shuffled])
    taken = RowRandom.for_rows(11, 50).take(np.arange(50) % 2 == 0)
    np.testing.assert_array_equal(taken.random((3, 25)), a[:, ::2])


def test_calls_children_and_seeds_give_different_streams() -> None:
    source = RowRandom.for_rows(3, 20)
    first, second = source.random((5, 20)), source.random((5, 20))
    assert not np.any(first == second)
    one, again = source.child("propagate", "O"), source.child("propagate", "O")
    np.testing.assert_array_equal(one.random((5, 20)), again.random((5, 20)))
    other = source.child("propagate", "K").random((5, 20))
    assert not np.any(other == RowRandom.for_rows(3, 20).child("propagate", "O").random((5, 20)))
    assert not np.any(RowRandom.for_rows(4, 20).random((5, 20)) == first)
    # a child's stream does not depend on the draws its parent made
    fresh = RowRandom.for_rows(3, 20).child("simulate", "C").random(20)
    np.testing.assert_array_equal(source.child("simulate", "C").random(20), fresh)


def test_labels_hash_the_same_in_every_process() -> None:
    code = "from counterfair.rng import label_key; print(label_key(('propagate', 'O')))"
    outputs = set()
    for salt in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": salt}
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        outputs.add(int(done.stdout))
    assert outputs == {label_key(("propagate", "O"))}


def test_uniforms_and_normals_have_their_distributions() -> None:
    u = RowRandom.for_rows(5, 4000).random((25, 4000))
    assert u.min() > 0.0 and u.max() < 1.0
    assert stats.kstest(u.ravel(), "uniform").pvalue > 1e-3
    z = RowRandom.for_rows(6, 4000).standard_normal((25, 4000))
    assert stats.kstest(z.ravel(), "norm").pvalue > 1e-3
    assert abs(_z(z, 0.0, 1.0)) < Z_MAX
    # adjacent rows and samples are not correlated
    assert abs(np.corrcoef(u[:, :-1].ravel(), u[:, 1:].ravel())[0, 1]) * np.sqrt(u.size) < Z_MAX
    assert abs(np.corrcoef(u[:-1].ravel(), u[1:].ravel())[0, 1]) * np.sqrt(u.size) < Z_MAX


@pytest.mark.parametrize("lam", [0.3, 4.0, 60.0])
def test_poisson_by_inverse_cdf_has_the_right_moments(lam: float) -> None:
    draws = RowRandom.for_rows(7, 2000).poisson(np.full((20, 2000), lam))
    assert np.all(draws == np.round(draws)) and draws.min() >= 0
    assert abs(_z(draws, lam, lam)) < Z_MAX
    centred = (draws - lam) ** 2  # E = lam, Var = lam + 2 lam^2
    assert abs(_z(centred, lam, lam + 2 * lam**2)) < Z_MAX
    assert np.all(RowRandom.for_rows(7, 3).poisson(np.zeros(3)) == 0)


def test_poisson_quantile_is_the_exact_inverse_cdf() -> None:
    rng = np.random.default_rng(shifted(8))
    u = rng.random(50_000)
    lam = np.exp(rng.uniform(-7.0, 8.0, u.size))  # rates from 0.001 to 3,000
    k = _poisson_quantile(u, lam)
    assert np.all(stats.poisson.cdf(k, lam) >= u)
    below = k > 0
    assert np.all(stats.poisson.cdf(k[below] - 1, lam[below]) < u[below])
    np.testing.assert_array_equal(k, stats.poisson.ppf(u, lam))


@pytest.mark.parametrize(("shape", "scale"), [(0.5, 2.0), (2.5, 0.4), (30.0, 1.0)])
def test_gamma_by_inverse_cdf_has_the_right_moments(shape: float, scale: float) -> None:
    a = np.full((20, 2000), shape)
    draws = RowRandom.for_rows(8, 2000).gamma(a, scale)
    assert abs(_z(draws, shape * scale, shape * scale**2)) < Z_MAX
    assert stats.kstest(draws.ravel(), stats.gamma(shape, scale=scale).cdf).pvalue > 1e-3


def test_gumbel_binomial_and_choice_have_the_right_distributions() -> None:
    g = RowRandom.for_rows(9, 2000).gumbel(size=(20, 2000))
    assert abs(_z(g, np.euler_gamma, np.pi**2 / 6)) < Z_MAX
    assert stats.kstest(g.ravel(), "gumbel_r").pvalue > 1e-3
    p = np.full((20, 2000), 0.3)
    b = RowRandom.for_rows(9, 2000).binomial(1, p)
    assert set(np.unique(b)) == {0, 1}
    assert abs(_z(b, 0.3, 0.21)) < Z_MAX
    pick = RowRandom.for_rows(9, 2000).choice(np.array([5, 6, 7]), size=(30, 2000))
    for value in (5, 6, 7):
        assert abs(_z(pick == value, 1 / 3, 2 / 9)) < Z_MAX


def test_bad_draws_are_refused() -> None:
    source = RowRandom.for_rows(1, 10)
    with pytest.raises(ValueError, match="has 9 rows on axis 1"):
        source.random((3, 9))
    with pytest.raises(ValueError, match="only draws Bernoulli"):
        source.binomial(2, np.full(10, 0.5))
    with pytest.raises(ValueError, match="with replacement"):
        source.choice(3, size=10, replace=False)
    with pytest.raises(ValueError, match="out of range"):
        source.random((3, 10), row_axis=4)
    with pytest.raises(TypeError, match="seed must be an integer"):
        RowRandom(1.5, np.arange(3))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="1-D array of integer"):
        RowRandom(1, np.array([0.5, 1.5]))


# ---------------------------------------------------------------------- chunks and rows
def test_row_chunks_cover_the_rows_with_their_positions() -> None:
    parts = chunking.row_chunks(10, rows_per_chunk=4, positions=np.arange(100, 110))
    assert [p.rows for p in parts] == [slice(0, 4), slice(4, 8), slice(8, 10)]
    np.testing.assert_array_equal(np.concatenate([p.positions for p in parts]), np.arange(100, 110))
    with cf.set_options(chunk_bytes=options.MIN_CHUNK_BYTES):
        sized = chunking.row_chunks(100, bytes_per_row=options.MIN_CHUNK_BYTES / 7)
    assert [p.rows.stop - p.rows.start for p in sized][:2] == [7, 7] and len(sized) == 15
    with pytest.raises(ValueError, match="exactly one"):
        chunking.row_chunks(10)


def test_rows_and_do_are_checked_and_cut() -> None:
    frame = pd.DataFrame({"A": ["a", "b", "a"]}, index=[10, 11, 12])
    whole = Rows.from_frame(frame)
    np.testing.assert_array_equal(whole.chunk(slice(1, 3)).positions, [1, 2])
    assert Rows.from_frame(whole) is whole
    with pytest.raises(cf.errors.DataError):
        Rows.from_frame(frame.iloc[:0])
    with pytest.raises(ValueError, match="one integer per row"):
        Rows.from_frame(frame, positions=np.arange(2))
    do = slice_do({"A": ["b", "a", "b"], "X": 1.0}, slice(1, 3), 3)
    assert list(do["A"]) == ["a", "b"] and do["X"] == 1.0
    with pytest.raises(ValueError, match="2 values for 3 rows"):
        slice_do({"A": ["b", "a"]}, slice(0, 1), 3)


def test_baselines_predict_the_same_in_chunks(count_chunks: list[int]) -> None:
    """Row-wise baselines (Full, order-preserving) give the same outputs chunk by chunk."""
    rng = np.random.default_rng(shifted(6))
    group = np.repeat(["a", "b"], 3000)
    x = rng.normal(np.where(group == "b", 1.0, 0.0), 1.0)
    frame = pd.DataFrame({"g": group, "x": x, "label": (x + rng.normal(0, 1, x.size) > 0.5)})
    full = BaselinePredictor(["g", "x"], "label", ["g"], LogisticRegression()).fit(frame)
    order = cf.OrderPreservingPredictor(full, attribute="g", prefit=True).fit(frame)

    def compute() -> list[np.ndarray]:
        return [full.predict(frame), full.predict_proba(frame), order.predict_proba(frame)]

    results = list(_for_each_size(compute, count_chunks))
    assert results[0][1] > 1 and results[-1][1] == 1
    for outputs, _ in results[1:]:
        for got, expected in zip(outputs, results[0][0], strict=True):
            np.testing.assert_array_equal(got, expected)


# ---------------------------------------------------------------------- Stan fits
@pytest.fixture
def count_chunks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of chunks of each call of ``chunking.row_chunks`` (the real function)."""
    counts: list[int] = []
    real = chunking.row_chunks

    def counted(*args: Any, **kwargs: Any) -> list[chunking.Chunk]:
        out = real(*args, **kwargs)
        counts.append(len(out))
        return out

    monkeypatch.setattr(chunking, "row_chunks", counted)
    return counts


def _for_each_size(compute: Callable[[], Any], counts: list[int]) -> Iterator[tuple[Any, int]]:
    for size in CHUNK_SIZES:
        counts.clear()
        with cf.set_options(chunk_bytes=size):
            out = compute()
        yield out, max(counts)


def _new_family_rows() -> pd.DataFrame:
    return families_data().drop(columns="U").iloc[300:380]


@pytest.mark.stan
def test_latents_of_new_rows_do_not_depend_on_the_chunks(
    stan_backend: str, count_chunks: list[int]
) -> None:
    fit = families_small_fit().fit
    new = _new_family_rows()
    results = list(_for_each_size(lambda: fit.latents(new, seed=shifted(2))["U"], count_chunks))
    assert results[0][1] > 5 and results[-1][1] == 1
    for latents, _ in results[1:]:
        np.testing.assert_array_equal(latents, results[0][0])
    # one slice abducted on its own, with its global positions, gives the same draws
    part = fit.latents(new.iloc[20:30], seed=shifted(2), positions=np.arange(20, 30))["U"]
    np.testing.assert_array_equal(part, results[0][0][:, 20:30])
    with pytest.raises(ValueError, match="one global position per row"):
        fit.abduct(new, positions=np.arange(3))


@pytest.mark.stan
@pytest.mark.parametrize("coupling", ["monotone", "redraw"])
def test_counterfactual_frames_do_not_depend_on_the_chunks(
    stan_backend: str, count_chunks: list[int], coupling: str
) -> None:
    """C is left out, so it is simulated; O (ordinal) and K (categorical) move with A."""
    fit = families_small_fit().fit
    new = _new_family_rows().drop(columns="C")
    levels = np.where(np.arange(len(new)) % 3 == 0, "a", "b")  # a per-row intervention

    def compute() -> pd.DataFrame:
        return fit.counterfactual(
            new, {"A": levels}, n_samples=20, seed=shifted(3), coupling=coupling
        )

    results = list(_for_each_size(compute, count_chunks))
    assert results[0][1] >= 20 and results[-1][1] == 1
    first = results[0][0]
    moved = first[first["world"] == "counterfactual"]["K"].to_numpy() != (
        first[first["world"] == "factual"]["K"].to_numpy()
    )
    assert moved.any()  # the discrete path was exercised
    for frame, _ in results[1:]:
        pd.testing.assert_frame_equal(frame, first)
        assert frame.attrs == first.attrs


@pytest.mark.stan
def test_path_specific_frames_do_not_depend_on_the_chunks(
    stan_backend: str, count_chunks: list[int]
) -> None:
    """Only A -> O is unfair: O moves, and K and C follow through O's discrete noise."""
    fit = families_small_fit().fit
    new = _new_family_rows()

    def compute() -> pd.DataFrame:
        return fit.counterfactual(
            new, {"A": "b"}, n_samples=20, seed=shifted(7), unfair_paths=[("A", "O")]
        )

    results = list(_for_each_size(compute, count_chunks))
    assert results[0][1] >= 20 and results[-1][1] == 1
    first = results[0][0]
    factual = first[first["world"] == "factual"].reset_index(drop=True)
    counter = first[first["world"] == "counterfactual"].reset_index(drop=True)
    assert (factual["O"] != counter["O"]).any()
    pd.testing.assert_series_equal(factual["X"], counter["X"])  # A -> X is fair: X stays
    for frame, _ in results[1:]:
        pd.testing.assert_frame_equal(frame, first)


@pytest.mark.stan
def test_fair_learner_predictions_do_not_depend_on_the_chunks(
    stan_backend: str, count_chunks: list[int]
) -> None:
    """A Bernoulli target (P of the auxiliary SCM), latent features, on a cached fit."""
    fit = aux_fit().fit
    learner = FairLearner(
        fit,
        target="P",
        features=cf.inputs.Latent(),
        n_samples=40,
        seed=shifted(4),
    ).fit(fit.data)
    new = aux_scm().sample(60, params=AUX_TRUTH, seed=shifted(40)).drop(columns="K")

    def compute() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return learner.predict(new), learner.predict_proba(new), learner.predict_draws(new)

    results = list(_for_each_size(compute, count_chunks))
    assert results[0][1] >= 10 and results[-1][1] == 1
    for (labels, proba, draws), _ in results[1:]:
        np.testing.assert_array_equal(labels, results[0][0][0])
        np.testing.assert_array_equal(proba, results[0][0][1])
        np.testing.assert_array_equal(draws, results[0][0][2])
    assert proba.shape == (60, 2) and proba[:, 1].std() > 0.0
    # one partition predicted on its own, with its global positions, gives its rows' numbers
    part = Rows.from_frame(new.iloc[20:30], positions=np.arange(20, 30))
    np.testing.assert_array_equal(learner.predict_proba(part), proba[20:30])
    np.testing.assert_array_equal(learner.predict_draws(part), draws[:, 20:30])
    # without the positions the partition's rows draw other numbers
    assert not np.array_equal(learner.predict_draws(new.iloc[20:30]), draws[:, 20:30])


@pytest.mark.stan
def test_counterfactual_predictions_do_not_depend_on_the_chunks(
    stan_backend: str, count_chunks: list[int]
) -> None:
    fit = families_small_fit().fit
    new = _new_family_rows()

    def predictor(frame: pd.DataFrame) -> np.ndarray:
        ordinal = frame["O"].astype(str).map({"low": 0.0, "mid": 1.0, "high": 2.0})
        return np.asarray(ordinal + (frame["K"].astype(str) == "drug") + 0.1 * frame["C"])

    def compute() -> pd.DataFrame:
        return cf.counterfactual_predictions(
            fit, new, predictor, do={"A": "b"}, n_samples=20, seed=shifted(5)
        )

    results = list(_for_each_size(compute, count_chunks))
    assert results[0][1] >= 20 and results[-1][1] == 1
    first = results[0][0]
    assert (first["change"] != 0).any()
    for frame, _ in results[1:]:
        pd.testing.assert_frame_equal(frame, first)
    # the streamed chunks carry positions and merge back to the same frame
    with cf.set_options(chunk_bytes=7 * options.MIN_CHUNK_BYTES):
        parts = list(
            iter_counterfactual_predictions(
                fit, new, predictor, do={"A": "b"}, n_samples=20, seed=shifted(5)
            )
        )
    assert len(parts) > 1 and all("position" in p.columns for p in parts)
    pd.testing.assert_frame_equal(merge_prediction_chunks(parts, {"A": "b"}), first)
    # a chunk computed alone, far from the others, holds the same numbers
    alone = Rows.from_frame(new.iloc[50:55], positions=np.arange(50, 55))
    chunk = counterfactual_predictions_chunk(
        fit, alone, predictor, do={"A": "b"}, n_samples=20, seed=shifted(5)
    )
    expected = first[first["row"].isin(new.index[50:55])].reset_index(drop=True)
    pd.testing.assert_frame_equal(chunk.drop(columns="position"), expected)
    # the rows' own abduction given gives the same frame; abduction_args reach the abduction
    given = fit.abduct(new, n_samples=20, seed=shifted(5))
    reused = cf.counterfactual_predictions(
        fit, new, predictor, do={"A": "b"}, n_samples=20, seed=shifted(5), abduction=given
    )
    pd.testing.assert_frame_equal(reused, first)
    by_draws = cf.counterfactual_predictions(
        fit, new, predictor, do={"A": "b"}, n_samples=20, seed=shifted(5),
        abduction_args={"method": "draws", "n_param_draws": 5},
    )
    assert not np.array_equal(by_draws["counterfactual"], first["counterfactual"])
    # options that would be ignored are refused
    with pytest.raises(TypeError, match=r"abduction_args \['method'\] would be ignored"):
        cf.counterfactual_predictions(
            fit, new, predictor, do={"A": "b"}, abduction=given,
            abduction_args={"method": "draws"},
        )
    with pytest.raises(ValueError, match="rows_out= and overwrite= write a Dask frame"):
        cf.counterfactual_predictions(fit, new, predictor, do={"A": "b"}, rows_out="out")


def test_poisson_search_compares_with_scipys_own_cdf() -> None:
    """The Poisson quantile search calls pdtr / pdtrc directly: the numbers of
    poisson.cdf / poisson.sf at every count (so abducted noise gives its value back)."""
    from scipy.stats import poisson

    from counterfair.model.families import family_of

    family = family_of(cf.Poisson())
    rng = np.random.default_rng(shifted(1))
    k = rng.integers(0, 300, 20_000).astype(float)
    mu = rng.gamma(2.0, 30.0, 20_000)
    assert np.array_equal(family.count_cdf(poisson, survival=False)(k, mu), poisson.cdf(k, mu))
    assert np.array_equal(family.count_cdf(poisson, survival=True)(k, mu), poisson.sf(k, mu))
