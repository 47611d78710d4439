"""MultiWorldLearner (Russell, Kusner, Loftus and Silva 2017): exact solution, limits, sweep,
and the scikit-learn contract (``__init__`` stores, ``fit`` checks; get/set_params, clone).

Worlds are the level 2 and level 3 law school fits shared with the other modules
(both have ``race`` with the same levels and the observed UGPA and LSAT); the
single-world closed form uses the linear-Gaussian fit, where ``X_cf - X`` is the
coefficient of ``A`` on ``X`` in each posterior draw.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _models import (
    law_level2_fit,
    law_level3_fit,
    law_test,
    linear_gaussian_fit,
)
from _seeds import shifted
from scipy import optimize
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.utils.estimator_checks import (
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_set_params,
)

import counterfair as cf
from counterfair.learn.multiworld import objective, penalty_matrix, solve, trade_off
from counterfair.model.encoding import Encoding
from experiments import law_school_worlds
from experiments.arguments import run_script
from experiments.law_school_worlds import choose_lam

FEATURES = ["UGPA", "LSAT"]
N_SAMPLES = 20


@pytest.fixture(scope="module")
def worlds(stan_backend: str) -> list[cf.Fit]:
    return [law_level2_fit().fit, law_level3_fit().fit]


@pytest.fixture(scope="module")
def design(worlds: list[cf.Fit]) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    learner = cf.MultiWorldLearner(
        fits=worlds,
        target="ZFYA",
        features=FEATURES,
        attribute="race",
        n_samples=N_SAMPLES,
        seed=shifted(0),
    )
    rows = worlds[0].data
    x = rows[FEATURES].to_numpy(dtype=float)
    y = rows["ZFYA"].to_numpy(dtype=float)
    return x, y, [d.delta for d in learner.differences()]


def _numeric(
    x: np.ndarray, y: np.ndarray, deltas: list[np.ndarray], estimator: str, lam: float
) -> np.ndarray:
    """The same objective minimised by BFGS from zero (independent of the solver under test)."""
    result = optimize.minimize(
        lambda t: objective(t, x, y, deltas, estimator=estimator, lam=lam, epsilon=0.0),
        np.zeros(x.shape[1] + 1),
        jac=True,
        method="BFGS",
        options={"gtol": 1e-11, "maxiter": 100_000},
    )
    return np.asarray(result.x)


# ---------------------------------------------------------------------- bad input
@pytest.mark.stan
def test_bad_input_raises(worlds: list[cf.Fit]) -> None:
    kwargs = {"target": "ZFYA", "features": FEATURES, "attribute": "race"}
    with pytest.raises(cf.errors.FairnessError, match="lam must be"):
        cf.MultiWorldLearner(fits=worlds, lam=-0.1, **kwargs).fit()  # type: ignore[arg-type]
    with pytest.raises(cf.errors.FairnessError, match="at least one world"):
        cf.MultiWorldLearner(fits=[], **kwargs).fit()  # type: ignore[arg-type]
    with pytest.raises(cf.errors.FairnessError, match="'tree' is not supported"):
        cf.MultiWorldLearner(fits=worlds, estimator="tree", **kwargs).fit()  # type: ignore[arg-type]
    with pytest.raises(cf.errors.FairnessError, match="epsilon must be"):
        cf.MultiWorldLearner(fits=worlds, epsilon=-1.0, **kwargs).fit()  # type: ignore[arg-type]
    # level 3 has no ZFYA node: a feature the world does not know is named
    unknown = cf.MultiWorldLearner(
        fits=worlds, target="y", features=["UGPA", "ZFYA"], attribute="race"
    )
    with pytest.raises(cf.errors.DataError, match="world 1: feature column 'ZFYA'"):
        unknown.fit()
    with pytest.raises(cf.errors.DataError, match="world 1: feature column 'ZFYA'"):
        unknown.differences()  # checked before any draw, as in fit
    other = dataclasses.replace(
        worlds[1],
        encoding=Encoding(
            levels={"race": ("White", "Black", "Hispanic"), "sex": ("Female", "Male")},
            continuous=frozenset(),
        ),
    )
    with pytest.raises(cf.errors.FairnessError, match=r"levels of 'race'.*'Asian'.*'Hispanic'"):
        cf.MultiWorldLearner(fits=[worlds[0], other], **kwargs).fit()  # type: ignore[arg-type]


# ---------------------------------------------------------------------- scikit-learn
PARAMS: dict[str, object] = {"target": "ZFYA", "features": FEATURES, "attribute": "race"}


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        ({"lam": -0.1}, cf.errors.FairnessError, "lam must be a finite number >= 0, got -0.1"),
        ({"lam": float("nan")}, cf.errors.FairnessError, "lam must be a finite number >= 0"),
        ({"epsilon": -1.0}, cf.errors.FairnessError, "epsilon must be a finite number >= 0"),
        ({"estimator": "tree"}, cf.errors.FairnessError, "estimator 'tree' is not supported"),
        ({"features": ["UGPA", "ZFYA"]}, cf.errors.DataError,
         "target 'ZFYA' cannot also be a feature"),
        ({"fits": []}, cf.errors.FairnessError, "at least one world"),
    ],
)
def test_init_stores_and_fit_checks(
    bad: dict[str, object], error: type[Exception], message: str
) -> None:
    """scikit-learn's contract: ``__init__`` stores every argument as given, under its own
    name, and does no work; the check, and the error naming the parameter, come from fit."""
    params: dict[str, object] = {"fits": [object()], **PARAMS, **bad}
    learner = cf.MultiWorldLearner(**params)  # type: ignore[arg-type]  # does not raise
    for name, value in params.items():
        assert learner.get_params()[name] is value, name
    assert not [k for k in vars(learner) if k.endswith("_")]
    with pytest.raises(error, match=re.escape(message)):
        learner.fit()


def test_scikit_learn_parameter_checks() -> None:
    """scikit-learn's own checks of the parameters (nothing but them set in ``__init__``,
    get_params stable, set_params round trip), the names, keyword-only, the tags."""
    learner = cf.MultiWorldLearner(fits=[object()], **PARAMS)  # type: ignore[arg-type]
    check_no_attributes_set_in_init("MultiWorldLearner", learner)
    check_get_params_invariance("MultiWorldLearner", learner)
    check_set_params("MultiWorldLearner", learner)
    assert set(learner.get_params()) == {
        "fits", "target", "features", "attribute", "estimator", "lam", "epsilon",
        "n_samples", "seed",
    }
    assert learner.get_params()["seed"] is None  # as FairLearner's: each world's fit seed
    with pytest.raises(TypeError, match="protected"):  # the column is attribute= now
        cf.MultiWorldLearner(  # type: ignore[call-arg]
            fits=[], protected="race", target="ZFYA", features=FEATURES
        )
    with pytest.raises(TypeError):
        cf.MultiWorldLearner([], "ZFYA", FEATURES, "race")  # type: ignore[misc]  # keyword-only
    assert is_regressor(learner) and not is_classifier(learner)
    learner.set_params(estimator="logistic")
    assert is_classifier(learner) and not is_regressor(learner)
    with pytest.raises(NotFittedError):
        learner.predict(pd.DataFrame({"UGPA": [3.0], "LSAT": [30.0]}))


def test_clone_keeps_params_and_shares_the_worlds() -> None:
    worlds = [object(), object()]
    learner = cf.MultiWorldLearner(
        fits=worlds, lam=2.5, n_samples=7, seed=3,  # literal seed: stored, never drawn with
        **PARAMS,  # type: ignore[arg-type]
    )
    copy = clone(learner)
    assert copy is not learner
    assert clone(learner).get_params() == learner.get_params()
    assert copy.fits == worlds and copy.fits is not worlds  # a new list of the same fits
    assert all(a is b for a, b in zip(copy.fits, worlds, strict=True))
    assert copy.features == learner.features and copy.features is not learner.features
    as_tuple = clone(learner.set_params(fits=tuple(worlds)))
    assert as_tuple.get_params() == learner.get_params()  # the container keeps its type


@pytest.mark.stan
def test_fitted_clone_with_the_same_seed_predicts_identically(worlds: list[cf.Fit]) -> None:
    rows = worlds[0].data
    fitted = cf.MultiWorldLearner(
        fits=worlds, lam=2.0, n_samples=N_SAMPLES, seed=shifted(3), **PARAMS  # type: ignore[arg-type]
    ).fit()
    copy = clone(fitted)
    assert clone(fitted).get_params() == fitted.get_params()
    assert not hasattr(copy, "coef_") and not hasattr(copy, "levels_")
    copy.fit()
    np.testing.assert_array_equal(copy.predict(rows), fitted.predict(rows))
    np.testing.assert_array_equal(copy.coef_, fitted.coef_)
    # another seed draws other counterfactuals and so other weights
    other = clone(fitted).set_params(seed=shifted(4)).fit()
    assert not np.array_equal(other.coef_, fitted.coef_)


@pytest.mark.stan
def test_set_params_then_fit_equals_constructing_with_them(worlds: list[cf.Fit]) -> None:
    rows = worlds[0].data.assign(passed=lambda f: (f["ZFYA"] > 0).astype(int))
    base = cf.MultiWorldLearner(
        fits=worlds, n_samples=N_SAMPLES, seed=shifted(3), **PARAMS  # type: ignore[arg-type]
    )
    diffs = base.differences()
    changed = base.set_params(lam=5.0, estimator="logistic", target="passed")
    assert changed is base
    fitted = changed.fit(rows, differences=diffs)
    direct = cf.MultiWorldLearner(
        fits=worlds, target="passed", features=FEATURES, attribute="race", lam=5.0,
        estimator="logistic", n_samples=N_SAMPLES, seed=shifted(3),
    )
    again = direct.differences()  # the same seed draws the same counterfactuals
    for ours, theirs in zip(diffs, again, strict=True):
        np.testing.assert_array_equal(ours.delta, theirs.delta)
    direct.fit(rows, differences=again)
    np.testing.assert_allclose(fitted.coef_, direct.coef_, rtol=0, atol=1e-10)
    assert fitted.intercept_ == pytest.approx(direct.intercept_, abs=1e-10)
    # y given apart from the rows (as a scikit-learn fit(X, y)) gives the same weights
    apart = clone(fitted).fit(rows.drop(columns="passed"), rows["passed"], differences=diffs)
    np.testing.assert_allclose(apart.coef_, fitted.coef_, rtol=0, atol=1e-12)
    assert 0.5 < fitted.score(rows) <= 1.0  # accuracy for the logistic estimator
    # the new lam reaches the solver: a smaller one changes the weights
    weaker = clone(fitted).set_params(lam=0.1).fit(rows, differences=diffs)
    assert not np.allclose(weaker.coef_, fitted.coef_)


# ---------------------------------------------------------------------- exact solution
@pytest.mark.stan
def test_least_squares_closed_form_equals_numeric_optimiser(
    design: tuple[np.ndarray, np.ndarray, list[np.ndarray]],
) -> None:
    x, y, deltas = design
    for lam in (0.3, 5.0):
        exact = solve(x, y, deltas, estimator="linear", lam=lam, epsilon=0.0)
        numeric = _numeric(x, y, deltas, "linear", lam)
        np.testing.assert_allclose(exact, numeric, rtol=0, atol=1e-6)


@pytest.mark.stan
def test_logistic_solution_equals_numeric_optimiser(
    design: tuple[np.ndarray, np.ndarray, list[np.ndarray]],
) -> None:
    x, y, deltas = design
    label = (y > 0).astype(float)
    for lam in (0.3, 5.0):
        ours = solve(x, label, deltas, estimator="logistic", lam=lam, epsilon=0.0)
        numeric = _numeric(x, label, deltas, "logistic", lam)
        np.testing.assert_allclose(ours, numeric, rtol=0, atol=1e-6)


@pytest.mark.stan
def test_lambda_zero_is_ordinary_least_squares_and_logistic(worlds: list[cf.Fit]) -> None:
    rows = worlds[0].data.assign(passed=lambda f: (f["ZFYA"] > 0).astype(int))
    x = rows[FEATURES].to_numpy(dtype=float)
    ols = LinearRegression().fit(x, rows["ZFYA"])
    ours = cf.MultiWorldLearner(
        fits=worlds,
        target="ZFYA",
        features=FEATURES,
        attribute="race",
        lam=0.0,
        n_samples=N_SAMPLES,
        seed=shifted(0),
    ).fit()
    np.testing.assert_allclose(ours.coef_, ols.coef_, rtol=1e-9)
    assert ours.intercept_ == pytest.approx(ols.intercept_, rel=1e-9)
    logit = LogisticRegression(C=np.inf, tol=1e-12, max_iter=100_000).fit(x, rows["passed"])
    mine = cf.MultiWorldLearner(
        fits=worlds,
        target="passed",
        features=FEATURES,
        attribute="race",
        lam=0.0,
        estimator="logistic",
        n_samples=N_SAMPLES,
        seed=shifted(0),
    ).fit(rows)
    np.testing.assert_allclose(mine.coef_, logit.coef_[0], atol=1e-5)
    assert mine.intercept_ == pytest.approx(logit.intercept_[0], abs=1e-5)
    np.testing.assert_allclose(mine.predict_proba(rows), logit.predict_proba(x)[:, 1], atol=1e-6)


# ---------------------------------------------------------------------- trade-off
@pytest.mark.stan
def test_sweep_drives_every_world_change_to_zero(worlds: list[cf.Fit]) -> None:
    test = law_test().drop(columns="K").iloc[:40]
    lams = [0.0, 0.1, 1.0, 10.0, 100.0, 1e4]
    table = trade_off(
        worlds,
        target="ZFYA",
        features=FEATURES,
        attribute="race",
        lams=lams,
        test=test,
        n_samples=N_SAMPLES,
        seed=shifted(0),
    )
    assert list(table["lam"]) == lams
    worst = table["worst_change"].to_numpy()
    assert np.all(np.diff(worst) <= 1e-12), worst
    assert worst[-1] < 1e-3 * worst[0]
    for j in range(2):
        assert table[f"change_world_{j}"].iloc[-1] < 1e-3 * table[f"change_world_{j}"].iloc[0]
    # the price: test RMSE grows from the unpenalised least squares
    assert table["rmse"].iloc[-1] > table["rmse"].iloc[0]


@pytest.mark.stan
def test_training_penalty_never_increases_with_lambda(
    design: tuple[np.ndarray, np.ndarray, list[np.ndarray]],
) -> None:
    x, y, deltas = design
    p = penalty_matrix(deltas)
    penalties = []
    for lam in (0.0, 0.5, 2.0, 8.0, 64.0):
        w = solve(x, y, deltas, estimator="linear", lam=lam, epsilon=0.0)[1:]
        penalties.append(float(w @ p @ w))
    assert np.all(np.diff(penalties) < 0), penalties


# ---------------------------------------------------------------------- single world
@pytest.mark.stan
def test_single_world_penalty_uses_that_worlds_draws(stan_backend: str) -> None:
    """U -> X <- A: X_cf - X = beta_X_A * (a' - a) in each posterior draw, exactly.

    With one feature the penalised least squares has the closed form
    ``w = cov(x, y) / (var(x) + lam * c)`` with ``c`` the mean of ``(X_cf - X)**2``
    over the draws, rows and both levels (half of them the factual level, zero).
    """
    fit = linear_gaussian_fit().fit
    lam = 0.7
    learner = cf.MultiWorldLearner(
        fits=[fit],
        target="Y",
        features=["X"],
        attribute="A",
        lam=lam,
        n_samples=N_SAMPLES,
        seed=shifted(5),
    ).fit()
    beta = fit.abduct(None, n_samples=N_SAMPLES, seed=shifted(5)).params["beta_X_A"][:, 0]
    n = fit.data.shape[0]
    delta = learner.differences_[0]
    # rows are stacked (level, sample, row): level "0" then "1"
    a = fit.data["A"].astype(str).to_numpy()
    sign = {"0": np.where(a == "1", -1.0, 0.0), "1": np.where(a == "0", 1.0, 0.0)}
    expected = np.concatenate(
        [(beta[:, None] * sign[level][None, :]).ravel() for level in ("0", "1")]
    )
    np.testing.assert_allclose(delta.delta[:, 0], expected, atol=1e-9)
    c = float(np.mean(expected**2))
    x = fit.data["X"].to_numpy(dtype=float)
    y = fit.data["Y"].to_numpy(dtype=float)
    w = np.cov(x, y, bias=True)[0, 1] / (np.var(x) + lam * c)
    assert learner.coef_[0] == pytest.approx(w, rel=1e-10)
    assert learner.intercept_ == pytest.approx(y.mean() - w * x.mean(), rel=1e-10)
    assert 2 * n * N_SAMPLES == delta.delta.shape[0]
    assert isinstance(learner.world_changes(), pd.DataFrame)


# ---------------------------------------------------------------------- law school study
def test_study_refuses_a_non_empty_out_and_negative_lams(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mine.txt").write_text("keep")
    assert run_script(law_school_worlds.main, ["--out", str(tmp_path), "--quick"]) == 2  # refused
    assert re.search("is not empty", capsys.readouterr().err)
    assert (tmp_path / "mine.txt").read_text() == "keep"
    refused = run_script(law_school_worlds.main,
                         ["--out", str(tmp_path / "new"), "--lams", "0", "-1"])
    assert refused == 2
    assert re.search("--lams must be >= 0", capsys.readouterr().err)
    assert not (tmp_path / "new").exists()


def test_choose_lam_takes_the_fairest_within_the_rmse_budget() -> None:
    table = pd.DataFrame(
        {
            "lam": [0.0, 1.0, 10.0, 100.0],
            "rmse": [0.870, 0.872, 0.879, 0.890],
            "worst_change": [0.5, 0.1, 0.01, 0.001],
        }
    )
    assert choose_lam(table, rmse_budget=0.01) == 10.0
    assert choose_lam(table, rmse_budget=0.001) == 0.0


@pytest.mark.slow
@pytest.mark.stan
@pytest.mark.filterwarnings("ignore::counterfair.errors.ConvergenceWarning")  # short quick chains
def test_study_quick_run_writes_the_table_and_plot(tmp_path: Path, stan_backend: str) -> None:
    out = tmp_path / "worlds"
    assert (
        run_script(law_school_worlds.main,
                   ["--quick", "--out", str(out), "--lams", "0", "1", "100"])
        == 0
    )
    table = pd.read_csv(out / "table.csv")
    assert list(table["lam"]) == [0.0, 1.0, 100.0]
    assert np.all(np.diff(table["worst_change"]) < 0)
    assert {"table.md", "trade_off.png", "run.json"} <= {p.name for p in out.iterdir()}
