"""Tests of the SHAP-based measures (Kernel, Tree and Linear SHAP through ``shap``)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from counterfair.audit import shap_disparity
from counterfair.audit._validation import BAD_CHOICE, NOT_A_COLUMN
from counterfair.audit.explanations import shap_values


@pytest.fixture(scope="module")
def data() -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(shifted(3))
    n = 600
    X = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n),
                      "a": rng.integers(0, 2, n).astype(float)})
    z = X["x1"] + 1.2 * X["a"] - 0.5
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(int)
    return X, y.to_numpy() if isinstance(y, pd.Series) else y


def test_linear_shap_is_coefficient_times_centred_feature(
        data: tuple[pd.DataFrame, np.ndarray]) -> None:
    X, y = data
    model = LogisticRegression().fit(X.to_numpy(), y)
    background = X.iloc[:200]
    result = shap_values(X.iloc[200:260], method="linear", background=background, model=model)
    expected = model.coef_[0] * (X.iloc[200:260].to_numpy() - background.to_numpy().mean(axis=0))
    np.testing.assert_allclose(result.values.to_numpy(), expected, atol=1e-10)
    margin = model.decision_function(X.iloc[200:260].to_numpy())
    np.testing.assert_allclose(result.values.sum(axis=1) + result.base_value, margin,
                               atol=1e-8)


def test_kernel_shap_is_exact_for_an_additive_function(
        data: tuple[pd.DataFrame, np.ndarray]) -> None:
    X, _ = data
    weights = np.array([0.5, -0.2, 0.3])

    def additive(frame: pd.DataFrame) -> np.ndarray:
        return frame.to_numpy() @ weights

    background = X.iloc[:10]
    rows = X.iloc[100:106]
    result = shap_values(rows, method="kernel", background=background, predict=additive,
                         n_samples=200, seed=shifted(1))
    expected = weights * (rows.to_numpy() - background.to_numpy().mean(axis=0))
    np.testing.assert_allclose(result.values.to_numpy(), expected, atol=1e-6)
    state = np.random.get_state()  # noqa: NPY002 -- shap uses the legacy global state
    again = shap_values(rows, method="kernel", background=background, predict=additive,
                        n_samples=200, seed=shifted(1))
    pd.testing.assert_frame_equal(result.values, again.values)
    assert np.array_equal(np.random.get_state()[1], state[1])  # noqa: NPY002 (restored)


@pytest.mark.parametrize("kind", ["forest", "boosting"])
def test_tree_shap_adds_up_to_the_model_output(kind: str,
                                               data: tuple[pd.DataFrame, np.ndarray]) -> None:
    X, y = data
    values = X.to_numpy()
    if kind == "forest":
        model = RandomForestClassifier(n_estimators=10, max_depth=4, random_state=shifted(0))
        model.fit(values, y)
        output = model.predict_proba(values[:50])[:, 1]
    else:
        model = GradientBoostingClassifier(n_estimators=10, max_depth=2, random_state=shifted(0))
        model.fit(values, y)
        output = model.decision_function(values[:50])
    for background in (None, X.iloc[:40]):
        result = shap_values(X.iloc[:50], method="tree", background=background, model=model)
        np.testing.assert_allclose(result.values.sum(axis=1) + result.base_value, output,
                                   atol=1e-6)


def test_shap_disparity_importance_and_rank() -> None:
    values = pd.DataFrame({"x": [0.5, -0.5, 0.4, -0.4, 0.3, -0.3],
                           "a": [0.2, 0.2, 0.2, -0.1, -0.1, -0.1],
                           "z": [0.0, 0.01, 0.0, 0.0, 0.0, 0.0]})
    group = np.array([1, 1, 1, 0, 0, 0])
    result = shap_disparity(values, group, attribute="a", privileged=1, n_bootstrap=100)
    assert result.disparity == pytest.approx(-0.1 - 0.2)
    assert result.importance == pytest.approx(0.15)
    assert result.rank == 2
    assert list(result.importances.index) == ["x", "a", "z"]
    assert result.n_privileged == 3 and result.n_unprivileged == 3
    # constant SHAP within each group: the stratified bootstrap cannot move the disparity
    assert result.disparity_lower == pytest.approx(result.disparity)
    assert result.disparity_upper == pytest.approx(result.disparity)
    assert result.to_series()["rank"] == 2


def test_shap_disparity_sign_follows_the_model(data: tuple[pd.DataFrame, np.ndarray]) -> None:
    X, y = data
    model = LogisticRegression().fit(X.to_numpy(), y)
    result = shap_values(X, method="linear", background=X.iloc[:100], model=model)
    disparity = shap_disparity(result.values, X["a"], attribute="a", privileged=1.0)
    assert model.coef_[0][2] > 0
    assert disparity.disparity == pytest.approx(-model.coef_[0][2])  # w * (0 - 1)
    importance = result.values.abs().mean()
    assert disparity.importance == pytest.approx(importance["a"])
    assert disparity.rank == 1 + int((importance > importance["a"]).sum())


def test_errors(data: tuple[pd.DataFrame, np.ndarray]) -> None:
    X, _ = data
    with pytest.raises(ValueError, match=re.escape(BAD_CHOICE.format(
            name="method", choices=["kernel", "tree", "linear"], value="deep"))):
        shap_values(X, method="deep", background=X)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs predict"):
        shap_values(X, method="kernel", background=X)
    with pytest.raises(ValueError, match="needs background"):
        shap_values(X, method="linear", background=None, model=(np.ones(3), 0.0))
    with pytest.raises(ValueError, match=re.escape(NOT_A_COLUMN.format(
            name="sensitive column", column="sex", where="values",
            available="['x1', 'x2', 'a']"))):
        shap_disparity(X, X["a"], attribute="sex", privileged=1.0)
