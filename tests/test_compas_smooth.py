"""The COMPAS study with age as a smooth term (experiments.compas_smooth).

No Stan here: the smooth declaration bends age on its two children only, and the
generated program passes their spline columns as data.
"""

from __future__ import annotations

import counterfair as cf
from experiments.compas import compas_scm
from experiments.compas_smooth import SMOOTH_CHILDREN, smooth_scm


def test_age_bends_on_its_children_only() -> None:
    linear, smooth = compas_scm(), smooth_scm()
    assert set(linear.children("age_z")) == set(SMOOTH_CHILDREN)
    for node in smooth.observed:
        terms = smooth.specs[node].terms
        if node in SMOOTH_CHILDREN:
            assert len(terms) == 1 and isinstance(terms[0], cf.Smooth)
            assert terms[0].parent == "age_z"
        else:
            assert terms == ()
    code = smooth.stan_code()
    for node in SMOOTH_CHILDREN:
        assert f"F_{node}" in code
