"""Speed benchmark: counterfair's generated law school program against the authors' program.

Times, on the same rows of the law school data, with the same Stan engine and seed,

* the Stan program counterfair generates for the law school SCM of Kusner et al. (2017)
  (reference coding of race and sex, first loading of K positive, K integrated out of its
  Normal children, GLM functions), with chains in parallel on the machine's cores as
  ``SCM.fit`` runs them (2 chains of 500 warm-up + 1,000 draws), run twice: before and
  after the authors' program, the slower run counting (the machine's speed drifts), and
* ``benchmarks/authors_law_school.stan``, the model as the paper's authors wrote it
  (one-hot columns for all 8 race and 2 sex levels beside the intercepts, no sign
  constraint, ``poisson(exp(...))``), run as their pipeline runs it: one chain of
  1,000 warm-up + 1,000 draws,

and prints wall seconds, bulk ESS and bulk ESS per second of the quantities both programs
identify (sigma of UGPA and the absolute values of the three loadings of K), and the ratios
counterfair / authors, per wall-clock second (the target: at least 30 on every quantity) and
per CPU-second (which does not credit counterfair for using both cores).

Both programs are compiled (or found in the back end's cache) before anything is timed; the
timed part is the back end's sampling call (program load, NUTS, conversion to arviz), for
both programs alike. ``--backend`` picks the engine for both (default: the one
``backend="auto"`` picks, CmdStan when installed).

This is a benchmark, not a test: it takes several minutes (the authors' program is slow).

Usage::

    python benchmarks/law_school_speed.py [--data-dir DIR] [--rows 2000] [--seed 0]
        [--backend auto] [--chains 2] [--warmup 500] [--draws 1000]
        [--authors-warmup 1000] [--authors-draws 1000] [--out results.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import arviz as az
import networkx as nx
import numpy as np
import pandas as pd

import counterfair as cf
from counterfair.datasets import DATA_ENV_VAR
from counterfair.datasets.law_school import (
    RACE_LEVELS,
    SEX_LEVELS,
    law_school_subsample,
    load_law_school,
)
from counterfair.errors import ConvergenceWarning
from counterfair.stan.backend import get_backend, resolve_backend_name

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
AUTHORS_PROGRAM = HERE / "authors_law_school.stan"
TARGET_RATIO = 30.0

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
    parser.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "pystan", "cmdstanpy"],
        help="Stan engine for both programs (default: what backend='auto' picks)",
    )
    parser.add_argument("--chains", type=int, default=2, help="counterfair chains (parallel)")
    parser.add_argument("--warmup", type=int, default=500, help="counterfair warm-up per chain")
    parser.add_argument("--draws", type=int, default=1000, help="counterfair draws per chain")
    parser.add_argument(
        "--authors-warmup", type=int, default=1000, help="authors' warm-up (one chain)"
    )
    parser.add_argument("--authors-draws", type=int, default=1000, help="authors' draws")
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


def program_id(code: str) -> str:
    """A short name for a program's text (the first 16 hex digits of its SHA-256)."""
    return hashlib.sha256(code.encode()).hexdigest()[:16]


def engine_version(backend: str) -> str:
    """The back end and its version, e.g. ``cmdstanpy 1.2.5 (CmdStan 2.35.0)``."""
    if backend == "pystan":
        import stan

        return f"PyStan {stan.__version__}"
    import cmdstanpy

    return f"cmdstanpy {cmdstanpy.__version__} ({Path(cmdstanpy.cmdstan_path()).name})"


def forget_cached_fits(code: str) -> int:
    """Delete httpstan's cached fits of a program; return how many there were.

    httpstan stores every fit under its program and returns the stored one when
    the same program, data, seed and settings are sampled again, in no time.
    A rerun of this benchmark would then time a file read, not NUTS. (CmdStan keeps no
    such cache.)
    """
    import httpstan.cache
    import httpstan.models

    folder = httpstan.cache.model_directory(httpstan.models.calculate_model_name(code)) / "fits"
    count = len(list(folder.glob("*"))) if folder.exists() else 0
    shutil.rmtree(folder, ignore_errors=True)
    return count


def _proc_times(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and its reaped children) from /proc."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return int(fields[1]), ticks / os.sysconf("SC_CLK_TCK")


def cpu_seconds() -> float | None:
    """CPU seconds used so far by this process and all its descendants (Linux only).

    httpstan samples in worker processes, so the CPU time of the process tree is what a run
    costs; unlike wall time it hardly changes when other jobs compete for the cores.
    """
    if not Path("/proc/self/stat").exists():
        return None
    table: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (found := _proc_times(int(entry.name))) is not None:
            table[int(entry.name)] = found
    me = os.getpid()
    total = 0.0
    for pid, (_, cpu) in table.items():
        ancestor = pid
        while ancestor not in (me, 0, 1) and ancestor in table:
            ancestor = table[ancestor][0]
        if ancestor == me:
            total += cpu
    return total


def source_state() -> str:
    """Git commit of the repository, with a note when counterfair/ has uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "counterfair"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"{head} + uncommitted changes in counterfair/" if dirty else head


def json_safe(value: Any) -> Any:
    """Replace NaN and infinities (not valid JSON) by None, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


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

    def max_of(name: str) -> int | None:
        return int(np.max(stats[name].values)) if name in stats else None

    def sum_of(name: str) -> int | None:
        return int(np.sum(stats[name].values)) if name in stats else None

    return {
        "mean_tree_depth": mean_of("tree_depth"),
        "max_tree_depth": max_of("tree_depth"),
        "mean_leapfrog_per_draw": mean_of("n_steps"),
        "step_size": mean_of("step_size"),
        "divergences": sum_of("diverging"),
    }


def _difference(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before


def run_counterfair(
    scm: cf.SCM, rows: pd.DataFrame, args: argparse.Namespace
) -> tuple[az.InferenceData, dict[str, Any]]:
    say("counterfair: timed run (cached build + NUTS) ...")
    load_before = os.getloadavg()
    cpu_before = cpu_seconds()
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", cf.errors.ConvergenceWarning)
        fit = scm.fit(
            rows,
            chains=args.chains,
            warmup=args.warmup,
            draws=args.draws,
            seed=args.seed,
            backend=args.backend,
            progress=False,
        )
    total = time.perf_counter() - start
    cpu_after = cpu_seconds()
    convergence = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    for w in caught:
        if not issubclass(w.category, cf.errors.ConvergenceWarning):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    for message in convergence:
        say(f"counterfair: ConvergenceWarning recorded: {message}")
    say(f"counterfair: sampling {fit.seconds:.1f} s, whole scm.fit call {total:.1f} s")
    info = {
        "seconds": fit.seconds,
        "seconds_whole_fit_call": total,
        "cpu_seconds_whole_fit_call": _difference(cpu_after, cpu_before),
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
    say("authors' program: timed run (cached program + NUTS) ...")
    load_before = os.getloadavg()
    cpu_before = cpu_seconds()
    start = time.perf_counter()
    run = get_backend(args.backend).sample(
        code,
        data,
        chains=1,
        warmup=args.authors_warmup,
        draws=args.authors_draws,
        seed=args.seed,
        progress=False,
    )
    seconds = time.perf_counter() - start
    cpu = _difference(cpu_seconds(), cpu_before)
    say(f"authors' program: sampling {seconds:.1f} s")
    idata = run.idata
    info = {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        **sampler_stats(idata),
    }
    return idata, info


def compare(
    cf_idata: az.InferenceData,
    cf_info: dict[str, Any],
    au_idata: az.InferenceData,
    au_info: dict[str, Any],
) -> list[dict[str, Any]]:
    cf_seconds, au_seconds = cf_info["seconds"], au_info["seconds"]
    cf_cpu, au_cpu = cf_info["cpu_seconds_whole_fit_call"], au_info["cpu_seconds"]
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
                "ratio_per_cpu_second": (
                    (cf_ess / cf_cpu) / (au_ess / au_cpu) if cf_cpu and au_cpu and au_ess else None
                ),
            }
        )
    return results


def fmt(value: float | int | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def print_report(
    args: argparse.Namespace,
    n_rows: int,
    source: str,
    cf_code: str,
    au_code: str,
    cf_info: dict[str, Any],
    au_info: dict[str, Any],
    results: list[dict[str, Any]],
) -> None:
    line = "-" * 99
    print()
    print("Law school speed benchmark: counterfair generated program vs the authors' program")
    print(f"rows {n_rows}, seed {args.seed}, {engine_version(args.backend)}, {os.cpu_count()} CPUs")
    print(
        f"counterfair: {args.chains} chain(s) in parallel of {args.warmup} warm-up + "
        f"{args.draws} draws; authors: one chain of {args.authors_warmup} warm-up + "
        f"{args.authors_draws} draws (their pipeline's setting)"
    )
    print(
        "Timed: the back end's sampling call (cached program, NUTS, arviz conversion), for "
        "both programs alike (compilation was done beforehand, untimed)."
    )
    print(
        f"counterfair source {source}, generated program {program_id(cf_code)}; "
        f"authors' program {program_id(au_code)}"
    )
    print(line)
    print(
        f"{'quantity':<20} {'ESS cf':>8} {'ESS auth':>9} {'ESS/s cf':>10} {'ESS/s auth':>11} "
        f"{'ratio':>8} {'mean cf':>9} {'mean auth':>10}  {'>= 30x':>6}"
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
    stats = [
        ("wall seconds", "seconds", ".1f"),
        ("mean tree depth", "mean_tree_depth", ".2f"),
        ("max tree depth", "max_tree_depth", "d"),
        ("leapfrog / draw", "mean_leapfrog_per_draw", ".1f"),
        ("step size", "step_size", ".4f"),
        ("divergences", "divergences", "d"),
    ]
    rows = [(name, fmt(cf_info[key], spec), fmt(au_info[key], spec)) for name, key, spec in stats]
    cf_cpu, au_cpu = cf_info["cpu_seconds_whole_fit_call"], au_info["cpu_seconds"]
    rows.insert(1, ("CPU seconds (*)", fmt(cf_cpu, ".1f"), fmt(au_cpu, ".1f")))
    for when in ("before", "after"):
        key = f"loadavg_{when}"
        rows.append(
            (f"1-min load {when}", fmt(cf_info[key][0], ".2f"), fmt(au_info[key][0], ".2f"))
        )
    for name, a, b in rows:
        print(f"{name:<20} {a:>14} {b:>14}")
    print(line)
    runs = ", ".join(f"{x:.1f}" for x in cf_info["seconds_both_runs"])
    print(f"counterfair ran before and after the authors' program ({runs} s); the slower is used")
    speedup = au_info["seconds"] / cf_info["seconds"]
    print(f"wall-time speed-up (authors / counterfair): {speedup:.1f}x")
    whole = cf_info["seconds_whole_fit_call"]
    worst = min(r["ratio"] * cf_info["seconds"] / whole for r in results)
    print(
        f"counterfair's whole scm.fit call (also arviz conversion and diagnostics): {whole:.1f} s; "
        f"smallest ESS/s ratio on that basis: {worst:.1f}x"
    )
    print(
        "(*) CPU time of the process tree (both engines sample in child processes); for "
        "counterfair over the whole scm.fit call. Less sensitive than wall time to other jobs, "
        "and it does not credit counterfair for running chains on several cores."
    )
    cpu_ratios = [r["ratio_per_cpu_second"] for r in results]
    if all(r is not None for r in cpu_ratios):
        listed = ", ".join(f"{r['quantity']} {r['ratio_per_cpu_second']:.1f}x" for r in results)
        print(f"ESS per CPU-second ratios: {listed}")
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

    source = source_state()  # before anything runs: other people may commit meanwhile
    scm = law_school_scm()
    cf_code = scm.stan_code()
    au_code = AUTHORS_PROGRAM.read_text()
    au_data = authors_data(rows)

    # Untimed: compile both programs (or find them in the back end's cache, keyed by text).
    args.backend = resolve_backend_name(args.backend)
    engine = get_backend(args.backend)
    say(f"compiling both programs with {args.backend} (untimed; cached after first use) ...")
    cf_build, au_build = engine.compile(cf_code), engine.compile(au_code)
    say(f"compiled: counterfair {cf_build:.1f} s, authors {au_build:.1f} s (not timed below)")
    if args.backend == "pystan":
        forgotten = forget_cached_fits(cf_code) + forget_cached_fits(au_code)
        say(f"deleted {forgotten} cached fit(s) of the two programs, so both runs really sample")

    # counterfair runs before and after the authors' program (same seed, same draws), and the
    # slower of its two runs is compared: the machine's speed drifts over the authors' long run.
    first_idata, first_info = run_counterfair(scm, rows, args)
    au_idata, au_info = run_authors(au_code, au_data, args)
    if args.backend == "pystan":
        forget_cached_fits(cf_code)
    second_idata, second_info = run_counterfair(scm, rows, args)
    cf_seconds_runs = [first_info["seconds"], second_info["seconds"]]
    say(f"counterfair sampling seconds, before and after the authors' run: {cf_seconds_runs}")
    if first_info["seconds"] >= second_info["seconds"]:
        cf_idata, cf_info = first_idata, first_info
    else:
        cf_idata, cf_info = second_idata, second_info
    cf_info["seconds_both_runs"] = cf_seconds_runs
    results = compare(cf_idata, cf_info, au_idata, au_info)
    print_report(args, len(rows), source, cf_code, au_code, cf_info, au_info, results)
    source_after = source_state()
    if source_after != source:
        print(
            f"WARNING: the counterfair source changed during the run ({source} -> "
            f"{source_after}); the numbers above are for the program named above."
        )

    if args.out is not None:
        payload = {
            "settings": {
                "rows": len(rows),
                "seed": args.seed,
                "backend": args.backend,
                "counterfair": {
                    "chains": args.chains,
                    "warmup": args.warmup,
                    "draws": args.draws,
                },
                "authors": {
                    "chains": 1,
                    "warmup": args.authors_warmup,
                    "draws": args.authors_draws,
                },
                "data_dir": str(args.data_dir),
                "timed": "the back end's sampling call (cached program), both programs",
            },
            "counterfair_source": source,
            "counterfair_source_after_run": source_after,
            "programs": {
                "counterfair": {"sha256_16": program_id(cf_code), "code": cf_code},
                "authors": {
                    "sha256_16": program_id(au_code),
                    "file": str(AUTHORS_PROGRAM.relative_to(REPO_ROOT)),
                },
            },
            "environment": {
                "python": platform.python_version(),
                "engine": engine_version(args.backend),
                "arviz": az.__version__,
                "cpu_count": os.cpu_count(),
                "platform": platform.platform(),
            },
            "compile_seconds_untimed": {"counterfair": cf_build, "authors": au_build},
            "counterfair": cf_info,
            "authors": au_info,
            "quantities": results,
            "target_ratio": TARGET_RATIO,
            "target_met": all(r["pass"] for r in results),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(json_safe(payload), indent=2, allow_nan=False) + "\n")
        say(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
