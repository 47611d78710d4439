"""Recover anchored latents from their standardised draws after sampling.

The fit program samples ``z_<latent>`` for an anchored latent and never forms
the latent itself, so it is not written out for every draw (half the output for
large data). Here the latent is rebuilt exactly as the program defines it (see
:mod:`counterfair.stan.anchoring`): ``latent = m + z / sqrt(P)`` with
``P = 1 / scale^2 + sum_k lambda_k^2 / sigma_k^2`` and
``m = (loc / scale^2 + sum_k lambda_k / sigma_k^2 * r_k) / P`` over the
latent's anchors ``k``, ``r_k`` being anchor ``k``'s residual given its other
parents.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from counterfair.model.encoding import Encoding
from counterfair.model.evaluate import latent_loading, linear_predictor, sigma_of
from counterfair.model.params import ParamDraws
from counterfair.model.specs import Latent
from counterfair.stan.anchoring import all_anchors_of
from counterfair.stan.families import stan_family

if TYPE_CHECKING:
    from counterfair.model.scm import SCM


def conditional_moments(
    scm: SCM,
    params: ParamDraws,
    stan_data: Mapping[str, Any],
    codes: Mapping[str, np.ndarray] | None = None,
    integrate: Collection[str] = (),
    only: Collection[str] | None = None,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Mean ``(S, N)`` and precision ``(S, 1)`` of each anchored latent given its anchors.

    Parameters
    ----------
    scm : SCM
        The model.
    params : ParamDraws
        ``S`` parameter sets.
    stan_data : mapping
        The fit program's data (protected codes from 1, observed columns).
    codes : mapping, optional
        The rows' codes (protected attributes and grouping columns); by default the
        protected ones from ``stan_data``.
    integrate : collection of str
        Latents the fit integrated out (anchored even with a categorical child).
    only : collection of str, optional
        The anchored latents wanted (default: every one).
    """
    if codes is None:
        codes = {node: np.asarray(stan_data[node]) - 1 for node in scm.protected}
    observed = {
        node: stan_family(scm.equations[node]).values_from_stan(np.asarray(stan_data[node]))
        for node in scm.observed
    }
    n_rows = int(stan_data["N"])
    reference = scm.coding == "reference"
    moments = {}
    for latent, chain in all_anchors_of(scm, integrate).items():
        if only is not None and latent not in only:
            continue
        spec = scm.specs[latent]
        assert isinstance(spec, Latent)
        values = {**observed, latent: np.zeros(n_rows)}
        precision = np.full((params.n, 1), 1.0 / spec.scale**2)
        information = np.full((params.n, n_rows), spec.loc / spec.scale**2)
        for eq in chain:
            base = linear_predictor(
                eq, params, values, codes, reference_coding=reference, n_rows=n_rows
            )
            loading = latent_loading(eq, eq.latent[0], params, values, codes)
            variance = sigma_of(eq, params) ** 2
            precision = precision + loading**2 / variance
            information = information + loading / variance * (observed[eq.node][None, :] - base)
        moments[latent] = (information / precision, precision)
    return moments


def add_anchored_latents(
    scm: SCM,
    idata: Any,
    stan_data: dict[str, Any],
    encoding: Encoding,
    codes: Mapping[str, np.ndarray] | None = None,
    integrate: Collection[str] = (),
) -> None:
    """Add every anchored latent to ``idata.posterior`` (dims chain, draw, row), in place.

    ``codes``: the rows' codes (grouping columns included), ``integrate``: the latents
    integrated out of the fit; see :func:`conditional_moments`. A latent already in the
    posterior (an integrated latent drawn after sampling) is left as it is.
    """
    posterior = idata.posterior
    wanted = [name for name in all_anchors_of(scm, integrate) if name not in posterior]
    if not wanted:
        return
    params = ParamDraws.from_posterior(posterior, scm.parameter_names())
    n_chains, n_draws = posterior.sizes["chain"], posterior.sizes["draw"]
    n_rows = int(stan_data["N"])
    moments = conditional_moments(scm, params, stan_data, codes, integrate, only=wanted)
    for latent, (mean, precision) in moments.items():
        z = np.asarray(posterior[f"z_{latent}"].values).reshape(params.n, n_rows)
        draws = mean + z / np.sqrt(precision)
        posterior[latent] = xr.DataArray(
            draws.reshape(n_chains, n_draws, n_rows),
            dims=("chain", "draw", "row"),
            coords={"chain": posterior["chain"], "draw": posterior["draw"], "row": posterior["row"]}
            if "row" in posterior.coords
            else {"chain": posterior["chain"], "draw": posterior["draw"]},
        )
