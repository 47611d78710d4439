"""The Adult path-specific counterfactual fairness study (Chiappa, 2019).

    python experiments/adult_pscf.py --data-dir ../shared/data --out results/adult_pscf
    python experiments/adult_pscf.py --data-dir ../shared/data --quick   # smoke test

Same as ``counterfair adult-pscf ...``; see ``counterfair.experiments.adult_pscf``.
"""

from __future__ import annotations

import sys

from counterfair.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["adult-pscf", *sys.argv[1:]]))
