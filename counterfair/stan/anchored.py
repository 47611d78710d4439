"""Recover anchored latents from their standardised draws after sampling.

The fit program samples ``z_<latent>`` for an anchored latent and keeps the
latent itself local to the model block, so it is not written out for every draw
(half the output for large data). Here the latent is rebuilt exactly as the
program defines it: ``latent = v * (loc / scale^2 + lambda / sigma^2 * r) +
sqrt(v) * z`` with ``r`` the anchor's residual given its other parents and
``v = 1 / (1 / scale^2 + lambda^2 / sigma^2)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from counterfair.encoding import Encoding
from counterfair.equations import linear_predictor, sigma_of
from counterfair.params import ParamDraws
from counterfair.scm import SCM
from counterfair.specs import Latent
from counterfair.stan.codegen import anchor_children


def add_anchored_latents(
    scm: SCM, idata: Any, stan_data: dict[str, Any], encoding: Encoding
) -> None:
    """Add every anchored latent to ``idata.posterior`` (dims chain, draw, row), in place."""
    anchors = anchor_children(scm)
    if not anchors:
        return
    posterior = idata.posterior
    params = ParamDraws.from_posterior(posterior, scm.parameter_names())
    codes = {node: np.asarray(stan_data[node]) - 1 for node in scm.protected}
    observed = {node: np.asarray(stan_data[node], dtype=float) for node in scm.observed}
    n_chains, n_draws = posterior.sizes["chain"], posterior.sizes["draw"]
    n_rows = int(stan_data["N"])
    reference = scm.coding == "reference"
    for latent, eq in anchors.items():
        spec = scm.specs[latent]
        assert isinstance(spec, Latent)
        values = {**observed, latent: np.zeros(n_rows)}
        base = linear_predictor(
            eq, params, values, codes, reference_coding=reference, n_rows=n_rows
        )
        loading = params[eq.latent[0].param][:, None]
        sigma = sigma_of(eq, params)
        v = 1.0 / (1.0 / spec.scale**2 + (loading / sigma) ** 2)
        residual = observed[eq.node][None, :] - base
        z = np.asarray(posterior[f"z_{latent}"].values).reshape(params.n, n_rows)
        draws = v * (spec.loc / spec.scale**2 + loading / sigma**2 * residual) + np.sqrt(v) * z
        posterior[latent] = xr.DataArray(
            draws.reshape(n_chains, n_draws, n_rows),
            dims=("chain", "draw", "row"),
            coords={"chain": posterior["chain"], "draw": posterior["draw"], "row": posterior["row"]}
            if "row" in posterior.coords
            else {"chain": posterior["chain"], "draw": posterior["draw"]},
        )
