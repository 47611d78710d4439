"""Missing values: one refusal naming every column, and ``missing="drop"`` (Python and CLI).

The refusal names every column with missing values, its count and first row (saying how
rows are counted) and the number of complete rows. ``SCM.fit(missing="drop")`` fits on
the complete rows: its draws are those of a fit on ``data.dropna()`` made by hand with
the same seed, ``fit.missing`` records what was dropped, a saved fit keeps the record,
and ``counterfair fit --missing drop`` logs one line per column.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _models import linear_gaussian_data, linear_gaussian_scm
from _seeds import shifted

import counterfair as cf
from counterfair.rows import Rows
from counterfair.rows.missing import drop_incomplete, missing_message

ROOT = Path(__file__).parents[1]


def _holes(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with 40 missing X and 25 missing Y (10 rows missing both)."""
    out = frame.copy()
    rng = np.random.default_rng(shifted(11))
    both = rng.choice(len(out), 10, replace=False)
    rest = np.setdiff1d(np.arange(len(out)), both)
    only_x = rng.choice(rest, 30, replace=False)
    only_y = rng.choice(np.setdiff1d(rest, only_x), 15, replace=False)
    out.loc[out.index[np.r_[both, only_x]], "X"] = np.nan
    out.loc[out.index[np.r_[both, only_y]], "Y"] = np.nan
    return out


def test_the_refusal_names_every_column_and_the_complete_rows() -> None:
    data = _holes(linear_gaussian_data().drop(columns="U"))
    with pytest.raises(cf.errors.DataError) as info:
        Rows.check(data, linear_gaussian_scm())
    text = str(info.value)
    first_x = int(np.argmax(data["X"].isna().to_numpy()))
    first_y = int(np.argmax(data["Y"].isna().to_numpy()))
    assert text.startswith("missing (NaN) values in 2 column(s): ")
    assert f"'X' 40 (first at row {first_x} (0-based data rows))" in text
    assert f"'Y' 25 (first at row {first_y} (0-based data rows))" in text
    assert f"{len(data) - 55} of {len(data)} rows are complete" in text
    assert "missing='drop' (SCM.fit)" in text and "--missing" not in text
    from counterfair.logs import speaking_scm_file

    with speaking_scm_file(), pytest.raises(cf.errors.DataError, match="with --missing drop"):
        Rows.check(data, linear_gaussian_scm())


def test_drop_incomplete_records_and_logs_each_column(caplog: pytest.LogCaptureFixture) -> None:
    data = _holes(linear_gaussian_data().drop(columns="U"))
    with caplog.at_level("INFO", logger="counterfair"):
        kept, record = drop_incomplete(data, linear_gaussian_scm())
    pd.testing.assert_frame_equal(kept, data.dropna())
    assert record == {"policy": "drop", "rows": len(data), "dropped": 55,
                      "columns": {"X": 40, "Y": 25}}
    lines = [r.getMessage() for r in caplog.records]
    assert any("column 'X' has 40 missing" in line for line in lines)
    assert any("column 'Y' has 25 missing" in line for line in lines)
    assert any(f"fitting on {len(data) - 55} of {len(data)} rows" in line for line in lines)
    # nothing complete: the refusal names the columns, without the drop hint
    empty = data.assign(X=np.nan)
    with pytest.raises(cf.errors.DataError, match=r"0 of 400 rows are complete$"):
        drop_incomplete(empty, linear_gaussian_scm())
    assert missing_message(data.dropna(), ["X", "Y"]) == ""


def test_bad_policy_is_refused_before_any_work() -> None:
    with pytest.raises(ValueError, match=r"missing must be one of \['error', 'drop', 'model'\]"):
        linear_gaussian_scm().fit(linear_gaussian_data(), missing="impute")  # type: ignore[arg-type]


@pytest.mark.stan
def test_a_fit_with_missing_drop_equals_a_fit_on_the_complete_rows(tmp_path: Path) -> None:
    data = _holes(linear_gaussian_data().drop(columns="U"))
    options = {"chains": 1, "warmup": 150, "draws": 150, "seed": shifted(2)}
    # the test is of the rows fitted, not of convergence: short chains may warn on ESS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cf.errors.ConvergenceWarning)
        dropped = linear_gaussian_scm().fit(data, missing="drop", **options)
        by_hand = linear_gaussian_scm().fit(data.dropna(), **options)
    assert dropped.missing == {"policy": "drop", "rows": 400, "dropped": 55,
                               "columns": {"X": 40, "Y": 25}}
    assert by_hand.missing is None
    assert len(dropped.data) == 345
    for name in ("lambda_X_U", "lambda_Y_U"):
        np.testing.assert_array_equal(
            dropped.idata.posterior[name].values, by_hand.idata.posterior[name].values
        )
    dropped.save(tmp_path / "fit")
    assert cf.load(tmp_path / "fit").missing == dropped.missing


@pytest.mark.stan
def test_cli_fit_missing_drop_logs_each_column_and_writes_the_run(tmp_path: Path) -> None:
    data = _holes(linear_gaussian_data().drop(columns="U"))
    data.to_csv(tmp_path / "rows.csv", index=False)
    model = tmp_path / "model.yaml"
    model.write_text(
        "nodes:\n"
        "  A: {family: protected, levels: ['0', '1']}\n"
        "  U: {family: latent}\n"
        "  X: {family: normal, sigma: 0.5, parents: [A, U]}\n"
        "  Y: {family: normal, sigma: 0.4, parents: [A, U, X]}\n"
    )

    def fit(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "counterfair.cli.commands", "fit", str(model), "--data",
             "rows.csv", "--out", "run", "--chains", "1", "--warmup", "150", "--draws", "150",
             *extra],
            cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False,
        )

    refused = fit()
    assert refused.returncode == 2, refused.stderr
    assert "missing (NaN) values in 2 column(s)" in refused.stderr
    assert "--missing drop (counterfair fit)" in refused.stderr
    assert not (tmp_path / "run").exists()
    done = fit("--missing", "drop")
    assert done.returncode == 0, done.stderr
    assert "[counterfair] missing='drop': column 'X' has 40 missing value(s)" in done.stderr
    assert "[counterfair] missing='drop': column 'Y' has 25 missing value(s)" in done.stderr
    assert cf.load(tmp_path / "run" / "fit").missing["dropped"] == 55
