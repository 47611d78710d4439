"""Issue 46, part 5: a Census salary predictor fair by business necessity.

On the first ``--rows`` rows of the US Census of government employees (the SFM of
``benchmarks/sfm_census.py``: X = sex, male -> female), :func:`counterfair.audit.fit_sfm`
fits the nuisance models once; its ``SFMFit.predictor`` builds from them

* the **unconstrained** predictor (every effect allowed: the outcome model's posterior
  mean), and
* the **business-necessity** predictor with ``--allow`` (default ``IE``: the direct and
  the spurious effects of sex removed, the part through the mediators kept).

For each it prints its own decomposition (:meth:`SFMPredictor.decompose`; the removed
effects should be 0 within their intervals, the kept ones the salary's) and its RMSE on
the fitted rows and on the next ``--rows`` rows of the file (held out: encoded as the
fitted rows were, rows of an occupation or industry the fit never saw get the overall
mean). ``--refit`` also decomposes each predictor's predictions on the held-out rows with
:func:`counterfair.audit.fit_sfm` and ``.decompose()`` (new nuisance fits, a Normal
outcome), a check that does not rest on the predictor's own models.

    python benchmarks/sfm_predictor_census.py                 # 20,000 + 20,000 rows
    python benchmarks/sfm_predictor_census.py --refit

Results: ``benchmarks/results/sfm_predictor_census.json``.
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
from typing import Any

import numpy as np
import pandas as pd
from sfm_census import CATEGORICAL, W, Z, data_folder  # type: ignore[import-not-found]

SHOWN = ("TV", "Ctf-DE", "Ctf-IE", "Ctf-SE")


def _table(result: Any) -> dict[str, dict[str, float]]:
    t = result.table.drop_duplicates("term").set_index("term")
    return {term: {k: float(t.loc[term, k]) for k in ("mean", "sd", "lower", "upper")}
            for term in t.index}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000, help="fitted rows, and held-out rows")
    parser.add_argument("--data", default=None, help="data folder (default $COUNTERFAIR_DATA)")
    parser.add_argument("--allow", default="IE", help="comma-separated effects kept (IE)")
    parser.add_argument("--seed", type=int, default=2022)
    parser.add_argument("--refit", action="store_true",
                        help="also decompose the held-out predictions with new SFM fits")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("cmdstanpy").setLevel(logging.WARNING)

    import counterfair as cf

    every = pd.read_csv(data_folder(args.data), nrows=2 * args.rows)
    fitted_rows, held = every.iloc[: args.rows], every.iloc[args.rows:].reset_index(drop=True)
    print(f"{len(fitted_rows):,} fitted and {len(held):,} held-out rows of gov_census; "
          f"{platform.platform()}, {os.cpu_count()} cores")
    roles = {"attribute": "sex", "x0": "male", "x1": "female", "outcome": "salary",
             "confounders": Z, "mediators": W}
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted = cf.audit.fit_sfm(fitted_rows, **roles, categorical=CATEGORICAL,
                                  seed=args.seed)
    fit_seconds = time.perf_counter() - started
    for w in {str(w.message) for w in caught}:
        print(f"  warning: {w[:200]}")
    salary = fitted.decompose(interval=0.95)
    allow = tuple(a.strip() for a in args.allow.split(",") if a.strip())
    record: dict[str, Any] = {
        "rows": args.rows, "allow": allow, "fit_seconds": fit_seconds,
        "salary": _table(salary), "machine": platform.platform(), "cores": os.cpu_count(),
    }
    y_fit = fitted_rows["salary"].to_numpy(dtype=float)
    y_held = held["salary"].to_numpy(dtype=float)
    print(f"\nthe salary's decomposition (fitted rows; {fit_seconds:.0f} s of fits)")
    for term in SHOWN:
        t = record["salary"][term]
        print(f"  {term:<7} {t['mean']:>9,.0f} [{t['lower']:,.0f}, {t['upper']:,.0f}]")
    for name, kept in (("unconstrained", ("DE", "IE", "SE")), ("business necessity", allow)):
        t0 = time.perf_counter()
        predictor = fitted.predictor(allow=kept)
        own = predictor.decompose(interval=0.95)
        rmse_fit = float(np.sqrt(np.mean((y_fit - predictor.predict()) ** 2)))
        held_prediction = predictor.predict(held)
        rmse_held = float(np.sqrt(np.mean((y_held - held_prediction) ** 2)))
        entry: dict[str, Any] = {
            "allow": kept, "decomposition": _table(own), "rmse_fitted": rmse_fit,
            "rmse_held_out": rmse_held, "seconds": time.perf_counter() - t0,
        }
        print(f"\n{name} predictor (allowed: {', '.join(kept) or 'none'}): RMSE "
              f"{rmse_fit:,.0f} on the fitted rows, {rmse_held:,.0f} held out")
        for term in SHOWN:
            t = entry["decomposition"][term]
            print(f"  {term:<7} {t['mean']:>9,.0f} [{t['lower']:,.0f}, {t['upper']:,.0f}]")
        if args.refit:
            frame = held.assign(prediction=held_prediction)
            refit = cf.audit.fit_sfm(
                frame, **{**roles, "outcome": "prediction"}, categorical=CATEGORICAL,
                family="normal", seed=args.seed + 1,
            ).decompose(interval=0.95)
            entry["refit_held_out"] = _table(refit)
            print("  the decomposition of its held-out predictions (new fits):")
            for term in SHOWN:
                t = entry["refit_held_out"][term]
                print(f"    {term:<7} {t['mean']:>9,.0f} [{t['lower']:,.0f}, {t['upper']:,.0f}]")
        record[name] = entry
    ratio = record["business necessity"]["rmse_held_out"] / record["unconstrained"]["rmse_held_out"]
    print(f"\nheld-out RMSE ratio, business necessity / unconstrained: {ratio:.3f}")
    record["rmse_ratio_held_out"] = ratio
    out = Path(args.out or Path(__file__).parent / "results" / "sfm_predictor_census.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.part")
    tmp.write_text(json.dumps(record, indent=2, default=float))
    tmp.replace(out)
    print(f"written {out}")


if __name__ == "__main__":
    main()
