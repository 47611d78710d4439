"""Approximate fits: the SCM's posterior by Pathfinder instead of NUTS (``method="pathfinder"``).

Pathfinder (Zhang et al., 2022, JMLR 23:306) follows L-BFGS paths to the posterior
mode, fits a Gaussian approximation along each path and keeps the one of least
estimated KL divergence; multi-path Pathfinder importance-resamples the draws of
several paths. It is run by CmdStan (cmdstanpy ``CmdStanModel.pathfinder``) and
costs a small fraction of NUTS; its draws are approximate (a Gaussian in the
unconstrained space, so skew and heavy tails are missed and sds tend to be too
small). The resulting :class:`~counterfair.Fit` holds them as one chain and
``fit.method == "pathfinder"``; R-hat, ESS and divergences do not apply to them, so
no ConvergenceWarning is raised and one INFO line says so. Compare with NUTS on a
subsample (``benchmarks/pathfinder.py``) before trusting it for a final analysis.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pandas as pd

from counterfair import scales, validation
from counterfair.diagnostics import diagnose
from counterfair.encoding import Encoding
from counterfair.posterior import Fit, _coords_and_dims, strata_columns
from counterfair.scm import SCM
from counterfair.specs import Protected
from counterfair.stan.anchored import add_anchored_latents
from counterfair.stan.backend import resolve_backend_name
from counterfair.stan.data import fit_data
from counterfair.stan.inits import latent_inits
from counterfair.subsample import check_size, fit_rows

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


def fit_pathfinder(
    scm: SCM,
    data: pd.DataFrame,
    *,
    draws: int | None,
    seed: int | None,
    backend: str,
    subsample: int | None,
    max_rows: int | None,
) -> Fit:
    """Fit ``scm`` to ``data`` by multi-path Pathfinder; see :meth:`counterfair.SCM.fit`.

    Raises
    ------
    ValueError
        If the back end is PyStan (it has no Pathfinder), or ``draws`` is not a
        positive integer.
    """
    name = resolve_backend_name(backend)
    if name != "cmdstanpy":
        raise ValueError(
            f"method='pathfinder' needs the cmdstanpy back end, not {name!r} (PyStan has no "
            "Pathfinder): pass backend='cmdstanpy' with CmdStan installed "
            "(python -m cmdstanpy.install_cmdstan), or use method='nuts'"
        )
    from counterfair.stan.cmdstan_adapter import run_pathfinder

    n_draws = DEFAULT_PATHFINDER_DRAWS if draws is None else check_size(draws, "draws")
    validation.validate_frame(data)
    validation.validate_columns(data, scm.protected)
    data, subsample_info = fit_rows(
        data, strata_columns(scm, data), subsample=subsample, max_rows=max_rows, seed=seed
    )
    protected_specs = {n: s for n, s in scm.specs.items() if isinstance(s, Protected)}
    encoding = Encoding.from_data(protected_specs, data)
    stan_data = fit_data(scm, data, encoding)
    scales.warn_on_scales(scm, data)
    coords, dims = _coords_and_dims(scm, encoding, data, ["row"])
    init = latent_inits(scm, stan_data, 1, seed)[0]
    run = run_pathfinder(
        scm.stan_code(), stan_data, draws=n_draws, seed=seed, coords=coords, dims=dims,
        init=init,
    )
    add_anchored_latents(scm, run.idata, stan_data, encoding)
    diagnostics = diagnose(run.idata, scm.parameter_names(), scm.latents)
    logger.info(
        "Pathfinder: %d approximate draws kept as one chain in %.1f s; R-hat, ESS and "
        "divergences do not apply to them (no convergence check was made)",
        n_draws, run.seconds,
    )
    return Fit(
        scm=scm,
        idata=run.idata,
        encoding=encoding,
        data=data.copy(),
        seconds=run.seconds,
        backend=run.backend,
        seed=seed,
        diagnostics=diagnostics,
        _backend_name=backend,
        subsample=subsample_info,
        method="pathfinder",
    )

