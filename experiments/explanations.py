"""Fairness measures versus SHAP-based measures on Adult and COMPAS (Cesaro 2020).

    python experiments/explanations.py --data-dir ../shared/data --out results/explanations
    python experiments/explanations.py --data-dir ../shared/data --out /tmp/x --quick

See ``counterfair.experiments.explanations``.
"""

from __future__ import annotations

import sys

from counterfair.experiments.explanations import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
