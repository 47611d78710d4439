"""Joint against integrated latents on the law school level 2 SCM: time, ESS per second, R-hat.

Fits the level 2 SCM (K with Normal UGPA and ZFYA and Poisson LSAT) to the law school
training rows twice, one run each, same machine and seed: ``latents="joint"`` (every
row's K sampled by NUTS, anchored on the Normal children) and ``latents="integrated"``
(K integrated out of LSAT's likelihood by adaptive Gauss-Hermite quadrature, NUTS on the
structural parameters only, K drawn exactly afterwards). Prints, for each, the fit's wall
time, the minimum bulk ESS per second over the structural parameters, the maximum R-hat,
the mean leapfrog steps per draw; then the largest |difference of posterior means| in
MCSE units and the largest relative difference of posterior sds.

    python benchmarks/integrated_latents.py --data-dir ../shared/data             # all rows
    python benchmarks/integrated_latents.py --data-dir ../shared/data --rows 2000
    python benchmarks/integrated_latents.py --model indicators --rows 5000   # simulated

``--model adult`` fits the Adult path-specific study's SCM (``U_R`` with a Normal child
``hours_z`` and the categorical children ``occupation`` and ``workclass``) to the study's
3,000 seeded training rows; run it at the study's settings::

    python benchmarks/integrated_latents.py --model adult --chains 2 --warmup 1000 --draws 1000

``--model indicators`` fits a simulated SCM whose latent has no Normal child (three
Bernoulli and one ordinal indicator of U, a protected A on each): the joint program then
samples every row's U directly against the loadings.

Results: ``benchmarks/results/integrated_latents_<rows>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np


def _one(scm: Any, train: Any, latents: str, args: argparse.Namespace) -> tuple[Any, dict]:
    start = time.perf_counter()
    fit = scm.fit(
        train,
        chains=args.chains,
        warmup=args.warmup,
        draws=args.draws,
        seed=args.seed,
        latents=latents,
    )
    seconds = time.perf_counter() - start
    table = fit.summary(round_to="none")
    stats = fit.idata.sample_stats
    record = {
        "fit_seconds": round(seconds, 2),
        "sampler_seconds": round(float(fit.seconds), 2),
        "min_ess_bulk": float(table["ess_bulk"].min()),
        "min_ess_bulk_per_second": float(table["ess_bulk"].min() / seconds),
        "max_rhat": float(table["r_hat"].max()),
        "mean_leapfrog_per_draw": float(stats["n_steps"].mean()),
        "divergences": int(fit.diagnostics.divergences),
        "warm_start": fit.warm_start is not None,
    }
    return table, record


def _indicators(rows: int, seed: int) -> tuple[Any, Any]:
    """The simulated SCM of ``--model indicators`` and its rows (true U dropped)."""
    import networkx as nx

    import counterfair as cf

    g = nx.DiGraph()
    specs = {
        "A": cf.Protected(levels=("a", "b")), "U": cf.Latent(), "B1": cf.Bernoulli(),
        "B2": cf.Bernoulli(), "B3": cf.Bernoulli(),
        "O": cf.Ordinal(levels=("1", "2", "3", "4", "5")),
    }
    for name, spec in specs.items():
        g.add_node(name, spec=spec)
    for child in ("B1", "B2", "B3", "O"):
        g.add_edges_from([("A", child), ("U", child)])
    scm = cf.SCM(g)
    truth = {
        "alpha_B1": 0.3, "beta_B1_A": [-0.5], "lambda_B1_U": 1.2,
        "alpha_B2": -0.2, "beta_B2_A": [0.4], "lambda_B2_U": 0.9,
        "alpha_B3": 0.1, "beta_B3_A": [0.2], "lambda_B3_U": 1.5,
        "beta_O_A": [-0.3], "lambda_O_U": 1.0, "cutpoints_O": [-1.5, -0.5, 0.5, 1.5],
    }
    data = scm.sample(rows, params=truth, seed=seed)
    return scm, data.drop(columns="U")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("COUNTERFAIR_DATA"))
    parser.add_argument("--rows", type=int, default=None, help="training rows (default all)")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--model", choices=("law", "indicators", "adult"), default="law")
    args = parser.parse_args()

    if args.model == "law":
        from counterfair.datasets.law_school import law_school_split, load_law_school
        from counterfair.datasets.law_school_models import law_school_level2

        data = load_law_school(args.data_dir)
        train, _ = law_school_split(data, seed=args.seed)
        if args.rows is not None:
            train = train.sample(args.rows, random_state=args.seed)
        train = train[["race", "sex", "UGPA", "LSAT", "ZFYA"]]
        scm = law_school_level2()
        latent = "K"
    elif args.model == "adult":
        from counterfair.datasets import load_adult
        from experiments.adult_pscf import AdultPSCFConfig, adult_pscf_scm, prepare

        frame, _ = prepare(load_adult(args.data_dir))
        train = frame[frame["split"] == "train"].drop(columns="split").reset_index(drop=True)
        size = args.rows or AdultPSCFConfig().scm_rows
        train = train.sample(size, random_state=args.seed)  # the study's rows (its seed)
        scm = adult_pscf_scm()
        latent = "U_R"
    else:
        scm, train = _indicators(args.rows or 5000, args.seed)
        latent = "U"
    for latents in ("joint", "integrated"):  # compile both first: the timings are warm
        from counterfair.stan.backend import get_backend

        get_backend("cmdstanpy").compile(
            scm.stan_code(integrate=(latent,) if latents == "integrated" else ())
        )
    tables, records = {}, {}
    for latents in ("joint", "integrated"):
        tables[latents], records[latents] = _one(scm, train, latents, args)
        print(latents, json.dumps(records[latents]))
    joint, integrated = tables["joint"], tables["integrated"]
    mcse = np.sqrt(joint["mcse_mean"] ** 2 + integrated["mcse_mean"] ** 2)
    z = (integrated["mean"] - joint["mean"]).abs() / mcse.clip(lower=1e-12)
    sd_ratio = (integrated["sd"] / joint["sd"] - 1.0).abs()
    comparison = {
        "max_abs_mean_difference_in_mcse": float(z.max()),
        "parameter_of_max": str(z.idxmax()),
        "max_relative_sd_difference": float(sd_ratio.max()),
        "within_4_mcse": bool((z <= 4).all()),
    }
    ratio = records["joint"]["fit_seconds"] / records["integrated"]["fit_seconds"]
    print(f"fit time: joint {records['joint']['fit_seconds']} s, integrated "
          f"{records['integrated']['fit_seconds']} s (speed-up {ratio:.2f}x)")
    print(f"min ESS/s: joint {records['joint']['min_ess_bulk_per_second']:.1f}, integrated "
          f"{records['integrated']['min_ess_bulk_per_second']:.1f}")
    print(f"max R-hat: joint {records['joint']['max_rhat']:.4f}, integrated "
          f"{records['integrated']['max_rhat']:.4f}")
    print("comparison", json.dumps(comparison))
    result = {
        "model": args.model,
        "rows": len(train),
        "settings": {k: getattr(args, k) for k in ("chains", "warmup", "draws", "seed")},
        "joint": records["joint"],
        "integrated": records["integrated"],
        "speed_up": ratio,
        "comparison": comparison,
        "parameters": {
            "joint": joint[["mean", "sd", "mcse_mean"]].to_dict(orient="index"),
            "integrated": integrated[["mean", "sd", "mcse_mean"]].to_dict(orient="index"),
        },
        "environment": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                        "loadavg_after": os.getloadavg()},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "integrated_latents" if args.model == "law" else f"integrated_latents_{args.model}"
    path = out / f"{stem}_{len(train)}.json"
    path.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print("written", path)


if __name__ == "__main__":
    main()
