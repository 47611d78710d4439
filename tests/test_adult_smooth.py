"""The Adult study with smooth terms (experiments.adult_smooth).

No Stan here: the smooth declaration carries its terms on the right nodes only, and
the study's categorical log density (written when counterfair's LOO raised on a
categorical node) is the log softmax at the observed level, as the package's is now.
"""

from __future__ import annotations

import numpy as np
from _seeds import shifted
from scipy.special import log_softmax

import counterfair as cf
from counterfair.inference import loo
from experiments.adult_pscf import adult_pscf_scm
from experiments.adult_smooth import (
    SMOOTH_TERMS,
    node_log_density,
    smooth_scm,
)


def test_smooth_declaration_bends_only_the_named_nodes() -> None:
    linear, smooth = adult_pscf_scm(), smooth_scm(k=8)
    assert linear.observed == smooth.observed
    for node in smooth.observed:
        terms = smooth.specs[node].terms
        if node in SMOOTH_TERMS:
            assert [t.parent for t in terms] == list(SMOOTH_TERMS[node])
            assert all(isinstance(t, cf.Smooth) and t.k == 8 for t in terms)
            assert set(smooth.parameter_names()) > set(linear.parameter_names())
        else:
            assert terms == ()


def test_categorical_density_is_log_softmax() -> None:
    scm = adult_pscf_scm()
    eq = scm.equations["marital"]
    rng = np.random.default_rng(shifted(0))
    eta = rng.normal(size=(4, 6, 2))  # (draws, rows, non-reference levels)
    y = np.array([0, 1, 2, 2, 1, 0])
    got = node_log_density(eq, None, eta, y)
    full = log_softmax(np.concatenate([np.zeros((4, 6, 1)), eta], axis=-1), axis=-1)
    np.testing.assert_allclose(got, full[:, np.arange(6), y])
    assert np.allclose(np.exp(full).sum(-1), 1.0)
    np.testing.assert_allclose(got, loo.node_log_density(eq, None, eta, y))  # the package's
