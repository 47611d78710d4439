"""The counterfactual audit of interventions on any node (``do=``, issue 9 item 4).

The fit is the shared auxiliary fit of ``tests/_models.py`` (race, K -> Z -> X, P, C).
X is Normal with Z among its parents, so under ``do(Z = z')`` X moves by exactly
``beta_X_Z * (z' - z)`` in every sample: the audit's changes are checked against it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _models import aux_data, aux_fit
from _seeds import shifted

import counterfair as cf
from counterfair.audit import AuditSettings, counterfactual_fairness

pytestmark = pytest.mark.stan


@pytest.fixture(scope="module")
def fitted(stan_backend: str) -> tuple[cf.Fit, pd.DataFrame]:
    return aux_fit().fit, aux_data().drop(columns="K").iloc[:40]


def _by_row_sample(report: object) -> pd.DataFrame:
    changes = report.changes  # type: ignore[attr-defined]
    return changes.sort_values(["row", "sample"]).reset_index(drop=True)


def test_do_on_an_observed_parent_moves_its_child_by_the_fitted_effect(fitted):
    fit, rows = fitted
    shift = 1.0
    report = counterfactual_fairness(
        fit, rows, lambda f: f["X"].to_numpy(),
        settings=AuditSettings(
            do={"Z": rows["Z"] + shift}, n_samples=30, seed=shifted(2), keep_samples=True,
        ),
    )
    changes = _by_row_sample(report)
    assert set(changes["attribute"]) == {"do(Z=<per row>)"}
    assert changes["row"].nunique() == len(rows)
    # X is Normal with additive noise, abducted and reused: in every sample the change of X
    # is exactly beta_X_Z * shift for that sample's own posterior draw of beta_X_Z, the same
    # for every row, and no noise is redrawn
    beta = fit.params()["beta_X_Z"]
    per_sample = changes.groupby("sample")["change"]
    np.testing.assert_allclose(per_sample.max() - per_sample.min(), 0.0, atol=1e-9)
    distance = np.abs(per_sample.first().to_numpy()[:, None] - shift * beta[None, :]).min(axis=1)
    np.testing.assert_allclose(distance, 0.0, atol=1e-9)  # each is one of the posterior draws
    overall = report.overall.iloc[0]
    assert overall["flip_mean_abs_change"] == 0.0  # X as observed: the flip test misses it


def test_do_on_the_input_itself_changes_it_in_both_tests(fitted):
    fit, rows = fitted
    report = counterfactual_fairness(
        fit, rows, lambda f: f["Z"].to_numpy(),
        settings=AuditSettings(do={"Z": 0.0}, n_samples=10, seed=shifted(2), keep_samples=True),
    )
    changes = _by_row_sample(report)  # rows sorted by label (0..39), then samples
    np.testing.assert_allclose(changes["change"], np.repeat(0.0 - rows["Z"].to_numpy(), 10))
    overall = report.overall.iloc[0]
    assert overall["attribute"] == "do(Z=0.0)"
    assert overall["mean_abs_change"] == pytest.approx(overall["flip_mean_abs_change"])


def test_do_on_a_node_the_predictor_does_not_descend_from_changes_nothing(fitted):
    fit, rows = fitted
    report = counterfactual_fairness(
        fit, rows, lambda f: f["Z"].to_numpy(),
        settings=AuditSettings(
            do={"P": 1, "race": "b"}, n_samples=10, seed=shifted(2), keep_samples=True,
        ),
    )
    assert report.overall.iloc[0]["attribute"] == "do(P=1, race=b)"
    assert report.overall.iloc[0]["mean_abs_change"] == 0.0  # Z is no descendant of P or race


def test_do_and_attributes_together_or_a_latent_in_do_raise(fitted):
    fit, rows = fitted
    predictor = lambda f: f["X"].to_numpy()  # noqa: E731
    with pytest.raises(ValueError, match="attributes= and do="):
        counterfactual_fairness(
            fit, rows, predictor, settings=AuditSettings(attributes=["race"], do={"Z": 0.0}),
        )
    with pytest.raises(ValueError, match="do= is empty"):
        counterfactual_fairness(fit, rows, predictor, settings=AuditSettings(do={}))
    with pytest.raises(cf.errors.DataError, match="'K'"):
        counterfactual_fairness(
            fit, rows, predictor, settings=AuditSettings(do={"K": 0.0}, n_samples=5),
        )
