"""Reproduce the law school study of Kusner et al. (2017), Table 1 and the counterfactual figure.

    python experiments/law_school.py --data-dir ../shared/data --out results/law_school
    python experiments/law_school.py --data-dir ../shared/data --quick   # smoke test

Same as ``counterfair law-school ...``; see ``counterfair.experiments.law_school``.
"""

from __future__ import annotations

import sys

from counterfair.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["law-school", *sys.argv[1:]]))
