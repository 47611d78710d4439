"""SCMs and simulated data of the checks of issue 33 (tests/test_ppc_conditional.py and
tests/test_loo_pit.py), and their NUTS fits, each made once per test session.

The truth departs from the linear declaration in two ways when ``bent``: (a) the loading
of X3 (one of K's three indicators) is 0.3 in group a and 1.2 in group b, (b) Y is an
inverted U in the continuous protected attribute age. Otherwise the truth has the
declaration's own (linear) form.
"""

from __future__ import annotations

import functools
import warnings

import networkx as nx
import numpy as np
import pandas as pd
from _models import quietly
from _seeds import shifted

import counterfair as cf
from counterfair.stan.backend import resolve_backend_name

N_ROWS = 1500
LOADINGS = {"X1": 0.8, "X2": 0.7}
LOADING_X3 = {"a": 0.3, "b": 1.2}
"""The departure (a): X3's loading on K by group (the linear declaration has one)."""
LINEAR_LOADING_X3 = 0.8


def declared_scm() -> cf.SCM:
    """The linear declaration: K -> X1, X2, X3 (and A -> each); age, A -> Y."""
    g = nx.DiGraph()
    g.add_node("A", spec=cf.Protected(levels=("a", "b")))
    g.add_node("age", spec=cf.Protected(kind="continuous"))
    g.add_node("K", spec=cf.Latent())
    for node in ("X1", "X2", "X3", "Y"):
        g.add_node(node, spec=cf.Normal())
    g.add_edges_from([("K", "X1"), ("K", "X2"), ("K", "X3")])
    g.add_edges_from([("A", "X1"), ("A", "X2"), ("A", "X3")])
    g.add_edges_from([("age", "Y"), ("A", "Y")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cf.errors.IdentificationWarning)
        return cf.SCM(g)


def simulate(*, bent: bool, seed: int) -> pd.DataFrame:
    """Rows from the truth: bent (both departures) or linear (the declaration's own form)."""
    rng = np.random.default_rng(seed)
    group = np.where(rng.random(N_ROWS) < 0.5, "a", "b")
    b = (group == "b").astype(float)
    age = rng.uniform(20.0, 70.0, N_ROWS)
    k = rng.standard_normal(N_ROWS)
    noise = 0.5 * rng.standard_normal((4, N_ROWS))
    loading = np.where(b == 1, LOADING_X3["b"], LOADING_X3["a"]) if bent else LINEAR_LOADING_X3
    z = (age - 45.0) / 12.0
    y = 0.5 - 1.2 * z**2 if bent else 0.5 + 0.6 * z
    return pd.DataFrame(
        {
            "A": group,
            "age": age,
            "X1": LOADINGS["X1"] * k + 0.3 * b + noise[0],
            "X2": LOADINGS["X2"] * k - 0.2 * b + noise[1],
            "X3": loading * k + 0.1 * b + noise[2],
            "Y": y + 0.2 * b + noise[3],
        }
    )


def declared_fit(bent: bool) -> cf.Fit:
    """The linear declaration fitted by NUTS (2 chains of 400 + 400) to bent or linear rows.

    Made once per Stan back end (the one ``"auto"`` resolves to) and kind of rows.
    """
    return _declared_fit(bent, resolve_backend_name("auto"))


@functools.cache
def _declared_fit(bent: bool, backend: str) -> cf.Fit:
    data = simulate(bent=bent, seed=shifted(21 if bent else 22))
    return quietly(  # type: ignore[no-any-return]
        declared_scm().fit, data, chains=2, warmup=400, draws=400, seed=shifted(6), progress=False
    )
