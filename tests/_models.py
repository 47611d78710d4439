"""SCM builders, simulated data and cached fits shared by the Stan-backed test modules.

``tests/test_fit.py``, ``tests/test_counterfactual.py`` and ``tests/test_learning.py``
import from here. Every fit is computed at most once per test session (the
helpers are cached), so a model used by several modules is sampled once.
Warnings raised while fitting are recorded, not raised: the helpers return them
so that a test can assert on them (the recovery test requires none) while other
tests are not failed by a legitimate ``ConvergenceWarning`` of a short fit.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import networkx as nx
import numpy as np
import pandas as pd
from _holes import hole_programs
from _seeds import shifted
from _sfm import sfm_programs

import counterfair as cf
from counterfair.errors import ConvergenceWarning
from counterfair.stan import integrated, integrated_pairs
from counterfair.stan.backend import resolve_backend_name
from experiments.adult_pscf import adult_pscf_scm as _adult_pscf_scm

T = TypeVar("T")

RACES = ("White", "Black", "Asian")
SEXES = ("Female", "Male")

LAW_TRUTH: dict[str, Any] = {
    "alpha_UGPA": 3.2,
    "beta_UGPA_race": [-0.3, 0.1],
    "beta_UGPA_sex": [0.05],
    "lambda_UGPA_K": 0.3,
    "sigma_UGPA": 0.3,
    "alpha_LSAT": 3.5,
    "beta_LSAT_race": [-0.2, -0.05],
    "beta_LSAT_sex": [0.03],
    "lambda_LSAT_K": 0.15,
    "alpha_ZFYA": 0.2,
    "beta_ZFYA_race": [-0.5, -0.2],
    "beta_ZFYA_sex": [0.1],
    "lambda_ZFYA_K": 0.8,
}
"""True parameters of the simulated law school data (level 2 SCM)."""

LAW_TRAIN_SEED = shifted(3)
LAW_TEST_SEED = shifted(11)
LAW_FIT_SEED = shifted(1)

# Linear-Gaussian SCM: U -> X, U -> Y, A -> X, A -> Y, X -> Y. The residual sds are
# fixed in the specs: with learned sds a Gaussian factor model of two children is
# not identified (five parameters for three second moments), the posterior is a
# ridge and its mean has a loading of U on Y near zero, which would make the
# check of conditioning on Y vacuous.
LG_SIGMA_X = 0.5
LG_SIGMA_Y = 0.4
LG_TRUTH: dict[str, Any] = {
    "alpha_X": 0.5,
    "beta_X_A": [1.0],
    "lambda_X_U": 0.8,
    "alpha_Y": -0.3,
    "beta_Y_A": [0.7],
    "beta_Y_X": 0.6,
    "lambda_Y_U": 0.5,
}

# Auxiliary SCM: a non-descendant Z of race (child of the latent only) and a
# Bernoulli target P.
AUX_TRUTH: dict[str, Any] = {
    "alpha_X": 1.0,
    "beta_X_race": [-0.8],
    "beta_X_Z": 0.3,
    "lambda_X_K": 0.7,
    "sigma_X": 0.5,
    "alpha_Z": 0.0,
    "lambda_Z_K": 0.8,
    "sigma_Z": 0.5,
    "alpha_P": 0.2,
    "beta_P_race": [-0.7],
    "lambda_P_K": 1.5,
    "alpha_C": 1.5,
    "beta_C_race": [0.2],
    "lambda_C_K": 0.3,
}
AUX_RACES = ("a", "b")


def dag(nodes: Mapping[str, object], edges: list[tuple[str, str]]) -> nx.DiGraph:
    """A DAG whose nodes carry ``spec`` attributes: every test builds its graphs here."""
    g = nx.DiGraph()
    for name, spec in nodes.items():
        g.add_node(name, spec=spec)
    g.add_edges_from(edges)
    return g


# ---------------------------------------------------------------------- builders
def law_level2_scm() -> cf.SCM:
    """Level 2 law school SCM: race, sex, K -> UGPA, LSAT (Poisson), ZFYA (Normal, sd 1)."""
    g = dag(
        {
            "race": cf.Protected(levels=RACES),
            "sex": cf.Protected(levels=SEXES),
            "K": cf.Latent(),
            "UGPA": cf.Normal(),
            "LSAT": cf.Poisson(),
            "ZFYA": cf.Normal(sigma=1.0),
        },
        [(p, c) for p in ("race", "sex", "K") for c in ("UGPA", "LSAT", "ZFYA")],
    )
    return cf.SCM(g)


def law_level3_scm() -> cf.SCM:
    """Level 3 law school SCM: race, sex -> UGPA, LSAT (both Normal); no latent, no ZFYA."""
    g = dag(
        {
            "race": cf.Protected(levels=RACES),
            "sex": cf.Protected(levels=SEXES),
            "UGPA": cf.Normal(),
            "LSAT": cf.datasets.raw_lsat(),  # the shipped model's priors: one program
        },
        [(p, c) for p in ("race", "sex") for c in ("UGPA", "LSAT")],
    )
    return cf.SCM(g)


def linear_gaussian_scm() -> cf.SCM:
    """U ~ N(0, 1); X ~ Normal(A, U); Y ~ Normal(A, U, X); A protected, levels "0" and "1"."""
    g = dag(
        {
            "U": cf.Latent(),
            "A": cf.Protected(levels=("0", "1")),
            "X": cf.Normal(sigma=LG_SIGMA_X),
            "Y": cf.Normal(sigma=LG_SIGMA_Y),
        },
        [("A", "X"), ("U", "X"), ("A", "Y"), ("U", "Y"), ("X", "Y")],
    )
    return cf.SCM(g)


def aux_scm() -> cf.SCM:
    """race, K -> X (Normal, also | Z); K -> Z (Normal, no protected ancestor);
    race, K -> P (Bernoulli) and C (Poisson); K ~ Normal(0.5, 1.5).

    Z and X are K's two Normal anchors, the second with another child of K among its
    parents (tests/test_anchoring.py); Z is the one non-descendant of race.
    """
    g = dag(
        {
            "race": cf.Protected(levels=AUX_RACES),
            "K": cf.Latent(loc=0.5, scale=1.5),
            "Z": cf.Normal(),
            "X": cf.Normal(),
            "P": cf.Bernoulli(),
            "C": cf.Poisson(),
        },
        [("K", "Z"), ("Z", "X")] + [(p, c) for p in ("race", "K") for c in ("X", "P", "C")],
    )
    return cf.SCM(g)


# ---------------------------------------------------------------------- data
@functools.cache
def law_train() -> pd.DataFrame:
    """500 simulated training rows of the level 2 SCM, true K included."""
    return law_level2_scm().sample(500, params=LAW_TRUTH, seed=LAW_TRAIN_SEED)


@functools.cache
def law_test() -> pd.DataFrame:
    """100 simulated new rows (other seed), true K included, index 1000..1099."""
    frame = law_level2_scm().sample(100, params=LAW_TRUTH, seed=LAW_TEST_SEED)
    frame.index = pd.RangeIndex(1000, 1100)
    return frame


@functools.cache
def linear_gaussian_data() -> pd.DataFrame:
    return linear_gaussian_scm().sample(400, params=LG_TRUTH, seed=shifted(5))


@functools.cache
def aux_data() -> pd.DataFrame:
    return aux_scm().sample(300, params=AUX_TRUTH, seed=shifted(7))


FAMILY_LEVELS = ("low", "mid", "high")
FAMILIES_TRUTH: dict[str, Any] = {
    "beta_O_A": [0.6],
    "lambda_O_U": 1.2,
    "cutpoints_O": [-0.7, 0.8],
    "alpha_X": 0.5,
    "beta_X_A": [0.4],
    "lambda_X_U": 0.9,
    "sigma_X": 0.6,
    "alpha_K": [0.3, -0.2],
    "beta_K_A": [[0.8, -0.5]],
    "beta_K_age": [0.5, -0.3],
    "beta_K_O": [[0.6, 0.4], [1.0, -0.5]],
    "alpha_C": 1.0,
    "beta_C_A": [-0.4],
    "beta_C_age": 0.3,
    "beta_C_K": [0.4, -0.3],
    "lambda_C_U": 0.5,
    "phi_C": 2.5,
}
"""True parameters of the newer-families SCM (:func:`families_scm`)."""
CATEGORIES = ("theft", "drug", "violent")


def families_scm() -> cf.SCM:
    """A protected, age continuous protected, U latent with three children: O ordinal
    (U's first child, so its loading is the positive one), X Normal (anchors U) and C
    negative binomial; K categorical on A, age and the ordinal O; C also has the
    categorical K as a parent.

    The children of U have no direct effects between them: with one (O -> C), the
    loadings, that effect and the dispersion trade off along a ridge that 1,000 rows
    do not resolve. K has no latent parent: a latent with a categorical child is
    sampled directly, not anchored (see :mod:`counterfair.model.families.categorical`);
    that case is covered by the code generation and stanc tests."""
    return cf.SCM(
        dag(
            {
                "A": cf.Protected(levels=("a", "b")),
                "age": cf.Protected(kind="continuous"),
                "U": cf.Latent(),
                "O": cf.Ordinal(levels=FAMILY_LEVELS),
                "C": cf.NegativeBinomial(),
                "X": cf.Normal(),
                "K": cf.Categorical(levels=CATEGORIES),
            },
            [
                ("A", "O"),
                ("U", "O"),
                ("A", "X"),
                ("U", "X"),
                ("A", "K"),
                ("age", "K"),
                ("O", "K"),
                ("A", "C"),
                ("age", "C"),
                ("U", "C"),
                ("K", "C"),
            ],
        )
    )


@functools.cache
def families_data() -> pd.DataFrame:
    """1,000 rows simulated by counterfair's forward simulator, true U included."""
    return families_scm().sample(1000, params=FAMILIES_TRUTH, seed=shifted(21))


ACCURACY_PROGRAM = "functions {\n" + integrated.FUNCTIONS + """
}
data {
  int<lower=1> N;
  int<lower=1> C;
  array[N, C] int y;
  matrix[N, C] eta;
  matrix[N, C] load;
  array[C] int family;
  vector[C] phi;
  int<lower=1> n_cuts;
  vector[n_cuts] cuts;
  array[C] int cut_start;
  array[C] int cut_len;
  int<lower=1> n_gh;
  vector[n_gh] gh_x;
  vector[n_gh] gh_logw;
  int<lower=0> n_newton;
}
generated quantities {
  vector[N] ll;  // one row at a time: the loadings are one row vector per call
  for (i in 1:N) {
    ll[i] = cf_integrated_rows({y[i]}, eta[i:i], load[i], family, phi, cuts, cut_start,
                               cut_len, gh_x, gh_logw, n_newton)[1];
  }
  // every row in one call, 128 at a time, with the first row's loadings (the same as
  // every row's where the test compares it with ll)
  vector[N] ll_together = cf_integrated_rows(y, eta, load[1], family, phi, cuts, cut_start,
                                             cut_len, gh_x, gh_logw, n_newton);
}
"""
"""Each row's log marginal by the integrated-latent quadrature, for given predictors
(``tests/test_integrated.py``'s accuracy test)."""


PAIR_ACCURACY_PROGRAM = "functions {\n" + integrated_pairs.FUNCTIONS_PAIR + """
}
data {
  int<lower=1> N;
  int<lower=1> C;
  array[N, C] int y;
  matrix[N, C] eta;
  matrix[N, C] load1;
  matrix[N, C] load2;
  array[C] int family;
  vector[C] phi;
  int<lower=1> n_cuts;
  vector[n_cuts] cuts;
  array[C] int cut_start;
  array[C] int cut_len;
  int<lower=1> n_gh2;
  vector[n_gh2] gh2_x;
  vector[n_gh2] gh2_logw;
  int<lower=0> n_newton2;
  int<lower=1> D;  // exact draws of row 1
}
generated quantities {
  vector[N] ll;  // one row at a time: the loadings are one row vector per call
  for (i in 1:N) {
    ll[i] = cf_integrated2_rows({y[i]}, eta[i:i], load1[i], load2[i], family, phi, cuts,
                                cut_start, cut_len, gh2_x, gh2_logw, n_newton2)[1];
  }
  matrix[D, 2] z = cf_integrated2_rng(rep_array(y[1], D), rep_matrix(eta[1], D), load1[1],
                                      load2[1], family, phi, cuts, cut_start, cut_len, gh2_x,
                                      gh2_logw, n_newton2);
}
"""
"""Each row's log marginal by the quadrature of two latents per row, and exact draws of
row 1's pair (``tests/test_integrated_pairs.py``)."""


def stan_programs(*, slow: bool = False) -> dict[str, str]:
    """Every Stan program the ``stan`` tests compile, by name (compiled up front, in parallel).

    ``slow``: include the programs only ``slow``-marked tests need.
    """
    from counterfair.stan.codegen import fit_program

    programs = {
        "law level 2": law_level2_scm().stan_code(),
        "law level 2 abduction": law_level2_scm().abduction_code(),
        "law level 2, K integrated": law_level2_scm().stan_code(integrate=["K"]),
        "law level 3": law_level3_scm().stan_code(),
        "linear Gaussian": linear_gaussian_scm().stan_code(),
        "auxiliary": aux_scm().stan_code(),
        "auxiliary abduction": aux_scm().abduction_code(),
        "auxiliary, centred": fit_program(aux_scm(), anchor_latents=False),
        "new families": families_scm().stan_code(),
        "mediation": mediation_scm().stan_code(),
        "adult pscf": _adult_pscf_scm().stan_code(),
        "quadrature accuracy": ACCURACY_PROGRAM,
        "pair quadrature accuracy": PAIR_ACCURACY_PROGRAM,
    }
    programs.update(sfm_programs())  # fit_sfm's nuisance models (tests/test_sfm.py)
    programs.update(hole_programs())  # missing='model' (tests/test_missing_model.py)
    if slow:
        programs["new families abduction"] = families_scm().abduction_code()
    return programs


# ---------------------------------------------------------------------- fits
@dataclass(frozen=True)
class RecordedFit:
    """A fit and the warnings its sampling emitted."""

    fit: cf.Fit
    warnings: tuple[warnings.WarningMessage, ...]

    def convergence_warnings(self) -> list[str]:
        return [
            str(w.message) for w in self.warnings if issubclass(w.category, ConvergenceWarning)
        ]


def fit_recording(scm: cf.SCM, data: pd.DataFrame, **kwargs: Any) -> RecordedFit:
    """Fit ``scm`` to ``data``, recording (not raising) every warning.

    The suite's shared fits are the joint program's (``latents="joint"`` unless given):
    their seeds, draws and the tests that read them (every row's latent draws sampled by
    NUTS, their R-hat, the pilot) were set for it; ``SCM.fit``'s default, ``"auto"``,
    is tested in ``tests/test_integrated.py``, ``tests/test_readme.py`` and the CLI's tests.
    """
    kwargs.setdefault("latents", "joint")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = scm.fit(data, progress=False, **kwargs)
    return RecordedFit(fit, tuple(caught))


def quietly(function: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``function`` with ConvergenceWarning ignored (short MCMC runs in fixtures)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cf.errors.ConvergenceWarning)
        return function(*args, **kwargs)


def per_backend(function: Callable[[], T]) -> Callable[[], T]:
    """Cache ``function``'s result once per Stan back end (the one ``"auto"`` resolves to)."""
    cached = functools.cache(lambda backend: function())

    @functools.wraps(function)
    def wrapper() -> T:
        return cached(resolve_backend_name("auto"))

    return wrapper


@per_backend
def law_level2_fit() -> RecordedFit:
    """The long fit: level 2 SCM, 500 rows, 4 chains, 500 + 1,000 iterations, seed 1.

    With 500 draws per chain the R-hat of ``lambda_UGPA_K`` came out at 1.0101 on
    the current package versions (the threshold is 1.01); 1,000 draws give 1.0035.
    """
    return fit_recording(
        law_level2_scm(),
        law_train().drop(columns="K"),
        chains=4,
        warmup=500,
        draws=1000,
        seed=LAW_FIT_SEED,
    )


@per_backend
def law_level3_fit() -> RecordedFit:
    """Level 3 SCM on the 500 training rows, 2 chains of 300 + 300."""
    return fit_recording(
        law_level3_scm(), law_train().drop(columns="K"), chains=2, warmup=300, draws=300,
            seed=shifted(2)
    )


@per_backend
def linear_gaussian_fit() -> RecordedFit:
    """Linear-Gaussian SCM, 400 rows, 4 chains of 400 + 400."""
    return fit_recording(
        linear_gaussian_scm(),
        linear_gaussian_data().drop(columns="U"),
        chains=4,
        warmup=400,
        draws=400,
        seed=shifted(4),
    )


@per_backend
def aux_fit() -> RecordedFit:
    """Auxiliary SCM (non-descendant Z, Bernoulli P), 300 rows, 2 chains of 300 + 300."""
    return fit_recording(
        aux_scm(), aux_data().drop(columns="K"), chains=2, warmup=300, draws=300, seed=shifted(8)
    )


@per_backend
def families_small_fit() -> RecordedFit:
    """Newer-families SCM on 300 of its rows, 2 chains of 300 + 300 (the default tests)."""
    return fit_recording(
        families_scm(),
        families_data().drop(columns="U").iloc[:300],
        chains=2,
        warmup=300,
        draws=300,
        seed=shifted(5),
    )


@per_backend
def families_fit() -> RecordedFit:
    """Newer-families SCM on its 1,000 rows, 4 chains of 500 + 1,500 (about 2 min on CmdStan).

    sigma_X mixes slowly (it trades off with the loading of U on X; min bulk ESS about 575
    at 4 x 1,000): with 500 draws per chain its R-hat came out at 1.0115 (threshold 1.01),
    with 1,000 at 1.0067 under one seed shift and 1.0114 under shift 0.
    """
    return fit_recording(
        families_scm(), families_data().drop(columns="U"), chains=4, warmup=500, draws=1500,
            seed=shifted(5)
    )


def stacked(fit: cf.Fit, name: str) -> np.ndarray:
    """Posterior draws of ``name`` with chains stacked: shape (S,) or (S, k)."""
    values = np.asarray(fit.idata.posterior[name].values, dtype=float)
    return values.reshape(values.shape[0] * values.shape[1], *values.shape[2:])


# ---------------------------------------------------------------------- path-specific
MEDIATION_SIGMA = {"M": 0.5, "L": 0.5, "Y": 0.4}
MEDIATION_TRUTH: dict[str, Any] = {
    "alpha_M": 0.2,
    "beta_M_A": [1.0],
    "lambda_M_U": 0.8,
    "alpha_L": -0.1,
    "beta_L_A": [-0.6],
    "beta_L_M": 0.5,
    "lambda_L_U": 0.6,
    "alpha_Y": 0.3,
    "beta_Y_A": [0.4],
    "beta_Y_M": 0.7,
    "beta_Y_L": -0.5,
    "lambda_Y_U": 0.5,
}
"""True parameters of :func:`mediation_scm` (tests/test_paths.py)."""


def mediation_scm() -> cf.SCM:
    """A (binary) -> M -> Y, A -> L -> Y, A -> Y, M -> L; latent U -> M, L, Y; M, L, Y
    Normal with fixed residual sds (as the linear-Gaussian SCM, for identification).
    M lies on paths that continue through L and directly to Y, so a path-specific
    intervention can see it in two contexts."""
    return cf.SCM(
        dag(
            {
                "U": cf.Latent(),
                "A": cf.Protected(levels=("0", "1")),
                "M": cf.Normal(sigma=MEDIATION_SIGMA["M"]),
                "L": cf.Normal(sigma=MEDIATION_SIGMA["L"]),
                "Y": cf.Normal(sigma=MEDIATION_SIGMA["Y"]),
            },
            [
                ("A", "M"),
                ("A", "L"),
                ("A", "Y"),
                ("M", "L"),
                ("M", "Y"),
                ("L", "Y"),
                ("U", "M"),
                ("U", "L"),
                ("U", "Y"),
            ],
        )
    )


@functools.cache
def mediation_data() -> pd.DataFrame:
    """300 simulated rows of :func:`mediation_scm`, true U included."""
    return mediation_scm().sample(300, params=MEDIATION_TRUTH, seed=shifted(31))


@per_backend
def mediation_fit() -> RecordedFit:
    """Mediation SCM, 300 rows, 2 chains of 300 + 300."""
    return fit_recording(
        mediation_scm(),
        mediation_data().drop(columns="U"),
        chains=2,
        warmup=300,
        draws=300,
        seed=shifted(32),
    )
