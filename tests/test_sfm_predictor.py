"""``SFMFit.predictor`` (counterfair.audit.sfm_predictor): a prediction fair by business
necessity.

* **Its effects** (``stan``, one fit of scenario ``c`` of ``tests/_sfm.py``, which has
  direct, indirect and spurious effects and an ``X x W`` interaction): a removed direct
  effect is 0 in every draw; a removed indirect or spurious effect is 0 within its
  interval and small beside the outcome's; a kept effect is the outcome's, within the
  outcome's posterior sd; allowing everything gives back the outcome's decomposition;
  allowing nothing gives a constant.
* **Its predictions**: the parts add up to the prediction; new rows are encoded as the
  fitted ones (the same rows give the same predictions); the RMSE grows as effects are
  removed, and the unconstrained one is near the simulated noise.
* **An independent check**: ``fit_sfm(...).decompose()`` of the predictions
  (new nuisance fits, not the predictor's own models) finds the removed effects near 0.
* **Bad input**: an unknown effect, a new level, a missing column, another level of the
  attribute.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted
from _sfm import SCENARIOS

import counterfair as cf
from counterfair import errors

SETTINGS = cf.audit.SFMSettings(chains=2, warmup=300, draws=300, progress=False)
"""Small chains: the fit takes seconds."""


@functools.cache
def _fitted(backend: str) -> tuple[pd.DataFrame, cf.audit.sfm_fit.SFMFit]:
    scenario = SCENARIOS["c"]
    seed = shifted(40)
    data = scenario.data(scenario.rows, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cf.errors.ConvergenceWarning)
        fitted = cf.audit.fit_sfm(data, **scenario.roles(), seed=seed, settings=SETTINGS)
    return data, fitted


def fitted_c(stan_backend: str) -> tuple[pd.DataFrame, cf.audit.sfm_fit.SFMFit]:
    return _fitted(stan_backend)


def _terms(result: cf.audit.decomposition_result.Decomposition) -> pd.DataFrame:
    return result.table.drop_duplicates("term").set_index("term")


REMOVED = {"DE": "Ctf-DE", "IE": "Ctf-IE", "SE": "Ctf-SE"}


@pytest.mark.stan
@pytest.mark.parametrize("allow", [("IE",), ("DE", "IE"), ("IE", "SE"), ("DE",), ("SE",)])
def test_removed_effects_are_zero_and_kept_ones_the_outcomes(
    stan_backend: str, allow: tuple[str, ...]
) -> None:
    _, fitted = fitted_c(stan_backend)
    outcome = _terms(fitted.decompose())
    predictor = fitted.predictor(allow=allow)
    own = predictor.decompose()
    terms = _terms(own)
    for effect, term in REMOVED.items():
        row = terms.loc[term]
        if effect in allow:
            gap = abs(row["mean"] - outcome.loc[term, "mean"])
            assert gap <= outcome.loc[term, "sd"], (allow, term, row, outcome.loc[term])
        elif effect == "DE":
            assert np.all(own.draws[term].abs() < 1e-12), (allow, own.draws[term].describe())
        else:
            assert row["lower"] <= 0.0 <= row["upper"], (allow, term, row)
            # small beside what it removed (the outcome's own effect)
            assert abs(row["mean"]) < 0.1 * abs(outcome.loc[term, "mean"]), (allow, term, row)
    # the identity still holds draw by draw
    d = own.draws
    assert np.allclose(d["TV"], d["Ctf-DE"] - d["Ctf-IE"] - d["Ctf-SE"], atol=1e-10)


@pytest.mark.stan
def test_allowing_everything_gives_the_outcomes_decomposition(stan_backend: str) -> None:
    _, fitted = fitted_c(stan_backend)
    outcome = _terms(fitted.decompose())
    terms = _terms(fitted.predictor(allow=("DE", "IE", "SE")).decompose())
    for term in ("TV", "Ctf-DE", "Ctf-IE", "Ctf-SE", "NDE", "NIE"):
        assert abs(terms.loc[term, "mean"] - outcome.loc[term, "mean"]) <= (
            0.5 * outcome.loc[term, "sd"]
        ), (term, terms.loc[term], outcome.loc[term])


@pytest.mark.stan
def test_allowing_nothing_gives_a_constant(stan_backend: str) -> None:
    data, fitted = fitted_c(stan_backend)
    predictor = fitted.predictor(allow=())
    prediction = predictor.predict()
    assert np.ptp(prediction) < 1e-9
    assert prediction[0] == pytest.approx(data["Y"].mean())


@pytest.mark.stan
def test_parts_add_up_and_new_rows_are_encoded_alike(stan_backend: str) -> None:
    data, fitted = fitted_c(stan_backend)
    predictor = fitted.predictor(allow=("IE", "SE"))
    parts = predictor.parts()
    assert np.allclose(parts["prediction"], predictor.constant + parts["indirect"]
                       + parts["spurious"])
    assert np.all(parts.loc[data["X"].to_numpy() == "1", "direct"] == 0.0)
    # the same rows, shuffled and without the outcome, predict the same
    order = np.random.default_rng(shifted(41)).permutation(len(data))
    shuffled = data.drop(columns="Y").iloc[order]
    again = predictor.predict(shuffled)
    assert np.allclose(again, predictor.predict()[order], atol=1e-10)
    # rows beyond the fitted range are held at the splines' ends, not extrapolated
    far = data.drop(columns="Y").head(5).assign(W=1e6)
    assert np.all(np.isfinite(predictor.predict(far)))


@pytest.mark.stan
def test_rmse_grows_as_effects_are_removed(stan_backend: str) -> None:
    data, fitted = fitted_c(stan_backend)
    y = data["Y"].to_numpy(dtype=float)

    def rmse(allow: tuple[str, ...]) -> float:
        prediction = fitted.predictor(allow=allow).predict()
        return float(np.sqrt(np.mean((y - prediction) ** 2)))

    full, some, none = rmse(("DE", "IE", "SE")), rmse(("IE",)), rmse(())
    sigma = SCENARIOS["c"].sigma_y
    assert sigma * 0.9 < full < sigma * 1.1, full  # the simulated noise
    assert full < some < none, (full, some, none)


@pytest.mark.stan
def test_a_new_decomposition_of_the_predictions_finds_the_removed_effects_near_zero(
    stan_backend: str,
) -> None:
    """New nuisance fits on the predictions (the predictor's models are not reused): the
    removed direct and spurious effects within 3.5 posterior sds of 0."""
    data, fitted = fitted_c(stan_backend)
    scenario = SCENARIOS["c"]
    prediction = fitted.predictor(allow=("IE",)).predict()
    frame = data.assign(Y=prediction)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cf.errors.ConvergenceWarning)
        again = cf.audit.fit_sfm(frame, **scenario.roles(), family="normal",
                                 seed=shifted(42), settings=SETTINGS).decompose()
    terms = _terms(again)
    outcome = _terms(fitted.decompose())
    for term in ("Ctf-DE", "Ctf-SE"):
        assert abs(terms.loc[term, "mean"]) <= 3.5 * terms.loc[term, "sd"], terms.loc[term]
    assert abs(terms.loc["Ctf-IE", "mean"] - outcome.loc["Ctf-IE", "mean"]) <= 3.5 * (
        outcome.loc["Ctf-IE", "sd"]
    ), (terms.loc["Ctf-IE"], outcome.loc["Ctf-IE"])


# ---------------------------------------------------------------------- refusals
@pytest.mark.stan
def test_bad_input_is_refused(stan_backend: str) -> None:
    data, fitted = fitted_c(stan_backend)
    with pytest.raises(ValueError, match=r"allow names \['XE'\]"):
        fitted.predictor(allow=("IE", "XE"))
    with pytest.raises(ValueError, match="twice"):
        fitted.predictor(allow=("IE", "IE"))
    predictor = fitted.predictor(allow="IE")
    with pytest.raises(errors.DataError, match="no column 'W'"):
        predictor.predict(data.drop(columns="W"))
    with pytest.raises(errors.DataError, match="column 'X' has level '2'"):
        predictor.predict(data.assign(X=np.where(np.arange(len(data)) == 3, "2", data["X"])))
    with pytest.raises(errors.DataError, match="column 'Z' has missing values"):
        predictor.predict(data.assign(Z=np.where(np.arange(len(data)) == 3, np.nan, data["Z"])))


@pytest.mark.stan
def test_a_new_category_level_is_refused_by_name(stan_backend: str) -> None:
    scenario = SCENARIOS["a"]
    seed = shifted(43)
    data = scenario.data(800, seed=seed)
    data["region"] = np.where(np.arange(len(data)) % 2 == 0, "north", "south")
    roles = {**scenario.roles(), "confounders": ["Z", "region"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cf.errors.ConvergenceWarning)
        fitted = cf.audit.fit_sfm(data, **roles, seed=seed, settings=SETTINGS)
    predictor = fitted.predictor()
    with pytest.raises(errors.DataError, match="column 'region' has level 'east'"):
        predictor.predict(data.assign(region="east"))
