"""Benchmark: group audits of a million rows with analytic and Poisson-bootstrap intervals.

Simulates ``--rows`` rows (default 1,000,000) with two protected attributes (race with
four levels, sex with two; their intersection makes eight cells), a binary outcome
and the decisions of a scikit-learn logistic regression fitted on 5,000 separate rows,
plus a real-valued outcome and a linear regression's predictions. Then times

* ``GroupAudit(...).metrics()`` (classification and regression) with
  ``ci_method="analytic"`` and
* the same with ``ci_method="poisson"`` (``--replicates`` replicates, default 200 and
  1000), and optionally with the exact bootstrap (``--exact-replicates``) for
  comparison,

each in its own child process, so that the peak resident memory
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) belongs to that run alone. The child
reports the peak before the audit (the data and predictions) and after it; the
difference is what the audit adds. Results are printed, and written as JSON with
``--out``.

Usage::

    python benchmarks/group_audit_scale.py [--rows 1000000] [--replicates 200 1000]
        [--exact-replicates 200] [--seed 0] [--chunk-mib 128] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from counterfair.audit import GroupAudit
from counterfair.audit.group_audit import Regression


def _peak_mib() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def simulate(rows: int, seed: int) -> dict[str, Any]:
    """Protected attributes, outcomes and real scikit-learn predictions for ``rows`` rows."""
    from sklearn.linear_model import LinearRegression, LogisticRegression

    rng = np.random.default_rng(seed)

    def draw(n: int) -> dict[str, Any]:
        race = rng.choice(np.array(["A", "B", "C", "D"]), n, p=[0.55, 0.25, 0.15, 0.05])
        sex = rng.choice(np.array(["F", "M"]), n)
        shift = pd.Series(race).map({"A": 0.3, "B": -0.2, "C": 0.0, "D": -0.4}).to_numpy()
        x = rng.normal(size=(n, 4)) + shift[:, None]
        logit = x @ np.array([0.8, -0.5, 0.3, 0.0]) + 0.2 * (sex == "M") - 0.3
        y = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(float)
        score = x @ np.array([1.0, 0.5, -0.3, 0.2]) + rng.normal(size=n)
        return {"race": race, "sex": sex, "x": x, "y": y, "score": score}

    train, data = draw(5000), draw(rows)
    classifier = LogisticRegression().fit(train["x"], train["y"])
    regressor = LinearRegression().fit(train["x"], train["score"])
    return {
        "protected": pd.DataFrame({"race": pd.Categorical(data["race"]),
                                   "sex": pd.Categorical(data["sex"])}),
        "y": data["y"],
        "decisions": classifier.predict(data["x"]).astype(float),
        "score": data["score"],
        "predicted_score": regressor.predict(data["x"]),
    }


def run_one(method: str, replicates: int, rows: int, seed: int, chunk_mib: int) -> dict[str, Any]:
    """Time one interval method on freshly simulated rows (call in a child process)."""
    import counterfair as cf

    data = simulate(rows, seed)
    before = _peak_mib()
    options = {"ci_method": method}
    if method in ("poisson", "bootstrap"):
        options["n_bootstrap"] = replicates  # type: ignore[assignment]
    with cf.set_options(chunk_bytes=chunk_mib * 2**20):
        start = time.perf_counter()
        classification = GroupAudit(
            data["y"], data["decisions"], data["protected"], seed=seed,
            **options,  # type: ignore[arg-type]
        ).metrics()
        middle = time.perf_counter()
        regression = GroupAudit(
            data["score"], data["predicted_score"], data["protected"], task=Regression(),
            seed=seed, **options,  # type: ignore[arg-type]
        ).metrics()
        end = time.perf_counter()
    assert classification.ci is not None and regression.ci is not None
    width = (classification.ratio_ci[("predicted_prevalence", "upper")]
             - classification.ratio_ci[("predicted_prevalence", "lower")])
    return {
        "method": method,
        "replicates": replicates if method != "analytic" else 0,
        "rows": rows,
        "groups": len(classification.by_group),
        "group_metrics_s": round(middle - start, 3),
        "regression_metrics_s": round(end - middle, 3),
        "peak_rss_before_mib": round(before, 1),
        "peak_rss_mib": round(_peak_mib(), 1),
        "widest_selection_ratio_ci": round(float(width.max()), 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--replicates", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--exact-replicates", type=int, default=0,
                        help="also time the exact (materialised) bootstrap with this many "
                             "resamples, for comparison (0: skip)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk-mib", type=int, default=128)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--child", nargs=2, metavar=("METHOD", "REPLICATES"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        result = run_one(args.child[0], int(args.child[1]), args.rows, args.seed,
                         args.chunk_mib)
        print(json.dumps(result))
        return 0

    runs = [("analytic", 0)] + [("poisson", b) for b in args.replicates]
    if args.exact_replicates:
        runs.append(("bootstrap", args.exact_replicates))
    results = []
    for method, replicates in runs:
        command = [sys.executable, __file__, "--rows", str(args.rows), "--seed", str(args.seed),
                   "--chunk-mib", str(args.chunk_mib), "--child", method, str(replicates)]
        done = subprocess.run(command, check=True, capture_output=True, text=True,
                              env=dict(os.environ))
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    header = (f"{'method':<10}{'B':>6}{'rows':>10}{'groups':>8}{'classification s':>17}"
              f"{'regression s':>14}{'RSS before MiB':>16}{'peak RSS MiB':>14}")
    print(f"group audit at scale, chunk {args.chunk_mib} MiB, "
          f"{os.cpu_count()} CPU(s), numpy {np.__version__}")
    print(header)
    for r in results:
        print(f"{r['method']:<10}{r['replicates']:>6}{r['rows']:>10}{r['groups']:>8}"
              f"{r['group_metrics_s']:>17.2f}{r['regression_metrics_s']:>14.2f}"
              f"{r['peak_rss_before_mib']:>16.0f}{r['peak_rss_mib']:>14.0f}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=args.out.parent, delete=False,
                                         suffix=".tmp") as handle:
            json.dump(results, handle, indent=2)
        os.replace(handle.name, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
