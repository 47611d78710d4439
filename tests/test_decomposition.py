"""The causal decomposition of a gap (counterfair.audit.decompose) against known truths.

* **Linear-Gaussian standard fairness model, fitted by NUTS** (``stan``): X protected with
  levels "0", "1"; Z a continuous protected root whose rows depend on X; W = a X + b Z +
  noise; Y = c X + d W + f Z + noise. Every term is a closed form of each posterior draw's
  coefficients (checked to 1e-9), the posterior means are near the closed forms at the
  true coefficients, and at the posterior-mean coefficients within 4 Monte Carlo standard
  errors; the identities hold draw by draw for the outcome and for predictors.
* **A finite discrete SCM** (no Stan): two binary protected roots and two Bernoulli nodes
  with known parameters. Under the monotone coupling counterfair's Bernoulli node is the
  inverse CDF of one uniform per unit, which a ``cf.DiscreteSCM`` holds exactly once the
  uniform is cut at the SCM's thresholds; a twin node gives the nested counterfactual
  ``y_(x1, W_x0)``. Every term equals the exact enumeration within 4 Monte Carlo
  standard errors (TV, which involves no draw, exactly).
* Fixed-parameter fits (no Stan) for the rest: the nested world is the path-specific
  counterfactual of ``fit.counterfactual(..., unfair_paths=...)``, a counterfactually
  fair learner has no direct or indirect effect, the notes (no confounder, no mediator,
  a mediator that is no descendant, ...) and every bad input.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import arviz as az
import numpy as np
import pandas as pd
import pytest
from _models import MEDIATION_TRUTH, dag, fit_recording, mediation_data, mediation_scm
from _seeds import shifted
from scipy.special import expit

import counterfair as cf
from counterfair import errors
from counterfair.audit import decomposition as dec
from counterfair.inference.diagnostics import Diagnostics
from counterfair.inference.mcmc_stats import bulk_ess
from counterfair.model.encoding import Encoding
from counterfair.model.specs import Protected
from counterfair.options import MIN_CHUNK_BYTES

EXACT = 1e-9
IDENTITY = 1e-10
X_SPECIFIC = ("TV", "Ctf-DE", "Ctf-IE", "Ctf-SE")


# ---------------------------------------------------------------------- helpers
def given_fit(
    scm: cf.SCM,
    data: pd.DataFrame,
    values: Mapping[str, Any],
    *,
    n_sets: int = 1,
    jitter: float = 0.0,
    seed: int,
) -> cf.Fit:
    """A ``Fit`` whose posterior is ``n_sets`` parameter sets near ``values`` (no Stan):
    each set is ``values`` plus Normal(0, jitter) noise, in one chain."""
    rng = np.random.default_rng(seed)
    posterior = {}
    for name, value in values.items():
        base = np.asarray(value, dtype=float)
        draws = base + jitter * rng.standard_normal((n_sets, *base.shape))
        posterior[name] = draws[None]
    protected = {n: s for n, s in scm.specs.items() if isinstance(s, Protected)}
    nan = float("nan")
    return cf.Fit(
        scm=scm,
        idata=az.from_dict(posterior=posterior),
        encoding=Encoding.from_data(protected, data),
        data=data,
        seconds=0.0,
        backend="none",
        seed=seed,
        diagnostics=Diagnostics(nan, nan, nan, nan, 0, 0, pd.DataFrame()),
        _backend_name="pystan",
    )


def _levels(values: np.ndarray) -> pd.Categorical:
    return pd.Categorical(values.astype(int).astype(str), categories=["0", "1"])


# ---------------------------------------------------------------------- the linear SFM
SIGMA_W, SIGMA_Y = 0.5, 0.4
SFM_TRUTH: dict[str, Any] = {
    "alpha_W": 0.2,
    "beta_W_X": [1.0],  # a
    "beta_W_Z": 0.5,  # b
    "alpha_Y": -0.1,
    "beta_Y_X": [0.6],  # c
    "beta_Y_Z": 0.3,  # f
    "beta_Y_W": 0.8,  # d
}
Z_SHIFT = 0.8
"""E[Z | X = 1] - E[Z | X = 0] when simulating: the rows' X and Z are dependent."""


def sfm_scm() -> cf.SCM:
    """X (levels "0", "1") and Z (continuous) protected roots; W ~ Normal(X, Z) and
    Y ~ Normal(X, W, Z) with fixed residual sds."""
    return cf.SCM(
        dag(
            {
                "X": cf.Protected(levels=("0", "1")),
                "Z": cf.Protected(kind="continuous"),
                "W": cf.Normal(sigma=SIGMA_W),
                "Y": cf.Normal(sigma=SIGMA_Y),
            },
            [("X", "W"), ("Z", "W"), ("X", "Y"), ("Z", "Y"), ("W", "Y")],
        )
    )


def sfm_data(n: int, seed: int) -> pd.DataFrame:
    """``n`` rows of the standard fairness model with Z | X ~ Normal(0.8 X - 0.3, 1)."""
    t = SFM_TRUTH
    rng = np.random.default_rng(seed)
    x = (rng.random(n) < 0.4).astype(float)
    z = rng.normal(Z_SHIFT * x - 0.3, 1.0)
    w = t["alpha_W"] + t["beta_W_X"][0] * x + t["beta_W_Z"] * z + SIGMA_W * rng.standard_normal(n)
    y = (
        t["alpha_Y"] + t["beta_Y_X"][0] * x + t["beta_Y_W"] * w + t["beta_Y_Z"] * z
        + SIGMA_Y * rng.standard_normal(n)
    )
    return pd.DataFrame({"X": _levels(x), "Z": z, "W": w, "Y": y})


def _coefficients(params: Any) -> dict[str, np.ndarray]:
    """Per-draw coefficients of the SFM, each (S,)."""
    names = {
        "aW": "alpha_W", "a": "beta_W_X", "b": "beta_W_Z",
        "aY": "alpha_Y", "c": "beta_Y_X", "d": "beta_Y_W", "f": "beta_Y_Z",
    }
    return {k: np.asarray(params[v], dtype=float).reshape(len(params[v]), -1)[:, 0]
            for k, v in names.items()}


def sfm_closed_forms(data: pd.DataFrame, k: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every term as a closed form of the coefficients ``k`` (arrays over draws).

    With the noise of each row abducted exactly (``e = value - mean``), a row's worlds
    differ only through the coefficients: y_(x1, W_x0) - y_x0 = c, y_(x1, W_x0) - y_x1 =
    -a d. The spurious term compares the units of the two groups in the world x1:
    (d b + f)(E[Z | x0] - E[Z | x1]) with the rows' own means of Z, plus the groups' mean
    noise (d (eW0 - eW1) + eY0 - eY1), which is 0 in expectation given X and Z."""
    x = (data["X"].astype(str) == "1").to_numpy(float)
    z, w, y = (data[c].to_numpy(float) for c in ("Z", "W", "Y"))
    in0, in1 = x == 0, x == 1
    share1 = in1.mean()
    s = {name: np.asarray(v, dtype=float)[:, None] for name, v in k.items()}
    e_w = w[None] - (s["aW"] + s["a"] * x[None] + s["b"] * z[None])
    e_y = y[None] - (s["aY"] + s["c"] * x[None] + s["d"] * w[None] + s["f"] * z[None])
    noise = s["d"][:, 0] * (e_w[:, in0].mean(1) - e_w[:, in1].mean(1)) + (
        e_y[:, in0].mean(1) - e_y[:, in1].mean(1)
    )
    c, a, d, b, f = (s[n][:, 0] for n in ("c", "a", "d", "b", "f"))
    total = c + a * d
    tv = np.full_like(c, y[in1].mean() - y[in0].mean())
    return {
        "TV": tv,
        "Ctf-DE": c,
        "Ctf-IE": -a * d,
        "Ctf-SE": (d * b + f) * (z[in0].mean() - z[in1].mean()) + noise,
        "NDE": c,
        "NIE": -a * d,
        "Exp-SE_x1": y[in1].mean() - y.mean() - total * (1 - share1),
        "Exp-SE_x0": y[in0].mean() - y.mean() + total * share1,
    }


def sfm_truth(data: pd.DataFrame) -> dict[str, float]:
    """The terms at the true coefficients with the rows' own E[Z | x], noise averaged out."""
    t = SFM_TRUTH
    a, b, c = t["beta_W_X"][0], t["beta_W_Z"], t["beta_Y_X"][0]
    d, f = t["beta_Y_W"], t["beta_Y_Z"]
    x = data["X"].astype(str).to_numpy()
    z = data["Z"].to_numpy(float)
    z0, z1, z_all = z[x == "0"].mean(), z[x == "1"].mean(), z.mean()
    return {
        "TV": c + a * d + (d * b + f) * (z1 - z0),
        "Ctf-DE": c,
        "Ctf-IE": -a * d,
        "Ctf-SE": (d * b + f) * (z0 - z1),
        "NDE": c,
        "NIE": -a * d,
        "Exp-SE_x1": (d * b + f) * (z1 - z_all),
        "Exp-SE_x0": (d * b + f) * (z0 - z_all),
    }


def linear_predictor(frame: pd.DataFrame) -> np.ndarray:
    """g0 + g1 [X = 1] + g2 W + g3 Z: reads the attribute, the mediator and the confounder."""
    x = (frame["X"].astype(str) == "1").to_numpy(float)
    return 0.3 + G1 * x + G2 * frame["W"].to_numpy(float) + G3 * frame["Z"].to_numpy(float)


G1, G2, G3 = 1.5, 2.0, -0.7


def _assert_identities(result: dec.Decomposition) -> None:
    residuals = result.identity_residuals().abs().max()
    assert residuals["x-specific"] < IDENTITY, residuals
    assert residuals["general"] < IDENTITY, residuals


# ---------------------------------------------------------------------- Stan: the SFM
N_ROWS = 300


@pytest.fixture(scope="module")
def sfm_rows() -> pd.DataFrame:
    return sfm_data(N_ROWS, shifted(41))


@pytest.fixture(scope="module")
def sfm_fit(stan_backend: str, sfm_rows: pd.DataFrame) -> cf.Fit:
    return fit_recording(
        sfm_scm(), sfm_rows, chains=2, warmup=300, draws=300, seed=shifted(42)
    ).fit


@pytest.fixture(scope="module")
def sfm_result(sfm_fit: cf.Fit, sfm_rows: pd.DataFrame) -> dec.Decomposition:
    """Every posterior draw, in chain order (one parameter set per sample)."""
    return cf.audit.decompose(
        sfm_fit, sfm_rows, attribute="X", x0="0", x1="1", outcome="Y",
        settings=cf.audit.DecompositionSettings(n_samples=sfm_fit.params().n, seed=shifted(43)),
    )


@pytest.mark.stan
def test_each_draw_is_its_closed_form(
    sfm_fit: cf.Fit, sfm_rows: pd.DataFrame, sfm_result: dec.Decomposition
) -> None:
    expected = sfm_closed_forms(sfm_rows, _coefficients(sfm_fit.params()))
    for term in dec.DECOMPOSITION_TERMS:
        np.testing.assert_allclose(
            sfm_result.draws[term].to_numpy(), expected[term], atol=EXACT, rtol=0,
            err_msg=term,
        )
    _assert_identities(sfm_result)
    assert sfm_result.confounders == ("Z",) and sfm_result.mediators == ("W",)
    assert sfm_result.notes == ()


@pytest.mark.stan
def test_posterior_is_near_the_true_closed_forms(
    sfm_rows: pd.DataFrame, sfm_result: dec.Decomposition
) -> None:
    """Against the closed forms at the true coefficients (with the rows' own E[Z | x]).

    The yardstick is the posterior sd (not an MCSE: the distance to the truth is
    estimation error, which the posterior measures) -- widened, for the terms that compare
    the two groups' units (TV, the spurious terms), by the sd of the true noise's
    difference of group means, ``(sigma_Y^2 + d^2 sigma_W^2)(1/n0 + 1/n1)``: abduction
    knows each row's noise exactly, so that part of the rows' gap is in every draw but
    not in a closed form that averages the noise out. Within 4 yardsticks.
    """
    truth = sfm_truth(sfm_rows)
    x = sfm_rows["X"].astype(str).to_numpy()
    n0, n1 = (x == "0").sum(), (x == "1").sum()
    d = SFM_TRUTH["beta_Y_W"]
    noise_var = (SIGMA_Y**2 + d**2 * SIGMA_W**2) * (1 / n0 + 1 / n1)
    grouped = {"TV", "Ctf-SE", "Exp-SE_x0", "Exp-SE_x1"}
    for term in dec.DECOMPOSITION_TERMS:
        column = sfm_result.draws[term].to_numpy()
        yardstick = np.sqrt(column.var(ddof=1) + (noise_var if term in grouped else 0.0))
        gap = abs(column.mean() - truth[term])
        assert gap < 4 * yardstick, (term, column.mean(), truth[term], yardstick)


@pytest.mark.stan
def test_posterior_means_within_4_mcse_of_the_closed_form_at_the_posterior_mean(
    sfm_fit: cf.Fit, sfm_rows: pd.DataFrame, sfm_result: dec.Decomposition
) -> None:
    """The posterior mean of each term against its closed form at the posterior-mean
    coefficients: they differ by the Monte Carlo error of the draws (and the posterior
    covariance of the coefficients multiplied together, which is ~0: they sit in
    different equations). MCSE = sd / sqrt(bulk ESS) over the chains, in order."""
    coefficients = _coefficients(sfm_fit.params())
    at_mean = sfm_closed_forms(
        sfm_rows, {k: np.array([v.mean()]) for k, v in coefficients.items()}
    )
    chains = sfm_fit.idata.posterior.sizes["chain"]
    for term in ("Ctf-DE", "Ctf-IE", "Ctf-SE", "NIE", "Exp-SE_x0", "Exp-SE_x1"):
        column = sfm_result.draws[term].to_numpy()
        ess = bulk_ess(column.reshape(chains, -1, 1))[0]
        mcse = column.std(ddof=1) / np.sqrt(ess)
        assert abs(column.mean() - at_mean[term][0]) < 4 * mcse, (
            term, column.mean(), at_mean[term][0], mcse,
        )


@pytest.mark.stan
def test_a_predictor_is_decomposed_in_every_world(
    sfm_fit: cf.Fit, sfm_rows: pd.DataFrame
) -> None:
    """A linear predictor of X, W and Z: Ctf-DE = g1, Ctf-IE = -g2 a, Ctf-SE =
    (g2 b + g3)(E[Z | x0] - E[Z | x1]) + g2 (eW0 - eW1), draw by draw; the identities
    hold for it and for a scikit-learn pipeline's probabilities."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    result = cf.audit.decompose(
        sfm_fit, sfm_rows, attribute="X", x0="0", x1="1", predictor=linear_predictor,
        settings=cf.audit.DecompositionSettings(n_samples=sfm_fit.params().n, seed=shifted(44)),
    )
    k = _coefficients(sfm_fit.params())
    x = sfm_rows["X"].astype(str).to_numpy()
    z, w = sfm_rows["Z"].to_numpy(float), sfm_rows["W"].to_numpy(float)
    xn = (x == "1").astype(float)
    e_w = w[None] - (k["aW"][:, None] + k["a"][:, None] * xn + k["b"][:, None] * z)
    expected = {
        "Ctf-DE": np.full_like(k["a"], G1),
        "Ctf-IE": -G2 * k["a"],
        "Ctf-SE": (G2 * k["b"] + G3) * (z[x == "0"].mean() - z[x == "1"].mean())
        + G2 * (e_w[:, x == "0"].mean(1) - e_w[:, x == "1"].mean(1)),
    }
    for term, want in expected.items():
        np.testing.assert_allclose(result.draws[term], want, atol=EXACT, rtol=0, err_msg=term)
    _assert_identities(result)
    assert result.target == "predictor linear_predictor"

    label = (sfm_rows["Y"] > sfm_rows["Y"].median()).astype(int)
    pipeline = make_pipeline(
        ColumnTransformer(
            [("x", OneHotEncoder(drop="first"), ["X"]), ("rest", "passthrough", ["Z", "W"])]
        ),
        LogisticRegression(),
    ).fit(sfm_rows[["X", "Z", "W"]], label)
    probability = cf.audit.decompose(
        sfm_fit, sfm_rows, attribute="X", x0="0", x1="1", predictor=pipeline,
        response="probability",
        settings=cf.audit.DecompositionSettings(n_samples=100, seed=shifted(45)),
    )
    _assert_identities(probability)
    assert probability.draws.shape == (100, len(dec.DECOMPOSITION_TERMS))
    assert 0 < probability.mean("TV") < 1


# ---------------------------------------------------------------------- exact: a discrete SCM
BINARY_TRUTH: dict[str, Any] = {
    "alpha_W": -0.4,
    "beta_W_X": [1.1],
    "beta_W_Z": [0.7],
    "alpha_Y": -0.8,
    "beta_Y_X": [0.9],
    "beta_Y_Z": [0.6],
    "beta_Y_W": 1.3,
}


def binary_scm() -> cf.SCM:
    """X, Z binary protected roots; W ~ Bernoulli(X, Z); Y ~ Bernoulli(X, W, Z)."""
    return cf.SCM(
        dag(
            {
                "X": cf.Protected(levels=("0", "1")),
                "Z": cf.Protected(levels=("0", "1")),
                "W": cf.Bernoulli(),
                "Y": cf.Bernoulli(),
            },
            [("X", "W"), ("Z", "W"), ("X", "Y"), ("Z", "Y"), ("W", "Y")],
        )
    )


def _p_w(x: int, z: int) -> float:
    t = BINARY_TRUTH
    return float(expit(t["alpha_W"] + t["beta_W_X"][0] * x + t["beta_W_Z"][0] * z))


def _p_y(x: int, w: int, z: int) -> float:
    t = BINARY_TRUTH
    return float(
        expit(t["alpha_Y"] + t["beta_Y_X"][0] * x + t["beta_Y_W"] * w + t["beta_Y_Z"][0] * z)
    )


def binary_data(n: int, seed: int) -> pd.DataFrame:
    """P(X = 1) = 0.45, P(Z = 1 | X) = 0.3 + 0.4 X: dependent protected attributes."""
    rng = np.random.default_rng(seed)
    x = (rng.random(n) < 0.45).astype(int)
    z = (rng.random(n) < 0.3 + 0.4 * x).astype(int)
    w = (rng.random(n) < np.array([_p_w(a, b) for a, b in zip(x, z, strict=True)])).astype(int)
    p_y = np.array([_p_y(a, c, b) for a, c, b in zip(x, w, z, strict=True)])
    y = (rng.random(n) < p_y).astype(int)
    return pd.DataFrame({"X": _levels(x), "Z": _levels(z), "W": w, "Y": y})


def _uniform_cut(thresholds: list[float]) -> tuple[dict[int, float], list[float]]:
    """A Uniform(0, 1) cut at ``thresholds``: interval k = (cuts[k], cuts[k + 1]] has
    probability cuts[k + 1] - cuts[k]; within one interval every threshold is on one side."""
    cuts = sorted({0.0, 1.0, *thresholds})
    probabilities = {k: cuts[k + 1] - cuts[k] for k in range(len(cuts) - 1)}
    return probabilities, cuts


def exact_binary_scm() -> cf.DiscreteSCM:
    """The binary SCM under the monotone coupling, as a finite discrete SCM.

    counterfair's Bernoulli node is ``1[u > 1 - p(parents)]`` with one uniform ``u`` per
    unit shared by every world (the inverse CDF; abduction draws ``u`` uniformly in the
    factual value's interval). Only which side of each threshold ``1 - p`` the uniform
    falls on matters, so ``u`` is exactly a finite noise over the intervals between the
    thresholds. ``W_x0`` and ``Y_x1_Wx0`` are twin nodes on the same noise: ``W`` under
    ``x0`` and ``Y`` under ``x1`` with that ``W`` (the nested counterfactual).
    """
    w_probs, w_cuts = _uniform_cut([1 - _p_w(x, z) for x in (0, 1) for z in (0, 1)])
    y_probs, y_cuts = _uniform_cut(
        [1 - _p_y(x, w, z) for x in (0, 1) for w in (0, 1) for z in (0, 1)]
    )

    def w_of(x: int, z: int, u: int) -> int:
        return int(w_cuts[u] >= 1 - _p_w(x, z))

    def y_of(x: int, w: int, z: int, u: int) -> int:
        return int(y_cuts[u] >= 1 - _p_y(x, w, z))

    quarter = {(a, b): 0.25 for a in (0, 1) for b in (0, 1)}
    specs: dict[str, object] = {
        "UXZ": cf.DiscreteNoise(quarter),
        "UW": cf.DiscreteNoise(w_probs),
        "UY": cf.DiscreteNoise(y_probs),
        "X": cf.Deterministic(lambda UXZ: UXZ[0], levels=[0, 1]),
        "Z": cf.Deterministic(lambda UXZ: UXZ[1], levels=[0, 1]),
        "W": cf.Deterministic(lambda X, Z, UW: w_of(X, Z, UW), levels=[0, 1]),
        "Y": cf.Deterministic(lambda X, W, Z, UY: y_of(X, W, Z, UY), levels=[0, 1]),
        "W_x0": cf.Deterministic(lambda Z, UW: w_of(0, Z, UW), levels=[0, 1]),
        "Y_x1_Wx0": cf.Deterministic(lambda Z, W_x0, UY: y_of(1, W_x0, Z, UY), levels=[0, 1]),
    }
    edges = [
        ("UXZ", "X"), ("UXZ", "Z"), ("X", "W"), ("Z", "W"), ("UW", "W"), ("X", "Y"),
        ("W", "Y"), ("Z", "Y"), ("UY", "Y"), ("Z", "W_x0"), ("UW", "W_x0"),
        ("Z", "Y_x1_Wx0"), ("W_x0", "Y_x1_Wx0"), ("UY", "Y_x1_Wx0"),
    ]
    return cf.DiscreteSCM(dag(specs, edges))


def exact_terms(data: pd.DataFrame) -> dict[str, float]:
    """The terms for these rows by enumeration: each row's exact counterfactual means given
    its (x, z, w, y) (``DiscreteSCM.query``), averaged as the decomposition averages."""
    scm = exact_binary_scm()
    cells = pd.DataFrame(
        {
            "X": data["X"].astype(str).astype(int),
            "Z": data["Z"].astype(str).astype(int),
            "W": data["W"].astype(int),
            "Y": data["Y"].astype(int),
        }
    )
    worlds: dict[str, list[float]] = {"y": [], "x0": [], "x1": [], "nested": []}
    memo: dict[tuple[int, ...], tuple[float, float, float]] = {}
    for row in cells.itertuples(index=False):
        key = tuple(int(v) for v in row)
        if key not in memo:
            given = dict(zip(("X", "Z", "W", "Y"), key, strict=True))
            memo[key] = (
                float(scm.query("Y", given=given, do={"X": 0})[1]),
                float(scm.query("Y", given=given, do={"X": 1})[1]),
                float(scm.query("Y_x1_Wx0", given=given)[1]),
            )
        y0, y1, nested = memo[key]
        worlds["y"].append(float(key[3]))
        worlds["x0"].append(y0)
        worlds["x1"].append(y1)
        worlds["nested"].append(nested)
    y, e0, e1, nested = (np.array(worlds[k]) for k in ("y", "x0", "x1", "nested"))
    x = cells["X"].to_numpy()
    g0, g1 = x == 0, x == 1
    return {
        "TV": y[g1].mean() - y[g0].mean(),
        "Ctf-DE": nested[g0].mean() - e0[g0].mean(),
        "Ctf-IE": nested[g0].mean() - e1[g0].mean(),
        "Ctf-SE": e1[g0].mean() - e1[g1].mean(),
        "NDE": nested.mean() - e0.mean(),
        "NIE": nested.mean() - e1.mean(),
        "Exp-SE_x0": y[g0].mean() - e0.mean(),
        "Exp-SE_x1": y[g1].mean() - e1.mean(),
    }


def test_terms_equal_the_exact_enumeration_of_a_discrete_scm() -> None:
    """Known parameters (one set), so the draws differ only by the abducted uniforms of W
    and Y: independent across samples, MCSE = sd / sqrt(S). TV is the data's, exactly."""
    data = binary_data(400, shifted(51))
    fit = given_fit(binary_scm(), data, BINARY_TRUTH, seed=shifted(53))
    samples = 3000
    result = cf.audit.decompose(
        fit, data, attribute="X", x0="0", x1="1", outcome="Y",
        settings=cf.audit.DecompositionSettings(n_samples=samples, seed=shifted(52)),
    )
    exact = exact_terms(data)
    assert np.all(result.draws["TV"].to_numpy() == exact["TV"])
    for term in dec.DECOMPOSITION_TERMS[1:]:
        column = result.draws[term].to_numpy()
        mcse = column.std(ddof=1) / np.sqrt(samples)
        assert abs(column.mean() - exact[term]) < 4 * mcse, (
            term, column.mean(), exact[term], mcse,
        )
    _assert_identities(result)
    # the exact terms obey the identities too
    assert abs(exact["TV"] - (exact["Ctf-DE"] - exact["Ctf-IE"] - exact["Ctf-SE"])) < 1e-12


def test_the_exact_enumeration_sees_the_nested_counterfactual() -> None:
    """A sanity check of the twin node: with W_x0 := W (X = x0 rows), Y_x1_Wx0 given a row
    of group x0 is Y under do(X = 1, W = w)."""
    scm = exact_binary_scm()
    for z in (0, 1):
        for w in (0, 1):
            for y in (0, 1):
                given = {"X": 0, "Z": z, "W": w, "Y": y}
                nested = scm.query("Y_x1_Wx0", given=given)[1]
                direct = scm.query("Y", given=given, do={"X": 1, "W": w})[1]
                assert abs(nested - direct) < 1e-12


# ---------------------------------------------------------------------- the nested world
@pytest.fixture(scope="module")
def mediation_given_fit() -> cf.Fit:
    """The mediation SCM of tests/_models.py (A -> M -> L -> Y, A -> L, A -> Y, latent U)
    with 20 parameter sets near its truth: exact abduction of U, no Stan."""
    data = mediation_data().drop(columns="U")
    return given_fit(mediation_scm(), data, MEDIATION_TRUTH, n_sets=20, jitter=0.03,
                     seed=shifted(3))


def _node(frame: pd.DataFrame, world: str, node: str, n: int) -> np.ndarray:
    return frame[frame["world"] == world][node].to_numpy(float).reshape(-1, n)


@pytest.mark.parametrize("mediators", [None, ["M"]], ids=["default", "M only"])
def test_the_nested_world_is_the_path_specific_counterfactual(
    mediation_given_fit: cf.Fit, mediators: list[str] | None
) -> None:
    """y_(x1, W_x0) from one abduction is fit.counterfactual's path-specific world: for
    the rows of group x0 under do(A = 1) along the paths that avoid the mediators, for the
    rows of group x1 under do(A = 0) along the paths into the mediators."""
    fit = mediation_given_fit
    data = fit.data
    samples, seed = shifted(40), shifted(61)
    result = cf.audit.decompose(
        fit, data, attribute="A", x0="0", x1="1", outcome="Y", mediators=mediators,
        settings=cf.audit.DecompositionSettings(n_samples=samples, seed=seed),
    )
    abduction = fit.abduct(data, method="draws", n_samples=samples, n_param_draws=samples,
                           seed=seed)
    assert abduction.engine == "exact"
    n = len(data)
    a = data["A"].astype(str).to_numpy()
    if mediators is None:
        direct, into = [("A", "Y")], [("A", "M"), ("A", "L")]
        assert result.mediators == ("M", "L")
    else:
        direct, into = [("A", "Y"), ("A", "L")], [("A", "M")]
        assert result.mediators == ("M",)
        assert any("'L' is a descendant of 'A' but not a mediator" in note
                   for note in result.notes)
    from_x0 = fit.counterfactual(None, {"A": "1"}, abduction=abduction, seed=seed,
                                 unfair_paths=direct)
    from_x1 = fit.counterfactual(None, {"A": "0"}, abduction=abduction, seed=seed,
                                 unfair_paths=into)
    y0 = fit.counterfactual(None, {"A": "0"}, abduction=abduction, seed=seed)
    nested = np.where(a == "0", _node(from_x0, "counterfactual", "Y", n),
                      _node(from_x1, "counterfactual", "Y", n))
    factual = _node(y0, "factual", "Y", n)
    at_x0 = _node(y0, "counterfactual", "Y", n)
    np.testing.assert_allclose(
        result.draws["Ctf-DE"], (nested - factual)[:, a == "0"].mean(1), atol=1e-12, rtol=0
    )
    # no confounder here (A is the only protected node): E[y_x0] is taken as E[y | x0]
    assert result.confounders == ()
    np.testing.assert_allclose(
        result.draws["NDE"], nested.mean(1) - factual[:, a == "0"].mean(), atol=1e-12, rtol=0
    )
    assert np.array_equal(at_x0[:, a == "0"], factual[:, a == "0"])  # consistency
    _assert_identities(result)


# ---------------------------------------------------------------------- notes and roles
def notes_scm() -> cf.SCM:
    """X, Z protected; V (child of Z only) an observed non-descendant of X; M and D
    children of X; Y child of X, M, D, Z; a latent U behind M and Y."""
    return cf.SCM(
        dag(
            {
                "X": cf.Protected(levels=("0", "1")),
                "Z": cf.Protected(kind="continuous"),
                "U": cf.Latent(),
                "V": cf.Normal(sigma=0.5),
                "M": cf.Normal(sigma=0.5),
                "D": cf.Normal(sigma=0.5),
                "Y": cf.Normal(sigma=0.4),
            },
            [("Z", "V"), ("X", "M"), ("Z", "M"), ("U", "M"), ("X", "D"),
             ("X", "Y"), ("M", "Y"), ("D", "Y"), ("Z", "Y"), ("U", "Y")],
        )
    )


NOTES_TRUTH: dict[str, Any] = {
    "alpha_V": 0.0, "beta_V_Z": 0.7,
    "alpha_M": 0.1, "beta_M_X": [0.9], "beta_M_Z": 0.4, "lambda_M_U": 0.6,
    "alpha_D": -0.2, "beta_D_X": [0.5],
    "alpha_Y": 0.0, "beta_Y_X": [0.3], "beta_Y_M": 0.7, "beta_Y_D": -0.6, "beta_Y_Z": 0.2,
    "lambda_Y_U": 0.5,
}


def notes_rows(n: int, seed: int) -> pd.DataFrame:
    """Rows of the notes SCM with dependent X and Z: its linear Normal equations by hand."""
    t = NOTES_TRUTH
    rng = np.random.default_rng(seed)
    x = (rng.random(n) < 0.5).astype(float)
    z = rng.normal(0.5 * x, 1.0)
    u = rng.standard_normal(n)
    v = t["alpha_V"] + t["beta_V_Z"] * z + 0.5 * rng.standard_normal(n)
    m = (t["alpha_M"] + t["beta_M_X"][0] * x + t["beta_M_Z"] * z + t["lambda_M_U"] * u
         + 0.5 * rng.standard_normal(n))
    d = t["alpha_D"] + t["beta_D_X"][0] * x + 0.5 * rng.standard_normal(n)
    y = (t["alpha_Y"] + t["beta_Y_X"][0] * x + t["beta_Y_M"] * m + t["beta_Y_D"] * d
         + t["beta_Y_Z"] * z + t["lambda_Y_U"] * u + 0.4 * rng.standard_normal(n))
    return pd.DataFrame({"X": _levels(x), "Z": z, "V": v, "M": m, "D": d, "Y": y})


@pytest.fixture(scope="module")
def notes_fit() -> cf.Fit:
    data = notes_rows(200, shifted(71))
    return given_fit(notes_scm(), data, NOTES_TRUTH, n_sets=10, jitter=0.02,
                     seed=shifted(4))


SAMPLING = ("n_samples", "n_param_draws", "seed", "interval")
"""The options of :class:`~counterfair.audit.decomposition.DecompositionSettings`."""


def _call(fit: cf.Fit, data: Any, options: dict[str, Any]) -> dec.Decomposition:
    """``decompose`` with the sampling options of ``options`` as its settings."""
    sampling = {name: options.pop(name) for name in SAMPLING if name in options}
    return cf.audit.decompose(
        fit, data, **options, settings=cf.audit.DecompositionSettings(**sampling)
    )


def _decompose(fit: cf.Fit, **options: Any) -> dec.Decomposition:
    settings: dict[str, Any] = {
        "attribute": "X", "x0": "0", "x1": "1", "outcome": "Y", "n_samples": 30,
        "seed": shifted(1),
    }
    settings.update(options)
    return _call(fit, fit.data, settings)


def test_default_roles_and_the_result_a_person_reads(notes_fit: cf.Fit) -> None:
    result = _decompose(notes_fit)
    assert result.confounders == ("Z", "V")
    assert result.mediators == ("M", "D")
    assert result.notes == ()
    assert list(result.table.columns) == list(dec.TABLE_COLUMNS)
    assert list(result.table["term"]) == [*X_SPECIFIC, "TV", "NDE", "NIE", "Exp-SE_x1",
                                          "Exp-SE_x0"]
    assert list(result.table["form"]) == ["x-specific"] * 4 + ["general"] * 5
    assert list(result.draws.columns) == list(dec.DECOMPOSITION_TERMS)
    assert result.draws.shape == (30, 8) and result.draws.index.name == "sample"
    table = result.table.set_index(["form", "term"])
    for (form, term), row in table.iterrows():
        column = result.draws[term]
        assert row["mean"] == pytest.approx(column.mean(), abs=1e-12)
        assert row["lower"] == pytest.approx(column.quantile(0.05), abs=1e-12)
        assert row["upper"] == pytest.approx(column.quantile(0.95), abs=1e-12)
        assert row["lower"] - 1e-12 <= row["mean"] <= row["upper"] + 1e-12, (form, term)
    text = str(result)
    assert "TV = Ctf-DE - Ctf-IE - Ctf-SE" in text
    assert "TV = NDE - NIE + Exp-SE_x1 - Exp-SE_x0" in text
    assert "confounders Z: Z, V; mediators W: M, D" in text
    assert "in plain words" in text and "90% equal-tailed intervals" in text
    assert f"{result.mean('Ctf-DE'):.4f}" in repr(result)
    assert repr(result).startswith("<Decomposition of Y by X ('0' -> '1')")
    with pytest.raises(KeyError, match="unknown term 'DE'"):
        result.mean("DE")
    _assert_identities(result)


def test_a_counterfactually_fair_learner_is_decomposed_as_deployed(notes_fit: cf.Fit) -> None:
    """A FairLearner of the fit (Kusner et al.'s level 2) is a function of the rows'
    columns that abducts its latent again in every world (issue 49): TV is the raw gap
    of its predictions on the rows in every draw, and under do(X) -- every descendant
    moved with its own noise, so the residuals the latent is abducted from keep their
    values -- its total effect NDE - NIE is small (the parameter draws differ from the
    posterior mean it abducts with). Holding the mediators at x0 while X is x1 is not
    such a world: the learner reads X beside them, so its direct effect is not 0."""
    learner = cf.FairLearner(
        notes_fit,
        target="Y",
        features=cf.inputs.Latent(),
        n_samples=20,
        seed=shifted(74),
    ).fit(notes_fit.data)
    result = _decompose(notes_fit, outcome=None, predictor=learner)
    predicted = learner.predict(notes_fit.data)
    x = notes_fit.data["X"].astype(str).to_numpy()
    gap = predicted[x == "1"].mean() - predicted[x == "0"].mean()
    np.testing.assert_allclose(result.draws["TV"], gap, atol=1e-12, rtol=0)
    total = (result.draws["NDE"] - result.draws["NIE"]).abs().max()
    assert total < 0.1 * abs(result.draws["Ctf-DE"]).max(), total
    assert result.target == "predictor FairLearner"
    assert result.notes[-1].startswith("y is the predictions (response='prediction')")
    _assert_identities(result)


def test_no_confounder_reports_a_zero_spurious_effect_with_a_note(notes_fit: cf.Fit) -> None:
    result = _decompose(notes_fit, confounders=[])
    for term in ("Ctf-SE", "Exp-SE_x0", "Exp-SE_x1"):
        assert np.all(result.draws[term].to_numpy() == 0.0), term
        row = result.table[result.table["term"] == term].iloc[0]
        assert row["mean"] == 0.0 and row["lower"] == 0.0 and row["upper"] == 0.0
    assert result.notes[0].startswith("no confounder: Ctf-SE, Exp-SE_x0 and Exp-SE_x1 are 0")
    assert "confounders=[]" in result.notes[0]
    assert "confounders Z: (none)" in str(result)
    _assert_identities(result)


def test_an_scm_without_confounders_gets_the_note_by_default() -> None:
    """The mediation SCM has one protected attribute and no observed non-descendant."""
    data = mediation_data().drop(columns="U")
    fit = given_fit(mediation_scm(), data, MEDIATION_TRUTH, n_sets=5, jitter=0.02,
                    seed=shifted(5))
    result = cf.audit.decompose(
        fit, data, attribute="A", x0="1", x1="0", outcome="Y",
        settings=cf.audit.DecompositionSettings(n_samples=20, seed=shifted(6)),
    )
    assert result.confounders == ()
    assert "'A' has no observed or protected non-descendant" in result.notes[0]
    assert np.all(result.draws["Ctf-SE"] == 0.0)
    _assert_identities(result)


def test_no_mediator_makes_the_indirect_effect_zero(notes_fit: cf.Fit) -> None:
    result = _decompose(notes_fit, mediators=[])
    assert np.all(result.draws["Ctf-IE"].to_numpy() == 0.0)
    assert np.all(result.draws["NIE"].to_numpy() == 0.0)
    assert any(note.startswith("no mediator: Ctf-IE and NIE are 0") for note in result.notes)
    assert any("'M' is a descendant of 'X' but not a mediator" in n for n in result.notes)
    _assert_identities(result)


def test_notes_name_a_mediator_that_is_no_descendant_and_a_descendant_confounder(
    notes_fit: cf.Fit,
) -> None:
    result = _decompose(notes_fit, mediators=["M", "V"], confounders=["Z", "D"])
    assert result.mediators == ("V", "M")
    assert dec.NOTE_NOT_A_DESCENDANT.format(node="V", attribute="X") in result.notes
    assert dec.NOTE_CONFOUNDER_DESCENDANT.format(node="D", attribute="X") in result.notes
    default = _decompose(notes_fit, mediators=["M"])
    # V changes nothing when held at its x0 value: the same draws as without it
    pd.testing.assert_frame_equal(result.draws, default.draws)


def test_an_outcome_that_x_does_not_cause_is_all_spurious(notes_fit: cf.Fit) -> None:
    result = _decompose(notes_fit, outcome="V")
    for term in ("Ctf-DE", "Ctf-IE", "NDE", "NIE"):
        assert np.all(result.draws[term].to_numpy() == 0.0), term
    assert dec.NOTE_OUTCOME_NOT_DESCENDANT.format(outcome="V", attribute="X") in result.notes
    np.testing.assert_allclose(result.draws["TV"], -result.draws["Ctf-SE"], atol=1e-12)


def test_an_outcome_absent_from_the_rows_is_simulated_with_a_note(notes_fit: cf.Fit) -> None:
    rows = notes_fit.data.drop(columns="Y")
    result = cf.audit.decompose(
        notes_fit, rows, attribute="X", x0="0", x1="1", outcome="Y",
        settings=cf.audit.DecompositionSettings(n_samples=20, seed=shifted(2)),
    )
    assert dec.NOTE_OUTCOME_SIMULATED.format(outcome="Y") in result.notes
    assert result.draws["TV"].std() > 0  # the simulated outcome differs by sample
    _assert_identities(result)


def test_rows_of_a_third_level_enter_the_general_form_only() -> None:
    scm = cf.SCM(
        dag(
            {"X": cf.Protected(levels=("a", "b", "c")), "W": cf.Normal(sigma=0.5),
             "Y": cf.Normal(sigma=0.5)},
            [("X", "W"), ("X", "Y"), ("W", "Y")],
        )
    )
    truth = {"alpha_W": 0.0, "beta_W_X": [1.0, -1.0], "alpha_Y": 0.0, "beta_Y_X": [0.5, 2.0],
             "beta_Y_W": 1.0}
    data = scm.sample(150, params=truth, seed=shifted(81))
    fit = given_fit(scm, data, truth, n_sets=8, jitter=0.02, seed=shifted(82))
    result = cf.audit.decompose(
        fit, data, attribute="X", x0="a", x1="b", outcome="Y",
        settings=cf.audit.DecompositionSettings(n_samples=16, seed=shifted(83)),
    )
    others = int((data["X"].astype(str) == "c").sum())
    assert dec.NOTE_OTHER_LEVELS.format(count=others, attribute="X") in result.notes
    assert result.n_rows == 150 and result.n_x0 + result.n_x1 == 150 - others
    _assert_identities(result)


# ---------------------------------------------------------------------- bad input
@pytest.fixture(scope="module")
def small_fit() -> cf.Fit:
    data = sfm_data(120, shifted(91))
    return given_fit(sfm_scm(), data, SFM_TRUTH, n_sets=4, jitter=0.02, seed=shifted(92))


def _bad(fit: cf.Fit, data: pd.DataFrame | None = None, **options: Any) -> None:
    settings: dict[str, Any] = {
        "attribute": "X", "x0": "0", "x1": "1", "outcome": "Y", "n_samples": 4,
        "seed": shifted(93),
    }
    settings.update(options)
    _call(fit, fit.data if data is None else data, settings)


def test_x0_equal_to_x1_is_an_error(small_fit: cf.Fit) -> None:
    with pytest.raises(ValueError, match=re.escape(
        dec.SAME_LEVELS.format(level="1", attribute="X")
    )):
        _bad(small_fit, x0="1", x1=1)


def test_a_level_the_fit_does_not_know_is_an_error(small_fit: cf.Fit) -> None:
    with pytest.raises(errors.DataError, match=re.escape(
        dec.UNKNOWN_LEVEL.format(name="x1", value="2", attribute="X", levels=["0", "1"])
    )):
        _bad(small_fit, x1="2")


@pytest.mark.parametrize(
    ("attribute", "role"),
    [("W", " (it is a Normal node)"), ("race", " (it is not a node of the SCM)")],
)
def test_an_attribute_that_is_not_protected_is_an_error(
    small_fit: cf.Fit, attribute: str, role: str
) -> None:
    with pytest.raises(errors.SCMError, match=re.escape(
        dec.NOT_PROTECTED.format(attribute=attribute, role=role, protected=["X", "Z"])
    )):
        _bad(small_fit, attribute=attribute)


def test_a_continuous_attribute_is_an_error(small_fit: cf.Fit) -> None:
    with pytest.raises(ValueError, match=re.escape(
        dec.CONTINUOUS_ATTRIBUTE.format(attribute="Z")
    )):
        _bad(small_fit, attribute="Z", x0=0.0, x1=1.0)


@pytest.mark.parametrize(
    "output",
    [
        lambda frame: np.array(["low"] * len(frame), dtype=object),
        lambda frame: np.array([{"score": 1}] * len(frame), dtype=object),
    ],
    ids=["strings", "objects"],
)
def test_a_predictor_whose_output_is_not_numeric_is_an_error(
    small_fit: cf.Fit, output: Callable[[pd.DataFrame], np.ndarray]
) -> None:
    with pytest.raises(TypeError, match=re.escape(
        "predictor <lambda>: its output is not numeric, so it has no mean to decompose"
    )):
        _bad(small_fit, outcome=None, predictor=output)


def test_a_predictor_output_of_the_wrong_length_or_not_finite_is_an_error(
    small_fit: cf.Fit,
) -> None:
    with pytest.raises(ValueError, match=re.escape(
        dec.PREDICTOR_SHAPE.format(name="<lambda>", got=3, expected=4 * 120)
    )):
        _bad(small_fit, outcome=None, predictor=lambda frame: np.zeros(3))
    with pytest.raises(ValueError, match="returned 480 non-finite value"):
        _bad(small_fit, outcome=None, predictor=lambda frame: np.full(len(frame), np.nan))


def test_a_multiclass_label_predictor_is_an_error(small_fit: cf.Fit) -> None:
    from sklearn.tree import DecisionTreeClassifier

    data = small_fit.data
    labels = pd.cut(data["Y"], 3, labels=["low", "mid", "high"]).astype(str)
    tree = DecisionTreeClassifier(max_depth=2).fit(data[["W", "Z"]], labels)
    with pytest.raises(ValueError, match=re.escape(
        dec.MULTICLASS.format(name="DecisionTreeClassifier")
    )):
        _bad(small_fit, outcome=None, predictor=tree)


@pytest.mark.parametrize(("level", "name"), [("0", "x0"), ("1", "x1")])
def test_no_rows_of_a_group_is_an_error(small_fit: cf.Fit, level: str, name: str) -> None:
    data = small_fit.data
    kept = data[data["X"].astype(str) != level]
    present = ["1" if level == "0" else "0"]
    with pytest.raises(errors.DataError, match=re.escape(
        dec.NO_ROWS.format(attribute="X", level=level, name=name, present=present)
    )):
        _bad(small_fit, kept)


@pytest.mark.parametrize(
    ("options", "got"),
    [({"predictor": linear_predictor}, "both"), ({"outcome": None}, "neither")],
)
def test_both_or_neither_of_outcome_and_predictor_is_an_error(
    small_fit: cf.Fit, options: dict[str, Any], got: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(dec.OUTCOME_OR_PREDICTOR.format(got=got))):
        _bad(small_fit, **options)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"outcome": "Z"}, errors.SCMError, dec.NOT_AN_OUTCOME.format(
            outcome="Z", what="a Protected node", observed=["W", "Y"])),
        ({"response": "probability"}, ValueError, dec.RESPONSE_WITH_OUTCOME.format(
            response="probability", outcome="Y")),
        ({"response": "score"}, ValueError, dec.BAD_RESPONSE.format(
            allowed=("prediction", "probability"), got="score")),
        ({"mediators": ["Q"]}, errors.SCMError, dec.UNKNOWN_ROLE_NODE.format(
            option="mediators", node="Q", nodes=["X", "Z", "W", "Y"])),
        ({"mediators": ["Y"]}, errors.SCMError, dec.ROLE_IS_SPECIAL.format(
            option="mediators", node="Y", what="outcome", role="the mediators")),
        ({"confounders": "X"}, errors.SCMError, dec.ROLE_IS_SPECIAL.format(
            option="confounders", node="X", what="protected attribute decomposed",
            role="the confounders")),
        ({"mediators": ["Z"]}, errors.SCMError, dec.ROLE_KIND.format(
            option="mediators", node="Z", kind="protected", role="the mediators",
            allowed="observed")),
        ({"mediators": ["W"], "confounders": ["W"]}, errors.SCMError,
         dec.BOTH_ROLES.format(node="W")),
        ({"n_samples": 0}, ValueError, dec.BAD_SAMPLES.format(name="n_samples", value=0)),
        ({"interval": 1.5}, ValueError, "interval must satisfy 0 < interval < 1; got 1.5"),
    ],
    ids=["outcome protected", "response with outcome", "unknown response",
         "unknown mediator", "outcome as mediator", "attribute as confounder",
         "protected mediator", "both roles", "no samples", "interval"],
)
def test_other_bad_settings_name_the_culprit(
    small_fit: cf.Fit, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        _bad(small_fit, **options)


def test_a_latent_cannot_be_a_confounder(notes_fit: cf.Fit) -> None:
    with pytest.raises(errors.SCMError, match=re.escape(dec.ROLE_KIND.format(
        option="confounders", node="U", kind="latent", role="the confounders",
        allowed="observed or protected",
    ))):
        _decompose(notes_fit, confounders=["Z", "U"])


# ---------------------------------------------------------------------- streaming
CHUNKS = (MIN_CHUNK_BYTES, 4 * MIN_CHUNK_BYTES, cf.options.DEFAULT_CHUNK_BYTES)


@pytest.mark.parametrize("target", ["outcome", "predictor"])
def test_the_decomposition_is_the_same_for_any_chunk_size(
    notes_fit: cf.Fit, target: str
) -> None:
    """Streamed by chunk (worlds of samples x a chunk's rows, never x all rows), the
    draws are bit for bit those of one chunk: the sums run over the rows in order."""
    seen: list[int] = []

    def model(frame: pd.DataFrame) -> np.ndarray:
        seen.append(len(frame))
        return frame["M"].to_numpy() - 0.5 * frame["V"].to_numpy()

    option = {"outcome": "Y"} if target == "outcome" else {"predictor": model,
                                                            "outcome": None}
    results = []
    for size in CHUNKS:
        seen.clear()
        with cf.set_options(chunk_bytes=size):
            results.append(_decompose(notes_fit, **option))
        if target == "predictor":
            largest = max(seen)
            assert largest <= 30 * len(notes_fit.data)
            if size == MIN_CHUNK_BYTES:  # many chunks, each a few rows x 30 samples
                assert largest < 30 * len(notes_fit.data) / 10
    for other in results[1:]:
        pd.testing.assert_frame_equal(other.draws, results[0].draws, check_exact=True)
        pd.testing.assert_frame_equal(other.table, results[0].table, check_exact=True)


def test_partial_sums_merge_into_the_sums_of_all_rows(notes_fit: cf.Fit) -> None:
    """What a partitioned run does, through the measure protocol
    (:mod:`counterfair.rows.measure`): sums of two sets of rows (their global positions
    kept) merge into the sums of all rows, up to the order of floating-point sums."""
    measure = dec.decomposition_measure(
        notes_fit, attribute="X", x0="0", x1="1", outcome="Y",
        settings=dec.DecompositionSettings(n_samples=30, seed=shifted(1)),
    )
    data = notes_fit.data
    whole = measure.sums(measure.rows(data))
    half = len(data) // 2
    parts = [measure.rows(data.iloc[a:b], positions=np.arange(a, b))
             for a, b in ((0, half), (half, len(data)))]
    # a partition's task holds the measure without its model, then its own view of it
    bare = measure.with_model(None)
    assert bare.fit is None and bare.predictor is None
    local = bare.with_model(measure.model)
    merged = bare.merge(local.sums(parts[1]), local.sums(parts[0]))
    assert (merged.n_x0, merged.n_x1, merged.n_rows) == (whole.n_x0, whole.n_x1, whole.n_rows)
    for key, value in whole.sums.items():
        np.testing.assert_allclose(merged.sums[key], value, rtol=1e-12, atol=1e-12)
    result = measure.result(merged, columns=list(data.columns))
    np.testing.assert_allclose(result.draws, _decompose(notes_fit).draws, rtol=1e-10, atol=1e-12)
