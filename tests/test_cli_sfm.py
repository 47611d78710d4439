"""``counterfair decompose --data CSV ...``: the decomposition from the Standard Fairness
Model's roles alone (counterfair.audit.fit_sfm), run as a user would.

End to end (one command, three short Stan fits): 1,500 simulated rows with a known
direct effect, gzipped and followed by rows the command must not read (``--nrows``),
decomposed in a subprocess; the CSV holds every term of both forms, TV is the rows' own
gap (``--rows fixed``), both identities hold and Ctf-DE is near the truth. The
refusals (a column in two roles, a role naming no column, x0 equal to x1, the options of
a run folder with --data and the reverse, RUN and --data together or neither, a missing
file, an existing --out) exit with code 2 and one line naming what is wrong, before any
fit (``SCM.fit`` is made to fail the test) and with nothing written.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted

import counterfair as cf
from counterfair.cli import main

ROOT = Path(__file__).resolve().parents[1]
N_ROWS = 1500
TRUE_DE = 1.5
"""The direct effect of the simulation: y moves by 1.5 when X does, W and Z held."""
DATA = "data.csv.gz"
UNREAD = 20
"""Rows after the first :data:`N_ROWS` of :data:`DATA`, with a missing outcome: read
without ``--nrows``, they are refused."""


def counterfair(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``python -m counterfair ARGS`` as a separate process, importing this checkout's
    package (first on the path, as in tests/test_cli_run.py)."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run(
        [sys.executable, "-m", "counterfair", *args],
        cwd=cwd, capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "PYTHONPATH": path},
    )


def simulate(n: int, seed: int) -> pd.DataFrame:
    """The Standard Fairness Model with one numeric and one coded confounder (z, region),
    a mediator w and a Normal outcome y, all linear: Ctf-DE is :data:`TRUE_DE`."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n)
    region = rng.integers(1, 4, size=n)
    x = rng.random(n) < 1 / (1 + np.exp(-(0.8 * z + 0.3 * (region - 2))))
    w = 0.5 + 1.0 * x + 0.7 * z + rng.normal(size=n)
    y = 1.0 + TRUE_DE * x + 0.8 * w + 0.5 * z + 0.4 * (region == 3) + rng.normal(size=n)
    return pd.DataFrame({"z": z, "region": region, "group": np.where(x, "B", "A"), "w": w,
                         "y": y})


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding :data:`DATA`: the simulated rows, then :data:`UNREAD` rows whose
    outcome is missing."""
    made = tmp_path_factory.mktemp("cli-sfm")
    rows = simulate(N_ROWS, shifted(1))
    unread = simulate(UNREAD, shifted(2)).assign(y=np.nan)
    pd.concat([rows, unread], ignore_index=True).to_csv(made / DATA, index=False)
    return made


def command(*positional: str, **options: str | bool | None) -> list[str]:
    """``decompose`` with the roles of the simulation, changed by ``options`` (an option
    set to None is left out; True is a flag)."""
    given: dict[str, str | bool | None] = {
        "data": DATA, "attribute": "group", "x0": "A", "x1": "B", "outcome": "y",
        "confounders": "z,region", "mediators": "w", "nrows": str(N_ROWS),
        "out": "refused.csv", **options,
    }
    words = ["decompose", *positional]
    for name, value in given.items():
        if value is True:
            words.append(f"--{name.replace('_', '-')}")
        elif value is not None and value is not False:
            words += [f"--{name.replace('_', '-')}", value]
    return words


@pytest.mark.stan
def test_decompose_data_writes_the_table_near_the_truth(folder: Path) -> None:
    (folder / "table.csv").write_text("old\n")  # replaced: --force
    done = counterfair(
        *command(out="table.csv", categorical="region", rows="fixed", chains="2",
                 warmup="200", draws="200", n_samples="100", seed=str(shifted(0)), force=True),
        cwd=folder,
    )
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(folder / "table.csv")
    assert list(table.columns) == ["term", "form", "mean", "sd", "lower", "upper"]
    assert list(zip(table["form"], table["term"], strict=True)) == [
        ("x-specific", term) for term in ("TV", "Ctf-DE", "Ctf-IE", "Ctf-SE")
    ] + [("general", term) for term in ("TV", "NDE", "NIE", "Exp-SE_x1", "Exp-SE_x0")]
    assert table[["mean", "sd", "lower", "upper"]].notna().all().all()
    means = table.set_index(["form", "term"])["mean"]
    # --nrows: the first 1,500 rows only (the rows after them, with no outcome, would be
    # refused); --rows fixed: TV is their own gap in every draw
    rows = pd.read_csv(folder / DATA).iloc[:N_ROWS]
    gap = (rows.loc[rows["group"] == "B", "y"].mean()
           - rows.loc[rows["group"] == "A", "y"].mean())
    assert means[("x-specific", "TV")] == pytest.approx(gap, rel=1e-9)
    assert means[("general", "TV")] == pytest.approx(gap, rel=1e-9)
    x = means["x-specific"]
    assert x["TV"] == pytest.approx(x["Ctf-DE"] - x["Ctf-IE"] - x["Ctf-SE"])
    g = means["general"]
    assert g["TV"] == pytest.approx(g["NDE"] - g["NIE"] + g["Exp-SE_x1"] - g["Exp-SE_x0"])
    assert abs(x["Ctf-DE"] - TRUE_DE) < 0.3, x["Ctf-DE"]
    # the summary and the notes: the family chosen and why, each fit's diagnostics
    out = done.stdout
    assert "x-specific: TV = Ctf-DE - Ctf-IE - Ctf-SE" in out
    assert "rows: 1500 (" in out
    assert "the outcome's family is normal ('y' is a real number)" in out
    assert "categorical ['region']" in out
    assert "rows weighted 1: the intervals carry the models' uncertainty only" in out
    for model in ("outcome", "attribute"):
        assert f"{model} model: " in out and "max R-hat" in out, model
    assert "wrote table.csv" in out
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]  # no temporary


@pytest.mark.stan
def test_decompose_data_splits_the_spurious_effect_by_confounder(folder: Path) -> None:
    """``--split-confounders 'z;region'``: the parts' CSV beside the table, its parts adding
    up to the table's Ctf-SE, the parts printed."""
    done = counterfair(
        *command(out="split.csv", categorical="region", split_confounders="z;region",
                 chains="2", warmup="200", draws="200", n_samples="100",
                 seed=str(shifted(0))),
        cwd=folder,
    )
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(folder / "split.csv").set_index(["form", "term"])["mean"]
    parts = pd.read_csv(folder / "split.parts.csv")
    assert list(parts.columns) == list(cf.audit.split_result.SPLIT_COLUMNS)
    assert list(parts["part"]) == ["z", "region"]
    assert parts["mean"].sum() == pytest.approx(table[("x-specific", "Ctf-SE")], abs=1e-9)
    assert "Parts (in the order moved):" in done.stdout
    assert "wrote split.csv" in done.stdout and "wrote split.parts.csv" in done.stdout


# ---------------------------------------------------------------------- refusals
REFUSALS: dict[str, tuple[list[str], str]] = {
    "a column in two roles": (
        command(confounders="z,w"),
        "column 'w' is named more than once (confounders and mediators): each column has "
        "one role",
    ),
    "a role naming no column": (
        command(mediators="w,wage"),
        "column 'wage' (the mediator) is not in the data; columns: ['z', 'region', 'group', "
        "'w', 'y']",
    ),
    "x0 equal to x1": (command(x1="A"), "x0 and x1 are both 'A'"),
    "a level the attribute does not take": (
        command(x1="C"), "x1='C' is not a level of 'group'; its levels: ['A', 'B']",
    ),
    "--learner with --data": (
        command(outcome=None, learner=True),
        "--learner applies to a run folder (the run's saved learner; with --data, give "
        "--outcome), not to --data: drop --learner",
    ),
    "--allow with --data": (command(allow="IE"), "--allow applies to a run folder"),
    "a CSV of rows with --data": (
        command(rows="other.csv"),
        "--rows other.csv: with --data, --rows is the rows' weights, bayesian_bootstrap or "
        "fixed",
    ),
    "RUN and --data": (
        command("run"), "give a run folder (RUN, here run) or --data, not both",
    ),
    "neither RUN nor --data": (
        command(data=None, nrows=None),
        "give a run folder (RUN, from 'counterfair fit') or --data CSV",
    ),
    "the options of --data with a run folder": (
        command("run", data=None, nrows=None, chains="2", family="poisson"),
        "--family, --chains apply to --data",
    ),
    "the rows' weights with a run folder": (
        command("run", data=None, nrows=None, rows="fixed"),
        "--rows fixed: the rows' weights apply to --data; with a run folder, --rows is a "
        "CSV of rows",
    ),
    "a missing data file": (command(data="nowhere.csv.gz"),
                            "data file nowhere.csv.gz does not exist"),
    "no --out": (command(out=None), "--out is required with --data"),
    "no --mediators": (command(mediators=None), "--mediators is required with --data"),
    "no --outcome": (command(outcome=None), "--outcome is required with --data"),
    "more samples than draws": (
        command(draws="50"),
        "--chains 2 x --draws 50 = 100 posterior draws per model, fewer than --n-samples 200",
    ),
    "--categorical naming no covariate": (
        command(categorical="y"),
        "--categorical names 'y', which is neither a confounder nor a mediator",
    ),
    "rows beyond --nrows": (
        command(nrows=None), f"missing values in 'y' ({UNREAD} rows)",
    ),
    "an unknown family": (command(family="gamma"), "argument --family: invalid choice"),
    "a split naming a column that is not a confounder": (
        command(split_confounders="z;w"),
        "--split-confounders names 'w', which is not one of the confounders ['z', 'region']",
    ),
    "a split leaving a confounder out": (
        command(split_confounders="z"), "--split-confounders leaves out ['region']",
    ),
    "a split of one mediator": (
        command(split_mediators="w"), "--split-mediators has one group",
    ),
    "an empty group": (command(split_confounders="z;;region"), "a group is empty"),
    "--parts-out with no split": (
        command(parts_out="parts.csv"), "--parts-out names the parts' CSV of a split",
    ),
    "--parts-out equal to --out": (
        command(split_confounders="z;region", parts_out="refused.csv"),
        "--parts-out refused.csv is --out",
    ),
    "a split with a run folder": (
        command("run", data=None, nrows=None, split_confounders="z;region"),
        "--split-confounders applies to --data",
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_decompose_data_refusals_say_why_on_one_line_before_any_fit(
    case: str, folder: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    words, message = REFUSALS[case]

    def no_fit(*args: object, **kwargs: object) -> None:
        raise AssertionError("a refused command started a fit")

    monkeypatch.setattr(cf.SCM, "fit", no_fit)
    monkeypatch.chdir(folder)
    before = sorted(p.name for p in folder.iterdir())
    try:
        code = main(words)
    except SystemExit as stop:  # the parser's own refusals
        code = stop.code
    error = capsys.readouterr().err
    lines = [line for line in error.splitlines()
             if line.strip() and not line.startswith("[counterfair]")]
    assert code == 2, error
    assert len(lines) == 1, error
    assert lines[0].startswith("counterfair decompose: "), error
    assert message in lines[0], error
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing written


def test_an_existing_out_is_refused_and_left_as_it_was(folder: Path) -> None:
    """As a user meets it: a separate process, exit code 2, the file's bytes and time."""
    kept = folder / "kept.csv"
    kept.write_text("term,form\nold,old\n")
    state = kept.read_bytes(), kept.stat().st_mtime_ns
    done = counterfair(*command(out="kept.csv"), cwd=folder)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "counterfair decompose: kept.csv already exists; pass --force to replace it"
    )
    assert (kept.read_bytes(), kept.stat().st_mtime_ns) == state
    assert done.stdout == ""


def test_the_command_line_copies_the_library_choices() -> None:
    """The parser holds copies of the SFM's families, row weights and NUTS defaults
    (``counterfair --help`` imports no pandas): they are the same."""
    from counterfair.audit import sfm, sfm_fit, sfm_models, sfm_roles
    from counterfair.cli import run as cli_run

    assert cli_run.SFM_FAMILIES == sfm_roles.OUTCOME_FAMILIES
    assert cli_run.SFM_GROUPINGS == sfm_models.GROUPINGS
    assert cli_run.SFM_METHODS == sfm_fit.METHODS
    assert cli_run.SFM_ROW_WEIGHTS == sfm.ROW_WEIGHTS
    assert inspect.signature(sfm_fit.SFMFit.decompose).parameters["rows"].default == (
        cli_run.SFM_ROW_WEIGHTS[0]
    )
    # the fit's defaults are SFMSettings'
    defaults = sfm_fit.SFMSettings()
    assert defaults.groups == cli_run.SFM_GROUPINGS[0]
    assert defaults.method == cli_run.SFM_METHODS[0]
    for name, value in cli_run.SFM_DEFAULTS.items():
        assert getattr(defaults, name) == value, name


def test_help_shows_the_data_mode(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["decompose", "--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    assert "[RUN]" in text and "--data CSV" in text
    assert "counterfair decompose --data census.csv --attribute sex" in text
    for option in ("--confounders", "--mediators", "--categorical", "--family", "--nrows",
                   "--chains", "bayesian_bootstrap"):
        assert option in text, option
