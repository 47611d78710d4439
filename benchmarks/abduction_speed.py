"""Speed benchmark: exact abduction against MCMC abduction on the law school data.

Fits the level 2 law school SCM of Kusner et al. (2017) with PyStan on a stratified
subsample of the training rows (fitting all 17,432 takes about five minutes and the
parameters are not what is timed), then abducts K given the posterior mean of the
parameters, conditioning on UGPA and LSAT (Algorithm 1: ZFYA left out), for

* every training row, as ``FairLearner.fit`` does, and
* every test row, as ``FairLearner.predict`` does,

with ``engine="exact"`` and ``engine="mcmc"`` (50 samples per row, FairLearner's default;
MCMC with its defaults, 2 chains of 300 + 100 iterations). It prints the wall time of each
``Fit.abduct`` call and the ratio, and how well the two agree: the mean over rows of
|exact posterior mean - MCMC sample mean| in posterior sds, beside the same for the exact
engine's own 50 draws and the value expected of 50 independent draws from the true
posterior (sqrt(2 / pi) / sqrt(50) = 0.113), and a KS statistic of the pooled draws, each
standardised by its row's exact posterior mean and sd.

The MCMC times include a cached ``stan.build`` (the abduction program is compiled once,
before anything is timed). httpstan returns a stored fit when the same program, data, seed
and settings are sampled again, so the abduction program's stored fits are deleted before
each timed MCMC call: a rerun times NUTS, not a file read.

Usage::

    python benchmarks/abduction_speed.py [--data-dir DIR] [--fit-rows 2000] [--seed 0]
        [--mcmc-rows N] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

import httpstan.cache
import httpstan.models
import numpy as np
import pandas as pd
from scipy import stats

from counterfair.datasets.law_school import law_school_split, law_school_subsample, load_law_school
from counterfair.datasets.law_school_models import law_school_level2
from counterfair.errors import ConvergenceWarning
from counterfair.inference import exact_abduction
from counterfair.inference.fit import Abduction, Fit

COLUMNS = ["race", "sex", "UGPA", "LSAT", "ZFYA"]
CONDITION = ["UGPA", "LSAT"]
N_SAMPLES = 50


def _forget_cached_fits(code: str) -> None:
    """Delete httpstan's stored fits of a program (not the compiled program)."""
    folder = httpstan.cache.model_directory(httpstan.models.calculate_model_name(code)) / "fits"
    shutil.rmtree(folder, ignore_errors=True)


def _abduct(fit: Fit, rows: pd.DataFrame, engine: str, seed: int) -> tuple[Abduction, float]:
    if engine == "mcmc":
        _forget_cached_fits(fit.scm.abduction_code())
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        abduction = fit.abduct(
            rows,
            condition_on=CONDITION,
            n_samples=N_SAMPLES,
            seed=seed,
            engine=engine,  # type: ignore[arg-type]
        )
    seconds = time.perf_counter() - start
    for warning in caught:
        if issubclass(warning.category, ConvergenceWarning):
            print(f"  warning ({engine}): {warning.message}")
    return abduction, seconds


def _agreement(fit: Fit, exact: Abduction, mcmc: Abduction) -> dict[str, float]:
    mean, sd = exact_abduction.posterior_moments(
        fit.scm, exact.params.take([0]), exact.codes, exact.observed, exact.conditioned_on
    )["K"]
    mean, sd = mean[0], sd[0]
    exact_k, mcmc_k = exact.latents["K"], mcmc.latents["K"]
    pooled_exact = ((exact_k - mean) / sd).ravel()
    pooled_mcmc = ((mcmc_k - mean) / sd).ravel()
    return {
        "mean_abs_diff_mcmc_sd": float(np.mean(np.abs(mcmc_k.mean(axis=0) - mean) / sd)),
        "mean_abs_diff_exact_draws_sd": float(np.mean(np.abs(exact_k.mean(axis=0) - mean) / sd)),
        "expected_iid_sd": float(np.sqrt(2.0 / np.pi) / np.sqrt(N_SAMPLES)),
        "mcmc_sd_over_exact_sd": float(np.mean(mcmc_k.std(axis=0, ddof=1) / sd)),
        "exact_draws_sd_over_exact_sd": float(np.mean(exact_k.std(axis=0, ddof=1) / sd)),
        "ks_pooled": float(stats.ks_2samp(pooled_exact, pooled_mcmc).statistic),
        "posterior_sd_mean": float(sd.mean()),
    }


def _compare(fit: Fit, rows: pd.DataFrame, label: str, seed: int) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    exact, exact_seconds = _abduct(fit, rows, "exact", seed)
    mcmc, mcmc_seconds = _abduct(fit, rows, "mcmc", seed)
    load_after = os.getloadavg()[0]
    assert (exact.engine, mcmc.engine) == ("exact", "mcmc")
    result = {
        "rows": len(rows),
        "exact_seconds": exact_seconds,
        "mcmc_seconds": mcmc_seconds,
        "ratio": mcmc_seconds / exact_seconds,
        "load_1min_before_after": [load_before, load_after],
        **_agreement(fit, exact, mcmc),
    }
    print(
        f"{label}: {len(rows)} rows, {N_SAMPLES} samples per row | "
        f"exact {exact_seconds:.2f} s, MCMC {mcmc_seconds:.2f} s, "
        f"MCMC / exact = {result['ratio']:.1f}x "
        f"(1-min load {load_before:.2f} before, {load_after:.2f} after)"
    )
    print(
        f"  mean |exact posterior mean - sample mean| / posterior sd: "
        f"MCMC {result['mean_abs_diff_mcmc_sd']:.4f}, "
        f"exact draws {result['mean_abs_diff_exact_draws_sd']:.4f} "
        f"(50 iid draws: {result['expected_iid_sd']:.4f})"
    )
    print(
        f"  sample sd / exact sd: MCMC {result['mcmc_sd_over_exact_sd']:.4f}, "
        f"exact draws {result['exact_draws_sd_over_exact_sd']:.4f}; "
        f"pooled KS statistic (exact vs MCMC draws, standardised) {result['ks_pooled']:.4f}; "
        f"mean posterior sd of K {result['posterior_sd_mean']:.3f}"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--fit-rows", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mcmc-rows", type=int, default=None, help="subset for both engines")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    train, test = law_school_split(load_law_school(args.data_dir), seed=args.seed)
    if args.mcmc_rows is not None:
        train = law_school_subsample(train, args.mcmc_rows, seed=args.seed)
        test = law_school_subsample(test, min(args.mcmc_rows, len(test)), seed=args.seed)
    fit_rows = law_school_subsample(train, args.fit_rows, seed=args.seed)
    start = time.perf_counter()
    fit = law_school_level2().fit(
        fit_rows[COLUMNS],
        chains=2,
        warmup=500,
        draws=500,
        seed=args.seed,
        backend="pystan",
        progress=False,
    )
    print(
        f"level 2 SCM fitted on {len(fit_rows)} training rows with PyStan in "
        f"{time.perf_counter() - start:.1f} s (max R-hat {fit.diagnostics.max_rhat:.4f})"
    )
    _abduct(fit, test.iloc[:5][COLUMNS], "mcmc", args.seed)  # compile or load the program
    results = {
        "train": _compare(fit, train[COLUMNS], "training rows (Algorithm 1)", args.seed),
        "test": _compare(fit, test[COLUMNS], "test rows", args.seed),
    }
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
