"""The two non-causal baselines: order-preserving quantile map and fairlearn's threshold rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted
from sklearn.linear_model import LinearRegression, LogisticRegression

import counterfair as cf
from counterfair.learn.baselines import BaselinePredictor


def _frame(n_per_group: tuple[int, int], seed: int = shifted(0)) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    group = np.repeat(["a", "b"], n_per_group)
    shift = np.where(group == "b", 1.5, 0.0)
    x = rng.normal(shift, 1.0)
    y = 2.0 * x + rng.normal(0, 0.5, len(x))
    return pd.DataFrame({"g": group, "x": x, "y": y, "label": (y > 1.5).astype(int)})


def _regressor() -> BaselinePredictor:
    return BaselinePredictor(["g", "x"], "y", ["g"], LinearRegression())


def test_equal_groups_get_identical_sorted_outputs_and_keep_order() -> None:
    data = _frame((200, 200))
    model = cf.OrderPreservingPredictor(_regressor(), attribute="g").fit(data)
    out = model.predict(data)
    a, b = out[data["g"] == "a"], out[data["g"] == "b"]
    np.testing.assert_array_equal(np.sort(a), np.sort(b))  # exact: same plotting positions
    base = model.estimator_.predict(data)
    for g in ("a", "b"):
        mask = (data["g"] == g).to_numpy()
        order = np.argsort(base[mask])
        assert np.all(np.diff(out[mask][order]) > 0)  # strictly increasing: order kept
    # a shifted group b would have scored higher under the base model
    assert base[data["g"] == "b"].mean() - base[data["g"] == "a"].mean() > 2.0


def test_unequal_groups_share_quantiles_on_the_pooled_grid() -> None:
    data = _frame((100, 300))
    model = cf.OrderPreservingPredictor(_regressor(), attribute="g").fit(data)
    out = model.predict(data)
    pooled = np.sort(model.estimator_.predict(data))
    positions = (np.arange(len(pooled)) + 0.5) / len(pooled)
    for g, n in (("a", 100), ("b", 300)):
        expected = np.interp((np.arange(n) + 0.5) / n, positions, pooled)
        np.testing.assert_allclose(np.sort(out[data["g"] == g]), expected, rtol=0, atol=1e-12)


def test_prefit_and_classifier() -> None:
    data = _frame((150, 150))
    base = BaselinePredictor(["g", "x"], "label", ["g"], LogisticRegression()).fit(data)
    model = cf.OrderPreservingPredictor(base, attribute="g", prefit=True).fit(data)
    assert model.estimator_ is base
    p = model.predict_proba(data)[:, 1]
    np.testing.assert_array_equal(np.sort(p[:150]), np.sort(p[150:]))
    labels = model.predict(data)
    rates = pd.Series(labels).groupby(data["g"].to_numpy()).mean()
    assert rates["a"] == rates["b"]


def test_bad_group_column_and_unseen_level() -> None:
    data = _frame((50, 50))
    with pytest.raises(cf.errors.DataError, match="'race'"):
        cf.OrderPreservingPredictor(_regressor(), attribute="race").fit(data)
    model = cf.OrderPreservingPredictor(_regressor(), attribute="g").fit(data)
    new = data.copy()
    new.loc[7, "g"] = "c"
    with pytest.raises(cf.errors.DataError, match=r"group 'c'.*row 7"):
        model.transform_scores(np.zeros(len(new)), new["g"].to_numpy(object), new.index)
    with pytest.raises(cf.errors.DataError, match="'g'"):
        model.predict(data.drop(columns="g"))


def test_demographic_parity_classifier_equalises_selection_rates() -> None:
    pytest.importorskip("fairlearn")
    data = _frame((300, 500), seed=shifted(1))
    base = BaselinePredictor(["g", "x"], "label", ["g"], LogisticRegression())
    model = cf.DemographicParityClassifier(base, attribute="g", random_state=shifted(3)).fit(
        data, data["label"]
    )
    groups = data["g"].to_numpy()
    expected = pd.Series(model.predict_proba(data)[:, 1]).groupby(groups).mean()
    # fairlearn's rule equalises the expected selection rate exactly on the training rows
    assert expected["a"] == pytest.approx(expected["b"], abs=1e-9)
    unfair = pd.Series(model.estimator_.predict(data)).groupby(groups).mean()
    assert abs(unfair["a"] - unfair["b"]) > 0.3
    # the randomised decisions: within 4 binomial standard errors of the common rate
    labels = pd.Series(model.predict(data)).groupby(groups)
    for g, n in (("a", 300), ("b", 500)):
        rate = expected[g]
        assert abs(labels.get_group(g).mean() - rate) <= 4 * np.sqrt(rate * (1 - rate) / n)
    new = data.copy()
    new.loc[3, "g"] = "z"
    with pytest.raises(cf.errors.DataError, match=r"group 'z'.*row 3"):
        model.predict_proba(new)
    with pytest.raises(cf.errors.DataError, match="'sex'"):
        cf.DemographicParityClassifier(base, attribute="sex").fit(data, data["label"])


def test_law_school_baseline_table_from_gaps_and_changes() -> None:
    from experiments.law_school import baseline_table, group_gaps

    test = pd.DataFrame({"race": ["W", "W", "B", "B"], "sex": ["F", "M", "F", "M"]})
    gaps = group_gaps(test, {"P": np.array([1.0, 3.0, 0.0, 0.0])})
    assert gaps.set_index("attribute")["gap"].to_dict() == {"race": 2.0, "sex": 1.0}
    fairness = pd.DataFrame(
        {
            "predictor": ["P", "P", "P"],
            "swap": ["Black <-> White", "Asian <-> White", "Female <-> Male"],
            "rows": [1, 3, 4],
            "mean |change|": [0.4, 0.0, 0.2],
        }
    )
    row = baseline_table({"P": 0.9}, fairness, gaps).iloc[0]
    assert row["cf change race"] == pytest.approx(0.1)  # (0.4 * 1 + 0 * 3) / 4 rows
    assert row["cf change sex"] == 0.2 and row["race gap"] == 2.0 and row["test RMSE"] == 0.9
