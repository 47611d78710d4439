"""Mechanisms that bend (:mod:`counterfair.model.terms`): smooth terms, interactions and
group-specific loadings.

* The bases against their definitions: the P-spline columns span B-splines (scipy's own
  basis) whose difference penalty they turn into the identity, orthogonal to the
  straight line; the HSGP columns are the Laplacian's orthonormal eigenfunctions.
* Exact abduction with a loading that differs by group, against the Normal closed form.
* A NUTS fit of a linear-Gaussian SCM with a quadratic effect of a continuous protected
  attribute (exactly a cubic spline), an interaction sex x X and a loading that
  differs by sex: recovery of the truth, the counterfactual change against its
  closed form draw by draw, chunk invariance, save/load.
* Bad input: each error names the node and the term.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from _seeds import shifted
from scipy.interpolate import BSpline

import counterfair as cf
from counterfair import errors
from counterfair.inference import exact_abduction
from counterfair.model.evaluate import linear_predictor
from counterfair.model.params import ParamDraws
from counterfair.model.terms import (
    HSGP_BOUNDARY,
    hsgp_frequencies,
    smooth_basis,
)

# modelling, not a back end: one back end is enough (the programs are the same for both)

# --------------------------------------------------------------------------- bases


def _bspline_basis(x: np.ndarray, k: int, lower: float, upper: float) -> np.ndarray:
    """Cubic B-splines at equally spaced knots on [lower, upper], by scipy (independent)."""
    inner = np.linspace(lower, upper, k - 2)
    knots = np.r_[[lower] * 3, inner, [upper] * 3]
    return BSpline.design_matrix(np.clip(x, lower, upper - 1e-12), knots, 3).toarray()


@pytest.mark.parametrize("k", [5, 8, 12])
def test_spline_columns_are_the_penalised_part_of_a_pspline(k: int) -> None:
    term = cf.Smooth("age", k=k, lower=20.0, upper=70.0)
    x = np.linspace(20.0, 70.0 - 1e-9, 301)
    columns = smooth_basis(x, term)
    assert columns.shape == (301, k - 2)
    b = _bspline_basis(x, k, 20.0, 70.0)
    transform, _residual, *_ = np.linalg.lstsq(b, columns, rcond=None)
    assert np.max(np.abs(b @ transform - columns)) < 1e-9  # in the span of the B-splines
    d = np.diff(np.eye(k), 2, axis=0)
    # the difference penalty on the columns' B-spline weights is the identity ...
    np.testing.assert_allclose(transform.T @ d.T @ d @ transform, np.eye(k - 2), atol=1e-8)
    # ... and they are orthogonal to its null space, the constant and the straight line
    null = np.column_stack([np.ones(k), np.arange(k)])
    assert np.max(np.abs(transform.T @ null)) < 1e-8


def test_spline_columns_are_held_at_the_boundary_outside_the_range() -> None:
    term = cf.Smooth("age", k=8, lower=20.0, upper=70.0)
    inside = smooth_basis(np.array([20.0, 70.0]), term)
    outside = smooth_basis(np.array([5.0, 95.0]), term)
    np.testing.assert_allclose(outside, inside)
    assert np.all(np.isfinite(outside))


def test_hsgp_columns_are_orthonormal_laplacian_eigenfunctions() -> None:
    term = cf.Smooth("x", k=7, basis="hsgp", lower=-1.0, upper=1.0)
    z = np.linspace(-1.0, 1.0, 4001)
    phi = smooth_basis(z, term)
    omega = hsgp_frequencies(7)
    expected = np.sin(np.outer(z + HSGP_BOUNDARY, omega)) / np.sqrt(HSGP_BOUNDARY)
    np.testing.assert_allclose(phi, expected, atol=1e-12)
    # on the whole domain [-L, L] the eigenfunctions are orthonormal (they vanish at +-L)
    grid = np.linspace(-HSGP_BOUNDARY, HSGP_BOUNDARY, 20001)
    full = np.sin(np.outer(grid + HSGP_BOUNDARY, omega)) / np.sqrt(HSGP_BOUNDARY)
    gram = np.trapezoid(full[:, :, None] * full[:, None, :], grid, axis=0)
    np.testing.assert_allclose(gram, np.eye(7), atol=1e-6)


# --------------------------------------------------------------------------- models


def _model(*, flexible: bool = True, sex_levels: tuple[str, ...] = ("F", "M")) -> cf.SCM:
    g = nx.DiGraph()
    g.add_node("age", spec=cf.Protected(kind="continuous"))
    g.add_node("sex", spec=cf.Protected(levels=sex_levels))
    g.add_node("K", spec=cf.Latent())
    g.add_node("X", spec=cf.Normal())
    g.add_node("t1", spec=cf.Normal())
    g.add_node("t2", spec=cf.Normal(loading_by="sex") if flexible else cf.Normal())
    g.add_node("t3", spec=cf.Normal())
    g.add_node("Y", spec=cf.Normal(
        terms=[cf.Smooth("age", k=6), cf.Interaction("sex", "X")] if flexible else ()
    ))
    g.add_edges_from([("K", "t1"), ("K", "t2"), ("sex", "t2"), ("K", "t3")])
    g.add_edges_from((p, "Y") for p in ("age", "sex", "X"))
    return cf.SCM(g)


TRUTH = {
    "loading_F": 1.0,  # loading of K on t2 for sex F (the reference level)
    "dlambda_M": -0.6,  # ... and its extra for M: 0.4
    "beta_int": 0.7,  # extra slope of X on Y for M
}


def _y_mean(age: np.ndarray, male: np.ndarray, x: np.ndarray) -> np.ndarray:
    """E[Y | age, sex, X] of the truth: a quadratic in age (exactly a cubic spline)."""
    return 0.3 + 0.02 * age - 0.002 * (age - 45.0) ** 2 + 0.4 * male + (0.5 + 0.7 * male) * x


def _simulate(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    age = rng.uniform(20.0, 70.0, n)
    male = rng.integers(0, 2, n).astype(float)
    k = rng.normal(size=n)
    x = rng.normal(size=n)
    t1 = 0.2 + 1.0 * k + rng.normal(0.0, 0.5, n)
    t2 = -0.1 + 0.3 * male + (1.0 - 0.6 * male) * k + rng.normal(0.0, 0.5, n)
    t3 = 0.8 * k + rng.normal(0.0, 0.6, n)
    y = _y_mean(age, male, x) + rng.normal(0.0, 0.4, n)
    frame = pd.DataFrame({
        "age": age, "sex": np.where(male == 1.0, "M", "F"), "X": x,
        "t1": t1, "t2": t2, "t3": t3, "Y": y,
    })
    return frame, k


def _new_rows(n: int, seed: int) -> pd.DataFrame:
    """New rows inside any training range of age (the range tests set their own ages)."""
    rows, _ = _simulate(n, seed)
    return rows.assign(age=rows["age"].clip(25.0, 65.0))


def test_exact_abduction_with_a_loading_by_group_is_the_normal_closed_form() -> None:
    scm = _model()
    names = scm.parameter_names()
    rng = np.random.default_rng(shifted(3))
    values = {name: 1.0 if name.startswith("sigma_") else rng.normal(0.0, 0.3) for name in names}
    values.update({
        "sigma_t1": 0.5, "sigma_t2": 0.7, "sigma_X": 1.0, "sigma_Y": 0.4, "lambda_t1_K": 1.1,
        "lambda_t2_K": 0.9, "dlambda_t2_K": [-0.5], "beta_t2_sex": [0.3],
        "s_Y_age": rng.normal(0.0, 0.3, 4), "beta_Y_sex": [0.2], "beta_Y_sex_x_X": [0.6],
    })
    learned = scm.learned({"age": np.linspace(20.0, 70.0, 50)})
    params = ParamDraws.from_values(learned, values, {"sex": 2})
    n = 7
    codes = {"sex": np.array([0, 1, 0, 1, 1, 0, 1]), "age": np.linspace(25.0, 65.0, n)}
    observed = {"t1": np.linspace(-1.0, 1.5, n), "t2": np.linspace(1.0, -2.0, n)}
    moments = exact_abduction.laplace_approximation(
        learned, params, codes, observed, ("t1", "t2")
    )
    mean, sd = moments["K"]
    loading2 = 0.9 - 0.5 * codes["sex"]
    r1 = observed["t1"] - values["alpha_t1"]
    r2 = observed["t2"] - values["alpha_t2"] - 0.3 * codes["sex"]
    precision = 1.0 + 1.1**2 / 0.5**2 + loading2**2 / 0.7**2
    expected = (1.1 * r1 / 0.5**2 + loading2 * r2 / 0.7**2) / precision
    np.testing.assert_allclose(mean[0], expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sd[0], 1.0 / np.sqrt(precision), rtol=1e-9)


def test_linear_predictor_of_an_interaction_is_its_closed_form() -> None:
    scm = _model().learned({"age": np.linspace(20.0, 70.0, 50)})
    eq = scm.equations["Y"]
    values = {name: float(name.startswith("sigma_")) for name in scm.parameter_names()}
    values.update({
        "alpha_Y": 0.3, "beta_Y_age": 0.0, "beta_Y_sex": [0.4], "beta_Y_X": 0.5,
        "beta_Y_sex_x_X": [0.7], "s_Y_age": [0.0] * 4, "lambda_t2_K": 1.0,
        "dlambda_t2_K": [0.0], "beta_t2_sex": [0.0],
        "sigma_t1": 1.0, "sigma_t2": 1.0, "sigma_X": 1.0, "sigma_Y": 1.0, "lambda_t1_K": 1.0,
    })
    params = ParamDraws.from_values(scm, values, {"sex": 2})
    x = np.array([-1.0, 0.0, 2.0, 2.0])
    sex = np.array([0, 1, 0, 1])
    eta = linear_predictor(eq, params, {"X": x}, {"sex": sex, "age": np.full(4, 40.0)})
    np.testing.assert_allclose(eta[0], 0.3 + 0.4 * sex + (0.5 + 0.7 * sex) * x)


# --------------------------------------------------------------------------- NUTS
N_TRAIN = 400
N_ROWS = 40
N_SAMPLES = 30


@pytest.fixture(scope="module")
def bending_fit(stan_backend: str) -> tuple[cf.Fit, pd.DataFrame]:
    train, _ = _simulate(N_TRAIN, shifted(11))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.ConvergenceWarning)
        fit = _model().fit(
            train, chains=2, warmup=300, draws=200, seed=shifted(5), backend=stan_backend
        )
    return fit, train


def _z(posterior: object, name: str, truth: float) -> float:
    draws = np.asarray(posterior[name].values).ravel()  # type: ignore[index]
    return float(abs(draws.mean() - truth) / draws.std())


@pytest.mark.stan
def test_nuts_recovers_the_loading_by_group_and_the_interaction(
    bending_fit: tuple[cf.Fit, pd.DataFrame],
) -> None:
    fit, _ = bending_fit
    posterior = fit.idata.posterior
    assert _z(posterior, "lambda_t2_K", TRUTH["loading_F"]) < 4.0
    assert _z(posterior, "dlambda_t2_K", TRUTH["dlambda_M"]) < 4.0
    assert _z(posterior, "beta_Y_sex_x_X", TRUTH["beta_int"]) < 4.0
    # the fitted SCM keeps the range it learned: the knots of new and counterfactual rows
    smooth = fit.scm.specs["Y"].terms[0]  # type: ignore[attr-defined]
    assert (smooth.lower, smooth.upper) == (
        pytest.approx(fit.data["age"].min()), pytest.approx(fit.data["age"].max())
    )


@pytest.mark.stan
def test_counterfactual_change_is_the_closed_form_draw_by_draw(
    bending_fit: tuple[cf.Fit, pd.DataFrame],
) -> None:
    """do(age = 90 - age): Y moves by exactly the change of its mean, per sample; the
    posterior mean of that change recovers the true quadratic's."""
    fit, _ = bending_fit
    rows = _new_rows(N_ROWS, shifted(12))
    new_age = 90.0 - rows["age"].to_numpy()
    abduction = fit.abduct(rows, method="draws", n_samples=N_SAMPLES, seed=shifted(2))
    frame = fit.counterfactual(rows, {"age": new_age}, n_samples=None, abduction=abduction)
    factual = frame[frame["world"] == "factual"].sort_values(["sample", "row"])
    moved = frame[frame["world"] != "factual"].sort_values(["sample", "row"])
    change = moved["Y"].to_numpy() - factual["Y"].to_numpy()
    # closed form per sample: the P-spline and the linear weight of that sample's draw
    scm = fit.scm
    eq = scm.equations["Y"]
    params = abduction.params
    codes = {"sex": (rows["sex"] == "M").to_numpy().astype(np.int64)}
    x = {"X": rows["X"].to_numpy()}
    before = linear_predictor(eq, params, x, {**codes, "age": rows["age"].to_numpy()})
    after = linear_predictor(eq, params, x, {**codes, "age": new_age})
    expected = (after - before).ravel()
    np.testing.assert_allclose(change, expected, atol=1e-9)
    # and against the truth: the mean change over samples, within 4 posterior sds
    per_row = (after - before)
    truth = _y_mean(new_age, codes["sex"], x["X"]) - _y_mean(
        rows["age"].to_numpy(), codes["sex"], x["X"]
    )
    z = np.abs(per_row.mean(axis=0) - truth) / per_row.std(axis=0)
    assert np.max(z) < 4.0, np.max(z)


@pytest.mark.stan
def test_counterfactuals_with_terms_do_not_depend_on_the_chunk_size(
    bending_fit: tuple[cf.Fit, pd.DataFrame],
) -> None:
    fit, _ = bending_fit
    rows = _new_rows(N_ROWS, shifted(13))
    do = {"sex": "M"}
    with cf.set_options(chunk_bytes=10**9):
        whole = fit.counterfactual(rows, do, n_samples=N_SAMPLES, seed=shifted(4))
    with cf.set_options(chunk_bytes=N_SAMPLES * 8 * 8 * 12 * 3):
        pieces = fit.counterfactual(rows, do, n_samples=N_SAMPLES, seed=shifted(4))
    pd.testing.assert_frame_equal(whole, pieces)


@pytest.mark.stan
def test_fair_add_residuals_come_from_the_flexible_mean(
    bending_fit: tuple[cf.Fit, pd.DataFrame],
) -> None:
    """With the bending terms in the mean, Y's abducted noise is Y minus the flexible mean;
    a Fair Add learner of t1 on it does not move under do(age) or do(sex)."""
    fit, train = bending_fit
    abduction = fit.abduct(None, n_samples=5, seed=shifted(6))
    noise = abduction.noise(fit.scm, ["Y"])["Y"]
    eq = fit.scm.equations["Y"]
    mean = linear_predictor(
        eq,
        abduction.params,
        {"X": train["X"].to_numpy()},
        {"sex": (train["sex"] == "M").to_numpy().astype(np.int64), "age": train["age"].to_numpy()},
    )
    np.testing.assert_allclose(noise, train["Y"].to_numpy()[None, :] - mean, atol=1e-9)
    # the flexible mean leaves noise of the truth's sd (0.4); the straight line would not
    assert 0.3 < float(noise.std()) < 0.5


@pytest.mark.stan
def test_a_fit_with_terms_saves_and_loads(
    bending_fit: tuple[cf.Fit, pd.DataFrame], tmp_path: Path
) -> None:
    fit, _ = bending_fit
    fit.save(tmp_path / "run")
    loaded = cf.load(tmp_path / "run")
    assert loaded.scm.specs["Y"] == fit.scm.specs["Y"]  # terms and learned range included
    rows = _new_rows(10, shifted(14))
    a = fit.counterfactual(rows, {"sex": "F"}, n_samples=4, seed=shifted(1))
    b = loaded.counterfactual(rows, {"sex": "F"}, n_samples=4, seed=shifted(1))
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.stan
def test_new_rows_outside_the_range_warn_once_and_stay_finite(
    bending_fit: tuple[cf.Fit, pd.DataFrame],
) -> None:
    fit, _ = bending_fit
    rows = _new_rows(12, shifted(15))
    rows.loc[rows.index[:3], "age"] = [5.0, 95.0, 110.0]
    with pytest.warns(errors.RangeWarning, match=r"node 'Y', term s\(age\): 3 row\(s\)") as seen:
        frame = fit.counterfactual(rows, {"sex": "M"}, n_samples=3, seed=shifted(1))
    assert len([w for w in seen if issubclass(w.category, errors.RangeWarning)]) >= 1
    assert np.all(np.isfinite(frame["Y"].to_numpy()))


# --------------------------------------------------------------------------- bad input


def _graph(spec: cf.Normal, *, extra: tuple[tuple[str, str], ...] = ()) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_node("age", spec=cf.Protected(kind="continuous"))
    g.add_node("sex", spec=cf.Protected())
    g.add_node("K", spec=cf.Latent())
    g.add_node("b", spec=cf.Bernoulli())
    g.add_node("t", spec=cf.Normal())
    g.add_node("t2", spec=cf.Normal())
    g.add_node("t3", spec=cf.Normal())
    g.add_node("Y", spec=spec)
    g.add_edges_from([("K", "t"), ("K", "t2"), ("K", "t3"), ("sex", "b")])
    g.add_edges_from([("age", "Y"), ("sex", "Y"), ("b", "Y"), *extra])
    return g


@pytest.mark.parametrize(
    ("spec", "extra", "message"),
    [
        (cf.Normal(terms=[cf.Smooth("b")]), (), r"node 'Y', term s\(b\): 'b' is binary"),
        (cf.Normal(terms=[cf.Smooth("sex")]), (), r"node 'Y', term s\(sex\): 'sex' is binary or"),
        (
            cf.Normal(terms=[cf.Smooth("age", by="b")]),
            (),
            r"node 'Y', term s\(age, by=b\): by='b' is not categorical",
        ),
        (cf.Normal(terms=[cf.Smooth("t")]), (), r"node 'Y', term s\(t\): 't' is not a parent"),
        (
            cf.Normal(terms=[cf.Interaction("sex", "t")]),
            (),
            r"node 'Y', term sex:t: 't' is not a parent",
        ),
        (cf.Normal(loading_by="sex"), (), r"node 'Y', loading_by=sex: 'Y' has no latent parent"),
        (
            cf.Normal(loading_by="age"),
            (("K", "Y"),),
            r"node 'Y', loading_by=age: 'age' is not categorical",
        ),
        (cf.Normal(loading_by="t"), (("K", "Y"),), r"node 'Y', loading_by=t: 't' is not a parent"),
    ],
)
def test_bad_terms_name_the_node_and_the_term(
    spec: cf.Normal, extra: tuple[tuple[str, str], ...], message: str
) -> None:
    with pytest.raises(errors.SCMError, match=message):
        cf.SCM(_graph(spec, extra=extra))


def test_bad_term_declarations_are_refused() -> None:
    with pytest.raises(errors.SCMError, match="takes a parent by name"):
        cf.Smooth(3)  # type: ignore[arg-type]
    with pytest.raises(errors.SCMError, match=r"kernel='matern32' is an HSGP option"):
        cf.Smooth("age", kernel="matern32")
    with pytest.raises(errors.SCMError, match="k must be an integer of at least 5"):
        cf.Smooth("age", k=3)
    with pytest.raises(errors.SCMError, match=r"upper \(1.0\) must exceed lower"):
        cf.Smooth("age", lower=5.0, upper=1.0)


def test_more_knots_than_distinct_values_is_refused_before_sampling() -> None:
    scm = cf.SCM(_graph(cf.Normal(terms=[cf.Smooth("age", k=8)])))
    rng = np.random.default_rng(shifted(0))
    n = 50
    frame = pd.DataFrame({
        "age": rng.choice([20.0, 30.0, 40.0, 50.0], n), "sex": rng.choice(["F", "M"], n),
        "b": rng.integers(0, 2, n), "t": rng.normal(size=n), "t2": rng.normal(size=n),
        "t3": rng.normal(size=n), "Y": rng.normal(size=n),
    })
    with pytest.raises(errors.SCMError, match=r"node 'Y', term s\(age\): 'age' has 4 distinct"):
        scm.fit(frame, chains=1, warmup=10, draws=10)


def test_terms_round_trip_through_the_scm_file(tmp_path: Path) -> None:
    scm = _model()
    path = cf.write_scm(scm, tmp_path / "model.yaml")
    text = path.read_text()
    assert "term: smooth" in text and "term: interaction" in text and "loading_by: sex" in text
    back = cf.read_scm(path)
    assert back.specs == scm.specs
    assert back.stan_code() == scm.stan_code()
    bad = text.replace("term: smooth", "term: wiggle")
    (tmp_path / "bad.yaml").write_text(bad)
    with pytest.raises(errors.SCMError, match=r"nodes\.Y\.terms"):
        cf.read_scm(tmp_path / "bad.yaml")


def test_identification_understands_group_specific_loadings() -> None:
    """Two Normal indicators identify only the product of their loadings; when one of them
    differs by group, the groups' covariances identify it, but weakly (only as far as the
    loadings differ)."""

    def two_indicators(grouped: bool) -> nx.DiGraph:
        g = nx.DiGraph()
        g.add_node("sex", spec=cf.Protected(levels=("F", "M")))
        g.add_node("K", spec=cf.Latent())
        g.add_node("t1", spec=cf.Normal())
        g.add_node("t2", spec=cf.Normal(loading_by="sex" if grouped else None))
        g.add_edges_from([("K", "t1"), ("K", "t2"), ("sex", "t2")])
        return g

    with pytest.warns(errors.IdentificationWarning, match="'K' is not identified"):
        plain = cf.SCM(two_indicators(False))
    assert list(plain.identification()["problem"]) == ["not identified"]
    with pytest.warns(errors.IdentificationWarning, match=r"'K' is weak: .*\['t2'\] differing"):
        grouped = cf.SCM(two_indicators(True))
    assert list(grouped.identification()["problem"]) == ["weak"]


# --------------------------------------------------------------------------- group effects
DEPARTMENTS = tuple("ABCDEFGH")


def _group_data(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    intercepts = np.linspace(-1.0, 1.0, len(DEPARTMENTS))
    slopes = np.linspace(-0.3, 0.3, len(DEPARTMENTS))[::-1]
    d = rng.integers(0, len(DEPARTMENTS), n)
    male = rng.integers(0, 2, n).astype(float)
    k = rng.normal(size=n)
    x = 0.5 * male + k + rng.normal(0.0, 0.5, n)
    frame = pd.DataFrame({
        "sex": np.where(male == 1.0, "M", "F"),
        "X": x,
        "t": k + rng.normal(0.0, 0.5, n),
        "t2": 0.7 * k + rng.normal(0.0, 0.5, n),
        "Y": intercepts[d] + (0.5 + slopes[d]) * x + 0.2 * male + rng.normal(0.0, 0.4, n),
        "dept": np.asarray(DEPARTMENTS)[d],
    })
    return frame, intercepts, slopes


def _group_model() -> cf.SCM:
    g = nx.DiGraph()
    g.add_node("sex", spec=cf.Protected(levels=("F", "M")))
    g.add_node("K", spec=cf.Latent())
    g.add_node("X", spec=cf.Normal())
    g.add_node("t", spec=cf.Normal())
    g.add_node("t2", spec=cf.Normal())
    g.add_node("Y", spec=cf.Normal(terms=[cf.GroupEffect("dept", slopes=["X"])]))
    g.add_edges_from([("sex", "X"), ("K", "X"), ("K", "t"), ("K", "t2"), ("X", "Y")])
    g.add_edge("sex", "Y")
    return cf.SCM(g)


@pytest.fixture(scope="module")
def group_fit(stan_backend: str) -> cf.Fit:
    train, _, _ = _group_data(1500, shifted(21))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.ConvergenceWarning)
        return _group_model().fit(
            train, chains=2, warmup=400, draws=400, seed=shifted(7), backend=stan_backend
        )


@pytest.mark.stan
def test_group_effects_recover_each_groups_intercept_and_slope(group_fit: cf.Fit) -> None:
    _, intercepts, slopes = _group_data(10, shifted(21))
    effects = group_fit.idata.posterior["u_Y_dept"].values.reshape(-1, 2, len(DEPARTMENTS))
    fitted_slopes = effects[:, 1, :]
    # intercepts are relative to alpha_Y: compare centred estimates with the centred truth
    alpha = group_fit.idata.posterior["alpha_Y"].values.reshape(-1, 1)
    fitted_intercepts = effects[:, 0, :] + alpha
    for fitted, truth in ((fitted_intercepts, intercepts), (fitted_slopes + 0.0, slopes)):
        centred = fitted - fitted.mean(axis=1, keepdims=True)
        z = np.abs(centred.mean(axis=0) - (truth - truth.mean())) / centred.std(axis=0)
        assert np.max(z) < 4.0, z
    assert group_fit.scm.specs["Y"].terms[0].levels == DEPARTMENTS  # type: ignore[attr-defined]


@pytest.mark.stan
def test_an_unseen_group_is_drawn_once_and_kept_in_every_world_and_chunk(
    group_fit: cf.Fit, caplog: pytest.LogCaptureFixture
) -> None:
    rows, _, _ = _group_data(60, shifted(22))
    rows.loc[rows.index[::3], "dept"] = "Z"  # never seen in training
    with caplog.at_level("INFO", logger="counterfair"):
        whole = group_fit.counterfactual(rows, {"sex": "M"}, n_samples=8, seed=shifted(3))
    lines = [r.message for r in caplog.records if "never seen in training" in r.message]
    assert len(lines) == 1 and "column 'dept': 1 group(s)" in lines[0] and "'Z'" in lines[0]
    with cf.set_options(chunk_bytes=65536):
        pieces = group_fit.counterfactual(rows, {"sex": "M"}, n_samples=8, seed=shifted(3))
    pd.testing.assert_frame_equal(whole, pieces)
    assert np.all(np.isfinite(whole["Y"].to_numpy()))
    # the unseen group's draw differs between samples (population draws), not between rows
    abduction = group_fit.abduct(rows, method="draws", n_samples=8, seed=shifted(3))
    eq = group_fit.scm.equations["Y"]
    zero_x = {"X": np.zeros(len(rows))}
    eta = linear_predictor(eq, abduction.params, zero_x, abduction.codes)
    unseen = (rows["dept"] == "Z").to_numpy()
    males = (rows["sex"] == "M").to_numpy()
    block = eta[:, unseen & males]
    assert np.allclose(block, block[:, :1]) and block[:, 0].std() > 0.0


def test_group_effect_input_errors(tmp_path: Path) -> None:
    frame, _, _ = _group_data(200, shifted(23))
    with pytest.raises(errors.SCMError, match=r"node 'Y', term \(1 \+ X \| dept\): the grouping "
                       r"column 'dept' has a single level"):
        _group_model().fit(frame.assign(dept="A"), chains=1, warmup=10, draws=10)
    with pytest.raises(errors.DataError, match="column 'dept' is missing: it is the grouping"):
        _group_model().fit(frame.drop(columns="dept"), chains=1, warmup=10, draws=10)
    g = nx.DiGraph()
    g.add_node("sex", spec=cf.Protected())
    g.add_node("Y", spec=cf.Normal(terms=[cf.GroupEffect("sex")]))
    g.add_edge("sex", "Y")
    with pytest.raises(errors.SCMError, match=r"node 'Y', term \(1 \| sex\): 'sex' is a node"):
        cf.SCM(g)
    path = cf.write_scm(_group_model(), tmp_path / "groups.json")
    assert cf.read_scm(path).specs == _group_model().specs


@pytest.mark.stan
@pytest.mark.slow  # over 2 minutes in CI (a fit of its own): pytest -m slow
def test_invariance_check_finds_the_loading_that_differs_by_group(stan_backend: str) -> None:
    """t2 measures K with loading 1.0 for F and 0.4 for M: LOO prefers the group-specific
    loading by far, and the loading ratio's interval holds 0.4, not 1."""
    train, _ = _simulate(500, shifted(31))
    declared = _model(flexible=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.ConvergenceWarning)
        table = cf.invariance_check(
            declared, train, latent="K", by="sex", indicators=["t2"],
            chains=2, warmup=300, draws=300, seed=shifted(8), backend=stan_backend,
        )
    row = table.iloc[0]
    assert (row["indicator"], row["level"]) == ("t2", "M")
    assert row["preferred"] == "group-specific", row
    assert row["elpd_diff"] > 4.0 * row["se_diff"]
    assert row["ratio_low"] < 0.4 < row["ratio_high"] < 1.0
    assert set(table.attrs["fits"]) == {"invariant", "t2 by sex"}
    with pytest.raises(errors.SCMError, match="'age' is not one of its parents"):
        cf.invariance_check(declared, train, latent="K", by="age", indicators=["t2"])


# --------------------------------------------------------------------------- categorical
def _admissions(flexible: bool) -> cf.SCM:
    g = nx.DiGraph()
    g.add_node("sex", spec=cf.Protected(levels=("F", "M")))
    g.add_node("age", spec=cf.Protected(kind="continuous"))
    g.add_node("dept", spec=cf.Categorical(
        levels=("A", "B", "C"), terms=[cf.Smooth("age", k=6)] if flexible else ()
    ))
    g.add_edges_from([("sex", "dept"), ("age", "dept")])
    return cf.SCM(g)


@pytest.mark.stan
@pytest.mark.slow  # over 2 minutes in CI (a fit of its own): pytest -m slow
def test_a_categorical_node_takes_a_smooth_term_and_loo_prefers_it(stan_backend: str) -> None:
    """Department C is chosen most in mid-career (an inverted U in age on its logit): the
    flexible declaration recovers it and PSIS-LOO prefers it to the straight line."""
    rng = np.random.default_rng(shifted(41))
    n = 1500
    age = rng.uniform(20.0, 60.0, n)
    male = rng.integers(0, 2, n)
    logits = np.column_stack([
        np.zeros(n), 0.5 * male, 2.0 - 0.012 * (age - 40.0) ** 2,
    ])
    choice = np.argmax(logits + rng.gumbel(size=(n, 3)), axis=1)
    frame = pd.DataFrame({
        "sex": np.where(male == 1, "M", "F"), "age": age, "dept": np.array(list("ABC"))[choice]
    })
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.ConvergenceWarning)
        for name, flexible in (("linear", False), ("flexible", True)):
            fits[name] = _admissions(flexible).fit(
                frame, chains=2, warmup=300, draws=300, seed=shifted(9), backend=stan_backend
            )
    table = cf.compare(fits)
    assert table.index[0] == "flexible"
    assert table.loc["linear", "elpd_diff"] > 4.0 * table.loc["linear", "dse"], table
    weights = fits["flexible"].idata.posterior["s_dept_age"].values
    assert weights.shape[-2:] == (4, 2)  # (k - 2) columns x one curve per non-reference level
    # the counterfactual probability of C moves with age as the inverted U says
    rows = frame.iloc[:5].assign(age=40.0)
    moved = fits["flexible"].counterfactual(rows, {"age": 22.0}, n_samples=40, seed=shifted(2))
    at_40 = (moved[moved["world"] == "factual"]["dept"] == "C").mean()
    at_22 = (moved[moved["world"] != "factual"]["dept"] == "C").mean()
    assert at_22 < at_40


@pytest.mark.stan
def test_fair_k_can_abduct_from_the_invariant_indicators_only(
    bending_fit: tuple[cf.Fit, pd.DataFrame],
) -> None:
    """abduction_args={"condition_on": [...]} is kept in fit and predict (it used to raise);
    t2's loading differs by sex, so the default (invariant_only=True) abducts from t1, t3
    too (tests/test_invariant_learners.py)."""
    fit, train = bending_fit
    from sklearn.linear_model import LinearRegression

    def learner(invariant_only: bool = True, **abduction: object) -> cf.FairLearner:
        return cf.FairLearner(
            fit,
            target="Y",
            features=cf.inputs.Latent(invariant_only=invariant_only),
            estimator=LinearRegression(),
            n_samples=10,
            seed=shifted(3),
            abduction_args=abduction or None,
        ).fit(train.iloc[:300])

    rows = train.iloc[300:340].drop(columns="Y")
    invariant = learner(condition_on=["t1", "t3"]).predict(rows)
    everything = learner(invariant_only=False).predict(rows)
    assert np.all(np.isfinite(invariant)) and not np.allclose(invariant, everything)
    moved = rows.assign(t2=rows["t2"] + 5.0)  # t2 is not read by the invariant learner
    np.testing.assert_allclose(learner(condition_on=["t1", "t3"]).predict(moved), invariant)
    np.testing.assert_allclose(learner().predict(moved), invariant)  # the default


OFFICES = tuple("PQRSTU")


def _placement_data(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """A categorical ``track`` whose level C is chosen most in mid-career by women only
    (one curve of age per sex) and whose level B varies by office (group intercepts)."""
    rng = np.random.default_rng(seed)
    office_b = np.linspace(-1.2, 1.2, len(OFFICES))
    office = rng.integers(0, len(OFFICES), n)
    male = rng.integers(0, 2, n)
    age = rng.uniform(20.0, 60.0, n)
    bend = np.where(male == 1, 0.0, 2.0 - 0.01 * (age - 40.0) ** 2)
    logits = np.column_stack([np.zeros(n), 0.3 * male + office_b[office], bend])
    choice = np.argmax(logits + rng.gumbel(size=(n, 3)), axis=1)
    frame = pd.DataFrame({
        "sex": np.where(male == 1, "M", "F"),
        "age": age,
        "track": np.array(list("ABC"))[choice],
        "office": np.asarray(OFFICES)[office],
    })
    return frame, office_b


def _placement() -> cf.SCM:
    g = nx.DiGraph()
    g.add_node("sex", spec=cf.Protected(levels=("F", "M")))
    g.add_node("age", spec=cf.Protected(kind="continuous"))
    g.add_node("track", spec=cf.Categorical(
        levels=("A", "B", "C"),
        terms=[cf.Smooth("age", k=6, by="sex"), cf.GroupEffect("office")],
    ))
    g.add_edges_from([("sex", "track"), ("age", "track")])
    return cf.SCM(g)


@pytest.mark.stan
def test_a_categorical_node_takes_group_effects_and_a_smooth_by_a_factor(
    stan_backend: str,
) -> None:
    """Group intercepts per non-reference level and one curve per sex and level: the
    offices' effects on B are recovered (summing to zero), C's logit bends with age for
    women (an inverted U) and not for men, and an unseen office is drawn."""
    frame, office_b = _placement_data(1500, shifted(43))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.ConvergenceWarning)
        fit = _placement().fit(
            frame, chains=2, warmup=300, draws=300, seed=shifted(10), backend=stan_backend
        )
    effects = fit.idata.posterior["u_track_office"].values
    assert effects.shape[-2:] == (len(OFFICES), 2)
    draws = effects.reshape(-1, len(OFFICES), 2)
    assert np.allclose(draws.sum(axis=1), 0.0, atol=1e-4)  # the sum-to-zero basis (CSV digits)
    on_b = draws[:, :, 0]
    z = np.abs(on_b.mean(axis=0) - (office_b - office_b.mean())) / on_b.std(axis=0)
    assert np.max(z) < 4.0, z
    # C's logit against age, per sex, at the posterior draws: a bend for women only
    rows = frame.iloc[:4]
    abduction = fit.abduct(rows, method="draws", n_samples=200, seed=shifted(4))
    eq = fit.scm.equations["track"]
    bend = {}
    for sex in (0, 1):
        logit = {}
        for age in (22.0, 40.0):
            codes = {**abduction.codes, "sex": np.full(4, sex), "age": np.full(4, age)}
            logit[age] = linear_predictor(eq, abduction.params, {}, codes)[..., 1].mean()
        bend[sex] = logit[40.0] - logit[22.0]
    assert bend[0] > 2.0 and abs(bend[1]) < 1.0, bend  # truth: 3.24 and 0
    # and the counterfactual share of C for women at 40 falls when their age is 22
    rows = frame.iloc[:40].assign(age=40.0, sex="F")
    at = {}
    for age in (40.0, 22.0):  # the same abducted noise in both worlds (same seed)
        moved = fit.counterfactual(rows, {"age": age}, n_samples=40, seed=shifted(4))
        at[age] = (moved[moved["world"] != "factual"]["track"] == "C").mean()
    assert at[22.0] < at[40.0] - 0.2, at
    unseen = rows.assign(office="Z")
    moved = fit.counterfactual(unseen, {"age": 22.0}, n_samples=8, seed=shifted(4))
    assert moved["track"].isin(["A", "B", "C"]).all()


# --------------------------------------------------------------------------- HSGP surfaces
@pytest.mark.parametrize("kernel", ["exp_quad", "matern32"])
def test_an_hsgp_surface_approximates_its_kernel(kernel: str) -> None:
    """sum_j S(|w_j|) phi_j(x) phi_j(x') is the kernel k(x, x') in two dimensions: the
    2-D basis (products of each parent's eigenfunctions) and the 2-D spectral densities
    against the exp-quad and Matern 3/2 covariances written out."""
    from counterfair.model.terms import spd

    term = cf.Smooth(("a", "b"), k=24, basis="hsgp", kernel=kernel, lower=(-1, -1), upper=(1, 1))
    rng = np.random.default_rng(shifted(5))
    points = rng.uniform(-0.7, 0.7, size=(12, 2))
    basis = smooth_basis((points[:, 0], points[:, 1]), term)
    assert basis.shape == (12, 24 * 24)
    sd, ls = 1.3, 0.35  # the boundary (1.5) is at least 2 length scales from every point
    weights = spd(term, np.array([sd]), np.array([ls]))[0] ** 2
    approx = basis @ np.diag(weights) @ basis.T
    r = np.linalg.norm(points[:, None, :] - points[None, :, :], axis=-1)
    if kernel == "exp_quad":
        exact = sd**2 * np.exp(-0.5 * (r / ls) ** 2)
    else:
        exact = sd**2 * (1 + np.sqrt(3) * r / ls) * np.exp(-np.sqrt(3) * r / ls)
    np.testing.assert_allclose(approx, exact, atol=0.02 * sd**2)


def test_a_one_parent_hsgp_approximates_its_kernel() -> None:
    """The same check in one dimension (the 1-D densities the surfaces generalise)."""
    from counterfair.model.terms import spd

    for kernel in ("exp_quad", "matern32"):
        term = cf.Smooth("a", k=40, basis="hsgp", kernel=kernel, lower=-1, upper=1)
        x = np.linspace(-0.8, 0.8, 9)
        basis = smooth_basis(x, term)
        weights = spd(term, np.array([0.7]), np.array([0.4]))[0] ** 2
        r = np.abs(x[:, None] - x[None, :])
        exact = (
            0.49 * np.exp(-0.5 * (r / 0.4) ** 2)
            if kernel == "exp_quad"
            else 0.49 * (1 + np.sqrt(3) * r / 0.4) * np.exp(-np.sqrt(3) * r / 0.4)
        )
        np.testing.assert_allclose(basis @ np.diag(weights) @ basis.T, exact, atol=0.01)


def _surface_data(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2.0, 2.0, n)
    z = rng.uniform(-2.0, 2.0, n)
    y = np.sin(1.5 * x) * np.cos(1.5 * z) + rng.normal(0.0, 0.3, n)
    return pd.DataFrame({"X": x, "Z": z, "Y": y})


def _surface_model(flexible: bool) -> cf.SCM:
    g = nx.DiGraph()
    g.add_node("X", spec=cf.Protected(kind="continuous"))
    g.add_node("Z", spec=cf.Normal())
    terms = [cf.Smooth(("X", "Z"), k=6, basis="hsgp")] if flexible else []
    g.add_node("Y", spec=cf.Normal(terms=terms))
    g.add_edges_from([("X", "Y"), ("Z", "Y")])
    return cf.SCM(g)


@pytest.mark.stan
def test_nuts_fits_an_hsgp_surface_and_loo_prefers_it(stan_backend: str) -> None:
    """Y = sin(1.5 x) cos(1.5 z) + noise, which no sum of one-parent curves can fit: the
    surface's posterior mean follows the truth, PSIS-LOO prefers it by far, and the
    counterfactual of Y under do(X) moves as the surface says."""
    train = _surface_data(400, shifted(51))
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.ConvergenceWarning)
        for name, flexible in (("linear", False), ("surface", True)):
            fits[name] = _surface_model(flexible).fit(
                train, chains=2, warmup=300, draws=300, seed=shifted(12), backend=stan_backend
            )
    with warnings.catch_warnings():  # a row or two may have Pareto k > 0.7 at 600 draws
        warnings.simplefilter("ignore", errors.LOOWarning)
        table = cf.compare(fits)
    assert table.index[0] == "surface"
    assert table.loc["linear", "elpd_diff"] > 4.0 * table.loc["linear", "dse"], table
    grid = pd.DataFrame({"X": [-1.0, 0.0, 1.0, 1.0], "Z": [0.0, 0.0, 0.0, 1.5]})
    abduction = fits["surface"].abduct(
        grid.assign(Y=0.0), method="draws", n_samples=400, seed=shifted(6)
    )
    eq = fits["surface"].scm.equations["Y"]
    mean = linear_predictor(
        eq, abduction.params, {"Z": grid["Z"].to_numpy()}, {"X": grid["X"].to_numpy()}
    ).mean(axis=0)
    truth = np.sin(1.5 * grid["X"]) * np.cos(1.5 * grid["Z"])
    np.testing.assert_allclose(mean, truth, atol=0.2)


def test_hsgp_surface_input_errors() -> None:
    with pytest.raises(errors.SCMError, match=r"a smooth of 2 parents is an HSGP surface"):
        cf.Smooth(("a", "b"))
    with pytest.raises(errors.SCMError, match=r"lower takes one number per parent"):
        cf.Smooth(("a", "b"), basis="hsgp", lower=0.0)
    g = nx.DiGraph()
    for name in ("a", "b", "c"):
        g.add_node(name, spec=cf.Protected(kind="continuous"))
    g.add_node("sex", spec=cf.Protected(levels=("F", "M")))
    g.add_node("Y", spec=cf.Normal(terms=[cf.Smooth(("a", "b", "c"), basis="hsgp")]))
    g.add_edges_from((p, "Y") for p in ("a", "b", "c", "sex"))
    with pytest.raises(
        errors.SCMError,
        match=r"node 'Y', term gp\(a, b, c\): an HSGP in 3 dimensions is not supported",
    ):
        cf.SCM(g)
    g.nodes["Y"]["spec"] = cf.Normal(terms=[cf.Smooth(("a", "b"), basis="hsgp", by="sex")])
    with pytest.raises(errors.SCMError, match=r"node 'Y', term gp\(a, b, by=sex\): by= with an"):
        cf.SCM(g)
    g.nodes["Y"]["spec"] = cf.Normal(terms=[cf.Smooth(("a", "sex"), basis="hsgp")])
    with pytest.raises(errors.SCMError, match=r"node 'Y', term gp\(a, sex\): 'sex' is binary or"):
        cf.SCM(g)


def test_an_hsgp_surface_round_trips_through_the_scm_file(tmp_path: Path) -> None:
    scm = _surface_model(True)
    learned = dataclasses_replace_terms(scm, lower=(-2.0, -2.5), upper=(2.0, 2.5))
    path = cf.write_scm(learned, tmp_path / "surface.json")
    assert cf.read_scm(path).specs == learned.specs


def dataclasses_replace_terms(scm: cf.SCM, **changes: object) -> cf.SCM:
    import dataclasses

    g = scm.graph.copy()
    spec = g.nodes["Y"]["spec"]
    g.nodes["Y"]["spec"] = dataclasses.replace(
        spec, terms=tuple(dataclasses.replace(t, **changes) for t in spec.terms)
    )
    return cf.SCM(g)


# --------------------------------------------------------------------------- categorical loadings
def _categorical_indicator() -> cf.SCM:
    g = nx.DiGraph()
    g.add_node("sex", spec=cf.Protected(levels=("F", "M")))
    g.add_node("K", spec=cf.Latent())
    g.add_node("t1", spec=cf.Normal())
    g.add_node("t2", spec=cf.Normal())
    g.add_node("track", spec=cf.Categorical(levels=("A", "B", "C"), loading_by="sex"))
    g.add_edges_from([("K", "t1"), ("K", "t2"), ("K", "track"), ("sex", "track")])
    return cf.SCM(g)


def test_a_categorical_loading_by_group_is_its_closed_form() -> None:
    """Each non-reference level's logit gets the reference group's loading plus its own
    group's extra loading, per level of the node."""
    scm = _categorical_indicator()
    eq = scm.equations["track"]
    values = {name: 0.0 if not name.startswith("sigma_") else 1.0 for name in scm.parameter_names()}
    values.update({
        "lambda_track_K": [0.8, -0.4], "dlambda_track_K": [[0.5, 1.0]],
        "alpha_track": [0.1, 0.2], "beta_track_sex": [[0.3, -0.3]],
    })
    params = ParamDraws.from_values(scm, values, {"sex": 2})
    sex = np.array([0, 1, 1, 0])
    k = np.array([-1.0, 0.5, 2.0, 1.5])
    eta = linear_predictor(eq, params, {"K": k}, {"sex": sex})
    loading = np.array([0.8, -0.4]) + np.array([0.5, 1.0]) * sex[:, None]
    expected = np.array([0.1, 0.2]) + np.array([0.3, -0.3]) * sex[:, None] + loading * k[:, None]
    np.testing.assert_allclose(eta[0], expected, rtol=1e-12)
    with pytest.raises(errors.SCMError, match=r"'dlambda_track_K' needs 1 value"):
        ParamDraws.from_values(scm, {**values, "dlambda_track_K": [0.5, 1.0]}, {"sex": 2})


@pytest.mark.stan
def test_nuts_recovers_a_categorical_loading_that_differs_by_group(stan_backend: str) -> None:
    """The logit of C loads on K by 1.5 for women and 0 for men: the extra loading of men
    on C is recovered (its interval holds -1.5 and not 0)."""
    rng = np.random.default_rng(shifted(61))
    n = 800
    male = rng.integers(0, 2, n)
    k = rng.normal(size=n)
    logits = np.column_stack([np.zeros(n), 0.2 + 0.3 * k, -0.2 + np.where(male == 1, 0.0, 1.5) * k])
    frame = pd.DataFrame({
        "sex": np.where(male == 1, "M", "F"),
        "t1": k + rng.normal(0.0, 0.5, n),
        "t2": 0.8 * k + rng.normal(0.0, 0.5, n),
        "track": np.array(list("ABC"))[np.argmax(logits + rng.gumbel(size=(n, 3)), axis=1)],
    })
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.ConvergenceWarning)
        fit = _categorical_indicator().fit(
            frame, chains=2, warmup=250, draws=250, seed=shifted(13), backend=stan_backend
        )
    extra = fit.idata.posterior["dlambda_track_K"].values.reshape(-1, 2)[:, 1]  # men, on C
    low, high = np.quantile(extra, [0.001, 0.999])
    assert low < -1.5 < high and high < 0.0, (low, high)
