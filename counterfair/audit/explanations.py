"""Discrimination measures from SHAP explanations (Cesaro 2020).

SHAP values come from the ``shap`` package:

* ``"kernel"`` -- Kernel SHAP, any model (its scoring function is enough);
* ``"tree"`` -- Tree SHAP for tree ensembles: interventional with a background sample,
  or path-dependent (the trees' own cover statistics, much faster) without one;
* ``"linear"`` -- Linear SHAP for linear models (``coef, intercept`` or a fitted linear
  scikit-learn estimator), in the model's margin (log-odds for logistic regression).

From the SHAP values of the sensitive attribute ``A``:

* **SHAP disparity** -- mean SHAP value of ``A`` in the unprivileged group minus the
  privileged group (negative: the attribute pushes the privileged group's outputs up
  relative to the unprivileged group's; the same sign convention as the statistical
  parity difference);
* **importance** -- mean ``|SHAP|`` of ``A`` over all explained rows, and its **rank**
  among all features (1: most important).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ._validation import (
    NOT_A_COLUMN,
    POSITIVE_REQUIRED,
    check_choice,
    check_count,
    check_lengths,
    check_open_unit,
    shown,
)
from .bootstrap import Seed, bootstrap, percentile_interval
from .individual import EntropyIndex, FlipReport
from .two_groups import privileged_indicator

ShapMethod = Literal["kernel", "tree", "linear"]
SHAP_METHODS: tuple[str, ...] = ("kernel", "tree", "linear")
"""Supported SHAP estimators."""


NO_SHAP = (
    "the explanation-based audits (shap_values, shap_disparity, the explanations study) need "
    "shap, which is not installed; install the extra: pip install 'counterfair[explain]'"
)
"""Error when an explanation-based audit is called without the ``[explain]`` extra."""


def import_shap() -> ModuleType:
    """Import ``shap``, silencing only its import-time matplotlib colormap deprecations.

    Raises
    ------
    ImportError
        Naming the ``[explain]`` extra when shap is not installed.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"The set_\w+ function will be deprecated",
                                category=PendingDeprecationWarning)
        try:
            import shap
        except ImportError as error:
            raise ImportError(NO_SHAP) from error
    return shap


@dataclass(frozen=True, kw_only=True)
class ShapResult:
    """SHAP values of explained rows.

    Attributes
    ----------
    values
        One column per feature, indexed like the explained rows.
    base_value
        Expected model output over the background data.
    method
        ``"kernel"``, ``"tree"`` or ``"linear"``.
    """

    values: pd.DataFrame
    base_value: float
    method: str


def _positive_class(raw: Any, n_rows: int, n_features: int) -> NDArray[np.float64]:
    """SHAP values of the positive class from the shapes returned by ``shap``."""
    if isinstance(raw, list):
        raw = raw[-1]
    arr = np.asarray(raw, dtype=np.float64)
    if arr.ndim == 3:
        arr = arr[..., -1]
    return arr.reshape(n_rows, n_features)


def _base(value: Any) -> float:
    arr = np.atleast_1d(np.asarray(value, dtype=np.float64))
    return float(arr[-1])


def shap_values(
    X: pd.DataFrame,
    *,
    method: ShapMethod,
    background: pd.DataFrame | None,
    predict: Callable[[pd.DataFrame], ArrayLike] | None = None,
    model: Any = None,
    n_samples: int = 256,
    seed: int = 0,
) -> ShapResult:
    """SHAP values of every row of ``X`` with the chosen estimator.

    Parameters
    ----------
    X
        Rows to explain (numeric features, model input order).
    method
        ``"kernel"`` (needs ``predict``), ``"tree"`` (needs a tree-ensemble ``model``) or
        ``"linear"`` (needs ``model``: a fitted linear estimator or ``(coef, intercept)``).
    background
        Background rows that define "feature absent" (same columns as ``X``); keep it
        small for Kernel SHAP (its cost grows linearly with it).  Required for Kernel and
        Linear SHAP; for Tree SHAP ``None`` selects the path-dependent algorithm.
    predict
        Scoring function explained by Kernel SHAP (e.g. the positive-class probability).
    model
        Model explained by Tree or Linear SHAP.  For classifiers Tree SHAP explains the
        model's raw output of the positive class (probability for random forests,
        log-odds for gradient boosting).
    n_samples
        Coalitions evaluated per row by Kernel SHAP.
    seed
        Seed of Kernel SHAP's coalition sampling (``shap`` draws from numpy's global
        generator; its state is restored afterwards).

    Returns
    -------
    ShapResult
    """
    method = check_choice(method, "method", SHAP_METHODS)  # type: ignore[assignment]
    if background is None:
        if method != "tree":
            raise ValueError(f"method {method!r} needs background rows")
        bg = None
    else:
        if list(background.columns) != list(X.columns):
            raise ValueError(NOT_A_COLUMN.format(name="background columns",
                                                 column=list(background.columns), where="X",
                                                 available=shown(list(X.columns))))
        bg = background.to_numpy(dtype=np.float64)
    shap = import_shap()
    data = X.to_numpy(dtype=np.float64)
    n, m = data.shape
    if method == "kernel":
        if predict is None:
            raise ValueError("method 'kernel' needs predict, the scoring function to explain")
        n_samples = check_count(n_samples, "n_samples")
        if n_samples < 1:
            raise ValueError(POSITIVE_REQUIRED.format(name="n_samples", value=n_samples))
        columns = list(X.columns)

        def score(z: NDArray[np.float64]) -> NDArray[np.float64]:
            return np.asarray(predict(pd.DataFrame(z, columns=columns)), dtype=np.float64)

        # shap's Kernel SHAP samples coalitions from numpy's legacy global generator
        state = np.random.get_state()  # noqa: NPY002
        np.random.seed(seed)  # noqa: NPY002
        try:
            explainer = shap.KernelExplainer(score, bg)
            raw = explainer.shap_values(data, nsamples=n_samples, silent=True)
        finally:
            np.random.set_state(state)  # noqa: NPY002
        base = _base(explainer.expected_value)
    else:
        if model is None:
            raise ValueError(f"method {method!r} needs model, the fitted model to explain")
        if method == "tree":
            explainer = (shap.TreeExplainer(model) if bg is None else
                         shap.TreeExplainer(model, data=bg))
            raw = explainer.shap_values(data, check_additivity=False)
        else:
            # (mean, covariance) uses the whole background; an array would be subsampled
            assert bg is not None
            explainer = shap.LinearExplainer(model, (bg.mean(axis=0), np.cov(bg, rowvar=False)))
            raw = explainer.shap_values(data)
        base = _base(explainer.expected_value)
    values = pd.DataFrame(_positive_class(raw, n, m), index=X.index, columns=X.columns)
    return ShapResult(values=values, base_value=base, method=method)


@dataclass(frozen=True, kw_only=True)
class ShapDisparity:
    """Result of :func:`shap_disparity`.

    Attributes
    ----------
    attribute
        The sensitive feature.
    disparity, disparity_lower, disparity_upper
        Mean SHAP of ``attribute`` in the unprivileged minus the privileged group, with
        its percentile bootstrap interval (NaN without bootstrap).
    importance, importance_lower, importance_upper
        Mean ``|SHAP|`` of ``attribute`` with its interval.
    rank
        Rank of ``attribute`` by mean ``|SHAP|`` (1: most important).
    importances
        Mean ``|SHAP|`` of every feature, largest first.
    n_privileged, n_unprivileged
        Explained rows in each group.
    interval
        Interval level.
    """

    attribute: str
    disparity: float
    disparity_lower: float
    disparity_upper: float
    importance: float
    importance_lower: float
    importance_upper: float
    rank: int
    importances: pd.Series
    n_privileged: int
    n_unprivileged: int
    interval: float

    def to_series(self) -> pd.Series:
        """Scalar fields as a Series (for tables)."""
        fields = {k: v for k, v in self.__dict__.items() if k != "importances"}
        return pd.Series(fields, dtype=object, name=self.attribute)


def shap_disparity(
    values: pd.DataFrame,
    protected: ArrayLike,
    *,
    attribute: str,
    privileged: Hashable,
    n_bootstrap: int = 0,
    interval: float = 0.95,
    seed: Seed = 0,
) -> ShapDisparity:
    """SHAP disparity, importance and rank of the sensitive feature.

    Parameters
    ----------
    values
        SHAP values (rows: individuals, columns: features), e.g. ``ShapResult.values``.
    protected
        Group of each explained row (usually the sensitive column of the explained data).
    attribute
        Column of ``values`` holding the sensitive attribute's SHAP values.
    privileged
        Privileged value of ``protected``.
    n_bootstrap, interval, seed
        Percentile bootstrap intervals, resampling stratified by group.

    Returns
    -------
    ShapDisparity
    """
    if attribute not in values.columns:
        raise ValueError(NOT_A_COLUMN.format(name="sensitive column", column=attribute,
                                             where="values", available=shown(list(values.columns))))
    priv = privileged_indicator(protected, privileged)
    check_lengths([("values", len(values)), ("protected", priv.size)])
    n_bootstrap = check_count(n_bootstrap, "n_bootstrap")
    interval = check_open_unit(interval, "interval")
    phi = values[attribute].to_numpy(dtype=np.float64)

    def statistic(rows: NDArray[np.intp]) -> NDArray[np.float64]:
        p, s = priv[rows], phi[rows]
        return np.array([s[~p].mean() - s[p].mean(), np.abs(s).mean()])

    estimate = statistic(np.arange(phi.size))
    samples = bootstrap(statistic, phi.size, n_resamples=n_bootstrap, seed=seed,
                        strata=priv.astype(np.intp))
    lower, upper = percentile_interval(samples, interval)
    importances = values.abs().mean().sort_values(ascending=False, kind="stable")
    rank = int(np.flatnonzero(importances.index == attribute)[0]) + 1
    return ShapDisparity(attribute=attribute, disparity=float(estimate[0]),
                         disparity_lower=float(lower[0]), disparity_upper=float(upper[0]),
                         importance=float(estimate[1]), importance_lower=float(lower[1]),
                         importance_upper=float(upper[1]), rank=rank,
                         importances=importances.rename("mean_abs_shap"),
                         n_privileged=int(priv.sum()), n_unprivileged=int((~priv).sum()),
                         interval=interval)


@dataclass(frozen=True, kw_only=True)
class ExplanationAudit:
    """Explanation-based and individual measures of one predictor, for the HTML report.

    Every field is optional; the report shows the ones given.

    Attributes
    ----------
    shap
        SHAP disparity, importance and rank of the sensitive attribute.
    flip
        Counterfactual measure without an SCM (:func:`counterfair.audit.flip_counterfactual`).
    consistency
        k-NN consistency (:func:`counterfair.audit.consistency`).
    entropy
        Generalized entropy index (:func:`counterfair.audit.generalized_entropy_index`).
    shap_method
        Which SHAP estimator produced ``shap`` (shown in the report).
    """

    shap: ShapDisparity | None = None
    flip: FlipReport | None = None
    consistency: float | None = None
    entropy: EntropyIndex | None = None
    shap_method: str = ""

