"""The group audits on Dask inputs, on a real distributed.LocalCluster with two workers.

The rows are real: UCI Adult (income, decisions of a logistic regression, race and
sex) and the law school data (ZFYA, predictions of a linear regression, race and sex).
Each report on Dask inputs, split into 1, 3 or 7 partitions, is compared with the
in-memory report of the same rows: counts exactly, sums and intervals to rounding.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe", reason="dask is not installed (the [dask] extra)")
distributed = pytest.importorskip("distributed", reason="distributed is not installed")

from _data import DATA_DIR  # noqa: E402
from _seeds import shifted  # noqa: E402
from sklearn.linear_model import LinearRegression, LogisticRegression  # noqa: E402

import counterfair as cf  # noqa: E402
from counterfair.dask import group_audits as dask_groups  # noqa: E402

PARTITIONS = (1, 3, 7)
RTOL = 1e-10


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    data = cf.datasets.load_adult(DATA_DIR)
    features = ["age", "education-num", "hours-per-week", "capital-gain"]
    model = LogisticRegression(max_iter=500).fit(data[features], data["income"])
    rows = data[["race", "sex", "income"]].copy()
    rows["score"] = model.predict_proba(data[features])[:, 1]
    rows["decision"] = (rows["score"] >= 0.3).astype(np.int64)
    return rows.reset_index(drop=True)


@pytest.fixture(scope="module")
def law() -> pd.DataFrame:
    data = cf.datasets.load_law_school(data_home=DATA_DIR)
    model = LinearRegression().fit(data[["UGPA", "LSAT"]], data["ZFYA"])
    rows = data[["race", "sex", "ZFYA"]].copy()
    rows["prediction"] = model.predict(data[["UGPA", "LSAT"]])
    return rows.reset_index(drop=True)


def assert_reports_equal(a, b) -> None:
    pd.testing.assert_frame_equal(a.by_group, b.by_group, rtol=RTOL, atol=1e-14)
    pd.testing.assert_frame_equal(a.ratios, b.ratios, rtol=RTOL, atol=1e-14)
    pd.testing.assert_frame_equal(a.differences, b.differences, rtol=RTOL, atol=1e-14)
    assert a.reference == b.reference
    assert a.ci_method == b.ci_method
    for name in ("ci", "ratio_ci", "difference_ci"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            pd.testing.assert_frame_equal(x, y, rtol=RTOL, atol=1e-12)


@pytest.mark.parametrize("options", [
    {"ci_method": "analytic"},
    {"ci_method": "poisson", "n_bootstrap": 40, "seed": 11},
    {},
])
def test_regression_audit_equals_in_memory_for_any_partitioning(client, law, options):
    expected = cf.audit.GroupAudit(
        law["ZFYA"].to_numpy(), law["prediction"].to_numpy(), law[["race", "sex"]],
        task=cf.audit.group_audit.Regression(), **options,
    ).metrics()
    for n in PARTITIONS:
        ddf = dd.from_pandas(law, npartitions=n)
        # predictions as NumPy (what FairLearner.predict(ddf) returns) and as a Dask column
        for y_pred in (law["prediction"].to_numpy(), ddf["prediction"]):
            got = cf.audit.GroupAudit(
                ddf["ZFYA"], y_pred, ddf[["race", "sex"]], task=cf.audit.group_audit.Regression(),
                **options,
            ).metrics()
            assert_reports_equal(expected, got)
    assert expected.by_group["size"].sum() == 3 * len(law)  # race, sex, race x sex


@pytest.mark.parametrize("options", [
    {"ci_method": "analytic"},
    {"ci_method": "poisson", "n_bootstrap": 40, "seed": 11},
])
def test_classification_audit_equals_in_memory_for_any_partitioning(client, adult, options):
    for column in ("score", "decision"):
        expected = cf.audit.GroupAudit(
            adult["income"], adult[column], adult[["race", "sex"]],
            task=cf.audit.group_audit.Classification(threshold=0.3), **options,
        ).metrics()
        for n in PARTITIONS:
            ddf = dd.from_pandas(adult, npartitions=n)
            got = cf.audit.GroupAudit(
                ddf["income"], ddf[column], ddf[["race", "sex"]],
                task=cf.audit.group_audit.Classification(threshold=0.3), **options,
            ).metrics()
            assert_reports_equal(expected, got)
            pd.testing.assert_frame_equal(expected.verdicts, got.verdicts)


def test_columns_of_parquet_files_are_cut_alike(client, law, tmp_path):
    # reading one or two columns of ten parquet files, Dask fuses files into fewer
    # partitions, differently for different columns: the inputs are joined into one
    # frame first, and NumPy predictions are cut at that frame's partition boundaries
    for i, block in enumerate(np.array_split(np.arange(len(law)), 10)):
        law.iloc[block].to_parquet(tmp_path / f"part-{i}.parquet", index=False)
    rows = dd.read_parquet(str(tmp_path))
    assert len(rows["ZFYA"].to_delayed()) != len(rows.to_delayed())  # fused differently
    for options in ({"ci_method": "analytic"},
                    {"ci_method": "poisson", "n_bootstrap": 20, "seed": 1}):
        expected = cf.audit.GroupAudit(
            law["ZFYA"], law["prediction"], law[["race", "sex"]],
            task=cf.audit.group_audit.Regression(), **options,
        ).metrics()
        got = cf.audit.GroupAudit(
            rows["ZFYA"], law["prediction"].to_numpy(), rows[["race", "sex"]],
            task=cf.audit.group_audit.Regression(), **options,
        ).metrics()
        assert_reports_equal(expected, got)


def test_scores_in_one_partition_only_are_thresholded_everywhere(client, adult):
    # the first partition holds only 0/1 values: alone it would be read as decisions,
    # but the audit decides once for all rows, as the in-memory call does
    rows = adult.copy()
    rows.loc[: len(rows) // 2, "score"] = rows.loc[: len(rows) // 2, "decision"]
    expected = cf.audit.GroupAudit(
        rows["income"], rows["score"], rows[["race", "sex"]],
        task=cf.audit.group_audit.Classification(threshold=0.3),
    ).metrics()
    ddf = dd.from_pandas(rows, npartitions=4)
    got = cf.audit.GroupAudit(
        ddf["income"], ddf["score"], ddf[["race", "sex"]],
        task=cf.audit.group_audit.Classification(threshold=0.3),
    ).metrics()
    assert_reports_equal(expected, got)


def test_exact_bootstrap_collects_small_inputs_and_refuses_large_ones(client, law,
                                                                      monkeypatch):
    rows = law.iloc[:3000]
    ddf = dd.from_pandas(rows, npartitions=3)
    expected = cf.audit.GroupAudit(
        rows["ZFYA"], rows["prediction"], rows[["sex"]], task=cf.audit.group_audit.Regression(),
        n_bootstrap=30, seed=shifted(2),
    ).metrics()
    got = cf.audit.GroupAudit(
        ddf["ZFYA"], ddf["prediction"], ddf[["sex"]], task=cf.audit.group_audit.Regression(),
        n_bootstrap=30, seed=shifted(2),
    ).metrics()
    assert got.ci_method == "bootstrap"
    assert_reports_equal(expected, got)
    monkeypatch.setattr(dask_groups, "EXACT_BOOTSTRAP_MAX_ROWS", 1000)
    with pytest.raises(ValueError, match=r"3,000 rows.*'poisson' or 'analytic'"):
        cf.audit.GroupAudit(
            ddf["ZFYA"], ddf["prediction"], ddf[["sex"]], task=cf.audit.group_audit.Regression(),
            n_bootstrap=30, ci_method="bootstrap",
        ).metrics()


def test_bad_inputs_name_the_partition_and_the_input(client, law):
    rows = law.iloc[:2100].copy()
    rows.loc[1500, "ZFYA"] = np.nan
    ddf = dd.from_pandas(rows, npartitions=3)
    with pytest.raises(ValueError, match=r"partition 2 \(global rows 1400\.\.2099\).*y_true"):
        cf.audit.GroupAudit(
            ddf["ZFYA"], ddf["prediction"], ddf[["race"]], task=cf.audit.group_audit.Regression(),
        ).metrics()
    with pytest.raises(ValueError, match="y_pred has 5 rows but the Dask inputs have 2,100"):
        cf.audit.GroupAudit(
            ddf["ZFYA"], np.zeros(5), ddf[["race"]], task=cf.audit.group_audit.Regression(),
        ).metrics()
    other = dd.from_pandas(rows, npartitions=2)
    with pytest.raises(ValueError, match=r"y_true has 3 partitions but the other Dask inputs "
                                         r"have 2"):
        cf.audit.GroupAudit(
            ddf["ZFYA"], ddf["prediction"], other[["race"]],
            task=cf.audit.group_audit.Regression(),
        ).metrics()
    with pytest.raises(ValueError, match="row_ids= cannot be used with Dask inputs"):
        cf.audit.GroupAudit(
            ddf["ZFYA"], ddf["prediction"], ddf[["race"]], task=cf.audit.group_audit.Regression(),
            n_bootstrap=5, ci_method="poisson",
        ).metrics(row_ids=np.arange(len(rows)))
    labels = dd.from_pandas(law.iloc[:2100].assign(income=2), npartitions=3)
    with pytest.raises(ValueError, match=r"partition \d.*y_true must contain binary labels"):
        cf.audit.GroupAudit(labels["income"], labels["prediction"], labels[["sex"]]).metrics()


def test_cell_coder_numbers_rows_as_the_whole_frame(law):
    from counterfair.audit._groups import CellCoder, build_layout, protected_frame

    frame = protected_frame(law[["race", "sex"]])
    whole = build_layout(frame)
    cells = frame.drop_duplicates().sample(frac=1.0, random_state=shifted(4))
    coder = CellCoder.of(cells)
    assert coder.layout.labels == whole.labels
    np.testing.assert_array_equal(coder.strata(frame), whole.strata)
    with pytest.raises(ValueError, match="partition 9: protected attribute 'race' has the "
                                         "value 'Martian'"):
        coder.strata(pd.DataFrame({"race": ["Martian"], "sex": ["Male"]}), "partition 9")
