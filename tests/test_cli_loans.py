"""A user's own CSV as it comes, through the four commands (issue 30): yes/no outcomes,
string groups and a credit history coded 1 to 6, with an SCM file listing no levels.

``counterfair fit`` reads the levels (one INFO line each) and prints its diagnostics
once; ``learn`` writes label and probability, held-out scores beside the baseline, and a
warning for a predictor that says nothing; ``audit`` audits the probabilities and puts
the warning on top; ``counterfactual`` writes the worlds in the user's labels and names
an unseen level; R-hat above 1.01 names the parameters and the next command, and
``--until-converged`` doubles warm-up and draws within ``--max-draws``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _loans import SCM_YAML, loans
from _seeds import shifted

import counterfair as cf

pytestmark = [pytest.mark.stan, pytest.mark.filterwarnings("ignore::UserWarning")]


def counterfair(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``python -m counterfair ARGS`` as a separate process."""
    return subprocess.run(
        [sys.executable, "-m", "counterfair", *args],
        cwd=cwd, capture_output=True, text=True, timeout=900, check=False,
    )


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory, stan_backend: str) -> Path:
    """A run fitted on 300 rows whose decision does not depend on the latent."""
    here = tmp_path_factory.mktemp("loans")
    (here / "model.yaml").write_text(SCM_YAML)
    loans(300, seed=shifted(4), k_effect=0.0).to_csv(here / "loans.csv", index=False)
    fitted = counterfair(
        "fit", "model.yaml", "--data", "loans.csv", "--out", "run", "--chains", "2",
        "--warmup", "200", "--draws", "200", cwd=here,
    )
    assert fitted.returncode == 0, fitted.stderr
    (here / "fit.out").write_text(fitted.stdout)
    (here / "fit.err").write_text(fitted.stderr)
    return here


def test_fit_reads_levels_and_prints_diagnostics_once(folder: Path) -> None:
    out, err = (folder / "fit.out").read_text(), (folder / "fit.err").read_text()
    assert (out + err).count("MCMC diagnostics") == 1
    assert "Bernoulli node 'deny': levels read from the data: 'no' -> 0, 'yes' -> 1" in err
    assert "Categorical node 'purpose': levels read from the data: 'home', 'other', 'refi'" in err
    assert "Ordinal node 'history': levels read from the data: '1', '2'" in err
    nodes = json.loads((folder / "run" / "fit" / "scm.json").read_text())["nodes"]
    assert nodes["deny"]["levels"] == ["no", "yes"] and nodes["deny"]["positive"] == "yes"
    assert nodes["purpose"]["levels"] == ["home", "other", "refi"]
    fit = cf.load(folder / "run" / "fit")
    assert fit.scm.specs["deny"].positive == "yes"  # the saved files keep the positive level
    assert fit.scm.specs["history"].levels == tuple(  # numeric order
        str(v) for v in sorted(pd.read_csv(folder / "loans.csv")["history"].unique())
    )


def test_learn_writes_labels_probabilities_scores_and_the_warning(folder: Path) -> None:
    learned = counterfair("learn", "run", "--target", "deny", "--features", "latent",
                          "--n-samples", "20", cwd=folder)
    assert learned.returncode == 0, learned.stderr
    out = learned.stdout
    assert "held-out scores (5-fold cross-fitting on 300 rows" in out
    table = out[out.index("held-out scores"):]
    for word in ("accuracy", "AUC", "Brier", "predictor", "baseline", "majority class 'no'"):
        assert word in table
    warnings = [line for line in out.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "constant predictor: every prediction is 'no'" in warnings[0]
    predictions = pd.read_csv(folder / "run" / "predictions.csv")
    assert list(predictions.columns) == ["prediction", "probability"]
    assert set(predictions["prediction"]) <= {"no", "yes"}
    assert predictions["probability"].between(0, 1).all()
    # the audit audits the probabilities and puts the same warning on top
    audited = counterfair("audit", "run", "--predictions", "run/predictions.csv",
                          "--protected", "race", "--bootstrap", "0", "--cf-samples", "5",
                          cwd=folder)
    assert audited.returncode == 0, audited.stderr
    assert warnings[0].removeprefix("warning: ") in audited.stdout
    html = (folder / "run" / "audit.html").read_text()
    top = html[: html.index('<section id="findings">')]
    assert "<strong>Warning:</strong> constant predictor" in top
    assert "probability" in html


def test_learn_regression_scores(folder: Path) -> None:
    learned = counterfair("learn", "run", "--target", "income", "--features", "latent",
                          "--n-samples", "10", "--folds", "3", "--force", cwd=folder)
    assert learned.returncode == 0, learned.stderr
    table = learned.stdout[learned.stdout.index("held-out scores (3-fold"):]
    assert "RMSE" in table and "R2" in table
    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines()[2:4]}
    # the latent predicts income: better than the mean on held-out rows
    assert float(rows["predictor"][0]) < float(rows["baseline"][0])
    assert "warning" not in learned.stdout
    refused = counterfair("learn", "run", "--target", "income", "--folds", "1", "--force",
                          cwd=folder)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "--folds 1" in refused.stderr
    wrong = counterfair("learn", "run", "--target", "deny", "--estimator", "linear", "--force",
                        cwd=folder)
    assert wrong.returncode == 2 and "use --estimator logistic" in wrong.stderr


def test_counterfactual_in_the_users_labels_and_unseen_levels(folder: Path) -> None:
    rows = loans(4, seed=shifted(9))
    rows.to_csv(folder / "new.csv", index=False)
    done = counterfair("counterfactual", "run", "--rows", "new.csv", "--do", "race=white",
                       "--n-samples", "2", "--out", "cf.csv", cwd=folder)
    assert done.returncode == 0, done.stderr
    worlds = pd.read_csv(folder / "cf.csv")
    assert set(worlds["deny"]) <= {"no", "yes"}
    assert set(worlds["purpose"]) <= {"home", "other", "refi"}
    for column, value, message in (
        ("deny", "maybe", "column 'deny' is a Bernoulli node with levels ['no', 'yes']; "
         "value 'maybe' at row 2 is not one of them"),
        ("purpose", "boat", "column 'purpose' is a Categorical node with levels "
         "['home', 'other', 'refi']; value 'boat' at row 2"),
        ("history", 60, "column 'history' is an Ordinal node with levels"),
    ):
        bad = rows.copy()
        bad[column] = bad[column].astype(object)
        bad.loc[2, column] = value
        bad.to_csv(folder / "bad.csv", index=False)
        refused = counterfair("counterfactual", "run", "--rows", "bad.csv", "--do",
                              "race=white", "--out", "x.csv", cwd=folder)
        assert refused.returncode == 2, refused.stderr
        assert message in refused.stderr and refused.stderr.strip().count("\n") == 0


def test_rhat_names_parameters_and_the_next_command(folder: Path) -> None:
    short = counterfair("fit", "model.yaml", "--data", "loans.csv", "--out", "short",
                        "--chains", "2", "--warmup", "10", "--draws", "10", cwd=folder)
    assert short.returncode == 0, short.stderr
    assert short.stdout.count("MCMC diagnostics") == 1
    line = next(x for x in short.stdout.splitlines() if x.startswith("not converged"))
    assert "R-hat > 1.01 for " in line
    assert ("counterfair fit model.yaml --data loans.csv --out short --chains 2 --warmup 20 "
            "--draws 20 --seed 0 --force") in short.stdout
    assert "--until-converged --max-draws 4000" in short.stdout
    budget = counterfair("fit", "model.yaml", "--data", "loans.csv", "--out", "short",
                         "--chains", "2", "--warmup", "10", "--draws", "10", "--force",
                         "--until-converged", "--max-draws", "20", cwd=folder)
    assert budget.returncode == 0, budget.stderr
    assert "refitting with 20 warm-up + 20 draws per chain" in budget.stdout
    assert budget.stdout.count("MCMC diagnostics") == 2
    assert ("doubling them would exceed --max-draws 20" in budget.stdout
            or "--until-converged: converged" in budget.stdout)
    alone = counterfair("fit", "model.yaml", "--data", "loans.csv", "--out", "other",
                        "--max-draws", "100", cwd=folder)
    assert alone.returncode == 2 and "--max-draws is the budget of --until-converged" in (
        alone.stderr
    )
    assert not (folder / "other").exists()


def test_held_out_scores_in_python(folder: Path) -> None:
    from counterfair.learn.held_out import held_out_scores, usefulness_warning

    fit = cf.load(folder / "run" / "fit")
    learner = cf.FairLearner(
        fit,
        target="deny",
        features=cf.inputs.Latent(),
        n_samples=10,
        seed=shifted(0),
    )
    scores = held_out_scores(learner, fit.data, folds=3, seed=shifted(1), positive="yes")
    assert list(scores.table.columns) == ["accuracy", "AUC", "Brier"]
    majority = float(np.mean(fit.data["deny"] == "no"))
    assert scores.table.loc["baseline", "accuracy"] == pytest.approx(majority, abs=0.02)
    assert scores.positive == "yes" and scores.no_better()
    assert usefulness_warning(scores, np.repeat("no", 300)) is not None
    with pytest.raises(ValueError, match="folds must be an integer from 2"):
        held_out_scores(learner, fit.data, folds=1)
