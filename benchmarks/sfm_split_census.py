"""Issue 46, part 4: the Census salary gap's spurious effect split by confounder and its
indirect effect split by mediator (``SFMFit.split`` of :func:`counterfair.audit.fit_sfm`).

The roles and fit are those of ``benchmarks/sfm_census.py`` (X = sex, x0 = male, x1 =
female, the first 20,000 rows; Y = salary, a negative binomial). The groups, earliest
first (a choice: :mod:`counterfair.audit.sfm_split` says what the order means):

* confounders: race and hispanic_origin; age; nativity and citizenship (age before
  citizenship: naturalisation takes years); economic_region;
* mediators: education_level and english_level (schooling); marital, family_size and
  children (family); occupation and industry (the job); hours_worked and weeks_worked
  (the time worked, after the job).

Prints the decomposition, the parts with 95 % intervals and their shares, the check of
``E[y_{x1} | x0]`` (reweighting against projection), and the time of the fit and of the
split. Results: ``benchmarks/results/sfm_split_census_<rows>.json``.

    python benchmarks/sfm_split_census.py [--rows 20000] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import time
import warnings
from pathlib import Path

import pandas as pd
from sfm_census import CATEGORICAL, W, Z, data_folder

CONFOUNDER_GROUPS = [["race", "hispanic_origin"], ["age"], ["nativity", "citizenship"],
                     ["economic_region"]]
MEDIATOR_GROUPS = [["education_level", "english_level"], ["marital", "family_size", "children"],
                   ["occupation", "industry"], ["hours_worked", "weeks_worked"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000, help="first rows (0: all)")
    parser.add_argument("--data", default=None, help="data folder (default $COUNTERFAIR_DATA)")
    parser.add_argument("--n-samples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2022)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("cmdstanpy").setLevel(logging.WARNING)

    from counterfair.audit import fit_sfm

    data = pd.read_csv(data_folder(args.data))
    if args.rows:
        data = data.head(args.rows)
    print(f"{len(data):,} rows of gov_census; {platform.platform()}, {os.cpu_count()} cores")
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted = fit_sfm(data, attribute="sex", x0="male", x1="female", outcome="salary",
                         confounders=Z, mediators=W, categorical=CATEGORICAL, seed=args.seed)
        fit_seconds = time.perf_counter() - started
        split = fitted.split(confounders=CONFOUNDER_GROUPS, mediators=MEDIATOR_GROUPS,
                             n_samples=args.n_samples, interval=0.95)
    split_seconds = time.perf_counter() - started - fit_seconds
    for w in {str(w.message) for w in caught}:
        print(f"  warning: {w[:200]}")
    print(split.summary())
    print(f"\nfit_sfm: {fit_seconds:.1f} s; split: {split_seconds:.1f} s")
    out = Path(args.out or Path(__file__).parent / "results"
               / f"sfm_split_census_{args.rows or len(data)}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "rows": len(data), "fit_seconds": fit_seconds, "split_seconds": split_seconds,
        "confounder_groups": CONFOUNDER_GROUPS, "mediator_groups": MEDIATOR_GROUPS,
        "decomposition": split.decomposition.table.to_dict(orient="records"),
        "parts": split.table.to_dict(orient="records"), "notes": list(split.notes),
        "machine": platform.platform(), "cores": os.cpu_count(),
    }, indent=2, default=float))
    print(f"written {out}")


if __name__ == "__main__":
    main()
