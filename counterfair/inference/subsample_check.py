"""Is a subsample big enough? Fit two disjoint stratified subsamples and compare.

:func:`subsample_check` fits the SCM on two disjoint stratified subsamples of the
same size and puts their posteriors side by side, per scalar parameter: both
means and sds, the difference of the sds, the standardised difference of the
means ``z = (mean_b - mean_a) / sqrt(sd_a**2 + sd_b**2)`` and the R-hat of the two
fits' chains pooled (arviz on the concatenated chains).

How to read it. Two disjoint subsamples of one population give posteriors that
differ by sampling noise alone when the model is right and the subsample is
large enough for the posterior to be near Gaussian (Bernstein-von Mises): then
``z`` is about standard normal whatever the size, and for Gaussian posteriors the
pooled R-hat is about ``sqrt(1 + z**2)``, around 1.4 for a typical ``|z| = 1``.
So R-hat across two fits does *not* fall to 1 as the size grows and must not be
held to the 1.01 of one fit's chains. Under the same conditions the two sds
are nearly equal (same size, same strata: they differ by O(1/sqrt(size)) plus
Monte Carlo error). The verdict is ``"means differ"`` when ``|z| > 3`` (R-hat
above about 3.2), ``"sds differ"`` when one sd is more than 1.5 times the other
(typically one fit found two modes, e.g. a sign flip of a latent's loading, or
its chains did not mix: look at that fit's diagnostics), else ``"agree"``. A
disagreement means the subsample is too small for the posterior to have settled,
the fits did not converge, or the data are heterogeneous in a way the strata
miss. How precise the estimate is, is read from ``sd_a`` / ``sd_b``: they
shrink like ``1 / sqrt(size)``; the full data would give about
``sd * sqrt(size / len(data))``. Double the size while any row disagrees or while
the sds are larger than the precision the analysis needs.
"""

from __future__ import annotations

import warnings
from typing import Any

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr

from counterfair.errors import ConvergenceWarning
from counterfair.inference.fit import Fit
from counterfair.inference.sampling import strata_columns
from counterfair.model.scm import SCM
from counterfair.rows.subsample import check_size, stratified_positions, stratum_codes

Z_AGREE = 3.0
"""Largest ``|z|`` (standardised difference of the two fits' means) called agreement."""
SD_RATIO_AGREE = 1.5
"""Largest ratio of the two fits' posterior sds called agreement."""


def verdicts(z: np.ndarray, sd_a: np.ndarray, sd_b: np.ndarray) -> np.ndarray:
    """The verdict per parameter of :func:`subsample_check`.

    ``"means differ"`` where ``|z| > 3``; else ``"sds differ"`` where one sd is more than
    1.5 times the other; else ``"agree"``.
    """
    z, sd_a, sd_b = (np.asarray(x, dtype=float) for x in (z, sd_a, sd_b))
    ratio = np.maximum(sd_a, sd_b) / np.minimum(sd_a, sd_b)
    return np.select(
        [np.abs(z) > Z_AGREE, ratio > SD_RATIO_AGREE], ["means differ", "sds differ"],
        default="agree",
    )


def disjoint_subsamples(
    data: pd.DataFrame, columns: list[str], size: int, *, seed: int | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two disjoint stratified subsamples of ``size`` rows each (the second from the rest)."""
    size = check_size(size, "size")
    if 2 * size > len(data):
        raise ValueError(
            f"size={size} is too large: two disjoint subsamples need {2 * size} rows, "
            f"the data have {len(data)}"
        )
    first = stratified_positions(stratum_codes(data, columns), size, seed=seed)
    rest = np.setdiff1d(np.arange(len(data)), first)
    remaining = data.iloc[rest]
    second = rest[stratified_positions(stratum_codes(remaining, columns), size, seed=seed)]
    return data.iloc[first], data.iloc[second]


def subsample_check(
    scm: SCM,
    data: pd.DataFrame,
    *,
    size: int,
    seed: int | None = 0,
    chains: int = 2,
    warmup: int = 300,
    draws: int = 300,
    backend: str = "auto",
    **fit_options: Any,
) -> pd.DataFrame:
    """Fit ``scm`` on two disjoint stratified subsamples of ``size`` rows and compare them.

    Parameters
    ----------
    scm : SCM
        The model.
    data : pandas.DataFrame
        All rows; at least ``2 * size``.
    size : int
        Rows of each subsample (stratified like ``SCM.fit(subsample=...)``).
    seed : int, optional
        Seed of the subsamples and of both fits.
    chains, warmup, draws : int
        NUTS settings of each fit.
    backend : str
        Stan back end.
    **fit_options
        Passed to :meth:`SCM.fit` (e.g. ``delta``).

    Returns
    -------
    pandas.DataFrame
        One row per scalar parameter (index as in ``arviz.summary``), columns
        ``mean_a``, ``mean_b``, ``sd_a``, ``sd_b``, ``sd_diff`` (``sd_b - sd_a``),
        ``z``, ``rhat`` (pooled chains of both fits) and ``verdict``:
        ``"means differ"`` if ``|z| > 3``, else ``"sds differ"`` if one sd is
        more than 1.5 times the other, else ``"agree"``. See the module
        docstring for how to read it; ``df.attrs`` holds ``size``, ``total`` and
        ``strata``.

    Raises
    ------
    ValueError
        If ``size`` is not a positive integer or ``2 * size > len(data)``.
    """
    columns = strata_columns(scm, data)
    part_a, part_b = disjoint_subsamples(data, columns, size, seed=seed)
    fits: list[Fit] = []
    with warnings.catch_warnings():
        # each fit's own problems are in fit.diagnostics; the comparison is the point here
        warnings.simplefilter("ignore", ConvergenceWarning)
        for part in (part_a, part_b):
            fits.append(
                scm.fit(
                    part, chains=chains, warmup=warmup, draws=draws, seed=seed,
                    backend=backend, max_rows=None, **fit_options,
                )
            )
    names = scm.parameter_names()
    a, b = (f.idata.posterior[names] for f in fits)
    stats = [az.summary(f.idata, var_names=names, kind="stats", round_to="none") for f in fits]
    pooled = xr.concat([a, b.assign_coords(chain=b.chain.values + a.sizes["chain"])], dim="chain")
    rhat = az.summary(az.convert_to_inference_data(pooled), kind="diagnostics", round_to="none")
    out = pd.DataFrame(
        {
            "mean_a": stats[0]["mean"],
            "mean_b": stats[1]["mean"],
            "sd_a": stats[0]["sd"],
            "sd_b": stats[1]["sd"],
        }
    )
    out["sd_diff"] = out["sd_b"] - out["sd_a"]
    out["z"] = (out["mean_b"] - out["mean_a"]) / np.sqrt(out["sd_a"] ** 2 + out["sd_b"] ** 2)
    out["rhat"] = rhat["r_hat"].reindex(out.index)
    out["verdict"] = verdicts(out["z"].to_numpy(), out["sd_a"].to_numpy(), out["sd_b"].to_numpy())
    out.attrs.update({"size": int(size), "total": len(data), "strata": columns})
    return out
