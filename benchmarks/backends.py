"""Benchmark: the law school level 2 fit with each Stan back end, side by side.

Fits the level 2 SCM of Kusner et al. (2017) to the same rows with the same seed and
settings on PyStan and on cmdstanpy, after compiling the program for both (compilation
is timed separately), and prints per back end the wall seconds of ``scm.fit`` (sampling,
reading the draws back, arviz conversion and diagnostics), the smallest bulk ESS of the
structural parameters, ESS per second, and whether the draws agree (the two interfaces
run the same Stan services, so with one seed they give the same chains up to CmdStan's
six printed digits). httpstan's stored fits are bypassed, so PyStan really samples.

Usage::

    python benchmarks/backends.py [--data-dir DIR] [--rows 2000|all] [--chains 2]
        [--warmup 500] [--draws 500] [--seed 0] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import httpstan.cache
import numpy as np

from counterfair import datasets
from counterfair.datasets.law_school import law_school_split, law_school_subsample, load_law_school
from counterfair.stan.backend import available_backends, get_backend


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("COUNTERFAIR_DATA"))
    parser.add_argument("--rows", default="2000", help="training rows, or 'all' (17,432)")
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    train, _ = law_school_split(load_law_school(args.data_dir), seed=0)
    rows = train if args.rows == "all" else law_school_subsample(train, int(args.rows), seed=0)
    scm = datasets.law_school_level2()
    backends = available_backends()
    print(f"{len(rows)} rows; {args.chains} chains of {args.warmup} + {args.draws}; {backends}")
    results: dict[str, Any] = {}
    fits = {}
    with tempfile.TemporaryDirectory() as fits_folder:
        # PyStan: keep this run's fits in a fresh folder so nothing is read back from a cache
        original = httpstan.cache.fit_path
        httpstan.cache.fit_path = lambda name: Path(fits_folder) / f"{name}.jsonlines.gz"
        try:
            for name in backends:
                compile_seconds = get_backend(name).compile(scm.stan_code())
                start = time.perf_counter()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    fit = scm.fit(
                        rows,
                        chains=args.chains,
                        warmup=args.warmup,
                        draws=args.draws,
                        seed=args.seed,
                        backend=name,
                        progress=False,
                    )
                seconds = time.perf_counter() - start
                fits[name] = fit
                d = fit.diagnostics
                results[name] = {
                    "compile_seconds": round(compile_seconds, 1),
                    "fit_seconds": round(seconds, 1),
                    "min_ess_bulk": round(d.min_ess_bulk, 1),
                    "ess_per_second": round(d.min_ess_bulk / seconds, 2),
                    "max_rhat": round(d.max_rhat, 4),
                    "divergences": d.divergences,
                    "warnings": [str(w.message) for w in caught],
                }
        finally:
            httpstan.cache.fit_path = original
    print(
        f"{'back end':10s} {'compile s':>10s} {'fit s':>8s} {'min ESS':>8s} {'ESS/s':>7s} "
        f"{'R-hat':>7s} {'div':>4s}"
    )
    for name, r in results.items():
        print(
            f"{name:10s} {r['compile_seconds']:10.1f} {r['fit_seconds']:8.1f} "
            f"{r['min_ess_bulk']:8.0f} {r['ess_per_second']:7.2f} {r['max_rhat']:7.4f} "
            f"{r['divergences']:4d}"
        )
    if len(fits) == 2:
        a, b = fits["pystan"], fits["cmdstanpy"]
        gap = max(
            float(np.max(np.abs(a.idata.posterior[n].values - b.idata.posterior[n].values)))
            for n in scm.parameter_names()
        )
        ratio = results["pystan"]["fit_seconds"] / results["cmdstanpy"]["fit_seconds"]
        results["max_abs_draw_difference"] = gap
        results["pystan_over_cmdstanpy_wall"] = round(ratio, 2)
        print(f"cmdstanpy is {ratio:.2f}x faster (wall); largest draw difference {gap:.2g}")
    results["settings"] = {k: str(v) for k, v in vars(args).items()} | {"n_rows": len(rows)}
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
