"""The anchored fit program has exactly the centred program's posterior.

The fit program samples ``z = (U - m) * sqrt(P)`` for a latent ``U`` anchored by
its Normal children (``m``, ``P``: mean and precision of ``U`` given them) and
writes the other children's ``lambda * U`` as extra design columns. Both are
pure algebra, so the log density of the anchored program at ``(z, theta)``
must equal that of the centred program (``U`` sampled directly) at
``(U(z), theta)`` plus the log Jacobian ``-N/2 log P``, up to one constant (the
terms Stan's ``~`` drops). Checked here at random points with each back end's log
density, on an SCM with two anchors (the second with another child of U
among its parents), a Poisson and a Bernoulli child, and a non-standard prior
on U.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _models import anchoring_scm

from counterfair.encoding import Encoding
from counterfair.params import ParamDraws
from counterfair.specs import Protected
from counterfair.stan.anchored import conditional_moments
from counterfair.stan.anchoring import anchors_of
from counterfair.stan.backend import get_backend
from counterfair.stan.codegen import fit_program
from counterfair.stan.data import fit_data

stan = pytest.importorskip("stan")

TRUTH: dict[str, Any] = {
    "alpha_X1": 0.5,
    "beta_X1_A": [0.8],
    "lambda_X1_U": 0.9,
    "sigma_X1": 0.6,
    "alpha_B": -0.2,
    "lambda_B_U": 1.1,
    "alpha_X2": 0.1,
    "beta_X2_A": [-0.4],
    "beta_X2_X1": 0.3,
    "beta_X2_B": 0.5,
    "lambda_X2_U": 0.7,
    "alpha_P": 1.5,
    "beta_P_A": [0.2],
    "lambda_P_U": 0.3,
}


def test_anchors_are_the_normal_children_with_one_latent() -> None:
    anchors = anchors_of(anchoring_scm())
    assert [eq.node for eq in anchors["U"]] == ["X1", "X2"]


@pytest.mark.stan
def test_anchored_and_centred_programs_have_the_same_posterior() -> None:
    scm = anchoring_scm()
    rows = scm.sample(40, params=TRUTH, seed=5, levels={"A": ["a", "b"]})
    protected = {n: s for n, s in scm.specs.items() if isinstance(s, Protected)}
    data = fit_data(scm, rows, Encoding.from_data(protected, rows))
    backend = get_backend("auto")
    anchored, centred = fit_program(scm), fit_program(scm, anchor_latents=False)

    rng = np.random.default_rng(0)
    n = len(rows)
    gaps, levels = [], []
    for _ in range(5):
        theta = {
            name: np.asarray(value, dtype=float) * np.exp(0.2 * rng.standard_normal())
            for name, value in TRUTH.items()
        }
        theta["sigma2_X1"] = theta.pop("sigma_X1") ** 2
        arrays = {k: v[None, :] if v.ndim else v[None] for k, v in theta.items()}
        arrays["sigma_X1"] = np.sqrt(arrays.pop("sigma2_X1"))
        params = ParamDraws(arrays)
        (mean, precision) = conditional_moments(scm, params, data)["U"]
        u = 0.5 + 1.5 * rng.standard_normal(n)
        z = (u - mean[0]) * np.sqrt(precision[0, 0])
        values = {k: v.tolist() for k, v in theta.items()}
        log_anchored = backend.log_density(anchored, data, {**values, "z_U": z.tolist()})
        log_centred = backend.log_density(centred, data, {**values, "U": u.tolist()})
        jacobian = -0.5 * n * np.log(precision[0, 0])
        gaps.append(log_anchored - (log_centred + jacobian))
        levels.append(log_centred)
    # one constant (dropped normalising terms) at every point; the densities themselves
    # move by tens of units between points
    assert np.ptp(levels) > 10.0, levels
    assert np.ptp(gaps) < 1e-6, gaps
