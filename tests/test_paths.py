"""Path-specific counterfactuals (counterfair.counterfactual.paths) against closed forms.

The mediation SCM (tests/_models.py) is linear-Gaussian: A -> M -> Y, A -> L -> Y,
A -> Y, M -> L, latent U -> M, L, Y. With the noise shared across worlds, the
path-specific change of a node under do(A = 1) for a row with A = 0 is, for every
posterior draw, the sum over the unfair paths of the products of their coefficients,
exactly. The tests compare each draw with its own coefficients (1e-9), the posterior
mean with the closed form at the posterior-mean coefficients (4 MCSE), and check the
reductions (all paths = total counterfactual, no path = factual) and the errors.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _models import aux_data, aux_fit, mediation_data, mediation_fit
from _seeds import shifted

import counterfair as cf
from counterfair import errors
from counterfair.inference.mcmc_stats import bulk_ess

pytestmark = pytest.mark.stan

N_ROWS = 25
N_SAMPLES = 40
EXACT = 1e-9


@pytest.fixture(scope="module")
def fit(stan_backend: str) -> cf.Fit:
    return mediation_fit().fit


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    data = mediation_data().drop(columns="U")
    return data[data["A"].astype(str) == "0"].iloc[:N_ROWS]


@pytest.fixture(scope="module")
def abduction(fit: cf.Fit, rows: pd.DataFrame) -> cf.Abduction:
    return fit.abduct(rows, n_samples=N_SAMPLES, seed=shifted(5))


def _coefficients(params: object) -> dict[str, np.ndarray]:
    names = {
        "bMA": "beta_M_A",
        "bLA": "beta_L_A",
        "bYA": "beta_Y_A",
        "bLM": "beta_L_M",
        "bYM": "beta_Y_M",
        "bYL": "beta_Y_L",
    }
    return {k: np.asarray(params[v], dtype=float).reshape(-1) for k, v in names.items()}  # type: ignore[index]


# change of (M, L, Y) under do(A = 1) from A = 0, per unfair path set, as functions of the draws
CLOSED_FORMS = {
    "A->M": (
        [("A", "M")],
        lambda c: (c["bMA"], c["bMA"] * c["bLM"], c["bMA"] * (c["bYM"] + c["bLM"] * c["bYL"])),
    ),
    "A->M->Y": ([("A", "M", "Y")], lambda c: (0 * c["bMA"], 0 * c["bMA"], c["bMA"] * c["bYM"])),
    "A->M->L": (
        [("A", "M", "L")],
        lambda c: (0 * c["bMA"], c["bMA"] * c["bLM"], c["bMA"] * c["bLM"] * c["bYL"]),
    ),
    "A->L": ([("A", "L")], lambda c: (0 * c["bLA"], c["bLA"], c["bLA"] * c["bYL"])),
    "A->Y": ([("A", "Y")], lambda c: (0 * c["bYA"], 0 * c["bYA"], c["bYA"])),
    "A->M, A->L": (
        [("A", "M"), ("A", "L")],
        lambda c: (
            c["bMA"],
            c["bMA"] * c["bLM"] + c["bLA"],
            c["bMA"] * (c["bYM"] + c["bLM"] * c["bYL"]) + c["bLA"] * c["bYL"],
        ),
    ),
    "A->M->Y, A->Y": (
        [("A", "M", "Y"), ("A", "Y")],
        lambda c: (0 * c["bMA"], 0 * c["bMA"], c["bMA"] * c["bYM"] + c["bYA"]),
    ),
}


def _changes(frame: pd.DataFrame, node: str, n_rows: int) -> np.ndarray:
    """Counterfactual minus factual value of ``node``, shape (S, N)."""
    factual = frame[frame["world"] == "factual"][node].to_numpy(dtype=float)
    counter = frame[frame["world"] == "counterfactual"][node].to_numpy(dtype=float)
    return (counter - factual).reshape(-1, n_rows)


@pytest.mark.parametrize("name", list(CLOSED_FORMS))
def test_each_draw_equals_its_closed_form(fit: cf.Fit, abduction: cf.Abduction, name: str) -> None:
    paths, closed = CLOSED_FORMS[name]
    frame = fit.counterfactual(None, {"A": "1"}, abduction=abduction, unfair_paths=paths)
    expected = closed(_coefficients(abduction.params))
    for node, want in zip(("M", "L", "Y"), expected, strict=True):
        got = _changes(frame, node, N_ROWS)
        np.testing.assert_allclose(
            got, np.broadcast_to(want[:, None], got.shape), atol=EXACT, rtol=0
        )
    assert frame.attrs["unfair_paths"] == [list(p) for p in paths]
    assert (frame[frame["world"] == "counterfactual"]["A"].astype(str) == "1").all()
    # U, the latent, and the noise columns are shared by the two worlds
    assert np.array_equal(_changes(frame, "U", N_ROWS), np.zeros((N_SAMPLES, N_ROWS)))


@pytest.mark.parametrize("name", ["A->M", "A->M->Y", "A->L"])
def test_posterior_mean_within_4_mcse_of_closed_form(fit: cf.Fit, name: str) -> None:
    """Over every posterior draw (training rows, chains in order): the mean path-specific
    change of E[Y] against the closed form at the posterior-mean coefficients."""
    paths, closed = CLOSED_FORMS[name]
    full = fit.abduct(None)
    frame = fit.counterfactual(None, {"A": "1"}, abduction=full, unfair_paths=paths)
    n = len(full.data)
    # rows with A = 1 already: do(A = 1) changes nothing; average over the A = 0 rows
    zero = full.codes["A"] == 0
    per_draw = _changes(frame, "Y", n)[:, zero].mean(axis=1)
    coefficients = _coefficients(full.params)
    np.testing.assert_allclose(per_draw, closed(coefficients)[2], atol=EXACT, rtol=0)
    chains = fit.idata.posterior.sizes["chain"]
    ess = bulk_ess(per_draw.reshape(chains, -1, 1))[0]
    mcse = per_draw.std(ddof=1) / np.sqrt(ess)
    at_mean = closed({k: np.array([v.mean()]) for k, v in coefficients.items()})[2][0]
    assert abs(per_draw.mean() - at_mean) < 4 * mcse, (per_draw.mean(), at_mean, mcse)


def test_all_paths_unfair_is_the_total_counterfactual(fit: cf.Fit, abduction: cf.Abduction) -> None:
    total = fit.counterfactual(None, {"A": "1"}, abduction=abduction, seed=shifted(3))
    every_edge = [("A", "M"), ("A", "L"), ("A", "Y")]
    specific = fit.counterfactual(
        None, {"A": "1"}, abduction=abduction, seed=shifted(3), unfair_paths=every_edge
    )
    pd.testing.assert_frame_equal(specific, total, check_exact=True)
    # every path into L and Y, but not the path A -> M that ends at M: M stays factual
    longer = [("A", "M", "L"), ("A", "M", "Y"), ("A", "L"), ("A", "Y")]
    specific = fit.counterfactual(
        None, {"A": "1"}, abduction=abduction, seed=shifted(3), unfair_paths=longer
    )
    for node in ("L", "Y"):
        assert np.array_equal(specific[node].to_numpy(), total[node].to_numpy())
    assert np.array_equal(_changes(specific, "M", N_ROWS), np.zeros((N_SAMPLES, N_ROWS)))


def test_no_unfair_path_is_the_factual_world(fit: cf.Fit, abduction: cf.Abduction) -> None:
    frame = fit.counterfactual(None, {"A": "1"}, abduction=abduction, unfair_paths=[])
    for node in ("U", "M", "L", "Y"):
        assert np.array_equal(_changes(frame, node, N_ROWS), np.zeros((N_SAMPLES, N_ROWS)))


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        (
            [("A", "U")],
            r"\('A', 'U'\) is not a directed path of the graph: there is no edge A -> U",
        ),
        ([("A", "M"), ("A", "Y", "M")], r"\('A', 'Y', 'M'\) is not a directed path.*Y -> M"),
        ([("M", "Y")], r"\('M', 'Y'\) does not start at the intervened attribute 'A'"),
        ([("A", "Q")], r"\('A', 'Q'\) names 'Q', which is not a node"),
        ([("A",)], r"\('A',\) has fewer than two nodes"),
    ],
)
def test_bad_unfair_paths_raise_naming_the_path(
    fit: cf.Fit, abduction: cf.Abduction, paths: list[tuple[str, ...]], message: str
) -> None:
    with pytest.raises(errors.SCMError, match=message):
        fit.counterfactual(None, {"A": "1"}, abduction=abduction, unfair_paths=paths)


def test_paths_need_do_on_one_protected_attribute(fit: cf.Fit, abduction: cf.Abduction) -> None:
    with pytest.raises(errors.SCMError, match=r"exactly one protected attribute.*\['A', 'M'\]"):
        fit.counterfactual(
            None, {"A": "1", "M": 0.0}, abduction=abduction, unfair_paths=[("A", "M")]
        )
    with pytest.raises(errors.SCMError, match=r"exactly one protected attribute.*\['M'\]"):
        fit.counterfactual(None, {"M": 0.0}, abduction=abduction, unfair_paths=[("A", "M")])
    with pytest.raises(errors.SCMError, match="coupling='monotone'"):
        fit.counterfactual(
            None, {"A": "1"}, abduction=abduction, unfair_paths=[("A", "M")], coupling="redraw"
        )


def test_discrete_descendants_reduce_to_the_total_and_factual_worlds(stan_backend: str) -> None:
    """Bernoulli P and Poisson C children of race (monotone coupling): listing every edge out
    of race reproduces the total counterfactual draw for draw (same seed, same abducted
    noise); no path gives the factual world."""
    fit = aux_fit().fit
    rows = aux_data().drop(columns="K").iloc[:40]
    abduction = fit.abduct(rows, n_samples=20, seed=shifted(6))
    do = {"race": list(np.where(rows["race"].astype(str) == "a", "b", "a"))}
    total = fit.counterfactual(None, do, abduction=abduction, seed=shifted(8))
    every_edge = [("race", child) for child in ("X", "P", "C")]
    specific = fit.counterfactual(None, do, abduction=abduction, seed=shifted(8),
                                  unfair_paths=every_edge)
    pd.testing.assert_frame_equal(specific, total, check_exact=True)
    assert (total["C"].to_numpy() != specific["C"].to_numpy()).sum() == 0
    moved = total[total["world"] == "counterfactual"]["C"].to_numpy()
    assert (moved != total[total["world"] == "factual"]["C"].to_numpy()).any()
    none = fit.counterfactual(None, do, abduction=abduction, seed=shifted(8), unfair_paths=[])
    for node in ("X", "P", "C", "Z"):
        assert np.array_equal(_changes(none, node, 40), np.zeros((20, 40)))
    # only race -> P unfair: X and C keep their factual values, P may move
    only_p = fit.counterfactual(None, do, abduction=abduction, seed=shifted(8),
                                unfair_paths=[("race", "P")])
    for node in ("X", "C"):
        assert np.array_equal(_changes(only_p, node, 40), np.zeros((20, 40)))
    assert np.array_equal(
        only_p[only_p["world"] == "counterfactual"]["P"].to_numpy(),
        total[total["world"] == "counterfactual"]["P"].to_numpy(),
    )
