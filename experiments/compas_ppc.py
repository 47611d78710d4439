"""COMPAS: does priors_count need a negative binomial? A posterior predictive check.

Fits the COMPAS study's SCM (``experiments.compas``: same data
preparation, split and SCM subsample) twice, with ``priors_count`` Poisson and
NegativeBinomial, runs ``fit.ppc()`` on each (conditional and marginal
replication, :mod:`counterfair.inference.ppc`) and prints the observed variance of
``priors_count`` beside its replicated variance (mean and 90 % interval).

    python experiments/compas_ppc.py --data-dir ../shared/data --out results/compas_ppc
    python experiments/compas_ppc.py --data-dir ../shared/data --no-latent-on-priors \
        --out results/compas_ppc_no_latent

Writes ``ppc_<family>_<replication>.csv`` (every node's check),
``ppc_<family>_<replication>.png`` (the figure), ``summary.json`` and
``summary.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # python experiments/compas_ppc.py: the studies' folder's parent
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import matplotlib

import counterfair as cf
from experiments.compas import compas_scm, prepare, split

matplotlib.use("Agg")

NODE = "priors_count"
FAMILIES = {"poisson": cf.Poisson, "negative_binomial": cf.NegativeBinomial}
REPLICATIONS = ("conditional", "marginal")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Fit both SCMs, check them, write the outputs; return the summary."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    frame, _ = prepare(cf.datasets.load_compas(args.data_dir))
    train, _ = split(frame, 1 / 3, args.seed)
    rows = train.sample(min(args.scm_rows, len(train)), random_state=args.seed)
    print(f"[compas-ppc] {len(rows)} training rows; {NODE}: mean {rows[NODE].mean():.3f}, "
          f"variance {rows[NODE].var():.3f}", flush=True)
    summary: dict[str, Any] = {
        "rows": len(rows),
        "latent_on_priors_count": not args.no_latent_on_priors,
        "settings": {"chains": args.chains, "warmup": args.warmup, "draws": args.draws,
                     "seed": args.seed, "replications": args.n_draws},
        "observed_variance": float(rows[NODE].var()),
        "observed_mean": float(rows[NODE].mean()),
        "fits": {},
    }
    for name, family in FAMILIES.items():
        scm = compas_scm(priors_count=family())
        if args.no_latent_on_priors:  # priors_count on race, sex and age only
            graph = scm.graph
            graph.remove_edge("U", NODE)
            scm = cf.SCM(graph)
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", cf.errors.ConvergenceWarning)
            fit = scm.fit(rows, chains=args.chains, warmup=args.warmup, draws=args.draws,
                          seed=args.seed, progress=False)
        seconds = time.perf_counter() - start
        entry: dict[str, Any] = {
            "seconds": round(seconds, 1),
            "diagnostics": fit.diagnostics.as_dict(),
            "warnings": [str(w.message) for w in caught],
        }
        if name == "negative_binomial":
            entry["phi_posterior_mean"] = float(fit.idata.posterior[f"phi_{NODE}"].mean())
        for replication in REPLICATIONS:
            check = fit.ppc(n_draws=args.n_draws, seed=args.seed, replication=replication)
            check.to_csv(out / f"ppc_{name}_{replication}.csv")
            check.plot().savefig(out / f"ppc_{name}_{replication}.png", dpi=100)
            variance = check.statistic(NODE, "variance")
            zeros = check.statistic(NODE, "share of 0")
            entry[replication] = {
                "replicated_variance_mean": float(variance["replicated_mean"]),
                "replicated_variance_q05": float(variance["replicated_q05"]),
                "replicated_variance_q95": float(variance["replicated_q95"]),
                "variance_p_value": float(variance["p_value"]),
                "variance_outside_90": bool(variance["outside_90"]),
                "observed_share_of_0": float(zeros["observed"]),
                "replicated_share_of_0": [float(zeros["replicated_q05"]),
                                          float(zeros["replicated_q95"])],
                "flagged": check.flagged()[["node", "statistic"]].to_dict(orient="records"),
            }
            part = entry[replication]
            print(f"[compas-ppc] {name}, {replication}: replicated variance of {NODE} "
                  f"{part['replicated_variance_mean']:.2f}, 90% interval "
                  f"[{part['replicated_variance_q05']:.2f}, "
                  f"{part['replicated_variance_q95']:.2f}] (observed "
                  f"{summary['observed_variance']:.2f}; "
                  f"{'outside' if part['variance_outside_90'] else 'inside'})", flush=True)
            print(check, flush=True)
        print(f"[compas-ppc] {name} fit: {seconds:.0f} s, {fit.diagnostics}", flush=True)
        summary["fits"][name] = entry
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    lines = [
        f"# COMPAS posterior predictive check of {NODE}"
        + ("" if not args.no_latent_on_priors else " (SCM without U -> priors_count)"),
        "",
        f"{summary['rows']} training rows; {args.chains} chains x ({args.warmup} + "
        f"{args.draws}); {args.n_draws} replications per check (conditional: given the "
        "observed parents and the rows' latent draws; marginal: latents from their priors, "
        "parents replicated).",
        "",
        "| family | replication | observed variance | replicated variance (mean) | "
        "90% interval | p-value | max R-hat | fit s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, entry in summary["fits"].items():
        for replication in REPLICATIONS:
            part = entry[replication]
            lines.append(
                f"| {name} | {replication} | {summary['observed_variance']:.2f} | "
                f"{part['replicated_variance_mean']:.2f} | "
                f"[{part['replicated_variance_q05']:.2f}, "
                f"{part['replicated_variance_q95']:.2f}] | "
                f"{part['variance_p_value']:.3f} | {entry['diagnostics']['max_rhat']:.3f} | "
                f"{entry['seconds']:.0f} |"
            )
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default="results/compas_ppc")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scm-rows", type=int, default=1500)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--n-draws", type=int, default=200, help="replications")
    parser.add_argument(
        "--no-latent-on-priors",
        action="store_true",
        help="drop the edge U -> priors_count (the latent then cannot absorb overdispersion)",
    )
    run(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
