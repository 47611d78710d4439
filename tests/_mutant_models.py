"""A mediator SCM with given parameters and its exact abduction, without Stan.

Shared by the mutation-killing tests of paths and worlds (tests/test_mutants_paths.py,
tests/test_mutants_world.py). The SCM::

    A -> M, A -> L, A -> Y, A -> C;  M -> Y, L -> Y, M -> Z -> Y, M -> C;
    U -> M, L, Z, Y (a standard Normal latent)

has Normal M, L, Z, Y with known sds (so every counterfactual of them has a closed
form: the factual value plus the coefficients times the changes of the inputs) and a
Poisson C (a discrete node with monotone noise). The ``Fit`` holds one parameter set
and no sampler (``backend="none"``); abduction of U is exact.
"""

from __future__ import annotations

import functools
from typing import Any

import arviz as az
import networkx as nx
import numpy as np
import pandas as pd
from _seeds import shifted

import counterfair as cf
from counterfair.inference.diagnostics import Diagnostics
from counterfair.model.encoding import Encoding
from counterfair.model.specs import Protected

TRUTH: dict[str, Any] = {
    "alpha_M": 0.2, "beta_M_A": [1.5], "lambda_M_U": 0.7,
    "alpha_L": -0.4, "beta_L_A": [-0.9], "lambda_L_U": 0.5,
    "alpha_Z": 0.1, "beta_Z_M": 0.8, "lambda_Z_U": 0.3,
    "alpha_Y": 0.3, "beta_Y_A": [0.6], "beta_Y_M": 1.1, "beta_Y_L": -0.7,
    "beta_Y_Z": 0.9, "lambda_Y_U": 0.4,
    "alpha_C": 0.5, "beta_C_A": [0.4], "beta_C_M": 0.3,
}
SIGMA = 0.5


def mediator_scm() -> cf.SCM:
    g = nx.DiGraph()
    specs = {
        "A": cf.Protected(levels=("0", "1")), "U": cf.Latent(),
        "M": cf.Normal(sigma=SIGMA), "L": cf.Normal(sigma=SIGMA),
        "Z": cf.Normal(sigma=SIGMA), "Y": cf.Normal(sigma=SIGMA), "C": cf.Poisson(),
    }
    for name, spec in specs.items():
        g.add_node(name, spec=spec)
    g.add_edges_from([
        ("A", "M"), ("A", "L"), ("A", "Y"), ("A", "C"), ("M", "Y"), ("L", "Y"), ("M", "Z"),
        ("Z", "Y"), ("M", "C"), ("U", "M"), ("U", "L"), ("U", "Z"), ("U", "Y"),
    ])
    return cf.SCM(g)


@functools.cache
def mediator_data() -> pd.DataFrame:
    return mediator_scm().sample(12, params=TRUTH, seed=shifted(41))


def mediator_fit() -> cf.Fit:
    scm, data = mediator_scm(), mediator_data()
    protected = {n: s for n, s in scm.specs.items() if isinstance(s, Protected)}
    posterior = {k: np.asarray(v, dtype=float)[None, None] for k, v in TRUTH.items()}
    nan = float("nan")
    return cf.Fit(
        scm=scm,
        idata=az.from_dict(posterior=posterior),
        encoding=Encoding.from_data(protected, data),
        data=data,
        seconds=0.0,
        backend="none",
        seed=shifted(0),
        diagnostics=Diagnostics(nan, nan, nan, nan, 0, 0, pd.DataFrame()),
        _backend_name="pystan",
    )


def mediator_abduction(n_samples: int = 6) -> Any:
    fit = mediator_fit()
    return fit, fit.abduct(mediator_data(), condition_on=["M", "L", "Z", "Y"],
                           engine="exact", n_samples=n_samples, seed=shifted(5))
