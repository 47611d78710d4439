"""The truth benchmark (``benchmarks/truth.py``, issue 33 item 5) at a small size.

Scenario 2 of the benchmark: income is an inverted U in a continuous protected
attribute (age), and age' = 90 - age. Under the TRUE SCM (same K and noises, income
and Y recomputed), the fair learners built on the linear declaration move with age;
built on the flexible one (``terms=[cf.Smooth("age")]``) they must move much less.
counterfair's own audit reports no change for either (it takes the fitted SCM as the
world), which is why the benchmark measures against the truth.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import warnings
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from _seeds import shifted

import counterfair as cf

# modelling, not a back end: one back end is enough (the programs are the same for both)

REPO = Path(__file__).resolve().parents[1]


def _truth() -> ModuleType:
    path = REPO / "benchmarks" / "truth.py"
    spec = importlib.util.spec_from_file_location("truth_benchmark", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.stan
def test_flexible_smooth_moves_much_less_than_linear_under_the_truth(
    stan_backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    truth = _truth()
    index = [s.name for s in truth.SCENARIOS].index("smooth")
    args = argparse.Namespace(
        seed=shifted(0), rows=1200, test_rows=150, warmup=150, draws=150, n_samples=20, cache=None
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cf.errors.ConvergenceWarning)  # short chains
        table = truth.run_scenario(truth.SCENARIOS[index], args, index)
    out = capsys.readouterr().out
    assert "scenario 2: smooth" in out, out
    print(out)
    moved = table.set_index(["learner", "declaration"])
    for learner in ("Fair K", "Fair Add"):
        linear = moved.loc[(learner, "linear"), "truth"]
        flexible = moved.loc[(learner, "flexible"), "truth"]
        assert flexible < 0.5 * linear, (learner, flexible, linear)
        assert flexible < 0.05, (learner, flexible)
        # the audit takes each fitted SCM as the world: a fair learner never moves there
        assert moved.loc[(learner, "linear"), "audit"] == pytest.approx(0.0, abs=1e-9)
        assert moved.loc[(learner, "flexible"), "audit"] == pytest.approx(0.0, abs=1e-9)
    # the oracle's floor is 0 here: every loading is the same for everybody
    assert moved.loc[("Bayes K (true SCM)", "truth"), "truth"] < 1e-9
    assert np.isfinite(table["rmse"]).all()
