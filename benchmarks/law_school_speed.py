"""Speed benchmark: counterfair's generated law school program against the authors' program.

Times, on the same rows of the law school data, with the same engine (PyStan), the same seed
and one chain of the same length,

* the Stan program counterfair generates for the law school SCM of Kusner et al. (2017)
  (reference coding of race and sex, first loading of K positive, GLM functions), and
* ``benchmarks/authors_law_school.stan``, the model as the paper's authors wrote it
  (one-hot columns for all 8 race and 2 sex levels beside the intercepts, no sign
  constraint, ``poisson(exp(...))``),

and prints wall seconds, bulk ESS and bulk ESS per second of the quantities both programs
identify (sigma of UGPA and the absolute values of the three loadings of K), and the ratios
counterfair / authors. The target is a ratio of at least 10 on every quantity.

Both programs are built (compiled, or found in httpstan's cache) before anything is timed;
the timed part is a cached ``stan.build`` plus NUTS sampling, for both programs alike.

This is a benchmark, not a test: it takes several minutes (the authors' program is slow).

Usage::

    python benchmarks/law_school_speed.py [--data-dir DIR] [--rows 2000] [--seed 0]
        [--warmup 1000] [--draws 1000] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import arviz as az
import networkx as nx
import numpy as np
import pandas as pd
import stan

import counterfair as cf
from counterfair.datasets import (
    DATA_ENV_VAR,
    RACE_LEVELS,
    SEX_LEVELS,
    law_school_subsample,
    load_law_school,
)

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
AUTHORS_PROGRAM = HERE / "authors_law_school.stan"
TARGET_RATIO = 10.0

# (label, counterfair parameter, authors' parameter, take the absolute value)
QUANTITIES: tuple[tuple[str, str, str, bool], ...] = (
    ("sigma(UGPA)", "sigma_UGPA", "sigma_g", False),
    ("|loading K->UGPA|", "lambda_UGPA_K", "eta_u_ugpa", True),
    ("|loading K->LSAT|", "lambda_LSAT_K", "eta_u_lsat", True),
    ("|loading K->ZFYA|", "lambda_ZFYA_K", "eta_u_zfya", True),
)


def default_data_dir() -> Path:
    """``$COUNTERFAIR_DATA`` if set, else ``../shared/data`` relative to the repository root."""
    env = os.environ.get(DATA_ENV_VAR, "")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(
            "Time counterfair's generated law school Stan program against the authors' "
            "hand-written program (same rows, engine, seed and chain length)."
        )
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=default_data_dir(),
        help=f"folder holding law_data.csv (default: ${DATA_ENV_VAR}, else ../shared/data)",
    )
    parser.add_argument("--rows", type=int, default=2000, help="rows subsampled (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="subsample and sampler seed")
    parser.add_argument("--warmup", type=int, default=1000, help="warm-up iterations")
    parser.add_argument("--draws", type=int, default=1000, help="post-warm-up draws")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    return parser.parse_args(argv)


def say(message: str) -> None:
    print(f"[benchmark] {message}", flush=True)


def law_school_scm() -> cf.SCM:
    """The law school SCM of Kusner et al. (2017), level 2 (latent knowledge K)."""
    g = nx.DiGraph()
    g.add_node("race", spec=cf.Protected())
    g.add_node("sex", spec=cf.Protected())
    g.add_node("K", spec=cf.Latent())
    g.add_node("UGPA", spec=cf.Normal())
    g.add_node("LSAT", spec=cf.Poisson())
    g.add_node("ZFYA", spec=cf.Normal(sigma=1.0))
    for parent in ("race", "sex", "K"):
        for child in ("UGPA", "LSAT", "ZFYA"):
            g.add_edge(parent, child)
    return cf.SCM(g)


def authors_data(rows: pd.DataFrame) -> dict[str, Any]:
    """Data of the authors' program: one-hot race (8 columns) and sex (2 columns)."""
    race = np.asarray(rows["race"].astype(str))
    sex = np.asarray(rows["sex"].astype(str))
    a = np.column_stack(
        [(race == level).astype(float) for level in RACE_LEVELS]
        + [(sex == level).astype(float) for level in SEX_LEVELS]
    )
    if not np.all(a[:, : len(RACE_LEVELS)].sum(axis=1) == 1):
        raise ValueError("a row has a race outside RACE_LEVELS")
    if not np.all(a[:, len(RACE_LEVELS) :].sum(axis=1) == 1):
        raise ValueError("a row has a sex outside SEX_LEVELS")
    return {
        "N": len(rows),
        "K": a.shape[1],
        "a": a,
        "ugpa": rows["UGPA"].to_numpy(dtype=float),
        "lsat": rows["LSAT"].to_numpy(dtype=np.int64),
        "zfya": rows["ZFYA"].to_numpy(dtype=float),
    }


def counterfair_data(scm: cf.SCM, rows: pd.DataFrame) -> dict[str, object]:
    """Data of counterfair's fit program, as ``SCM.fit`` builds it (for the untimed build)."""
    from counterfair.encoding import Encoding
    from counterfair.stan.data import fit_data

    protected = {n: s for n, s in scm.specs.items() if isinstance(s, cf.Protected)}
    return fit_data(scm, rows, Encoding.from_data(protected, rows))


def bulk_ess(values: np.ndarray) -> float:
    """Bulk ESS of draws shaped (chain, draw)."""
    return float(az.ess(np.asarray(values, dtype=float), method="bulk"))


def draws_of(idata: az.InferenceData, name: str, absolute: bool) -> np.ndarray:
    values = np.asarray(idata.posterior[name].values, dtype=float)
    return np.abs(values) if absolute else values


def sampler_stats(idata: az.InferenceData) -> dict[str, float | int | None]:
    """Mean tree depth, mean leapfrog steps per draw, step size and divergences."""
    stats = idata.sample_stats

    def mean_of(name: str) -> float | None:
        return float(np.mean(stats[name].values)) if name in stats else None

    return {
        "mean_tree_depth": mean_of("tree_depth"),
        "max_tree_depth": int(np.max(stats["tree_depth"].values)) if "tree_depth" in stats else None,
        "mean_leapfrog_per_draw": mean_of("n_steps"),
        "step_size": mean_of("step_size"),
        "divergences": int(np.sum(stats["diverging"].values)) if "diverging" in stats else None,
    }


def run_counterfair(
    scm: cf.SCM, rows: pd.DataFrame, args: argparse.Namespace
) -> tuple[az.InferenceData, dict[str, Any]]:
    say("counterfair: timed run (cached build + NUTS) ...")
    load_before = os.getloadavg()
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", cf.ConvergenceWarning)
        fit = scm.fit(
            rows,
            chains=1,
            warmup=args.warmup,
            draws=args.draws,
            seed=args.seed,
            backend="pystan",
        )
    total = time.perf_counter() - start
    convergence = [str(w.message) for w in caught if issubclass(w.category, cf.ConvergenceWarning)]
    for w in caught:
        if not issubclass(w.category, cf.ConvergenceWarning):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    for message in convergence:
        say(f"counterfair: ConvergenceWarning recorded: {message}")
    say(f"counterfair: sampling {fit.seconds:.1f} s, whole scm.fit call {total:.1f} s")
    info = {
        "seconds": fit.seconds,
        "seconds_whole_fit_call": total,
        "convergence_warnings": convergence,
        "diagnostics": fit.diagnostics.as_dict(),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        **sampler_stats(fit.idata),
    }
    return fit.idata, info


def run_authors(
    code: str, data: dict[str, Any], args: argparse.Namespace
) -> tuple[az.InferenceData, dict[str, Any]]:
    say("authors' program: timed run (cached build + NUTS) ...")
    load_before = os.getloadavg()
    start = time.perf_counter()
    model = stan.build(code, data=data, random_seed=args.seed)
    fit = model.sample(num_chains=1, num_warmup=args.warmup, num_samples=args.draws)
    seconds = time.perf_counter() - start
    say(f"authors' program: sampling {seconds:.1f} s")
    idata = az.from_pystan(posterior=fit, posterior_model=model)
    info = {
        "seconds": seconds,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        **sampler_stats(idata),
    }
    return idata, info


def compare(
    cf_idata: az.InferenceData,
    cf_seconds: float,
    au_idata: az.InferenceData,
    au_seconds: float,
) -> list[dict[str, Any]]:
    results = []
    for label, cf_name, au_name, absolute in QUANTITIES:
        cf_draws = draws_of(cf_idata, cf_name, absolute)
        au_draws = draws_of(au_idata, au_name, absolute)
        cf_ess, au_ess = bulk_ess(cf_draws), bulk_ess(au_draws)
        cf_rate, au_rate = cf_ess / cf_seconds, au_ess / au_seconds
        ratio = cf_rate / au_rate if au_rate > 0 else float("inf")
        results.append(
            {
                "quantity": label,
                "counterfair_param": cf_name,
                "authors_param": au_name,
                "counterfair_mean": float(cf_draws.mean()),
                "authors_mean": float(au_draws.mean()),
                "counterfair_ess_bulk": cf_ess,
                "authors_ess_bulk": au_ess,
                "counterfair_ess_per_s": cf_rate,
                "authors_ess_per_s": au_rate,
                "ratio": ratio,
                "pass": bool(ratio >= TARGET_RATIO),
            }
        )
    return results


def fmt(value: float | int | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def print_report(
    args: argparse.Namespace,
    n_rows: int,
    cf_info: dict[str, Any],
    au_info: dict[str, Any],
    results: list[dict[str, Any]],
) -> None:
    line = "-" * 99
    print()
    print("Law school speed benchmark: counterfair generated program vs the authors' program")
    print(
        f"rows {n_rows}, seed {args.seed}, one chain of {args.warmup} warm-up + {args.draws} "
        f"draws, PyStan {stan.__version__}, {os.cpu_count()} CPUs"
    )
    print(
        "Timed: cached stan.build + NUTS sampling, for both programs alike "
        "(compilation was done beforehand, untimed)."
    )
    print(line)
    print(
        f"{'quantity':<20} {'ESS cf':>8} {'ESS auth':>9} {'ESS/s cf':>10} {'ESS/s auth':>11} "
        f"{'ratio':>8} {'mean cf':>9} {'mean auth':>10}  {'>= 10x':>6}"
    )
    print(line)
    for r in results:
        print(
            f"{r['quantity']:<20} {r['counterfair_ess_bulk']:>8.0f} {r['authors_ess_bulk']:>9.0f} "
            f"{r['counterfair_ess_per_s']:>10.2f} {r['authors_ess_per_s']:>11.3f} "
            f"{r['ratio']:>7.1f}x {r['counterfair_mean']:>9.4f} {r['authors_mean']:>10.4f}  "
            f"{'PASS' if r['pass'] else 'FAIL':>6}"
        )
    print(line)
    print(f"{'':<20} {'counterfair':>14} {'authors':>14}")
    rows = [
        ("wall seconds", fmt(cf_info["seconds"], ".1f"), fmt(au_info["seconds"], ".1f")),
        ("mean tree depth", fmt(cf_info["mean_tree_depth"], ".2f"),
         fmt(au_info["mean_tree_depth"], ".2f")),
        ("max tree depth", fmt(cf_info["max_tree_depth"], "d"),
         fmt(au_info["max_tree_depth"], "d")),
        ("leapfrog / draw", fmt(cf_info["mean_leapfrog_per_draw"], ".1f"),
         fmt(au_info["mean_leapfrog_per_draw"], ".1f")),
        ("step size", fmt(cf_info["step_size"], ".4f"), fmt(au_info["step_size"], ".4f")),
        ("divergences", fmt(cf_info["divergences"], "d"), fmt(au_info["divergences"], "d")),
        ("load avg before", fmt(cf_info["loadavg_before"][0], ".2f"),
         fmt(au_info["loadavg_before"][0], ".2f")),
        ("load avg after", fmt(cf_info["loadavg_after"][0], ".2f"),
         fmt(au_info["loadavg_after"][0], ".2f")),
    ]
    for name, a, b in rows:
        print(f"{name:<20} {a:>14} {b:>14}")
    print(line)
    speedup = au_info["seconds"] / cf_info["seconds"]
    print(f"wall-time speed-up (authors / counterfair): {speedup:.1f}x")
    whole = cf_info["seconds_whole_fit_call"]
    worst = min(r["ratio"] * cf_info["seconds"] / whole for r in results)
    print(
        f"counterfair's whole scm.fit call (also arviz conversion and diagnostics): {whole:.1f} s; "
        f"smallest ESS/s ratio on that basis: {worst:.1f}x"
    )
    if cf_info["convergence_warnings"]:
        print("counterfair ConvergenceWarnings:")
        for message in cf_info["convergence_warnings"]:
            print(f"  - {message}")
    else:
        print("counterfair ConvergenceWarnings: none")
    verdict = all(r["pass"] for r in results)
    print(
        f"TARGET (>= {TARGET_RATIO:.0f}x ESS/s on every quantity): "
        f"{'MET' if verdict else 'NOT MET'}"
    )
    print(
        "Caveat: wall times depend on the machine and on other jobs running at the same time "
        "(see the load averages)."
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    say(f"loading the law school data from {args.data_dir}")
    full = load_law_school(args.data_dir)
    rows = law_school_subsample(full, args.rows, seed=args.seed)
    say(f"{len(rows)} rows (stratified on first_pf, seed {args.seed}) of {len(full)}")

    scm = law_school_scm()
    cf_code = scm.stan_code()
    au_code = AUTHORS_PROGRAM.read_text()
    au_data = authors_data(rows)

    # Untimed: compile both programs (or find them in httpstan's cache, keyed by program text).
    say("building counterfair's program (untimed; compiles on first use) ...")
    start = time.perf_counter()
    stan.build(cf_code, data=counterfair_data(scm, rows), random_seed=args.seed)
    cf_build = time.perf_counter() - start
    say("building the authors' program (untimed; compiles on first use) ...")
    start = time.perf_counter()
    stan.build(au_code, data=au_data, random_seed=args.seed)
    au_build = time.perf_counter() - start
    say(f"builds done: counterfair {cf_build:.1f} s, authors {au_build:.1f} s (not timed below)")

    cf_idata, cf_info = run_counterfair(scm, rows, args)
    au_idata, au_info = run_authors(au_code, au_data, args)
    results = compare(cf_idata, cf_info["seconds"], au_idata, au_info["seconds"])
    print_report(args, len(rows), cf_info, au_info, results)

    if args.out is not None:
        payload = {
            "settings": {
                "rows": len(rows),
                "seed": args.seed,
                "warmup": args.warmup,
                "draws": args.draws,
                "chains": 1,
                "data_dir": str(args.data_dir),
                "timed": "cached stan.build + NUTS sampling, both programs",
            },
            "environment": {
                "python": platform.python_version(),
                "pystan": stan.__version__,
                "arviz": az.__version__,
                "cpu_count": os.cpu_count(),
                "platform": platform.platform(),
            },
            "build_seconds_untimed": {"counterfair": cf_build, "authors": au_build},
            "counterfair": cf_info,
            "authors": au_info,
            "quantities": results,
            "target_ratio": TARGET_RATIO,
            "target_met": all(r["pass"] for r in results),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(payload, indent=2) + "\n")
        say(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
