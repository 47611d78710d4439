"""Benchmark: Pathfinder against NUTS on the law school level 2 SCM (issue 19, item 5).

On a stratified subsample of the law school training rows, fits the level 2 SCM of
Kusner et al. (2017) twice -- NUTS (``--chains`` x ``--warmup`` + ``--draws``) and
multi-path Pathfinder (``method="pathfinder"``, 1,000 approximate draws) -- with
the same seed, and prints

* per structural parameter: both posterior means and sds, the difference of the
  means in NUTS posterior sds, and the ratio of the sds (Pathfinder / NUTS);
* the test RMSE of Fair K (Algorithm 1: K ~ P(K | UGPA, LSAT, race, sex), the
  headline row of the paper's Table 1) built on each fit, on ``--test-rows``
  stratified test rows;
* the wall time of each fit (compilation excluded: the program is compiled first)
  and their ratio.

Rule of thumb it supports: Pathfinder is good enough when every mean is within
about half a NUTS sd and the Fair K RMSE agrees to the third decimal; the sds of
Pathfinder are not to be trusted for intervals.

Usage::

    COUNTERFAIR_DATA=... python benchmarks/pathfinder.py [--rows 2000] [--test-rows 1000]
        [--seed 0] [--chains 2] [--warmup 500] [--draws 500] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import counterfair as cf
from counterfair.datasets.law_school import law_school_split, law_school_subsample, load_law_school
from counterfair.datasets.law_school_models import law_school_level2
from counterfair.learn.fair import FairLearner
from counterfair.stan.backend import get_backend

COLUMNS = ["race", "sex", "UGPA", "LSAT", "ZFYA"]


def _draws(fit: cf.Fit, name: str) -> np.ndarray:
    values = np.asarray(fit.idata.posterior[name].values, dtype=float)
    return values.reshape(-1, *values.shape[2:]).reshape(values.shape[0] * values.shape[1], -1)


def parameter_table(nuts: cf.Fit, approx: cf.Fit, names: list[str]) -> pd.DataFrame:
    """Means and sds of both fits per scalar parameter, with the standardised gaps."""
    rows = []
    for name in names:
        a, b = _draws(nuts, name), _draws(approx, name)
        for j in range(a.shape[1]):
            label = name if a.shape[1] == 1 else f"{name}[{j}]"
            sd = float(a[:, j].std())
            rows.append({
                "parameter": label,
                "nuts_mean": float(a[:, j].mean()),
                "pathfinder_mean": float(b[:, j].mean()),
                "nuts_sd": sd,
                "pathfinder_sd": float(b[:, j].std()),
                "mean_gap_in_sds": float((b[:, j].mean() - a[:, j].mean()) / sd),
                "sd_ratio": float(b[:, j].std() / sd),
            })
    return pd.DataFrame(rows).set_index("parameter")


def fair_k_rmse(fit: cf.Fit, train: pd.DataFrame, test: pd.DataFrame, seed: int) -> float:
    """Test RMSE of Fair K (Algorithm 1) built on ``fit``."""
    learner = FairLearner(
        fit,
        target="ZFYA",
        features=cf.inputs.Latent(condition_on_target=False),
        n_samples=50,
        seed=seed,
    ).fit(train)
    predictions = np.asarray(learner.predict(test.drop(columns="ZFYA")), dtype=float)
    return float(np.sqrt(np.mean((test["ZFYA"].to_numpy() - predictions) ** 2)))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("COUNTERFAIR_DATA"))
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--test-rows", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    train, test = law_school_split(load_law_school(args.data_dir), seed=args.seed)
    train = law_school_subsample(train, args.rows, seed=args.seed)[COLUMNS]
    test = law_school_subsample(test, args.test_rows, seed=args.seed)[COLUMNS]
    scm = law_school_level2()
    get_backend("cmdstanpy").compile(scm.stan_code())  # compile outside the timings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cf.errors.ConvergenceWarning)
        start = time.perf_counter()
        nuts = scm.fit(train, chains=args.chains, warmup=args.warmup, draws=args.draws,
                       seed=args.seed, backend="cmdstanpy", progress=False)
        nuts_seconds = time.perf_counter() - start
    start = time.perf_counter()
    approx = scm.fit(train, method="pathfinder", seed=args.seed, backend="cmdstanpy")
    pathfinder_seconds = time.perf_counter() - start

    table = parameter_table(nuts, approx, scm.parameter_names())
    rmse = {
        "nuts": fair_k_rmse(nuts, train, test, args.seed),
        "pathfinder": fair_k_rmse(approx, train, test, args.seed),
    }
    results = {
        "rows": len(train), "test_rows": len(test), "seed": args.seed,
        "nuts": {"chains": args.chains, "warmup": args.warmup, "draws": args.draws,
                 "seconds": nuts_seconds, "max_rhat": nuts.diagnostics.max_rhat},
        "pathfinder": {"draws": int(approx.idata.posterior.sizes["draw"]),
                       "seconds": pathfinder_seconds},
        "speed_ratio": nuts_seconds / pathfinder_seconds,
        "fair_k_rmse": rmse,
        "max_abs_mean_gap_in_sds": float(table["mean_gap_in_sds"].abs().max()),
        "sd_ratio_range": [float(table["sd_ratio"].min()), float(table["sd_ratio"].max())],
        "parameters": table.reset_index().to_dict(orient="records"),
    }
    with pd.option_context("display.width", 160, "display.precision", 3):
        print(table)
    print(f"\nrows {len(train)} (test {len(test)}); NUTS {args.chains} x "
          f"({args.warmup} + {args.draws}): {nuts_seconds:.1f} s, max R-hat "
          f"{nuts.diagnostics.max_rhat:.3f}; Pathfinder: {pathfinder_seconds:.1f} s; "
          f"NUTS / Pathfinder time {results['speed_ratio']:.1f}x")
    print(f"Fair K test RMSE: NUTS {rmse['nuts']:.4f}, Pathfinder {rmse['pathfinder']:.4f}")
    print(f"largest |mean gap| {results['max_abs_mean_gap_in_sds']:.2f} NUTS sds; "
          f"sd ratio from {results['sd_ratio_range'][0]:.2f} to {results['sd_ratio_range'][1]:.2f}")
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
