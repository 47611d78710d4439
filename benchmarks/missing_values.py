"""Missing values three ways: the decomposition on complete data, with ``missing="drop"``
and with ``missing="model"``, over replicated data sets (issue 49).

Truth (a linear-Gaussian SCM, closed form): ``A`` protected (``a0``, ``a1``, equally
likely), ``W = 0.8 [A = a1] + e_W`` and ``Y = 0.5 [A = a1] + W + e_Y`` with unit noises.
The gap ``TV = E[Y | a1] - E[Y | a0] = 1.3`` splits into the direct effect ``Ctf-DE =
0.5`` and the indirect one through ``W``, ``Ctf-IE = -0.8`` (``TV = DE - IE - SE``,
``SE = 0``: ``A`` is a root).

Two ways the values go missing, both missing at random (MAR):

* ``given-A``: about 30 % of ``W`` and 15 % of ``Y`` hidden, more often for ``a1``
  (``logit P = -1.2 + 0.8 [A = a1]`` and ``-2.1 + 0.6 [A = a1]``): what issue 49 names;
* ``given-Y``: about 30 % of ``W`` hidden, more often where ``Y`` is high (``logit P =
  -1.2 + 1.2 Y_std + 0.5 [A = a1]``): the complete rows are then selected on the
  outcome.

Each data set is fitted three times (2 chains x 500 + 500): on every row before hiding
(complete data), on the complete rows (``missing="drop"``) and on every row with the
holes (``missing="model"``: ``W``'s missing values sampled, ``Y`` left out where
missing). ``cf.audit.decompose`` of ``Y`` is computed on each fit's own rows (for
``model``, every row: each sample fills a row's missing ``W`` with its posterior draw and
a missing ``Y`` with a draw from its equation). The table gives, per term, the mean
estimate, its bias, the RMSE and the coverage of the 90 % interval over the data sets,
and the bias in posterior sds.

    python benchmarks/missing_values.py                 # 10 data sets of 4,000 rows
    python benchmarks/missing_values.py --reps 3 --rows 2000

Results: ``benchmarks/results/missing_values.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd

import counterfair as cf

HERE = Path(__file__).resolve().parent
TRUTH = {"Ctf-DE": 0.5, "Ctf-IE": -0.8}
SCENARIOS = ("given-A", "given-Y")
WAYS = ("complete", "drop", "model")


def simulate(n: int, seed: int, scenario: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The complete rows and the same rows with holes (``scenario``: see the docstring)."""
    rng = np.random.default_rng(seed)
    a1 = rng.random(n) < 0.5
    w = 0.8 * a1 + rng.normal(size=n)
    y = 0.5 * a1 + w + rng.normal(size=n)
    complete = pd.DataFrame({"A": np.where(a1, "a1", "a0"), "W": w, "Y": y})
    holes = complete.copy()
    if scenario == "given-A":
        hide_w = rng.random(n) < 1 / (1 + np.exp(-(-1.2 + 0.8 * a1)))
        hide_y = rng.random(n) < 1 / (1 + np.exp(-(-2.1 + 0.6 * a1)))
        holes.loc[hide_y, "Y"] = np.nan
    else:
        z = (y - y.mean()) / y.std()
        hide_w = rng.random(n) < 1 / (1 + np.exp(-(-1.2 + 1.2 * z + 0.5 * a1)))
    holes.loc[hide_w, "W"] = np.nan
    return complete, holes


def scm() -> cf.SCM:
    g = nx.DiGraph()
    g.add_node("A", spec=cf.Protected(levels=("a0", "a1")))
    g.add_node("W", spec=cf.Normal())
    g.add_node("Y", spec=cf.Normal())
    g.add_edges_from([("A", "W"), ("A", "Y"), ("W", "Y")])
    return cf.SCM(g)


def terms(fit: cf.Fit, rows: pd.DataFrame, seed: int) -> dict[str, list[float]]:
    """Posterior mean, sd and 90 % interval of Ctf-DE and Ctf-IE (x-specific form)."""
    table = cf.audit.decompose(
        fit, rows, attribute="A", x0="a0", x1="a1", outcome="Y",
        settings=cf.audit.DecompositionSettings(seed=seed, interval=0.9),
    ).table
    out = {}
    for term in TRUTH:
        row = table[table["term"] == term].iloc[0]
        out[term] = [float(row["mean"]), float(row["sd"]), float(row["lower"]),
                     float(row["upper"])]
    return out


def one(rows: int, seed: int, scenario: str) -> dict[str, object]:
    complete, holes = simulate(rows, seed, scenario)
    options = {"chains": 2, "warmup": 500, "draws": 500, "seed": seed}
    record: dict[str, object] = {"seed": seed, "missing": holes.isna().mean().to_dict()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cf.errors.ConvergenceWarning)
        started = time.perf_counter()
        full = scm().fit(complete, **options)
        dropped = scm().fit(holes, missing="drop", **options)
        modelled = scm().fit(holes, missing="model", **options)
        record["fit_seconds"] = time.perf_counter() - started
    record["complete"] = terms(full, full.data, seed)
    record["drop"] = terms(dropped, dropped.data, seed)
    record["model"] = terms(modelled, modelled.data, seed)
    record["kept"] = len(dropped.data)
    record["model_max_rhat"] = float(modelled.diagnostics.max_rhat)
    return record


def summarise(records: list[dict]) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for way in WAYS:
        out[way] = {}
        for term, truth in TRUTH.items():
            est = np.array([r[way][term] for r in records])
            mean, sd, lower, upper = est.T
            out[way][term] = {
                "mean": float(mean.mean()), "bias": float(mean.mean() - truth),
                "rmse": float(np.sqrt(np.mean((mean - truth) ** 2))),
                "posterior_sd": float(sd.mean()),
                "coverage": float(np.mean((lower <= truth) & (truth <= upper))),
                "bias_in_sds": float((mean.mean() - truth) / sd.mean()),
            }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "missing_values.json")
    args = parser.parse_args(argv)
    results = {}
    for scenario in SCENARIOS:
        records = [one(args.rows, args.seed + k, scenario) for k in range(args.reps)]
        summary = summarise(records)
        share = np.mean([r["missing"]["W"] for r in records])
        print(f"\n{scenario}: {args.reps} data sets of {args.rows:,} rows; W missing in "
              f"{share:.1%} of the rows; 90 % intervals")
        print(f"{'term':<7} {'truth':>6} {'way':<9} {'mean':>7} {'bias':>7} {'rmse':>6} "
              f"{'post sd':>7} {'cover':>6} {'bias/sd':>7}")
        for term, truth in TRUTH.items():
            for way in WAYS:
                s = summary[way][term]
                print(f"{term:<7} {truth:>6.2f} {way:<9} {s['mean']:>7.3f} {s['bias']:>+7.3f} "
                      f"{s['rmse']:>6.3f} {s['posterior_sd']:>7.3f} "
                      f"{s['coverage'] * args.reps:>3.0f}/{args.reps:<2} "
                      f"{s['bias_in_sds']:>+7.1f}")
        results[scenario] = {"records": records, "summary": summary}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(
        {"rows": args.rows, "reps": args.reps, "seed": args.seed, "truth": TRUTH,
         "scenarios": results}, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
