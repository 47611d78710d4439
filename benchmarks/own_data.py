"""Issue 49: the default fit against the joint one on simulated arrest-record data.

Simulates rows from an SCM of the shape of the user's (issue 49, item 1): two protected
attributes (``colour``, ``sex``), two observed confounders (``age``, ``year``, Normal
roots), one latent ``U`` with three children that also depend on all four: ``employed``
(Bernoulli), ``checks`` (a Poisson count of police checks) and the outcome ``released``
(Bernoulli), with ``employed -> released``. ``U`` is identified (``scm.identification()``
is empty: the pairs (employed, checks) and (checks, released) give two covariances and
``checks`` its overdispersion, three moments for three loadings; the pair (employed,
released) is explained by its edge). Then fits it at the Python and CLI defaults (4 chains
x 500 draws, default warm-up) twice, same seed, both programs compiled first: ``latents="joint"``
(every row's U sampled by NUTS) and the default (``latents="auto"``: U integrated out,
Laplace start from 5,000 rows). Prints, per fit, the fit's wall time, the minimum bulk
ESS over the structural parameters, ESS per second, the maximum R-hat, the quadrature
rule, and the ratios to issue 49's targets: 5,000 rows in at most 60 s with R-hat at most
1.01, 50,000 rows in at most 300 s.

    python benchmarks/own_data.py                        # 5,000 and 50,000 rows
    python benchmarks/own_data.py --rows 5000            # one size
    python benchmarks/own_data.py --skip-joint-above 5000   # no joint fit at 50,000 rows

Results: ``benchmarks/results/own_data.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

TARGET_SECONDS = {5000: 60.0, 50000: 300.0}
"""Issue 49's targets for the default fit's wall time, by rows."""
TARGET_RHAT = 1.01
TARGET_ESS = 400.0

TRUTH: dict[str, Any] = {
    "alpha_age": 0.0, "sigma_age": 1.0, "alpha_year": 0.0, "sigma_year": 1.0,
    "alpha_employed": 0.4, "beta_employed_colour": [-0.5], "beta_employed_sex": [0.3],
    "beta_employed_age": 0.4, "beta_employed_year": -0.2, "lambda_employed_U": 1.0,
    "alpha_checks": 0.5, "beta_checks_colour": [0.6], "beta_checks_sex": [-0.4],
    "beta_checks_age": -0.3, "beta_checks_year": 0.2, "lambda_checks_U": 0.5,
    "alpha_released": 0.8, "beta_released_colour": [-0.4], "beta_released_sex": [0.3],
    "beta_released_age": 0.2, "beta_released_year": 0.1, "beta_released_employed": 0.8,
    "lambda_released_U": 0.8,
}
"""The simulation's parameter values (U ~ Normal(0, 1))."""


def own_scm() -> Any:
    """The SCM of the user's shape (see the module docstring)."""
    import networkx as nx

    import counterfair as cf

    g = nx.DiGraph()
    specs = {
        "colour": cf.Protected(levels=("white", "black")),
        "sex": cf.Protected(levels=("male", "female")),
        "age": cf.Normal(), "year": cf.Normal(), "U": cf.Latent(),
        "employed": cf.Bernoulli(), "checks": cf.Poisson(), "released": cf.Bernoulli(),
    }
    for name, spec in specs.items():
        g.add_node(name, spec=spec)
    for child in ("employed", "checks", "released"):
        g.add_edges_from((parent, child) for parent in ("colour", "sex", "age", "year", "U"))
    g.add_edge("employed", "released")
    return cf.SCM(g)


def simulate(scm: Any, rows: int, seed: int) -> Any:
    """``rows`` rows of ``scm`` at :data:`TRUTH`, U dropped; the protected attributes drawn
    with shares 0.3 (black) and 0.1 (female), as in arrest records."""
    probs = {"colour": {"white": 0.7, "black": 0.3}, "sex": {"male": 0.9, "female": 0.1}}
    data = scm.sample(rows, params=TRUTH, seed=seed, protected_probs=probs)
    return data.drop(columns="U")


def _one(scm: Any, train: Any, latents: str | None, args: argparse.Namespace) -> dict:
    options = {} if latents is None else {"latents": latents}  # None: the default
    start = time.perf_counter()
    fit = scm.fit(train, chains=args.chains, draws=args.draws, seed=args.seed, **options)
    seconds = time.perf_counter() - start
    table = fit.summary(round_to="none")
    table = table.loc[[name for name in table.index if name in set(fit.diagnostics.table.index)]]
    stats = fit.idata.sample_stats
    rule = fit.quadrature
    return {
        "latents": latents or "default",
        "integrated": list(fit.integrated),
        "warm_start": None if fit.warm_start is None else type(fit.warm_start).__name__,
        "fit_seconds": round(seconds, 2),
        "min_ess_bulk": float(table["ess_bulk"].min()),
        "min_ess_bulk_per_second": float(table["ess_bulk"].min() / seconds),
        "max_rhat": float(table["r_hat"].max()),
        "latent_max_rhat": float(fit.diagnostics.latent_max_rhat),
        "mean_leapfrog_per_draw": float(stats["n_steps"].mean()),
        "divergences": int(fit.diagnostics.divergences),
        "quadrature": None if rule is None else rule.as_dict(),
        "loadavg_after": os.getloadavg(),
    }


def _line(rows: int, record: dict) -> str:
    target = TARGET_SECONDS.get(rows)
    ratio = f"{record['fit_seconds'] / target:.2f}x the {target:.0f} s target" if target else ""
    rule = record["quadrature"]
    nodes = f", {rule['nodes']} nodes/{rule['newton']} Newton steps" if rule else ""
    return (
        f"{rows:>7,} rows | {record['latents']:>7} (integrated {record['integrated']}, "
        f"start {record['warm_start']}{nodes}) | {record['fit_seconds']:7.1f} s {ratio} | "
        f"min bulk ESS {record['min_ess_bulk']:7.0f} (target {TARGET_ESS:.0f}) | "
        f"{record['min_ess_bulk_per_second']:6.1f} ESS/s | max R-hat {record['max_rhat']:.4f} "
        f"(target {TARGET_RHAT}) | latents' R-hat {record['latent_max_rhat']:.3f} | "
        f"{record['mean_leapfrog_per_draw']:.1f} leapfrog/draw, "
        f"{record['divergences']} divergences"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[5000, 50000])
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--skip-joint-above", type=int, default=None, metavar="N",
        help="fit jointly only up to N rows (the joint fit of 50,000 rows takes long)",
    )
    parser.add_argument("--only", choices=("joint", "default"), default=None)
    parser.add_argument("--out", default="benchmarks/results/own_data.json")
    args = parser.parse_args()

    import counterfair as cf
    from counterfair.stan.backend import get_backend

    scm = own_scm()
    assert scm.identification().empty, scm.identification()
    for integrate in ((), ("U",)):  # compile both first: the timings are warm
        get_backend("cmdstanpy").compile(scm.stan_code(integrate=integrate))
    print(f"counterfair {cf.__file__}; {os.cpu_count()} CPUs, 1-min load {os.getloadavg()[0]:.2f}")
    results = []
    for rows in args.rows:
        train = simulate(scm, rows, args.seed)
        for latents in ("joint", None):
            name = latents or "default"
            if args.only not in (None, name):
                continue
            if latents == "joint" and args.skip_joint_above and rows > args.skip_joint_above:
                print(f"{rows:>7,} rows |   joint skipped (--skip-joint-above)")
                continue
            record = _one(scm, train, latents, args)
            record["rows"] = rows
            results.append(record)
            print(_line(rows, record), flush=True)
    for rows in args.rows:
        default = [r for r in results if r["rows"] == rows and r["latents"] == "default"]
        joint = [r for r in results if r["rows"] == rows and r["latents"] == "joint"]
        if default and rows in TARGET_SECONDS:
            d = default[0]
            ok = d["fit_seconds"] <= TARGET_SECONDS[rows] and d["max_rhat"] <= TARGET_RHAT
            print(f"issue 49's target at {rows:,} rows: <= {TARGET_SECONDS[rows]:.0f} s with "
                  f"R-hat <= {TARGET_RHAT}; measured {d['fit_seconds']:.1f} s "
                  f"({d['fit_seconds'] / TARGET_SECONDS[rows]:.2f}x), R-hat "
                  f"{d['max_rhat']:.4f}, bulk ESS {d['min_ess_bulk']:.0f}: "
                  f"{'PASS' if ok else 'FAIL'}")
        if default and joint:
            j, d = joint[0], default[0]
            print(f"  default against joint at {rows:,} rows: "
                  f"{j['fit_seconds'] / d['fit_seconds']:.1f}x the speed, "
                  f"{d['min_ess_bulk_per_second'] / j['min_ess_bulk_per_second']:.1f}x "
                  "the ESS per second")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "settings": {k: getattr(args, k) for k in ("rows", "chains", "draws", "seed")},
        "truth": TRUTH,
        "results": results,
        "environment": {"cpu_count": os.cpu_count(), "platform": platform.platform()},
    }, indent=2), encoding="utf-8")
    print("written", out)


if __name__ == "__main__":
    main()
