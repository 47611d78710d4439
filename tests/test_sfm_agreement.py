"""``fit_sfm(...).decompose()`` (the Standard Fairness Model's roles, no SCM) against
``decompose`` (a fitted SCM as the world) on real data: UC Berkeley admissions 1973 and
COMPAS.

The two estimate the same terms by different routes. ``decompose`` reads every term
off the SCM's mechanisms: the rows' noise abducted once, the worlds ``do(X)`` and
``y_{x1, W_x0}`` built by propagating it (each mediator redrawn from its own mechanism
where its parents change). The SFM decomposition reads them off two regressions, the
outcome's ``E[y | x, z, w]`` (``X`` interacting with every term) and the attribute's
``P(x1 | z)``, by plug-in and reweighting. They must agree where both rest on the same
thing: where the SCM's outcome mechanism and the SFM's outcome regression estimate the
same ``E[y | x, z, w]`` and, for the terms that move the mediators, where the SCM's
mediator mechanisms carry the same law of ``W`` given ``x`` and ``z`` as the rows do.

**The bound** (:data:`K_SD`): ``|mean_sfm - mean_scm| <= 3 sqrt(sd_sfm^2 + sd_scm^2)``,
with the posterior means and sds of the two tables. The sd is that of the posterior, not
the Monte Carlo standard error of its mean (which, over 200 draws, is about a fourteenth
of it): two estimators of one quantity from the same rows differ by their estimation
error, and that is what the posterior sd measures. The bound treats the two errors as
independent, but both posteriors read the same rows, so their errors are positively
correlated and the sd of their difference is smaller than the root sum of squares: the
bound is conservative, not exact. A plug-in computed from the rows (below) has no sd;
against it the bound is 3 times the model's own sd. A term that is exactly 0 in both
(no confounder) or the raw gap in both (TV) must agree to rounding.

**Rows fixed.** ``decompose``'s draws are posterior draws of the parameters and of the
rows' noise given these rows; TV is the rows' own gap in every draw and nothing resamples
the rows. ``SFMFit.decompose(rows="fixed")`` weights every row 1, so its draws carry the
two models' posterior alone and its TV is the raw gap too: like for like. The default
Bayesian bootstrap would add the rows' sampling, which ``decompose`` leaves out, and
widen the bound for no reason.

**What the two sds are.** With a Bernoulli outcome, ``decompose``'s draw of a term that
changes ``X`` reads each row's counterfactual outcome coupled to its factual one (the
monotone coupling: one uniform per row, abducted inside the factual value's interval), so
its sd is that of ``mean_x0 (p1 - p0)``-like quantities, the slope of ``X``'s effect,
while the SFM's is that of ``mean_x0 mu_1``, pinned by the rows of ``x1``. On
COMPAS the SCM's Ctf-DE has sd 0.012; its fit's parameter draws give 0.0077 for
``mean_x0 mu_1 - E[y | x0]`` and 0.0120 for the coupled expectation, both with posterior
mean 0.000: the SCM's larger sd comes with the coupling (it is its posterior's own sd,
not noise on top of it).

**UC Berkeley** (Bickel, Hammel and O'Connell 1975): X = gender (x0 = Male, x1 =
Female), W = department (A to F), Y = admitted, no confounder; 4,526 applicants. The SCM
is gender -> department (a categorical node, gender its parent: saturated) and
{gender, department} -> admitted (Bernoulli). Its admission mechanism is additive on the
logit scale: counterfair's :class:`~counterfair.Interaction` refuses two categorical
parents (``counterfair/model/terms/building.py``), so gender x department cannot be
declared, while the SFM's outcome regression has it (gender interacts with every
department indicator, prior sd 0.5). They then target different quantities, and each is
checked against its own closed form from the table: the SFM against the nonparametric
plug-in ``Ctf-DE = sum_d P(d | male) (p_female,d - p_male,d)``, the SCM against the same
formula with the additive logit's maximum likelihood fit. The table rejects additivity
across the six departments (deviance 20.2 on 5 df, p = 0.001; department A admits 82 %
of women and 62 % of men), and there the two Ctf-DE targets are 0.071 and 0.020; the
posterior means were 0.067 (sd 0.024) and 0.016 (sd 0.016), 1.8 to 2.2 combined sds
apart over the seed shifts 0 to 2, so the bound does not separate the two models on
these rows (not asserted: narrower intervals would). Without department A additivity
holds (deviance 2.6 on 4 df, p = 0.63) and both decompositions apply: there they must
agree with each other (0.6 to 0.8 combined sds apart).

**COMPAS** (ProPublica's filters, 6,172 rows; the rows of
:func:`experiments.decomposition.compas_rows`): X = race (x0 = Majority,
Caucasian; x1 = Minority), Z = sex and standardised age, W = the juvenile counts
(summed), the prior count and the charge degree (felony), Y = two-year recidivism. The
SCM is that of ``experiments.decomposition`` with one outcome and a negative
binomial juvenile count: sex protected, age an observed root, each mediator a GLM of
race, sex, age and the mediators before it (negative binomial, negative binomial,
Bernoulli), the outcome a linear logistic GLM of all six. Every term agrees within the
bound; the largest gap is Ctf-IE's (SCM -0.048, SFM -0.061, 1.7 to 2.0 combined sds over
the seed shifts 0 to 2), and Ctf-DE, the term that rests on the outcome models alone,
is 0.4 combined sds apart (SCM -0.001, SFM -0.007). Where Ctf-IE's gap of 0.013 comes from,
measured with the SCM's fit (posterior-mean parameters): the nested term
``E[y_{x1, W_x0} | x0]`` is 0.390 under the SCM's additive outcome and 0.384 under the
SFM's (splines, race interactions), 0.006 of it; ``E[y_x1 | x0]`` is 0.441 when the
Majority rows' mediators are drawn from the SCM's mechanisms at x1 and 0.449 when, with
the same outcome model, the Minority rows are reweighted by ``(1 - pi(z)) / pi(z)`` as
the SFM does, the other 0.007. The mechanisms are log-linear in age and in the juvenile
count: the youngest fifth of the Minority rows have 1.4 priors on average where their
negative binomial's mean (given their own juvenile counts) is 3.0, and the mean prior
count they give the Majority rows in the Minority world rests on the tail of
``exp(beta juv_count)`` (4.5 and 5.6 in two simulations of 100 draws, against 3.97 from
reweighting the Minority rows' own counts).
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from _data import DATA_DIR, needs_data
from _seeds import shifted
from scipy.optimize import minimize
from scipy.special import expit
from scipy.stats import chi2

import counterfair as cf
from counterfair.errors import ScaleWarning
from counterfair.stan.backend import resolve_backend_name

K_SD = 3.0
"""Two means agree when they are within this many root-sum-square posterior sds (the
module docstring says why the bound is fair and conservative)."""

EXACT = 1e-9
"""TV (the raw gap in both) and the terms that are exactly 0 in both, up to rounding."""

TERMS: tuple[str, ...] = (
    "TV", "Ctf-DE", "Ctf-IE", "Ctf-SE", "NDE", "NIE", "Exp-SE_x0", "Exp-SE_x1",
)
"""Every term of a :class:`counterfair.audit.decomposition_result.Decomposition`."""

N_SAMPLES = 200
"""Draws of the terms in both decompositions."""

FIT = {"chains": 2, "warmup": 300, "draws": 300, "progress": False}
"""NUTS settings of the SCM's fit and of each SFM nuisance fit."""

RECORDED = (cf.errors.ConvergenceWarning, ScaleWarning)
"""Warnings a short fit may emit (recorded, not raised); any other fails the test."""

T = TypeVar("T")

# ---------------------------------------------------------------------- UC Berkeley
# Graduate admissions at UC Berkeley, fall 1973, the six largest departments (Bickel,
# Hammel and O'Connell, "Sex bias in graduate admissions: data from Berkeley", Science
# 187 (1975) 398-404), as R's datasets::UCBAdmissions holds them (the 2 x 2 x 6 table
# Admit x Gender x Dept; Rdatasets' csv/datasets/UCBAdmissions.csv, columns Admit,
# Gender, Dept, Freq). 2,691 men (1,198 admitted) and 1,835 women (557 admitted).
UCB_DEPARTMENTS = "ABCDEF"
UCB_GENDERS = ("Male", "Female")
UCB_ADMITTED = {"Male": (512, 353, 120, 138, 53, 22), "Female": (89, 17, 202, 131, 94, 24)}
UCB_REJECTED = {"Male": (313, 207, 205, 279, 138, 351), "Female": (19, 8, 391, 244, 299, 317)}


def ucb_counts(departments: str) -> tuple[np.ndarray, np.ndarray]:
    """Admitted and applicants, ``(2, D)``: rows Male, Female; columns the departments."""
    keep = [UCB_DEPARTMENTS.index(d) for d in departments]
    admitted = np.array([UCB_ADMITTED[g] for g in UCB_GENDERS], dtype=float)[:, keep]
    rejected = np.array([UCB_REJECTED[g] for g in UCB_GENDERS], dtype=float)[:, keep]
    return admitted, admitted + rejected


def ucb_rows(departments: str = UCB_DEPARTMENTS) -> pd.DataFrame:
    """One row per applicant of ``departments``: gender, dept, admitted (0/1)."""
    parts = []
    for g in UCB_GENDERS:
        for d in departments:
            i = UCB_DEPARTMENTS.index(d)
            for value, count in ((1, UCB_ADMITTED[g][i]), (0, UCB_REJECTED[g][i])):
                parts.append(pd.DataFrame({"gender": [g] * count, "dept": [d] * count,
                                           "admitted": [value] * count}))
    rows = pd.concat(parts, ignore_index=True)
    rows["gender"] = pd.Categorical(rows["gender"], categories=list(UCB_GENDERS))
    rows["dept"] = pd.Categorical(rows["dept"], categories=list(departments))
    return rows


def ucb_scm(departments: str) -> cf.SCM:
    """gender -> dept (categorical, saturated in gender) and {gender, dept} -> admitted
    (Bernoulli, additive on the logit scale: the only admission mechanism counterfair
    can declare, since an Interaction of two categorical parents is refused)."""
    g = nx.DiGraph()
    g.add_node("gender", spec=cf.Protected(levels=UCB_GENDERS))
    g.add_node("dept", spec=cf.Categorical(levels=tuple(departments)))
    g.add_node("admitted", spec=cf.Bernoulli())
    g.add_edges_from([("gender", "dept"), ("gender", "admitted"), ("dept", "admitted")])
    return cf.SCM(g)


def additive_logit(departments: str) -> np.ndarray:
    """P(admitted | gender, dept) of the additive logit ``alpha_d + beta [female]``, fitted
    by maximum likelihood to the table, ``(2, D)``."""
    admitted, applicants = ucb_counts(departments)
    female = np.array([[0.0], [1.0]])
    k = admitted.shape[1]

    def loss(b: np.ndarray) -> float:
        eta = b[:k][None, :] + b[k] * female
        return float(-(admitted * eta - applicants * np.logaddexp(0.0, eta)).sum())

    b = minimize(loss, np.zeros(k + 1), method="BFGS", options={"gtol": 1e-10}).x
    return np.asarray(expit(b[:k][None, :] + b[k] * female))


def table_terms(departments: str, admission: np.ndarray | None = None) -> pd.Series:
    """Every term in closed form from the table, no confounder: with ``p_{x,d}`` the
    admission rates (``admission``, default the table's own: the nonparametric plug-in),
    ``E[y_{x1, W_x0} | x0] = sum_d P(d | x0) p_{x1,d}`` (also over all rows, gender
    being independent of everything it does not cause), ``E[y | x]`` the rows' own means,
    and the spurious terms 0."""
    admitted, applicants = ucb_counts(departments)
    rates = admitted / applicants if admission is None else admission
    mean = admitted.sum(axis=1) / applicants.sum(axis=1)
    nested = float((applicants[0] / applicants[0].sum() * rates[1]).sum())
    de, ie = nested - mean[0], nested - mean[1]
    return pd.Series({"TV": mean[1] - mean[0], "Ctf-DE": de, "Ctf-IE": ie, "Ctf-SE": 0.0,
                      "NDE": de, "NIE": ie, "Exp-SE_x0": 0.0, "Exp-SE_x1": 0.0})


def additivity_deviance(departments: str) -> tuple[float, int]:
    """The additive logit's deviance against the saturated table, and its degrees of
    freedom (one per department less one): a test of equal odds ratios."""
    admitted, applicants = ucb_counts(departments)
    rates, fitted = admitted / applicants, additive_logit(departments)
    rejected = applicants - admitted
    deviance = 2.0 * float((admitted * np.log(rates / fitted)).sum()
                           + (rejected * np.log((1 - rates) / (1 - fitted))).sum())
    return deviance, admitted.shape[1] - 1


# ---------------------------------------------------------------------- COMPAS
COMPAS_FILE = "compas-scores-two-years.csv"
COMPAS_RACES = ("Majority", "Minority")
COMPAS_Z = ("sex", "age_z")
COMPAS_W = ("juv_count", "priors_count", "felony")
COMPAS_Y = "two_year_recid"


def compas_scm() -> cf.SCM:
    """The SCM of ``experiments.decomposition`` with one outcome and a
    negative binomial juvenile count (87 % of the rows are 0, the largest is 20)."""
    g = nx.DiGraph()
    g.add_node("race", spec=cf.Protected(levels=COMPAS_RACES))
    g.add_node("sex", spec=cf.Protected(levels=("Male", "Female")))
    g.add_node("age_z", spec=cf.Normal())
    g.add_node("juv_count", spec=cf.NegativeBinomial())
    g.add_node("priors_count", spec=cf.NegativeBinomial())
    g.add_node("felony", spec=cf.Bernoulli())
    g.add_node(COMPAS_Y, spec=cf.Bernoulli())
    for child in (*COMPAS_W, COMPAS_Y):
        for parent in ("race", *COMPAS_Z):
            g.add_edge(parent, child)
    for i, mediator in enumerate(COMPAS_W):
        for later in (*COMPAS_W[i + 1:], COMPAS_Y):
            g.add_edge(mediator, later)
    return cf.SCM(g)


def compas_data() -> pd.DataFrame:
    from experiments.decomposition import compas_rows

    return compas_rows(str(DATA_DIR))[["race", *COMPAS_Z, *COMPAS_W, COMPAS_Y]]


# ---------------------------------------------------------------------- the two fits
@dataclass(frozen=True)
class Pair:
    """The rows, both decompositions and the seconds each took (fit included)."""

    data: pd.DataFrame
    scm: cf.audit.decomposition_result.Decomposition
    sfm: cf.audit.decomposition_result.Decomposition
    seconds: dict[str, float]


def _recorded(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs)``, recording a short fit's warnings; any other fails."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call(*args, **kwargs)
    unexpected = [w for w in caught if not issubclass(w.category, RECORDED)]
    assert not unexpected, [str(w.message) for w in unexpected]
    return out


def both(
    data: pd.DataFrame, scm: cf.SCM, *, attribute: str, x0: str, x1: str, outcome: str,
    confounders: tuple[str, ...], mediators: tuple[str, ...], seed: int,
) -> Pair:
    """``decompose`` with the SCM fitted to ``data`` and ``fit_sfm`` with the roles
    that match its graph, both with :data:`N_SAMPLES` draws and the rows fixed."""
    roles = {"attribute": attribute, "x0": x0, "x1": x1, "outcome": outcome,
             "confounders": list(confounders), "mediators": list(mediators)}
    started = time.perf_counter()
    fit = _recorded(scm.fit, data, seed=seed, **FIT)
    fitted = time.perf_counter()
    by_scm = _recorded(cf.audit.decompose, fit, data, **roles,
                       settings=cf.audit.DecompositionSettings(n_samples=N_SAMPLES, seed=seed))
    scm_done = time.perf_counter()
    by_sfm = _recorded(
        lambda: cf.audit.fit_sfm(data, **roles, seed=seed, settings=cf.audit.SFMSettings(**FIT))
        .decompose(rows="fixed", n_samples=N_SAMPLES)
    )
    done = time.perf_counter()
    seconds = {"scm fit": fitted - started, "decompose": scm_done - fitted,
               "sfm": done - scm_done}
    return Pair(data, by_scm, by_sfm, seconds)


@functools.cache
def _ucb(departments: str, backend: str) -> Pair:
    return both(ucb_rows(departments), ucb_scm(departments), attribute="gender", x0="Male",
                x1="Female", outcome="admitted", confounders=(), mediators=("dept",),
                seed=shifted(46))


@functools.cache
def _compas(backend: str) -> Pair:
    return both(compas_data(), compas_scm(), attribute="race", x0=COMPAS_RACES[0],
                x1=COMPAS_RACES[1], outcome=COMPAS_Y, confounders=COMPAS_Z,
                mediators=COMPAS_W, seed=shifted(47))


def ucb(departments: str) -> Pair:
    """Both decompositions of the applicants of ``departments``, once per back end."""
    return _ucb(departments, resolve_backend_name("auto"))


def compas() -> Pair:
    """Both decompositions of COMPAS, once per back end."""
    return _compas(resolve_backend_name("auto"))


# ---------------------------------------------------------------------- the comparison
def summary(result: cf.audit.decomposition_result.Decomposition) -> pd.DataFrame:
    """Each term's posterior mean and sd (TV once)."""
    table = result.table.drop_duplicates("term").set_index("term")
    return table.loc[list(TERMS), ["mean", "sd"]]


def side_by_side(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """Two ``(mean, sd)`` tables, their gap, the bound and the gap in combined sds."""
    out = pd.DataFrame({"mean_a": first["mean"], "sd_a": first["sd"],
                        "mean_b": second["mean"], "sd_b": second["sd"]})
    out["gap"] = (out["mean_a"] - out["mean_b"]).abs()
    combined = np.sqrt(out["sd_a"] ** 2 + out["sd_b"] ** 2)
    out["bound"] = K_SD * combined
    out["z"] = out["gap"] / combined.where(combined > 0)
    return out


def assert_agree(first: pd.DataFrame, second: pd.DataFrame, what: str) -> None:
    """Every term within :data:`K_SD` combined sds, or equal to rounding."""
    table = side_by_side(first, second)
    bad = table[~((table["gap"] <= table["bound"]) | (table["gap"] < EXACT))]
    assert bad.empty, (
        f"{what}: means more than {K_SD} combined sds apart:\n{bad}\n\nall terms:\n{table}"
    )


def fixed(values: pd.Series) -> pd.DataFrame:
    """A plug-in as a ``(mean, sd)`` table with sd 0."""
    return pd.DataFrame({"mean": values.loc[list(TERMS)], "sd": 0.0})


# ---------------------------------------------------------------------- no Stan
def test_the_table_is_the_published_one() -> None:
    """4,526 applicants; 1,198 of 2,691 men and 557 of 1,835 women admitted (the figures
    of R's documentation of UCBAdmissions); the rows expand it exactly."""
    admitted, applicants = ucb_counts(UCB_DEPARTMENTS)
    assert applicants.sum(axis=1).tolist() == [2691, 1835]
    assert admitted.sum(axis=1).tolist() == [1198, 557]
    rows = ucb_rows()
    assert len(rows) == 4526
    counts = rows.groupby(["gender", "dept"], observed=True)["admitted"].agg(["sum", "size"])
    assert counts["sum"].unstack().loc[list(UCB_GENDERS)].to_numpy().tolist() == \
        admitted.tolist()
    assert counts["size"].unstack().loc[list(UCB_GENDERS)].to_numpy().tolist() == \
        applicants.tolist()


def test_additivity_fails_with_department_a_and_holds_without() -> None:
    """Where both decompositions apply: the additive logit the SCM can declare fits the
    table of departments B to F (equal odds ratios) but not of all six."""
    deviance, df = additivity_deviance(UCB_DEPARTMENTS)
    assert chi2.sf(deviance, df) < 0.01, (deviance, df)
    deviance, df = additivity_deviance("BCDEF")
    assert chi2.sf(deviance, df) > 0.2, (deviance, df)


# ---------------------------------------------------------------------- UC Berkeley
@pytest.mark.stan
@pytest.mark.parametrize("departments", [UCB_DEPARTMENTS, "BCDEF"])
def test_ucb_sfm_matches_the_table(stan_backend: str, departments: str) -> None:
    """The SFM decomposition against the nonparametric plug-in of the table, the
    quantity its outcome regression (gender x every department) estimates."""
    pair = ucb(departments)
    assert_agree(summary(pair.sfm), fixed(table_terms(departments)),
                 f"SFM vs the table, departments {departments}")


@pytest.mark.stan
@pytest.mark.parametrize("departments", [UCB_DEPARTMENTS, "BCDEF"])
def test_ucb_scm_matches_its_additive_plugin(stan_backend: str, departments: str) -> None:
    """The SCM-based decomposition against the same formulas with the additive logit's
    maximum likelihood rates, the quantity its admission mechanism estimates."""
    pair = ucb(departments)
    target = table_terms(departments, additive_logit(departments))
    assert_agree(summary(pair.scm), fixed(target),
                 f"SCM vs the additive plug-in, departments {departments}")


@pytest.mark.stan
def test_ucb_both_agree_where_additivity_holds(stan_backend: str) -> None:
    """Departments B to F: the SCM's additive mechanism fits the table, so both
    decompositions estimate the same terms, and they agree."""
    pair = ucb("BCDEF")
    assert_agree(summary(pair.sfm), summary(pair.scm), "SFM vs SCM, departments B-F")


@pytest.mark.stan
def test_ucb_both_give_the_raw_gap_and_no_spurious_term(stan_backend: str) -> None:
    """No confounder: TV is the raw gap in every draw of both, the spurious terms are 0
    in every draw of both, and both identities hold draw by draw."""
    for departments in (UCB_DEPARTMENTS, "BCDEF"):
        pair = ucb(departments)
        gap = table_terms(departments)["TV"]
        for result in (pair.scm, pair.sfm):
            draws = result.draws
            assert np.abs(draws["TV"].to_numpy() - gap).max() < EXACT
            for term in ("Ctf-SE", "Exp-SE_x0", "Exp-SE_x1"):
                assert np.abs(draws[term].to_numpy()).max() < EXACT, term
            assert result.identity_residuals().abs().to_numpy().max() < EXACT


@pytest.mark.stan
def test_ucb_the_gap_between_them_is_department_a(stan_backend: str) -> None:
    """All six departments: the two decompositions' difference is the difference of
    their targets (the interaction the SCM cannot declare) to within the bound; the
    targets' Ctf-DE differ by 0.05, about 2 combined posterior sds (the module
    docstring)."""
    pair = ucb(UCB_DEPARTMENTS)
    table_gap = table_terms(UCB_DEPARTMENTS) - table_terms(
        UCB_DEPARTMENTS, additive_logit(UCB_DEPARTMENTS))
    sfm, scm = summary(pair.sfm), summary(pair.scm)
    observed = pd.DataFrame({"mean": sfm["mean"] - scm["mean"],
                             "sd": np.sqrt(sfm["sd"] ** 2 + scm["sd"] ** 2)})
    assert_agree(observed, fixed(table_gap), "SFM - SCM vs nonparametric - additive")
    assert 0.04 < table_gap["Ctf-DE"] < 0.06, table_gap


# ---------------------------------------------------------------------- COMPAS
@pytest.mark.stan
@needs_data(COMPAS_FILE)
def test_compas_both_agree(stan_backend: str) -> None:
    """COMPAS by race: every term of the SFM decomposition within the bound of the
    SCM-based one (the module docstring measures where the largest gap, Ctf-IE's,
    comes from)."""
    pair = compas()
    assert_agree(summary(pair.sfm), summary(pair.scm), "COMPAS: SFM vs SCM")


@pytest.mark.stan
@needs_data(COMPAS_FILE)
def test_compas_both_give_the_raw_gap(stan_backend: str) -> None:
    """TV is the rows' own gap in every draw of both (rows fixed in both), and both
    identities hold draw by draw."""
    pair = compas()
    y = pair.data[COMPAS_Y].to_numpy(dtype=float)
    minority = (pair.data["race"] == COMPAS_RACES[1]).to_numpy()
    gap = y[minority].mean() - y[~minority].mean()
    for result in (pair.scm, pair.sfm):
        assert np.abs(result.draws["TV"].to_numpy() - gap).max() < EXACT
        assert result.identity_residuals().abs().to_numpy().max() < EXACT
