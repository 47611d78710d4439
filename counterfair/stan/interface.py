"""The Stan back-end interface: what every adapter implements and returns.

The adapters (:mod:`counterfair.stan.cmdstan_adapter`, :mod:`counterfair.stan.pystan_adapter`)
import this module and nothing else of the package's Stan layer; the choice among them
(:mod:`counterfair.stan.backend`) imports the adapters, so the arrows run one way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import arviz as az

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
    "metric": "metric",
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
