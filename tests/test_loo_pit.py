"""LOO-PIT (issue 33): uniform for a well-specified fit, not for a misspecified one.

Numpy level: with no data left out to matter (weights from the true density), the PIT of
values drawn from the model is uniform, for a Normal node and (randomised) for a
categorical one; the categorical CDF interval against its level probabilities.
Stan level: the fits of ``tests/_conditional_models.py`` (the linear declaration fitted by
NUTS to rows from a linear truth and from a bent one).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from _conditional_models import declared_fit
from _seeds import shifted
from scipy.stats import kstest

import counterfair as cf
from counterfair.inference.loo_pit import LooPit, cdf_interval, loo_pit, pit_values
from counterfair.model.evaluate import linear_predictor
from counterfair.model.params import ParamDraws

# modelling, not a back end: one back end is enough (the programs are the same for both)


def _scm() -> cf.SCM:
    g = nx.DiGraph()
    g.add_node("A", spec=cf.Protected(levels=("a", "b")))
    g.add_node("X", spec=cf.Normal())
    g.add_node("D", spec=cf.Categorical(levels=3))
    g.add_edges_from([("A", "X"), ("A", "D"), ("X", "D")])
    return cf.SCM(g)


def _params(n: int, rng: np.random.Generator, sigma: float = 1.0) -> ParamDraws:
    """Posterior-like draws tightly around fixed values (sd 0.01)."""
    def near(value: object) -> np.ndarray:
        base = np.asarray(value, dtype=float)
        return base + 0.01 * rng.standard_normal((n, *base.shape))

    return ParamDraws(
        {
            "alpha_X": near(0.5),
            "beta_X_A": near([1.0]),
            "sigma_X": np.full(n, sigma),
            "alpha_D": near([0.2, -0.4]),
            "beta_D_A": near([[0.5, -0.5]]),
            "beta_D_X": near([0.8, -0.3]),
        }
    )


def test_pit_of_model_draws_is_uniform_and_of_a_wrong_scale_is_not() -> None:
    scm = _scm()
    rng = np.random.default_rng(shifted(40))
    n = 3000
    codes = {"A": rng.integers(0, 2, n)}
    truth = ParamDraws({k: v[:1] for k, v in _params(1, rng).items()})
    x = linear_predictor(scm.equations["X"], truth, {}, codes, n_rows=n)[0] + rng.standard_normal(n)
    eta_d = linear_predictor(scm.equations["D"], truth, {"X": x}, codes, n_rows=n)
    d = scm.equations["D"].family.draw(scm.equations["D"], truth, eta_d, rng)[0]
    observed = {"X": x, "D": d}
    for node in ("X", "D"):
        pit, k = pit_values(scm, node, _params(200, rng), {}, codes, observed, rng)
        assert pit.shape == (n,) and np.all((pit >= 0) & (pit <= 1))
        assert kstest(pit, "uniform").pvalue > 0.01, node
        assert k.max() < 0.7
    # the same values under a residual sd three times too large: PIT piles up in the middle
    wide, _ = pit_values(scm, "X", _params(200, rng, sigma=3.0), {}, codes, observed, rng)
    assert kstest(wide, "uniform").statistic > 0.15
    assert (wide < 0.05).mean() < 0.01


def test_categorical_cdf_interval_is_the_cumulative_level_probability() -> None:
    scm = _scm()
    eq = scm.equations["D"]
    rng = np.random.default_rng(shifted(41))
    params = _params(4, rng)
    codes = {"A": rng.integers(0, 2, 10)}
    eta = linear_predictor(eq, params, {"X": rng.standard_normal(10)}, codes, n_rows=10)
    probabilities = eq.family.mean(eq, params, eta)
    y = rng.integers(0, 3, 10).astype(float)
    lower, upper = cdf_interval(eq, params, eta, y)
    cumulative = np.cumsum(probabilities, axis=-1)
    for i, level in enumerate(y.astype(int)):
        np.testing.assert_allclose(upper[:, i], cumulative[:, i, level], rtol=1e-12)
        np.testing.assert_allclose(upper[:, i] - lower[:, i], probabilities[:, i, level],
                                   rtol=1e-12)


@pytest.mark.stan
def test_loo_pit_of_a_well_specified_fit_is_uniform(stan_backend: str) -> None:
    fit = declared_fit(bent=False)
    result = loo_pit(fit, seed=shifted(3))
    print(result)
    assert isinstance(result, LooPit)
    assert result.nodes == fit.scm.observed
    assert result.pit.shape == (len(fit.data), 4)
    table = result.table.set_index("node")
    assert (table["ks_distance"] < 0.05).all(), str(result)
    assert (table["ks_p_value"] > 0.001).all(), str(result)
    # per group (A: 2 levels, age: 5 bins for every node): nothing far from uniform
    assert len(result.groups) == 4 * (2 + 5)
    assert (result.groups["ks_p_value"] > 1e-4).all(), result.groups
    figure = result.plot()
    assert len(figure.axes) == 4
    assert figure.axes[0].get_title().startswith("X1 (normal): KS")
    with pytest.raises(KeyError, match="node 'Z' was not checked"):
        result.plot(["Z"])
    assert "LOO-PIT of 4 node(s), 1500 rows" in str(result)
    same = loo_pit(fit, nodes="Y", seed=shifted(3))
    np.testing.assert_array_equal(same.pit["Y"], result.pit["Y"])


@pytest.mark.stan
def test_loo_pit_of_a_misspecified_fit_is_not_uniform(stan_backend: str) -> None:
    """Y is an inverted U in age fitted as a line: its residuals are skewed (a long lower
    tail at both ends of age), so its PIT values are far from uniform, and per age bin
    they are shifted (low at both ends, high in the middle).

    X3's loading (1.2 in group b, 0.3 in group a, fitted as one) does not show here, not
    even per group (KS p-values 0.4 and above on these rows): each row's latent is drawn
    given the row, and leaving X3's cell out by importance weights does not undo what it
    absorbed. The conditional statistics of ``fit.ppc()`` (tests/test_ppc_conditional.py:
    per-group variance of X3, covariances of K's indicators per group) see it."""
    result = loo_pit(declared_fit(bent=True), seed=shifted(3))
    print(result)
    table = result.table.set_index("node")
    assert table.loc["Y", "ks_distance"] > 0.08, str(result)
    assert table.loc["Y", "ks_p_value"] < 1e-6, str(result)
    bins = result.groups[(result.groups["node"] == "Y") & (result.groups["by"] == "age")]
    assert len(bins) == 5 and (bins["ks_p_value"] < 1e-10).all(), bins
    means = bins["mean_pit"].to_numpy()
    assert means[0] < 0.3 and means[-1] < 0.3 and means[2] > 0.7, means
    assert "groups with KS p-value < 0.001" in str(result)
    with pytest.raises(cf.errors.SCMError, match="cannot check 'age'"):
        loo_pit(declared_fit(bent=True), nodes=["age"])
