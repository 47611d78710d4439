"""Approximate fits: the SCM's posterior by Pathfinder instead of NUTS (``method="pathfinder"``).

Pathfinder (Zhang et al., 2022, JMLR 23:306) follows L-BFGS paths to the posterior
mode, fits a Gaussian approximation along each path and keeps the one of least
estimated KL divergence; multi-path Pathfinder importance-resamples the draws of
several paths. It is run by CmdStan (cmdstanpy ``CmdStanModel.pathfinder``) and
costs a small fraction of NUTS; its draws are approximate (a Gaussian in the
unconstrained space, so skew and heavy tails are missed and sds tend to be too
small). ``SCM.fit(method="pathfinder")`` runs it through
:func:`counterfair.inference.sampling.fit_scm`;
the resulting :class:`~counterfair.Fit` holds the draws as one chain and
``fit.method == "pathfinder"``; R-hat, ESS and divergences do not apply to them, so
no ConvergenceWarning is raised and one INFO line says so. Compare with NUTS on a
subsample (``benchmarks/pathfinder.py``) before trusting it for a final analysis.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from counterfair.rows.subsample import check_size
from counterfair.stan.backend import resolve_backend_name
from counterfair.stan.interface import SamplerRun

logger = logging.getLogger(__name__)

METHODS = ("nuts", "pathfinder")
"""Values of ``SCM.fit(method=...)``."""
DEFAULT_PATHFINDER_DRAWS = 1000
"""Approximate draws a Pathfinder fit returns by default."""


def check_method(method: object) -> None:
    """Raise a ValueError unless ``method`` is one of :data:`METHODS`."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}, got {method!r}")


def refuse_nuts_options(options: Mapping[str, Any]) -> None:
    """Raise when a NUTS-only option was given to a Pathfinder fit (it would be ignored).

    ``options`` maps option names to the values given (``None`` = not given).
    """
    given = sorted(name for name, value in options.items() if value is not None)
    if given:
        raise ValueError(
            f"{given} only apply to method='nuts'; method='pathfinder' has no chains, "
            "warm-up or sampler settings (its one option is draws=)"
        )


def check_pathfinder_backend(backend: str) -> None:
    """Raise a ValueError naming the back end and the fix unless it resolves to cmdstanpy."""
    name = resolve_backend_name(backend)
    if name != "cmdstanpy":
        raise ValueError(
            f"method='pathfinder' needs the cmdstanpy back end, not {name!r} (PyStan has no "
            "Pathfinder): pass backend='cmdstanpy' with CmdStan installed "
            "(python -m cmdstanpy.install_cmdstan), or use method='nuts'"
        )


def pathfinder_draws(draws: int | None) -> int:
    """The number of approximate draws asked for (default 1,000), checked."""
    return DEFAULT_PATHFINDER_DRAWS if draws is None else check_size(draws, "draws")


def run_pathfinder(
    code: str,
    data: Mapping[str, Any],
    *,
    draws: int,
    seed: int | None,
    coords: Mapping[str, Sequence[Any]],
    dims: Mapping[str, list[str]],
    init: Mapping[str, Any] | None,
) -> SamplerRun:
    """Run multi-path Pathfinder on CmdStan and say in one INFO line what the draws are."""
    from counterfair.stan.cmdstan_adapter import run_pathfinder as cmdstan_pathfinder

    run = cmdstan_pathfinder(
        code, data, draws=draws, seed=seed, coords=coords, dims=dims, init=init
    )
    logger.info(
        "Pathfinder: %d approximate draws kept as one chain in %.1f s; R-hat, ESS and "
        "divergences do not apply to them (no convergence check was made)",
        draws, run.seconds,
    )
    return run
