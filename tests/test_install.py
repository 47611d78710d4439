"""Choosing and getting a Stan back end: CmdStan found, built by a kit, or PyStan meanwhile.

Every test runs the real selection code in a real environment in which CmdStan is made
unfindable (``CMDSTAN`` names an empty folder) or PyStan unimportable (``sys.modules``
entry set to ``None``, Python's own way to block an import).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import cmdstanpy
import pytest

from counterfair.errors import BackendUnavailableError
from counterfair.stan import backend, install

REAL_CMDSTAN = cmdstanpy.cmdstan_path() if install.cmdstan_available() else None


@pytest.fixture
def no_cmdstan(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A process in which cmdstanpy finds no CmdStan; the install state starts afresh."""
    home = tmp_path / "cmdstan-home"
    monkeypatch.setenv("CMDSTAN", str(home))
    monkeypatch.delenv(backend.BACKEND_ENV, raising=False)
    monkeypatch.delenv(install.KIT_ENV, raising=False)
    monkeypatch.setattr(install, "_attempt", None)
    monkeypatch.setattr(backend, "_told_about_pystan", False)
    assert not install.cmdstan_available()
    return home


def _kit(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "build-cmdstan.sh"
    script.write_text("#!/usr/bin/env bash\nset -e\n" + body)
    return script


def test_never_install_falls_back_to_pystan_with_one_line(
    no_cmdstan: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(install.INSTALL_ENV, "never")
    with caplog.at_level(logging.WARNING, logger="counterfair"):
        assert backend.resolve_backend_name("auto") == "pystan"
        assert backend.resolve_backend_name("auto") == "pystan"  # said once, not per fit
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert "PyStan" in lines[0] and "install_cmdstan" in lines[0]
    assert f"{install.INSTALL_ENV}=never" in lines[0]


def test_offline_machine_says_so_and_uses_pystan(
    no_cmdstan: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(install.INSTALL_ENV, "auto")
    monkeypatch.setattr(install, "RELEASE_HOST", "cmdstan-release.invalid")  # never resolves
    with caplog.at_level(logging.WARNING, logger="counterfair"):
        assert backend.resolve_backend_name("auto") == "pystan"
    attempt = install.ensure_cmdstan()
    assert (attempt.installed, attempt.how) == (False, "offline")
    assert "cmdstan-release.invalid is not reachable" in caplog.text


def test_no_backend_at_all_is_one_error_listing_each_fix(
    no_cmdstan: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(install.INSTALL_ENV, "never")
    monkeypatch.setitem(sys.modules, "stan", None)  # PyStan not installed
    assert backend.available_backends() == []
    with pytest.raises(BackendUnavailableError) as raised:
        backend.resolve_backend_name("auto")
    message = str(raised.value)
    assert "CmdStan: not found" in message and "python -m cmdstanpy.install_cmdstan" in message
    assert "PyStan 3: not installed" in message and "counterfair[pystan]" in message
    with pytest.raises(RuntimeError, match=r"counterfair\[pystan\]"):
        backend.get_backend("pystan")


def test_a_failing_kit_is_named_with_its_status(
    no_cmdstan: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = _kit(tmp_path, "echo 'no compiler here' >&2\nexit 3\n")
    monkeypatch.setenv(install.INSTALL_ENV, "auto")
    monkeypatch.setenv(install.KIT_ENV, str(script))
    assert backend.resolve_backend_name("auto") == "pystan"
    attempt = install.ensure_cmdstan()
    assert attempt.how == "failed"
    assert str(script) in attempt.detail and "status 3" in attempt.detail
    assert "no compiler here" in attempt.detail


def test_a_missing_kit_file_is_named(
    no_cmdstan: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(install.INSTALL_ENV, "auto")
    monkeypatch.setenv(install.KIT_ENV, str(tmp_path / "nowhere.sh"))
    attempt = install.ensure_cmdstan()
    assert attempt.how == "failed" and "nowhere.sh is not a file" in attempt.detail


@pytest.mark.skipif(REAL_CMDSTAN is None, reason="no CmdStan on this machine to install from")
def test_a_kit_that_installs_cmdstan_makes_auto_choose_it(
    no_cmdstan: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the kit "builds" by linking this machine's CmdStan where CMDSTAN points; it runs
    # under the interpreter it is given in PYTHON, as counterfair promises
    record = tmp_path / "python-used"
    script = _kit(tmp_path, f'echo "$PYTHON" > {record}\nln -s {REAL_CMDSTAN} "$CMDSTAN"\n')
    monkeypatch.setenv(install.INSTALL_ENV, "auto")
    monkeypatch.setenv(install.KIT_ENV, str(script))
    assert backend.resolve_backend_name("auto") == "cmdstanpy"
    assert install.ensure_cmdstan().how == "found"
    assert record.read_text().strip() == sys.executable
    assert os.path.realpath(cmdstanpy.cmdstan_path()) == os.path.realpath(REAL_CMDSTAN)


def test_an_unknown_install_mode_is_refused(
    no_cmdstan: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(install.INSTALL_ENV, "sometimes")
    with pytest.raises(ValueError, match="COUNTERFAIR_INSTALL_CMDSTAN='sometimes'"):
        install.ensure_cmdstan()
