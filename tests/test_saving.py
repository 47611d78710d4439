"""Saving and loading fits and learners without pickle (counterfair.io.fit_folder, learner_store,
saving).

Round trips are exact: a loaded fit gives the same posterior, abduction of new rows,
counterfactuals and audit numbers as the original (same seeds), for every family
(aux SCM: Normal, Bernoulli, Poisson; newer-families SCM: Ordinal, negative
binomial, Categorical, Normal); a loaded learner of every features= level and a
baseline predict the same. Bad folders are refused: newer format version,
edited or truncated files (checksum), untrusted skops types, an existing
non-empty target without overwrite=True.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from _models import (
    aux_data,
    aux_fit,
    aux_scm,
    families_data,
    families_small_fit,
    law_level3_fit,
    law_level3_scm,
    law_train,
    mediation_data,
    mediation_fit,
    mediation_scm,
)
from _seeds import shifted
from sklearn.linear_model import LogisticRegression

import counterfair as cf
from counterfair import errors
from counterfair.inference.abduct import MCMCAbduction
from counterfair.io.fit_folder import MANIFEST, sha256
from counterfair.io.learner_folder import abduction_args_of, abduction_document

# save and load of every back end's posterior
pytestmark = [pytest.mark.stan, pytest.mark.every_backend]


def _round_trip(fit: cf.Fit, tmp_path: Path) -> cf.Fit:
    folder = fit.save(tmp_path / "fit")
    loaded = cf.load(folder)
    assert isinstance(loaded, cf.Fit)
    return loaded


def _same_fit(fit: cf.Fit, loaded: cf.Fit) -> None:
    for name in fit.scm.parameter_names():
        np.testing.assert_array_equal(
            fit.idata.posterior[name].values, loaded.idata.posterior[name].values
        )
    assert loaded.scm.nodes == fit.scm.nodes
    assert loaded.scm.specs == fit.scm.specs
    assert loaded.scm.stan_code() == fit.scm.stan_code()
    assert dict(loaded.encoding.levels) == dict(fit.encoding.levels)
    pd.testing.assert_frame_equal(loaded.data, fit.data, check_index_type=False)
    assert loaded.diagnostics.max_rhat == fit.diagnostics.max_rhat
    assert loaded.diagnostics.divergences == fit.diagnostics.divergences


@pytest.mark.parametrize("which", ["aux", "families"])
def test_fit_round_trip_abduction_and_counterfactuals(
    which: str, tmp_path: Path, stan_backend: str
) -> None:
    if which == "aux":
        fit, rows, do = aux_fit().fit, aux_data().drop(columns="K").iloc[:25], {"race": "b"}
    else:
        fit = families_small_fit().fit
        rows, do = families_data().drop(columns="U").iloc[300:325], {"A": "b"}
    rows = rows.drop(columns=[c for c in rows.columns if c not in fit.scm.specs])
    loaded = _round_trip(fit, tmp_path)
    _same_fit(fit, loaded)
    before = fit.abduct(rows, n_samples=40, seed=shifted(5))
    after = loaded.abduct(rows, n_samples=40, seed=shifted(5))
    assert after.engine == "exact"
    for name in fit.scm.latents:
        np.testing.assert_array_equal(before.latents[name], after.latents[name])
    cf_before = fit.counterfactual(rows, do=do, n_samples=30, seed=shifted(7))
    cf_after = loaded.counterfactual(rows, do=do, n_samples=30, seed=shifted(7))
    pd.testing.assert_frame_equal(cf_before, cf_after)
    ppc_before = fit.ppc(seed=shifted(1)).table
    pd.testing.assert_frame_equal(ppc_before, loaded.ppc(seed=shifted(1)).table)


def test_counterfactual_audit_is_identical_after_loading(
    tmp_path: Path, stan_backend: str
) -> None:
    fit = aux_fit().fit
    data = aux_data().drop(columns="K").iloc[:200]
    learner = cf.FairLearner(
        fit,
        target="P",
        n_samples=10,
        seed=shifted(2),
    ).fit(data)
    loaded = cf.load(learner.save(tmp_path / "learner"))
    assert isinstance(loaded, cf.FairLearner)
    rows = data.iloc[:40]
    before = cf.audit.counterfactual_fairness(
        fit, rows, learner,
        settings=cf.audit.AuditSettings(n_samples=15, seed=shifted(3), keep_samples=True),
    )
    after = cf.audit.counterfactual_fairness(
        loaded.scm_fit_, rows, loaded,
        settings=cf.audit.AuditSettings(n_samples=15, seed=shifted(3), keep_samples=True),
    )
    pd.testing.assert_frame_equal(before.rows, after.rows)
    pd.testing.assert_frame_equal(before.by_group, after.by_group)
    pd.testing.assert_frame_equal(before.changes, after.changes)


def test_loaded_fit_refuses_mcmc_clearly(tmp_path: Path, stan_backend: str) -> None:
    loaded = _round_trip(aux_fit().fit, tmp_path)
    rows = aux_data().drop(columns="K").iloc[:5]
    with pytest.raises(errors.FairnessError, match="needs MCMC"):
        loaded.abduct(rows, engine="mcmc", n_samples=10)


def _learners() -> list[tuple[str, cf.Fit, pd.DataFrame, dict[str, object]]]:
    aux = aux_data().drop(columns="K").iloc[:200]
    law = law_train().drop(columns="K").iloc[:200]
    med = mediation_data().drop(columns="U").iloc[:200]
    return [
        ("non_descendants", aux_fit().fit, aux,
         {"target": "P", "features": cf.inputs.NonDescendants()}),
        ("latent", aux_fit().fit, aux, {"target": "P", "features": cf.inputs.Latent()}),
        ("list", aux_fit().fit, aux, {"target": "P", "features": ["K", "Z"]}),
        (
            "additive_noise",
            law_level3_fit().fit,
            law,
            {"target": "ZFYA", "features": cf.inputs.AdditiveNoise()},
        ),
        (
            "path_specific",
            mediation_fit().fit,
            med,
            {"target": "Y",
             "features": cf.inputs.PathSpecific(unfair_paths=[("A", "M")], baseline="0")},
        ),
    ]


SCMS = {"non_descendants": aux_scm, "latent": aux_scm, "list": aux_scm,
        "additive_noise": law_level3_scm, "path_specific": mediation_scm}


@pytest.mark.parametrize("level", list(SCMS))
def test_learner_round_trip_every_level(level: str, tmp_path: Path, stan_backend: str) -> None:
    name, fit, data, options = next(item for item in _learners() if item[0] == level)
    learner = cf.FairLearner(fit, n_samples=10, seed=shifted(2), **options)
    learner.fit(data)
    loaded = cf.load(learner.save(tmp_path / name))
    assert isinstance(loaded, cf.FairLearner)
    assert loaded.features == cf.inputs.checked(learner.features)  # the strategy, as saved
    rows = data.iloc[:30]
    np.testing.assert_array_equal(learner.predict(rows), loaded.predict(rows))
    protected = fit.scm.protected[0]
    other = fit.encoding.levels[protected][1]
    before = cf.counterfactual_predictions(
        fit, rows, learner, do={protected: other}, n_samples=20, seed=shifted(4)
    )
    after = cf.counterfactual_predictions(
        loaded.scm_fit_, rows, loaded, do={protected: other}, n_samples=20, seed=shifted(4)
    )
    pd.testing.assert_frame_equal(before, after)


def test_learner_abduction_args_keep_the_mcmc_engine_as_json() -> None:
    engine = MCMCAbduction(chains=3, warmup=50, draws=40, progress=False)
    args = {"condition_on": ["Z"], "method": "draws", "engine": engine}
    document = json.loads(json.dumps(abduction_document(args)))
    assert document["engine"] == {
        "MCMCAbduction": {"chains": 3, "warmup": 50, "draws": 40, "progress": False}
    }
    assert abduction_args_of(document) == args
    assert abduction_args_of(abduction_document({"engine": "exact"})) == {"engine": "exact"}
    assert abduction_document(None) is None and abduction_args_of(None) is None


def test_baseline_round_trip(tmp_path: Path) -> None:
    data = aux_data().iloc[:200]
    baseline = cf.full_predictor(aux_scm(), "P", estimator=LogisticRegression()).fit(data)
    loaded = cf.load(baseline.save(tmp_path / "baseline"))
    assert isinstance(loaded, cf.BaselinePredictor)
    np.testing.assert_array_equal(baseline.predict(data), loaded.predict(data))
    np.testing.assert_array_equal(baseline.predict_proba(data), loaded.predict_proba(data))


# ---------------------------------------------------------------------- bad folders
@pytest.fixture
def saved_baseline(tmp_path: Path) -> Path:
    data = aux_data().iloc[:100]
    baseline = cf.full_predictor(aux_scm(), "P", estimator=LogisticRegression()).fit(data)
    return baseline.save(tmp_path / "baseline")


def test_existing_non_empty_target_is_not_overwritten(saved_baseline: Path) -> None:
    data = aux_data().iloc[:100]
    other = cf.full_predictor(aux_scm(), "X").fit(data)
    before = (saved_baseline / "learner.json").read_bytes()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        other.save(saved_baseline)
    assert (saved_baseline / "learner.json").read_bytes() == before
    other.save(saved_baseline, overwrite=True)
    assert isinstance(cf.load(saved_baseline), cf.BaselinePredictor)
    assert json.loads((saved_baseline / "learner.json").read_text())["target"] == "X"
    assert [p.name for p in saved_baseline.parent.iterdir()] == ["baseline"]  # no leftovers


def test_newer_format_version_is_refused_naming_both(saved_baseline: Path) -> None:
    manifest = json.loads((saved_baseline / MANIFEST).read_text())
    manifest["format_version"] = 99
    (saved_baseline / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(errors.DataError, match=r"format version 99.*up to 1"):
        cf.load(saved_baseline)


def test_edited_or_truncated_file_is_refused_naming_it(saved_baseline: Path) -> None:
    path = saved_baseline / "estimators.skops"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(errors.DataError, match=r"checksum mismatch for estimators\.skops"):
        cf.load(saved_baseline)


def test_untrusted_type_is_refused_naming_it(saved_baseline: Path) -> None:
    path = saved_baseline / "estimators.skops"
    sio.dump({"estimator": None, "estimator_": pd.Timedelta(1)}, path)
    manifest = json.loads((saved_baseline / MANIFEST).read_text())
    manifest["files"]["estimators.skops"] = sha256(path)  # an attacker may rewrite it
    (saved_baseline / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(errors.DataError, match=r"not trusted.*Timedelta|Timedelta.*not trusted"):
        cf.load(saved_baseline)


def test_not_a_saved_folder(tmp_path: Path) -> None:
    with pytest.raises(errors.DataError, match=r"no manifest\.json"):
        cf.load(tmp_path)


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    from counterfair.io.fit_folder import write_folder

    def fill(folder: Path) -> None:
        (folder / "half.txt").write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_folder(tmp_path / "out", "fit", fill, overwrite=False)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.txt").write_text("old")
    with pytest.raises(RuntimeError, match="disk full"):
        write_folder(tmp_path / "out", "fit", fill, overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert (tmp_path / "out" / "old.txt").read_text() == "old"
