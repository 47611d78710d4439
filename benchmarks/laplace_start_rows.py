"""The Laplace start on many rows: L-BFGS on every row against L-BFGS on a subsample.

On more than ``counterfair.inference.starts.OPTIMIZER_ROWS`` rows the Laplace start runs
CmdStan's L-BFGS on a seeded subsample of that many rows, then its Newton steps on every
row. This script times both ways on the same data in one run (issue 49's shape,
``benchmarks/own_data.py``'s simulation, U integrated out) and prints how far apart the
two modes are, in posterior sds, and the ratio of the times.

    python benchmarks/laplace_start_rows.py --rows 50000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import own_data  # type: ignore[import-not-found]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from counterfair.inference import starts
    from counterfair.inference.sampling import training_rows
    from counterfair.stan.data import fit_data
    from counterfair.stan.unconstrained import Unconstrained

    scm = own_data.own_scm()
    data = own_data.simulate(scm, args.rows, args.seed)
    rows, _ = training_rows(scm, data, subsample=None, max_rows=None, seed=args.seed)
    stan_data = fit_data(scm, rows)
    results = {}
    for label, limit in (("every row", 10**12), ("subsample", starts.OPTIMIZER_ROWS)):
        saved = starts.OPTIMIZER_ROWS
        starts.OPTIMIZER_ROWS = limit
        try:
            begin = time.perf_counter()
            start = starts._laplace(scm, rows, stan_data, 4, args.seed, ("U",))
            results[label] = (time.perf_counter() - begin, start)
        finally:
            starts.OPTIMIZER_ROWS = saved
    whole, coarse = results["every row"][1], results["subsample"][1]
    shapes = {k: np.shape(v) for k, v in whole.mode.items()}
    transform = Unconstrained.of(scm.stan_code(integrate=("U",)), shapes, stan_data)
    sd = np.sqrt(np.diag(whole.inv_metric))
    gap = (transform.unconstrain(coarse.mode) - transform.unconstrain(whole.mode)) / sd
    for label, (seconds, _) in results.items():
        print(f"{args.rows:,} rows, L-BFGS on {label}: Laplace start {seconds:.1f} s")
    ratio = results["subsample"][0] / results["every row"][0]
    print(f"ratio subsample / every row: {ratio:.2f}; modes apart by at most "
          f"{np.abs(gap).max():.3f} posterior sd")


if __name__ == "__main__":
    main()
