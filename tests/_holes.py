"""A linear-Gaussian SCM with a binary leaf, rows with holes, and its exact posterior.

``A`` protected (``a0``, ``a1``); ``W = aW + bWA [A = a1] + sW e_W``;
``Y = aY + bYA [A = a1] + bYW W + sY e_Y``; ``B ~ Bernoulli(logit^-1(aB + bBA [A = a1] +
bBW W))``. ``W`` (a Normal node with children) is missing at random given ``A`` and
``Y``, more often where ``Y`` is high; ``Y`` and ``B`` (nodes without children) are
missing at random given ``A``.

Under missing at random the likelihood of a row is the density of what it holds, the
missing values integrated out. Here that is closed form but for one 1-D integral:

* ``W`` held: ``N(W) N(Y) Bern(B)`` over the terms held;
* ``W`` missing: ``N(W | m, sW) N(Y | ...W...)`` is ``N(Y | mY + bYW m, sqrt(bYW^2 sW^2 +
  sY^2))`` times ``N(W | the conditional mean and sd)``, and ``Bern(B | W)`` is
  integrated against that Normal by 32-node Gauss-Hermite quadrature.

:func:`reference_posterior` turns it (with the fit program's priors) into posterior means
and sds by self-normalised importance sampling from a Student-t around the mode: the
exact posterior, up to an importance-sampling error that it reports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import networkx as nx
import numpy as np
import pandas as pd
from scipy import optimize, special, stats

import counterfair as cf

TRUTH = {
    "aW": 0.2, "bWA": 0.8, "sW": 1.0, "aY": -0.3, "bYA": 0.5, "bYW": 1.0, "sY": 0.8,
    "aB": -0.2, "bBA": 0.6, "bBW": 1.2,
}
NAMES = ("aW", "bWA", "log_s2W", "aY", "bYA", "bYW", "log_s2Y", "aB", "bBA", "bBW")
"""The reference's coordinates (the variances on the log scale)."""
STAN = {
    "aW": "alpha_W", "bWA": "beta_W_A", "sW": "sigma_W", "aY": "alpha_Y", "bYA": "beta_Y_A",
    "bYW": "beta_Y_W", "sY": "sigma_Y", "aB": "alpha_B", "bBA": "beta_B_A", "bBW": "beta_B_W",
}
"""The fit's parameter of each reference quantity."""
PRIORS = (
    "alpha_W ~ normal(0.0, 1.0);", "beta_W_A ~ normal(0.0, 1.0);",
    "sigma2_W ~ inv_gamma(1.0, 1.0);", "alpha_Y ~ normal(0.0, 1.0);",
    "beta_Y_A ~ normal(0.0, 1.0);", "beta_Y_W ~ normal(0.0, 1.0);",
    "sigma2_Y ~ inv_gamma(1.0, 1.0);", "alpha_B ~ normal(0.0, 1.0);",
    "beta_B_A ~ normal(0.0, 1.0);", "beta_B_W ~ normal(0.0, 1.0);",
)
"""The priors :func:`log_posterior` assumes; the test checks the program has them."""


def holes_scm() -> cf.SCM:
    g = nx.DiGraph()
    g.add_node("A", spec=cf.Protected(levels=("a0", "a1")))
    g.add_node("W", spec=cf.Normal())
    g.add_node("Y", spec=cf.Normal())
    g.add_node("B", spec=cf.Bernoulli())
    g.add_edges_from([("A", "W"), ("A", "Y"), ("W", "Y"), ("A", "B"), ("W", "B")])
    return cf.SCM(g)


def holes_data(n: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``n`` complete rows, and the same rows with holes (about 35 % of ``W``, 15 % of
    ``Y``, 20 % of ``B``; ``W`` missing more often where ``Y`` is high)."""
    t = TRUTH
    rng = np.random.default_rng(seed)
    a = (rng.random(n) < 0.5).astype(float)
    w = t["aW"] + t["bWA"] * a + t["sW"] * rng.normal(size=n)
    y = t["aY"] + t["bYA"] * a + t["bYW"] * w + t["sY"] * rng.normal(size=n)
    b = (rng.random(n) < special.expit(t["aB"] + t["bBA"] * a + t["bBW"] * w)).astype(int)
    complete = pd.DataFrame({"A": np.where(a > 0, "a1", "a0"), "W": w, "Y": y, "B": b})
    z = (y - y.mean()) / y.std()
    holes = complete.astype({"B": float})
    holes.loc[rng.random(n) < special.expit(-1.0 + 1.5 * z + 0.3 * a), "W"] = np.nan
    holes.loc[rng.random(n) < special.expit(-1.9 + 0.4 * a), "Y"] = np.nan
    holes.loc[rng.random(n) < special.expit(-1.5 + 0.3 * a), "B"] = np.nan
    return complete, holes


_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(32)
_GH_W = _GH_W / np.sqrt(2 * np.pi)


@dataclass(frozen=True)
class _Rows:
    a: np.ndarray
    w: np.ndarray
    y: np.ndarray
    b: np.ndarray
    has_w: np.ndarray
    has_y: np.ndarray
    has_b: np.ndarray

    @classmethod
    def of(cls, frame: pd.DataFrame) -> _Rows:
        return cls(
            (frame["A"] == "a1").to_numpy(float), frame["W"].fillna(0).to_numpy(float),
            frame["Y"].fillna(0).to_numpy(float), frame["B"].fillna(0).to_numpy(float),
            frame["W"].notna().to_numpy(), frame["Y"].notna().to_numpy(),
            frame["B"].notna().to_numpy(),
        )


def _bernoulli(b: np.ndarray, eta: np.ndarray) -> np.ndarray:
    return b * eta - np.logaddexp(0.0, eta)


def log_likelihood(theta: np.ndarray, rows: _Rows) -> np.ndarray:
    """The rows' log likelihood under missing at random, for each parameter set
    (``theta``: ``(S, 10)`` in :data:`NAMES`' order)."""
    aW, bWA, ls2W, aY, bYA, bYW, ls2Y, aB, bBA, bBW = (theta[:, [k]] for k in range(10))
    sW, sY = np.exp(ls2W / 2), np.exp(ls2Y / 2)
    r = rows
    mw = aW + bWA * r.a
    my = aY + bYA * r.a
    held = r.has_w
    out = np.where(held, stats.norm.logpdf(r.w, mw, sW), 0.0)
    out += np.where(held & r.has_y, stats.norm.logpdf(r.y, my + bYW * r.w, sY), 0.0)
    out += np.where(held & r.has_b, _bernoulli(r.b, aB + bBA * r.a + bBW * r.w), 0.0)
    # W missing: Y's marginal, then W | Y (or W's own law without Y) for B's integral
    gone = ~held
    spread = np.sqrt(bYW**2 * sW**2 + sY**2)
    out += np.where(gone & r.has_y, stats.norm.logpdf(r.y, my + bYW * mw, spread), 0.0)
    gain = bYW * sW**2 / spread**2
    mean = np.where(r.has_y, mw + gain * (r.y - my - bYW * mw), mw)
    sd = np.where(r.has_y, np.sqrt(sW**2 - gain * bYW * sW**2), sW)
    need = gone & r.has_b
    if need.any():
        cols = np.flatnonzero(need)
        nodes = mean[:, cols, None] + sd[:, cols, None] * _GH_X
        eta = aB[..., None] + bBA[..., None] * r.a[cols, None] + bBW[..., None] * nodes
        logp = _bernoulli(r.b[cols, None], eta)
        integral = special.logsumexp(logp, b=_GH_W, axis=-1)
        out[:, cols] += integral
    return out.sum(axis=1)


def log_prior(theta: np.ndarray) -> np.ndarray:
    """The program's priors on :data:`NAMES`' coordinates (Normal(0, 1) on intercepts and
    weights, InvGamma(1, 1) on the variances, with the log transform's Jacobian)."""
    normal = [0, 1, 3, 4, 5, 7, 8, 9]
    out = stats.norm.logpdf(theta[:, normal]).sum(axis=1)
    for k in (2, 6):
        s2 = np.exp(theta[:, k])
        out += stats.invgamma.logpdf(s2, 1.0, scale=1.0) + theta[:, k]
    return out


def log_posterior(theta: np.ndarray, rows: _Rows) -> np.ndarray:
    return log_prior(theta) + log_likelihood(theta, rows)


@dataclass(frozen=True)
class Reference:
    """Posterior means and sds (:data:`STAN`'s quantities, sigma as sd) and their
    importance-sampling standard errors; ``ess`` is the importance sampler's."""

    mean: dict[str, float]
    sd: dict[str, float]
    se: dict[str, float]
    ess: float


def reference_posterior(frame: pd.DataFrame, seed: int, draws: int = 12_000) -> Reference:
    """The exact posterior of :func:`holes_scm`'s parameters given ``frame`` (missing at
    random), by importance sampling from a Student-t (6 degrees of freedom) at the mode
    with the inverse Hessian there as its scale."""
    rows = _Rows.of(frame)
    theta, weights, ess = _importance(lambda t: log_posterior(t, rows), 10, seed, draws)
    quantities = {
        "aW": theta[:, 0], "bWA": theta[:, 1], "sW": np.exp(theta[:, 2] / 2),
        "aY": theta[:, 3], "bYA": theta[:, 4], "bYW": theta[:, 5],
        "sY": np.exp(theta[:, 6] / 2), "aB": theta[:, 7], "bBA": theta[:, 8],
        "bBW": theta[:, 9],
    }
    return _summary(quantities, weights, ess)


def _importance(
    log_post: Callable[[np.ndarray], np.ndarray], dim: int, seed: int, draws: int
) -> tuple[np.ndarray, np.ndarray, float]:
    """Draws, self-normalised weights and ESS of importance sampling from a Student-t (6
    degrees of freedom) at the mode of ``log_post``, scaled by its inverse Hessian."""

    def negative(x: np.ndarray) -> float:
        return -float(log_post(x[None, :])[0])

    mode = optimize.minimize(
        negative, np.zeros(dim), method="BFGS", options={"gtol": 1e-8}
    ).x
    step = 1e-4
    hessian = np.empty((dim, dim))
    for i in range(dim):
        for j in range(i, dim):
            e_i, e_j = np.eye(dim)[i] * step, np.eye(dim)[j] * step
            value = (
                negative(mode + e_i + e_j) - negative(mode + e_i - e_j)
                - negative(mode - e_i + e_j) + negative(mode - e_i - e_j)
            ) / (4 * step**2)
            hessian[i, j] = hessian[j, i] = value
    cov = np.linalg.inv(hessian) * 1.3
    proposal = stats.multivariate_t(loc=mode, shape=cov, df=6, seed=seed)
    theta = proposal.rvs(draws)
    log_w = np.concatenate(
        [log_post(part) for part in np.array_split(theta, 20)]
    ) - proposal.logpdf(theta)
    weights = np.exp(log_w - log_w.max())
    weights /= weights.sum()
    return theta, weights, 1.0 / float(np.sum(weights**2))


def _summary(quantities: dict[str, np.ndarray], weights: np.ndarray, ess: float) -> Reference:
    mean, sd, se = {}, {}, {}
    for name, values in quantities.items():
        m = float(np.sum(weights * values))
        s = float(np.sqrt(np.sum(weights * (values - m) ** 2)))
        mean[name], sd[name], se[name] = m, s, s / np.sqrt(ess)
    return Reference(mean, sd, se, ess)


# ---------------------------------------------------------------------- a binary mediator
BINARY_TRUTH = {"aE": -0.3, "bEA": 0.9, "aY": 0.2, "bYA": 0.4, "bYE": 1.0, "sY": 0.9}
BINARY_STAN = {
    "aE": "alpha_E", "bEA": "beta_E_A", "aY": "alpha_Y", "bYA": "beta_Y_A",
    "bYE": "beta_Y_E", "sY": "sigma_Y",
}
"""The fit's parameter of each quantity of :func:`binary_reference`."""


def binary_scm() -> cf.SCM:
    """``A -> E -> Y``, ``A -> Y``: ``E`` Bernoulli (a mediator), ``Y`` Normal."""
    g = nx.DiGraph()
    g.add_node("A", spec=cf.Protected(levels=("a0", "a1")))
    g.add_node("E", spec=cf.Bernoulli())
    g.add_node("Y", spec=cf.Normal())
    g.add_edges_from([("A", "E"), ("A", "Y"), ("E", "Y")])
    return cf.SCM(g)


def binary_data(n: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``n`` complete rows, and the same rows with about 35 % of ``E`` hidden (more often
    where ``Y`` is high: missing at random given ``Y``) and 10 % of ``Y`` (given ``A``)."""
    t = BINARY_TRUTH
    rng = np.random.default_rng(seed)
    a = (rng.random(n) < 0.5).astype(float)
    e = (rng.random(n) < special.expit(t["aE"] + t["bEA"] * a)).astype(float)
    y = t["aY"] + t["bYA"] * a + t["bYE"] * e + t["sY"] * rng.normal(size=n)
    complete = pd.DataFrame({"A": np.where(a > 0, "a1", "a0"), "E": e, "Y": y})
    z = (y - y.mean()) / y.std()
    holes = complete.copy()
    holes.loc[rng.random(n) < special.expit(-0.9 + 1.5 * z), "E"] = np.nan
    holes.loc[rng.random(n) < special.expit(-2.2 + 0.3 * a), "Y"] = np.nan
    return complete, holes


def binary_reference(frame: pd.DataFrame, seed: int, draws: int = 12_000) -> Reference:
    """The exact posterior of :func:`binary_scm` given ``frame``: a row that misses ``E``
    has the likelihood ``sum_e Bern(e) N(Y | e)`` (closed form)."""
    a = (frame["A"] == "a1").to_numpy(float)
    e = frame["E"].fillna(0).to_numpy(float)
    y = frame["Y"].fillna(0).to_numpy(float)
    has_e, has_y = frame["E"].notna().to_numpy(), frame["Y"].notna().to_numpy()

    def log_post(theta: np.ndarray) -> np.ndarray:
        aE, bEA, aY, bYA, bYE, ls2 = (theta[:, [k]] for k in range(6))
        sY = np.exp(ls2 / 2)
        eta = aE + bEA * a
        mean = aY + bYA * a
        held = np.where(has_e, _bernoulli(e, eta), 0.0)
        held += np.where(has_e & has_y, stats.norm.logpdf(y, mean + bYE * e, sY), 0.0)
        summed = np.logaddexp(
            _bernoulli(0.0, eta) + np.where(has_y, stats.norm.logpdf(y, mean, sY), 0.0),
            _bernoulli(1.0, eta) + np.where(has_y, stats.norm.logpdf(y, mean + bYE, sY), 0.0),
        )
        loglik = np.where(has_e, held, summed).sum(axis=1)
        prior = stats.norm.logpdf(theta[:, :5]).sum(axis=1)
        prior += stats.invgamma.logpdf(np.exp(theta[:, 5]), 1.0, scale=1.0) + theta[:, 5]
        return loglik + prior

    theta, weights, ess = _importance(log_post, 6, seed, draws)
    quantities = {
        "aE": theta[:, 0], "bEA": theta[:, 1], "aY": theta[:, 2], "bYA": theta[:, 3],
        "bYE": theta[:, 4], "sY": np.exp(theta[:, 5] / 2),
    }
    return _summary(quantities, weights, ess)


def hole_programs() -> dict[str, str]:
    """The fit programs ``tests/test_missing_model.py`` compiles (compiled up front)."""
    return {
        "holes: W sampled, Y and B left out": holes_scm().stan_code(
            holes={"W": "sample", "Y": "omit", "B": "omit"}
        ),
        "holes: E summed, Y left out": binary_scm().stan_code(holes={"E": "sum", "Y": "omit"}),
    }
