"""Benchmark: coverage of the SFM decomposition's intervals over repeated simulated data sets.

For each scenario of ``tests/_sfm.py`` (``a`` linear-Gaussian, ``b`` a mediator of 300
levels, ``c`` an ``X * W`` interaction, ``d`` a nonlinear confounder, ``e`` a binary
outcome) and each repetition ``r = 0, ..., R - 1``, a fresh data set is simulated with
seed ``--seed + r`` and decomposed by :func:`counterfair.audit.fit_sfm` (default
``rows="bayesian_bootstrap"``, the same seed), and for each effect (Ctf-DE, Ctf-IE,
Ctf-SE, NDE, NIE) the script records the population truth (closed form for a, b, c; a
Monte Carlo of the true SCM's potential outcomes over a million units for d, e), the
posterior mean and sd, and whether the equal-tailed 90 % interval covers the truth.

It prints, per scenario and effect: the truth, the mean estimate and its bias, the mean
posterior sd, the empirical sd of the estimates over the repetitions, the 90 % coverage
and its binomial standard error ``sqrt(c (1 - c) / R)``, and a z-score of the bias
(``bias / (empirical sd / sqrt(R))``). Calibrated intervals cover 90 % of the time, and
the mean posterior sd matches the empirical sd.

Usage::

    python benchmarks/sfm_truth.py [--reps 20] [--scenarios a,b,c,d,e] [--seed 0]
        [--rows N] [--chains 2] [--warmup 300] [--draws 300] [--n-samples 200]
        [--out benchmarks/results/sfm_truth.json]

``--rows`` overrides every scenario's rows (default: each scenario's own, 3,000 or 4,000
for b). The JSON holds the settings, the summary table and every repetition's record; it
is rewritten after each scenario, so a long run can be read while it goes on.
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

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from _sfm import SCENARIOS, Scenario, truth  # noqa: E402

EFFECTS = ("Ctf-DE", "Ctf-IE", "Ctf-SE", "NDE", "NIE")
"""The effects whose coverage is measured."""

INTERVAL = 0.9


def one_repetition(scenario: Scenario, r: int, args: argparse.Namespace,
                   reference: pd.Series) -> list[dict[str, Any]]:
    """Simulate, decompose and compare with the truth: one record per effect."""
    import counterfair as cf

    seed = args.seed + r
    rows = args.rows or scenario.rows
    data = scenario.data(rows, seed=seed)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        settings = cf.audit.SFMSettings(chains=args.chains, warmup=args.warmup,
                                        draws=args.draws, progress=False)
        result = cf.audit.fit_sfm(
            data, **scenario.roles(), seed=seed, settings=settings,
        ).decompose(n_samples=args.n_samples, interval=INTERVAL)
    seconds = time.perf_counter() - start
    kinds = sorted({w.category.__name__ for w in caught})
    table = result.table.drop_duplicates("term").set_index("term")
    diagnostics = [note for note in result.notes if " model: " in note]
    records = []
    for effect in EFFECTS:
        row = table.loc[effect]
        value = float(reference[effect])
        records.append({
            "scenario": scenario.letter, "name": scenario.name, "rep": r, "seed": seed,
            "rows": rows, "effect": effect, "truth": value, "mean": float(row["mean"]),
            "sd": float(row["sd"]), "lower": float(row["lower"]), "upper": float(row["upper"]),
            "covered": bool(row["lower"] <= value <= row["upper"]), "seconds": seconds,
            "warnings": kinds, "diagnostics": diagnostics,
        })
    return records


def summarise(records: pd.DataFrame) -> pd.DataFrame:
    """One row per scenario and effect."""
    rows = []
    for (letter, effect), group in records.groupby(["scenario", "effect"], sort=False):
        reps = len(group)
        coverage = float(group["covered"].mean())
        empirical = float(group["mean"].std(ddof=1)) if reps > 1 else float("nan")
        bias = float(group["mean"].mean() - group["truth"].iloc[0])
        rows.append({
            "scenario": f"{letter} {group['name'].iloc[0]}", "effect": effect,
            "truth": float(group["truth"].iloc[0]), "mean": float(group["mean"].mean()),
            "bias": bias, "mean_sd": float(group["sd"].mean()), "emp_sd": empirical,
            "coverage": coverage, "coverage_se": float(np.sqrt(coverage * (1 - coverage) / reps)),
            "bias_z": bias / (empirical / np.sqrt(reps)) if reps > 1 and empirical > 0
            else float("nan"),
            "reps": reps,
        })
    return pd.DataFrame(rows)


def _write(path: Path, args: argparse.Namespace, summary: pd.DataFrame,
           records: pd.DataFrame, seconds: float) -> None:
    payload = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "python": sys.version.split()[0]},
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "interval": INTERVAL,
        "seconds": round(seconds, 1),
        "summary": summary.to_dict(orient="records"),
        "records": records.to_dict(orient="records"),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20, help="data sets per scenario (20)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS),
                        help="comma-separated letters (default: a,b,c,d,e)")
    parser.add_argument("--seed", type=int, default=0, help="seed of repetition 0")
    parser.add_argument("--rows", type=int, default=None,
                        help="rows per data set (default: the scenario's, 3000 or 4000)")
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=300, help="per chain (300)")
    parser.add_argument("--draws", type=int, default=300, help="per chain (300)")
    parser.add_argument("--n-samples", type=int, default=200, help="draws of the terms (200)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "sfm_truth.json")
    args = parser.parse_args(argv)
    letters = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = [s for s in letters if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; choose from {list(SCENARIOS)}")
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    print(f"sfm truth benchmark: scenarios {','.join(letters)}, {args.reps} repetition(s) "
          f"each (seeds {args.seed} to {args.seed + args.reps - 1}), NUTS {args.chains} chains "
          f"x ({args.warmup} + {args.draws}), {args.n_samples} samples, "
          f"{INTERVAL:.0%} intervals", flush=True)
    start = time.perf_counter()
    records: list[dict[str, Any]] = []
    summary = pd.DataFrame()
    for letter in letters:
        scenario = SCENARIOS[letter]
        reference = truth(scenario)
        kind = "closed form" if scenario.closed_form() is not None else "Monte Carlo, 1M units"
        print(f"\n== {letter} {scenario.name}: {scenario.description} "
              f"({args.rows or scenario.rows} rows; truth by {kind})", flush=True)
        for r in range(args.reps):
            done = one_repetition(scenario, r, args, reference)
            records += done
            worst = max(abs(d["mean"] - d["truth"]) / d["sd"] for d in done)
            missed = [d["effect"] for d in done if not d["covered"]]
            print(f"   rep {r:2d}: {done[0]['seconds']:5.1f} s, largest |mean - truth| / sd "
                  f"{worst:4.1f}, outside the interval: {', '.join(missed) or '-'}", flush=True)
        table = pd.DataFrame(records)
        summary = summarise(table)
        _write(args.out, args, summary, table, time.perf_counter() - start)
    seconds = time.perf_counter() - start
    print(f"\n== summary: {args.reps} repetition(s) per scenario; coverage of the "
          f"{INTERVAL:.0%} intervals (coverage_se = sqrt(c (1 - c) / reps)); bias_z = bias / "
          "(emp_sd / sqrt(reps))")
    print(summary.drop(columns="reps").to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"\ntotal {seconds:.0f} s; written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
