"""What dropping incomplete rows costs: the decomposition on complete data against
``missing="drop"``, when a mediator is missing at random given the outcome (issue 49).

Truth (a linear-Gaussian SCM, closed form): ``A`` protected (``a0``, ``a1``, equally
likely), ``W = 0.8 [A = a1] + e_W`` and ``Y = 0.5 [A = a1] + W + e_Y`` with unit noises.
The gap ``TV = E[Y | a1] - E[Y | a0] = 1.3`` splits into the direct effect ``DE = 0.5``
and the indirect one through ``W``, ``IE = -0.8`` (``TV = DE - IE - SE``, ``SE = 0``:
``A`` is a root).

About 30 % of the values of ``W`` are then hidden, more often where ``Y`` is high and for
``a1`` (``logit P(missing) = -1.2 + 1.2 Y_std + 0.5 [A = a1]``): missing at random given
the observed ``Y`` and ``A``, not completely at random. The SCM is fitted on all rows
(complete data, before hiding) and with ``missing="drop"`` (the complete rows only), and
``cf.audit.decompose`` of ``Y`` is computed on each fit's own rows. Dropping keeps the
rows whose ``Y`` is low, so both mechanisms are fitted to a selected population.

Run (about a minute on 2 cores)::

    python benchmarks/missing_drop.py
    python benchmarks/missing_drop.py --rows 20000 --seed 1

It prints one line per term (truth, complete data, dropped rows, the bias of dropping in
posterior sds) and writes ``benchmarks/results/missing_drop.json``.
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
TRUTH = {"TV": 1.3, "DE": 0.5, "IE": -0.8, "SE": 0.0}


def simulate(n: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The complete rows and the same rows with about 30 % of ``W`` hidden (MAR)."""
    rng = np.random.default_rng(seed)
    a1 = rng.random(n) < 0.5
    w = 0.8 * a1 + rng.normal(size=n)
    y = 0.5 * a1 + w + rng.normal(size=n)
    complete = pd.DataFrame({"A": np.where(a1, "a1", "a0"), "W": w, "Y": y})
    z = (y - y.mean()) / y.std()
    hidden = rng.random(n) < 1 / (1 + np.exp(-(-1.2 + 1.2 * z + 0.5 * a1)))
    holes = complete.copy()
    holes.loc[hidden, "W"] = np.nan
    return complete, holes


def scm() -> cf.SCM:
    g = nx.DiGraph()
    g.add_node("A", spec=cf.Protected(levels=("a0", "a1")))
    g.add_node("W", spec=cf.Normal())
    g.add_node("Y", spec=cf.Normal())
    g.add_edges_from([("A", "W"), ("A", "Y"), ("W", "Y")])
    return cf.SCM(g)


def terms(fit: cf.Fit, seed: int) -> dict[str, tuple[float, float]]:
    """Posterior mean and sd of TV, DE, IE and SE (x-specific form) on the fit's rows."""
    result = cf.audit.decompose(
        fit, fit.data, attribute="A", x0="a0", x1="a1", outcome="Y", seed=seed
    )
    table = result.table
    out = {}
    for term, name in (("TV", "TV"), ("DE", "Ctf-DE"), ("IE", "Ctf-IE"), ("SE", "Ctf-SE")):
        row = table[table["term"] == name].iloc[0]
        out[term] = (float(row["mean"]), float(row["sd"]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "missing_drop.json")
    args = parser.parse_args(argv)
    complete, holes = simulate(args.rows, args.seed)
    options = {"chains": 2, "warmup": 500, "draws": 500, "seed": args.seed}
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cf.ConvergenceWarning)
        full = scm().fit(complete, **options)
        dropped = scm().fit(holes, missing="drop", **options)
    seconds = time.perf_counter() - started
    on_full, on_dropped = terms(full, args.seed), terms(dropped, args.seed)
    share = holes["W"].isna().mean()
    print(f"{args.rows:,} rows; W missing in {share:.1%} of them (MAR given Y and A); "
          f"kept {len(dropped.data):,}; fits in {seconds:.0f} s")
    print(f"{'term':<4} {'truth':>7} {'complete':>18} {'dropped rows':>18} {'bias':>7} "
          f"{'in sds':>7}")
    rows = {}
    for term, truth in TRUTH.items():
        (m_full, s_full), (m_drop, s_drop) = on_full[term], on_dropped[term]
        # TV is the raw gap of the rows (no posterior sd): its bias is in Y's units only
        bias = m_drop - truth
        in_sds = bias / s_drop if s_drop > 1e-9 else float("nan")
        print(f"{term:<4} {truth:>7.3f} {m_full:>9.3f} ± {s_full:<6.3f} {m_drop:>9.3f} ± "
              f"{s_drop:<6.3f} {bias:>+7.3f} {in_sds:>7.1f}")
        rows[term] = {"truth": truth, "complete": [m_full, s_full], "dropped": [m_drop, s_drop],
                      "dropped_bias": bias, "dropped_bias_sds": in_sds}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "rows": args.rows, "seed": args.seed, "missing_share": float(share),
        "kept": len(dropped.data), "seconds": seconds, "terms": rows,
    }, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
