"""Two latents per row integrated out together (``SCM.fit(latents="integrated")``, issue 32).

* the C++ product rule against brute-force integration on a 2-D grid, for every family
  it covers (Normal, Poisson, negative binomial, Bernoulli, ordinal);
* its exact draws against the brute-force posterior of a row;
* a NUTS fit of two latents sharing a Poisson child: the integrated and the joint fits
  agree, and the true parameters are recovered;
* which latents are integrated together, and the errors (which latent, why).
"""

from __future__ import annotations

import functools
import logging
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _models import PAIR_ACCURACY_PROGRAM, dag
from _seeds import shifted
from scipy import special, stats

import counterfair as cf
from counterfair import errors
from counterfair.stan import integrated, integrated_pairs
from counterfair.stan.codegen import fit_program

pytestmark = pytest.mark.toy_latents  # the small SCMs' weak identification is expected

CUTS = np.array([-1.0, 0.0, 1.5])
PHI = 3.0


# ---------------------------------------------------------------------- brute force
def _log_density(family: int, y: int, eta: np.ndarray, phi: float) -> np.ndarray:
    """A child's log density at ``eta`` (any shape), by the references' formulas."""
    if family == 1:
        return np.asarray(stats.poisson.logpmf(y, np.exp(eta)))
    if family == 2:
        mu = np.exp(eta)
        return np.asarray(stats.nbinom.logpmf(y, phi, phi / (phi + mu)))
    if family == 3:
        return np.asarray(special.log_expit(eta) if y == 1 else special.log_expit(-eta))
    if family == 4:
        upper = np.concatenate([CUTS, [np.inf]])[y - 1]
        lower = np.concatenate([[-np.inf], CUTS])[y - 1]
        return np.asarray(np.log(special.expit(eta - lower) - special.expit(eta - upper)))
    assert family == integrated_pairs.NORMAL_CODE  # eta holds mu - y
    return np.asarray(stats.norm.logpdf(eta, scale=phi))


def _log_integrand(row: dict[str, Any], z1: np.ndarray, z2: np.ndarray) -> np.ndarray:
    out = stats.norm.logpdf(z1) + stats.norm.logpdf(z2)
    for c, family in enumerate(row["family"]):
        eta = row["eta"][c] + row["load1"][c] * z1 + row["load2"][c] * z2
        out = out + _log_density(family, row["y"][c], eta, row["phi"][c])
    return np.asarray(out)


def _grid(row: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A fine grid 8 units either side of the peak (the posterior sds are at most 1):
    axes and the log integrand on them."""
    coarse = np.linspace(-12.0, 12.0, 241)
    logs = _log_integrand(row, coarse[:, None], coarse[None, :])
    i, j = np.unravel_index(np.argmax(logs), logs.shape)
    a = np.linspace(coarse[i] - 8.0, coarse[i] + 8.0, 1201)
    b = np.linspace(coarse[j] - 8.0, coarse[j] + 8.0, 1201)
    return a, b, _log_integrand(row, a[:, None], b[None, :])


def _brute_force(row: dict[str, Any]) -> float:
    a, b, logs = _grid(row)
    top = logs.max()
    # the integrand is negligible at the grid's edges: the plain sum is the trapezoid rule
    return float(top + np.log(np.exp(logs - top).sum() * (a[1] - a[0]) * (b[1] - b[0])))


def _rows() -> list[dict[str, Any]]:
    """Rows of three children: a Normal one measuring the first latent strongly, a child
    of the family under test on both latents, and a Poisson child of the second; loadings
    per sd of the latents up to 0.3 on the non-Normal children, predictors 3 units either
    side of the data."""
    rows = []
    ys = {1: (0, 3, 40), 2: (0, 7, 30), 3: (0, 1), 4: (1, 2, 4)}
    for family, values in ys.items():
        for y in values:
            centre = np.log(y + 0.5) if family in (1, 2) else 0.0
            for offset in (-3.0, 0.0, 3.0):
                for load in (0.05, 0.3):
                    rows.append(
                        {
                            "family": [integrated_pairs.NORMAL_CODE, family, 1],
                            "y": [0, y, 4],
                            "eta": [offset / 3, centre + offset, np.log(4.5) - 1.0],
                            "load1": [0.9, load, 0.0],
                            "load2": [0.2, -load, load],
                            "phi": [0.5, PHI, 1.0],
                        }
                    )
    return rows


def _program_data(rows: list[dict[str, Any]], nodes: int, draws: int = 1) -> dict[str, Any]:
    family = rows[0]["family"]
    assert all(r["family"] == family for r in rows)
    return {
        "N": len(rows),
        "C": len(family),
        "y": [r["y"] for r in rows],
        "eta": np.array([r["eta"] for r in rows]),
        "load1": np.array([r["load1"] for r in rows]),
        "load2": np.array([r["load2"] for r in rows]),
        "family": family,
        "phi": rows[0]["phi"],
        "n_cuts": 3,
        "cuts": CUTS,
        "cut_start": [1] * len(family),
        "cut_len": [3 if f == 4 else 0 for f in family],
        "D": draws,
        **integrated_pairs.pair_quadrature_data(nodes),
    }


def _run(data: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    import cmdstanpy

    from counterfair.stan.cmdstan_adapter import executable

    exe, _ = executable(PAIR_ACCURACY_PROGRAM)
    model = cmdstanpy.CmdStanModel(exe_file=str(exe))
    run = model.sample(
        data=data,
        fixed_param=True,
        iter_sampling=1,
        chains=1,
        seed=shifted(11),
        show_progress=False,
        sig_figs=18,
    )
    return np.asarray(run.stan_variable("ll"))[0], np.asarray(run.stan_variable("z"))[0]


def _by_family() -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for row in _rows():
        out.setdefault(row["family"][1], []).append(row)
    return out


@functools.cache
def _exact() -> dict[int, np.ndarray]:
    """Each family's rows' brute-force log marginals."""
    return {
        family: np.array([_brute_force(r) for r in rows]) for family, rows in _by_family().items()
    }


def _errors(nodes: int) -> dict[int, float]:
    """The worst error per family of the rule with ``nodes`` per axis."""
    out = {}
    for family, rows in _by_family().items():
        values, _ = _run(_program_data(rows, nodes))
        out[family] = float(np.max(np.abs(values - _exact()[family])))
    return out


@pytest.mark.stan
def test_the_pair_quadrature_is_within_1e6_of_brute_force_for_every_family(
    stan_backend: str,
) -> None:
    """The default rule (PAIR_NODES per axis, PAIR_NEWTON steps) is within 1e-6 of a
    brute-force 2-D integral on every row; three nodes per axis are not, so the test can
    fail."""
    if stan_backend != "cmdstanpy":
        pytest.skip("the quadrature is C++ compiled into CmdStan programs")
    worst = _errors(integrated_pairs.PAIR_NODES)
    assert max(worst.values()) < 1e-6, worst
    assert max(_errors(3).values()) > 1e-6


@pytest.mark.stan
def test_the_pairs_exact_draws_follow_its_posterior(stan_backend: str) -> None:
    """100,000 draws of one row's (z1, z2): each margin's Kolmogorov-Smirnov distance to the
    brute-force posterior margin is within the 0.1 % bound, and the same draws shifted by
    0.05 are not (two margins at 1 % each once failed by chance at one CI seed shift)."""
    if stan_backend != "cmdstanpy":
        pytest.skip("the draws are C++ compiled into CmdStan programs")
    row = {
        "family": [integrated_pairs.NORMAL_CODE, 1, 3],
        "y": [0, 9, 1],
        "eta": [0.4, 1.5, -0.5],
        "load1": [0.8, 0.3, 0.5],
        "load2": [0.3, -0.4, 0.9],
        "phi": [0.7, 1.0, 1.0],
    }
    _, z = _run(_program_data([row], integrated_pairs.PAIR_NODES, draws=100_000))
    assert np.isfinite(z).all()
    a, b, logs = _grid(row)
    density = np.exp(logs - logs.max())

    def ks_distance(draws: np.ndarray, axis: np.ndarray, cdf: np.ndarray) -> float:
        """Two-sided: the empirical CDF just after and just before each sorted draw."""
        model = np.interp(draws, axis, cdf)
        after = np.arange(1, len(draws) + 1) / len(draws)
        return float(max(np.max(after - model), np.max(model - (after - 1 / len(draws)))))

    for k, (axis, margin) in enumerate(((a, density.sum(axis=1)), (b, density.sum(axis=0)))):
        cdf = (np.cumsum(margin) - 0.5 * margin) / margin.sum()  # at the cells' centres
        draws = np.sort(z[:, k])
        bound = 1.949 / np.sqrt(len(draws))  # Kolmogorov's 0.1 % critical value
        ks = ks_distance(draws, axis, cdf)
        assert ks < bound, (k, ks)
        assert ks_distance(draws + 0.05, axis, cdf) > bound, k


# ---------------------------------------------------------------------- a fit
def pair_scm() -> cf.SCM:
    """U measured by X1, X2 (Normal), W by Y1, Y2 (Normal) and B (Bernoulli); both load
    on the count P."""
    return cf.SCM(
        dag(
            {
                "A": cf.Protected(levels=("a", "b")),
                "U": cf.Latent(),
                "W": cf.Latent(),
                "X1": cf.Normal(),
                "X2": cf.Normal(),
                "Y1": cf.Normal(),
                "Y2": cf.Normal(),
                "B": cf.Bernoulli(),
                "P": cf.Poisson(),
            },
            [
                ("A", "X1"),
                ("U", "X1"),
                ("U", "X2"),
                ("W", "Y1"),
                ("A", "Y2"),
                ("W", "Y2"),
                ("W", "B"),
                ("A", "P"),
                ("U", "P"),
                ("W", "P"),
            ],
        )
    )


TRUTH = {
    "lambda_X1_U": 0.8,
    "lambda_X2_U": 0.6,
    "lambda_Y1_W": 0.7,
    "lambda_Y2_W": 0.5,
    "lambda_B_W": 1.0,
    "lambda_P_U": 0.4,
    "lambda_P_W": -0.3,
    "alpha_P": 1.0,
    "beta_P_A[b]": 0.3,
}


def pair_data(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, n)
    u, w = rng.normal(size=n), rng.normal(size=n)
    t = TRUTH
    return pd.DataFrame(
        {
            "A": np.where(a == 1, "b", "a"),
            "X1": 0.3 + 0.5 * a + t["lambda_X1_U"] * u + rng.normal(0, 0.5, n),
            "X2": t["lambda_X2_U"] * u + rng.normal(0, 0.5, n),
            "Y1": t["lambda_Y1_W"] * w + rng.normal(0, 0.5, n),
            "Y2": -0.4 * a + t["lambda_Y2_W"] * w + rng.normal(0, 0.5, n),
            "B": rng.binomial(1, special.expit(t["lambda_B_W"] * w)),
            "P": rng.poisson(
                np.exp(t["alpha_P"] + t["beta_P_A[b]"] * a + t["lambda_P_U"] * u
                       + t["lambda_P_W"] * w)
            ),
        }
    )


@pytest.mark.stan
@pytest.mark.slow  # over 2 minutes in CI (a fit of its own): pytest -m slow
def test_a_pair_fit_agrees_with_the_joint_fit_and_recovers_the_truth(stan_backend: str) -> None:
    if stan_backend != "cmdstanpy":
        pytest.skip("the quadrature is C++ compiled into CmdStan programs")
    data = pair_data(400, shifted(21))
    fits = {}
    for mode in ("integrated", "joint"):
        with warnings.catch_warnings():
            # short chains of a small model: R-hat is checked below, against 1.05
            warnings.simplefilter("ignore", errors.ConvergenceWarning)
            fits[mode] = pair_scm().fit(
                data, chains=2, warmup=400, draws=400, seed=shifted(22), latents=mode,
                progress=False,
            )
        assert fits[mode].diagnostics.max_rhat < 1.05, (mode, fits[mode].diagnostics)
    mine, joint = fits["integrated"], fits["joint"]
    assert mine.integrated == ("U", "W")
    names = list(TRUTH)
    post, other = mine.idata.posterior, joint.idata.posterior
    for name in names:
        base, _, level = name.partition("[")
        values = post[base].values
        others = other[base].values
        if level:
            values, others = values[..., 0], others[..., 0]
        sd = others.std()
        # the two fits sample one posterior: their means within 0.3 posterior sd (each
        # mean's Monte Carlo error is about 0.05 sd at these draws)
        assert abs(values.mean() - others.mean()) < 0.3 * sd, (name, values.mean(), others.mean())
        assert abs(values.std() / sd - 1) < 0.25, (name, values.std(), sd)
        # and the truth within 4 posterior sds
        assert abs(values.mean() - TRUTH[name]) < 4 * values.std(), (name, values.mean())
    # both latents per row, drawn given each draw's parameters, as the joint fit has them
    for latent in ("U", "W"):
        assert post[latent].shape == other[latent].shape
        assert np.isfinite(post[latent].values).all()
        mean_mine = post[latent].values.mean(axis=(0, 1))
        mean_joint = other[latent].values.mean(axis=(0, 1))
        assert np.corrcoef(mean_mine, mean_joint)[0, 1] > 0.99


# ---------------------------------------------------------------------- options and errors
def _three_latents() -> cf.SCM:
    return cf.SCM(
        dag(
            {
                "A": cf.Protected(levels=("a", "b")),
                "U": cf.Latent(),
                "V": cf.Latent(),
                "W": cf.Latent(),
                "X": cf.Normal(),
                "P": cf.Poisson(),
                "Q": cf.Poisson(),
            },
            [("A", "X"), ("U", "X"), ("U", "P"), ("V", "P"), ("V", "Q"), ("W", "Q")],
        )
    )


def test_two_latents_sharing_a_child_are_integrated_together() -> None:
    scm = pair_scm()
    assert integrated.pair_of(scm, "W") == ("U", "W")
    assert integrated.integrated_latents(scm, "integrated", "cmdstanpy") == ("U", "W")
    code = fit_program(scm, integrate=["U", "W"])
    assert "cf_integrated2(Y_U_W" in code and "cf_integrated2_rng(Y_U_W" in code
    assert "vector[N] U;" in code.split("generated quantities")[1]
    assert "U ~ std_normal()" not in code and "z_U" not in code.split("generated")[0]
    # every child of either latent enters the pair's quadrature, Normal ones included
    assert "{7, 7, 7, 7, 3, 1}" in code


def test_more_than_two_latents_per_row_are_named_with_the_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    scm = _three_latents()
    with pytest.raises(
        ValueError,
        match=r"latent 'U' cannot be integrated out: its partner 'V' shares children with "
        r"\['W'\] too \(more than two latents per row\)",
    ):
        integrated.integrated_latents(scm, "integrated", "cmdstanpy")
    assert "more than two latents per row" in str(integrated.unsupported_reason(scm, "V"))
    with caplog.at_level(logging.INFO, logger="counterfair.stan.integrated"):
        assert integrated.integrated_latents(scm, "auto", "cmdstanpy") == ()
    assert len(caplog.records) == 3
    with pytest.raises(ValueError, match="latent 'V' cannot be integrated out"):
        fit_program(scm, integrate=["V"])


def test_a_pair_with_a_categorical_child_is_sampled_jointly_with_its_reason() -> None:
    scm = cf.SCM(
        dag(
            {
                "A": cf.Protected(levels=("a", "b")),
                "U": cf.Latent(),
                "W": cf.Latent(),
                "P": cf.Poisson(),
                "K": cf.Categorical(levels=("x", "y", "z")),
            },
            [("A", "P"), ("U", "P"), ("W", "P"), ("W", "K")],
        )
    )
    for latent in ("U", "W"):
        reason = integrated.unsupported_reason(scm, latent)
        assert reason is not None and "the child 'K' of 'W' has family 'categorical'" in reason
    assert integrated.integrated_latents(scm, "auto", "cmdstanpy") == ()
    with pytest.raises(ValueError, match="latent 'U' cannot be integrated out: the child 'K'"):
        integrated.integrated_latents(scm, "integrated", "cmdstanpy")
