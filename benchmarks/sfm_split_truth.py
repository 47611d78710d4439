"""Benchmark: coverage of ``SFMFit.split``'s parts over repeated simulated data sets.

For each variant of the chain of ``tests/_sfm.py`` (``chain``: two confounders and two
mediators, every part in closed form; ``chain_product``: the same with a ``0.3 Z1 W1``
term in ``Y``, which the SFM's additive outcome model does not assume, its truth by a
Monte Carlo of the potential outcomes over 2 million units) and each repetition ``r``, a
fresh data set is simulated with seed ``--seed + r``, fitted by
:func:`counterfair.audit.fit_sfm` and split by ``SFMFit.split``
(confounders Z1 then Z2, mediators W1 then W2). Per variant and part it prints the truth,
the mean estimate and its bias, the mean posterior sd, the empirical sd over the
repetitions, the 90 % coverage and its binomial standard error.

Usage::

    python benchmarks/sfm_split_truth.py [--reps 20] [--variants chain,chain_product]
        [--rows 3000] [--seed 0] [--out benchmarks/results/sfm_split_truth.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from _sfm import Chain, ChainProduct  # noqa: E402

VARIANTS: dict[str, type[Chain]] = {"chain": Chain, "chain_product": ChainProduct}
PARTS = ("Ctf-SE[Z1]", "Ctf-SE[Z2]", "Ctf-IE[W1]", "Ctf-IE[W2]")
INTERVAL = 0.9
TRUTH_SEED = 7  # literal seed: a population truth, the same for every repetition


def truth_of(chain: Chain) -> dict[str, float]:
    if chain.product:
        return {k: float(v) for k, v in chain.monte_carlo(2_000_000, TRUTH_SEED).items()
                if k in PARTS}
    return chain.closed_form()


def one_repetition(chain: Chain, r: int, args: argparse.Namespace,
                   truth: dict[str, float]) -> list[dict[str, Any]]:
    import counterfair as cf

    seed = args.seed + r
    data = chain.data(args.rows, seed=seed)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = cf.audit.fit_sfm(data, **chain.roles(), seed=seed,
                                  settings=cf.audit.SFMSettings(progress=False))
        split = fitted.split(confounders=["Z1", "Z2"], mediators=["W1", "W2"],
                             interval=INTERVAL)
    seconds = time.perf_counter() - started
    table = split.table.assign(name=lambda t: t["effect"] + "[" + t["part"] + "]")
    records = []
    for row in table.itertuples():
        records.append({
            "variant": chain.name, "rep": r, "part": row.name, "truth": truth[row.name],
            "mean": row.mean, "sd": row.sd, "lower": row.lower, "upper": row.upper,
            "covered": bool(row.lower <= truth[row.name] <= row.upper), "seconds": seconds,
        })
    return records


def summarise(records: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (variant, part), block in records.groupby(["variant", "part"], sort=False):
        cover = float(block["covered"].mean())
        rows.append({
            "variant": variant, "part": part, "truth": block["truth"].iloc[0],
            "mean": block["mean"].mean(), "bias": block["mean"].mean() - block["truth"].iloc[0],
            "posterior_sd": block["sd"].mean(), "empirical_sd": block["mean"].std(ddof=1),
            "coverage": cover, "coverage_se": float(np.sqrt(cover * (1 - cover) / len(block))),
            "reps": len(block),
        })
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "sfm_split_truth.json")
    args = parser.parse_args(argv)
    records: list[dict[str, Any]] = []
    started = time.perf_counter()
    for name in args.variants.split(","):
        chain = VARIANTS[name]()
        truth = truth_of(chain)
        for r in range(args.reps):
            records += one_repetition(chain, r, args, truth)
            print(f"{name} rep {r}: {records[-1]['seconds']:.0f} s", flush=True)
        summary = summarise(pd.DataFrame(records))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(".json.part")
        tmp.write_text(json.dumps({
            "settings": {**vars(args), "out": str(args.out), "interval": INTERVAL},
            "machine": platform.platform(), "seconds": time.perf_counter() - started,
            "summary": summary.to_dict(orient="records"), "records": records,
        }, indent=1))
        tmp.replace(args.out)
    with pd.option_context("display.width", 160, "display.float_format", "{:.3f}".format):
        print(summarise(pd.DataFrame(records)).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
