"""The command line for a user's own data (counterfair.cli.run), run as a user would:
``counterfair fit | learn | audit | counterfactual | decompose`` in subprocesses, on 300 rows of the
law school data with the SCM file examples/law_school.yaml.

The study through the commands alone: the fit is saved and diagnosed, the Fair K
learner's predictions do not change under do(race) (checked in the written
counterfactual CSV by recomputing them from its K column with the saved learner's
coefficients), the report is written, and every refusal exits with code 2 and names
what is wrong.
"""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _data import DATA_DIR, needs_data
from _seeds import shifted

import counterfair as cf
from counterfair.cli import main

ROOT = Path(__file__).parents[1]
SCM_FILE = ROOT / "examples" / "law_school.yaml"

pytestmark = [
    pytest.mark.stan,
    needs_data("law_data.csv"),
]


def counterfair(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``counterfair ARGS`` as a separate process, importing this checkout's package
    (the tests' own, which a folder elsewhere would not find first on the path)."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run(
        [sys.executable, "-m", "counterfair.cli.commands", *args],
        cwd=cwd, capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "PYTHONPATH": path},
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, stan_backend: str) -> Path:
    """A run folder fitted by ``counterfair fit`` on 300 rows, and its learner."""
    folder = tmp_path_factory.mktemp("cli")
    data = cf.datasets.load_law_school(data_home=DATA_DIR).sample(300, random_state=shifted(1))
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
    assert fit.scm.stan_code() == cf.datasets.law_school_level2().stan_code()
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
    assert text.startswith("<!DOCTYPE html>") and "Predictor: learner" in text
    # the report says what the counterfactual audit compared (a regressor: predictions)
    assert "Audited on learner: the predictions" in text
    # Fair K does not move under do(race): the audit's world is the learner's own copy of
    # the run's fit, whose abduction the learner shares (a separately loaded copy made it
    # abduct again and move by about 0.01)
    assert "Under do(race = another level), the output of learner changes by 0 on average" \
        in text


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
    before = _snapshot(run / "run")
    again = counterfair("fit", str(SCM_FILE), "--data", "law.csv", "--out", "run", cwd=run)
    assert again.returncode == 2
    assert "not empty; pass --force" in again.stderr
    assert _snapshot(run / "run") == before  # the run is untouched: same files, bytes, mtimes
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


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """SHA-256 and modification time (ns) of every file under ``folder``, by relative path."""
    return {
        str(path.relative_to(folder)): (hashlib.sha256(path.read_bytes()).hexdigest(),
                                        path.stat().st_mtime_ns)
        for path in sorted(folder.rglob("*")) if path.is_file()
    }


def _fail_csv_half_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``DataFrame.to_csv`` into a file write the first half of the CSV text to it,
    then fail as a full disk would."""
    real = pd.DataFrame.to_csv

    def failing(self: pd.DataFrame, path_or_buf: object = None, *args: object,
                **kwargs: object) -> None:
        text = real(self, None, *args, **kwargs)  # type: ignore[call-overload]
        assert isinstance(text, str) and isinstance(path_or_buf, (str, os.PathLike))
        with open(path_or_buf, "w", encoding="utf-8") as handle:
            handle.write(text[: len(text) // 2])
        raise OSError(errno.ENOSPC, "No space left on device (injected)")

    monkeypatch.setattr(pd.DataFrame, "to_csv", failing)


def test_a_csv_write_failing_half_way_leaves_the_earlier_file(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/command-line.md: outputs are written to a temporary file and moved into
    place, so an interrupted command leaves nothing half-written. The failure comes in the
    middle of writing counterfactuals.csv (``counterfactual --force``) and predictions.csv
    (``learn --force``), in process, through the command line's ``main``."""
    monkeypatch.chdir(run)
    earlier = run / "earlier.csv"
    earlier.write_bytes(b"row,sample,world\n0,0,factual\n")
    predictions = run / "run" / "predictions.csv"
    before = _snapshot(run / "run")
    kept = earlier.read_bytes(), earlier.stat().st_mtime_ns
    with monkeypatch.context() as patch:
        _fail_csv_half_way(patch)
        with pytest.raises(OSError, match="injected"):
            main(["counterfactual", "run", "--rows", "new.csv", "--do", "race=Black",
                  "--n-samples", "4", "--out", "earlier.csv", "--force"])
        with pytest.raises(OSError, match="injected"):
            main(["counterfactual", "run", "--rows", "new.csv", "--do", "race=Black",
                  "--n-samples", "4", "--out", "fresh.csv"])
        with pytest.raises(OSError, match="injected"):
            main(["learn", "run", "--target", "ZFYA", "--features", "latent", "--n-samples",
                  "20", "--folds", "0", "--force"])
    assert (earlier.read_bytes(), earlier.stat().st_mtime_ns) == kept
    assert not (run / "fresh.csv").exists()
    after = _snapshot(run / "run")
    assert after["predictions.csv"] == before["predictions.csv"], predictions
    # all or nothing: no new learner beside the old predictions, every file as it was
    assert any(name.startswith("learner") for name in before)
    assert after == before
    # no temporary file left beside any of them
    assert not [p.name for p in (*run.iterdir(), *(run / "run").iterdir())
                if p.name.startswith(".")]


def test_decompose_writes_the_table_of_the_outcome_and_of_the_learner(run: Path) -> None:
    done = counterfair(
        "decompose", "run", "--attribute", "race", "--x0", "White", "--x1", "Black",
        "--outcome", "ZFYA", "--n-samples", "30", "--out", "dec.csv", cwd=run,
    )
    assert done.returncode == 0, done.stderr
    assert "x-specific: TV = Ctf-DE - Ctf-IE - Ctf-SE" in done.stdout
    table = pd.read_csv(run / "dec.csv")
    assert list(table.columns) == ["term", "form", "mean", "sd", "lower", "upper"]
    means = table[table["form"] == "x-specific"].set_index("term")["mean"]
    assert means["TV"] == pytest.approx(means["Ctf-DE"] - means["Ctf-IE"] - means["Ctf-SE"])
    data = pd.read_csv(run / "law.csv")
    gap = (data.loc[data["race"] == "Black", "ZFYA"].mean()
           - data.loc[data["race"] == "White", "ZFYA"].mean())
    assert means["TV"] == pytest.approx(gap)  # the rows' own gap
    fair = counterfair(
        "decompose", "run", "--attribute", "race", "--x0", "White", "--x1", "Black",
        "--learner", "--allow", "IE", "--n-samples", "30", "--out", "fair.csv", cwd=run,
    )
    assert fair.returncode == 0, fair.stderr
    learner = pd.read_csv(run / "fair.csv").set_index(["form", "term"])
    # the learner is decomposed as deployed: TV is the raw gap of its predictions on the
    # rows (those 'counterfair learn' wrote), and what remains unfair is TV less the
    # allowed indirect effect
    predicted = pd.read_csv(run / "run" / "predictions.csv")["prediction"].to_numpy()
    race = data["race"].to_numpy()
    raw = predicted[race == "Black"].mean() - predicted[race == "White"].mean()
    tv = learner.loc[("x-specific", "TV"), "mean"]
    assert tv == pytest.approx(raw, abs=1e-9)
    assert learner.loc[("unfair", "unfair"), "mean"] == pytest.approx(
        tv + learner.loc[("x-specific", "Ctf-IE"), "mean"], abs=1e-9
    )
    assert "y is the predictions (response='prediction')" in fair.stdout
    assert "business necessity: allowed IE" in fair.stdout


def test_decompose_refusals_exit_2_and_leave_no_file(run: Path) -> None:
    base = ["decompose", "run", "--attribute", "race", "--outcome", "ZFYA",
            "--n-samples", "5"]
    cases = [
        (["--x0", "White", "--x1", "White"], "x0 and x1 are both 'White'"),
        (["--x0", "White", "--x1", "Martian"], "x1='Martian' is not a level of 'race'"),
        (["--x0", "a", "--x1", "b", "--attribute", "LSAT"],
         "attribute 'LSAT' is not a protected attribute of the SCM"),
        (["--x0", "White", "--x1", "Black", "--allow", "XE"], "allow= names 'XE'"),
        (["--x0", "White", "--x1", "Black", "--mediators", "GPA"],
         "mediators names 'GPA', which is not a node of the SCM"),
    ]
    for extra, text in cases:
        done = counterfair(*base, *extra, "--out", "refused.csv", cwd=run)
        assert done.returncode == 2, (extra, done.stderr)
        assert text in done.stderr, (extra, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1
        assert not (run / "refused.csv").exists()
    (run / "kept.csv").write_text("old\n")
    exists = counterfair(*base, "--x0", "White", "--x1", "Black", "--out", "kept.csv", cwd=run)
    assert exists.returncode == 2 and "already exists; pass --force" in exists.stderr
    assert (run / "kept.csv").read_text() == "old\n"
    nowhere = counterfair(*base, "--x0", "White", "--x1", "Black", "--out", "no/dir/t.csv",
                          cwd=run)
    assert nowhere.returncode == 2 and "folder no/dir does not exist" in nowhere.stderr


def test_decompose_checks_its_options_in_the_words_of_the_library() -> None:
    """``counterfair decompose`` refuses the options the SCM decides before it loads the
    fit, with copies of counterfair.audit.decomposition's messages: they are the same."""
    from counterfair.audit import decomposition, decomposition_result
    from counterfair.cli import run as cli_run

    for name in ("NOT_PROTECTED", "CONTINUOUS_ATTRIBUTE", "SAME_LEVELS", "UNKNOWN_LEVEL",
                 "NOT_AN_OUTCOME", "UNKNOWN_ROLE_NODE"):
        assert getattr(cli_run, name) == getattr(decomposition, name), name
    assert cli_run.BAD_ALLOW == decomposition_result.BAD_ALLOW  # Decomposition.allow's
    assert tuple(decomposition.EFFECTS) == cli_run.DECOMPOSE_EFFECTS


@pytest.mark.parametrize("command", ["fit", "learn", "audit", "counterfactual", "decompose"])
def test_help_has_an_example(command: str, tmp_path: Path) -> None:
    done = counterfair(command, "--help", cwd=tmp_path)
    assert done.returncode == 0
    assert "example" in done.stdout and f"counterfair {command}" in done.stdout
