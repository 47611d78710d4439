"""Exact abduction piece by piece against closed forms (tools/mutation.py, exact_abduction).

* piecewise linear densities whose moments are known exactly (uniform, triangles, a
  trapezoid), written as grids by hand;
* a Normal-only problem: grid ends at ``mode +- sqrt(2 * TAIL_DROP / P)`` and the
  density there ``exp(-TAIL_DROP)``; the conjugate posterior of the mediator SCM's
  latent (tests/_mutant_models.py) for every subset of conditioned children;
* a Poisson child: log density, gradient and curvature against their formulas,
  the mode against a root finder;
* row blocks, the row count, argument checks, and the draws' layout (draw ``j``
  belongs to parameter set ``j % S``, each with its own random stream).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from _mutant_models import SIGMA, TRUTH, mediator_abduction, mediator_data, mediator_scm
from _seeds import shifted
from scipy import optimize, special

from counterfair.inference import exact_abduction as ea
from counterfair.inference import latent_problem as lp
from counterfair.inference.latent_rows import latent_draws
from counterfair.model.params import ParamDraws
from counterfair.rng import RowRandom


def exactly(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern for the whole message and nothing else."""
    return "^" + re.escape(message) + "$"



def hand_grid(low: float, step: float, density: list[float]) -> ea._Grid:
    """A one-set, one-row grid of the given density values (cell masses by trapezoids)."""
    f = np.asarray(density, dtype=float)[None, None, :]
    mass = 0.5 * (f[..., :-1] + f[..., 1:])
    mass = mass / mass.sum(axis=-1, keepdims=True)
    return ea._Grid(np.array([[low]]), np.array([[step]]), f, mass)


@pytest.mark.parametrize(
    ("density", "mean", "variance"),
    [
        ([1.0, 1.0], 0.5, 1.0 / 12.0),  # uniform on one cell
        ([1.0, 1.0, 1.0], 1.0, 4.0 / 12.0),  # uniform on two cells
        ([0.0, 1.0], 2.0 / 3.0, 1.0 / 18.0),  # rising triangle
        ([1.0, 0.0], 1.0 / 3.0, 1.0 / 18.0),  # falling triangle
        ([0.0, 1.0, 0.0], 1.0, 1.0 / 6.0),  # symmetric triangle
        ([0.0, 1.0, 1.0, 0.0], 1.5, 5.0 / 12.0),  # trapezoid: uniform [1, 2] + two triangles
    ],
)
def test_grid_moments_of_known_densities(density: list[float], mean: float,
                                         variance: float) -> None:
    for low, step in [(0.0, 1.0), (-3.0, 0.5), (10.0, 2.0)]:
        m, sd = ea._grid_moments(hand_grid(low, step, density))
        assert m.shape == (1, 1)
        assert m[0, 0] == pytest.approx(low + step * mean, rel=1e-12, abs=1e-12)
        assert sd[0, 0] == pytest.approx(step * np.sqrt(variance), rel=1e-12)


def test_grid_moments_never_take_the_root_of_a_negative_variance() -> None:
    _, sd = ea._grid_moments(hand_grid(1e8, 1e-9, [1.0, 1.0]))
    assert np.isfinite(sd).all() and sd[0, 0] >= 0.0


def normal_problem(mean: list[float], precision: float) -> lp.LatentProblem:
    m = np.asarray(mean, dtype=float)[None, :]
    return lp.LatentProblem(m, np.full((1, 1), precision), ())


def test_normal_problem_grid_ends_at_the_tail_drop() -> None:
    problem = normal_problem([0.5, -2.0, 3.0], 4.0)
    low, high = ea._grid_bounds(problem)
    half = np.sqrt(2.0 * ea.TAIL_DROP / 4.0)
    np.testing.assert_allclose(low, problem.mean - half)
    np.testing.assert_allclose(high, problem.mean + half)
    grid = ea._grid(problem, 33)
    np.testing.assert_allclose(grid.low, low)
    np.testing.assert_allclose(grid.step, (high - low) / 32)
    np.testing.assert_allclose(grid.density[..., 16], 1.0)
    np.testing.assert_allclose(grid.density[..., 0], np.exp(-ea.TAIL_DROP), rtol=1e-9)
    np.testing.assert_allclose(grid.density[..., -1], np.exp(-ea.TAIL_DROP), rtol=1e-9)
    x = low[..., None] + grid.step[..., None] * np.arange(33)
    np.testing.assert_allclose(grid.density, np.exp(-2.0 * (x - problem.mean[..., None]) ** 2),
                               rtol=1e-9)
    np.testing.assert_allclose(grid.mass.sum(axis=-1), 1.0)
    mean, sd = ea._grid_moments(ea._grid(problem, 512))
    np.testing.assert_allclose(mean, problem.mean, atol=1e-9)
    np.testing.assert_allclose(sd, 0.5, rtol=1e-4)
    mode, curvature = ea._mode(problem)
    np.testing.assert_array_equal(mode, problem.mean)
    np.testing.assert_allclose(curvature, -4.0)


def poisson_problem() -> tuple[lp.LatentProblem, dict[str, np.ndarray]]:
    family = mediator_scm().equations["C"].family
    mean = np.array([[0.3, -1.0, 2.0, 0.0]])
    precision = np.full((1, 1), 1.5)
    base = np.array([[0.2, 1.0, -0.5, 3.0]])
    loading = np.array([[0.8]])
    y = np.array([3.0, 0.0, 7.0, 25.0])
    problem = lp.LatentProblem(mean, precision, (lp.LatentChild(family, base, loading, y),))
    return problem, {"mean": mean, "P": precision, "base": base, "l": loading, "y": y}


def test_poisson_child_density_gradient_and_curvature() -> None:
    problem, v = poisson_problem()
    x = np.array([[0.1, -0.4, 1.3, 0.7]])

    def log_post(t: np.ndarray) -> np.ndarray:
        eta = v["base"] + v["l"] * t
        return (-0.5 * v["P"] * (t - v["mean"]) ** 2 + v["y"] * eta - np.exp(eta)
                - special.gammaln(v["y"] + 1))

    got = ea._log_density(problem, x)
    want = log_post(x)
    offset = got - want  # a constant per row at most
    np.testing.assert_allclose(ea._log_density(problem, x + 0.5) - offset, log_post(x + 0.5),
                               rtol=1e-10, atol=1e-10)
    eta = v["base"] + v["l"] * x
    gradient, curvature = ea._gradient_and_curvature(problem, x)
    np.testing.assert_allclose(gradient, -v["P"] * (x - v["mean"]) + v["l"] * (v["y"]
                               - np.exp(eta)), rtol=1e-10)
    np.testing.assert_allclose(curvature, -v["P"] - v["l"] ** 2 * np.exp(eta), rtol=1e-10)
    # a grid of points (S, N, G): the same values point by point
    grid_x = x[..., None] + np.array([-1.0, 0.0, 2.0])
    dense = ea._log_density(problem, grid_x)
    for g in range(3):
        np.testing.assert_allclose(dense[..., g], ea._log_density(problem, grid_x[..., g]))
    mode, curvature = ea._mode(problem)
    for r in range(4):
        root = optimize.brentq(
            lambda t, r=r: float(-v["P"][0, 0] * (t - v["mean"][0, r]) + v["l"][0, 0] * (
                v["y"][r] - np.exp(v["base"][0, r] + v["l"][0, 0] * t))), -50, 50,
            xtol=1e-14)
        assert mode[0, r] == pytest.approx(root, abs=1e-9)
        assert curvature[0, r] == pytest.approx(
            -1.5 - 0.64 * np.exp(v["base"][0, r] + 0.8 * root), rel=1e-8)
    low, high = ea._grid_bounds(problem)
    peak = ea._log_density(problem, mode)
    cap = np.sqrt(2.0 * ea.TAIL_DROP / 1.5)
    for end in (low, high):
        drop = peak - ea._log_density(problem, end)
        assert ((drop >= ea.TAIL_DROP - 1e-9) | np.isclose(np.abs(end - mode), cap)).all()
        assert (np.abs(end - mode) <= cap + 1e-12).all()
        start = np.minimum(ea.GRID_HALF_WIDTH / np.sqrt(-curvature), cap)
        assert (np.abs(end - mode) >= start - 1e-12).all()
    # the rows of a problem: the same problem, cut
    part = problem.rows(slice(1, 3))
    assert part.mean.tolist() == [[-1.0, 2.0]] and part.precision.shape == (1, 1)
    assert part.children[0].y.tolist() == [0.0, 7.0]
    assert part.children[0].base.tolist() == [[1.0, -0.5]]
    assert lp._row_slice(np.arange(8.0).reshape(2, 4), slice(1, 3)).tolist() == [[1, 2], [5, 6]]


def conjugate(conditioned: tuple[str, ...]) -> tuple[np.ndarray, float]:
    """The Normal posterior of U in the mediator SCM given the conditioned Normal nodes."""
    data = mediator_data()
    a = (data["A"].astype(str) == "1").to_numpy(float)
    x = {k: data[k].to_numpy(float) for k in ("M", "L", "Z", "Y")}
    t = TRUTH
    base = {
        "M": t["alpha_M"] + t["beta_M_A"][0] * a,
        "L": t["alpha_L"] + t["beta_L_A"][0] * a,
        "Z": t["alpha_Z"] + t["beta_Z_M"] * x["M"],
        "Y": t["alpha_Y"] + t["beta_Y_A"][0] * a + t["beta_Y_M"] * x["M"]
        + t["beta_Y_L"] * x["L"] + t["beta_Y_Z"] * x["Z"],
    }
    precision, information = 1.0, np.zeros(len(data))
    for node in conditioned:
        lam = t[f"lambda_{node}_U"]
        precision += lam**2 / SIGMA**2
        information = information + lam * (x[node] - base[node]) / SIGMA**2
    return information / precision, precision**-0.5


@pytest.mark.parametrize("conditioned", [("M",), ("L", "Y"), ("Z",), ("M", "L", "Z", "Y")])
def test_moments_and_laplace_match_the_conjugate_posterior(conditioned: tuple[str, ...]) -> None:
    fit, _ = mediator_abduction()
    params = ParamDraws({k: np.asarray(v, float)[None] for k, v in TRUTH.items()})
    data = mediator_data()
    codes = {"A": (data["A"].astype(str) == "1").to_numpy(np.int64)}
    observed = {k: data[k].to_numpy(float) for k in ("M", "L", "Z", "Y", "C")}
    mean, sd = conjugate(conditioned)
    moments = ea.posterior_moments(fit.scm, params, codes, observed, conditioned)["U"]
    np.testing.assert_allclose(moments[0][0], mean, atol=1e-6 * sd)
    np.testing.assert_allclose(moments[1][0], sd, rtol=1e-4)
    mode, laplace_sd = ea.laplace_approximation(fit.scm, params, codes, observed,
                                                conditioned)["U"]
    np.testing.assert_allclose(mode[0], mean, rtol=1e-12, atol=1e-12)
    assert laplace_sd.shape == (1, len(data))
    np.testing.assert_allclose(laplace_sd[0], sd, rtol=1e-12)
    # draws: a numpy Generator and a RowRandom; the sample means near the posterior means
    for rng in (np.random.default_rng(shifted(6)), RowRandom.for_rows(shifted(6), len(data))):
        draws = ea.sample_latents(fit.scm, params, codes, observed, conditioned,
                                  draws_per_set=4000, rng=rng)["U"]
        assert draws.shape == (4000, len(data))
        z = (draws.mean(axis=0) - mean) / (sd / np.sqrt(4000))
        assert np.max(np.abs(z)) < 4.5
        assert np.allclose(draws.std(axis=0), sd, rtol=0.06)


def test_draws_belong_to_set_j_mod_s_and_follow_the_row_stream() -> None:
    fit, _ = mediator_abduction()
    data = mediator_data()
    sets = {k: np.stack([np.asarray(v, float), np.asarray(v, float)]) for k, v in TRUTH.items()}
    sets["alpha_M"] = np.array([-20.0, 20.0])  # set 0 pulls U up, set 1 down
    params = ParamDraws(sets)
    codes = {"A": (data["A"].astype(str) == "1").to_numpy(np.int64)}
    observed = {k: data[k].to_numpy(float) for k in ("M", "L", "Z", "Y", "C")}
    rng = RowRandom.for_rows(shifted(12), len(data))
    draws = ea.sample_latents(fit.scm, params, codes, observed, ("M",), draws_per_set=3,
                              rng=rng)["U"]
    assert draws.shape == (6, len(data))
    assert (draws[0::2] > 3).all() and (draws[1::2] < -3).all()
    # each (draw, set, row) has its own stream, keyed by a uniform of the latent's stream
    problem = lp.latent_problems(fit.scm, params, codes, observed, ("M",))["U"]
    uniforms = RowRandom.for_rows(shifted(12), len(data)).child("abduct", "U").random(
        (3, 2, len(data)), row_axis=2)
    keys = (uniforms * 2.0**53).astype(np.uint64)
    want = latent_draws(problem, params, keys=keys).reshape(6, len(data))
    np.testing.assert_array_equal(draws, want)
    # a row's draws do not depend on the rows drawn with it
    alone = latent_draws(problem.rows(slice(3, 4)), params, keys=keys[:, :, 3:4])
    np.testing.assert_array_equal(alone[:, :, 0].reshape(6), draws[:, 3])


def test_row_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ea._row_blocks(2, 10, 512) == [slice(0, 10)]
    monkeypatch.setattr(ea, "MAX_GRID_CELLS", 2 * 5 * 3)
    assert ea._row_blocks(2, 10, 5) == [slice(0, 3), slice(3, 6), slice(6, 9), slice(9, 10)]
    assert ea._row_blocks(2, 10, 100) == [slice(i, i + 1) for i in range(10)]
    assert ea._row_blocks(0, 4, 0) == [slice(0, 4)]
    assert ea._row_blocks(1, 0, 5) == []


def test_row_count_and_argument_checks() -> None:
    assert lp.count_rows({"A": np.zeros(7)}, {"M": np.zeros(3)}) == 7
    assert lp.count_rows({}, {"M": np.zeros((2, 5))}) == 5
    with pytest.raises(ValueError, match=exactly(
            "no protected codes or observed values given: cannot tell the number of rows")):
        lp.count_rows({}, {})
    ea._check_points(16)
    with pytest.raises(ValueError, match=exactly("grid_points must be at least 16, got 15")):
        ea._check_points(15)
    fit, _ = mediator_abduction()
    params = ParamDraws({k: np.asarray(v, float)[None] for k, v in TRUTH.items()})
    with pytest.raises(ValueError, match=exactly("draws_per_set must be at least 1, got 0")):
        ea.sample_latents(fit.scm, params, {"A": np.zeros(2, np.int64)}, {}, ("M",),
                          draws_per_set=0, rng=np.random.default_rng(shifted(0)))
    with pytest.raises(ValueError, match=exactly("grid_points must be at least 16, got 8")):
        ea.posterior_moments(fit.scm, params, {"A": np.zeros(2, np.int64)}, {}, ("M",),
                             grid_points=8)
    one = ea.sample_latents(fit.scm, params, {"A": np.zeros(2, np.int64)},
                            {k: np.zeros(2) for k in ("M", "L", "Z", "Y")}, ("M",),
                            draws_per_set=1, rng=np.random.default_rng(shifted(0)))["U"]
    assert one.shape == (1, 2)
