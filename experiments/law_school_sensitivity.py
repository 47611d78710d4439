"""Law school: how the counterfactual change of Full and Fair K moves when the SCM is wrong.

The level 2 SCM assumes knowledge ``K`` is independent of race and sex and
``K ~ N(0, 1)``. :func:`counterfair.counterfactual.sensitivity` re-runs the counterfactual audit of
Full and Fair K (Algorithm 1) on test rows with a path ``A -> K`` of strength
``rho`` (``K = rho * c(A) + K'``; ``c`` is 1 for Female against Male, 1 for every
race against White) and with the prior scale of ``K`` halved and doubled.

One command (about three minutes, most of it the level 2 fit)::

    python -m experiments.law_school_sensitivity --out results/law_school_sensitivity
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from counterfair.counterfactual.sensitivity import plot_sensitivity, sensitivity
from counterfair.datasets.law_school import law_school_split, law_school_subsample, load_law_school
from counterfair.datasets.law_school_models import law_school_level2
from counterfair.learn import inputs
from counterfair.learn.baselines import full_predictor
from counterfair.learn.fair import FairLearner
from counterfair.logs import console

logger = logging.getLogger(f"counterfair.experiments.{Path(__file__).stem}")

COLUMNS = ["race", "sex", "UGPA", "LSAT", "ZFYA"]
RHO = (0.0, 0.1, 0.25, 0.5, 1.0)
PRIOR_SCALE = (0.5, 1.0, 2.0)


def run(
    *,
    out: Path,
    data_dir: str | None = None,
    seed: int = 0,
    audit_rows: int = 1000,
    n_samples: int = 50,
    chains: int = 2,
    warmup: int = 250,
    draws: int = 750,
    train_rows: int | None = None,
) -> pd.DataFrame:
    """Fit the level 2 SCM, Full and Fair K; write the sensitivity table and figure to ``out``."""
    start = time.perf_counter()
    data = load_law_school(data_dir)
    train, test = law_school_split(data, seed=seed)
    if train_rows is not None:
        train = law_school_subsample(train, train_rows, seed=seed)
    scm = law_school_level2()
    fit = scm.fit(train[COLUMNS], chains=chains, warmup=warmup, draws=draws, seed=seed)
    predictors: dict[str, Any] = {
        "Full": full_predictor(scm, "ZFYA").fit(train),
        "Fair K (Algorithm 1)": FairLearner(
            fit,
            target="ZFYA",
            features=inputs.Latent(condition_on_target=False),
            n_samples=n_samples,
            seed=seed,
        ).fit(train[COLUMNS]),
    }
    rows = law_school_subsample(test, min(audit_rows, len(test)), seed=seed)[COLUMNS]
    abduction = fit.abduct(rows, condition_on=["UGPA", "LSAT"], n_samples=n_samples, seed=seed)
    codings = {
        "sex": {"Male": 0.0, "Female": 1.0},
        "race": {lv: (0.0 if lv == "White" else 1.0) for lv in fit.encoding.levels["race"]},
    }
    tables = [
        sensitivity(
            fit, rows, predictors, attribute=attribute, latent="K", rho=RHO,
            prior_scale=PRIOR_SCALE, coding=coding, abduction=abduction, seed=seed,
        )
        for attribute, coding in codings.items()
    ]
    table = pd.concat(tables, ignore_index=True)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "sensitivity.csv", index=False)
    for attribute in codings:
        part = table[table["attribute"] == attribute]
        plot_sensitivity(part, out / f"sensitivity_{attribute}.png")
    seconds = time.perf_counter() - start
    lines = [
        "# Law school: sensitivity of the counterfactual audit to the SCM",
        "",
        f"{len(train)} training rows, {len(rows)} audited test rows, {n_samples} joint samples "
        f"per row; level 2 fit max R-hat {fit.diagnostics.max_rhat:.4f}. "
        f"Total {seconds:.0f} s.",
        "",
        "| attribute | predictor | prior scale | "
        + " | ".join(f"rho = {r:g}" for r in RHO)
        + " | min ESS share |",
        "|---|---|---|" + "---|" * len(RHO) + "---|",
    ]
    for (attribute, name, scale), part in table.groupby(
        ["attribute", "predictor", "prior_scale"], sort=False
    ):
        values = part.set_index("rho")["mean_abs_change"]
        lines.append(
            f"| {attribute} | {name} | {scale:g} | "
            + " | ".join(f"{values[r]:.4f}" for r in RHO)
            + f" | {part['min_ess_share'].iloc[0]:.3f} |"
        )
    lines.append("")
    (out / "results.md").write_text("\n".join(lines))
    (out / "results.json").write_text(
        json.dumps(
            {"seconds": seconds, "rows": len(rows), "train": len(train),
             "max_rhat": float(fit.diagnostics.max_rhat), "table": table.to_dict("records")},
            indent=2,
        )
    )
    logger.info("%s", "\n".join(lines))
    return table


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``--out``, ``--data-dir``, ``--quick``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--quick", action="store_true", help="500 rows, short chains")
    args = parser.parse_args(argv)
    console()  # the table and the stages on standard error (COUNTERFAIR_LOG sets the level)
    if args.out.exists() and any(args.out.iterdir()) and not args.quick:
        existing = sorted(p.name for p in args.out.iterdir())
        if set(existing) - {"sensitivity.csv", "results.md", "results.json",
                            "sensitivity_sex.png", "sensitivity_race.png"}:
            raise SystemExit(f"{args.out} holds other files ({existing}); choose another --out")
    settings: dict[str, Any] = (
        {"train_rows": 500, "audit_rows": 100, "n_samples": 10, "warmup": 200, "draws": 150}
        if args.quick
        else {}
    )
    run(out=args.out, data_dir=args.data_dir, **settings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
