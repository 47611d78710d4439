"""Fair learners with missing values: Table-1-style RMSEs and the counterfactual change
on complete data, with ``missing="drop"`` and with ``missing="model"`` (issue 49).

Truth (law-school shaped): ``race`` (``w``, ``b``; 30 % ``b``) and ``sex`` (``f``, ``m``)
protected, a latent knowledge ``K ~ N(0, 1)``, and three Normal children of all three:

    GPA  = 0.5 - 0.6 [b] + 0.1 [m] + 0.8 K + N(0, 0.6)
    LSAT = 0.2 - 0.9 [b] + 0.2 [m] + 1.0 K + N(0, 0.5)
    FYA  =     - 0.7 [b] + 0.1 [m] + 0.9 K + N(0, 0.7)

In each training set about 30 % of ``GPA``, ``LSAT`` and ``FYA`` are hidden, missing at
random (MAR) two ways: ``given-A``, given the protected attributes (more often for ``b``
and ``m``: ``logit P = -1.4 + 0.9 [b] + 0.5 [m]``, each column); ``given-Y``, ``FYA``
so, and ``GPA`` and ``LSAT`` more often where ``FYA`` is high (``logit P = -1.2 + 1.2
FYA_std + 0.5 [b]``), so that the complete rows are selected on the outcome. The SCM is
fitted three times (2 chains x 400 + 400): on every row before hiding (complete data),
on the complete rows (``missing="drop"``) and on every row with its holes
(``missing="model"``). On each fit two fair learners of Kusner et al. (2017) are trained
on the fit's own rows, as in their Table 1: **Fair K** (level 2, ``K`` only) and **Fair
Add** (level 3, ``K`` and the additive noise of ``GPA`` and ``LSAT``). With
``missing="model"`` a training row's missing values are drawn for each sample given what
the row holds (its missing ``FYA`` too: multiple imputation of the target). Each learner
predicts ``FYA`` on 2,000 complete test rows of the same truth; the RMSE is reported
with the oracle ``E[FYA | K, race, sex]``'s as the floor, and the counterfactual change
of the learner under ``do(race)`` on the test rows (0 for a fair learner).

The paired differences (``model - complete`` and ``drop - complete``) are averaged over
the data sets with their Monte Carlo standard errors.

    python benchmarks/missing_learner.py                 # 8 data sets of 2,000 rows
    python benchmarks/missing_learner.py --reps 3 --rows 1500

Results: ``benchmarks/results/missing_learner.json`` (``--out``).
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
WAYS = ("complete", "drop", "model")
SCENARIOS = ("given-A", "given-Y")
LEARNERS = {"Fair K": cf.inputs.Latent(), "Fair Add": cf.inputs.AdditiveNoise()}
COLUMNS = ("GPA", "LSAT", "FYA")


def scm() -> cf.SCM:
    g = nx.DiGraph()
    g.add_node("race", spec=cf.Protected(levels=("w", "b")))
    g.add_node("sex", spec=cf.Protected(levels=("f", "m")))
    g.add_node("K", spec=cf.Latent())
    for node in COLUMNS:
        g.add_node(node, spec=cf.Normal())
        g.add_edges_from([("race", node), ("sex", node), ("K", node)])
    return cf.SCM(g)


def simulate(n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, np.ndarray]:
    """Complete rows of the truth and their oracle ``E[FYA | K, race, sex]``."""
    b, m, k = rng.random(n) < 0.3, rng.random(n) < 0.5, rng.normal(size=n)
    rows = pd.DataFrame({"race": np.where(b, "b", "w"), "sex": np.where(m, "m", "f")})
    rows["GPA"] = 0.5 - 0.6 * b + 0.1 * m + 0.8 * k + rng.normal(0, 0.6, n)
    rows["LSAT"] = 0.2 - 0.9 * b + 0.2 * m + 1.0 * k + rng.normal(0, 0.5, n)
    oracle = -0.7 * b + 0.1 * m + 0.9 * k
    rows["FYA"] = oracle + rng.normal(0, 0.7, n)
    return rows, oracle


def hide(rows: pd.DataFrame, rng: np.random.Generator, scenario: str) -> pd.DataFrame:
    """About 30 % of each column hidden, at random given race and sex (``given-A``), or
    ``GPA`` and ``LSAT`` hidden more often where ``FYA`` is high (``given-Y``)."""
    holes = rows.copy()
    b, m = (rows["race"] == "b").to_numpy(), (rows["sex"] == "m").to_numpy()
    p = 1 / (1 + np.exp(-(-1.4 + 0.9 * b + 0.5 * m)))
    fya = rows["FYA"].to_numpy()
    z = (fya - fya.mean()) / fya.std()
    q = 1 / (1 + np.exp(-(-1.2 + 1.2 * z + 0.5 * b)))
    hidden = {c: rng.random(len(rows)) < (q if scenario == "given-Y" and c != "FYA" else p)
              for c in COLUMNS}
    for column, mask in hidden.items():
        holes.loc[mask, column] = np.nan
    return holes


def evaluate(fit: cf.Fit, test: pd.DataFrame, seed: int) -> dict[str, dict[str, float]]:
    out = {}
    for name, features in LEARNERS.items():
        learner = cf.FairLearner(
            fit,
            target="FYA",
            features=features,
            n_samples=100,
            seed=seed,
        ).fit(fit.data)
        predicted = learner.predict(test)
        report = cf.audit.counterfactual_fairness(
            fit, test.drop(columns="FYA"), learner,
            settings=cf.audit.AuditSettings(attributes=["race"], n_samples=50, seed=seed),
        )
        out[name] = {
            "rmse": float(np.sqrt(np.mean((predicted - test["FYA"].to_numpy()) ** 2))),
            "change": float(report.overall["mean_abs_change"].max()),
        }
    return out


def one(rows: int, test_rows: int, seed: int, scenario: str) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    complete, _ = simulate(rows, rng)
    holes = hide(complete, rng, scenario)
    test, oracle = simulate(test_rows, rng)
    options = {"chains": 2, "warmup": 400, "draws": 400, "seed": seed}
    record: dict[str, object] = {
        "seed": seed, "missing": holes[list(COLUMNS)].isna().mean().to_dict(),
        "oracle_rmse": float(np.sqrt(np.mean((oracle - test["FYA"].to_numpy()) ** 2))),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cf.errors.ConvergenceWarning)
        for way, data, missing in (("complete", complete, "error"), ("drop", holes, "drop"),
                                   ("model", holes, "model")):
            started = time.perf_counter()
            fit = scm().fit(data, missing=missing, **options)
            record[f"{way}_fit_seconds"] = time.perf_counter() - started
            record[f"{way}_max_rhat"] = float(fit.diagnostics.max_rhat)
            record[way] = evaluate(fit, test, seed)
    record["kept"] = int(holes.notna().all(axis=1).sum())
    return record


def summarise(records: list[dict]) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    reps = len(records)
    for name in LEARNERS:
        out[name] = {}
        base = np.array([r["complete"][name]["rmse"] for r in records])
        for way in WAYS:
            rmse = np.array([r[way][name]["rmse"] for r in records])
            diff = rmse - base
            change = np.array([r[way][name]["change"] for r in records])
            out[name][way] = {
                "rmse": float(rmse.mean()),
                "minus_complete": float(diff.mean()),
                "mc_se": float(diff.std(ddof=1) / np.sqrt(reps)) if reps > 1 else float("nan"),
                "max_change": float(change.max()),
            }
    return out


def report(scenario: str, records: list[dict], summary: dict, args: argparse.Namespace) -> None:
    share = np.mean([np.mean(list(r["missing"].values())) for r in records])
    kept = np.mean([r["kept"] for r in records])
    oracle = np.mean([r["oracle_rmse"] for r in records])
    print(f"\n{scenario}: {args.reps} data sets of {args.rows:,} training rows ({share:.1%} of "
          f"GPA, LSAT and FYA missing; {kept:,.0f} complete rows kept by drop); "
          f"{args.test_rows:,} complete test rows; oracle RMSE {oracle:.3f}")
    print(f"{'learner':<9} {'way':<9} {'RMSE':>6} {'- complete':>11} {'MC se':>6} "
          f"{'max |change|':>12}")
    for name in LEARNERS:
        for way in WAYS:
            s = summary[name][way]
            print(f"{name:<9} {way:<9} {s['rmse']:>6.4f} {s['minus_complete']:>+11.4f} "
                  f"{s['mc_se']:>6.4f} {s['max_change']:>12.2e}")
    seconds = {w: np.mean([r[f"{w}_fit_seconds"] for r in records]) for w in WAYS}
    rhat = {w: max(r[f"{w}_max_rhat"] for r in records) for w in WAYS}
    print("fit seconds (mean): " + ", ".join(f"{w} {s:.0f}" for w, s in seconds.items())
          + "; max R-hat: " + ", ".join(f"{w} {r:.3f}" for w, r in rhat.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--test-rows", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "missing_learner.json")
    args = parser.parse_args(argv)
    results = {}
    for scenario in SCENARIOS:
        records = []
        for k in range(args.reps):
            records.append(one(args.rows, args.test_rows, args.seed + k, scenario))
            print(f"{scenario}: data set {k + 1}/{args.reps} done", file=sys.stderr, flush=True)
        summary = summarise(records)
        report(scenario, records, summary, args)
        results[scenario] = {"records": records, "summary": summary}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(
        {"rows": args.rows, "test_rows": args.test_rows, "reps": args.reps, "seed": args.seed,
         "scenarios": results}, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
