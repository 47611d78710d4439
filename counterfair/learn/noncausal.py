"""Non-causal fairness baselines a sceptic would run beside a counterfactually fair learner.

Two post-processing baselines that need no SCM at all:

* :class:`OrderPreservingPredictor` -- the construction of Rosenblatt and Witter
  ("Counterfactual Fairness Is Basically Demographic Parity", AAAI 2023): score
  every row with any base predictor, replace the score by its quantile *within
  the row's protected group* (the empirical CDF of the group's training scores),
  and map that quantile through one common quantile function (the pooled
  training scores'). Every group then has the same distribution of outputs
  (demographic parity), and the order of individuals inside each group is kept.
* :class:`DemographicParityClassifier` -- fairlearn's ``ThresholdOptimizer``
  with ``constraints="demographic_parity"`` on a base classifier's scores
  (group-specific, possibly randomised thresholds). Classification only: a
  threshold rule has no meaning for a regression outcome such as ZFYA.

Both read the protected column(s) at prediction time: under ``do(A = a')`` they
use the quantile map of group ``a'``. See ``docs/baselines.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone

from counterfair import errors
from counterfair.rows import chunking

UNKNOWN_GROUP_COLUMN = "group column {column!r} is not in the data; columns: {columns}"
UNSEEN_GROUP = (
    "group {group!r} (column(s) {columns}) at row {row!r} had no training rows; "
    "groups seen in fit: {groups}"
)
NO_FAIRLEARN = (
    "DemographicParityClassifier needs fairlearn; install the extra: "
    "pip install 'counterfair[fairness]'"
)


def _group_columns(attribute: str | Sequence[str]) -> list[str]:
    columns = [attribute] if isinstance(attribute, str) else list(attribute)
    if not columns:
        raise ValueError("attribute= names no column; give the protected column(s)")
    return columns


def _group_keys(X: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """One string key per row: the levels of the group columns joined by ``|``."""
    for column in columns:
        if column not in X.columns:
            raise errors.DataError(
                UNKNOWN_GROUP_COLUMN.format(column=column, columns=list(X.columns))
            )
    parts = [X[c].astype(str).to_numpy() for c in columns]
    keys = parts[0].astype(object)
    for part in parts[1:]:
        keys = keys + "|" + part.astype(object)
    return np.asarray(keys, dtype=object)


def _hazen(n: int) -> np.ndarray:
    """Plotting positions ``(i - 1/2) / n`` of ``n`` sorted values."""
    return (np.arange(n) + 0.5) / n


def _score(estimator: Any, X: pd.DataFrame, use_proba: bool) -> np.ndarray:
    if use_proba:
        return np.asarray(estimator.predict_proba(X), dtype=float)[:, 1]
    return np.asarray(estimator.predict(X), dtype=float)


class OrderPreservingPredictor(BaseEstimator):  # type: ignore[misc]
    """Within-group quantiles of a base predictor's scores, mapped to the pooled distribution.

    Parameters
    ----------
    estimator : estimator
        Base predictor with ``predict(DataFrame)`` (or ``predict_proba`` for a
        binary classifier), e.g. :func:`counterfair.full_predictor`.
    attribute : str or sequence of str
        Protected column(s); with several, every combination of levels is a group.
    prefit : bool
        ``estimator`` is already fitted; ``fit`` only learns the quantile maps.

    Notes
    -----
    With base score ``s`` of a row of group ``g``, training scores of ``g``
    sorted as ``s_(1) <= ... <= s_(n_g)`` and pooled training scores
    ``t_(1) <= ... <= t_(N)``, the output is ``Q(F_g(s))`` where ``F_g``
    interpolates ``s_(i) -> (i - 1/2) / n_g`` linearly (clipped outside the
    range) and ``Q`` interpolates ``(j - 1/2) / N -> t_(j)``. On the training
    rows, groups of equal size get exactly the same sorted outputs; ``F_g`` and
    ``Q`` are non-decreasing, so order within a group is kept. For a binary
    classifier the score is the probability of the positive class;
    ``predict_proba`` returns the mapped probability and ``predict`` labels
    it at 0.5.
    """

    def __init__(
        self, estimator: Any = None, *, attribute: str | Sequence[str] = (), prefit: bool = False
    ) -> None:
        self.estimator = estimator
        self.attribute = attribute
        self.prefit = prefit

    def fit(self, X: pd.DataFrame, y: Any = None) -> OrderPreservingPredictor:
        """Fit the base predictor (unless ``prefit``) and the per-group quantile maps."""
        if self.estimator is None:
            raise ValueError("OrderPreservingPredictor needs estimator=, a base predictor")
        self.group_columns_ = _group_columns(self.attribute)
        keys = _group_keys(X, self.group_columns_)
        if self.prefit:
            self.estimator_ = self.estimator
        else:
            base = clone(self.estimator)
            self.estimator_ = base.fit(X) if y is None else base.fit(X, y)
        self.use_proba_ = hasattr(self.estimator_, "predict_proba") and hasattr(
            self.estimator_, "classes_"
        )
        if self.use_proba_ and len(self.estimator_.classes_) != 2:
            raise ValueError(
                "OrderPreservingPredictor maps one score per row: give a regressor or a "
                f"binary classifier, not one of {len(self.estimator_.classes_)} classes"
            )
        scores = _score(self.estimator_, X, self.use_proba_)
        self.pooled_ = np.sort(scores)
        self.groups_ = {g: np.sort(scores[keys == g]) for g in sorted(set(keys))}
        return self

    def transform_scores(self, scores: np.ndarray, keys: np.ndarray, index: pd.Index) -> np.ndarray:
        """Map base ``scores`` of rows with group ``keys`` to the common distribution."""
        out = np.empty(len(scores), dtype=float)
        pooled_positions = _hazen(len(self.pooled_))
        unknown = ~np.isin(keys, list(self.groups_))
        if unknown.any():
            first = int(np.argmax(unknown))
            raise errors.DataError(
                UNSEEN_GROUP.format(
                    group=keys[first],
                    columns=self.group_columns_,
                    row=index[first],
                    groups=list(self.groups_),
                )
            )
        for g, sorted_scores in self.groups_.items():
            mask = keys == g
            if not mask.any():
                continue
            quantile = np.interp(scores[mask], sorted_scores, _hazen(len(sorted_scores)))
            out[mask] = np.interp(quantile, pooled_positions, self.pooled_)
        return out

    def _mapped(self, X: pd.DataFrame) -> np.ndarray:
        """Mapped scores, chunk by chunk of :func:`counterfair.options.chunk_bytes` (row-wise)."""

        def mapped(part: pd.DataFrame) -> np.ndarray:
            keys = _group_keys(part, self.group_columns_)
            scores = _score(self.estimator_, part, self.use_proba_)
            return self.transform_scores(scores, keys, part.index)

        per_row = chunking.bytes_per_row(1, max(X.shape[1], 1))
        return chunking.apply_by_rows(mapped, X, bytes_per_row=per_row)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Mapped scores (regression) or labels of the mapped probability at 0.5."""
        mapped = self._mapped(X)
        if self.use_proba_:
            return np.asarray(self.estimator_.classes_)[(mapped >= 0.5).astype(int)]
        return mapped

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """``[1 - p, p]`` with ``p`` the mapped probability of the positive class."""
        if not self.use_proba_:
            raise AttributeError("the base predictor is a regressor: it has no predict_proba")
        p = self._mapped(X)
        return np.column_stack([1.0 - p, p])

    @property
    def classes_(self) -> np.ndarray:
        """Classes of the base classifier."""
        return np.asarray(self.estimator_.classes_)


class _Scores(BaseEstimator):  # type: ignore[misc]
    """A fitted pass-through: ``predict`` returns the ``score`` column (for ThresholdOptimizer)."""

    def fit(self, X: Any, y: Any = None) -> _Scores:
        self.fitted_ = True  # what sklearn's check_is_fitted looks for
        return self

    def predict(self, X: Any) -> np.ndarray:
        return np.asarray(X, dtype=float)[:, 0]


class DemographicParityClassifier(BaseEstimator):  # type: ignore[misc]
    """fairlearn's ``ThresholdOptimizer(constraints="demographic_parity")`` on a base classifier.

    Parameters
    ----------
    estimator : classifier
        Binary base classifier with ``predict_proba(DataFrame)``.
    attribute : str or sequence of str
        Protected column(s) passed to fairlearn as ``sensitive_features``.
    prefit : bool
        ``estimator`` is already fitted.
    random_state : int
        Seed of fairlearn's randomised thresholds in ``predict`` (fixed so that
        two calls on the same rows, e.g. a factual and a counterfactual world,
        share their draws row by row).
    grid_size : int
        fairlearn's grid of thresholds.

    Notes
    -----
    The thresholds are chosen on the training rows to maximise accuracy subject
    to equal selection rates across groups. ``predict_proba`` returns
    fairlearn's probability of a positive decision (the mixture over the two
    thresholds bracketing the group's point), deterministic; ``predict`` draws
    the decision with ``random_state``.
    """

    def __init__(
        self,
        estimator: Any = None,
        *,
        attribute: str | Sequence[str] = (),
        prefit: bool = False,
        random_state: int = 0,
        grid_size: int = 1000,
    ) -> None:
        self.estimator = estimator
        self.attribute = attribute
        self.prefit = prefit
        self.random_state = random_state
        self.grid_size = grid_size

    def fit(self, X: pd.DataFrame, y: Any) -> DemographicParityClassifier:
        """Fit the base classifier (unless ``prefit``) and the group thresholds on ``y``."""
        try:
            from fairlearn.postprocessing import ThresholdOptimizer  # type: ignore[import-untyped]
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(NO_FAIRLEARN) from exc
        if self.estimator is None:
            raise ValueError("DemographicParityClassifier needs estimator=, a base classifier")
        self.group_columns_ = _group_columns(self.attribute)
        keys = _group_keys(X, self.group_columns_)
        if self.prefit:
            self.estimator_ = self.estimator
        else:
            self.estimator_ = clone(self.estimator).fit(X, y)
        classes = np.asarray(getattr(self.estimator_, "classes_", []))
        if len(classes) != 2:
            raise ValueError(
                "DemographicParityClassifier needs a fitted binary classifier with classes_ "
                f"and predict_proba; got classes {list(classes)}"
            )
        labels = (np.asarray(y) == classes[1]).astype(int)
        self.groups_ = sorted(set(keys))
        self.optimizer_ = ThresholdOptimizer(
            estimator=_Scores().fit(None),
            constraints="demographic_parity",
            prefit=True,
            predict_method="predict",
            grid_size=self.grid_size,
        ).fit(self._scores(X), labels, sensitive_features=keys)
        return self

    def _scores(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.estimator_.predict_proba(X), dtype=float)[:, [1]]

    def _keys(self, X: pd.DataFrame) -> np.ndarray:
        keys = _group_keys(X, self.group_columns_)
        unknown = ~np.isin(keys, self.groups_)
        if unknown.any():
            first = int(np.argmax(unknown))
            raise errors.DataError(
                UNSEEN_GROUP.format(
                    group=keys[first],
                    columns=self.group_columns_,
                    row=X.index[first],
                    groups=self.groups_,
                )
            )
        return keys

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """``[1 - p, p]``, ``p`` the probability of a positive decision given the row."""
        keys = self._keys(X)
        pmf = self.optimizer_._pmf_predict(self._scores(X), sensitive_features=keys)
        return np.asarray(pmf, dtype=float)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Decisions (class labels), drawn with ``random_state``."""
        keys = self._keys(X)
        decision = self.optimizer_.predict(
            self._scores(X), sensitive_features=keys, random_state=self.random_state
        )
        return np.asarray(self.estimator_.classes_)[np.asarray(decision, dtype=int)]

    @property
    def classes_(self) -> np.ndarray:
        """Classes of the base classifier."""
        return np.asarray(self.estimator_.classes_)
