"""Quiet, visible progress: counterfair logs instead of printing, and draws progress bars
only where a person watches (never in a pipe, a log file or CI)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from counterfair import logs

SCREENFUL = 40
STUDY = Path(__file__).resolve().parents[1] / "experiments" / "law_school.py"


def _study(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "CI"}
    environment.update(env)
    return subprocess.run(
        [sys.executable, str(STUDY), "--quick", "--out", str(tmp_path / "study")],
        capture_output=True, text=True, env=environment, timeout=600, check=False,
    )


@pytest.mark.stan
@pytest.mark.filterwarnings("ignore::counterfair.errors.ConvergenceWarning")
def test_a_quick_study_prints_at_most_a_screenful_and_no_progress_bar(
    stan_backend: str, tmp_path: Path
) -> None:
    run = _study(tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    shown = run.stdout + run.stderr
    lines = shown.splitlines()
    assert len(lines) <= SCREENFUL, shown
    assert "\r" not in shown and "it/s" not in shown  # no bar in a pipe
    assert "Building" not in shown and "Gradient evaluation took" not in shown
    assert any(line.startswith("[counterfair] law-school: total run time") for line in lines)
    assert "| Fair Add |" in shown  # the headline table ends the run
    assert "MCMC diagnostics" in shown  # one summary line per fit


@pytest.mark.stan
@pytest.mark.filterwarnings("ignore::counterfair.errors.ConvergenceWarning")
def test_the_log_level_setting_silences_the_stages(stan_backend: str, tmp_path: Path) -> None:
    run = _study(tmp_path, COUNTERFAIR_LOG="ERROR")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout + run.stderr == ""
    assert (tmp_path / "study" / "results.md").exists()


def test_an_unknown_log_level_is_refused_naming_the_setting(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "counterfair.cli.commands", "audit", "--help"],
        capture_output=True, text=True, env={**os.environ, logs.LOG_ENV: "LOUD"}, check=False,
    )
    assert run.returncode == 2
    assert "COUNTERFAIR_LOG='LOUD' is not a log level" in run.stderr


def test_levels_from_verbose_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(logs.LOG_ENV, raising=False)
    assert logs.level_of() == logging.INFO
    assert logs.level_of(True) == logging.DEBUG and logs.level_of(False) == logging.WARNING
    monkeypatch.setenv(logs.LOG_ENV, "debug")
    assert logs.level_of() == logging.DEBUG
    assert logs.level_of("error") == logging.ERROR
    with pytest.raises(ValueError, match="'chatty' is not a log level"):
        logs.level_of("chatty")


def test_console_adds_one_handler_however_often_it_is_called() -> None:
    logger = logging.getLogger(logs.LOGGER_NAME)
    before = (list(logger.handlers), logger.level, logger.propagate)
    try:
        logs.console("WARNING")
        logs.console("DEBUG")
        ours = [h for h in logger.handlers if h.get_name() == "counterfair-console"]
        assert len(ours) == 1 and logger.level == logging.DEBUG
    finally:
        logger.handlers[:], logger.level, logger.propagate = before


def test_no_progress_bar_in_ci_or_a_pipe(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CI", "true")
    assert not logs.progress_enabled()
    assert logs.progress_enabled(True)  # asked for explicitly
    monkeypatch.delenv("CI")
    assert not sys.stderr.isatty()  # pytest captures: a pipe, not a terminal
    assert not logs.progress_enabled()
    assert list(logs.progress(range(3), desc="rows")) == [0, 1, 2]
    assert capsys.readouterr().err == ""
