"""Simulated Standard Fairness Models with known effects, for ``fit_sfm``.

``tests/test_sfm.py`` checks :func:`counterfair.audit.fit_sfm` against these
truths; ``benchmarks/sfm_truth.py`` measures the coverage of its intervals over repeated
data sets. Every scenario is an SCM of the Standard Fairness Model's graph, ``Z <-> X``,
``Z -> W``, ``X -> W``, ``{X, Z, W} -> Y``, written out in numpy, with ``X`` taking the
levels ``"0"`` (x0) and ``"1"`` (x1):

* ``a`` (``linear``): ``X ~ Bernoulli(0.4)``, ``Z | X ~ Normal(mu_X, 1)``, ``W`` and
  ``Y`` linear-Gaussian in their parents;
* ``b`` (``occupation``): ``W`` is an occupation with 300 levels whose shares depend on
  ``X`` (a softmax), each level with its own effect on ``Y``;
* ``c`` (``interaction``): as ``a``, with an ``X * W`` term in ``Y`` (effect modification
  by ``X``);
* ``d`` (``nonlinear``): ``Z ~ Uniform(-2, 2)``, ``logit P(X = 1 | z) = -1 + 0.8 z^2``
  (no straight line in ``z`` describes it) and ``Y`` has ``0.7 z^2 + 0.6 sin(1.5 z)``;
* ``e`` (``binary``): as ``a``, with a Bernoulli ``Y`` whose logit is linear; the effects
  are on the probability scale.

The truth of every term is computed from the true SCM's potential outcomes
(:func:`monte_carlo_truth`): for each simulated unit its mediator in both worlds, ``W_x0``
and ``W_x1`` (the unit's own noise, ``X`` set), and the mean of its outcome
``E[y | x, w, z]`` (the outcome's own noise integrated out exactly) in the worlds
``y_x0``, ``y_x1`` and ``y_{x1, W_x0}``; each term is a (conditional) mean of those over
the units. ``a``, ``b`` and ``c`` also have every term in closed form
(:meth:`Scenario.closed_form`), which checks the Monte Carlo.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit, softmax

TERMS: tuple[str, ...] = (
    "TV", "Ctf-DE", "Ctf-IE", "Ctf-SE", "NDE", "NIE", "Exp-SE_x0", "Exp-SE_x1",
)
"""Every term of a decomposition
(:class:`counterfair.audit.decomposition_result.Decomposition`; its ``draws`` columns)."""


@dataclass(frozen=True)
class Units:
    """Simulated units of a scenario: what fixes every potential outcome but ``Y``'s noise.

    Attributes
    ----------
    x : numpy.ndarray
        The factual ``X`` (0 or 1).
    z : numpy.ndarray
        The confounder.
    u_w : numpy.ndarray
        The mediator's exogenous noise (a standard normal, or a uniform for a category).
    """

    x: np.ndarray
    z: np.ndarray
    u_w: np.ndarray


class Scenario:
    """A simulated Standard Fairness Model (subclasses give its equations)."""

    name = ""
    letter = ""
    description = ""
    rows = 3000
    """Rows of a data set in the tests (a few thousand)."""
    confounders: str | None = "Z"
    mediators = "W"

    def units(self, n: int, rng: np.random.Generator) -> Units:
        raise NotImplementedError

    def mediator(self, x: int, units: Units) -> np.ndarray:
        """``W_x`` of every unit (its own noise, ``X`` set to ``x``)."""
        raise NotImplementedError

    def outcome_mean(self, x: int, w: np.ndarray, units: Units) -> np.ndarray:
        """``E[y | X = x, W = w, Z = z]`` of every unit (the outcome's noise integrated)."""
        raise NotImplementedError

    def outcome(self, mean: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The observed ``y`` given its mean (Normal noise by default)."""
        return mean + self.sigma_y * rng.standard_normal(len(mean))

    sigma_y = 0.4

    def closed_form(self) -> dict[str, float] | None:
        """Every term in closed form, when there is one."""
        return None

    def mediator_column(self, w: np.ndarray) -> Any:
        return w

    def data(self, n: int, seed: int) -> pd.DataFrame:
        """``n`` rows of the factual world: columns ``X`` ("0"/"1"), ``Z``, the mediator,
        ``Y``."""
        rng = np.random.default_rng(seed)
        u = self.units(n, rng)
        x1 = u.x == 1
        w = np.where(x1, self.mediator(1, u), self.mediator(0, u))
        mean = np.where(x1, self.outcome_mean(1, w, u), self.outcome_mean(0, w, u))
        y = self.outcome(mean, rng)
        columns: dict[str, Any] = {"X": np.where(x1, "1", "0")}
        if self.confounders:
            columns[self.confounders] = u.z
        columns[self.mediators] = self.mediator_column(w)
        columns["Y"] = y
        return pd.DataFrame(columns)

    def roles(self) -> dict[str, Any]:
        """The roles ``fit_sfm`` is given."""
        return {
            "attribute": "X", "x0": "0", "x1": "1", "outcome": "Y",
            "confounders": self.confounders, "mediators": self.mediators,
        }


def _gaussian_units(n: int, rng: np.random.Generator, p: float, mu0: float, mu1: float) -> Units:
    x = (rng.random(n) < p).astype(int)
    z = rng.normal(np.where(x == 1, mu1, mu0), 1.0)
    return Units(x=x, z=z, u_w=rng.standard_normal(n))


class Linear(Scenario):
    """``W = aW + a X + b Z + sW eW``, ``Y = aY + c X + d W + f Z + e X W + sY eY``.

    With ``Z | X ~ Normal(mu_X, 1)`` (so ``logit P(X = 1 | z)`` is linear in ``z``) every
    term is a closed form of the coefficients: a unit's ``y_{x1, W_x0} - y_x0`` is
    ``c + e W_x0`` and ``y_{x1, W_x0} - y_x1`` is ``-(d + e) a``; the spurious terms move
    ``Z``'s mean between the groups.
    """

    name, letter = "linear", "a"
    description = "linear-Gaussian SFM: confounder Z, mediator W"
    p, mu0, mu1 = 0.4, -0.3, 0.5
    aw, a, b, sigma_w = 0.2, 1.0, 0.5, 0.5
    ay, c, d, f, e = -0.1, 0.6, 0.8, 0.3, 0.0

    def units(self, n: int, rng: np.random.Generator) -> Units:
        return _gaussian_units(n, rng, self.p, self.mu0, self.mu1)

    def mediator(self, x: int, units: Units) -> np.ndarray:
        return self.aw + self.a * x + self.b * units.z + self.sigma_w * units.u_w

    def eta(self, x: int, w: np.ndarray, units: Units) -> np.ndarray:
        return self.ay + self.c * x + self.d * w + self.f * units.z + self.e * x * w

    def outcome_mean(self, x: int, w: np.ndarray, units: Units) -> np.ndarray:
        return self.eta(x, w, units)

    def closed_form(self) -> dict[str, float]:
        ez = self.p * self.mu1 + (1 - self.p) * self.mu0
        d1 = self.d + self.e  # the slope of y on W in the world x1
        spurious0 = self.d * self.b + self.f  # Z's total effect on y in the world x0
        spurious1 = d1 * self.b + self.f
        out = {
            "Ctf-DE": self.c + self.e * (self.aw + self.b * self.mu0),
            "Ctf-IE": -d1 * self.a,
            "Ctf-SE": spurious1 * (self.mu0 - self.mu1),
            "NDE": self.c + self.e * (self.aw + self.b * ez),
            "NIE": -d1 * self.a,
            "Exp-SE_x0": spurious0 * (self.mu0 - ez),
            "Exp-SE_x1": spurious1 * (self.mu1 - ez),
        }
        out["TV"] = out["Ctf-DE"] - out["Ctf-IE"] - out["Ctf-SE"]
        return out


class Interaction(Linear):
    name, letter = "interaction", "c"
    description = "X x W interaction in Y (effect modification by X)"
    e = 0.5


class Binary(Linear):
    """As :class:`Linear`, with ``P(y = 1) = expit(aY + c X + d W + f Z)``."""

    name, letter = "binary", "e"
    description = "binary Y (logistic truth), effects on the probability scale"
    ay, c, d, f = -0.5, 0.8, 0.9, 0.4

    def outcome_mean(self, x: int, w: np.ndarray, units: Units) -> np.ndarray:
        return expit(self.eta(x, w, units))

    def outcome(self, mean: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return (rng.random(len(mean)) < mean).astype(int)

    def closed_form(self) -> None:
        return None


class Occupation(Scenario):
    """An occupation of 300 levels whose shares depend on ``X``.

    ``P(W = k | X = x) = softmax(beta + x delta)_k`` (``W`` depends on ``X`` only),
    ``Y = aY + c X + theta_W + f Z + sY eY`` with ``theta_k`` partly aligned with
    ``delta_k`` (the occupations ``x1`` takes up pay differently), ``Z | X`` as in
    :class:`Linear`. The level parameters are drawn once from a fixed generator (they are
    the scenario, not its data). Closed form: the direct effect is ``c``, the indirect one
    ``sum_k theta_k (P(k | x0) - P(k | x1))``.
    """

    name, letter = "occupation", "b"
    description = "mediator with 300 levels (partially pooled group effect)"
    rows = 4000
    mediators = "occupation"
    levels = 300
    p, mu0, mu1 = 0.45, -0.25, 0.25
    ay, c, f, sigma_y = 0.3, 0.5, 0.4, 0.5

    def __init__(self) -> None:
        rng = np.random.default_rng(20240601)  # literal seed: fixed parameters
        k = self.levels
        self.beta = rng.normal(0.0, 0.7, k)
        self.delta = rng.normal(0.0, 1.0, k)
        self.theta = 0.6 * self.delta + rng.normal(0.0, 0.3, k)
        self.shares = {x: softmax(self.beta + x * self.delta) for x in (0, 1)}
        self._cdf = {x: np.cumsum(s) for x, s in self.shares.items()}

    def units(self, n: int, rng: np.random.Generator) -> Units:
        x = (rng.random(n) < self.p).astype(int)
        z = rng.normal(np.where(x == 1, self.mu1, self.mu0), 1.0)
        return Units(x=x, z=z, u_w=rng.random(n))

    def mediator(self, x: int, units: Units) -> np.ndarray:
        # inverse CDF of the unit's own uniform: the same noise in both worlds
        k = np.searchsorted(self._cdf[x], units.u_w, side="right")
        return np.minimum(k, self.levels - 1)

    def outcome_mean(self, x: int, w: np.ndarray, units: Units) -> np.ndarray:
        return self.ay + self.c * x + self.theta[w] + self.f * units.z

    def mediator_column(self, w: np.ndarray) -> Any:
        return np.char.add("occ", np.char.zfill(w.astype(str), 3))

    def closed_form(self) -> dict[str, float]:
        ez = self.p * self.mu1 + (1 - self.p) * self.mu0
        mediated = float(self.theta @ (self.shares[0] - self.shares[1]))
        out = {
            "Ctf-DE": self.c,
            "Ctf-IE": mediated,
            "Ctf-SE": self.f * (self.mu0 - self.mu1),
            "NDE": self.c,
            "NIE": mediated,
            "Exp-SE_x0": self.f * (self.mu0 - ez),
            "Exp-SE_x1": self.f * (self.mu1 - ez),
        }
        out["TV"] = out["Ctf-DE"] - out["Ctf-IE"] - out["Ctf-SE"]
        return out


class Nonlinear(Scenario):
    """``Z ~ Uniform(-2, 2)``, ``logit P(X = 1 | z) = -1 + 0.8 z^2``,
    ``W = 0.2 + X + 0.5 z + 0.5 eW``,
    ``Y = -0.1 + 0.6 X + 0.8 W + 0.7 z^2 + 0.6 sin(1.5 z) + 0.4 eY``.

    ``X`` depends on ``z^2`` alone, so ``E[z | x]`` is 0 in both groups: a straight line in
    ``z`` would find no confounding at all, and every spurious term comes from the curves.
    """

    name, letter = "nonlinear", "d"
    description = "nonlinear confounder: X on z^2, Y on z^2 and sin(1.5 z)"

    def units(self, n: int, rng: np.random.Generator) -> Units:
        z = rng.uniform(-2.0, 2.0, n)
        x = (rng.random(n) < expit(-1.0 + 0.8 * z**2)).astype(int)
        return Units(x=x, z=z, u_w=rng.standard_normal(n))

    def mediator(self, x: int, units: Units) -> np.ndarray:
        return 0.2 + 1.0 * x + 0.5 * units.z + 0.5 * units.u_w

    def outcome_mean(self, x: int, w: np.ndarray, units: Units) -> np.ndarray:
        z = units.z
        return -0.1 + 0.6 * x + 0.8 * w + 0.7 * z**2 + 0.6 * np.sin(1.5 * z)


class NoConfounder(Linear):
    """As :class:`Linear` with no confounder: ``X ~ Bernoulli(0.4)`` independent of the
    noises, ``W = aW + a X + sW eW``, ``Y = aY + c X + d W + sY eY``; nothing is spurious."""

    name, letter = "no confounder", "-"
    description = "no confounder: X independent of everything it does not cause"
    confounders = None
    b = f = 0.0
    mu0 = mu1 = 0.0


SCENARIOS: dict[str, Scenario] = {
    s.letter: s for s in (Linear(), Occupation(), Interaction(), Nonlinear(), Binary())
}
"""The scenarios by letter, ``a`` to ``e``."""


def terms_of_units(scenario: Scenario, units: Units) -> dict[str, float]:
    """Every term over ``units``, from their potential outcomes' means."""
    w0, w1 = scenario.mediator(0, units), scenario.mediator(1, units)
    m00 = scenario.outcome_mean(0, w0, units)  # y_x0
    m11 = scenario.outcome_mean(1, w1, units)  # y_x1
    m10 = scenario.outcome_mean(1, w0, units)  # y_{x1, W_x0}
    g1 = units.x == 1
    g0 = ~g1
    return {
        "TV": m11[g1].mean() - m00[g0].mean(),
        "Ctf-DE": m10[g0].mean() - m00[g0].mean(),
        "Ctf-IE": m10[g0].mean() - m11[g0].mean(),
        "Ctf-SE": m11[g0].mean() - m11[g1].mean(),
        "NDE": m10.mean() - m00.mean(),
        "NIE": m10.mean() - m11.mean(),
        "Exp-SE_x0": m00[g0].mean() - m00.mean(),
        "Exp-SE_x1": m11[g1].mean() - m11.mean(),
    }


def monte_carlo_truth(
    scenario: Scenario,
    n: int = 1_000_000,
    *,
    batches: int = 20,
    seed: int = 7,  # literal seed: a population truth, the same under every shift
) -> pd.DataFrame:
    """Every term of the population, by the true SCM's potential outcomes on ``n`` units.

    The units come in ``batches`` independent batches; the truth is the batches' mean and
    ``se`` its Monte Carlo standard error (the batches' sd over ``sqrt(batches)``).
    Returns a frame indexed by term with columns ``truth`` and ``se``.
    """
    rng = np.random.default_rng(seed)
    size = n // batches
    rows = [terms_of_units(scenario, scenario.units(size, rng)) for _ in range(batches)]
    table = pd.DataFrame(rows, columns=list(TERMS))
    return pd.DataFrame(
        {"truth": table.mean(), "se": table.std(ddof=1) / np.sqrt(batches)}, index=list(TERMS)
    )


def truth(scenario: Scenario, n: int = 1_000_000) -> pd.Series:
    """The population value of every term: the closed form where there is one, else the
    Monte Carlo of :func:`monte_carlo_truth` (its standard error is below 0.004 for every term)."""
    exact = scenario.closed_form()
    if exact is not None:
        return pd.Series(exact)[list(TERMS)]
    return monte_carlo_truth(scenario, n)["truth"]


def sfm_programs() -> dict[str, str]:
    """The Stan programs of the scenarios' nuisance models, by name (one per shape), for
    the suite's up-front compilation (``tests/_models.stan_programs``)."""
    from counterfair.audit.sfm_models import nuisance_scm, sfm_frame
    from counterfair.audit.sfm_roles import check_sfm_roles

    programs: dict[str, str] = {}
    for scenario in (*SCENARIOS.values(), NoConfounder(), Chain()):
        data = scenario.data(500, seed=0)  # literal seed: only the programs' shapes
        roles = check_sfm_roles(data, **scenario.roles())
        encoded = sfm_frame(data, roles)
        for which in ("outcome", "attribute") if roles.confounders else ("outcome",):
            every = np.ones(len(encoded), dtype=bool)
            scm = nuisance_scm(roles, encoded, which, every, name=which, groups="encoded")[0]
            code = scm.stan_code()
            if code not in programs.values():
                programs[f"sfm {scenario.name}, {which}"] = code
    return programs


class Chain:
    """Two confounders and two mediators in a chain, for ``SFMFit.split``: every part of the
    split spurious and indirect effects in closed form.

    ``X ~ Bernoulli(p)``; ``Z1 | X ~ Normal(a1 X, 1)``, ``Z2 | X, Z1 ~ Normal(bz Z1 + a2 X,
    1)`` (generated from ``X``, so that ``P(z | x)`` is Gaussian with linear means: the
    same observational law as an SFM whose ``X`` and ``Z`` share a latent cause);
    ``W1 = c1 X + d11 Z1 + d12 Z2 + sW e1``, ``W2 = f W1 + c2 X + d21 Z1 + d22 Z2 + sW e2``
    (``W1`` causes ``W2``, independent noises: the split of the indirect effect is
    identified); ``Y = g X + g1 W1 + g2 W2 + k1 Z1 + k2 Z2 + delta X W1 + sY eY``.
    """

    name = "chain"
    confounders = ("Z1", "Z2")
    mediators = ("W1", "W2")
    p, a1, bz, a2 = 0.4, 0.8, 0.5, -0.6
    c1, d11, d12 = 1.0, 0.4, 0.2
    f, c2, d21, d22 = 0.5, -0.8, 0.0, 0.3
    g, g1, g2, k1, k2, delta = 0.5, 0.6, 0.7, 0.5, 0.4, 0.3
    product = 0.0
    """Weight of a ``Z1 * W1`` term in ``Y`` (0 here: :class:`ChainProduct` has one)."""
    sigma_w, sigma_y = 0.5, 0.4

    def _z(self, x: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        z1 = self.a1 * x + e[0]
        return z1, self.bz * z1 + self.a2 * x + e[1]

    def _w1(self, x: Any, z1: np.ndarray, z2: np.ndarray, e: np.ndarray) -> np.ndarray:
        return self.c1 * x + self.d11 * z1 + self.d12 * z2 + self.sigma_w * e

    def _w2(self, x: Any, w1: np.ndarray, z1: np.ndarray, z2: np.ndarray,
            e: np.ndarray) -> np.ndarray:
        return self.f * w1 + self.c2 * x + self.d21 * z1 + self.d22 * z2 + self.sigma_w * e

    def _y(self, x: Any, w1: np.ndarray, w2: np.ndarray, z1: np.ndarray,
           z2: np.ndarray) -> np.ndarray:
        return (self.g * x + self.g1 * w1 + self.g2 * w2 + self.k1 * z1 + self.k2 * z2
                + self.delta * x * w1 + self.product * z1 * w1)

    def data(self, n: int, seed: int) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        x = (rng.random(n) < self.p).astype(int)
        e = rng.standard_normal((5, n))
        z1, z2 = self._z(x, e[:2])
        w1 = self._w1(x, z1, z2, e[2])
        w2 = self._w2(x, w1, z1, z2, e[3])
        y = self._y(x, w1, w2, z1, z2) + self.sigma_y * e[4]
        return pd.DataFrame({"X": np.where(x == 1, "1", "0"), "Z1": z1, "Z2": z2,
                             "W1": w1, "W2": w2, "Y": y})

    def roles(self) -> dict[str, Any]:
        return {"attribute": "X", "x0": "0", "x1": "1", "outcome": "Y",
                "confounders": list(self.confounders), "mediators": list(self.mediators)}

    def closed_form(self) -> dict[str, float]:
        """Each part, named as the columns of
        :attr:`counterfair.audit.split_result.EffectSplit.draws`, with
        the confounders and the mediators moved in their order."""
        if self.product:
            raise ValueError("a Z1 * W1 term has no closed form here: use monte_carlo")
        h1 = self.g1 + self.delta  # y's slope on W1 in the world x1
        through_w1 = h1 + self.g2 * self.f  # W1's total effect on y in the world x1
        big_h1 = through_w1 * self.d11 + self.g2 * self.d21 + self.k1  # E[y | x1, z]'s slopes
        big_h2 = through_w1 * self.d12 + self.g2 * self.d22 + self.k2
        return {
            "Ctf-SE[Z1]": -self.a1 * (big_h1 + big_h2 * self.bz),
            "Ctf-SE[Z2]": -big_h2 * self.a2,
            "Ctf-IE[W1]": -through_w1 * self.c1,
            "Ctf-IE[W2]": -self.g2 * self.c2,
        }

    def monte_carlo(self, n: int, seed: int) -> dict[str, float]:
        """The same parts and the two effects from the SCM's potential outcomes on ``n``
        units, with no algebra: ``T_1`` puts ``W1`` at its value under ``x0`` and ``W2``
        at ``W2_{x1, W1_x0}`` (the unit's own noise); ``Q_1`` gives each unit of ``x0``
        the ``Z2`` it would have by ``Z2``'s law given ``x1`` and its own ``Z1``, and
        averages ``y`` over the mediators' noise with ``X = x1``."""
        rng = np.random.default_rng(seed)
        x = (rng.random(n) < self.p).astype(int)
        e = rng.standard_normal((4, n))
        z1, z2 = self._z(x, e[:2])
        on0 = x == 0

        def y_x1(idx: np.ndarray, z2_: np.ndarray, w1_at: int = 1) -> np.ndarray:
            """y with X = x1 (W1 with X = w1_at), the units ``idx``'s own noises."""
            w1 = self._w1(w1_at, z1[idx], z2_, e[2][idx])
            w2 = self._w2(1 if w1_at == 1 else 0, w1, z1[idx], z2_, e[3][idx])
            return self._y(1, w1, w2, z1[idx], z2_)

        def y_x1_w1_x0(idx: np.ndarray) -> np.ndarray:
            """W1 at its value under x0, W2 = W2_{x1, W1_x0}."""
            w1 = self._w1(0, z1[idx], z2[idx], e[2][idx])
            w2 = self._w2(1, w1, z1[idx], z2[idx], e[3][idx])
            return self._y(1, w1, w2, z1[idx], z2[idx])

        idx0, idx1 = np.flatnonzero(on0), np.flatnonzero(~on0)
        q0 = y_x1(idx1, z2[idx1]).mean()  # E[y_x1 | x1]
        z2_moved = self.bz * z1[idx0] + self.a2 * 1 + e[1][idx0]  # Z2 by its law given x1
        q1 = y_x1(idx0, z2_moved).mean()
        b = y_x1(idx0, z2[idx0]).mean()  # E[y_x1 | x0]
        t1 = y_x1_w1_x0(idx0).mean()
        a = y_x1(idx0, z2[idx0], w1_at=0).mean()  # E[y_{x1, W_x0} | x0]: both at x0
        return {
            "Ctf-SE[Z1]": q1 - q0, "Ctf-SE[Z2]": b - q1,
            "Ctf-IE[W1]": t1 - b, "Ctf-IE[W2]": a - t1,
            "Ctf-SE": b - q0, "Ctf-IE": a - b,
        }


class ChainProduct(Chain):
    """:class:`Chain` with a ``0.3 Z1 W1`` term in ``Y``: a truth the SFM's additive outcome
    model does not assume (each covariate enters alone, crossed with ``X`` only), for
    measuring what the split is worth when the model is wrong (the truth by
    :meth:`Chain.monte_carlo`)."""

    name = "chain_product"
    product = 0.3
