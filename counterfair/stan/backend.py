"""The only module that talks to a Stan interface.

One small interface, :class:`StanBackend`, with two adapters:

* :class:`PyStanBackend` -- PyStan 3 (``pip install pystan`` brings stanc and the
  Stan headers; compiles with the machine's C++ compiler). httpstan caches each
  compiled model by its program text, so a program is compiled once per machine.
* :class:`CmdStanPyBackend` -- cmdstanpy, used when a CmdStan installation is
  found. Executables are cached under the user's cache folder by program hash.

Both run chains in parallel and return ``arviz.InferenceData``.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import arviz as az

_PYSTAN_ARGS = {"max_depth": "max_depth", "delta": "delta", "stepsize": "stepsize", "init": "init"}
_CMDSTAN_ARGS = {
    "max_depth": "max_treedepth",
    "delta": "adapt_delta",
    "stepsize": "step_size",
    "init": "inits",
}


@dataclass(frozen=True)
class SamplerRun:
    """What one sampler call returns.

    Attributes
    ----------
    idata : arviz.InferenceData
        Posterior draws and sampler statistics.
    seconds : float
        Wall time of compilation (if any) plus sampling.
    backend : str
        Name of the adapter that ran.
    """

    idata: az.InferenceData
    seconds: float
    backend: str


class StanBackend(Protocol):
    """A Stan interface that compiles (cached) and samples a program by NUTS."""

    name: str

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
        """Sample ``code`` given ``data``; see the adapters."""
        ...


def _translate(args: Mapping[str, Any], table: Mapping[str, str]) -> dict[str, Any]:
    unknown = [k for k in args if k not in table]
    if unknown:
        raise TypeError(f"unknown sampler argument(s) {unknown}; known: {sorted(table)}")
    return {table[k]: v for k, v in args.items()}


class PyStanBackend:
    """Adapter for PyStan 3 (works with ``pip install`` alone)."""

    name = "pystan"

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
        """Build (cached by httpstan) and sample with NUTS; chains run in parallel."""
        import stan

        start = time.perf_counter()
        model = stan.build(code, data=dict(data), random_seed=seed)
        fit = model.sample(
            num_chains=chains,
            num_warmup=warmup,
            num_samples=draws,
            **_translate(sampler_args, _PYSTAN_ARGS),
        )
        seconds = time.perf_counter() - start
        idata = az.from_pystan(
            posterior=fit,
            posterior_model=model,
            coords=dict(coords or {}),
            dims=dict(dims or {}),
        )
        return SamplerRun(idata=idata, seconds=seconds, backend=self.name)


def cmdstan_available() -> bool:
    """Whether cmdstanpy is importable and finds a CmdStan installation."""
    try:
        import cmdstanpy
    except ImportError:
        return False
    try:
        cmdstanpy.cmdstan_path()
    except (ValueError, RuntimeError):
        return False
    return True


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "counterfair" / "cmdstan"


class CmdStanPyBackend:
    """Adapter for cmdstanpy (needs a CmdStan installation)."""

    name = "cmdstanpy"

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
        """Compile once per program hash and sample with NUTS, chains in parallel."""
        import cmdstanpy

        start = time.perf_counter()
        digest = hashlib.sha256(code.encode()).hexdigest()[:16]
        folder = _cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        stan_file = folder / f"model_{digest}.stan"
        if not stan_file.exists():
            stan_file.write_text(code)
        model = cmdstanpy.CmdStanModel(stan_file=str(stan_file))
        fit = model.sample(
            data={k: v.tolist() if hasattr(v, "tolist") else v for k, v in data.items()},
            chains=chains,
            parallel_chains=chains,
            iter_warmup=warmup,
            iter_sampling=draws,
            seed=seed,
            show_progress=progress,
            **_translate(sampler_args, _CMDSTAN_ARGS),
        )
        seconds = time.perf_counter() - start
        idata = az.from_cmdstanpy(posterior=fit, coords=dict(coords or {}), dims=dict(dims or {}))
        return SamplerRun(idata=idata, seconds=seconds, backend=self.name)


def get_backend(name: str = "auto") -> StanBackend:
    """Return the adapter for ``name`` ("auto", "pystan" or "cmdstanpy").

    "auto" picks cmdstanpy when a CmdStan installation is found, else PyStan.
    """
    if name == "auto":
        return CmdStanPyBackend() if cmdstan_available() else PyStanBackend()
    if name == "pystan":
        return PyStanBackend()
    if name == "cmdstanpy":
        if not cmdstan_available():
            raise RuntimeError(
                "backend='cmdstanpy' needs cmdstanpy and a CmdStan installation "
                "(pip install 'counterfair[cmdstan]' and install CmdStan); "
                "use backend='pystan' or 'auto' otherwise"
            )
        return CmdStanPyBackend()
    raise ValueError(f"unknown backend {name!r}; use 'auto', 'pystan' or 'cmdstanpy'")
