"""The Stan back-end interface and how one is chosen.

One small interface, :class:`StanBackend`, with one adapter per Stan interface:

* :class:`~counterfair.stan.cmdstan_adapter.CmdStanPyBackend` -- cmdstanpy and a
  CmdStan installation (``pip install 'counterfair[cmdstan]'`` then
  ``python -m cmdstanpy.install_cmdstan``). Works in notebooks and on Windows;
  executables are cached by program text in the user's cache folder.
* :class:`~counterfair.stan.pystan_adapter.PyStanBackend` -- PyStan 3, which works with
  ``pip install`` alone on Linux and macOS (httpstan ships stanc and the Stan headers).

``backend="auto"`` picks the one named by the ``COUNTERFAIR_BACKEND`` environment
variable if it is set, else cmdstanpy when a CmdStan installation is found, else PyStan.
Only the two adapter modules import a Stan interface.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import arviz as az

BACKEND_ENV = "COUNTERFAIR_BACKEND"
"""Environment variable naming the back end that ``backend="auto"`` resolves to."""
BACKEND_NAMES = ("pystan", "cmdstanpy")
"""The adapters, in the order ``backend="auto"`` considers them when CmdStan is absent."""

PYSTAN_ARGS = {
    "max_depth": "max_depth",
    "delta": "delta",
    "stepsize": "stepsize",
    "init": "init",
    "init_phase": "init_buffer",
    "metric_window": "window",
    "term_phase": "term_buffer",
}
"""counterfair's sampler argument names -> PyStan's."""
CMDSTAN_ARGS = {
    "max_depth": "max_treedepth",
    "delta": "adapt_delta",
    "stepsize": "step_size",
    "init": "inits",
    "init_phase": "adapt_init_phase",
    "metric_window": "adapt_metric_window",
    "term_phase": "adapt_step_size",
    "inv_metric": "inv_metric",
}
"""counterfair's sampler argument names -> cmdstanpy's."""


@dataclass(frozen=True)
class SamplerRun:
    """What one sampler call returns.

    Attributes
    ----------
    idata : arviz.InferenceData
        Posterior draws and sampler statistics.
    seconds : float
        Wall time of compilation (if any), sampling and conversion.
    backend : str
        Name of the adapter that ran.
    compile_seconds : float
        Part of ``seconds`` spent compiling (0 when the program was cached).
    """

    idata: az.InferenceData
    seconds: float
    backend: str
    compile_seconds: float = 0.0


class StanBackend(Protocol):
    """A Stan interface that compiles (cached), samples by NUTS and evaluates log densities."""

    name: str

    def compile(self, code: str) -> float:
        """Compile ``code`` unless a cached binary exists; return the seconds spent."""
        ...

    def sample(
        self,
        code: str,
        data: Mapping[str, Any],
        *,
        chains: int,
        warmup: int,
        draws: int,
        seed: int | None,
        progress: bool,
        coords: Mapping[str, Sequence[Any]] | None = None,
        dims: Mapping[str, list[str]] | None = None,
        **sampler_args: Any,
    ) -> SamplerRun:
        """Sample ``code`` given ``data`` with NUTS, chains in parallel."""
        ...

    def log_density(
        self,
        code: str,
        data: Mapping[str, Any],
        params: Mapping[str, Any],
        *,
        jacobian: bool = True,
    ) -> float:
        """Log density of the program at constrained parameter values ``params``."""
        ...


def translate_sampler_args(args: Mapping[str, Any], table: Mapping[str, str]) -> dict[str, Any]:
    """Rename counterfair's sampler arguments for one interface; unknown names raise."""
    unknown = [k for k in args if k not in table]
    if unknown:
        raise TypeError(f"unknown sampler argument(s) {unknown}; known: {sorted(table)}")
    return {table[k]: v for k, v in args.items()}


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


def available_backends() -> list[str]:
    """Names of the back ends that can run on this machine."""
    names = ["pystan"] if _pystan_importable() else []
    if cmdstan_available():
        names.append("cmdstanpy")
    return names


def _pystan_importable() -> bool:
    try:
        import stan  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_backend_name(name: str = "auto") -> str:
    """The concrete back end ``name`` stands for ("auto" resolved as documented above)."""
    if name == "auto":
        chosen = os.environ.get(BACKEND_ENV, "").strip()
        if chosen:
            if chosen not in BACKEND_NAMES:
                raise ValueError(
                    f"{BACKEND_ENV}={chosen!r} is not a back end; use one of {list(BACKEND_NAMES)}"
                )
            return chosen
        return "cmdstanpy" if cmdstan_available() else "pystan"
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
                "pip install 'counterfair[cmdstan]' then python -m cmdstanpy.install_cmdstan "
                "(or export CMDSTAN=/path/to/cmdstan); use backend='pystan' otherwise"
            )
        from counterfair.stan.cmdstan_adapter import CmdStanPyBackend

        return CmdStanPyBackend()
    from counterfair.stan.pystan_adapter import PyStanBackend

    return PyStanBackend()
