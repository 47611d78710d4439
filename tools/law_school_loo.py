"""The law school LOO table of docs/model-comparison.md.

Level 2, level 3 and level 3 + ZFYA on 2,000 training rows, 4 chains x 1,000 draws.
Run: ``COUNTERFAIR_DATA=... python tools/law_school_loo.py``.
"""

from __future__ import annotations

import time
import warnings

import pandas as pd

import counterfair as cf


def level3_zfya() -> cf.SCM:
    """Level 3 with ZFYA ~ Normal(race, sex; sd 1): the columns of level 2, no latent."""
    g = cf.datasets.law_school_level3().graph
    g.add_node("ZFYA", spec=cf.Normal(sigma=1.0))
    g.add_edges_from([("race", "ZFYA"), ("sex", "ZFYA")])
    return cf.SCM(g)


def main() -> None:
    pd.set_option("display.width", 200)
    train, _ = cf.datasets.law_school_split(cf.datasets.load_law_school(download=False), seed=0)
    rows = cf.datasets.law_school_subsample(train, 2000, seed=0)
    print("rows", len(rows), "of", len(train), "training rows")
    models = {
        "level 2": cf.datasets.law_school_level2(),
        "level 3": cf.datasets.law_school_level3(),
        "level 3 + ZFYA": level3_zfya(),
    }
    fits = {}
    for name, scm in models.items():
        start = time.time()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fits[name] = scm.fit(rows, chains=4, warmup=500, draws=1000, seed=1, progress=False)
        print(name, f"fit {time.time() - start:.0f} s", [str(w.message) for w in caught])
    for name, fit in fits.items():
        start = time.time()
        print(name, "\n", fit.loo().to_string(), f"\n  loo {time.time() - start:.1f} s")
    try:
        cf.compare(fits)
    except cf.errors.SCMError as error:
        print("refused:", error)
    start = time.time()
    table = cf.compare({"level 2": fits["level 2"], "level 3 + ZFYA": fits["level 3 + ZFYA"]})
    print(table.round(2).to_string(), f"\ncompare {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
