"""Speed of bending terms: exact abduction of 1M rows, with and without spline terms.

Issue target: exact abduction of 1,000,000 rows with spline terms takes at most twice
today's time (the same SCM with straight lines only). Both SCMs have the law school's
shape plus a continuous protected attribute: ``race`` (8 levels), ``sex`` and ``age``
cause ``UGPA`` (Normal), ``LSAT`` (Poisson) and ``ZFYA`` (Normal), with a latent ``K``.
The flexible one adds ``cf.Smooth("age", k=10)`` to UGPA and LSAT (P-splines: 8 bending
columns each, recomputed for every chunk of rows). Rows are simulated from the flexible
SCM; each SCM is fitted by NUTS on 2,000 of them (not timed), then ``Fit.abduct`` of all
the rows (conditioning on UGPA and LSAT, 50 samples per row, exact engine, chunked) is
timed, one run each, in the same process.

Usage::

    python benchmarks/terms_speed.py [--rows 1000000] [--samples 50] [--seed 0]
"""

from __future__ import annotations

import argparse
import time
import warnings

import networkx as nx
import numpy as np

import counterfair as cf

RACES = ("White", "Black", "Asian", "Hispanic", "Mexican", "Other", "Puertorican", "Amerindian")


def _scm(flexible: bool) -> cf.SCM:
    smooth = [cf.Smooth("age", k=10, lower=-4.5, upper=4.5)] if flexible else []
    g = nx.DiGraph()
    g.add_node("race", spec=cf.Protected(levels=RACES))
    g.add_node("sex", spec=cf.Protected(levels=("Female", "Male")))
    g.add_node("age", spec=cf.Protected(kind="continuous"))
    g.add_node("K", spec=cf.Latent())
    g.add_node("UGPA", spec=cf.Normal(terms=smooth))
    g.add_node("LSAT", spec=cf.Poisson(terms=smooth))
    g.add_node("ZFYA", spec=cf.Normal(sigma=1.0))
    for child in ("UGPA", "LSAT", "ZFYA"):
        g.add_edges_from((p, child) for p in ("race", "sex", "age", "K"))
    return cf.SCM(g)


def _truth(scm: cf.SCM, rng: np.random.Generator) -> dict[str, object]:
    values: dict[str, object] = {}
    for name in scm.parameter_names():
        if name.startswith("beta_") and name.endswith(("_race", "_sex")):
            size = len(RACES) - 1 if name.endswith("_race") else 1
            values[name] = rng.normal(0.0, 0.2, size)
        elif name.startswith("s_"):
            values[name] = rng.normal(0.0, 0.3, 8)
        elif name.startswith("sigma_"):
            values[name] = 0.5
        elif name.startswith("beta_") and name.endswith("_age"):
            values[name] = 0.1
        elif name == "alpha_LSAT":
            values[name] = 3.5
        elif name.startswith("lambda_"):
            values[name] = 0.3 if "LSAT" in name else 0.8
        else:
            values[name] = rng.normal(0.0, 0.3)
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    flexible, linear = _scm(True), _scm(False)
    # sample() draws a continuous protected attribute from a standard normal: a
    # standardised age, inside the splines' range [-4.5, 4.5]
    rows = flexible.sample(
        args.rows, params=_truth(flexible, rng), seed=args.seed, return_latents=False
    )
    print(f"{args.rows:,} rows, {args.samples} samples per row, exact abduction given UGPA and "
          "LSAT")
    results = {}
    for name, scm in (("linear", linear), ("splines", flexible)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cf.errors.ConvergenceWarning)
            fit = scm.fit(rows.iloc[:2000], chains=2, warmup=200, draws=200, seed=args.seed,
                          progress=False)
        started = time.perf_counter()
        abduction = fit.abduct(
            rows, condition_on=["UGPA", "LSAT"], method="draws", n_samples=args.samples,
            seed=args.seed, engine="exact",
        )
        seconds = time.perf_counter() - started
        results[name] = seconds
        mean_k = float(np.mean(abduction.latents["K"]))
        print(f"  {name:8s}: {seconds:7.1f} s  (mean abducted K {mean_k:+.3f})")
    ratio = results["splines"] / results["linear"]
    print(f"ratio splines / linear: {ratio:.2f} (target <= 2): {'PASS' if ratio <= 2 else 'FAIL'}")


if __name__ == "__main__":
    main()
