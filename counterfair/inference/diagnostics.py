"""MCMC diagnostics of a fit (R-hat, bulk ESS, divergences), surfaced as warnings."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import arviz as az
import numpy as np
import pandas as pd

from counterfair.errors import ConvergenceWarning
from counterfair.inference.mcmc_stats import rhat_and_bulk_ess
from counterfair.logs import user_stacklevel

RHAT_MAX = 1.01
"""Largest acceptable rank-normalised split R-hat of a structural parameter."""
ESS_MIN = 100.0
"""Smallest acceptable bulk effective sample size of a structural parameter."""
LATENT_RHAT_MAX = 1.05
"""Largest acceptable R-hat of a per-row latent (thousands of them: 1.01 is hit by chance)."""


@dataclass(frozen=True)
class Diagnostics:
    """Summary of a fit's MCMC diagnostics.

    Attributes
    ----------
    max_rhat, min_ess_bulk : float
        Worst R-hat and bulk ESS over the structural parameters.
    latent_max_rhat, latent_min_ess_bulk : float
        The same over every row's latents (NaN when the SCM has none).
    divergences : int
        Divergent transitions after warm-up, all chains.
    max_treedepth_hits : int
        Transitions that hit the maximum tree depth (-1 when unknown).
    table : pandas.DataFrame
        Per-parameter R-hat and ESS (``arviz.summary`` columns).
    chains, draws : int
        Chains and post-warm-up draws per chain the diagnostics were computed from.

    ``str(diagnostics)`` is a compact printed summary (``print(fit.diagnostics)``).
    """

    max_rhat: float
    min_ess_bulk: float
    latent_max_rhat: float
    latent_min_ess_bulk: float
    divergences: int
    max_treedepth_hits: int
    table: pd.DataFrame
    chains: int = 0
    draws: int = 0

    def problems(self) -> list[str]:
        """Plain-language descriptions of every threshold that was crossed."""
        found = []
        bad_rhat = self.table.index[self.table["r_hat"] > RHAT_MAX].tolist()
        if bad_rhat:
            found.append(f"R-hat > {RHAT_MAX} for {bad_rhat}: chains have not mixed")
        bad_ess = self.table.index[self.table["ess_bulk"] < ESS_MIN].tolist()
        if bad_ess:
            found.append(f"bulk ESS < {ESS_MIN:.0f} for {bad_ess}: draw more or reparametrise")
        if self.divergences:
            found.append(f"{self.divergences} divergent transition(s) after warm-up")
        if np.isfinite(self.latent_max_rhat) and self.latent_max_rhat > LATENT_RHAT_MAX:
            found.append(f"latent R-hat up to {self.latent_max_rhat:.3f} > {LATENT_RHAT_MAX}")
        return found

    def __str__(self) -> str:
        """A compact summary: the worst values against their thresholds, then any problem."""
        lines = [
            f"MCMC diagnostics ({self.chains} chain(s) x {self.draws} draws): "
            f"parameters max R-hat {self.max_rhat:.3f} (limit {RHAT_MAX}), "
            f"min bulk ESS {self.min_ess_bulk:.0f} (limit {ESS_MIN:.0f}); "
            f"divergences {self.divergences}; max tree depth hits "
            + ("unknown" if self.max_treedepth_hits < 0 else str(self.max_treedepth_hits))
        ]
        if np.isfinite(self.latent_min_ess_bulk):
            rhat = "n/a" if np.isnan(self.latent_max_rhat) else f"{self.latent_max_rhat:.3f}"
            lines.append(
                f"  latents: max R-hat {rhat} (limit {LATENT_RHAT_MAX}), "
                f"min bulk ESS {self.latent_min_ess_bulk:.0f}"
            )
        problems = self.problems()
        lines.append("  problems: " + ("; ".join(problems) if problems else "none"))
        return "\n".join(lines)

    def as_dict(self) -> dict[str, float | int]:
        """The scalar diagnostics as a JSON-friendly dict."""
        return {
            "max_rhat": float(self.max_rhat),
            "min_ess_bulk": float(self.min_ess_bulk),
            "latent_max_rhat": float(self.latent_max_rhat),
            "latent_min_ess_bulk": float(self.latent_min_ess_bulk),
            "divergences": int(self.divergences),
            "max_treedepth_hits": int(self.max_treedepth_hits),
        }


def _stacked_latents(idata: az.InferenceData, latents: Sequence[str]) -> np.ndarray:
    """Draws of every latent of every row side by side, shape ``(chain, draw, n)``."""
    parts = []
    for name in latents:
        values = np.asarray(idata.posterior[name].values, dtype=float)
        parts.append(values.reshape(values.shape[0], values.shape[1], -1))
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=2)  # one: no copy


def diagnose(
    idata: az.InferenceData,
    parameters: Sequence[str],
    latents: Sequence[str] = (),
    max_depth: int = 10,
) -> Diagnostics:
    """Compute diagnostics of a fit's structural parameters and latents."""
    arviz_logger = logging.getLogger("arviz")
    level = arviz_logger.level
    if idata.posterior.sizes["chain"] == 1:  # e.g. Pathfinder: R-hat is NaN, say nothing
        arviz_logger.setLevel(logging.ERROR)
    try:
        table = az.summary(
            idata, var_names=list(parameters), kind="diagnostics", round_to="none"
        )
    finally:
        arviz_logger.setLevel(level)
    divergences = int(np.asarray(idata.sample_stats["diverging"].values).sum())
    depth_hits = -1
    if "tree_depth" in idata.sample_stats:
        depth_hits = int((np.asarray(idata.sample_stats["tree_depth"].values) >= max_depth).sum())
    latent_rhat = latent_ess = float("nan")
    if latents:
        draws = _stacked_latents(idata, latents)  # (chain, draw, every row of every latent)
        rhats, esses = rhat_and_bulk_ess(draws)
        latent_ess = float(np.nanmin(esses))
        if draws.shape[0] > 1:
            latent_rhat = float(np.nanmax(rhats))
    return Diagnostics(
        max_rhat=float(table["r_hat"].max()),
        min_ess_bulk=float(table["ess_bulk"].min()),
        latent_max_rhat=latent_rhat,
        latent_min_ess_bulk=latent_ess,
        divergences=divergences,
        max_treedepth_hits=depth_hits,
        table=table,
        chains=int(idata.posterior.sizes["chain"]),
        draws=int(idata.posterior.sizes["draw"]),
    )


def warn_on_problems(
    diagnostics: Diagnostics, what: str = "the SCM fit", *, rhat_hint: str | None = None
) -> None:
    """Emit one :class:`ConvergenceWarning` per problem found.

    ``rhat_hint`` (e.g. the SCM's identification problems) is appended to R-hat problems.
    """
    for problem in diagnostics.problems():
        if rhat_hint is not None and "R-hat" in problem:
            problem = f"{problem}; {rhat_hint}"
        warnings.warn(f"{what}: {problem}", ConvergenceWarning, stacklevel=user_stacklevel())


def warn_on_divergences(idata: az.InferenceData, what: str) -> int:
    """Warn when a run had divergent transitions; return their number."""
    divergences = int(np.asarray(idata.sample_stats["diverging"].values).sum())
    if divergences:
        warnings.warn(
            f"{what}: {divergences} divergent transition(s) after warm-up",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    return divergences
