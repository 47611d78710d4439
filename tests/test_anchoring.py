"""The anchored fit program has exactly the centred program's posterior.

The fit program samples ``z = (U - m) * sqrt(P)`` for a latent ``U`` anchored by
its Normal children (``m``, ``P``: mean and precision of ``U`` given them) and
writes the other children's ``lambda * U`` as extra design columns. Both are
pure algebra, so the log density of the anchored program at ``(z, theta)``
must equal that of the centred program (``U`` sampled directly) at
``(U(z), theta)`` plus the log Jacobian ``-N/2 log P``, up to one constant (the
terms Stan's ``~`` drops). Checked here at random points with each back end's log
density, on the auxiliary test SCM: two anchors (the second with another child of the
latent among its parents), a Poisson and a Bernoulli child, and a non-standard prior
on the latent.
"""

from __future__ import annotations

import numpy as np
import pytest
from _models import AUX_RACES, AUX_TRUTH, aux_scm
from _seeds import shifted

from counterfair.model.encoding import Encoding
from counterfair.model.params import ParamDraws
from counterfair.model.specs import Protected
from counterfair.stan.anchored_recovery import conditional_moments
from counterfair.stan.anchoring import anchors_of
from counterfair.stan.backend import get_backend
from counterfair.stan.codegen import fit_program
from counterfair.stan.data import fit_data

stan = pytest.importorskip("stan")


def test_anchors_are_the_normal_children_with_one_latent() -> None:
    anchors = anchors_of(aux_scm())
    assert [eq.node for eq in anchors["K"]] == ["Z", "X"]


@pytest.mark.stan
def test_anchored_and_centred_programs_have_the_same_posterior() -> None:
    scm = aux_scm()
    rows = scm.sample(40, params=AUX_TRUTH, seed=shifted(5), levels={"race": list(AUX_RACES)})
    protected = {n: s for n, s in scm.specs.items() if isinstance(s, Protected)}
    data = fit_data(scm, rows, Encoding.from_data(protected, rows))
    backend = get_backend("auto")
    anchored, centred = fit_program(scm), fit_program(scm, anchor_latents=False)

    rng = np.random.default_rng(shifted(0))
    n = len(rows)
    gaps, levels = [], []
    for _ in range(5):
        theta = {
            name: np.asarray(value, dtype=float) * np.exp(0.2 * rng.standard_normal())
            for name, value in AUX_TRUTH.items()
        }
        params = ParamDraws({k: v[None, :] if v.ndim else v[None] for k, v in theta.items()})
        (mean, precision) = conditional_moments(scm, params, data)["K"]
        k = 0.5 + 1.5 * rng.standard_normal(n)
        z = (k - mean[0]) * np.sqrt(precision[0, 0])
        # the programs' parameters: residual variances, not sds
        values = {
            (f"sigma2_{name[6:]}" if name.startswith("sigma_") else name): (
                v**2 if name.startswith("sigma_") else v
            ).tolist()
            for name, v in theta.items()
        }
        log_anchored = backend.log_density(anchored, data, {**values, "z_K": z.tolist()})
        log_centred = backend.log_density(centred, data, {**values, "K": k.tolist()})
        jacobian = -0.5 * n * np.log(precision[0, 0])
        gaps.append(log_anchored - (log_centred + jacobian))
        levels.append(log_centred)
    # one constant (dropped normalising terms) at every point; the densities themselves
    # move by tens of units between points
    assert np.ptp(levels) > 10.0, levels
    assert np.ptp(gaps) < 1e-6, gaps
