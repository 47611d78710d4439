"""The Laplace start of fits with no per-row parameter (``warm_start="laplace"``/``"auto"``).

* :mod:`counterfair.stan.unconstrained`: the parameters block parsed, what it cannot
  transform refused by name, and a generated program's constrained values mapped to
  the unconstrained vector that CmdStan itself gives the same log density and gradient;
* :func:`counterfair.stan.laplace_start.laplace_start` on a linear-Gaussian SCM with no
  latent: the mode is least squares and the dense metric is the closed-form covariance;
* a Laplace-started fit with an integrated latent: burn-in dropped, reproducible, the
  step size fixed after 19 adapting iterations, the same posterior as a fit without it;
* the options and errors: what cannot apply, a Newton check that fails, the fallback.
"""

from __future__ import annotations

import functools
import logging
import re
import tempfile
import warnings
from pathlib import Path
from typing import Any

import arviz as az
import cmdstanpy
import numpy as np
import pandas as pd
import pytest
from _models import families_data, families_scm, law_level2_scm, law_level3_scm, law_train
from _seeds import shifted

import counterfair as cf
import counterfair.stan.laplace_start as laplace_module
from counterfair.inference import sampling, starts
from counterfair.inference.sampling import training_rows
from counterfair.model.params import ParamDraws
from counterfair.stan import backend as stan_backend_module
from counterfair.stan.cmdstan_adapter import executable
from counterfair.stan.data import fit_data
from counterfair.stan.inits import latent_inits
from counterfair.stan.laplace_start import (
    ADAPT_ITERATIONS,
    DEFAULT_WARMUP,
    LaplaceStart,
    laplace_start,
)
from counterfair.stan.unconstrained import (
    Declaration,
    Unconstrained,
    UnsupportedParametersError,
    declarations,
)
from counterfair.stan.warm_start import MIN_ROWS, MIN_WARMUP, WarmStart

needs_cmdstan = pytest.mark.skipif(
    not stan_backend_module.cmdstan_available(), reason="CmdStan is not installed"
)

LEVEL3_TRUTH: dict[str, Any] = {
    "alpha_UGPA": 3.2,
    "beta_UGPA_race": [-0.3, 0.1],
    "beta_UGPA_sex": [0.05],
    "sigma_UGPA": 0.3,
    "alpha_LSAT": 36.0,
    "beta_LSAT_race": [-4.0, -1.0],
    "beta_LSAT_sex": [0.5],
    "sigma_LSAT": 5.0,
}
"""True parameters of the simulated level 3 data (race, sex -> UGPA, LSAT; no latent)."""


@functools.cache
def level3_data() -> pd.DataFrame:
    """``MIN_ROWS`` (5,000) rows of the level 3 SCM: the smallest data "auto" starts by
    Laplace. Its program is one the suite compiles anyway (``law level 3``)."""
    return law_level3_scm().sample(MIN_ROWS, params=LEVEL3_TRUTH, seed=shifted(31))


def _cmdstan_only(stan_backend: str) -> None:
    if stan_backend != "cmdstanpy":
        pytest.skip("the Laplace start runs CmdStan's optimizer and log_prob method")


# ---------------------------------------------------------------------- parsing (no Stan)
def _program(parameters: str) -> str:
    return f"data {{\n  real s;\n}}\nparameters {{\n{parameters}\n}}\nmodel {{\n}}\n"


@pytest.mark.parametrize(
    ("declaration", "quoted"),
    [
        ("simplex[3] p;", "'simplex[3] p'"),
        ("array[2] real x;", "'array[2] real x'"),
        ("real<upper=1> y;", "'upper=1' of parameter 'y'"),
        ("real<lower=0, upper=1> w;", "'upper=1' of parameter 'w'"),
        ("cholesky_factor_corr[2] L;", "'cholesky_factor_corr[2] L'"),
        ("real<lower=0, multiplier=2> v;", "'v' has a lower bound and an affine transform"),
    ],
)
def test_declarations_refuse_what_they_cannot_transform_by_name(
    declaration: str, quoted: str
) -> None:
    code = _program(f"  real<multiplier=s> fine;  // a supported one first\n  {declaration}")
    with pytest.raises(UnsupportedParametersError, match=re.escape(quoted)):
        declarations(code)
    assert issubclass(UnsupportedParametersError, ValueError)


def test_declarations_read_every_supported_kind_in_order() -> None:
    code = _program(
        "  real<offset=1, multiplier=2> a;  // a; comment with ; inside\n"
        "  vector<multiplier=s>[n - 1] b;\n"
        "  real<lower = 0> c;\n"
        "  ordered[3] cuts;\n"
        "  positive_ordered[2] q;\n"
        "  matrix<lower=-1>[2, 3] m;\n"
        "  row_vector[2] r;"
    )
    assert declarations(code) == [
        Declaration("a", "real", offset="1", multiplier="2"),
        Declaration("b", "vector", multiplier="s"),
        Declaration("c", "real", lower="0"),
        Declaration("cuts", "ordered"),
        Declaration("q", "positive_ordered"),
        Declaration("m", "matrix", lower="-1"),
        Declaration("r", "row_vector"),
    ]
    shapes = {"a": (), "b": (2,), "c": (), "cuts": (3,), "q": (2,), "m": (2, 3), "r": (2,)}
    transform = Unconstrained.of(code, shapes, {"s": 4.0, "n": 3})
    assert transform.names == ["a", "b", "c", "cuts", "q", "m", "r"]
    assert transform.size == 1 + 2 + 1 + 3 + 2 + 6 + 2
    m = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    values = {
        "a": 5.0,  # (5 - 1) / 2
        "b": np.array([8.0, -2.0]),  # / 4 (the data variable s)
        "c": np.e,
        "cuts": np.array([-1.0, -1.0 + np.e, 2.0 + np.e]),
        "q": np.array([np.e, 2 * np.e]),
        "m": m,  # log(m + 1), column-major as Stan
        "r": np.array([0.5, -0.5]),
    }
    expected = [2.0, 2.0, -0.5, 1.0, -1.0, 1.0, np.log(3.0), 1.0, 1.0]
    expected += [*np.log(m.ravel(order="F") + 1.0).tolist(), 0.5, -0.5]
    u = transform.unconstrain(values)
    np.testing.assert_allclose(u, expected, rtol=1e-12)
    back = transform.constrain(u)
    assert set(back) == set(values)
    for name, value in values.items():
        assert back[name].shape == np.shape(value), name
        np.testing.assert_allclose(back[name], value, rtol=1e-12, err_msg=name)


def test_unconstrained_refuses_bad_bounds_and_shapes() -> None:
    code = _program("  real<multiplier=s> a;\n  vector[2] b;")
    with pytest.raises(UnsupportedParametersError, match="multiplier of parameter 'a' is -1"):
        Unconstrained.of(code, {"a": (), "b": (2,)}, {"s": -1.0})
    with pytest.raises(UnsupportedParametersError, match="bound 's' of parameter 'a'"):
        Unconstrained.of(code, {"a": (), "b": (2,)}, {"s": [1.0, 2.0]})
    with pytest.raises(UnsupportedParametersError, match="no shape given for parameter 'b'"):
        Unconstrained.of(code, {"a": ()}, {"s": 1.0})
    transform = Unconstrained.of(code, {"a": (), "b": (2,)}, {"s": 1.0})
    with pytest.raises(ValueError, match=r"'b' has shape \(3,\), expected \(2,\)"):
        transform.unconstrain({"a": 0.0, "b": np.zeros(3)})
    with pytest.raises(ValueError, match="expected 3 unconstrained values"):
        transform.constrain(np.zeros(4))


def test_split_of_warmup_and_the_sampler_arguments() -> None:
    assert ADAPT_ITERATIONS == 19 and DEFAULT_WARMUP == 50
    assert LaplaceStart.split(DEFAULT_WARMUP) == (19, 31)
    assert LaplaceStart.split(10) == (10, 0)
    assert LaplaceStart.split(19) == (19, 0)
    start = LaplaceStart(np.eye(2), [{}], {}, ParamDraws({}), 0.0)
    args = start.sampler_args(1)
    assert args["metric"] == "dense_e"
    np.testing.assert_array_equal(args["inv_metric"], np.eye(2))
    with pytest.raises(ValueError, match="warmup >= 1"):
        start.sampler_args(0)


# ---------------------------------------------------------------------- the options (no Stan)
def test_laplace_refuses_what_it_cannot_apply_to() -> None:
    data = law_train().drop(columns="K")
    with pytest.raises(ValueError, match=r"latents \['K'\] are sampled jointly"):
        law_level2_scm().fit(data, backend="cmdstanpy", warm_start="laplace", latents="joint")
    level3 = law_level3_scm()
    with pytest.raises(ValueError, match=r"cannot apply: it sets \['stepsize'\] itself"):
        level3.fit(data, backend="cmdstanpy", warm_start="laplace", stepsize=0.1)
    with pytest.raises(ValueError, match="cannot apply: it needs the cmdstanpy back end"):
        level3.fit(data, backend="pystan", warm_start="laplace")
    with pytest.raises(ValueError, match="warm_start must be True, False, 'auto', 'pilot'"):
        level3.fit(data, backend="cmdstanpy", warm_start="bogus")


# ---------------------------------------------------------------------- against CmdStan
@pytest.mark.stan
@needs_cmdstan
def test_unconstrained_vector_is_the_one_cmdstan_evaluates(stan_backend: str) -> None:
    """The new-families program (``multiplier=`` scalars, vectors, row vectors and
    matrices, ``lower=0``, an ``ordered`` cutpoint vector, per-row ``z_U``): at three
    random points, CmdStan's ``log_prob`` at our constrained values (it unconstrains them
    itself) gives the log density and gradient that it gives at our unconstrained vector
    (``_gradients``, all three points in one ``params_r``)."""
    _cmdstan_only(stan_backend)
    scm = families_scm()
    data = families_data().drop(columns="U").iloc[:40]
    rows, _ = training_rows(scm, data, subsample=None, max_rows=None, seed=shifted(40))
    stan_data = fit_data(scm, rows)
    code = scm.stan_code()
    a, o, k = (stan_data[f"n_levels_{x}"] - 1 for x in "AOK")
    n = stan_data["N"]
    shapes = {
        "z_U": (n,), "beta_O_A": (a,), "lambda_O_U": (), "cutpoints_O": (o,), "alpha_X": (),
        "beta_X_A": (a,), "lambda_X_U": (), "sigma2_X": (), "alpha_K": (k,),
        "beta_K_A": (a, k), "beta_K_age": (k,), "beta_K_O": (o, k), "alpha_C": (),
        "beta_C_A": (a,), "beta_C_age": (), "beta_C_K": (k,), "lambda_C_U": (), "phi_C": (),
    }
    kinds = {d.kind for d in declarations(code)} | {
        "lower" for d in declarations(code) if d.lower is not None
    } | {"multiplier" for d in declarations(code) if d.multiplier is not None}
    assert {"ordered", "matrix", "row_vector", "lower", "multiplier"} <= kinds
    assert o == 2 and k == 2  # a 2 x 2 matrix: column-major order matters
    transform = Unconstrained.of(code, shapes, stan_data)
    assert transform.names == list(shapes)
    u = np.random.default_rng(shifted(41)).normal(0.0, 0.7, size=(3, transform.size))
    points = [transform.constrain(row) for row in u]
    for row, values in zip(u, points, strict=True):
        np.testing.assert_allclose(transform.unconstrain(values), row, rtol=1e-12, atol=1e-12)
        again = transform.constrain(transform.unconstrain(values))
        for name, value in values.items():
            np.testing.assert_allclose(again[name], value, rtol=1e-12, atol=1e-14)
    assert np.all(np.diff(points[0]["cutpoints_O"]) > 0) and points[0]["sigma2_X"] > 0
    exe, _ = executable(code)
    model = cmdstanpy.CmdStanModel(exe_file=str(exe))
    with tempfile.TemporaryDirectory(prefix="counterfair-test-laplace-") as tmp:
        folder = Path(tmp)
        data_file = folder / "data.json"
        cmdstanpy.write_stan_json(str(data_file), stan_data)
        ours = laplace_module._gradients(exe, data_file, u, folder)
        for i, values in enumerate(points):
            theirs = model.log_prob(
                params=values, data=str(data_file), jacobian=True, sig_figs=18
            ).to_numpy()[0]
            assert theirs.shape == ours[i].shape
            np.testing.assert_allclose(ours[i, 0], theirs[0], rtol=1e-10)  # lp
            np.testing.assert_allclose(ours[i, 1:], theirs[1:], rtol=1e-8, atol=1e-8)
    assert len({round(float(lp), 6) for lp in ours[:, 0]}) == 3  # three distinct points


@pytest.mark.stan
@needs_cmdstan
def test_laplace_start_of_a_linear_gaussian_scm_is_least_squares(stan_backend: str) -> None:
    """Level 3 SCM (race with 3 levels and sex -> UGPA, LSAT; Normal, no latent) on
    5,000 rows: at the mode each coefficient is the least-squares one (within 0.1
    posterior sd; the priors move it by about 0.03), the residual variance is
    (RSS + 2) / (n + 2) (the mode of the inverse-gamma(1, 1) prior with the Jacobian of
    its log), and the metric is the closed form: sigma^2 (X'X)^-1 for the coefficients
    over their multiplier's scale, sqrt(2 / n) for log sigma^2, no correlation between
    the two nodes."""
    _cmdstan_only(stan_backend)
    scm = law_level3_scm()
    rows, _ = training_rows(scm, level3_data(), subsample=None, max_rows=None, seed=shifted(32))
    stan_data = fit_data(scm, rows)
    n = stan_data["N"]
    start = laplace_start(
        scm.stan_code(),
        stan_data,
        chains=3,
        seed=shifted(33),
        init=latent_inits(scm, stan_data, 1, shifted(33))[0],
    )
    assert start.kind == "laplace" and start.pilot_rows is None
    metric = start.inv_metric
    assert metric.shape == (10, 10)  # per node: alpha, beta_race[2], beta_sex, sigma2
    np.testing.assert_allclose(metric, metric.T)
    np.linalg.cholesky(metric)
    race, sex = np.asarray(stan_data["race"]), np.asarray(stan_data["sex"])
    design = np.column_stack([np.ones(n), race == 2, race == 3, sex == 2]).astype(float)
    for block, node in enumerate(("UGPA", "LSAT")):
        y = np.asarray(stan_data[node], dtype=float)
        coef, (rss,), *_ = np.linalg.lstsq(design, y, rcond=None)
        sigma2 = float(start.mode[f"sigma2_{node}"])
        covariance = sigma2 * np.linalg.inv(design.T @ design)
        sd = np.sqrt(np.diag(covariance))
        mode = np.concatenate(
            [np.atleast_1d(start.mode[f"{p}_{node}{s}"]) for p, s in
             (("alpha", ""), ("beta", "_race"), ("beta", "_sex"))]
        )
        assert np.all(np.abs(mode - coef) < 0.1 * sd), (node, (mode - coef) / sd)
        assert abs(np.log(sigma2 / ((rss + 2) / (n + 2)))) < 0.05 * np.sqrt(2 / n), node
        at = slice(5 * block, 5 * block + 4)
        scale = stan_data[f"scale_{node}"]
        coefficients = metric[at, at] * scale**2  # back from the multiplier's scale
        ratio = np.sqrt(np.diag(coefficients)) / sd
        np.testing.assert_allclose(ratio, 1.0, rtol=0.02, err_msg=node)
        np.testing.assert_allclose(
            _correlation(coefficients), _correlation(covariance), atol=0.02, err_msg=node
        )
        log_sigma2 = 5 * block + 4
        np.testing.assert_allclose(np.sqrt(metric[log_sigma2, log_sigma2]), np.sqrt(2 / n),
                                   rtol=0.02)
        assert np.all(np.abs(_correlation(metric)[log_sigma2, at]) < 0.02), node
    assert np.all(np.abs(_correlation(metric)[:5, 5:]) < 0.02)  # the nodes: independent
    # one init per chain, drawn from the Gaussian: distinct, within a few sds of the mode
    assert len(start.inits) == 3
    first = [init["alpha_UGPA"] for init in start.inits]
    assert len(set(first)) == 3
    alpha_sd = np.sqrt(metric[0, 0]) * stan_data["scale_UGPA"]
    assert all(abs(x - float(start.mode["alpha_UGPA"])) < 5 * alpha_sd for x in first)
    assert set(start.draws) >= set(scm.parameter_names())


@pytest.mark.stan
@needs_cmdstan
def test_the_optimizer_on_a_subsample_reaches_the_same_mode_and_metric(
    stan_backend: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """On more than ``OPTIMIZER_ROWS`` rows the optimizer runs on a subsample and the
    Newton steps on every row: the mode is the whole data's (within 0.05 posterior sd of
    the start whose optimizer saw every row) and so is the metric (its sds within 1 %,
    its correlations within 0.01)."""
    _cmdstan_only(stan_backend)
    scm = law_level3_scm()
    rows, _ = training_rows(scm, level3_data(), subsample=None, max_rows=None, seed=shifted(34))
    stan_data = fit_data(scm, rows)
    whole = starts._laplace(scm, rows, stan_data, 2, shifted(35), ())
    monkeypatch.setattr(starts, "OPTIMIZER_ROWS", 400)
    with caplog.at_level(logging.INFO, logger="counterfair"):
        coarse = starts._laplace(scm, rows, stan_data, 2, shifted(35), ())
    assert f"the optimizer on 400 of the {len(rows):,} rows, Newton steps on all" in caplog.text
    sd = np.sqrt(np.diag(whole.inv_metric))
    transform = laplace_module.Unconstrained.of(
        scm.stan_code(), {k: np.shape(v) for k, v in whole.mode.items()}, stan_data
    )
    gap = (transform.unconstrain(coarse.mode) - transform.unconstrain(whole.mode)) / sd
    assert np.abs(gap).max() < 0.05, gap.round(3)
    np.testing.assert_allclose(np.sqrt(np.diag(coarse.inv_metric)), sd, rtol=0.01)
    np.testing.assert_allclose(
        _correlation(coarse.inv_metric), _correlation(whole.inv_metric), atol=0.01
    )


def _correlation(covariance: np.ndarray) -> np.ndarray:
    sd = np.sqrt(np.diag(covariance))
    return covariance / np.outer(sd, sd)


# ---------------------------------------------------------------------- a Laplace-started fit
DRAWS = 300


def _integrated_fit(**options: Any) -> cf.Fit:
    """Level 2 SCM on its 500 simulated rows, K integrated out, 2 chains of DRAWS."""
    with warnings.catch_warnings():  # 2 x 300 draws: an R-hat of 1.03 is no matter here
        warnings.simplefilter("ignore", cf.errors.ConvergenceWarning)
        return law_level2_scm().fit(
            law_train().drop(columns="K"),
            chains=2,
            draws=DRAWS,
            latents="integrated",
            progress=False,
            **options,
        )


@pytest.fixture(scope="module")
def laplace_fit(stan_backend: str) -> cf.Fit:
    _cmdstan_only(stan_backend)
    return _integrated_fit(seed=shifted(50), warm_start="laplace")


@pytest.mark.stan
@needs_cmdstan
def test_a_laplace_started_fit_drops_its_burn_in_and_keeps_its_step_size(
    laplace_fit: cf.Fit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """warmup=None: 19 iterations adapt the step size, 31 burn-in draws run at it and
    are dropped, the DRAWS kept are numbered 0..DRAWS-1 and the same seed repeats them."""
    fit = laplace_fit
    assert fit.integrated == ("K",)
    start = fit.warm_start
    assert isinstance(start, LaplaceStart) and start.kind == "laplace"
    assert start.inv_metric.shape == (16, 16) and len(start.inits) == 2
    posterior = fit.idata.posterior
    assert posterior.sizes["chain"] == 2 and posterior.sizes["draw"] == DRAWS
    np.testing.assert_array_equal(posterior["draw"].values, np.arange(DRAWS))
    stats = fit.idata.sample_stats
    assert stats.sizes["draw"] == DRAWS
    # each group once (setting a group of an InferenceData appends its name again)
    assert sorted(laplace_fit.idata.groups()) == ["posterior", "sample_stats"]
    np.testing.assert_array_equal(stats["draw"].values, np.arange(DRAWS))
    step = stats["step_size"].values
    assert np.all(step == step[:, :1]), "the step size changed after adaptation"
    assert np.all(step != laplace_module.INITIAL_STEP)  # it was adapted
    assert fit.diagnostics.divergences == 0

    # the same seed again, the sampler's arguments and the burn-in seen on the way
    seen: dict[str, Any] = {}
    real_backend, real_burn = sampling.get_backend, sampling._without_burn_in

    class Watched:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def sample(self, *args: Any, **kwargs: Any) -> Any:
            seen.update(kwargs)
            return self.inner.sample(*args, **kwargs)

    def burn(idata: Any, count: int) -> Any:
        seen["burn"], seen["before burn"] = count, idata.posterior.sizes["draw"]
        return real_burn(idata, count)

    monkeypatch.setattr(sampling, "get_backend", lambda name="auto": Watched(real_backend(name)))
    monkeypatch.setattr(sampling, "_without_burn_in", burn)
    again = _integrated_fit(seed=shifted(50), warm_start="laplace")
    assert seen["warmup"] == ADAPT_ITERATIONS
    assert seen["draws"] == DRAWS + DEFAULT_WARMUP - ADAPT_ITERATIONS
    assert seen["burn"] == DEFAULT_WARMUP - ADAPT_ITERATIONS
    assert seen["before burn"] == DRAWS + DEFAULT_WARMUP - ADAPT_ITERATIONS
    assert seen["metric"] == "dense_e"
    np.testing.assert_array_equal(seen["inv_metric"], start.inv_metric)
    assert seen["init"] == start.inits
    for name in law_level2_scm().parameter_names():
        np.testing.assert_array_equal(again.idata.posterior[name].values, posterior[name].values)
    np.testing.assert_array_equal(again.idata.sample_stats["step_size"].values, step)


@pytest.mark.stan
@needs_cmdstan
def test_a_laplace_started_fit_has_the_posterior_of_a_fit_without_it(
    laplace_fit: cf.Fit,
) -> None:
    """Every structural parameter's posterior mean within 4 MCSE (of the difference,
    from each fit's arviz summary) of a fit without a warm start; its sd too (the MCSE
    of an sd from the ESS of the squared deviations)."""
    reference = _integrated_fit(seed=shifted(51), warm_start=False, warmup=300)
    assert reference.warm_start is None
    mine = laplace_fit.summary(round_to="none")
    theirs = reference.summary(round_to="none")
    assert list(mine.index) == list(theirs.index) and len(mine) == 16
    mcse = np.hypot(mine["mcse_mean"], theirs["mcse_mean"])
    z = (mine["mean"] - theirs["mean"]).abs() / mcse
    assert (z < 4).all(), z.sort_values().tail(3)
    for name in law_level2_scm().parameter_names():
        (sd_a, se_a), (sd_b, se_b) = _sd_and_mcse(laplace_fit, name), _sd_and_mcse(reference, name)
        assert np.all(np.abs(sd_a - sd_b) < 4 * np.hypot(se_a, se_b)), (name, sd_a, sd_b)


def _sd_and_mcse(fit: cf.Fit, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Posterior sd of each entry of ``name`` and its Monte Carlo standard error: the
    delta method on the variance, whose MCSE comes from the ESS of the squared
    deviations (arviz's formula; ``az.mcse(method="sd")`` fails under numba on numpy 2)."""
    values = np.asarray(fit.idata.posterior[name].values, dtype=float)
    values = values.reshape(values.shape[0], values.shape[1], -1)
    sds, errors = [], []
    for j in range(values.shape[2]):
        squared = (values[:, :, j] - values[:, :, j].mean()) ** 2
        variance = squared.mean()
        ess = float(az.ess(squared, method="mean"))
        sds.append(np.sqrt(variance))
        errors.append(np.sqrt((np.mean(squared**2) - variance**2) / ess / variance / 4))
    return np.array(sds), np.array(errors)


# ---------------------------------------------------------------------- "auto" and failures
@pytest.mark.stan
@needs_cmdstan
def test_auto_starts_by_laplace_from_min_rows_on(stan_backend: str) -> None:
    _cmdstan_only(stan_backend)
    scm, data = law_level3_scm(), level3_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cf.errors.ConvergenceWarning)
        fit = scm.fit(data, chains=2, draws=50, seed=shifted(60), progress=False)
        assert isinstance(fit.warm_start, LaplaceStart)
        assert fit.idata.posterior.sizes["draw"] == 50
        # one row fewer: no latent and below MIN_ROWS, so no warm start at all
        small = scm.fit(
            data.iloc[: MIN_ROWS - 1], chains=2, warmup=100, draws=50, seed=shifted(60),
            progress=False,
        )
    assert small.warm_start is None


@pytest.mark.stan
@needs_cmdstan
def test_a_failed_newton_check_raises_for_laplace_and_falls_back_to_the_pilot_for_auto(
    stan_backend: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """With MODE_TOLERANCE 0 no Newton step is ever short enough: the real check fails."""
    _cmdstan_only(stan_backend)
    monkeypatch.setattr(laplace_module, "MODE_TOLERANCE", 0.0)
    scm, data = law_level3_scm(), level3_data()
    with pytest.raises(
        ValueError, match=r"warm_start='laplace' failed: 4 Newton steps .* posterior sds away"
    ):
        scm.fit(data, chains=2, draws=50, seed=shifted(61), warm_start="laplace", progress=False)
    with (
        warnings.catch_warnings(),
        caplog.at_level(logging.INFO, logger="counterfair.inference.sampling"),
    ):
        warnings.simplefilter("ignore", cf.errors.ConvergenceWarning)
        fit = scm.fit(
            data, chains=2, warmup=MIN_WARMUP, draws=50, seed=shifted(61), warm_start="auto",
            progress=False,
        )
    assert isinstance(fit.warm_start, WarmStart)
    assert fit.warm_start.pilot_rows is not None and fit.warm_start.pilot_rows < len(data)
    failed = [r.getMessage() for r in caplog.records if "Laplace start failed" in r.getMessage()]
    assert len(failed) == 1 and "Newton steps" in failed[0], failed
    assert fit.idata.posterior.sizes["draw"] == 50


@pytest.mark.stan
@needs_cmdstan
def test_a_diagonal_metric_keeps_auto_on_the_pilot_and_is_refused_by_laplace(
    stan_backend: str,
) -> None:
    """A Laplace start is dense: ``metric="diag_e"`` under "auto" takes the pilot (as
    before the Laplace start existed); asked for by name, it is refused before any work."""
    _cmdstan_only(stan_backend)
    scm, data = law_level3_scm(), level3_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cf.errors.ConvergenceWarning)
        fit = scm.fit(
            data, chains=2, warmup=MIN_WARMUP, draws=50, seed=shifted(62), metric="diag_e",
            progress=False,
        )
    assert isinstance(fit.warm_start, WarmStart)
    with pytest.raises(ValueError, match=r"cannot apply: it sets \['metric'\] itself"):
        scm.fit(data, warm_start="laplace", metric="diag_e", progress=False)
    with pytest.raises(ValueError, match="give warmup >= 1"):
        scm.fit(data, warm_start="laplace", warmup=0, progress=False)


def test_pathfinder_refuses_every_warm_start_but_the_default() -> None:
    data = level3_data().iloc[:300]
    for value in ("laplace", "pilot", True, "bogus"):
        with pytest.raises(ValueError, match=r"\['warm_start'\] only apply to method='nuts'"):
            law_level3_scm().fit(data, method="pathfinder", draws=100, warm_start=value)
