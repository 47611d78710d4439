"""Documented guarantees of the command line, checked the way a user meets them.

* docs/command-line.md, "Safety and exit codes": outputs are written to a temporary
  file and moved into place, so a command interrupted while writing leaves nothing
  half-written (the earlier file as it was, no temporary file); exit code 2 with the
  reason on one line for refused input, the studies (``compas``, ``adult-pscf``,
  ``law-school``) included; exit code 1 for an unexpected error (a traceback).
* ``counterfair compile`` compiles the shipped programs into the cache, and a second
  run finds them there.
* ``python experiments/compas.py --quick`` runs end to end and writes its tables and report.

The commands run as separate processes (``python -m counterfair``), except the writes
interrupted by an injected failure, which run in process.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _data import DATA_DIR
from _seeds import shifted

import counterfair as cf
from counterfair import atomic
from counterfair.cli import run as cli_run
from counterfair.stan import backend as stan_backend_module

ROOT = Path(__file__).parents[1]
COMPAS_FILE = "compas-scores-two-years.csv"
FAIR = "Fair (U, age)"  # the COMPAS study's counterfactually fair predictor


def counterfair(*args: str, cwd: Path, timeout: float = 900,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m counterfair ARGS`` as a separate process."""
    return subprocess.run(
        [sys.executable, "-m", "counterfair", *args], cwd=cwd, capture_output=True, text=True,
        timeout=timeout, check=False, env=env,
    )


def study(name: str, *args: str, cwd: Path,
          timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run the study script ``python experiments/NAME.py ARGS`` as a separate process."""
    script = ROOT / "experiments" / f"{name.replace('-', '_')}.py"
    return subprocess.run(
        [sys.executable, str(script), *args], cwd=cwd, capture_output=True, text=True,
        timeout=timeout, check=False,
    )


def _state(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def _hidden(folder: Path) -> list[str]:
    """Names of the temporary files a write leaves (they start with a dot)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# ---------------------------------------------------------------------- half-written files
def _fail_half_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """``DataFrame.to_csv`` and ``Path.write_text`` write the first half of their text to
    the file, then fail as a full disk would."""
    real_csv, real_text = pd.DataFrame.to_csv, Path.write_text

    def half_then_fail(path: Path | str, text: str) -> None:
        real_text(Path(path), text[: len(text) // 2], encoding="utf-8")
        raise OSError(errno.ENOSPC, "No space left on device (injected)")

    def to_csv(self: pd.DataFrame, path_or_buf: str | Path, *args: object,
               **kwargs: object) -> None:
        half_then_fail(path_or_buf, real_csv(self, None, *args, **kwargs))  # type: ignore[call-overload]

    def write_text(self: Path, data: str, *args: object, **kwargs: object) -> int:
        half_then_fail(self, data)
        return 0

    monkeypatch.setattr(pd.DataFrame, "to_csv", to_csv)
    monkeypatch.setattr(Path, "write_text", write_text)


@pytest.mark.parametrize("writer", ["csv", "text"])
def test_a_write_failing_half_way_leaves_nothing_half_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    """The command line's writers (predictions.csv, counterfactuals.csv, decomposition.csv,
    learn.json): a failure after half of the bytes reached the disk keeps the earlier file
    byte for byte, creates no file where there was none, and leaves no temporary file."""
    frame = pd.DataFrame({"row": np.arange(200), "value": np.linspace(0.0, 1.0, 200)})

    def write(path: Path) -> None:
        if writer == "csv":
            cli_run._write_csv(frame, path)
        else:
            cli_run._move_into_place({path: atomic.stage(path, frame.to_json() + "\n")})

    earlier, fresh = tmp_path / "earlier.out", tmp_path / "fresh.out"
    earlier.write_bytes(b"an earlier file\n")
    before = _state(earlier)
    with monkeypatch.context() as patch:
        _fail_half_way(patch)
        for path in (earlier, fresh):
            with pytest.raises(OSError, match="injected"):
                write(path)
    assert _state(earlier) == before
    assert not fresh.exists()
    assert _hidden(tmp_path) == []
    write(fresh)  # without the failure: the whole file
    whole = frame.to_csv(index=False) if writer == "csv" else frame.to_json() + "\n"
    assert fresh.read_text(encoding="utf-8") == whole


# ---------------------------------------------------------------------- exit codes
def test_refused_input_exits_2_with_one_line_naming_it(tmp_path: Path) -> None:
    pd.DataFrame({"y": [0, 1, 1], "p": [0.2, 0.9, 0.6], "g": ["a", "b", "a"]}).to_csv(
        tmp_path / "d.csv", index=False)
    (tmp_path / "kept.html").write_text("keep me")
    cases = [
        (["audit", "missing.csv", "--label", "y", "--predictions", "p", "--protected", "g"],
         "audit file missing.csv does not exist"),
        (["audit", "d.csv", "--label", "y", "--predictions", "p", "--protected", "colour"],
         "column 'colour' is not in d.csv"),
        (["audit", "d.csv", "--label", "y", "--predictions", "p", "--protected", "g",
          "--out", "kept.html"], "kept.html already exists; pass --overwrite"),
        (["fit", "nosuch.yaml", "--data", "d.csv", "--out", "run"],
         "SCM file nosuch.yaml does not exist"),
        (["audit", "d.csv", "--bootstrap", "many"], "argument --bootstrap: invalid int value"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ]
    for args, text in cases:
        done = counterfair(*args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.returncode, done.stderr)
        assert text in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert (tmp_path / "kept.html").read_text() == "keep me"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name", ["compas", "adult-pscf", "law-school"])
def test_a_study_given_a_missing_data_folder_exits_2_naming_it(tmp_path: Path,
                                                              name: str) -> None:
    missing = tmp_path / "no_such_folder"
    done = study(name, "--quick", "--data-dir", str(missing), "--out",
                 str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"data folder {missing} does not exist" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------- compile
@pytest.mark.stan
def test_compile_fills_the_cache_and_a_second_run_finds_it(stan_backend: str,
                                                           tmp_path: Path) -> None:
    """``counterfair compile``: one line per shipped program; afterwards every program is
    in the back end's cache (for CmdStan: its executable, named by the program's hash), so
    a second run compiles nothing."""
    from counterfair.datasets.law_school_models import shipped_programs

    programs = shipped_programs()
    for attempt in ("first", "second"):
        done = counterfair("compile", "--backend", stan_backend, "--jobs", "1", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.strip().splitlines()
        assert len(lines) == len(programs), done.stdout
        for name in programs:
            (line,) = [x for x in lines if x.startswith(f"{stan_backend}: {name}: ")]
            if attempt == "second":
                assert ": cached (" in line, line
            else:
                assert ": cached (" in line or ": compiled in " in line, line
    if stan_backend == "cmdstanpy":
        from counterfair.stan.cmdstan_adapter import cache_dir, program_stem

        for code in programs.values():
            exe = cache_dir() / (program_stem(code) + (".exe" if os.name == "nt" else ""))
            assert exe.is_file() and os.access(exe, os.X_OK), exe
            assert (cache_dir() / f"{program_stem(code)}.stan").read_text() == code


@pytest.mark.slow
@pytest.mark.skipif(not stan_backend_module.cmdstan_available(),
                    reason="CmdStan is not installed")
def test_compile_into_an_empty_cache(tmp_path: Path) -> None:
    """Into an empty cache (``COUNTERFAIR_CACHE``): each program is compiled once, its
    executable written, and the second run reports them cached (minutes: ``-m slow``)."""
    from counterfair.datasets.law_school_models import shipped_programs

    env = {**os.environ, "COUNTERFAIR_CACHE": str(tmp_path / "cache")}
    first = counterfair("compile", "--backend", "cmdstanpy", "--jobs", "2", cwd=tmp_path,
                        env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count(": compiled in ") == len(shipped_programs()), first.stdout
    exes = [p for p in (tmp_path / "cache").rglob("model_*") if p.suffix in ("", ".exe")]
    assert len(exes) == len(shipped_programs()), exes
    second = counterfair("compile", "--backend", "cmdstanpy", cwd=tmp_path, env=env)
    assert second.returncode == 0 and second.stdout.count(": cached (") == len(
        shipped_programs()), second.stdout


# ---------------------------------------------------------------------- compas --quick
@pytest.mark.slow
@pytest.mark.stan
@pytest.mark.skipif(not (DATA_DIR / COMPAS_FILE).exists(), reason=f"{COMPAS_FILE} not found")
def test_compas_quick_runs_end_to_end(stan_backend: str, tmp_path: Path) -> None:
    out = tmp_path / "compas"
    started = time.perf_counter()
    done = study("compas", "--quick", "--data-dir", str(DATA_DIR), "--out", str(out),
                 "--seed", str(shifted(0)), cwd=tmp_path)
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    for name in ("results.md", "results.json", "counterfactual_change.csv", "group_audit.csv",
                 "audit.html"):
        assert (out / name).stat().st_size > 0, name
    assert not _hidden(out)
    results = json.loads((out / "results.json").read_text())
    assert results["rows"]["scm_fit"] == 300  # CompasConfig.quick_mode
    # every predictor beats the majority class (the test third is stratified on the
    # outcome, so its rate is the two races' rate in the file)
    data = cf.datasets.load_compas(DATA_DIR)
    recid = data.loc[data["race"].isin(["African-American", "Caucasian"]), "two_year_recid"]
    majority = max(recid.mean(), 1 - recid.mean())
    metrics = pd.DataFrame(results["metrics"]).set_index("predictor")
    assert {"Full", "Unaware", FAIR} <= set(metrics.index)
    assert (metrics["accuracy"] > majority).all(), (metrics, majority)
    assert (metrics["auc"] > 0.5).all() and (metrics["auc"] <= 1).all()
    changes = pd.read_csv(out / "counterfactual_change.csv")
    assert set(changes["attribute"]) == {"race", "sex"}
    assert changes["mean_abs_change"].between(0, 1).all()  # of labels and probabilities
    assert set(changes["predictor"]) == set(metrics.index)
    fair = changes[changes["predictor"] == FAIR]
    assert len(fair) > 0 and (fair["mean_abs_change"] == 0).all()  # do(race), do(sex)
    full = changes[changes["predictor"] == "Full"]
    assert (full["mean_abs_change"] > 0).any()
    groups = pd.read_csv(out / "group_audit.csv")
    assert {"predictor", "attribute", "group", "reference"} <= set(groups.columns)
    assert (groups["selection_rate_ratio"].dropna() >= 0).all()
    report = (out / "audit.html").read_text(encoding="utf-8")
    assert report.startswith("<!DOCTYPE html>") and report.rstrip().endswith("</html>")
    assert f"| {FAIR} |" in (out / "results.md").read_text()
    print(f"python experiments/compas.py --quick took {seconds:.0f} s")


def test_an_unexpected_error_exits_1_with_its_traceback(tmp_path: Path) -> None:
    """Not a refusal: the output folder cannot be created (its parent is in /proc), an
    operating-system error no check anticipates; nothing is written."""
    (tmp_path / "m.yaml").write_text(
        "nodes:\n  A: {family: protected}\n  X: {family: normal, parents: [A]}\n"
    )
    (tmp_path / "d.csv").write_text("A,X\na,1.0\nb,2.0\na,1.5\nb,2.5\n")
    done = counterfair("fit", "m.yaml", "--data", "d.csv", "--out", "/proc/no_such/run",
                       "--chains", "1", "--warmup", "10", "--draws", "10", cwd=tmp_path)
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "Traceback" in done.stderr and "/proc/no_such" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv", "m.yaml"]
