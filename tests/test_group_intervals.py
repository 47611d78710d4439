"""Intervals of the group audits at scale: analytic (Wilson / delta method) and the
chunked Poisson bootstrap, checked against closed forms and the exact bootstrap."""

from __future__ import annotations

import itertools
import re
import tracemalloc

import numpy as np
import pandas as pd
import pytest
from _data import DATA_DIR
from _seeds import shifted
from scipy.stats import norm, poisson
from sklearn.linear_model import LinearRegression, LogisticRegression

import counterfair as cf
from counterfair.audit import GroupAudit
from counterfair.audit import poisson_bootstrap as pb
from counterfair.audit.analytic import binomial_variance, disparity_intervals, wilson_interval
from counterfair.audit.bootstrap import CI_METHODS, EXACT_BOOTSTRAP_MAX_ROWS, resolve_ci_method
from counterfair.audit.group_audit import Regression
from counterfair.audit.impact import DisparateImpact
from counterfair.audit.report import render_report

HAVE_COMPAS = (DATA_DIR / "compas-scores-two-years.csv").exists()
needs_compas = pytest.mark.skipif(not HAVE_COMPAS, reason=f"COMPAS not found in {DATA_DIR}")

CONFIDENCE = 0.95
TABLES = ("ci", "ratio_ci", "difference_ci")


# ---------------------------------------------------------------------------------------
# data: real scikit-learn predictions, on simulated groups (large) and on COMPAS


def _simulated(n: int, seed: int, *, two_attributes: bool) -> tuple[np.ndarray, ...]:
    """Groups of thousands of rows; a logistic regression fitted on separate rows."""
    rng = np.random.default_rng(shifted(seed))

    def draw(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        group = rng.choice(np.array(["a", "b", "c"]), size, p=[0.45, 0.33, 0.22])
        sex = rng.choice(np.array(["F", "M"]), size)
        shift = np.select([group == "a", group == "b"], [0.4, 0.0], -0.3)
        x = rng.normal(size=(size, 3)) + shift[:, None]
        logit = 0.9 * x[:, 0] - 0.6 * x[:, 1] + 0.3 * (sex == "M") - 0.2
        y = (rng.random(size) < 1.0 / (1.0 + np.exp(-logit))).astype(float)
        return x, y, group, sex

    x_train, y_train, _, _ = draw(2000)
    x, y, group, sex = draw(n)
    model = LogisticRegression().fit(x_train, y_train)
    pred = model.predict(x).astype(float)
    protected = pd.DataFrame({"group": group, "sex": sex}) if two_attributes else (
        pd.Series(group, name="group"))
    return y, pred, protected, x


def _compas() -> tuple[np.ndarray, np.ndarray, pd.DataFrame, np.ndarray, np.ndarray]:
    """COMPAS with a logistic regression's decisions and a linear regression's scores."""
    data = cf.datasets.load_compas(DATA_DIR)
    features = pd.get_dummies(
        data[["age", "priors_count", "juv_fel_count", "juv_misd_count", "c_charge_degree"]],
        columns=["c_charge_degree"], dtype=float).to_numpy(dtype=float)
    y = data["two_year_recid"].to_numpy(dtype=float)
    decisions = LogisticRegression(max_iter=1000).fit(features, y).predict(features)
    decile = data["decile_score"].to_numpy(dtype=float)
    scores = LinearRegression().fit(features, decile).predict(features)
    protected = data[["race", "sex"]].reset_index(drop=True)
    return y, decisions.astype(float), protected, decile, scores


# ---------------------------------------------------------------------------------------
# Monte Carlo tolerance of a percentile bootstrap endpoint
#
# A percentile endpoint is the sample alpha-quantile of B bootstrap replicates. The
# asymptotic standard error of a sample quantile is sqrt(alpha (1 - alpha) / B) / f(q),
# with f the density of the replicate distribution at the quantile. The replicates of a
# rate (or ratio / difference) over thousands of rows are near-normal with standard
# deviation sigma, so f(q_alpha) = phi(z_alpha) / sigma, and sigma is read from the
# interval itself: sigma = (upper - lower) / (2 z_alpha). Two methods agree when their
# endpoints differ by at most 4 combined standard errors (more for many endpoints, so that
# the family-wise chance of a false alarm stays at 1e-3; an analytic endpoint has none).
# The remaining differences between the methods (skewness terms of order 1 / m for
# groups of m rows, here m >= 1000) are far below one standard error at these sizes.


def _mcse(lower: np.ndarray, upper: np.ndarray, n_boot: int) -> np.ndarray:
    alpha = (1.0 - CONFIDENCE) / 2.0
    z = norm.ppf(1.0 - alpha)
    sigma = (upper - lower) / (2.0 * z)
    return np.sqrt(alpha * (1.0 - alpha) / n_boot) * sigma / norm.pdf(z)


def _assert_agree(a: pd.DataFrame, b: pd.DataFrame, mcse_a: np.ndarray,
                  mcse_b: np.ndarray, what: str) -> None:
    a_values = a.to_numpy(dtype=float)
    b_values = b.to_numpy(dtype=float)
    both = np.isfinite(a_values) & np.isfinite(b_values)
    # 4 standard errors, or more for many endpoints: the family-wise chance of a false
    # alarm stays at 1e-3 (Bonferroni over the endpoints compared; seed shift 1 had one
    # ratio endpoint of many at 4.02 standard errors)
    k = max(4.0, float(norm.isf(5e-4 / max(int(both.sum()), 1))))
    tolerance = k * np.sqrt(mcse_a**2 + mcse_b**2) + 1e-12
    np.testing.assert_array_equal(np.isfinite(a_values), np.isfinite(b_values), err_msg=what)
    gap = np.abs(a_values - b_values)
    bad = both & (gap > tolerance)
    if bad.any():
        rows, cols = np.nonzero(bad)
        detail = [(a.index[r], a.columns[c], a_values[r, c], b_values[r, c], tolerance[r, c])
                  for r, c in zip(rows[:5], cols[:5], strict=True)]
        raise AssertionError(f"{what}: {int(bad.sum())} endpoints differ by more than "
                             f"4 MCSE, e.g. {detail}")


def _endpoint_mcse(table: pd.DataFrame, n_boot: int) -> np.ndarray:
    values = table.to_numpy(dtype=float)
    lower, upper = values[:, 0::2], values[:, 1::2]
    mcse = _mcse(lower, upper, n_boot)
    return np.repeat(mcse, 2, axis=1)


# ---------------------------------------------------------------------------------------
# Wilson against a closed form computed here


@pytest.mark.parametrize(("x", "m", "level"), [(0, 10, 0.95), (3, 10, 0.95), (10, 10, 0.9),
                                              (412, 1000, 0.95), (1, 7, 0.99)])
def test_wilson_is_the_root_pair_of_the_score_equation(x: int, m: int, level: float) -> None:
    # the Wilson bounds solve (x/m - p)**2 = z**2 p (1 - p) / m, a quadratic in p
    z = norm.ppf(0.5 + level / 2.0)
    phat = x / m
    roots = np.sort(np.roots([1.0 + z**2 / m, -(2.0 * phat + z**2 / m), phat**2]).real)
    lower, upper = wilson_interval(x, m, level)
    np.testing.assert_allclose([float(lower), float(upper)], roots, rtol=0, atol=1e-12)


def test_wilson_without_trials_is_nan() -> None:
    lower, upper = wilson_interval(np.array([0.0]), np.array([0.0]))
    assert np.isnan(lower).all() and np.isnan(upper).all()


@needs_compas
def test_analytic_rate_intervals_are_wilson_on_the_group_counts() -> None:
    y, decisions, protected, _, _ = _compas()
    report = GroupAudit(y, decisions, protected, ci_method="analytic").metrics()
    assert report.ci_method == "analytic" and report.n_bootstrap == 0
    z = norm.ppf(0.5 + CONFIDENCE / 2.0)
    counts = report.by_group
    for measure, x, m in [("tpr", counts["tp"], counts["tp"] + counts["fn"]),
                          ("predicted_prevalence", counts["tp"] + counts["fp"], counts["size"]),
                          ("accuracy", counts["tp"] + counts["tn"], counts["size"])]:
        x_ = x.to_numpy(dtype=float)
        m_ = m.to_numpy(dtype=float)
        p = x_ / m_
        centre = (x_ + z**2 / 2.0) / (m_ + z**2)
        half = z * np.sqrt(m_) / (m_ + z**2) * np.sqrt(p * (1.0 - p) + z**2 / (4.0 * m_))
        np.testing.assert_allclose(report.ci[(measure, "lower")], np.clip(centre - half, 0, 1),
                                   rtol=0, atol=1e-12)
        np.testing.assert_allclose(report.ci[(measure, "upper")], np.clip(centre + half, 0, 1),
                                   rtol=0, atol=1e-12)
    # the reference group's own ratio and difference are exactly 1 and 0
    reference = [(a, g) for a, g in report.reference.items()]
    assert (report.ratio_ci.loc[reference].to_numpy()[np.isfinite(
        report.ratio_ci.loc[reference].to_numpy())] == 1.0).all()
    assert (report.difference_ci.loc[reference].fillna(0.0).to_numpy() == 0.0).all()


# ---------------------------------------------------------------------------------------
# agreement with the exact (materialised) bootstrap


def test_analytic_classification_intervals_agree_with_the_exact_bootstrap() -> None:
    y, pred, protected, _ = _simulated(40_000, 11, two_attributes=False)
    n_boot = 1000
    exact = GroupAudit(
        y, pred, protected, n_bootstrap=n_boot, seed=shifted(3), ci_method="bootstrap",
    ).metrics()
    analytic = GroupAudit(y, pred, protected, ci_method="analytic").metrics()
    assert exact.ci_method == "bootstrap"
    for table in TABLES:
        reference = getattr(exact, table)
        _assert_agree(getattr(analytic, table), reference, 0.0 * _endpoint_mcse(reference, 1),
                      _endpoint_mcse(reference, n_boot), f"analytic vs exact, {table}")


def test_poisson_classification_intervals_agree_with_the_exact_bootstrap() -> None:
    # two attributes and their intersection: both bootstraps are stratified by the cells,
    # so the share of positive decisions is comparable too
    y, pred, protected, _ = _simulated(40_000, 12, two_attributes=True)
    n_boot = 1000
    exact = GroupAudit(
        y, pred, protected, n_bootstrap=n_boot, seed=shifted(4), ci_method="bootstrap",
    ).metrics()
    poisson_ = GroupAudit(
        y, pred, protected, n_bootstrap=n_boot, seed=shifted(5), ci_method="poisson",
    ).metrics()
    assert poisson_.ci_method == "poisson" and poisson_.n_bootstrap == n_boot
    for table in TABLES:
        a, b = getattr(poisson_, table), getattr(exact, table)
        _assert_agree(a, b, _endpoint_mcse(a, n_boot), _endpoint_mcse(b, n_boot),
                      f"Poisson vs exact, {table}")


def test_regression_intervals_agree_with_the_exact_bootstrap() -> None:
    _, _, protected, x = _simulated(30_000, 13, two_attributes=False)
    rng = np.random.default_rng(shifted(14))
    # heteroscedastic, skewed noise with finite moments (the analytic RMSE interval needs
    # finite fourth moments of the residuals; heavy tails are the bootstrap's domain)
    noise = rng.gamma(4.0, 0.5, size=x.shape[0]) - 2.0
    outcome = x @ np.array([1.0, -0.5, 0.2]) + noise * (1.0 + 0.5 * np.abs(x[:, 0]))
    half = x.shape[0] // 2
    model = LinearRegression().fit(x[:half], outcome[:half])
    # a predictor that under-predicts by 0.5: group mean residuals are many standard errors
    # from zero, so their ratios are near-normal (for a mean residual near zero the ratio has
    # no finite interval: see test_fieller_ratio_of_a_mean_near_zero_is_unbounded)
    y, pred, groups = outcome[half:], model.predict(x[half:]) - 0.5, protected.iloc[half:]
    n_boot = 1000
    exact = GroupAudit(
        y, pred, groups, task=Regression(), n_bootstrap=n_boot, seed=shifted(6),
        ci_method="bootstrap",
    ).metrics()
    analytic = GroupAudit(y, pred, groups, task=Regression(), ci_method="analytic").metrics()
    poisson_ = GroupAudit(
        y, pred, groups, task=Regression(), n_bootstrap=n_boot, seed=shifted(7),
        ci_method="poisson",
    ).metrics()
    assert analytic.ci_method == "analytic"
    for table in TABLES:
        b = getattr(exact, table)
        mcse_b = _endpoint_mcse(b, n_boot)
        _assert_agree(getattr(analytic, table), b, 0.0 * mcse_b, mcse_b,
                      f"analytic vs exact, {table}")
        a = getattr(poisson_, table)
        _assert_agree(a, b, _endpoint_mcse(a, n_boot), mcse_b, f"Poisson vs exact, {table}")


def test_fieller_ratio_of_a_mean_near_zero_is_unbounded() -> None:
    rng = np.random.default_rng(shifted(15))
    groups = pd.Series(np.repeat(["ref", "other"], 400), name="g")
    residual = np.concatenate([rng.normal(0.0, 1.0, 400), rng.normal(1.0, 1.0, 400)])
    residual[:400] -= residual[:400].mean() - 0.01  # reference mean residual 0.01, sd 0.05
    report = GroupAudit(
        residual, np.zeros(800), groups, task=Regression(), reference={"g": "ref"},
        ci_method="analytic",
    ).metrics()
    assert report.ratio_ci.loc[("g", "other"), ("mean_residual", "lower")] == -np.inf
    assert report.ratio_ci.loc[("g", "other"), ("mean_residual", "upper")] == np.inf
    # the RMSE ratio is positive and well defined: log-scale delta method, finite
    assert np.isfinite(report.ratio_ci.loc[("g", "other"), "rmse"].to_numpy()).all()


# ---------------------------------------------------------------------------------------
# the Poisson bootstrap: same numbers for any chunking and any order


@needs_compas
def test_poisson_results_do_not_depend_on_the_chunk_size() -> None:
    y, decisions, protected, decile, scores = _compas()
    n_boot = 200
    cells = len(protected.drop_duplicates())
    per_row = pb.bytes_per_row(cells, 4, n_boot)  # metrics() sums 1, y, y_pred, y * y_pred
    reports = []
    for chunk in (cf.options.MIN_CHUNK_BYTES, 2**20, 2**28):
        with cf.set_options(chunk_bytes=chunk):
            rows = cf.options.chunk_rows(per_row, y.size)
            reports.append((rows,
                            GroupAudit(
                                y, decisions, protected, n_bootstrap=n_boot, seed=shifted(21),
                                ci_method="poisson",
                            ).metrics(),
                            GroupAudit(
                                decile, scores, protected, task=Regression(), n_bootstrap=n_boot,
                                seed=shifted(21), ci_method="poisson",
                            ).metrics()))
    assert [r[0] for r in reports] == sorted({r[0] for r in reports})  # three chunk sizes
    assert reports[0][0] < 10 and reports[-1][0] == y.size
    for _, classification, regression in reports[1:]:
        for table in TABLES:
            pd.testing.assert_frame_equal(getattr(classification, table),
                                          getattr(reports[0][1], table), rtol=0, atol=1e-12)
            pd.testing.assert_frame_equal(getattr(regression, table),
                                          getattr(reports[0][2], table), rtol=0, atol=1e-12)


@needs_compas
def test_poisson_results_do_not_depend_on_the_row_order_with_row_ids() -> None:
    y, decisions, protected, decile, scores = _compas()
    ids = np.arange(y.size) * 7 + 1000  # any distinct non-negative ids
    order = np.random.default_rng(shifted(22)).permutation(y.size)
    with cf.set_options(chunk_bytes=2**20):
        first = GroupAudit(
            y, decisions, protected, n_bootstrap=150, seed=shifted(23), ci_method="poisson",
        ).metrics(row_ids=ids)
        second = GroupAudit(
            y[order], decisions[order], protected.iloc[order], n_bootstrap=150, seed=shifted(23),
            ci_method="poisson",
        ).metrics(row_ids=ids[order])
        reg_first = GroupAudit(
            decile, scores, protected, task=Regression(), n_bootstrap=150, seed=shifted(23),
            ci_method="poisson",
        ).metrics(row_ids=ids)
        reg_second = GroupAudit(
            decile[order], scores[order], protected.iloc[order], task=Regression(),
            n_bootstrap=150, seed=shifted(23), ci_method="poisson",
        ).metrics(row_ids=ids[order])
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(first, table), getattr(second, table),
                                      rtol=0, atol=1e-12)
        pd.testing.assert_frame_equal(getattr(reg_first, table), getattr(reg_second, table),
                                      rtol=0, atol=1e-12)
    # without ids the draws follow positions: a permutation changes them (the test can fail)
    third = GroupAudit(
        y[order], decisions[order], protected.iloc[order], n_bootstrap=150, seed=shifted(23),
        ci_method="poisson",
    ).metrics()
    assert not np.allclose(third.ci.to_numpy(), first.ci.to_numpy(), equal_nan=True)


def test_accumulators_merge_in_any_order_to_the_same_sums() -> None:
    rng = np.random.default_rng(shifted(24))
    n, n_strata, n_boot = 5000, 4, 64
    strata = rng.integers(0, n_strata, n)
    values = np.column_stack([np.ones(n), rng.normal(size=n), rng.random(n) < 0.3])
    whole = pb.accumulate(strata, values, n_strata=n_strata, n_replicates=n_boot, seed=shifted(99))
    bounds = [0, 700, 701, 2600, 4100, n]
    parts = []
    for start, stop in itertools.pairwise(bounds):
        part = pb.PoissonAccumulator(n_strata, values.shape[1], n_boot, shifted(99))
        part.add(strata[start:stop], values[start:stop], np.arange(start, stop))
        parts.append(part)
    merged = pb.PoissonAccumulator(n_strata, values.shape[1], n_boot, shifted(99))
    for k in rng.permutation(len(parts)):  # partitions arrive in any order
        merged.merge(parts[k])
    np.testing.assert_allclose(merged.value_sums, whole.value_sums, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(merged.weight_sums, whole.weight_sums)
    np.testing.assert_array_equal(merged.sizes, np.bincount(strata, minlength=n_strata))
    with pytest.raises(ValueError, match="same seed"):
        merged.merge(pb.PoissonAccumulator(n_strata, values.shape[1], n_boot, shifted(98)))


def test_sorted_and_matrix_product_summation_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    # few strata are summed by one matrix product per chunk, many by sorting and reduceat
    rng = np.random.default_rng(shifted(25))
    n, n_strata, n_boot = 4000, 5, 32
    strata = rng.integers(0, n_strata, n)
    values = np.column_stack([np.ones(n), rng.normal(size=n), rng.random(n) < 0.3])
    assert n_strata * (values.shape[1] + 1) <= pb.GEMM_MAX_COLUMNS
    product = pb.accumulate(strata, values, n_strata=n_strata, n_replicates=n_boot, seed=shifted(7))
    monkeypatch.setattr(pb, "GEMM_MAX_COLUMNS", 0)
    with cf.set_options(chunk_bytes=cf.options.MIN_CHUNK_BYTES):
        sorted_ = pb.accumulate(strata, values, n_strata=n_strata, n_replicates=n_boot,
                                seed=shifted(7))
    np.testing.assert_allclose(sorted_.value_sums, product.value_sums, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(sorted_.weight_sums, product.weight_sums)
    # and both equal the sums of the materialised weights (small data)
    weights = pb.poisson_weights(shifted(7), np.arange(n), n_boot)
    direct = np.stack([np.stack([(weights[strata == s] * values[strata == s, j:j + 1]).sum(axis=0)
                                 for j in range(values.shape[1])]) for s in range(n_strata)])
    np.testing.assert_allclose(product.value_sums, direct, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------
# the generator


def test_keyed_uniforms_depend_only_on_seed_key_and_replicate() -> None:
    a = pb.keyed_uniforms(5, np.array([3, 10, 11]), 8)
    b = pb.keyed_uniforms(5, np.array([11, 3]), 8)
    np.testing.assert_array_equal(a[[2, 0]], b)
    assert not np.array_equal(pb.keyed_uniforms(6, np.array([3]), 8), a[:1])
    assert ((a >= 0) & (a < 1)).all()


def test_table_inverse_cdf_equals_the_direct_inverse_cdf() -> None:
    # every CDF value, its neighbours in floating point, and a million keyed uniforms
    edges = pb.POISSON1_CDF
    u = np.concatenate([edges, np.nextafter(edges, 0.0), np.nextafter(edges, 1.0),
                        pb.keyed_uniforms(shifted(30), np.arange(10_000), 100).ravel()])
    u = u[(u >= 0.0) & (u < 1.0)]
    np.testing.assert_array_equal(pb.poisson1(u),
                                  np.searchsorted(edges, u, side="right").astype(float))


def test_poisson_weights_follow_poisson_one() -> None:
    n, n_boot = 20_000, 50
    weights = pb.poisson_weights(shifted(31), np.arange(n), n_boot).ravel()
    draws = weights.size
    # mean and variance are 1; standard errors sqrt(1 / N) and sqrt((mu4 - 1) / N), mu4 = 4
    assert abs(weights.mean() - 1.0) < 4 * np.sqrt(1.0 / draws)
    assert abs(weights.var() - 1.0) < 4 * np.sqrt(3.0 / draws)
    # each frequency within 4 binomial standard errors of its probability
    for k in range(6):
        p = poisson.pmf(k, 1.0)
        share = float(np.mean(weights == k))
        assert abs(share - p) < 4 * np.sqrt(p * (1 - p) / draws), (k, share, p)
    # row-to-row and replicate-to-replicate independence: correlation within 4 / sqrt(n)
    block = pb.poisson_weights(shifted(31), np.arange(n), 2)
    assert abs(np.corrcoef(block[:, 0], block[:, 1])[0, 1]) < 4 / np.sqrt(n)
    assert abs(np.corrcoef(block[:-1, 0], block[1:, 0])[0, 1]) < 4 / np.sqrt(n)


# ---------------------------------------------------------------------------------------
# memory: O(groups x B), never O(rows x B)


def test_chunked_run_never_builds_a_rows_by_replicates_array(
        monkeypatch: pytest.MonkeyPatch) -> None:
    y, pred, protected, _ = _simulated(100_000, 41, two_attributes=True)
    n_boot = 200
    seen: list[tuple[int, ...]] = []
    real = pb.poisson_weights

    def recording(seed: int, keys: np.ndarray, n_replicates: int) -> np.ndarray:
        out = real(seed, keys, n_replicates)
        seen.append(out.shape)
        return out

    monkeypatch.setattr(pb, "poisson_weights", recording)
    chunk = 2**20
    # 3 x 2 cells, 4 value columns (1, y, y_pred, y * y_pred)
    rows_per_chunk = chunk // pb.bytes_per_row(6, 4, n_boot)
    tracemalloc.start()
    try:
        with cf.set_options(chunk_bytes=chunk):
            report = GroupAudit(
                y, pred, protected, n_bootstrap=n_boot, ci_method="poisson",
            ).metrics()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.ci is not None
    assert sum(shape[0] for shape in seen) == y.size
    assert max(shape[0] for shape in seen) == rows_per_chunk < y.size
    assert all(shape[1] == n_boot for shape in seen)
    # the rows x B float matrix would take 160 MB; the inputs (a few columns of 100k rows)
    # and one chunk (1 MiB of working memory) take far less
    assert peak < y.size * n_boot * 8 / 8, peak

    accumulator = pb.accumulate(np.zeros(y.size, dtype=np.intp), np.ones((y.size, 4)),
                                n_strata=1, n_replicates=n_boot, seed=shifted(1))
    assert accumulator.value_sums.shape == (1, 4, n_boot)
    assert accumulator.weight_sums.shape == (1, n_boot)


# ---------------------------------------------------------------------------------------
# options and bad input


def test_auto_runs_the_exact_bootstrap_then_the_poisson_bootstrap_above_the_limit() -> None:
    assert resolve_ci_method("auto", n_bootstrap=0, n_rows=10**7) is None
    assert resolve_ci_method("auto", n_bootstrap=100, n_rows=EXACT_BOOTSTRAP_MAX_ROWS) == (
        "bootstrap")
    assert resolve_ci_method("auto", n_bootstrap=100, n_rows=EXACT_BOOTSTRAP_MAX_ROWS + 1) == (
        "poisson")
    y, pred, protected, _ = _simulated(500, 51, two_attributes=False)
    assert GroupAudit(y, pred, protected).metrics().ci_method is None
    assert GroupAudit(y, pred, protected).metrics().ci is None
    assert GroupAudit(y, pred, protected, n_bootstrap=20).metrics().ci_method == "bootstrap"


def test_bad_combinations_and_inputs_raise() -> None:
    y, pred, protected, _ = _simulated(300, 52, two_attributes=False)
    choices = re.escape(str(list(CI_METHODS)))
    def classification(*data, row_ids=None, **options):
        return GroupAudit(*data, **options).metrics(row_ids=row_ids)

    def regression(*data, row_ids=None, **options):
        return GroupAudit(*data, task=Regression(), **options).metrics(row_ids=row_ids)

    for call in (classification, regression):
        with pytest.raises(ValueError, match=f"ci_method must be one of {choices}.*'wald'"):
            call(y, pred, protected, ci_method="wald")
        with pytest.raises(ValueError, match="n_bootstrap=50 would be ignored"):
            call(y, pred, protected, ci_method="analytic", n_bootstrap=50)
        for method in ("poisson", "bootstrap"):
            with pytest.raises(ValueError, match=f"ci_method='{method}' needs n_bootstrap"):
                call(y, pred, protected, ci_method=method)
        with pytest.raises(ValueError, match="row_ids would be ignored"):
            call(y, pred, protected, ci_method="analytic", row_ids=np.arange(y.size))
        with pytest.raises(ValueError, match=f"seed={shifted(3)} would be ignored"):
            call(y, pred, protected, ci_method="analytic", seed=shifted(3))
        with pytest.raises(ValueError, match="row_ids would be ignored"):
            call(y, pred, protected, n_bootstrap=10, row_ids=np.arange(y.size))
        bad_ids = [(np.zeros(y.size, dtype=int), "distinct"),
                   (np.arange(y.size) - 1, "non-negative"),
                   (np.arange(y.size) + 0.5, "integers"),
                   (np.arange(y.size - 1), "row_ids")]
        for ids, message in bad_ids:
            with pytest.raises(ValueError, match=message):
                call(y, pred, protected, ci_method="poisson", n_bootstrap=10, row_ids=ids)
    with pytest.raises(ValueError, match="seed must be an integer"):
        GroupAudit(y, pred, protected, n_bootstrap=10, seed="7", ci_method="poisson").metrics()  # type: ignore[arg-type]


def test_report_names_the_interval_method() -> None:
    y, pred, protected, _ = _simulated(2000, 53, two_attributes=True)
    analytic = render_report(GroupAudit(y, {"model": pred}, protected, ci_method="analytic"))
    assert "Analytic intervals (95%; Wilson score and delta method)" in analytic
    poisson_ = render_report(
        GroupAudit(y, {"model": pred}, protected, n_bootstrap=40, ci_method="poisson"),
    )
    assert "Poisson bootstrap intervals (95%, 40 replicates)" in poisson_
    with pytest.raises(ValueError, match="n_bootstrap=40 would be ignored"):
        render_report(
            GroupAudit(y, {"model": pred}, protected, n_bootstrap=40, ci_method="analytic"),
        )


def test_a_one_row_cell_keeps_its_row_in_every_poisson_replicate() -> None:
    # a cell of one row: the exact stratified bootstrap always redraws that row; the
    # Poisson bootstrap rescales its weight to 1, or keeps the observed row when the
    # weight is 0 (probability exp(-1)), so both give the degenerate interval
    y, pred, _, _ = _simulated(3000, 54, two_attributes=False)
    group = np.where(np.arange(y.size) == 17, "single", "many")
    protected = pd.DataFrame({"g": group, "h": np.where(np.arange(y.size) % 2, "u", "v")})
    cell = ("g x h", f"single x {protected['h'][17]}")
    for method in ("bootstrap", "poisson"):
        report = GroupAudit(
            y, pred, protected, n_bootstrap=60, seed=shifted(55), ci_method=method,
        ).metrics()
        accuracy = report.by_group.loc[cell, "accuracy"]
        assert report.ci.loc[cell, ("accuracy", "lower")] == accuracy
        assert report.ci.loc[cell, ("accuracy", "upper")] == accuracy


def test_analytic_intervals_cover_the_true_rates_ratio_and_difference() -> None:
    # R independent data sets of two groups with known rates; each interval covers the
    # truth with probability 0.95, so the share of R that cover is 0.95 up to a binomial
    # standard error sqrt(0.95 * 0.05 / R); allowed: 4 standard errors
    rng = np.random.default_rng(shifted(61))
    replications, sizes, rates = 4000, np.array([600, 400]), np.array([0.5, 0.3])
    successes = rng.binomial(sizes[:, None], rates[:, None], size=(2, replications))
    trials = np.broadcast_to(sizes[:, None], successes.shape).astype(float)
    lower, upper = wilson_interval(successes, trials, CONFIDENCE)
    (ratio_lower, ratio_upper), (diff_lower, diff_upper) = disparity_intervals(
        successes / trials, binomial_variance(successes, trials), np.array([0, 0]),
        CONFIDENCE)
    tolerance = 4 * np.sqrt(CONFIDENCE * (1 - CONFIDENCE) / replications)
    truths = [(lower[1], upper[1], rates[1]),
              (ratio_lower[1], ratio_upper[1], rates[1] / rates[0]),
              (diff_lower[1], diff_upper[1], rates[1] - rates[0])]
    for low, high, truth in truths:
        coverage = float(np.mean((low <= truth) & (truth <= high)))
        assert abs(coverage - CONFIDENCE) < tolerance, (truth, coverage)


def test_two_group_measures_analytic_and_poisson_agree_with_the_exact_bootstrap() -> None:
    y, pred, protected, _ = _simulated(30_000, 71, two_attributes=False)
    group = protected.to_numpy()
    n_boot = 1000
    tables = {method: GroupAudit(
        y, pred, group, n_bootstrap=0 if method == "analytic" else n_boot,
        seed=shifted(72) if method != "analytic" else 0, ci_method=method,
    ).two_group(reference="a")
              for method in ("bootstrap", "poisson", "analytic")}
    exact = tables["bootstrap"][["lower", "upper"]]
    mcse_exact = _endpoint_mcse(exact, n_boot)
    poisson_ = tables["poisson"][["lower", "upper"]]
    _assert_agree(poisson_, exact, _endpoint_mcse(poisson_, n_boot), mcse_exact,
                  "two groups, Poisson vs exact")
    _assert_agree(tables["analytic"][["lower", "upper"]], exact, 0.0 * mcse_exact, mcse_exact,
                  "two groups, analytic vs exact")
    with cf.set_options(chunk_bytes=cf.options.MIN_CHUNK_BYTES):
        small_chunks = GroupAudit(
            y, pred, group, n_bootstrap=n_boot, seed=shifted(72), ci_method="poisson",
        ).two_group(reference="a")
    pd.testing.assert_frame_equal(small_chunks, tables["poisson"], rtol=0, atol=1e-12)


def test_disparate_impact_analytic_and_poisson_agree_with_the_exact_bootstrap() -> None:
    _, pred, protected, _ = _simulated(30_000, 81, two_attributes=False)
    group = protected.to_numpy()
    n_boot = 1000
    results = {method: GroupAudit(
        None, pred, group, n_bootstrap=0 if method == "analytic" else n_boot,
        seed=shifted(82) if method != "analytic" else 0, ci_method=method,
    ).disparate_impact("c", reference="a")
               for method in ("bootstrap", "poisson", "analytic")}

    def bounds(result: DisparateImpact) -> pd.DataFrame:
        return pd.DataFrame([[result.ci_lower, result.ci_upper]])

    exact = bounds(results["bootstrap"])
    mcse_exact = _endpoint_mcse(exact, n_boot)
    poisson_ = bounds(results["poisson"])
    _assert_agree(poisson_, exact, _endpoint_mcse(poisson_, n_boot), mcse_exact,
                  "disparate impact, Poisson vs exact")
    _assert_agree(bounds(results["analytic"]), exact, 0.0 * mcse_exact, mcse_exact,
                  "disparate impact, analytic vs exact")
    with pytest.raises(ValueError, match="n_bootstrap=5 would be ignored"):
        GroupAudit(None, pred, group, n_bootstrap=5, ci_method="analytic").disparate_impact("c")
