"""Latents integrated out of the fit (``SCM.fit(latents="integrated")``, issue 32).

* the C++ quadrature against brute-force integration, row by row, for every family;
* the native library (LOO, the node check) against the program: one implementation;
* a NUTS fit of a model with every covered family: the true parameters are recovered,
  and the training rows' latents drawn in the program agree with exact abduction;
* the law school level 2 SCM: the integrated and the joint fits agree within 4 MCSE;
* the options and the errors (which latent, why), and a saved fit read back.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _data import DATA_DIR, needs_data
from _models import ACCURACY_PROGRAM, dag
from _seeds import shifted
from scipy import special, stats

import counterfair as cf
from counterfair import errors
from counterfair.datasets.law_school_models import law_school_level2
from counterfair.stan import integrated
from counterfair.stan.codegen import fit_program

pytestmark = pytest.mark.toy_latents  # the small SCMs' weak identification is expected

LEVELS = ("1", "2", "3", "4")


# ---------------------------------------------------------------------- a model of every family
def every_family_scm() -> cf.SCM:
    """U (anchored by the Normal X) with Poisson, negative binomial, Bernoulli and ordinal
    children; V (no Normal child) with a Poisson and a Bernoulli child."""
    return cf.SCM(
        dag(
            {
                "A": cf.Protected(levels=("a", "b")),
                "U": cf.Latent(),
                "V": cf.Latent(),
                "X": cf.Normal(),
                "P": cf.Poisson(),
                "NB": cf.NegativeBinomial(),
                "B": cf.Bernoulli(),
                "O": cf.Ordinal(levels=LEVELS),
                "Q": cf.Poisson(),
                "D": cf.Bernoulli(),
            },
            [
                ("A", "X"),
                ("U", "X"),
                ("A", "P"),
                ("U", "P"),
                ("A", "NB"),
                ("U", "NB"),
                ("A", "B"),
                ("U", "B"),
                ("A", "O"),
                ("U", "O"),
                ("A", "Q"),
                ("V", "Q"),
                ("A", "D"),
                ("V", "D"),
            ],
        )
    )


TRUTH: dict[str, Any] = {
    "alpha_X": 0.2,
    "beta_X_A": [0.5],
    "lambda_X_U": 0.8,
    "sigma_X": 0.6,
    "alpha_P": 1.5,
    "beta_P_A": [-0.3],
    "lambda_P_U": 0.4,
    "alpha_NB": 1.0,
    "beta_NB_A": [0.4],
    "lambda_NB_U": -0.5,
    "phi_NB": 4.0,
    "alpha_B": -0.2,
    "beta_B_A": [0.6],
    "lambda_B_U": 1.0,
    "beta_O_A": [-0.4],
    "lambda_O_U": 0.9,
    "cutpoints_O": [-1.0, 0.2, 1.3],
    "alpha_Q": 0.8,
    "beta_Q_A": [0.3],
    "lambda_Q_V": 0.5,
    "alpha_D": 0.1,
    "beta_D_A": [-0.5],
    "lambda_D_V": 1.2,
}


def _assert_within_4_sd(fit: cf.Fit, truth: dict[str, Any]) -> None:
    """Every true parameter lies within 4 posterior sd of the fit's mean."""
    draws = fit.params()
    for name, value in truth.items():
        values = np.asarray(draws[name]).reshape(draws.n, -1)
        mean, sd = values.mean(axis=0), values.std(axis=0)
        z = np.abs(mean - np.ravel(value)) / sd
        assert np.all(z < 4.0), (name, mean, value, sd)


@pytest.fixture(scope="module")
def every_family_fit(stan_backend: str) -> tuple[cf.Fit, pd.DataFrame]:
    scm = every_family_scm()
    data = scm.sample(1500, params=TRUTH, seed=shifted(5))
    with warnings.catch_warnings():  # R-hat of 1.02 at 2 x 300 draws is no matter here
        warnings.simplefilter("ignore", errors.IdentificationWarning)
        warnings.simplefilter("ignore", errors.ConvergenceWarning)
        fit = scm.fit(
            data.drop(columns=["U", "V"]),
            chains=2,
            warmup=300,
            draws=300,
            seed=shifted(3),
            latents="integrated",
        )
    return fit, data


# ---------------------------------------------------------------------- quadrature accuracy
def _log_density(
    family: int, y: np.ndarray, eta: np.ndarray, phi: float, cuts: np.ndarray
) -> np.ndarray:
    """Each family's log density at ``eta`` (rows x grid), the formulas of the references."""
    if family == 1:
        return stats.poisson.logpmf(y, np.exp(eta))
    if family == 2:
        mu = np.exp(eta)
        return stats.nbinom.logpmf(y, phi, phi / (phi + mu))
    if family == 3:
        return np.where(y == 1, special.log_expit(eta), special.log_expit(-eta))
    upper = np.concatenate([cuts, [np.inf]])[y - 1]
    lower = np.concatenate([[-np.inf], cuts])[y - 1]
    return np.log(special.expit(eta - lower) - special.expit(eta - upper))


def _brute_force(
    family: int, y: np.ndarray, eta: np.ndarray, load: np.ndarray, phi: float, cuts: np.ndarray
) -> np.ndarray:
    """log of the integral over z of p(y | eta + load z) N(z | 0, 1), on a fine grid 15 units
    either side of the integrand's peak (the posterior sd of z is at most 1)."""

    def log_density(i: int, z: np.ndarray) -> np.ndarray:
        return _log_density(family, np.full(z.shape, y[i]), eta[i] + load[i] * z, phi, cuts)

    return _brute_force_rows(len(y), log_density)


def _categorical_log_density(
    y: np.ndarray, eta: np.ndarray, load: np.ndarray
) -> Any:
    """Row i's log softmax probability of level y[i] (1 the reference) along z; ``eta`` and
    ``load`` hold the non-reference levels' columns."""

    def log_density(i: int, z: np.ndarray) -> np.ndarray:
        logits = eta[i][None, :] + load[i][None, :] * z[:, None]
        logits = np.concatenate([np.zeros((len(z), 1)), logits], axis=1)
        return np.asarray(logits[:, y[i] - 1] - special.logsumexp(logits, axis=1))

    return log_density


def _brute_force_rows(n: int, log_density: Any) -> np.ndarray:
    def log_integrand(i: int, z: np.ndarray) -> np.ndarray:
        return np.asarray(log_density(i, z)) + stats.norm.logpdf(z)

    coarse = np.linspace(-80.0, 80.0, 16_001)
    out = np.empty(n)
    for i in range(n):
        peak = coarse[np.argmax(log_integrand(i, coarse))]
        z = np.linspace(peak - 15.0, peak + 15.0, 60_001)
        logs = log_integrand(i, z)
        top = logs.max()
        weights = np.exp(logs - top)
        dz = z[1] - z[0]
        out[i] = top + np.log(dz * (weights.sum() - 0.5 * (weights[0] + weights[-1])))
    return out


def _quadrature_rows(data: dict[str, Any], variable: str = "ll") -> np.ndarray:
    """Each row's log marginal by the C++ quadrature: ``ll`` row by row, ``ll_together``
    all rows in one call (blocks of 128 rows; rows sharing the first row's loadings)."""
    import cmdstanpy

    from counterfair.stan.cmdstan_adapter import executable

    exe, _ = executable(ACCURACY_PROGRAM)
    model = cmdstanpy.CmdStanModel(exe_file=str(exe))
    run = model.sample(
        data=data,
        fixed_param=True,
        iter_sampling=1,
        chains=1,
        seed=shifted(1),
        show_progress=False,
        sig_figs=18,
    )
    return np.asarray(run.stan_variable(variable))[0]


def _one_child_data(
    family: int, y: np.ndarray, eta: np.ndarray, load: np.ndarray, phi: float, cuts: np.ndarray
) -> dict[str, Any]:
    """Data of the accuracy program for rows of one child of ``family`` (3 cutpoints)."""
    return {
        "N": len(y),
        "C": 1,
        "y": y[:, None].tolist(),
        "eta": eta[:, None],
        "load": load[:, None],
        "family": [family],
        "phi": [phi],
        "n_cuts": 3,
        "cuts": cuts,
        "cut_start": [1],
        "cut_len": [3 if family == 4 else 0],
        **integrated.quadrature_data(),
    }


def _rows_of(family: int, loads: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ys = {1: (0, 1, 3, 12, 40), 2: (0, 2, 7, 30), 3: (0, 1), 4: (1, 2, 3, 4)}[family]
    rows = []
    for load in loads:
        for y in ys:
            centre = np.log(y + 0.5) if family in (1, 2) else 0.0
            for offset in (-3.0, -1.0, 0.0, 1.0, 3.0):
                rows.append((y, centre + offset, load))
    y, eta, load = (np.array(v) for v in zip(*rows, strict=True))
    return y.astype(int), eta, load


@pytest.mark.stan
def test_the_quadrature_is_within_1e6_of_brute_force_for_every_family(stan_backend: str) -> None:
    """For loadings up to 0.3 sd of the latent, predictors 3 units either side of the data,
    the default nodes and Newton steps give each row's log marginal within 1e-6."""
    if stan_backend != "cmdstanpy":
        pytest.skip("the quadrature is C++ compiled into CmdStan programs")
    phi, cuts = 3.0, np.array([-1.0, 0.0, 1.5])
    for family in (1, 2, 3, 4):
        y, eta, load = _rows_of(family, (0.02, 0.1, 0.3))
        quadrature = _quadrature_rows(_one_child_data(family, y, eta, load, phi, cuts))
        exact = _brute_force(family, y, eta, load, phi, cuts)
        error = np.abs(quadrature - exact)
        assert error.max() < 1e-6, (family, error.max(), int(error.argmax()))
    # a categorical child of 4 levels: 3 columns (codes 5, 6, 6), each level observed,
    # logits 3 units either side of 0, loadings of either sign up to 0.3 (largest gap 0.6)
    rng = np.random.default_rng(shifted(4))
    n = 80
    y = np.tile(np.arange(1, 5), n // 4)
    eta = rng.uniform(-3.0, 3.0, size=(n, 3))
    load = rng.uniform(-0.3, 0.3, size=(n, 3))
    data = {
        "N": n,
        "C": 3,
        "y": np.repeat(y[:, None], 3, axis=1).tolist(),
        "eta": eta,
        "load": load,
        "family": [5, 6, 6],
        "phi": [1.0, 1.0, 1.0],
        "n_cuts": 3,
        "cuts": cuts,
        "cut_start": [1, 1, 1],
        "cut_len": [0, 0, 0],
        **integrated.quadrature_data(),
    }
    quadrature = _quadrature_rows(data)
    exact = _brute_force_rows(n, _categorical_log_density(y, eta, load))
    error = np.abs(quadrature - exact)
    assert error.max() < 1e-6, ("categorical", error.max(), int(error.argmax()))


@pytest.mark.stan
def test_a_rows_log_marginal_does_not_depend_on_the_rows_it_is_computed_with(
    stan_backend: str,
) -> None:
    """The quadrature takes rows 128 at a time: 300 rows of every family in one call (three
    blocks, the last one partial, counts of 0 to 40 and predictors 3 units either side
    of the data) give each row the very value it gets alone."""
    if stan_backend != "cmdstanpy":
        pytest.skip("the quadrature is C++ compiled into CmdStan programs")
    phi, cuts = 3.0, np.array([-1.0, 0.0, 1.5])
    for family in (1, 2, 3, 4):
        y, eta, _ = _rows_of(family, (0.3,))
        repeat = -(-300 // len(y))
        y, eta = np.tile(y, repeat)[:300], np.tile(eta, repeat)[:300]
        data = _one_child_data(family, y, eta, np.full(len(y), 0.3), phi, cuts)
        alone = _quadrature_rows(data)
        together = _quadrature_rows(data, "ll_together")
        assert np.isfinite(alone).all(), family
        np.testing.assert_array_equal(together, alone, err_msg=f"family {family}")


# ---------------------------------------------------------------------- one implementation
def _library_rows(
    family: int, y: np.ndarray, eta: np.ndarray, load: np.ndarray, phi: float, cuts: np.ndarray,
    **options: Any,
) -> np.ndarray:
    """The native library's log marginals of rows of one child (one parameter set)."""
    from counterfair.stan import native

    ordinal = family == 4
    return native.log_marginal_rows(
        y=y[:, None],
        eta=eta[None, :, None],
        load=load[None, :, None] if load.ndim == 1 else load,
        family=np.array([family]),
        phi=np.full((1, 1), phi),
        cuts=(cuts if ordinal else np.zeros(0))[None, :],
        cut_len=np.array([len(cuts) if ordinal else 0]),
        nodes=options.pop("nodes", integrated.GH_NODES),
        newton=options.pop("newton", integrated.NEWTON_STEPS),
        **options,
    )[0]


@pytest.mark.stan
def test_the_library_gives_each_row_the_programs_value_for_every_family(
    stan_backend: str,
) -> None:
    """LOO and the node check read the quadrature from the native library; the fit reads it
    in its program. Both compile quadrature.hpp: rows of every family (loadings up to 1,
    one per row) get the same log marginal from both, to rounding."""
    if stan_backend != "cmdstanpy":
        pytest.skip("the quadrature is C++ compiled into CmdStan programs")
    phi, cuts = 3.0, np.array([-1.0, 0.0, 1.5])
    for family in (1, 2, 3, 4):
        y, eta, load = _rows_of(family, (0.02, 0.3, 1.0))
        program = _quadrature_rows(_one_child_data(family, y, eta, load, phi, cuts))
        library = _library_rows(family, y, eta, load, phi, cuts)
        np.testing.assert_allclose(library, program, rtol=1e-13, atol=1e-13, err_msg=str(family))


def test_the_librarys_values_do_not_depend_on_its_threads_or_path() -> None:
    """Five parameter sets on one thread or three give the same values, bit for bit; the
    loadings given per row (the general path) or once (128 rows at a time) agree to
    rounding; categorical columns (codes 5, 6, 6) match brute-force integration."""
    from counterfair.stan import native

    rng = np.random.default_rng(shifted(31))
    n, sets = 300, 5
    y = rng.poisson(4.0, size=(n, 1))
    eta = np.log(y + 0.5)[None] + rng.normal(0.0, 1.0, size=(sets, n, 1))
    load = rng.uniform(0.05, 0.8, size=(sets, 1))
    common = {"family": np.array([1]), "phi": np.ones((sets, 1)), "cuts": np.zeros((sets, 0)),
              "cut_len": np.array([0]), "nodes": 9, "newton": 3}
    one = native.log_marginal_rows(y=y, eta=eta, load=load, threads=1, **common)
    three = native.log_marginal_rows(y=y, eta=eta, load=load, threads=3, **common)
    np.testing.assert_array_equal(one, three)
    per_row = np.broadcast_to(load[:, None, :], (sets, n, 1))
    general = native.log_marginal_rows(y=y, eta=eta, load=per_row, threads=2, **common)
    np.testing.assert_allclose(general, one, rtol=1e-14, atol=0)
    # a categorical child of 4 levels
    levels = np.tile(np.arange(1, 5), n // 4)
    logits = rng.uniform(-3.0, 3.0, size=(n, 3))
    loads = rng.uniform(-0.3, 0.3, size=(n, 3))
    values = native.log_marginal_rows(
        y=np.repeat(levels[:, None], 3, axis=1), eta=logits[None], load=loads[None],
        family=np.array([5, 6, 6]), phi=np.ones((1, 3)), cuts=np.zeros((1, 0)),
        cut_len=np.zeros(3, dtype=int), nodes=9, newton=3,
    )[0]
    exact = _brute_force_rows(n, _categorical_log_density(levels, logits, loads))
    assert np.abs(values - exact).max() < 1e-6


def test_the_library_names_what_does_not_fit_and_a_failed_build_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from counterfair.stan import native

    with pytest.raises(ValueError, match=r"load must have shape \(2, 1\)"):
        native.log_marginal_rows(
            y=np.zeros((3, 1), dtype=int), eta=np.zeros((2, 3, 1)), load=np.zeros((2, 2)),
            family=np.array([1]), phi=np.ones((2, 1)), cuts=np.zeros((2, 0)),
            cut_len=np.array([0]), nodes=3, newton=2,
        )
    ordinal = {"y": np.array([[1], [5]]), "eta": np.zeros((1, 2, 1)), "load": np.zeros((1, 1)),
               "family": np.array([4]), "phi": np.ones((1, 1)), "cuts": np.zeros((1, 3)),
               "cut_len": np.array([3]), "nodes": 3, "newton": 2}
    outside = r"column 0 \(family code 4\): row 1 has 5, outside 1 .. 4"
    with pytest.raises(ValueError, match=outside):
        native.log_marginal_rows(**ordinal)
    with pytest.raises(ValueError, match="column 0: unknown family code 9"):
        native.log_marginal_rows(**{**ordinal, "family": np.array([9])})
    monkeypatch.setenv("COUNTERFAIR_CACHE", str(tmp_path))
    monkeypatch.setenv("CXX", "false")  # a compiler that fails: its error is said
    with pytest.raises(errors.NativeBuildError, match="building counterfair's quadrature"):
        native.build()
    assert list((tmp_path / "native").iterdir()) == []  # no half-written library
    monkeypatch.delenv("CXX")
    monkeypatch.setenv("PATH", str(tmp_path))  # no compiler at all
    with pytest.raises(errors.NativeBuildError, match="no C\\+\\+ compiler found"):
        native.build()


# ---------------------------------------------------------------------- a fit of every family
@pytest.mark.slow
@pytest.mark.headline
@pytest.mark.stan
def test_an_integrated_fit_recovers_every_family(
    every_family_fit: tuple[cf.Fit, pd.DataFrame],
) -> None:
    fit, _ = every_family_fit
    assert fit.integrated == ("U", "V")
    assert "cf_integrated(" in fit.scm.stan_code(integrate=fit.integrated)
    _assert_within_4_sd(fit, TRUTH)


@pytest.mark.slow
@pytest.mark.headline
@pytest.mark.stan
def test_the_training_latents_are_drawn_as_exact_abduction_draws_them(
    every_family_fit: tuple[cf.Fit, pd.DataFrame],
) -> None:
    """Per row, the program's draws of U and V (one per posterior draw) and exact
    abduction's (numpy, 600 draws over 30 parameter sets) have the same mean and sd."""
    fit, data = every_family_fit
    program = fit.abduct()  # the fit's own draws
    exact = fit.abduct(
        fit.data, method="draws", n_param_draws=30, n_samples=600, engine="exact", seed=shifted(8)
    )
    for latent in ("U", "V"):
        mine, theirs = program.latents[latent], exact.latents[latent]
        assert np.isfinite(mine).all()
        gap = np.abs(mine.mean(axis=0) - theirs.mean(axis=0))
        scale = np.sqrt(mine.var(axis=0) / mine.shape[0] + theirs.var(axis=0) / 600)
        assert np.mean(gap / scale) < 1.2, latent  # |N(0,1)| averages 0.80
        assert np.abs(mine.std(axis=0) / theirs.std(axis=0) - 1).mean() < 0.05, latent
        truth = data[latent].to_numpy()
        assert np.corrcoef(mine.mean(axis=0), truth)[0, 1] > 0.5


@pytest.mark.slow
@pytest.mark.headline
@pytest.mark.stan
def test_an_integrated_fit_is_saved_and_read_back(
    every_family_fit: tuple[cf.Fit, pd.DataFrame], tmp_path: Path
) -> None:
    fit, _ = every_family_fit
    folder = fit.save(tmp_path / "fit")
    loaded = cf.load(folder)
    assert loaded.integrated == ("U", "V")
    assert "cf_integrated(" in (folder / "model.stan").read_text()
    np.testing.assert_allclose(loaded.idata.posterior["U"].values, fit.idata.posterior["U"].values)


# ---------------------------------------------------------------------- the law school SCM
# ---------------------------------------------------------------------- a categorical child
CATEGORICAL_LEVELS = ("p", "q", "r", "s")
CATEGORICAL_TRUTH: dict[str, Any] = {
    "alpha_X": 0.1,
    "beta_X_A": [0.4],
    "lambda_X_U": 0.7,
    "sigma_X": 0.8,
    "alpha_C": [0.3, -0.2, 0.5],
    "beta_C_A": [[0.5, -0.4, 0.2]],
    "lambda_C_U": [1.0, -0.8, 0.6],
    "alpha_P": 1.2,
    "beta_P_A": [0.3],
    "lambda_P_U": 0.3,
}


def categorical_child_scm() -> cf.SCM:
    """U with a Normal child X (its anchor), a categorical child C of 4 levels and a
    Poisson child P; A protected on each."""
    return cf.SCM(
        dag(
            {
                "A": cf.Protected(levels=("a", "b")),
                "U": cf.Latent(),
                "X": cf.Normal(),
                "C": cf.Categorical(levels=CATEGORICAL_LEVELS),
                "P": cf.Poisson(),
            },
            [("A", "X"), ("U", "X"), ("A", "C"), ("U", "C"), ("A", "P"), ("U", "P")],
        )
    )


@pytest.mark.slow
@pytest.mark.headline
@pytest.mark.stan
def test_an_integrated_fit_with_a_categorical_child_recovers_the_truth_and_its_latents(
    stan_backend: str,
) -> None:
    """1,500 simulated rows: every true parameter within 4 posterior sd; per row, the
    program's draws of U and MCMC abduction's (the abduction program, 20 parameter sets)
    agree in mean and sd; the fit's draws of U follow the true U."""
    if stan_backend != "cmdstanpy":
        pytest.skip("integrated latents are compiled into CmdStan programs")
    scm = categorical_child_scm()
    data = scm.sample(1500, params=CATEGORICAL_TRUTH, seed=shifted(11))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.ConvergenceWarning)
        fit = scm.fit(
            data.drop(columns="U"), chains=2, warmup=300, draws=300, seed=shifted(12),
            latents="integrated",
        )
    assert fit.integrated == ("U",)
    # 2 chains of 300: R-hat itself is noisy (1.020 with min bulk ESS 684 under shift 3)
    assert fit.diagnostics.max_rhat < 1.05
    _assert_within_4_sd(fit, CATEGORICAL_TRUTH)
    mine = fit.abduct().latents["U"]
    assert np.isfinite(mine).all()
    assert np.corrcoef(mine.mean(axis=0), data["U"])[0, 1] > 0.6
    rows = fit.data.iloc[:150]
    mcmc = fit.abduct(
        rows, method="draws", n_param_draws=20, n_samples=600, engine="mcmc", seed=shifted(13)
    ).latents["U"]
    ours = mine[:, :150]
    gap = np.abs(ours.mean(axis=0) - mcmc.mean(axis=0))
    scale = np.sqrt(ours.var(axis=0) / ours.shape[0] + mcmc.var(axis=0) / 200)  # ESS <= 600
    assert np.mean(gap / scale) < 1.2  # |N(0,1)| averages 0.80
    assert np.abs(ours.std(axis=0) / mcmc.std(axis=0) - 1).mean() < 0.08


@pytest.mark.slow
@pytest.mark.headline
@pytest.mark.stan
@needs_data("law_data.csv")
def test_the_integrated_law_school_fit_matches_the_joint_fit_within_4_mcse(
    stan_backend: str,
) -> None:
    """1,500 real law school rows: every structural parameter's posterior mean within 4
    MCSE of the joint fit's, and its sd within 20 %."""
    if stan_backend != "cmdstanpy":
        pytest.skip("the quadrature is C++ compiled into CmdStan programs")
    data = cf.datasets.load_law_school(data_home=DATA_DIR).sample(1500, random_state=shifted(0))
    rows = data[["race", "sex", "UGPA", "LSAT", "ZFYA"]]
    scm = law_school_level2()
    tables = {}
    for latents in ("joint", "integrated"):
        with warnings.catch_warnings():  # an R-hat of 1.01 at 2 x 500: MCSE says how far
            warnings.simplefilter("ignore", errors.ConvergenceWarning)
            fit = scm.fit(rows, chains=2, warmup=300, draws=500, seed=shifted(4), latents=latents)
        tables[latents] = fit.summary(round_to="none")
    joint, mine = tables["joint"], tables["integrated"]
    mcse = np.sqrt(joint["mcse_mean"] ** 2 + mine["mcse_mean"] ** 2)
    z = (mine["mean"] - joint["mean"]).abs() / mcse
    assert (z < 4).all(), z.sort_values().tail(3)
    assert ((mine["sd"] / joint["sd"] - 1).abs() < 0.2).all()


# ---------------------------------------------------------------------- options and errors
def _two_latents_in_one_child() -> cf.SCM:
    return cf.SCM(
        dag(
            {
                "A": cf.Protected(levels=("a", "b")),
                "U": cf.Latent(),
                "W": cf.Latent(),
                "X": cf.Normal(),
                "Y": cf.Normal(),
                "P": cf.Poisson(),
            },
            [("A", "X"), ("U", "X"), ("W", "Y"), ("U", "P"), ("W", "P")],
        )
    )


def test_a_latent_that_cannot_be_integrated_is_named_with_its_reason() -> None:
    # two latents in one child are integrated together (tests/test_integrated_pairs.py);
    # a loading per group is not integrated
    assert integrated.unsupported_reason(_two_latents_in_one_child(), "U") is None
    scm = cf.SCM(
        dag(
            {
                "A": cf.Protected(levels=("a", "b")),
                "U": cf.Latent(),
                "X": cf.Normal(),
                "P": cf.Poisson(loading_by="A"),
            },
            [("A", "X"), ("U", "X"), ("A", "P"), ("U", "P")],
        )
    )
    with pytest.raises(
        ValueError,
        match=r"latent 'U' cannot be integrated out: its loading on 'P' differs by group",
    ):
        integrated.integrated_latents(scm, "integrated", "cmdstanpy")
    with pytest.raises(ValueError, match="latent 'U' cannot be integrated out"):
        fit_program(scm, integrate=["U"])


def test_auto_samples_such_a_latent_jointly_with_one_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    by_group = cf.SCM(
        dag(
            {
                "A": cf.Protected(levels=("a", "b")),
                "U": cf.Latent(),
                "V": cf.Latent(),
                "X": cf.Normal(),
                "P": cf.Poisson(loading_by="A"),
                "Q": cf.Poisson(),
            },
            [("A", "X"), ("U", "X"), ("A", "P"), ("U", "P"), ("V", "Q")],
        )
    )
    with caplog.at_level(logging.INFO, logger="counterfair.stan.integrated"):
        chosen = integrated.integrated_latents(by_group, "auto", "cmdstanpy")
    assert chosen == ("V",)
    assert [r.getMessage() for r in caplog.records] == [
        "latent 'U' sampled jointly: its loading on 'P' differs by group (loading_by)"
    ]
    assert integrated.integrated_latents(every_family_scm(), "auto", "cmdstanpy") == ("U", "V")
    pair = _two_latents_in_one_child()
    assert integrated.integrated_latents(pair, "integrated", "cmdstanpy") == ("U", "W")
    assert integrated.integrated_latents(pair, "auto", "cmdstanpy") == ()  # only when asked


def test_a_categorical_child_is_integrated_through_its_non_reference_levels() -> None:
    """The latent is anchored on its Normal child even though it has a categorical one
    (the joint program cannot anchor it), and the categorical child's levels 2 and 3
    take two columns of the quadrature, coded 5 and 6, each holding the observed level."""
    scm = cf.SCM(
        dag(
            {
                "A": cf.Protected(levels=("a", "b")),
                "U": cf.Latent(),
                "X": cf.Normal(),
                "C": cf.Categorical(levels=("p", "q", "r")),
            },
            [("A", "X"), ("U", "X"), ("A", "C"), ("U", "C")],
        )
    )
    assert integrated.unsupported_reason(scm, "U") is None
    code = fit_program(scm, integrate=["U"])
    assert "array[N, 2] int Y_U;" in code
    assert "Y_U[:, 1] = C;" in code and "Y_U[:, 2] = C;" in code
    assert "{5, 6}" in code
    # its two loadings, one row vector for every row
    assert "cf_integrated(Y_U, " in code and ", lambda_C_U / sqrt(prec_U_X), {5, 6}" in code
    # no per-row latent at all: exact abduction draws the training rows after sampling
    assert "vector[N] U;" not in code and "vector[N] z_U;" not in code
    joint = fit_program(scm)
    assert "vector[N] U;" in joint  # the joint program samples U directly


def test_the_anchored_mean_reads_a_level_valued_parent_of_the_anchor_from_code_0() -> None:
    """The latent rebuilt from ``z`` uses the anchor's residual given its parents; a
    categorical parent's Stan codes start at 1, its effects are indexed from 0 (an
    off-by-one here made the Adult SCM's rebuild fail on its top marital level)."""
    from counterfair.model.encoding import Encoding
    from counterfair.model.params import ParamDraws
    from counterfair.model.specs import Protected
    from counterfair.stan.anchored_recovery import conditional_moments
    from counterfair.stan.data import fit_data

    scm = cf.SCM(
        dag(
            {
                "A": cf.Protected(levels=("a", "b")),
                "G": cf.Categorical(levels=("g0", "g1", "g2")),
                "U": cf.Latent(),
                "X": cf.Normal(),
                "C": cf.Categorical(levels=("p", "q", "r")),
            },
            [("A", "G"), ("A", "X"), ("G", "X"), ("U", "X"), ("A", "C"), ("U", "C")],
        )
    )
    truth = {
        "alpha_G": [0.2, -0.3], "beta_G_A": [[0.4, 0.1]],
        "alpha_X": 0.5, "beta_X_A": [0.3], "beta_X_G": [1.0, -2.0],
        "lambda_X_U": 0.8, "sigma_X": 0.5,
        "alpha_C": [0.1, 0.2], "beta_C_A": [[0.3, -0.3]], "lambda_C_U": [0.7, -0.4],
    }
    rows = scm.sample(60, params=truth, seed=shifted(2))
    protected = {n: s for n, s in scm.specs.items() if isinstance(s, Protected)}
    data = fit_data(scm, rows, Encoding.from_data(protected, rows))
    params = ParamDraws({k: np.asarray(v, dtype=float)[None, ...] for k, v in truth.items()})
    mean, precision = conditional_moments(scm, params, data, integrate=("U",))["U"]
    a = (rows["A"].astype(str) == "b").to_numpy().astype(float)
    g = pd.Series(rows["G"]).astype(str).map({"g0": 0, "g1": 1, "g2": 2}).to_numpy()
    base = 0.5 + 0.3 * a + np.array([0.0, 1.0, -2.0])[g]
    assert precision[0, 0] == pytest.approx(1 + 0.8**2 / 0.5**2)
    expected = 0.8 / 0.5**2 * (rows["X"].to_numpy() - base) / precision[0, 0]
    np.testing.assert_allclose(mean[0], expected, rtol=1e-12, atol=1e-12)


def test_options_that_cannot_hold_together_raise() -> None:
    scm = every_family_scm()
    frame = scm.sample(50, params=TRUTH, seed=shifted(1)).drop(columns=["U", "V"])
    with pytest.raises(ValueError, match="latents must be one of"):
        scm.fit(frame, latents="marginal")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="latents='integrated' is a NUTS option"):
        scm.fit(frame, method="pathfinder", latents="integrated")
    with pytest.raises(ValueError, match="needs the cmdstanpy back end"):
        integrated.integrated_latents(scm, "integrated", "pystan")
    assert integrated.integrated_latents(scm, "auto", "pystan") == ()
    assert integrated.integrated_latents(scm, "joint", "cmdstanpy") == ()


def test_the_integrated_program_has_no_per_row_parameter() -> None:
    code = fit_program(every_family_scm(), integrate=["U", "V"])
    parameters = code[code.index("parameters {") : code.index("}", code.index("parameters {"))]
    assert "vector[N]" not in parameters
    assert code.count("target += cf_integrated(") == 2
    # exact abduction covers U's and V's children, a categorical child's too: their
    # training draws come after sampling, so the program draws none
    assert "generated quantities {" not in code and "= cf_integrated_rng(" not in code
    categorical = fit_program(categorical_child_scm(), integrate=["U"])
    assert "generated quantities {" not in categorical
    assert fit_program(every_family_scm()) == every_family_scm().stan_code()


# ---------------------------------------------------------------------- the nodes a fit uses
def _truth_params(scm: cf.SCM, scale_loadings: float) -> Any:
    from counterfair.model.params import ParamDraws

    values = {
        k: (np.asarray(v) * scale_loadings if k.startswith("lambda_") and k != "lambda_X_U" else v)
        for k, v in TRUTH.items()
    }
    return ParamDraws.from_values(scm, values, {"A": 2})


@pytest.mark.parametrize(
    ("scale", "allowed"), [(0.02, (3,)), (1.0, (5, 7)), (3.0, (11, 15)), (8.0, (21,))]
)
def test_the_node_check_keeps_few_nodes_only_where_they_are_exact(
    scale: float, allowed: tuple[int, ...]
) -> None:
    """Loadings of 0.01 to 0.02 per sd: 3 nodes give the fit's log density (the sum over
    the 400 rows) within 0.01 of 40 nodes'. The test model's own loadings (up to 1.2):
    7 nodes are, 5 are on the bound (0.00996 for the data of seed shift 3, above it for
    the others), so either is allowed; three times them, 11 or 15 (11 nodes are 0.0098
    to 0.0102 off, on the bound: which side of it depends on the machine's floating point, so
    either is allowed, and the property that holds on every machine is tested: the
    rule kept is within the bound, the next fewer are not). Eight times them: no rule
    is, so the most tried are kept, with the error said. The error is the rule's own,
    Newton steps included: the same C++ against 60 nodes with Newton run to convergence."""
    from counterfair.inference.loo import pointwise_log_likelihood
    from counterfair.inference.quadrature_nodes import NODE_CHOICES, TOTAL_TOLERANCE, choose_nodes
    from counterfair.rows.validated import Rows

    scm = every_family_scm()
    data = scm.sample(400, params=TRUTH, seed=shifted(21))
    rows = Rows.check(data.drop(columns=["U", "V"]), scm)
    params = _truth_params(scm, scale)
    rule = choose_nodes(scm, params, rows.codes, rows.values())
    assert rule.nodes in allowed
    nodes = rule.nodes
    assert rule.checked_rows == 400 and rule.checked_sets == 1
    reference = pointwise_log_likelihood(
        scm, params, rows.codes, rows.values(), nodes=60, newton=50
    )

    def errors(nodes: int, newton: int) -> tuple[float, float]:
        values = pointwise_log_likelihood(
            scm, params, rows.codes, rows.values(), nodes=nodes, newton=newton
        )
        gap = np.abs(values - reference)
        return float(gap.sum(axis=1).max()), float(gap.max())

    total, row = errors(rule.nodes, rule.newton)
    if nodes < NODE_CHOICES[-1]:
        assert rule.max_error == pytest.approx(row, rel=0.1, abs=1e-12)
        assert rule.total_error == pytest.approx(total, rel=0.1, abs=1e-12)
        # (60 nodes judge here, 40 in the check: a rule on the bound may differ by 5 %)
        assert total <= 1.05 * TOTAL_TOLERANCE
        if nodes > NODE_CHOICES[0]:  # the next fewer nodes are not within it
            fewer = NODE_CHOICES[NODE_CHOICES.index(nodes) - 1]
            assert errors(fewer, rule.newton)[0] > 0.95 * TOTAL_TOLERANCE
    else:  # (the check's 40-node reference is itself 5e-3 off here: 60 nodes are the judge)
        assert rule.total_error > TOTAL_TOLERANCE and "no rule" in rule.reason
        assert total > TOTAL_TOLERANCE


def test_without_a_pilot_or_with_two_latents_per_row_the_default_nodes_are_kept() -> None:
    from counterfair.inference.quadrature_nodes import choose_nodes
    from counterfair.inference.sampling import _quadrature_rule
    from counterfair.model.params import ParamDraws
    from counterfair.rows.validated import Rows

    scm = every_family_scm()
    rows = Rows.check(scm.sample(50, params=TRUTH, seed=shifted(22)).drop(columns=["U", "V"]), scm)
    rule = _quadrature_rule(scm, rows, None, seed=shifted(0))
    assert (rule.nodes, rule.max_error) == (integrated.GH_NODES, None)
    assert "no pilot" in rule.reason
    # a categorical child is checked like the others (the library's codes 5 and 6)
    categorical = categorical_child_scm()
    data = categorical.sample(50, params=CATEGORICAL_TRUTH, seed=shifted(23))
    crows = Rows.check(data.drop(columns=["U"]), categorical)
    params = ParamDraws.from_values(categorical, CATEGORICAL_TRUTH, {"A": 2})
    rule = choose_nodes(categorical, params, crows.codes, crows.values())
    assert (rule.checked_rows, rule.checked_sets) == (50, 1)
    assert rule.max_error is not None
    # two latents per row: the check's latent problems hold one latent
    pair = _two_latents_in_one_child()
    pair_truth = {
        "alpha_X": 0.1, "beta_X_A": [0.4], "lambda_X_U": 0.7, "sigma_X": 0.8, "alpha_Y": 0.0,
        "lambda_Y_W": 0.6, "sigma_Y": 0.5, "alpha_P": 1.0, "lambda_P_U": 0.3, "lambda_P_W": -0.2,
    }
    pdata = pair.sample(50, params=pair_truth, seed=shifted(24)).drop(columns=["U", "W"])
    prows = Rows.check(pdata, pair)
    rule = choose_nodes(
        pair, ParamDraws.from_values(pair, pair_truth, {"A": 2}), prows.codes, prows.values()
    )
    assert rule.nodes == integrated.GH_NODES and "does not cover node 'P'" in rule.reason


@pytest.mark.stan
def test_a_warm_started_integrated_fit_checks_its_nodes_and_keeps_them_with_the_fit(
    stan_backend: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The simulated law school rows (500): the pilot's draws choose the nodes, within
    0.01 of 40 nodes' log density; the main fit runs with them; the rule is saved."""
    if stan_backend != "cmdstanpy":
        pytest.skip("the quadrature is C++ compiled into CmdStan programs")
    from _models import law_level2_scm, law_train

    from counterfair.inference.quadrature_nodes import (
        NEWTON_CHOICES,
        NODE_CHOICES,
        TOTAL_TOLERANCE,
    )

    with warnings.catch_warnings(), caplog.at_level(
        logging.INFO, logger="counterfair.inference.quadrature_nodes"
    ):
        warnings.simplefilter("ignore", errors.ConvergenceWarning)
        fit = law_level2_scm().fit(
            law_train().drop(columns="K"), chains=2, warmup=175, draws=100,
            seed=shifted(8), latents="integrated",
        )
    rule = fit.quadrature
    assert fit.warm_start is not None and fit.warm_start.draws is not None
    assert rule is not None and rule.nodes in NODE_CHOICES and rule.newton in NEWTON_CHOICES
    assert rule.total_error is not None and rule.total_error <= TOTAL_TOLERANCE
    assert rule.max_error is not None and rule.max_error <= rule.total_error
    assert (rule.checked_rows, rule.checked_sets) == (500, 6)
    assert f"{rule.nodes} Gauss-Hermite nodes and {rule.newton} Newton steps" in caplog.text
    assert np.isfinite(fit.idata.posterior["K"].values).all()
    loaded = cf.load(fit.save(tmp_path / "fit"))
    assert loaded.quadrature == rule
    # LOO scores the rows with the fit's own rule (its log density's values)
    from counterfair.inference.loo import _log_likelihood_idata, pointwise_log_likelihood

    idata, method = _log_likelihood_idata(fit)
    own = pointwise_log_likelihood(
        fit.scm, fit.params(), dict(fit.rows.codes), fit.rows.values(),
        nodes=rule.nodes, newton=rule.newton,
    )
    assert method == "quadrature"
    np.testing.assert_array_equal(idata.log_likelihood["row"].values.reshape(own.shape), own)
    # the training rows' K is drawn after sampling, by exact abduction's C++: not by the
    # program, and the same in the smallest chunks (a row or a few) as in one
    from counterfair.inference.training_latents import add_training_latents
    from counterfair.stan.codegen import fit_program

    assert "generated quantities" not in fit_program(fit.scm, integrate=["K"])
    again = fit.idata.copy()
    with cf.set_options(chunk_bytes=cf.options.MIN_CHUNK_BYTES):
        add_training_latents(fit.scm, again, fit.rows, ["K"], {"K"}, fit.seed)
    np.testing.assert_array_equal(again.posterior["z_K"].values, fit.idata.posterior["z_K"].values)
