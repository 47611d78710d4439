"""Issue 46: the SFM decomposition of the Census salary gap, beside faircause's figures.

The US Census of government employees (2018; ``gov_census.csv.gz`` in the data folder,
204,309 rows), X = sex (x0 = male, x1 = female), Z = age, race, hispanic_origin,
citizenship, nativity, economic_region; W = marital, family_size, children,
education_level, english_level, hours_worked, weeks_worked, occupation (518 levels),
industry (259 levels); Y = salary (faircause's "Census Task 1", the first 20,000 rows in
file order). :func:`counterfair.audit.fit_sfm` fits the outcome's regression
on sex, Z and W (sex interacting with the rest) and sex's regression on Z in Stan, and
gives every term with 95 % intervals (a Bayesian bootstrap of the rows). Printed beside
faircause's published figures (its one-step debiased estimator with xgboost
nuisances), effect by effect, with whether the two 95 % intervals overlap.

``--gbm`` adds a sensitivity check: the same identification formulas
(:func:`counterfair.audit.sfm.add_sums`) with scikit-learn's histogram gradient
boosting (an xgboost-like learner) for the outcome's and the attribute's regressions,
a point estimate on the rows (weights 1), so that a difference from faircause can be
put on the outcome model or on the estimator.

    python benchmarks/sfm_census.py                      # 20,000 rows, with --gbm
    python benchmarks/sfm_census.py --rows 0             # all 204,309 rows
    python benchmarks/sfm_census.py --rows 20000 --no-gbm
    python benchmarks/sfm_census.py --rows 0 --fit-rows 20000   # each model on 20,000 rows

Prints the time of each stage and the peak memory (this process, and the largest
CmdStan child), and the ratios to issue 46's targets: 20,000 rows in at most 120 s,
all rows in at most 600 s and 4 GB. Results: ``benchmarks/results/sfm_census_<rows>.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

Z = ["age", "race", "hispanic_origin", "citizenship", "nativity", "economic_region"]
W = [
    "marital", "family_size", "children", "education_level", "english_level",
    "hours_worked", "weeks_worked", "occupation", "industry",
]
CATEGORICAL = ["citizenship"]
"""Coded columns read as categories (english_level and education_level are ordered
codes and enter as numbers, by their splines)."""

FAIRCAUSE = {
    "TV": (-15054.0, None),
    "Ctf-DE": (-10891.0, 443.0),
    "Ctf-IE": (5190.0, 342.0),
    "Ctf-SE": (-1027.0, 435.0),
}
"""faircause's Census Task 1 on the first 20,000 rows: estimate and half-width of its
95 % interval (x-DE_{x0,x1}(y | x0), x-IE_{x1,x0}(y | x0), x-SE_{x1,x0}(y); TV is
E[y | x1] - E[y | x0]). The names are counterfair's, whose terms are the same
contrasts (see counterfair.audit.decomposition)."""

TARGETS = {20000: 120.0, 0: 600.0}
"""Issue 46's wall-time targets by rows (0: all the rows)."""
MEMORY_TARGET_GB = 4.0


def data_folder(given: str | None) -> Path:
    folder = given or os.environ.get("COUNTERFAIR_DATA")
    if not folder:
        raise SystemExit("name the data folder: --data DIR or COUNTERFAIR_DATA")
    path = Path(folder) / "gov_census.csv.gz"
    if not path.exists():
        raise SystemExit(f"{path} does not exist")
    return path


def gbm_terms(data: pd.DataFrame, seed: int) -> dict[str, float]:
    """The same formulas with gradient-boosted nuisances, on the rows (weights 1)."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    from counterfair.audit.sfm import Sums, add_sums, terms_of

    frame = data[Z + W].copy()
    x1 = (data["sex"] == "female").to_numpy()
    y = data["salary"].to_numpy(dtype=float)
    for column in frame.columns:
        if pd.api.types.is_numeric_dtype(frame[column]) and column not in CATEGORICAL:
            continue
        if frame[column].nunique() > 250:  # beyond the learner's 255 categories: each
            # level by its mean salary (its rank is what a tree splits on)
            means = pd.Series(y).groupby(frame[column].astype(str).to_numpy()).mean()
            frame[column] = frame[column].astype(str).map(means).to_numpy(dtype=float)
        else:
            frame[column] = frame[column].astype(str).astype("category")

    def regressor() -> Any:
        return HistGradientBoostingRegressor(
            max_iter=300, learning_rate=0.05, categorical_features="from_dtype",
            random_state=seed,
        )

    mu = {}
    for level, mask in (("x0", ~x1), ("x1", x1)):
        model = regressor().fit(frame[mask], y[mask])
        mu[level] = model.predict(frame)[None, :]
    attribute = HistGradientBoostingClassifier(
        max_iter=300, learning_rate=0.05, categorical_features="from_dtype",
        random_state=seed,
    ).fit(frame[Z], x1)
    pi = attribute.predict_proba(frame[Z])[:, 1][None, :]
    sums = Sums(1)
    add_sums(sums, x1.astype(float), y, mu["x0"], mu["x1"], pi, np.ones((1, len(y))))
    return {term: float(value[0]) for term, value in terms_of(sums, confounded=True).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000, help="first rows (0: all)")
    parser.add_argument("--data", default=None, help="data folder (default $COUNTERFAIR_DATA)")
    parser.add_argument("--n-samples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2022)
    parser.add_argument("--fit-rows", type=int, default=None,
                        help="fit each nuisance model on at most this many rows")
    parser.add_argument("--family", default=None, help="the outcome's family (default: chosen)")
    parser.add_argument("--no-gbm", action="store_true", help="skip the gradient boosting check")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("cmdstanpy").setLevel(logging.WARNING)

    from counterfair.audit import SFMSettings, fit_sfm

    data = pd.read_csv(data_folder(args.data))
    if args.rows:
        data = data.head(args.rows)
    n = len(data)
    print(f"{n:,} rows of gov_census; {platform.platform()}, {os.cpu_count()} cores")
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fit_sfm(
            data, attribute="sex", x0="male", x1="female", outcome="salary",
            confounders=Z, mediators=W, categorical=CATEGORICAL, family=args.family,
            seed=args.seed, settings=SFMSettings(fit_rows=args.fit_rows),
        ).decompose(n_samples=args.n_samples, interval=0.95)
    seconds = time.perf_counter() - started
    self_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    child_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024**2
    for w in {str(w.message) for w in caught}:
        print(f"  warning: {w[:200]}")
    table = result.table
    print("\nnotes:")
    for note in result.notes:
        print(f"  - {note}")
    print(table.to_string(index=False))
    gbm = None if args.no_gbm else gbm_terms(data, args.seed)
    print(f"\n{'term':<10} {'form':<10} {'counterfair mean':>16} {'95 % interval':>22}"
          f"{'faircause':>24} {'overlap':>8}" + ("  gbm plug-in" if gbm else ""))
    rows_out = []
    for rec in table.itertuples():
        ours = f"[{rec.lower:,.0f}, {rec.upper:,.0f}]"
        theirs, overlap = "", ""
        if rec.form == "x-specific" and rec.term in FAIRCAUSE and args.rows == 20000:
            est, half = FAIRCAUSE[rec.term]
            if half is None:
                theirs = f"{est:,.0f}"
            else:
                theirs = f"{est:,.0f} ± {half:,.0f}"
                overlap = "yes" if rec.lower <= est + half and est - half <= rec.upper else "no"
        extra = f"  {gbm[rec.term]:>11,.0f}" if gbm else ""
        print(f"{rec.term:<10} {rec.form:<10} {rec.mean:>16,.0f} {ours:>22}{theirs:>24}"
              f"{overlap:>8}{extra}")
        rows_out.append({**rec._asdict(), "faircause": theirs, "overlap": overlap,
                         "gbm": None if gbm is None else gbm[rec.term]})
    target = TARGETS.get(args.rows)
    ratio = f", {seconds / target:.2f}x the {target:.0f} s target" if target else ""
    print(f"\nfit and decompose: {seconds:.1f} s{ratio}; peak memory {self_gb:.2f} GB (Python), "
          f"{child_gb:.2f} GB (largest CmdStan process); target {MEMORY_TARGET_GB} GB")
    stem = f"sfm_census_{args.rows or n}" + (f"_{args.family}" if args.family else "")
    out = Path(args.out or Path(__file__).parent / "results" / f"{stem}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "rows": n, "fit_rows": args.fit_rows, "family": args.family, "seconds": seconds,
        "peak_gb_python": self_gb, "peak_gb_cmdstan": child_gb,
        "table": rows_out, "notes": list(result.notes), "machine": platform.platform(),
        "cores": os.cpu_count(),
    }, indent=2, default=float))
    print(f"written {out}")


if __name__ == "__main__":
    main()
