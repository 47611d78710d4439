"""The console commands: audit of a CSV file, and the law school experiment in quick mode."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from _data import DATA_DIR, needs_data
from _seeds import shifted

from counterfair.cli import main


def test_audit_command_writes_an_html_report(tmp_path, capsys):
    rng = np.random.default_rng(shifted(0))
    n = 400
    frame = pd.DataFrame(
        {
            "y": rng.integers(0, 2, n),
            "score": rng.random(n),
            "group": rng.choice(["a", "b", "c"], n),
            "sex": rng.choice(["f", "m"], n),
        }
    )
    frame.to_csv(tmp_path / "preds.csv", index=False)
    out = tmp_path / "report.html"
    code = main(
        [
            "audit", str(tmp_path / "preds.csv"), "--label", "y", "--predictions", "score",
            "--protected", "group", "sex", "--bootstrap", "20", "--out", str(out),
        ]
    )
    assert code == 0
    text = out.read_text()
    assert "<table" in text and '<svg class="ratio-chart"' in text
    assert "wrote" in capsys.readouterr().err  # a message, on standard error
    # an existing report is kept unless --overwrite is given
    out.write_text("keep me")
    args = ["audit", str(tmp_path / "preds.csv"), "--label", "y", "--predictions", "score",
            "--protected", "group", "--bootstrap", "0", "--out", str(out)]
    capsys.readouterr()
    assert main(args) == 2
    assert "already exists; pass --overwrite" in capsys.readouterr().err
    assert out.read_text() == "keep me"
    assert main([*args, "--overwrite"]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_audit_command_names_a_missing_column(tmp_path, capsys):
    pd.DataFrame({"y": [0, 1], "p": [0.2, 0.9]}).to_csv(tmp_path / "x.csv", index=False)
    code = main(["audit", str(tmp_path / "x.csv"), "--label", "y", "--predictions", "p",
                 "--protected", "race"])
    assert code == 2
    error = capsys.readouterr().err
    assert "counterfair audit: column 'race' is not in" in error and error.count("\n") == 1


@pytest.mark.stan
@needs_data("law_data.csv")
@pytest.mark.filterwarnings("ignore::counterfair.errors.ConvergenceWarning")
def test_law_school_quick_mode_runs_end_to_end(tmp_path):
    out = tmp_path / "law"
    assert main(["law-school", "--data-dir", str(DATA_DIR), "--quick", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert set(results["rmse"]) == {
        "Full", "Unaware", "Order-preserving (Full)", "Fair K (authors' code)",
        "Fair K (Algorithm 1)", "Fair Add",
    }
    assert all(0.5 < v < 1.5 for v in results["rmse"].values())
    change = pd.read_csv(out / "counterfactual_change.csv")
    fair_k = change[change["predictor"].str.startswith("Fair K")]
    assert (fair_k["mean |change|"] == 0).all()
    unfair = change[change["predictor"].isin(["Full", "Unaware"])]
    assert (unfair["mean |change|"] > 0.01).all()
    for name in ("rmse.csv", "results.md", "counterfactual_densities.png", "audit.html"):
        assert (out / name).stat().st_size > 0


@pytest.mark.slow
@pytest.mark.headline
@pytest.mark.stan
@needs_data("law_data.csv")
def test_law_school_full_run_reproduces_table_1(tmp_path):
    """The whole study (about 15 minutes on 2 cores): opt in with ``-m slow``."""
    out = tmp_path / "law"
    assert main(["law-school", "--data-dir", str(DATA_DIR), "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    rmse, paper = results["rmse"], results["paper_rmse"]
    for name in ("Full", "Unaware", "Fair Add"):
        assert abs(rmse[name] - paper[name]) <= 0.01, name
    assert abs(rmse[results["headline_fair_k"]] - paper["Fair K"]) <= 0.01
    diagnostics = results["diagnostics"]["level2"]
    assert diagnostics["max_rhat"] < 1.01
    assert diagnostics["divergences"] == 0
