"""Getting the fast Stan back end onto a machine: CmdStan, found or installed once.

counterfair samples with CmdStan (through cmdstanpy) when it can, and with PyStan 3
otherwise. cmdstanpy is a dependency of counterfair, CmdStan is not a Python package:
on the first fit that finds no CmdStan, :func:`ensure_cmdstan` installs it, once per
process, in the first way that applies:

1. ``COUNTERFAIR_CMDSTAN_KIT`` names a script that builds CmdStan without a download
   (an organisation's offline kit); it is run with ``PYTHON`` set to this interpreter;
2. the CmdStan release server (GitHub) answers: ``cmdstanpy.install_cmdstan`` downloads
   and builds CmdStan into ``~/.cmdstan`` (several minutes on a laptop, one time);
3. otherwise nothing is installed: one log line says how to get CmdStan and PyStan is
   used meanwhile.

``COUNTERFAIR_INSTALL_CMDSTAN=never`` turns the installation off (the test suite does,
so that a test never starts a download). When neither CmdStan nor PyStan can run,
:func:`missing_backend_error` is the one error that lists what is missing and the
command that fixes each.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from counterfair.errors import BackendUnavailableError

logger = logging.getLogger(__name__)

INSTALL_ENV = "COUNTERFAIR_INSTALL_CMDSTAN"
"""``auto`` (the default) installs CmdStan on first use when it can; ``never`` does not."""
KIT_ENV = "COUNTERFAIR_CMDSTAN_KIT"
"""Path of a script that builds CmdStan with no download (run instead of downloading)."""
CMDSTAN_VERSION = "2.35.0"
"""The CmdStan release installed when none is found (the Stan version PyStan 3.10 ships)."""
RELEASE_HOST = "github.com"
"""Where ``cmdstanpy.install_cmdstan`` downloads CmdStan from."""

_attempt: InstallAttempt | None = None


@dataclass(frozen=True)
class InstallAttempt:
    """What :func:`ensure_cmdstan` did.

    Attributes
    ----------
    installed : bool
        CmdStan is usable now.
    how : str
        ``"found"``, ``"kit"``, ``"download"``, ``"disabled"``, ``"offline"`` or ``"failed"``.
    detail : str
        One sentence for the user: what happened and, when nothing was installed, how
        to get CmdStan.
    """

    installed: bool
    how: str
    detail: str


def cmdstan_available() -> bool:
    """Whether cmdstanpy is importable and finds a CmdStan installation."""
    try:
        with warnings.catch_warnings():  # tqdm.auto, imported by cmdstanpy, in Jupyter
            warnings.filterwarnings("ignore", message="IProgress not found")
            import cmdstanpy
    except ImportError:
        return False
    try:
        cmdstanpy.cmdstan_path()
    except (ValueError, RuntimeError):
        return False
    return True


def pystan_importable() -> bool:
    """Whether PyStan 3 (``import stan``) is installed."""
    try:
        import stan  # noqa: F401
    except ImportError:
        return False
    return True


def release_server_reachable(*, timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the CmdStan release server opens within ``timeout`` s."""
    try:
        with socket.create_connection((RELEASE_HOST, 443), timeout=timeout):
            return True
    except OSError:
        return False


def how_to_get_cmdstan() -> str:
    """The commands that install CmdStan, in one line."""
    return (
        "python -m cmdstanpy.install_cmdstan (needs access to github.com), or "
        f"{KIT_ENV}=/path/to/build-script for an offline build, or export "
        "CMDSTAN=/path/to/cmdstan for an existing installation"
    )


def ensure_cmdstan(*, progress: bool | None = None) -> InstallAttempt:
    """Make CmdStan usable if it is not, at most once per process (see the module notes).

    Parameters
    ----------
    progress : bool, optional
        Show the download's or build's progress; default: when standard error is a
        terminal.
    """
    global _attempt
    if cmdstan_available():
        return InstallAttempt(True, "found", "CmdStan found")
    if _attempt is None:
        _attempt = _install(progress=sys.stderr.isatty() if progress is None else progress)
    return _attempt


def _install(*, progress: bool) -> InstallAttempt:
    mode = os.environ.get(INSTALL_ENV, "auto").strip().lower() or "auto"
    if mode not in ("auto", "never"):
        raise ValueError(f"{INSTALL_ENV}={mode!r}: use 'auto' or 'never'")
    if mode == "never":
        return InstallAttempt(False, "disabled", f"{INSTALL_ENV}=never; {how_to_get_cmdstan()}")
    kit = os.environ.get(KIT_ENV, "").strip()
    if kit:
        return _run_kit(Path(kit).expanduser(), progress=progress)
    if not release_server_reachable():
        return InstallAttempt(
            False, "offline", f"{RELEASE_HOST} is not reachable; {how_to_get_cmdstan()}"
        )
    return _download(progress=progress)


def _run_kit(script: Path, *, progress: bool) -> InstallAttempt:
    if not script.is_file():
        return InstallAttempt(False, "failed", f"{KIT_ENV}={script} is not a file")
    logger.warning(
        "no CmdStan found; building CmdStan with %s (one time, several minutes)",
        script,
    )
    env = dict(os.environ, PYTHON=sys.executable)
    lines: list[str] = []
    with subprocess.Popen(
        ["bash", str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    ) as process:
        assert process.stdout is not None
        for line in _with_progress(process.stdout, progress=progress, what="building CmdStan"):
            lines.append(line.rstrip())
            logger.debug("%s", line.rstrip())
        code = process.wait()
    if code != 0:
        tail = " | ".join(lines[-3:])
        return InstallAttempt(False, "failed", f"{script} exited with status {code}: {tail}")
    if not cmdstan_available():
        return InstallAttempt(
            False, "failed", f"{script} finished but cmdstanpy finds no CmdStan; export CMDSTAN"
        )
    return InstallAttempt(True, "kit", f"CmdStan built by {script}")


def _download(*, progress: bool) -> InstallAttempt:
    import cmdstanpy

    if shutil.which("make") is None or shutil.which("g++") is None:
        return InstallAttempt(
            False, "failed", "building CmdStan needs make and g++ on the PATH; "
            + how_to_get_cmdstan()
        )
    logger.warning(
        "no CmdStan found; installing CmdStan %s into ~/.cmdstan "
        "(one time, several minutes; %s=never turns this off)", CMDSTAN_VERSION, INSTALL_ENV,
    )
    try:
        ok = cmdstanpy.install_cmdstan(version=CMDSTAN_VERSION, progress=progress, cores=2)
    except Exception as error:  # the installer raises several types on network faults
        return InstallAttempt(False, "failed", f"cmdstanpy.install_cmdstan failed: {error}")
    if not ok or not cmdstan_available():
        return InstallAttempt(False, "failed", "cmdstanpy.install_cmdstan did not finish")
    return InstallAttempt(True, "download", f"CmdStan {CMDSTAN_VERSION} installed")


def _with_progress(lines: Iterable[str], *, progress: bool, what: str) -> Iterable[str]:
    """Iterate ``lines`` under one tqdm bar (lines counted) when ``progress`` is on."""
    if not progress:
        return lines
    from tqdm.auto import tqdm

    bar: Iterable[str] = tqdm(lines, desc=what, unit=" lines", leave=False)
    return bar


def missing_backend_error(attempt: InstallAttempt) -> BackendUnavailableError:
    """The one error raised when no Stan back end can run: what is missing, and the fixes."""
    return BackendUnavailableError(
        "no Stan back end can run here:\n"
        f"  - CmdStan: not found ({attempt.detail})\n"
        "  - PyStan 3: not installed; pip install 'counterfair[pystan]' (Linux and macOS)\n"
        "Either one is enough; both need a C++ compiler (g++ or clang++) on the PATH."
    )
