"""Linear predictors written out term by term (tools/mutation.py, module evaluate).

An SCM with every kind of parent a linear predictor reads: a categorical protected
attribute A (three levels), a continuous one (age), an ordinal observed parent O
(reference-coded levels), a latent U whose loading differs by A (``loading_by``), a
node without parents, a categorical child (its own coefficients) and a Bernoulli one.
Two parameter sets and four rows, every ``eta`` computed by hand.
"""

from __future__ import annotations

import re

import networkx as nx
import numpy as np
import pytest
from _seeds import shifted
from scipy import special

import counterfair as cf
from counterfair.model import evaluate as ev
from counterfair.model.params import ParamDraws

pytestmark = pytest.mark.filterwarnings("ignore::counterfair.errors.IdentificationWarning")

def exactly(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern for the whole message and nothing else."""
    return "^" + re.escape(message) + "$"



def scm() -> cf.SCM:
    g = nx.DiGraph()
    specs = {
        "A": cf.Protected(levels=("a", "b", "c")), "age": cf.Protected(kind="continuous"),
        "U": cf.Latent(), "O": cf.Ordinal(levels=("lo", "mid", "hi")),
        "X": cf.Normal(loading_by="A"), "R": cf.Normal(), "W": cf.Normal(),
        "V": cf.Normal(), "K": cf.Categorical(levels=("p", "q", "r")), "B": cf.Bernoulli(),
    }
    for name, spec in specs.items():
        g.add_node(name, spec=spec)
    g.add_edges_from([("A", "O"), ("A", "X"), ("age", "X"), ("O", "X"), ("U", "X"),
                      ("A", "K"), ("U", "O"), ("R", "W"), ("U", "V"), ("A", "B")])
    return cf.SCM(g)


PARAMS = ParamDraws({
    "alpha_X": np.array([1.0, -2.0]),
    "beta_X_A": np.array([[0.5, 3.0], [-1.0, 7.0]]),
    "beta_X_age": np.array([0.1, 0.01]),
    "beta_X_O": np.array([[10.0, 20.0], [-10.0, -30.0]]),
    "lambda_X_U": np.array([2.0, 4.0]),
    "dlambda_X_U": np.array([[0.5, -1.5], [1.0, 2.0]]),
    "beta_O_A": np.array([[1.0, 2.0], [3.0, 4.0]]),
    "lambda_O_U": np.array([0.5, 0.25]),
    "alpha_R": np.array([5.0, 6.0]),
    "alpha_W": np.array([0.0, 1.0]), "beta_W_R": np.array([2.0, 3.0]),
    "alpha_V": np.array([0.0, 0.5]), "lambda_V_U": np.array([1.0, -1.0]),
    "alpha_K": np.array([[0.1, 0.2], [0.3, 0.4]]),
    "beta_K_A": np.array([[[1.0, 2.0], [3.0, 4.0]], [[-1.0, -2.0], [-3.0, -4.0]]]),
    "alpha_B": np.array([0.0, 1.0]), "beta_B_A": np.array([[1.0, 2.0], [-1.0, -2.0]]),
    "sigma_X": np.array([0.5, 2.0]),
})
A = np.array([0, 1, 2, 1])
AGE = np.array([20.0, 30.0, 40.0, 50.0])
ORD = np.array([2, 0, 1, 2])
U = np.array([[0.5, -1.0, 2.0, 0.0], [1.0, 1.0, -0.5, 3.0]])


def test_eta_of_a_node_with_every_kind_of_parent() -> None:
    eq = scm().equations["X"]
    p = PARAMS
    eta = ev.linear_predictor(eq, p, {"O": ORD, "U": U}, {"A": A, "age": AGE})
    assert eta.shape == (2, 4)
    for s in range(2):
        for n in range(4):
            a_effect = [0.0, *p["beta_X_A"][s]][A[n]]
            o_effect = [0.0, *p["beta_X_O"][s]][ORD[n]]
            loading = p["lambda_X_U"][s] + [0.0, *p["dlambda_X_U"][s]][A[n]]
            want = (p["alpha_X"][s] + a_effect + p["beta_X_age"][s] * AGE[n] + o_effect
                    + loading * U[s, n])
            assert eta[s, n] == pytest.approx(want, rel=1e-12), (s, n)


def test_one_hot_coding_reads_every_level_of_the_protected_parent() -> None:
    eq = scm().equations["O"]
    one_hot = ParamDraws({"beta_O_A": np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
                          "lambda_O_U": np.array([0.0, 0.0])})
    eta = ev.linear_predictor(eq, one_hot, {"U": U}, {"A": A}, reference_coding=False)
    assert eta.tolist() == [[1.0, 2.0, 3.0, 2.0], [4.0, 5.0, 6.0, 5.0]]
    eta = ev.linear_predictor(eq, PARAMS, {"U": U}, {"A": A})
    want = np.array([[0.0, 1.0, 2.0, 1.0], [0.0, 3.0, 4.0, 3.0]]) + PARAMS["lambda_O_U"][
        :, None] * U
    np.testing.assert_allclose(eta, want, rtol=1e-12)


def test_loadings_by_group_and_without() -> None:
    model = scm()
    eq = model.equations["X"]
    loading = ev.latent_loading(eq, eq.latent[0], PARAMS, {}, {"A": A})
    assert loading.tolist() == [[2.0, 2.5, 0.5, 2.5], [4.0, 5.0, 6.0, 5.0]]
    eq_v = model.equations["V"]
    shared = ev.latent_loading(eq_v, eq_v.latent[0], PARAMS, {}, {})
    assert shared.shape == (2, 1) and shared.tolist() == [[1.0], [-1.0]]


def test_rows_are_counted_from_the_first_kind_of_parent_present() -> None:
    model = scm()
    # codes of shape (N,), values (S, N): four rows either way
    assert ev._n_rows(model.equations["X"], {"O": ORD, "U": U}, {"A": A, "age": AGE}) == 4
    assert ev._n_rows(model.equations["W"], {"R": np.zeros(7)}, {}) == 7
    assert ev._n_rows(model.equations["V"], {"U": np.zeros((2, 3))}, {}) == 3
    r = model.equations["R"]
    with pytest.raises(ValueError, match=exactly(
            "node 'R' has no parents: pass its number of rows explicitly")):
        ev.linear_predictor(r, PARAMS, {}, {})
    assert ev.linear_predictor(r, PARAMS, {}, {}, n_rows=3).tolist() == [[5.0] * 3, [6.0] * 3]
    eta_w = ev.linear_predictor(model.equations["W"], PARAMS, {"R": np.array([1.0, -1.0])}, {})
    assert eta_w.tolist() == [[2.0, -2.0], [4.0, -2.0]]
    eta_v = ev.linear_predictor(model.equations["V"], PARAMS, {"U": U}, {})
    np.testing.assert_allclose(eta_v, np.array([[0.0], [0.5]]) + np.array([[1.0], [-1.0]]) * U)
    # n_rows given wins over the parents
    assert ev.linear_predictor(model.equations["V"], PARAMS, {"U": 0.0 * U[:, :1]}, {},
                               n_rows=1).shape == (2, 1)


def test_a_categorical_child_lays_out_its_own_coefficients() -> None:
    eq = scm().equations["K"]
    eta = ev.linear_predictor(eq, PARAMS, {}, {"A": A})
    assert eta.shape == (2, 4, 2)
    for s in range(2):
        for n in range(4):
            effect = np.zeros(2) if A[n] == 0 else PARAMS["beta_K_A"][s, A[n] - 1]
            np.testing.assert_allclose(eta[s, n], PARAMS["alpha_K"][s] + effect)


def test_mean_and_draw_go_to_the_family() -> None:
    model = scm()
    eq_b = model.equations["B"]
    eta = ev.linear_predictor(eq_b, PARAMS, {}, {"A": A})
    assert eta.tolist() == [[0.0, 1.0, 2.0, 1.0], [1.0, 0.0, -1.0, 0.0]]
    np.testing.assert_allclose(ev.mean_from_eta(eq_b, PARAMS, eta), special.expit(eta))
    eq_x = model.equations["X"]
    eta_x = ev.linear_predictor(eq_x, PARAMS, {"O": ORD, "U": U}, {"A": A, "age": AGE})
    draw = ev.draw_node(eq_x, PARAMS, eta_x, np.random.default_rng(shifted(3)))
    z = np.random.default_rng(shifted(3)).standard_normal((2, 4))
    np.testing.assert_allclose(draw, eta_x + PARAMS["sigma_X"][:, None] * z, rtol=1e-12)
    assert ev.sigma_of(eq_x, PARAMS).tolist() == [[0.5], [2.0]]
