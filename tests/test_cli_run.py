"""The command line for a user's own data (counterfair.cli.run), run as a user would:
``counterfair fit | learn | audit | counterfactual`` in subprocesses, on 300 rows of the
law school data with the SCM file examples/law_school.yaml.

The study through the commands alone: the fit is saved and diagnosed, the Fair K
learner's predictions do not change under do(race) (checked in the written
counterfactual CSV by recomputing them from its K column with the saved learner's
coefficients), the report is written, and every refusal exits with code 2 and names
what is wrong.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import counterfair as cf

ROOT = Path(__file__).parents[1]
DATA_DIR = Path(os.environ.get("COUNTERFAIR_DATA", ROOT.parent / "shared" / "data"))
SCM_FILE = ROOT / "examples" / "law_school.yaml"

pytestmark = [
    pytest.mark.stan,
    pytest.mark.skipif(not (DATA_DIR / "law_data.csv").exists(), reason="law_data.csv not found"),
]


def counterfair(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``counterfair ARGS`` as a separate process."""
    return subprocess.run(
        [sys.executable, "-m", "counterfair.cli.commands", *args],
        cwd=cwd, capture_output=True, text=True, timeout=900, check=False,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, stan_backend: str) -> Path:
    """A run folder fitted by ``counterfair fit`` on 300 rows, and its learner."""
    folder = tmp_path_factory.mktemp("cli")
    data = cf.load_law_school(data_home=DATA_DIR).sample(300, random_state=1)
    data.reset_index(drop=True).to_csv(folder / "law.csv", index=False)
    data.iloc[:6].drop(columns="ZFYA").to_csv(folder / "new.csv", index=False)
    fitted = counterfair(
        "fit", str(SCM_FILE), "--data", "law.csv", "--out", "run",
        "--chains", "2", "--warmup", "300", "--draws", "300", cwd=folder,
    )
    assert fitted.returncode == 0, fitted.stderr
    assert "MCMC diagnostics" in fitted.stdout
    assert "Posterior predictive check" in fitted.stdout
    learned = counterfair(
        "learn", "run", "--target", "ZFYA", "--features", "latent", "--n-samples", "20",
        cwd=folder,
    )
    assert learned.returncode == 0, learned.stderr
    return folder


def test_fit_saves_a_loadable_run(run: Path) -> None:
    fit = cf.load(run / "run" / "fit")
    assert isinstance(fit, cf.Fit)
    assert len(fit.data) == 300
    assert fit.scm.stan_code() == cf.models.law_school_level2().stan_code()
    assert (run / "run" / "ppc.csv").stat().st_size > 0
    predictions = pd.read_csv(run / "run" / "predictions.csv")
    assert len(predictions) == 300


def test_counterfactual_writes_both_worlds_and_fair_k_does_not_change(run: Path) -> None:
    done = counterfair(
        "counterfactual", "run", "--rows", "new.csv", "--do", "race=Black", "--n-samples", "8",
        "--out", "cf.csv", cwd=run,
    )
    assert done.returncode == 0, done.stderr
    frame = pd.read_csv(run / "cf.csv")
    assert len(frame) == 6 * 8 * 2
    assert set(frame["world"]) == {"factual", "counterfactual"}
    assert (frame.loc[frame["world"] == "counterfactual", "race"] == "Black").all()
    learner = cf.load(run / "run" / "learner")
    assert isinstance(learner, cf.FairLearner)
    worlds = {w: part.sort_values(["row", "sample"]) for w, part in frame.groupby("world")}
    k = {w: part["K"].to_numpy()[:, None] for w, part in worlds.items()}
    np.testing.assert_array_equal(k["factual"], k["counterfactual"])  # K is shared
    predicted = {w: learner.estimator_.predict(v) for w, v in k.items()}
    np.testing.assert_array_equal(predicted["factual"], predicted["counterfactual"])
    assert not np.array_equal(  # while the unfair descendants do move
        worlds["factual"]["LSAT"].to_numpy(), worlds["counterfactual"]["LSAT"].to_numpy()
    ) or not np.array_equal(
        worlds["factual"]["UGPA"].to_numpy(), worlds["counterfactual"]["UGPA"].to_numpy()
    )


def test_audit_of_a_run_writes_a_report(run: Path) -> None:
    done = counterfair(
        "audit", "run", "--predictions", "run/predictions.csv", "--protected", "race,sex",
        "--bootstrap", "0", "--cf-samples", "10", "--out", "report.html", cwd=run,
    )
    assert done.returncode == 0, done.stderr
    text = (run / "report.html").read_text()
    assert text.startswith("<!DOCTYPE html>") and "fair learner" in text


def test_refusals_exit_2_and_say_why(run: Path) -> None:
    do = counterfair("counterfactual", "run", "--rows", "new.csv", "--do", "colour=Black",
                     cwd=run)
    assert do.returncode == 2
    assert "'colour' is not a node of the SCM; nodes: ['race', 'sex', 'K'" in do.stderr
    pd.read_csv(run / "law.csv").iloc[:20].to_csv(run / "short.csv", index=False)
    short = counterfair("audit", "run", "--predictions", "short.csv", "--protected", "race",
                        "--label", "ZFYA", cwd=run)
    assert short.returncode == 2
    assert "short.csv has 20 rows but the run's data has 300" in short.stderr
    again = counterfair("fit", str(SCM_FILE), "--data", "law.csv", "--out", "run", cwd=run)
    assert again.returncode == 2
    assert "not empty; pass --force" in again.stderr
    assert cf.load(run / "run" / "fit") is not None  # the run is untouched
    relearn = counterfair("learn", "run", "--target", "ZFYA", cwd=run)
    assert relearn.returncode == 2 and "already exists; pass --force" in relearn.stderr
    bad = run / "bad.yaml"
    bad.write_text(SCM_FILE.read_text().replace("family: poisson", "family: poison"))
    invalid = counterfair("fit", str(bad), "--data", "law.csv", "--out", "other", cwd=run)
    assert invalid.returncode == 2
    assert "nodes.LSAT.family: 'poison' is not one of" in invalid.stderr
    pd.read_csv(run / "law.csv").drop(columns="LSAT").to_csv(run / "nolsat.csv", index=False)
    missing = counterfair("fit", str(SCM_FILE), "--data", "nolsat.csv", "--out", "other",
                          cwd=run)
    assert missing.returncode == 2
    assert "no column for node(s) 'LSAT' (poisson)" in missing.stderr
    assert not (run / "other").exists()


@pytest.mark.parametrize("command", ["fit", "learn", "audit", "counterfactual"])
def test_help_has_an_example(command: str, tmp_path: Path) -> None:
    done = counterfair(command, "--help", cwd=tmp_path)
    assert done.returncode == 0
    assert "example" in done.stdout and f"counterfair {command}" in done.stdout
