"""The COMPAS study: a counterfactually fair classifier of two-year recidivism.

    python experiments/compas.py --data-dir ../shared/data --out results/compas
    python experiments/compas.py --data-dir ../shared/data --quick   # smoke test

Same as ``counterfair compas ...``; see ``counterfair.experiments.compas``.
"""

from __future__ import annotations

import sys

from counterfair.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["compas", *sys.argv[1:]]))
