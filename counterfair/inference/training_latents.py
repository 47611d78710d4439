"""The training rows' integrated latents, drawn after NUTS with exact abduction's C++.

An integrated fit (:mod:`counterfair.stan.integrated`) samples the structural parameters
only. Every later stage reads each training row's latents per posterior draw (Fair K
trains on them), so after sampling each row's latent is drawn exactly given each draw's
parameters, by :func:`counterfair.inference.latent_rows.standard_draws`: the code that
abducts new rows (:func:`counterfair.inference.exact_abduction.sample_latents`). The
draws are neither written by CmdStan nor read back from its CSV files, and keep every
digit.

The latents of a pair (two latents per row), which exact abduction's latent problems
do not hold, are drawn in the program's generated quantities instead
(``quadrature.hpp``'s ``draw_row2``, with Stan's random numbers).

Each draw has its own random stream, keyed by the fit's seed, the latent and the row's
position: the draws do not depend on the chunk size or the library's threads.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from counterfair.inference import latent_problem
from counterfair.inference.latent_rows import standard_draws
from counterfair.model.params import ParamDraws
from counterfair.rng import RowRandom
from counterfair.rows import chunking
from counterfair.stan.integrated import drawn_in_program

if TYPE_CHECKING:
    from counterfair.model.scm import SCM
    from counterfair.rows.validated import Rows


def drawn_after_sampling(scm: SCM, integrate: Collection[str]) -> tuple[str, ...]:
    """The integrated latents whose training draws come after NUTS (the others' from the
    program, :func:`counterfair.stan.integrated.drawn_in_program`)."""
    after = tuple(name for name in integrate if not drawn_in_program(scm, name))
    for name in after:  # the two stages agree on which latents exact abduction covers
        assert latent_problem.unsupported_child(scm, name) is None, name
    return after


def add_training_latents(
    scm: SCM,
    idata: Any,
    rows: Rows,
    latents: Collection[str],
    anchored: Collection[str],
    seed: int | None,
) -> None:
    """Draw every training row's ``latents`` per posterior draw into ``idata.posterior``.

    Each latent is stored as itself, dims ``(chain, draw, row)``; an anchored one also
    standardised, as ``z_<latent>`` (what the program would have drawn). The rows go in
    chunks (:func:`counterfair.options.chunk_rows`), one thread per core; each chunk's
    draws depend on its rows' positions only.
    """
    if not latents:
        return
    posterior = idata.posterior
    params = ParamDraws.from_posterior(posterior, scm.parameter_names())
    n_chains, n_draws = posterior.sizes["chain"], posterior.sizes["draw"]
    n_rows = len(rows)
    z_out = {name: np.empty((params.n, n_rows)) for name in latents if name in anchored}
    out = {name: np.empty((params.n, n_rows)) for name in latents}
    # a chunk holds the latent problem's arrays, a few per child, each (S, rows), and
    # one chunk per thread is in flight: together they keep to chunk_bytes
    workers = os.cpu_count() or 1
    per_row = workers * chunking.bytes_per_row(params.n, 2 + 2 * max(len(scm.observed), 1))
    entropy = int(np.random.default_rng().integers(2**62)) if seed is None else seed

    def draw_chunk(where: slice, chunk: Rows) -> None:
        observed = chunk.values()
        codes = dict(chunk.codes)
        for name in latents:
            problem = latent_problem.latent_problem(
                scm, name, scm.observed, params, observed, codes, len(chunk)
            )
            uniforms = RowRandom(entropy, chunk.positions).child("fit", name).random(
                (1, params.n, len(chunk)), row_axis=2
            )
            keys = (uniforms * 2.0**53).astype(np.uint64)
            z = standard_draws(problem, params, keys=keys, threads=1)[0]
            if name in z_out:
                z_out[name][:, where] = z
            out[name][:, where] = problem.mean + z / np.sqrt(problem.precision)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        jobs = [pool.submit(draw_chunk, where, chunk) for where, chunk in rows.chunks(per_row)]
        for job in jobs:
            job.result()
    coords = {"chain": posterior["chain"], "draw": posterior["draw"]}
    if "row" in posterior.coords:
        coords["row"] = posterior["row"]
    shape = (n_chains, n_draws, n_rows)
    for name in latents:
        if name in z_out:
            posterior[f"z_{name}"] = xr.DataArray(
                z_out[name].reshape(shape), dims=("chain", "draw", "row"), coords=coords
            )
        posterior[name] = xr.DataArray(
            out[name].reshape(shape), dims=("chain", "draw", "row"), coords=coords
        )
