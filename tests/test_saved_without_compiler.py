"""A saved fit and learner travel: loaded where no C++ compiler is, they predict, audit
and abduct new rows, with the numbers of the process that fitted them.

Exact abduction of a new row draws its latent given each parameter set by the C++ of
``quadrature.hpp`` (``counterfair/stan/native.py``), for a joint fit as for an integrated
one (a new row's latent is in neither posterior). The library is built when the package
is installed, so a second process whose ``PATH`` holds only python, with ``CXX`` unset and
an empty cache, loads the saved folders and computes the same numbers to the bit.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _models import law_level2_scm, law_test, law_train, quietly
from _seeds import shifted
from sklearn.linear_model import LinearRegression

import counterfair as cf

pytestmark = pytest.mark.stan

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def _rows() -> pd.DataFrame:
    """30 new rows without their outcome (nor the true K)."""
    return law_test().drop(columns=["K", "ZFYA"]).iloc[:30]


def compute(fit: cf.Fit, learner: cf.FairLearner) -> dict[str, Any]:
    """What a user does with a loaded fit and learner on new rows (the same seeds in both
    processes)."""
    rows = _rows()
    abduction = fit.abduct(rows, n_samples=24, seed=shifted(31))
    # the learner's own fit (a loaded learner holds one): the audit then shares its
    # abduction with the learner, as in the fitting process, where it is the same object
    audit = cf.audit.counterfactual_fairness(
        learner.scm_fit_, rows, learner,
        settings=cf.audit.AuditSettings(n_samples=8, seed=shifted(32)),
    )
    return {
        "engine": abduction.engine,
        "latents": abduction.latents["K"],
        "counterfactual": fit.counterfactual(rows, do={"race": "White"}, n_samples=12,
                                             seed=shifted(33)),
        "predictions": np.asarray(learner.predict(rows)),
        "audit": audit.rows,
    }


def child(folders: str, out: str, expected_package: str) -> None:
    """The second process: no compiler, an empty cache; load, compute, write the results."""
    import shutil

    from counterfair import errors
    from counterfair.stan import native

    assert cf.__file__ == expected_package, (cf.__file__, expected_package)
    assert os.environ.get("CXX") is None
    for name in ("g++", "c++", "clang++", "gcc", "cc"):
        assert shutil.which(name) is None, name
    try:
        native.compiler()
    except errors.NativeBuildError:
        pass
    else:
        raise AssertionError("a C++ compiler was found")
    results = {}
    for name, (fit_folder, learner_folder) in pickle.loads(Path(folders).read_bytes()).items():
        fit, learner = cf.load(fit_folder), cf.load(learner_folder)
        assert isinstance(fit, cf.Fit) and isinstance(learner, cf.FairLearner)
        results[name] = compute(fit, learner)
    assert native.library() == native.installed_library()
    assert not (Path(os.environ["COUNTERFAIR_CACHE"]) / "native").exists()  # nothing built
    Path(out).write_bytes(pickle.dumps(results))


def _without_compiler(tmp_path: Path) -> dict[str, str]:
    """The second process's environment: PATH of python alone, no CXX, an empty cache."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env = {k: v for k, v in os.environ.items() if k not in ("CXX", "CC", "PYTHONPATH")}
    env["PATH"] = str(bin_dir)
    env["COUNTERFAIR_CACHE"] = str(tmp_path / "empty-cache")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(TESTS)])
    return env


def test_a_saved_fit_and_learner_predict_without_a_compiler(
    tmp_path: Path, stan_backend: str
) -> None:
    from counterfair.stan import native

    if native.installed_library() is None:
        pytest.fail("counterfair's native library is not built here: run pip install -e . "
                    "in the checkout (it builds counterfair/stan/_native*.so in place)")
    scm = law_level2_scm()
    train = law_train().drop(columns="K").iloc[:200]
    folders, expected = {}, {}
    for latents in ("joint", "integrated"):
        fit = quietly(scm.fit, train, chains=2, warmup=150, draws=100, seed=shifted(30),
                      latents=latents, progress=False)
        assert fit.integrated == (("K",) if latents == "integrated" else ())
        learner = cf.FairLearner(
            fit,
            target="ZFYA",
            estimator=LinearRegression(),
            n_samples=8,
            seed=shifted(34),
        ).fit(train)
        folders[latents] = (str(fit.save(tmp_path / f"{latents}-fit")),
                            str(learner.save(tmp_path / f"{latents}-learner")))
        expected[latents] = compute(fit, learner)
        assert expected[latents]["engine"] == "exact"
    (tmp_path / "folders.pkl").write_bytes(pickle.dumps(folders))
    out = tmp_path / "results.pkl"
    code = "import sys, test_saved_without_compiler as t; t.child(*sys.argv[1:])"
    run = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "folders.pkl"), str(out), cf.__file__],
        env=_without_compiler(tmp_path), cwd=tmp_path, capture_output=True, text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    got = pickle.loads(out.read_bytes())
    for latents, want in expected.items():
        np.testing.assert_array_equal(got[latents]["latents"], want["latents"])
        np.testing.assert_array_equal(got[latents]["predictions"], want["predictions"])
        pd.testing.assert_frame_equal(got[latents]["counterfactual"], want["counterfactual"],
                                      check_exact=True)
        pd.testing.assert_frame_equal(got[latents]["audit"], want["audit"], check_exact=True)
        assert got[latents]["engine"] == "exact"
