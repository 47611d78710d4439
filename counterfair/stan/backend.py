"""Which Stan back end runs: the choice among the adapters.

One small interface, :class:`~counterfair.stan.interface.StanBackend`, with one adapter
per Stan interface:

* :class:`~counterfair.stan.cmdstan_adapter.CmdStanPyBackend` -- cmdstanpy (a dependency
  of counterfair) and a CmdStan installation, found or installed on first use (see
  :mod:`counterfair.stan.install`). Works in notebooks and on Windows; executables are
  cached by program text in the user's cache folder.
* :class:`~counterfair.stan.pystan_adapter.PyStanBackend` -- PyStan 3
  (``pip install 'counterfair[pystan]'``), which needs nothing but ``pip`` on Linux and
  macOS (httpstan ships stanc and the Stan headers).

``backend="auto"`` picks the one named by the ``COUNTERFAIR_BACKEND`` environment
variable if it is set, else cmdstanpy when a CmdStan installation is found or can be
installed, else PyStan (with one log line saying how to get the faster CmdStan). When
neither can run, one :class:`~counterfair.errors.BackendUnavailableError` lists what is
missing. Only the two adapter modules import a Stan interface; they import
:mod:`counterfair.stan.interface`, and this module imports them: the arrows run one way.
"""

from __future__ import annotations

import logging
import os

from counterfair.stan.cmdstan_adapter import CmdStanPyBackend
from counterfair.stan.install import (
    cmdstan_available,
    ensure_cmdstan,
    how_to_get_cmdstan,
    missing_backend_error,
    pystan_importable,
)
from counterfair.stan.interface import (
    CMDSTAN_ARGS,
    PYSTAN_ARGS,
    SamplerRun,
    StanBackend,
    translate_sampler_args,
)
from counterfair.stan.pystan_adapter import PyStanBackend

__all__ = [
    "BACKEND_ENV",
    "BACKEND_NAMES",
    "CMDSTAN_ARGS",
    "PYSTAN_ARGS",
    "SamplerRun",
    "StanBackend",
    "available_backends",
    "cmdstan_available",
    "get_backend",
    "resolve_backend_name",
    "translate_sampler_args",
]

logger = logging.getLogger(__name__)

BACKEND_ENV = "COUNTERFAIR_BACKEND"
"""Environment variable naming the back end that ``backend="auto"`` resolves to."""
BACKEND_NAMES = ("pystan", "cmdstanpy")
"""The adapters, in the order ``backend="auto"`` considers them when CmdStan is absent."""

_told_about_pystan = False


def available_backends() -> list[str]:
    """Names of the back ends that can run on this machine (nothing is installed)."""
    names = ["pystan"] if pystan_importable() else []
    if cmdstan_available():
        names.append("cmdstanpy")
    return names


def resolve_backend_name(name: str = "auto") -> str:
    """The concrete back end ``name`` stands for ("auto" resolved as documented above)."""
    global _told_about_pystan
    if name == "auto":
        chosen = os.environ.get(BACKEND_ENV, "").strip()
        if chosen:
            if chosen not in BACKEND_NAMES:
                raise ValueError(
                    f"{BACKEND_ENV}={chosen!r} is not a back end; use one of {list(BACKEND_NAMES)}"
                )
            return chosen
        if cmdstan_available():
            return "cmdstanpy"
        attempt = ensure_cmdstan()
        if attempt.installed:
            return "cmdstanpy"
        if not pystan_importable():
            raise missing_backend_error(attempt)
        if not _told_about_pystan:
            _told_about_pystan = True
            logger.warning(
                "sampling with PyStan (slower); for CmdStan: %s", attempt.detail
            )
        return "pystan"
    if name not in BACKEND_NAMES:
        raise ValueError(f"unknown backend {name!r}; use 'auto', 'pystan' or 'cmdstanpy'")
    return name


def get_backend(name: str = "auto") -> StanBackend:
    """Return the adapter for ``name`` ("auto", "pystan" or "cmdstanpy")."""
    resolved = resolve_backend_name(name)
    if resolved == "cmdstanpy":
        if not cmdstan_available():
            raise RuntimeError(
                "backend='cmdstanpy' needs cmdstanpy and a CmdStan installation: "
                f"{how_to_get_cmdstan()}; use backend='pystan' otherwise"
            )
        return CmdStanPyBackend()
    if not pystan_importable():
        raise RuntimeError(
            "backend='pystan' needs PyStan 3: pip install 'counterfair[pystan]'; "
            "use backend='cmdstanpy' otherwise"
        )
    return PyStanBackend()
