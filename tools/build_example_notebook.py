"""Write ``examples/law_school_in_brief.ipynb`` from the cells below and execute it in place.

Run from the repository root, with the law school data folder in ``COUNTERFAIR_DATA``::

    COUNTERFAIR_DATA=../shared/data python tools/build_example_notebook.py

The executed notebook, outputs included, is kept in the repository;
``tests/test_notebook.py`` executes a copy of it with every Stan back end found.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "examples" / "law_school_in_brief.ipynb"

CELLS: list[tuple[str, str]] = [
    (
        "markdown",
        "# The law school study in brief\n\n"
        "Kusner et al. (2017), *Counterfactual Fairness*, section 5, on a subsample so "
        "that it runs in about a minute: declare the level 2 SCM (knowledge `K` drives "
        "UGPA, LSAT and ZFYA), fit it by NUTS, train the Fair K predictor "
        "(Algorithm 1) beside the Unaware baseline, and check both under `do(race)`.\n\n"
        "The data folder is read from `COUNTERFAIR_DATA`. counterfair runs inside "
        "Jupyter's event loop with either Stan back end; `backend='auto'` uses CmdStan "
        "when it is installed, else PyStan.",
    ),
    (
        "code",
        "import numpy as np\n"
        "from sklearn.linear_model import LinearRegression\n\n"
        "from counterfair import datasets\n"
        "from counterfair.counterfactual.prediction import counterfactual_predictions\n"
        "from counterfair.learn import inputs\n"
        "from counterfair.learn.baselines import unaware_predictor\n"
        "from counterfair.learn.fair import FairLearner\n"
        "from counterfair.stan.backend import resolve_backend_name\n\n"
        "law = datasets.load_law_school()\n"
        "train, test = datasets.law_school_split(law, seed=0)\n"
        "train = datasets.law_school_subsample(train, 1000, seed=0)\n"
        "test = datasets.law_school_subsample(test, 300, seed=0)\n"
        'print(f"back end: {resolve_backend_name()}; {len(train)} training rows, '
        '{len(test)} test rows")',
    ),
    ("markdown", "## Declare the SCM and look at the Stan program counterfair generates"),
    (
        "code",
        "scm = datasets.law_school_level2()\n"
        "print(sorted(scm.graph.edges))\n"
        'print("\\n".join(scm.stan_code().splitlines()[:25]))',
    ),
    ("markdown", "## Abduction: sample parameters and every student's `K` by NUTS"),
    (
        "code",
        "fit = scm.fit(train, chains=2, warmup=500, draws=500, seed=1, progress=False)\n"
        "print(fit.diagnostics.as_dict())\n"
        'fit.summary().round(3)[["mean", "sd", "r_hat", "ess_bulk"]].head(8)',
    ),
    ("markdown", "## FairLearning: Fair K against the Unaware baseline"),
    (
        "code",
        "fair_k = FairLearner(fit, target=\"ZFYA\", features=inputs.Latent(), "
        "estimator=LinearRegression(),\n"
        "                     n_samples=20, seed=0).fit(train)\n"
        "unaware = unaware_predictor(scm, \"ZFYA\").fit(train)\n\n\n"
        "def rmse(model):\n"
        "    return float(np.sqrt(np.mean((model.predict(test) - test[\"ZFYA\"]) ** 2)))\n\n\n"
        "{\"Unaware\": round(rmse(unaware), 3), \"Fair K\": round(rmse(fair_k), 3)}",
    ),
    (
        "markdown",
        "## Action and prediction: what if each student's race had been White?\n\n"
        "Mean absolute change of the predicted ZFYA when race is set to White in the "
        "fitted SCM (UGPA and LSAT follow as its descendants). Fair K reads only `K`, "
        "which keeps its abducted value in every world, so it does not move.",
    ),
    (
        "code",
        "rows = test[test[\"race\"] != \"White\"].iloc[:100]\n"
        "for name, model in {\"Unaware\": unaware, \"Fair K\": fair_k}.items():\n"
        "    moved = counterfactual_predictions(fit, rows, model, do={\"race\": \"White\"},\n"
        "                                       n_samples=20, seed=1)\n"
        "    print(f\"{name:8s} mean |change| = {moved['change'].abs().mean():.3f}\")",
    ),
]


def notebook() -> nbformat.NotebookNode:
    """The notebook, not executed."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    for kind, source in CELLS:
        make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
        nb.cells.append(make(source))
    return nb


def execute(nb: nbformat.NotebookNode, cwd: Path, timeout: int = 900) -> nbformat.NotebookNode:
    """Run every cell in a fresh kernel (raises on the first error)."""
    resources = {"metadata": {"path": str(cwd)}}
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources=resources).execute()
    return nb


def main() -> int:
    nb = execute(notebook(), NOTEBOOK.parent)
    nbformat.write(nb, NOTEBOOK)
    print(f"wrote {NOTEBOOK.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
