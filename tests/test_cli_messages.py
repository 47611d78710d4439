"""What the command line says: each warning once per command as a ``[counterfair]`` line,
fixes written as SCM-file keys, and one line on every command run on a fit that did not
converge.

The SCM file declares a latent with two Normal children of free sd (not identified: the
warning comes each time the SCM is built, which the commands do several times), and the
run is fitted with too few draws to converge (2 chains of 30 + 30).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted

MODEL = (
    "nodes:\n"
    "  A: {family: protected}\n"
    "  U: {family: latent}\n"
    "  X: {family: normal, parents: [A, U]}\n"
    "  Y: {family: normal, parents: [A, U, X]}\n"
)

pytestmark = pytest.mark.stan


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "counterfair.cli.commands", *args],
        cwd=cwd, capture_output=True, text=True, timeout=900, check=False,
    )


def _lines(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    folder = tmp_path_factory.mktemp("messages")
    rng = np.random.default_rng(shifted(21))
    n = 200
    a = rng.choice(["f", "m"], n)
    u = rng.normal(size=n)
    x = 0.5 * (a == "m") + u + rng.normal(size=n)
    y = 0.3 * x + u + rng.normal(size=n)
    pd.DataFrame({"A": a, "X": x, "Y": y}).to_csv(folder / "rows.csv", index=False)
    (folder / "model.yaml").write_text(MODEL)
    fitted = _cli("fit", "model.yaml", "--data", "rows.csv", "--out", "run", "--chains", "2",
                  "--warmup", "30", "--draws", "30", cwd=folder)
    assert fitted.returncode == 0, fitted.stderr
    return folder, fitted


def test_a_warning_is_one_line_once_per_command_in_scm_file_words(
    run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    _, fitted = run
    said = _lines(fitted.stderr, "latent 'U' is not identified")
    assert len(said) == 1, fitted.stderr
    assert said[0].startswith("[counterfair] latent 'U' is not identified")
    assert "sigma: 1.0 on the node in the SCM file" in said[0]
    assert "cf.Normal" not in fitted.stderr
    assert "IdentificationWarning" not in fitted.stderr  # no raw Python warning
    # a line per stage with its time, as the getting-started page says
    for stage in ("read the SCM file and the data: ", "fit (200 rows given, 2 chain(s)): ",
                  "posterior predictive check: ", "save the run: "):
        assert len(_lines(fitted.stderr, f"[counterfair] {stage}")) == 1, fitted.stderr


def test_every_command_on_an_unconverged_fit_says_so_once(
    run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    folder, _ = run
    learned = _cli("learn", "run", "--target", "Y", "--features", "latent", "--folds", "0",
                   cwd=folder)
    assert learned.returncode == 0, learned.stderr
    note = _lines(learned.stderr, "did not converge")
    assert len(note) == 1, learned.stderr
    assert note[0].startswith("[counterfair] the fit in run did not converge (")
    assert "--until-converged" in note[0]
    assert len(_lines(learned.stderr, "latent 'U' is not identified")) == 1
    pd.read_csv(folder / "rows.csv").drop(columns="Y").head(5).to_csv(
        folder / "new.csv", index=False
    )
    moved = _cli("counterfactual", "run", "--rows", "new.csv", "--do", "A=f", "--out",
                 "cf.csv", cwd=folder)
    assert moved.returncode == 0, moved.stderr
    assert len(_lines(moved.stderr, "did not converge")) == 1
