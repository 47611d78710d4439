"""The counterfactual audit streams by chunk and keeps mergeable summaries (issue 19, item 3).

The reference is the audit's former computation: one frame of every row and sample
(``keep_samples=True``), summarised per group with pandas and scipy's exact Wasserstein
distance. Fits are the shared small fits of ``tests/_models.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _models import (
    aux_data,
    aux_fit,
    families_data,
    families_small_fit,
    law_level3_fit,
    law_train,
)
from _seeds import shifted
from scipy.stats import wasserstein_distance

import counterfair as cf
from counterfair.audit import AuditSettings, counterfactual_fairness
from counterfair.audit.causal import ROW_COLUMNS, SUMMARY_COLUMNS
from counterfair.audit.streaming import ChangeStats, HistogramSketch
from counterfair.counterfactual.frames import counterfactual_frame
from counterfair.counterfactual.prediction import frame_predictions
from counterfair.options import MIN_CHUNK_BYTES

EXACT = 1e-12
CHUNKS = (MIN_CHUNK_BYTES, 4 * MIN_CHUNK_BYTES, cf.options.DEFAULT_CHUNK_BYTES)


def _old_summary(changes: pd.DataFrame, tolerance: float, interval: float) -> dict[str, float]:
    """The audit's summary as it was computed from the whole per-row-and-sample frame."""
    per_sample = changes.assign(abs_change=changes["change"].abs())
    mean_by_sample = per_sample.groupby("sample")["abs_change"].mean().to_numpy()
    per_row = per_sample.groupby("row")["abs_change"].mean()
    flip_per_row = changes.groupby("row")["flip_change"].first().abs()
    low, high = np.quantile(mean_by_sample, [(1 - interval) / 2, (1 + interval) / 2])
    return {
        "rows": int(per_row.shape[0]),
        "mean_abs_change": float(per_sample["abs_change"].mean()),
        "ci_lower": float(low),
        "ci_upper": float(high),
        "max_abs_change": float(per_sample["abs_change"].max()),
        "share_above_tolerance": float((per_row > tolerance).mean()),
        "wasserstein": float(wasserstein_distance(changes["factual"], changes["counterfactual"])),
        "flip_mean_abs_change": float(flip_per_row.mean()),
        "flip_share_above_tolerance": float((flip_per_row > tolerance).mean()),
    }


def _sketch_width(changes: pd.DataFrame) -> float:
    sketch = HistogramSketch()
    sketch.update(changes["factual"].to_numpy(), changes["counterfactual"].to_numpy())
    return sketch.error_bound


def _predictor(frame: pd.DataFrame) -> np.ndarray:
    return (
        2.0 * frame["UGPA"].to_numpy()
        + 0.05 * frame["LSAT"].to_numpy()
        + (frame["sex"].astype(str) == "Male").to_numpy(float)
    )


@pytest.fixture(scope="module")
def fitted(stan_backend: str) -> tuple[cf.Fit, pd.DataFrame]:
    rows = law_train().drop(columns=["K", "ZFYA"]).iloc[:60]
    return law_level3_fit().fit, rows


def _audit(
    fit: cf.Fit, rows: pd.DataFrame, **kwargs: object
) -> cf.audit.causal_report.CounterfactualReport:
    settings = AuditSettings(n_samples=20, seed=shifted(3), **kwargs)  # type: ignore[arg-type]
    return counterfactual_fairness(fit, rows, _predictor, settings=settings)


@pytest.mark.stan
def test_streamed_summary_equals_the_summary_of_the_whole_frame(fitted):
    fit, rows = fitted
    with cf.set_options(chunk_bytes=MIN_CHUNK_BYTES):
        report = _audit(fit, rows, keep_samples=True)
    changes = report.changes
    assert changes is not None
    groups = changes.groupby(["attribute", "from_level", "to_level"], sort=False)
    assert len(report.by_group) == groups.ngroups > 2
    for got, (key, group) in zip(report.by_group.itertuples(index=False), groups, strict=True):
        assert (got.attribute, got.from_level, got.to_level) == key
        expected = _old_summary(group, report.tolerance, report.interval)
        for column, value in expected.items():
            if column == "wasserstein":
                assert abs(got.wasserstein - value) <= _sketch_width(group)
            else:
                assert getattr(got, column) == pytest.approx(value, abs=EXACT, rel=EXACT), column
    for got, (attribute, group) in zip(
        report.overall.itertuples(index=False), changes.groupby("attribute", sort=False),
        strict=True,
    ):
        keyed = group.assign(row=list(zip(group["row"], group["to_level"], strict=True)))
        expected = _old_summary(keyed, report.tolerance, report.interval)
        assert got.attribute == attribute
        for column, value in expected.items():
            if column == "wasserstein":
                assert abs(got.wasserstein - value) <= _sketch_width(group)
            else:
                assert getattr(got, column) == pytest.approx(value, abs=EXACT, rel=EXACT), column


@pytest.mark.stan
def test_three_chunk_sizes_give_the_same_report(fitted):
    fit, rows = fitted
    reports = []
    for size in CHUNKS:
        with cf.set_options(chunk_bytes=size):
            reports.append(_audit(fit, rows, keep_samples=True))
    first = reports[0]
    assert list(first.by_group.columns) == list(SUMMARY_COLUMNS)
    for other in reports[1:]:
        for name in ("by_group", "overall", "rows"):
            pd.testing.assert_frame_equal(
                getattr(first, name), getattr(other, name), check_exact=False,
                rtol=EXACT, atol=EXACT,
            )
        pd.testing.assert_frame_equal(first.changes, other.changes)


@pytest.mark.stan
def test_rows_hold_each_rows_posterior_mean_interval_and_probability(fitted):
    fit, rows = fitted
    with cf.set_options(chunk_bytes=MIN_CHUNK_BYTES):
        report = _audit(fit, rows, keep_samples=True, interval=0.8, tolerance=0.3)
    assert list(report.rows.columns) == list(ROW_COLUMNS)
    changes = report.changes
    assert changes is not None
    direct = (
        changes.groupby(["attribute", "to_level", "row"], sort=False)
        .agg(
            from_level=("from_level", "first"),
            mean_change=("change", "mean"),
            ci_lower=("change", lambda c: np.quantile(c, 0.1)),
            ci_upper=("change", lambda c: np.quantile(c, 0.9)),
            prob_above_tolerance=("change", lambda c: float((np.abs(c) > 0.3).mean())),
            flip_change=("flip_change", "first"),
        )
        .reset_index()
    )
    got = report.rows.sort_values(["attribute", "to_level", "row"]).reset_index(drop=True)
    direct = direct.sort_values(["attribute", "to_level", "row"]).reset_index(drop=True)
    assert len(got) == len(direct) == sum(
        (rows[a].astype(str) != level).sum()
        for a in ("race", "sex")
        for level in fit.encoding.levels[a]
    )
    pd.testing.assert_frame_equal(
        got[list(ROW_COLUMNS)], direct[list(ROW_COLUMNS)], check_exact=False,
        rtol=EXACT, atol=EXACT,
    )
    assert 0 < report.rows["prob_above_tolerance"].mean() < 1


@pytest.mark.stan
def test_changes_only_on_request_and_as_the_whole_frame_computes_them(fitted):
    fit, rows = fitted
    assert _audit(fit, rows).changes is None
    report = _audit(fit, rows, attributes=["race"], keep_samples=True)
    abduction = fit.abduct(rows, method="draws", n_param_draws=20, n_samples=20, seed=shifted(3))
    mask = (rows["race"].astype(str) != "Black").to_numpy()
    subset = abduction.take_rows(mask)
    frame = counterfactual_frame(fit, subset, {"race": "Black"}, seed=shifted(3))
    direct = frame_predictions(fit, frame, _predictor, abduction=subset)
    got = report.changes[report.changes["to_level"] == "Black"].reset_index(drop=True)
    for column in ("row", "sample", "factual", "counterfactual", "change"):
        np.testing.assert_array_equal(got[column].to_numpy(), direct[column].to_numpy())


@pytest.mark.stan
def test_intervention_audit_streams_per_row_do_values(stan_backend):
    fit, rows = aux_fit().fit, aux_data().drop(columns="K").iloc[:40]
    do = {"Z": rows["Z"].to_numpy() + np.linspace(0.0, 1.0, len(rows))}
    reports = []
    for size in CHUNKS[:2]:
        with cf.set_options(chunk_bytes=size):
            reports.append(
                counterfactual_fairness(
                    fit, rows, lambda f: f["X"].to_numpy(),
                    settings=AuditSettings(do=do, n_samples=10, keep_samples=True),
                )
            )
    pd.testing.assert_frame_equal(reports[0].changes, reports[1].changes)
    pd.testing.assert_frame_equal(
        reports[0].by_group, reports[1].by_group, check_exact=False, rtol=EXACT, atol=EXACT
    )
    assert len(reports[0].rows) == len(rows)


def test_sketch_is_within_its_bin_width_of_scipys_exact_distance():
    rng = np.random.default_rng(shifted(19))
    for scale, bins in ((1.0, 64), (1e-3, 4096), (50.0, 16)):
        a = rng.normal(0.0, scale, 700)
        b = rng.gamma(2.0, scale, 500)
        sketch = HistogramSketch(bins=bins)
        sketch.update(a, b)
        exact = wasserstein_distance(a, b)
        assert abs(sketch.wasserstein() - exact) <= sketch.error_bound
        assert sketch.error_bound <= 2 * (max(a.max(), b.max()) - min(a.min(), b.min())) / bins
        # chunked and merged in another order: the same counts on the same grid
        parts = [HistogramSketch(bins=bins) for _ in range(3)]
        for i, part in enumerate(parts):
            part.update(a[i::3], b[i::3])
        merged = parts[2]
        merged.merge(parts[0])
        merged.merge(parts[1])
        assert merged.exponent == sketch.exponent and merged.start == sketch.start
        np.testing.assert_array_equal(merged.a, sketch.a)
        np.testing.assert_array_equal(merged.b, sketch.b)
    same = HistogramSketch()
    same.update(np.full(5, 0.25), np.full(3, 0.25))
    assert same.wasserstein() == 0.0
    with pytest.raises(ValueError, match="finite"):
        HistogramSketch().update(np.array([np.nan]), np.array([0.0]))


def test_change_stats_refuse_a_chunk_that_is_not_whole_rows_and_other_settings():
    stats = ChangeStats(n_samples=3, tolerance=0.1, interval=0.9)
    frame = pd.DataFrame(
        {"row": [0, 0], "sample": [0, 1], "factual": [0.0, 0.0], "counterfactual": [1.0, 1.0],
         "change": [1.0, 1.0], "flip_change": [0.0, 0.0]}
    )
    with pytest.raises(ValueError, match="3 samples per row"):
        stats.update(frame)
    with pytest.raises(ValueError, match="different samples"):
        stats.merge(ChangeStats(n_samples=4, tolerance=0.1, interval=0.9))


@pytest.mark.stan
def test_path_specific_columns_equal_the_whole_frames(stan_backend):
    fit, rows = aux_fit().fit, aux_data().drop(columns="K").iloc[:40]

    def predictor(frame: pd.DataFrame) -> np.ndarray:
        return frame["X"].to_numpy() + 0.3 * frame["C"].to_numpy()

    reports = []
    for size in CHUNKS[:2]:
        with cf.set_options(chunk_bytes=size):
            reports.append(
                counterfactual_fairness(
                    fit, rows, predictor,
                    settings=AuditSettings(
                        unfair_paths=[("race", "C")], n_samples=10, keep_samples=True,
                        tolerance=0.2,
                    ),
                )
            )
    report = reports[0]
    pd.testing.assert_frame_equal(
        report.by_group, reports[1].by_group, check_exact=False, rtol=EXACT, atol=EXACT
    )
    changes = report.changes
    assert changes is not None
    groups = changes.groupby(["attribute", "from_level", "to_level"], sort=False)
    for got, (_, group) in zip(report.by_group.itertuples(index=False), groups, strict=True):
        path_abs = group["path_specific_change"].abs()
        share = float((path_abs.groupby(group["row"]).mean() > 0.2).mean())
        assert got.path_specific_mean_abs_change == pytest.approx(path_abs.mean(), abs=EXACT)
        assert got.path_specific_share_above_tolerance == pytest.approx(share, abs=EXACT)
    assert (report.by_group["path_specific_mean_abs_change"] > 0).all()


def _every_column(frame: pd.DataFrame) -> np.ndarray:
    """A predictor reading every observed column (level columns by their codes)."""
    total = np.zeros(len(frame))
    for column in ("X", "C", "O", "K", "P", "Z"):
        if column in frame.columns:
            values = frame[column]
            if isinstance(values.dtype, pd.CategoricalDtype):
                values = values.cat.codes
            total += np.asarray(values, dtype=float) * (1.0 + 0.1 * len(column))
    return total


@pytest.mark.stan
@pytest.mark.parametrize("coupling", ["monotone", "redraw"])
@pytest.mark.parametrize("drop", [(), ("C",)])
def test_audit_by_world_equals_the_counterfactual_frame_for_every_family(
    stan_backend, coupling, drop
):
    """The audit builds worlds from arrays and abducts a discrete node's noise once per
    chunk; its changes are those of counterfactual_frame on each target's rows, with
    ordinal, negative binomial and categorical descendants (and C simulated when absent)."""
    fit = families_small_fit().fit
    rows = families_data().drop(columns=["U", *drop]).iloc[:50]
    report = counterfactual_fairness(
        fit, rows, _every_column,
        settings=AuditSettings(
            attributes=["A"], n_samples=8, seed=shifted(5), coupling=coupling, keep_samples=True,
        ),
    )
    abduction = fit.abduct(rows, method="draws", n_param_draws=8, n_samples=8, seed=shifted(5))
    for level in ("a", "b"):
        mask = (rows["A"].astype(str) != level).to_numpy()
        subset = abduction.take_rows(mask)
        frame = counterfactual_frame(fit, subset, {"A": level}, seed=shifted(5), coupling=coupling)
        direct = frame_predictions(fit, frame, _every_column, abduction=subset)
        got = report.changes[report.changes["to_level"] == level].reset_index(drop=True)
        assert len(got) == mask.sum() * 8
        for column in ("row", "sample", "factual", "counterfactual", "change"):
            np.testing.assert_array_equal(got[column].to_numpy(), direct[column].to_numpy())
        assert np.abs(got["change"]).max() > 0  # the worlds differ: the test can fail
