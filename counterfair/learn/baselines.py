"""The unfair baselines: a plain scikit-learn model on chosen columns (Full, Unaware).

Protected attributes and level-valued nodes are one-hot encoded; predictions run
chunk by chunk (:mod:`counterfair.rows.chunking`) and dispatch on Dask frames.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone
from sklearn.linear_model import LinearRegression

from counterfair import errors
from counterfair.counterfactual.prediction import refuse_rows_out
from counterfair.learn.saving import Savable
from counterfair.model.families import family_of
from counterfair.model.scm import SCM
from counterfair.model.specs import Observed, Protected
from counterfair.rows import chunking, dispatch


def _level_codes(values: pd.Series, levels: Sequence[str]) -> np.ndarray:
    """Position of each value among ``levels`` (-1 where unseen), from a categorical's
    codes when it is one (no string per row), else from the values as strings."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        lookup = pd.Index(list(levels)).get_indexer(values.cat.categories.astype(str))
        codes = values.cat.codes.to_numpy()
        return np.where(codes >= 0, np.append(lookup, -1)[codes], -1)
    return pd.Index(list(levels)).get_indexer(values.astype(str))


def _design(
    frame: pd.DataFrame, columns: Sequence[str], levels: Mapping[str, Sequence[str]]
) -> np.ndarray:
    """The estimator's input: numeric columns as floats, level columns one-hot (all levels)."""
    width = sum(len(levels[c]) if c in levels else 1 for c in columns)
    out = np.zeros((len(frame), width))
    at = 0
    for column in columns:
        if column in levels:
            codes = _level_codes(frame[column], levels[column])
            out[np.arange(len(frame)), at + codes] = 1.0
            at += len(levels[column])
        else:
            out[:, at] = frame[column].to_numpy(dtype=float)
            at += 1
    return out


def _holds_labels(values: pd.Series) -> bool:
    """Whether a column holds labels (strings, a categorical) rather than numbers."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        return True
    return not (pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values))


class BaselinePredictor(Savable, BaseEstimator):  # type: ignore[misc]
    """A plain scikit-learn model on chosen columns (protected ones one-hot encoded).

    Parameters
    ----------
    columns : list of str
        Input columns.
    target : str
        Column to predict.
    categorical : list of str
        Columns to one-hot encode (all levels, as the paper's Full model). Any other
        column that does not hold numbers or booleans (yes/no labels, strings, a pandas
        categorical) is one-hot encoded as well, with the levels of the training rows,
        so that a baseline reads the columns a fair learner reads.
    estimator : estimator, optional
        Default ``LinearRegression()``.
    """

    def __init__(
        self,
        columns: Sequence[str] = (),
        target: str = "",
        categorical: Sequence[str] = (),
        estimator: Any = None,
    ) -> None:
        self.columns = columns
        self.target = target
        self.categorical = categorical
        self.estimator = estimator

    def _matrix(self, X: pd.DataFrame) -> np.ndarray:
        for column, levels in self.levels_.items():
            unseen = _level_codes(X[column], levels) < 0
            if unseen.any():
                at = int(np.argmax(unseen))
                raise errors.DataError(
                    errors.UNSEEN_INPUT_LEVEL.format(
                        node=column, value=str(X[column].iloc[at]), row=X.index[at],
                        levels=list(levels),
                    )
                )
        return _design(X, list(self.columns), self.levels_)

    def fit(self, X: pd.DataFrame, y: Any = None) -> BaselinePredictor:
        """Fit the estimator on ``X[columns]``."""
        missing = [c for c in [*self.columns] if c not in X.columns]
        if missing:
            raise errors.DataError(
                errors.MISSING_COLUMN.format(column=missing[0], columns=list(X.columns))
            )
        encoded = [*self.categorical, *(c for c in self.columns if _holds_labels(X[c]))]
        self.levels_ = {
            c: sorted(X[c].dropna().astype(str).unique()) for c in dict.fromkeys(encoded)
        }
        response = X[self.target] if y is None else y
        base = self.estimator if self.estimator is not None else LinearRegression()
        self.estimator_ = clone(base).fit(self._matrix(X), np.asarray(response))
        return self

    def _row_bytes(self) -> float:
        width = len(self.columns) + sum(len(v) for v in self.levels_.values())
        return chunking.bytes_per_row(1, width)

    def predict(
        self,
        X: pd.DataFrame,
        *,
        rows_out: str | os.PathLike[str] | None = None,
        overwrite: bool = False,
    ) -> np.ndarray:
        """Predictions of the fitted estimator (as floats when numeric; class labels else).

        Rows are processed in chunks of :func:`counterfair.options.chunk_bytes`. A
        Dask DataFrame is predicted partition by partition (:mod:`counterfair.dask.row_calls`);
        ``rows_out=`` writes its predictions as parquet, as ``FairLearner.predict``.
        """
        if (handler := dispatch.handler_for("BaselinePredictor.predict", X)) is not None:
            return handler(self, X, rows_out=rows_out, overwrite=overwrite)
        refuse_rows_out(rows_out, overwrite)
        out = chunking.apply_by_rows(
            lambda part: np.asarray(self.estimator_.predict(self._matrix(part))),
            X,
            bytes_per_row=self._row_bytes(),
        )
        return out.astype(float) if out.dtype.kind in "biuf" else out

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Class probabilities of the fitted estimator, shape ``(N, n_classes)``.

        Raises
        ------
        AttributeError
            If the wrapped estimator has no ``predict_proba`` (a regressor).
        """
        if not hasattr(self.estimator_, "predict_proba"):
            raise AttributeError(
                f"{type(self.estimator_).__name__} has no predict_proba; give the baseline "
                "a classifier, e.g. estimator=LogisticRegression()"
            )
        if (handler := dispatch.handler_for("BaselinePredictor.predict_proba", X)) is not None:
            return handler(self, X)
        return chunking.apply_by_rows(
            lambda part: np.asarray(self.estimator_.predict_proba(self._matrix(part)), float),
            X,
            bytes_per_row=self._row_bytes(),
        )

    @property
    def classes_(self) -> np.ndarray:
        """Classes of the wrapped classifier."""
        return np.asarray(self.estimator_.classes_)


def full_predictor(
    scm: SCM, target: str, estimator: Any = None, exclude: Sequence[str] = ()
) -> BaselinePredictor:
    """The unfair "Full" baseline: every observed column and the protected ones.

    Categorical protected attributes and level-valued (ordinal) nodes are
    one-hot encoded; continuous protected attributes enter as numbers.
    """
    columns = [*scm.protected, *(n for n in scm.observed if n != target and n not in exclude)]
    return BaselinePredictor(columns, target, _categorical_columns(scm, columns), estimator)


def _categorical_columns(scm: SCM, columns: Sequence[str]) -> list[str]:
    """The columns a baseline one-hot encodes: categorical protected and level-valued nodes."""
    out = []
    for column in columns:
        spec = scm.specs[column]
        categorical = isinstance(spec, Protected) and not spec.continuous
        levels = isinstance(spec, Observed) and family_of(spec).n_levels(spec) is not None
        if categorical or levels:
            out.append(column)
    return out


def unaware_predictor(
    scm: SCM, target: str, estimator: Any = None, exclude: Sequence[str] = ()
) -> BaselinePredictor:
    """The "Unaware" baseline: every observed column except the protected ones."""
    columns = [n for n in scm.observed if n != target and n not in exclude]
    return BaselinePredictor(columns, target, _categorical_columns(scm, columns), estimator)
