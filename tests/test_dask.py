"""The same calls on a dask.dataframe.DataFrame, on a real distributed.LocalCluster.

One cluster of two worker processes serves the module. Every result is compared with
the in-memory call on the same rows; repartitioning the rows (1, 3, 7 partitions)
does not change it; a worker killed during a run (its process exits in the middle of
a task) is replaced, the task rerun, and the result is the same; the parquet output
appears only when complete.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe", reason="dask is not installed (the [dask] extra)")
distributed = pytest.importorskip("distributed", reason="distributed is not installed")

import cloudpickle  # noqa: E402 - a dependency of distributed
from _models import law_level2_fit, law_test, law_train  # noqa: E402
from _seeds import shifted  # noqa: E402
from sklearn.linear_model import LinearRegression, LogisticRegression  # noqa: E402

import counterfair as cf  # noqa: E402
from counterfair.dask import WORKER_CONFIG, WORKER_ENV  # noqa: E402
from counterfair.dask import parquet as dask_parquet  # noqa: E402
from counterfair.dask.row_calls import run_partitions  # noqa: E402
from counterfair.rows.measure import Measure  # noqa: E402
from counterfair.rows.measure import run as run_measure  # noqa: E402
from counterfair.rows.validated import Rows  # noqa: E402

pytestmark = pytest.mark.stan

# the workers unpickle this module's predictors by value: they cannot import tests/
cloudpickle.register_pickle_by_value(sys.modules[__name__])

PARTITIONS = (1, 3, 7)


@pytest.fixture(scope="module")
def models(stan_backend):
    fit = law_level2_fit().fit
    train = law_train().drop(columns="K")
    rows = law_test().drop(columns=["K"])
    learner = cf.FairLearner(
        fit,
        target="ZFYA",
        features=cf.inputs.Latent(),
        n_samples=20,
        seed=shifted(5),
    ).fit(train)
    full = cf.full_predictor(fit.scm, "ZFYA").fit(train)
    classifier = cf.BaselinePredictor(
        ["UGPA", "LSAT"], "sex", estimator=LogisticRegression()
    ).fit(train)
    return fit, rows, learner, full, classifier


def frames(rows: pd.DataFrame) -> dict[int, object]:
    return {n: dd.from_pandas(rows, npartitions=n) for n in PARTITIONS}


class KillOnce:
    """A predictor whose first call in a worker process ends that process (os._exit).

    The marker file makes it happen once: the rerun of the task on a new worker finds
    the marker and predicts. In the client's process it never kills.
    """

    def __init__(self, base: object, marker: Path) -> None:
        self.base = base
        self.marker = str(marker)
        self.client_pid = os.getpid()

    def __call__(self, frame: pd.DataFrame) -> np.ndarray:
        if os.getpid() != self.client_pid and not os.path.exists(self.marker):
            with open(self.marker, "w") as handle:
                handle.write(str(os.getpid()))
            os._exit(1)
        return self.base.predict(frame)  # type: ignore[attr-defined]


class FailOn:
    """A predictor that raises when it sees the row labelled ``label`` (a failure midway)."""

    def __init__(self, base: object, label: int) -> None:
        self.base = base
        self.label = label

    def __call__(self, frame: pd.DataFrame) -> np.ndarray:
        labels = frame["row"] if "row" in frame.columns else frame.index
        if self.label in set(labels):
            raise RuntimeError("simulated failure in the middle of the run")
        return self.base.predict(frame)  # type: ignore[attr-defined]


# ---------------------------------------------------------------------- equivalence
def test_baselines_equal_in_memory_for_any_partitioning(client, models):
    _, rows, _, full, classifier = models
    expected = full.predict(rows)
    expected_proba = classifier.predict_proba(rows)
    for n, ddf in frames(rows).items():
        got = full.predict(ddf)
        assert isinstance(got, np.ndarray) and got.shape == expected.shape, n
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
        np.testing.assert_allclose(classifier.predict_proba(ddf), expected_proba, atol=1e-12)
        assert (classifier.predict(ddf) == classifier.predict(rows)).all()


def test_predictions_written_as_parquet(client, models, tmp_path):
    _, rows, learner, full, _ = models
    for predictor in (learner, full):
        folder = tmp_path / type(predictor).__name__
        out = predictor.predict(dd.from_pandas(rows, npartitions=3), rows_out=folder)
        got = out.compute()
        assert list(got.columns) == ["row", "position", "prediction"]
        np.testing.assert_allclose(got["prediction"], predictor.predict(rows), atol=1e-12)
        np.testing.assert_array_equal(got["row"], rows.index)
        np.testing.assert_array_equal(got["position"], np.arange(len(rows)))
        with pytest.raises(ValueError, match="rows_out= and overwrite= write a Dask"):
            predictor.predict(rows, rows_out=tmp_path / "q")
        assert not (tmp_path / "q").exists()
        with pytest.raises(cf.errors.DataError, match="not empty"):
            predictor.predict(dd.from_pandas(rows, npartitions=2), rows_out=folder)
        predictor.predict(dd.from_pandas(rows, npartitions=2), rows_out=folder, overwrite=True)
        assert len(list(folder.iterdir())) == 2  # the new run's two partitions


def test_fair_learner_predict_equals_in_memory_for_any_partitioning(client, models):
    _, rows, learner, _, _ = models
    expected = learner.predict(rows)
    for n, ddf in frames(rows).items():
        np.testing.assert_allclose(learner.predict(ddf), expected, rtol=0, atol=1e-12, err_msg=n)
    # the draws are those of the rows, not of the partition: shifted rows predict otherwise
    shifted = learner.predict(dd.from_pandas(rows.iloc[1:], npartitions=2))
    assert not np.allclose(shifted, expected[1:], rtol=0, atol=1e-12)


def test_latents_equal_in_memory_for_any_partitioning(client, models):
    fit, rows, _, _, _ = models
    expected = fit.latents(rows, n_samples=30, seed=shifted(2))
    for n, ddf in frames(rows).items():
        got = fit.latents(ddf, n_samples=30, seed=shifted(2))
        assert got.keys() == expected.keys()
        np.testing.assert_array_equal(got["K"], expected["K"], err_msg=str(n))


def test_model_is_sent_to_each_worker_once(client, models):
    full = models[3]

    def where(model, part, start, number):
        return os.getpid(), id(model), start, len(part)

    ddf = dd.from_pandas(models[1], npartitions=7)
    seen = run_partitions(ddf, full, where)
    ids_by_worker: dict[int, set[int]] = {}
    for pid, ident, _, _ in seen:
        ids_by_worker.setdefault(pid, set()).add(ident)
    assert all(len(ids) == 1 for ids in ids_by_worker.values()), ids_by_worker
    assert os.getpid() not in ids_by_worker  # the work ran on the workers
    starts = [s for _, _, s, _ in seen]
    lengths = [n for _, _, _, n in seen]
    assert starts == list(np.concatenate([[0], np.cumsum(lengths)[:-1]]))  # global positions
    assert sum(lengths) == len(models[1])


def test_counterfactual_audit_equals_in_memory_for_any_partitioning(client, models, tmp_path):
    fit, rows, _, full, _ = models
    expected = cf.audit.counterfactual_fairness(
        fit, rows, full,
        settings=cf.audit.AuditSettings(n_samples=20, seed=shifted(3), keep_samples=True),
    )
    key = ["attribute", "to_level", "row", "sample"]
    for n, ddf in frames(rows).items():
        out = tmp_path / f"changes-{n}"
        report = cf.audit.counterfactual_fairness(
            fit, ddf, full, settings=cf.audit.AuditSettings(n_samples=20, seed=shifted(3)),
            rows_out=out,
        )
        pd.testing.assert_frame_equal(report.by_group, expected.by_group, rtol=1e-12)
        pd.testing.assert_frame_equal(report.overall, expected.overall, rtol=1e-12)
        assert report.changes.attrs["rows_out"] == str(out)
        written = pd.read_parquet(out).sort_values(key, ignore_index=True)
        mine = expected.changes.sort_values(key, ignore_index=True)
        np.testing.assert_allclose(written["change"], mine["change"], rtol=0, atol=1e-12)
        assert len(list(out.iterdir())) == n


def test_decomposition_equals_in_memory_for_any_partitioning(client, models):
    """cf.audit.decompose of a Dask frame: per-partition sums merged on the workers equal
    the in-memory decomposition (outcome and a predictor), for any partitioning."""
    fit, rows, learner, full, _ = models
    settings = {"attribute": "race", "x0": "White", "x1": "Black",
                "settings": cf.audit.DecompositionSettings(
                    n_samples=20, seed=3,  # literal seed: Dask is compared with memory
                )}
    for option in ({"outcome": "UGPA"}, {"predictor": full}, {"predictor": learner}):
        expected = cf.audit.decompose(fit, rows, **settings, **option)
        for n, ddf in frames(rows).items():
            got = cf.audit.decompose(fit, ddf, **settings, **option)
            assert (got.n_rows, got.n_x0, got.n_x1) == (
                expected.n_rows, expected.n_x0, expected.n_x1), n
            np.testing.assert_allclose(got.draws, expected.draws, rtol=1e-10, atol=1e-12)
            assert got.notes == expected.notes


@dataclasses.dataclass(frozen=True)
class LatentSums(Measure[dict[int, tuple[float, int]], pd.Series]):
    """A measure written for this test only: the posterior mean of K by race. It is not
    in the package; it runs on Dask with the package's numbers by being a measure."""

    fit: cf.Fit | None
    n_samples: int
    seed: int

    @property
    def model(self) -> cf.Fit | None:
        return self.fit

    def with_model(self, model: object) -> LatentSums:
        return dataclasses.replace(self, fit=model)

    def rows(self, data: pd.DataFrame, positions: np.ndarray | None = None) -> Rows:
        assert self.fit is not None
        return self.fit.rows_of(data, positions=positions)

    def empty(self) -> dict[int, tuple[float, int]]:
        return {}

    def sums(self, rows: Rows) -> dict[int, tuple[float, int]]:
        assert self.fit is not None
        abduction = self.fit.abduct(rows, n_samples=self.n_samples, seed=self.seed)
        k = np.asarray(abduction.latents["K"]).mean(axis=0)
        codes = np.asarray(rows.codes["race"])
        return {int(c): (float(k[codes == c].sum()), int((codes == c).sum()))
                for c in np.unique(codes)}

    def merge(self, a: dict[int, tuple[float, int]], b: dict[int, tuple[float, int]]
              ) -> dict[int, tuple[float, int]]:
        out = dict(a)
        for code, (total, count) in b.items():
            old = out.get(code, (0.0, 0))
            out[code] = (old[0] + total, old[1] + count)
        return out

    def result(self, total: dict[int, tuple[float, int]], *, columns: object) -> pd.Series:
        return pd.Series({code: s / n for code, (s, n) in sorted(total.items())})


def test_a_new_measure_runs_on_dask_with_the_in_memory_numbers(client, models):
    """The one driver (counterfair.rows.measure.run): a measure defined outside the
    package gives, on 1, 3 or 7 partitions, the numbers it gives in memory."""
    fit, rows, *_ = models
    measure = LatentSums(fit, n_samples=10, seed=shifted(6))
    expected = run_measure(measure, rows)
    assert len(expected) == rows["race"].nunique() and np.isfinite(expected).all()
    for n, ddf in frames(rows).items():
        got = run_measure(measure, ddf)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, err_msg=str(n))


def test_audit_of_a_per_row_intervention_equals_in_memory(client, models):
    fit, rows, _, full, _ = models
    lsat = rows["LSAT"].to_numpy() + np.arange(len(rows)) % 3  # do(LSAT = LSAT + 0, 1 or 2)
    expected = cf.audit.counterfactual_fairness(
        fit, rows, full,
        settings=cf.audit.AuditSettings(n_samples=10, seed=shifted(4), do={"LSAT": lsat}),
    )
    for n in (3, 7):
        report = cf.audit.counterfactual_fairness(
            fit, dd.from_pandas(rows, npartitions=n), full,
            settings=cf.audit.AuditSettings(n_samples=10, seed=shifted(4), do={"LSAT": lsat}),
        )
        pd.testing.assert_frame_equal(report.by_group, expected.by_group, rtol=1e-12)
    with pytest.raises(cf.errors.DataError, match="LSAT"):
        cf.audit.counterfactual_fairness(
            fit, dd.from_pandas(rows, npartitions=3), full,
            settings=cf.audit.AuditSettings(do={"LSAT": lsat[:-1]}),
        )


def test_fair_learner_audit_shares_the_fit_on_the_workers(client, models):
    fit, rows, learner, _, _ = models
    rows = rows.drop(columns="ZFYA")
    expected = cf.audit.counterfactual_fairness(
        fit, rows, learner, settings=cf.audit.AuditSettings(n_samples=20, seed=shifted(3)),
    )
    reports = [
        cf.audit.counterfactual_fairness(
            fit, dd.from_pandas(rows, npartitions=n), learner,
            settings=cf.audit.AuditSettings(n_samples=20, seed=shifted(3)),
        )
        for n in (1, 3)
    ]
    pd.testing.assert_frame_equal(reports[0].by_group, reports[1].by_group, rtol=1e-12)
    report = reports[1]
    # every column, the flip test's too: it abducts the flipped rows again by their
    # global positions, in memory as on Dask
    pd.testing.assert_frame_equal(report.by_group, expected.by_group, rtol=1e-12)
    pd.testing.assert_frame_equal(report.overall, expected.overall, rtol=1e-12)
    assert (report.overall["mean_abs_change"] == 0.0).all()  # Fair K does not move
    assert (report.overall["flip_mean_abs_change"] > 0).all()  # the flip test says it does


# ---------------------------------------------------------------------- every predictor kind
AUDIT_SAMPLES = 10
CHANGE_KEY = ["attribute", "from_level", "to_level", "row", "sample"]


@pytest.fixture(scope="module")
def predictor_kinds(models):
    """Every kind of predictor the audit takes, each with the audit's options: a plain
    scikit-learn estimator on observed columns, the baselines, FairLearners (Fair K, its
    bound ``predict``, Fair Add residuals, path-specific inputs), the multi-world learner,
    a non-causal post-processing, and a path-specific audit."""
    fit, _, learner, full, classifier = models
    train = law_train().drop(columns="K")
    plain = LinearRegression().fit(train[["UGPA", "LSAT"]], train["ZFYA"])
    fair_add = cf.FairLearner(
        fit,
        target="ZFYA",
        features=cf.inputs.AdditiveNoise(),
        n_samples=20,
        seed=shifted(6),
    ).fit(train)
    path_learner = cf.FairLearner(
        fit,
        target="ZFYA",
        features=cf.inputs.PathSpecific(unfair_paths=[("race", "UGPA")], baseline="White"),
        n_samples=20,
        seed=shifted(7),
    ).fit(train)
    multiworld = cf.MultiWorldLearner(
        fits=[fit], target="ZFYA", features=["UGPA", "LSAT", "race"], attribute="race",
        n_samples=5, seed=shifted(8),
    ).fit(train)
    order = cf.OrderPreservingPredictor(full, attribute="race", prefit=True).fit(train)
    # a FairLearner of another fit (an equal copy): it abducts its own inputs in every
    # world, for each row and sample, keyed by the row's global position and the sample
    other = cf.FairLearner(
        copy.copy(fit),
        target="ZFYA",
        features=cf.inputs.Latent(),
        n_samples=10,
        seed=shifted(5),
    ).fit(train)
    return {
        "sklearn": (plain, {}),
        "full": (full, {}),
        "baseline classifier": (classifier, {"response": "probability"}),
        "Fair K": (learner, {}),
        "Fair K predict": (learner.predict, {}),
        "Fair Add": (fair_add, {}),
        "Fair K path-specific audit": (learner, {"unfair_paths": [("race", "UGPA")]}),
        "path-specific learner": (path_learner, {}),
        "multi-world": (multiworld, {}),
        "order preserving": (order, {}),
        "Fair K do=": (learner, {"do": {"race": "Black"}}),
        "Fair K of another fit": (other, {}),
    }


KINDS = (
    "sklearn", "full", "baseline classifier", "Fair K", "Fair K predict", "Fair Add",
    "Fair K path-specific audit", "path-specific learner", "multi-world", "order preserving",
    "Fair K do=", "Fair K of another fit",
)


@pytest.mark.parametrize("kind", KINDS)
def test_audit_equals_in_memory_in_every_column(client, models, predictor_kinds, kind, tmp_path):
    """A Dask audit equals the in-memory audit in every column of its summaries (the flip
    test's too) for any partitioning, and its written rows x samples equal the in-memory
    changes in every column: each row draws by its global position in both."""
    fit, rows, _, _, _ = models
    rows = rows.drop(columns="ZFYA")
    predictor, options = predictor_kinds[kind]
    settings = cf.audit.AuditSettings(n_samples=AUDIT_SAMPLES, seed=shifted(9), **options)
    expected = cf.audit.counterfactual_fairness(
        fit, rows, predictor, settings=dataclasses.replace(settings, keep_samples=True)
    )
    assert expected.changes is not None
    for n, ddf in frames(rows).items():
        report = cf.audit.counterfactual_fairness(fit, ddf, predictor, settings=settings)
        pd.testing.assert_frame_equal(report.by_group, expected.by_group, rtol=1e-12,
                                      obj=f"{kind}, {n} partitions: by_group")
        pd.testing.assert_frame_equal(report.overall, expected.overall, rtol=1e-12,
                                      obj=f"{kind}, {n} partitions: overall")
    out = tmp_path / "rows"
    cf.audit.counterfactual_fairness(
        fit, dd.from_pandas(rows, npartitions=3), predictor, rows_out=out, settings=settings
    )
    written = pd.read_parquet(out).sort_values(CHANGE_KEY, ignore_index=True)
    mine = expected.changes.sort_values(CHANGE_KEY, ignore_index=True)
    assert list(written.columns) == list(mine.columns)
    pd.testing.assert_frame_equal(
        written, mine, check_dtype=False, check_categorical=False, rtol=1e-12, atol=1e-12,
        obj=f"{kind}: rows x samples",
    )
    flips = expected.by_group["flip_mean_abs_change"]
    assert flips.notna().all()


def test_flip_test_of_a_subset_equals_the_full_audit_on_its_rows(models):
    """A subset of the rows audited in memory with an abduction at their global positions
    (fit.abduct(positions=)) gives each row the flip and causal results it has in the
    audit of all rows."""
    fit, rows, learner, _, _ = models
    rows = rows.drop(columns="ZFYA")
    settings = cf.audit.AuditSettings(n_samples=AUDIT_SAMPLES, seed=shifted(10), keep_samples=True)
    full = cf.audit.counterfactual_fairness(fit, rows, learner, settings=settings)
    picked = np.sort(np.random.default_rng(shifted(11)).choice(len(rows), 37, replace=False))
    abduction = fit.abduct(  # the audit's own abduction, at the subset's positions
        rows.iloc[picked], method="draws", n_samples=AUDIT_SAMPLES,
        n_param_draws=min(AUDIT_SAMPLES, 20), seed=shifted(10), positions=picked,
    )
    part = cf.audit.counterfactual_fairness(
        fit, rows.iloc[picked], learner, abduction=abduction,
        settings=dataclasses.replace(settings, n_samples=None),
    )
    key = ["attribute", "to_level", "row"]
    mine = part.rows.sort_values(key, ignore_index=True)
    theirs = (
        full.rows[full.rows["row"].isin(rows.index[picked])]
        .sort_values(key, ignore_index=True)
    )
    pd.testing.assert_frame_equal(mine, theirs, rtol=1e-12, atol=1e-12)
    assert (mine["flip_change"].abs() > 0).any()  # the flip test moves Fair K
    assert part.changes is not None and full.changes is not None
    mine_changes = part.changes.sort_values(CHANGE_KEY, ignore_index=True)
    theirs_changes = (
        full.changes[full.changes["row"].isin(rows.index[picked])]
        .sort_values(CHANGE_KEY, ignore_index=True)
    )
    pd.testing.assert_frame_equal(mine_changes, theirs_changes, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["Fair K", "Fair Add", "Fair K of another fit"])
def test_in_memory_audit_does_not_depend_on_the_chunks(models, predictor_kinds, kind):
    """Every column of the in-memory audit, the flip test's and (for a FairLearner of
    another fit, which abducts again in every world) the causal ones, is the same for the
    smallest chunks as for one chunk: no draw is keyed by a row's place in a chunk or in
    the subset of rows a world or a flip test holds."""
    fit, rows, _, _, _ = models
    rows = rows.drop(columns="ZFYA")
    predictor, options = predictor_kinds[kind]
    settings = cf.audit.AuditSettings(n_samples=AUDIT_SAMPLES, seed=shifted(12), **options)
    whole = cf.audit.counterfactual_fairness(fit, rows, predictor, settings=settings)
    with cf.set_options(chunk_bytes=2**16):  # the smallest chunks: a few rows each
        chunked = cf.audit.counterfactual_fairness(fit, rows, predictor, settings=settings)
    pd.testing.assert_frame_equal(chunked.by_group, whole.by_group, rtol=1e-12)
    pd.testing.assert_frame_equal(chunked.overall, whole.overall, rtol=1e-12)
    pd.testing.assert_frame_equal(chunked.rows, whole.rows, rtol=1e-12)


def test_flip_test_predicts_the_flipped_rows_at_their_global_positions(models):
    """The flip test of each level swap predicts the flipped rows, a subset of the rows,
    at their positions among all the audited rows: as FairLearner.predict of those rows
    given their global positions, not as a frame of its own numbered from 0."""
    fit, rows, learner, _, _ = models
    rows = rows.drop(columns="ZFYA")
    full = cf.audit.counterfactual_fairness(
        fit, rows, learner,
        settings=cf.audit.AuditSettings(n_samples=AUDIT_SAMPLES, seed=shifted(10)),
    )
    for level in fit.encoding.levels["race"]:
        flipped = rows[rows["race"].astype(str) != level].copy()
        where = np.flatnonzero(rows["race"].astype(str).to_numpy() != level)
        flipped["race"] = pd.Categorical([level] * len(flipped),
                                         categories=rows["race"].cat.categories)
        factual = learner.predict(rows)[where]
        expected = learner.predict(Rows.from_frame(flipped, where)) - factual
        got = full.rows[(full.rows["attribute"] == "race") & (full.rows["to_level"] == level)]
        np.testing.assert_allclose(got["flip_change"].to_numpy(), expected, rtol=0, atol=1e-12)


def test_counterfactual_predictions_write_parquet(client, models, tmp_path):
    fit, rows, _, full, _ = models
    levels = np.where(np.arange(len(rows)) % 2, "Black", "Asian")  # one level per row
    expected = cf.counterfactual_predictions(fit, rows, full, do={"race": levels}, n_samples=10)
    expected = expected.sort_values(["row", "sample"], ignore_index=True)
    for n, ddf in frames(rows).items():
        out = cf.counterfactual_predictions(
            fit, ddf, full, do={"race": levels}, n_samples=10, rows_out=tmp_path / f"cf{n}"
        )
        got = out.compute().sort_values(["row", "sample"], ignore_index=True)
        np.testing.assert_allclose(got["change"], expected["change"], rtol=0, atol=1e-12)
        np.testing.assert_allclose(got["counterfactual"], expected["counterfactual"], atol=1e-12)
        # each row's global position, whatever the partitioning (index 1000..1099)
        np.testing.assert_array_equal(got["position"], got["row"] - rows.index[0])
    names = sorted(p.name for p in (tmp_path / "cf3").iterdir())
    assert names == ["part.00000.parquet", "part.00001.parquet", "part.00002.parquet"]
    with pytest.raises(
        cf.errors.DataError, match="not empty; choose a new folder or pass overwrite"
    ):
        cf.counterfactual_predictions(
            fit, dd.from_pandas(rows, npartitions=1), full, do={"race": "Black"},
            n_samples=10, rows_out=tmp_path / "cf1",
        )
    (tmp_path / "cf1" / "stale.txt").write_text("from an older run")
    cf.counterfactual_predictions(
        fit, dd.from_pandas(rows, npartitions=1), full, do={"race": "Black"},
        n_samples=10, rows_out=tmp_path / "cf1", overwrite=True,
    )
    assert sorted(p.name for p in (tmp_path / "cf1").iterdir()) == ["part.00000.parquet"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing left over
    with pytest.raises(ValueError, match="give rows_out= a folder"):
        cf.counterfactual_predictions(
            fit, dd.from_pandas(rows, npartitions=1), full, do={"race": "Black"}, n_samples=10
        )


# ---------------------------------------------------------------------- failures
def test_killed_worker_is_replaced_and_the_result_is_the_same(client, models, tmp_path):
    fit, rows, _, full, _ = models
    ddf = dd.from_pandas(rows, npartitions=3)
    expected = cf.audit.counterfactual_fairness(
        fit, rows, full,
        settings=cf.audit.AuditSettings(n_samples=20, seed=shifted(3), keep_samples=True),
    )
    marker = tmp_path / "killed"
    report = cf.audit.counterfactual_fairness(
        fit, ddf, KillOnce(full, marker),
        settings=cf.audit.AuditSettings(n_samples=20, seed=shifted(3)), rows_out=tmp_path / "out",
    )
    assert marker.exists()  # a worker process did end in the middle of a task
    killed_pid = int(marker.read_text())
    client.wait_for_workers(2, timeout=120)
    alive = set(client.run(os.getpid).values())
    assert killed_pid not in alive and len(alive) == 2  # replaced by its nanny
    pd.testing.assert_frame_equal(report.by_group, expected.by_group, rtol=1e-12)
    pd.testing.assert_frame_equal(report.overall, expected.overall, rtol=1e-12)
    assert len(list((tmp_path / "out").iterdir())) == 3
    key = ["attribute", "to_level", "row", "sample"]
    written = pd.read_parquet(tmp_path / "out").sort_values(key, ignore_index=True)
    mine = expected.changes.sort_values(key, ignore_index=True)
    np.testing.assert_allclose(written["change"], mine["change"], rtol=0, atol=1e-12)


def test_failed_run_leaves_no_complete_looking_output(client, models, tmp_path):
    fit, rows, _, full, _ = models
    ddf = dd.from_pandas(rows, npartitions=3)
    target = tmp_path / "rows"
    with pytest.raises(RuntimeError, match="simulated failure"):
        cf.audit.counterfactual_fairness(
            fit, ddf, FailOn(full, int(rows.index[-1])),
            settings=cf.audit.AuditSettings(n_samples=5), rows_out=target,
        )
    assert not target.exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []
    # an existing folder is left as it was when the run fails, even with overwrite=True
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(RuntimeError, match="simulated failure"):
        cf.audit.counterfactual_fairness(
            fit, ddf, FailOn(full, int(rows.index[-1])),
            settings=cf.audit.AuditSettings(n_samples=5), rows_out=target, overwrite=True,
        )
    assert [p.name for p in target.iterdir()] == ["keep.txt"]


def test_partial_folder_is_hidden_and_finish_refuses_missing_parts(tmp_path):
    target = dask_parquet.check_target(tmp_path / "out", overwrite=False)
    partial = dask_parquet.start(target)
    assert partial.name.startswith(".out.partial-")
    dask_parquet.write_part(partial, 0, pd.DataFrame({"a": [1.0]}))
    with pytest.raises(cf.errors.DataError, match=r"part\.00001\.parquet is missing"):
        dask_parquet.finish(partial, target, 2, overwrite=False)
    assert not target.exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(cf.errors.DataError, match="exists and is not a folder"):
        dask_parquet.check_target(tmp_path / "file", overwrite=True)


# ---------------------------------------------------------------------- bad input
def transitions(dask_scheduler) -> int:
    """Task state transitions the scheduler has made so far."""
    return int(dask_scheduler.transition_counter)


def test_dtype_mismatch_is_named_before_any_task(client, models):
    fit, rows, learner, _, _ = models
    before = client.run_on_scheduler(transitions)
    as_float = rows.assign(LSAT=rows["LSAT"].astype(float))
    with pytest.raises(cf.errors.DataError, match=r"column 'LSAT' .* float64 .* int64"):
        learner.predict(dd.from_pandas(as_float, npartitions=2))
    as_object = rows.assign(race=rows["race"].astype(str).astype(object))
    with pytest.raises(cf.errors.DataError, match=r"column 'race' .*\(string vs category\)"):
        cf.audit.counterfactual_fairness(
            fit, dd.from_pandas(as_object, npartitions=2), lambda f: np.zeros(len(f))
        )
    full = models[3]
    as_text = rows.assign(UGPA=rows["UGPA"].astype(str))
    with pytest.raises(cf.errors.DataError, match=r"column 'UGPA' .* as a number"):
        full.predict(dd.from_pandas(as_text, npartitions=2))
    assert client.run_on_scheduler(transitions) == before  # the scheduler saw no task


def test_unseen_level_names_the_level_and_the_partition(client, models):
    _, rows, learner, _, _ = models
    bad = rows.copy()
    bad["race"] = bad["race"].cat.add_categories(["Martian"])
    bad.iloc[-1, bad.columns.get_loc("race")] = "Martian"
    with pytest.raises(cf.errors.DataError, match=r"partition 2 .*'Martian'"):
        learner.predict(dd.from_pandas(bad, npartitions=3))




def _heap_settings() -> dict[str, str | None]:
    names = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS")
    return {name: os.environ.get(name) for name in names}


def test_worker_config_reaches_the_workers_before_they_start(monkeypatch) -> None:
    """dask.config.set(WORKER_CONFIG) puts the heap settings in the environment
    a nanny spawns its worker with (where glibc reads them), beside Dask's own. A nanny
    leaves its settings in this process's environment, and Dask lets a variable of the
    environment win over the configuration: clear them, as a fresh process has them."""
    import dask

    for name in WORKER_ENV:
        monkeypatch.delenv(name, raising=False)

    with dask.config.set(WORKER_CONFIG), distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        (seen,) = client.run(_heap_settings).values()
    assert seen["MALLOC_MMAP_THRESHOLD_"] == WORKER_ENV["MALLOC_MMAP_THRESHOLD_"]
    assert seen["MALLOC_TRIM_THRESHOLD_"] == WORKER_ENV["MALLOC_TRIM_THRESHOLD_"]
    assert seen["OMP_NUM_THREADS"] == "1"  # Dask's own pre-spawn settings are kept
