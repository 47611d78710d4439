"""LOO for every family (issue 33): a categorical node's log density and ``cf.compare``
of two admissions SCMs with a categorical department, fitted by NUTS.

The admissions SCM is sex (protected) -> Dept (categorical, three levels), sex -> admit,
Dept -> admit (Bernoulli). The data are simulated in numpy with a direct effect of sex
on admission (-1.5 on the logit scale), so the SCM without the edge sex -> admit must
rank second by more than two standard errors of the difference.
"""

from __future__ import annotations

import functools

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from _models import quietly
from _seeds import shifted
from scipy.special import softmax

import counterfair as cf
from counterfair.inference.loo import node_log_density
from counterfair.model.evaluate import linear_predictor
from counterfair.model.params import ParamDraws

# modelling, not a back end: one back end is enough (the programs are the same for both)

N_ROWS = 1000
DEPTS = ("A", "B", "C")
DIRECT = -1.5
"""True effect of sex = "F" on the logit of admission, departments held fixed."""


def admissions_scm(*, direct: bool = True) -> cf.SCM:
    """sex -> Dept (categorical), Dept -> admit (Bernoulli), and sex -> admit if ``direct``."""
    g = nx.DiGraph()
    g.add_node("sex", spec=cf.Protected(levels=("M", "F")))
    g.add_node("Dept", spec=cf.Categorical(levels=DEPTS))
    g.add_node("admit", spec=cf.Bernoulli())
    g.add_edges_from([("sex", "Dept"), ("Dept", "admit")])
    if direct:
        g.add_edge("sex", "admit")
    return cf.SCM(g)


@functools.cache
def admissions_data() -> pd.DataFrame:
    """Women apply more to the selective departments B and C; a direct effect of sex too."""
    rng = np.random.default_rng(shifted(33))
    female = rng.random(N_ROWS) < 0.5
    logits = np.where(female[:, None], [0.0, 0.8, 1.0], [0.0, -0.5, -1.0])
    probabilities = softmax(logits, axis=1)
    dept = np.array([rng.choice(3, p=p) for p in probabilities])
    eta = np.array([1.0, -0.3, -1.2])[dept] + DIRECT * female
    admit = (rng.random(N_ROWS) < 1.0 / (1.0 + np.exp(-eta))).astype(int)
    return pd.DataFrame(
        {
            "sex": np.where(female, "F", "M"),
            "Dept": np.asarray(DEPTS, dtype=object)[dept],
            "admit": admit,
        }
    )


def test_categorical_log_density_is_the_log_softmax() -> None:
    """The log density of every level sums (in probability) to one and equals the log of
    the family's own level probabilities (its mean), for random linear predictors."""
    scm = admissions_scm()
    eq = scm.equations["Dept"]
    rng = np.random.default_rng(shifted(1))
    params = ParamDraws(
        {
            "alpha_Dept": rng.normal(size=(5, 2)),
            "beta_Dept_sex": rng.normal(size=(5, 1, 2)),
        }
    )
    codes = {"sex": rng.integers(0, 2, 40)}
    eta = linear_predictor(eq, params, {}, codes, n_rows=40)
    assert eta.shape == (5, 40, 2)
    probabilities = eq.family.mean(eq, params, eta)  # (S, N, K)
    total = np.zeros((5, 40))
    for level in range(3):
        got = node_log_density(eq, params, eta, np.full(40, level))
        np.testing.assert_allclose(got, np.log(probabilities[..., level]), rtol=1e-12)
        total += np.exp(got)
    np.testing.assert_allclose(total, 1.0, rtol=1e-12)
    # the reference level's logit is 0: at eta = 0 every level has probability 1/3
    flat = node_log_density(eq, params, np.zeros((1, 3, 2)), np.array([0, 1, 2]))
    np.testing.assert_allclose(flat, np.log(1.0 / 3.0))


@functools.cache
def _admissions_fits() -> dict[str, cf.Fit]:
    data = admissions_data()
    return {
        name: quietly(
            admissions_scm(direct=direct).fit,
            data,
            chains=2,
            warmup=300,
            draws=300,
            seed=shifted(4),
            progress=False,
        )
        for name, direct in (("with sex -> admit", True), ("without sex -> admit", False))
    }


@pytest.mark.stan
def test_compare_admissions_scms_with_a_categorical_department(stan_backend: str) -> None:
    """Today's failure ("node 'Dept' has family 'categorical', which has no log density for
    LOO") is gone: both SCMs get an elpd, and the true one (with the direct effect) wins."""
    fits = _admissions_fits()
    table = cf.compare(fits)
    assert list(table.index) == ["with sex -> admit", "without sex -> admit"], table
    worse = table.loc["without sex -> admit"]
    assert worse["elpd_diff"] > 2 * worse["dse"], table
    assert (table["integration"] == "none").all()
    assert (table["n_bad_k"] == 0).all(), table
    single = fits["with sex -> admit"].loo()
    assert single.loc[0, "elpd_loo"] == pytest.approx(table.loc["with sex -> admit", "elpd_loo"])
    # the elpd is the sum of the two nodes' log probabilities: Dept's alone is about
    # N * (entropy of the department given sex), between N * log(1/3) and 0
    assert -N_ROWS * (np.log(3.0) + np.log(2.0)) < single.loc[0, "elpd_loo"] < 0
