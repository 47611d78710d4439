"""Held-out scores of a fair learner by k-fold cross-fitting, beside a baseline.

A score on the training rows says little: a predictor that always answers the
majority class scores the majority rate. :func:`held_out_scores` refits the learner
on ``k - 1`` folds of the rows and predicts the fold left out, for every fold, and
scores the pooled held-out predictions beside the same scores of a baseline that
knows only the training folds' outcomes (the majority class and its prevalence for
a classifier, the mean for a regression):

* classification: accuracy, AUC (binary targets) and Brier score (of the positive
  class's probability; the mean squared error of the class probabilities for more
  than two classes);
* regression: RMSE and R^2 (``1 - SSE / SST`` over the held-out rows).

The learner's SCM fit is reused by every fold (no new MCMC): only the learner's
estimator is cross-fitted. The posterior of the SCM's parameters was learned from
every row, held-out ones included; with a few parameters and many rows the leak is
small, but the scores are not those of a fully independent test set.

:func:`usefulness_warning` turns the scores and the predictions into one line when
the predictor is constant or does no better than the baseline (a constant predictor
is trivially fair, and an audit of it says nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import KFold, StratifiedKFold

from counterfair import errors
from counterfair.inference.fit import Fit

if TYPE_CHECKING:
    from counterfair.learn.fair import FairLearner

__all__ = ["GAIN_Z", "HeldOutScores", "held_out_scores", "usefulness_warning"]

GAIN_Z = 3.09
"""Standard errors by which the predictor's held-out loss must beat the baseline's to be
"better" (the one-sided normal quantile at 1e-3)."""


def _gain(predictor_loss: np.ndarray, baseline_loss: np.ndarray) -> tuple[float, float]:
    """Mean per-row loss gain over the baseline, and its standard error (paired rows)."""
    difference = np.asarray(baseline_loss, float) - np.asarray(predictor_loss, float)
    n = difference.size
    se = float(difference.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return float(difference.mean()), se


@dataclass(frozen=True, kw_only=True)
class HeldOutScores:
    """Cross-fitted held-out scores of a predictor and of its baseline.

    Attributes
    ----------
    table : pandas.DataFrame
        Rows ``predictor`` and ``baseline``; columns ``accuracy``, ``AUC``, ``Brier``
        (classification) or ``RMSE``, ``R2`` (regression).
    task : {"classification", "regression"}
    folds : int
        Number of folds.
    n_rows : int
        Rows scored (each held out once).
    baseline : str
        What the baseline predicts (e.g. ``majority 'no'; P('yes') = 0.20``).
    positive : object or None
        The positive class the AUC and Brier score are of (binary targets).
    loss_gain, loss_gain_se : float
        How much lower the predictor's mean per-row loss is than the baseline's (squared
        error of the regression, Brier score of the classifier's probabilities), and the
        standard error of that difference from its per-row values (paired rows).
    """

    table: pd.DataFrame
    task: Literal["classification", "regression"]
    folds: int
    n_rows: int
    baseline: str
    positive: Any = None
    loss_gain: float = float("nan")
    loss_gain_se: float = float("nan")

    def no_better(self) -> bool:
        """Whether the predictor does no better than the baseline on held-out rows.

        Brier score for a classifier (AUC and accuracy otherwise: a classifier that
        ranks rows but never crosses 0.5 still improves on the baseline's Brier
        score), RMSE for a regression. "Better" means better beyond chance: the
        per-row loss must be lower than the baseline's by more than
        :data:`GAIN_Z` standard errors of the paired difference (a predictor of pure noise
        is called better with probability about 1e-3).
        """
        if np.isfinite(self.loss_gain) and np.isfinite(self.loss_gain_se):
            return bool(self.loss_gain <= GAIN_Z * self.loss_gain_se + 1e-12)
        predictor, baseline = self.table.loc["predictor"], self.table.loc["baseline"]
        if self.task == "regression":
            return bool(predictor["RMSE"] >= baseline["RMSE"] - 1e-12)
        if np.isfinite(predictor["Brier"]):
            return bool(predictor["Brier"] >= baseline["Brier"] - 1e-12)
        return bool(predictor["accuracy"] <= baseline["accuracy"])

    def __str__(self) -> str:
        head = (
            f"held-out scores ({self.folds}-fold cross-fitting on {self.n_rows} rows; the SCM "
            "fit is shared by the folds); baseline: " + self.baseline
        )
        return head + "\n" + self.table.to_string(float_format=lambda v: f"{v:.4f}")


def _folds(y: np.ndarray, folds: int, seed: int, classify: bool) -> list[tuple[Any, Any]]:
    n = y.shape[0]
    if not isinstance(folds, int) or isinstance(folds, bool) or not 2 <= folds <= n:
        raise ValueError(f"folds must be an integer from 2 to the number of rows ({n}), "
                         f"got {folds!r}")
    if classify:
        _, counts = np.unique(y.astype(str), return_counts=True)
        if counts.min() >= folds:
            splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
            return list(splitter.split(np.zeros(n), y.astype(str)))
    return list(KFold(n_splits=folds, shuffle=True, random_state=seed).split(np.zeros(n)))


def _majority(values: np.ndarray) -> Any:
    labels, counts = np.unique(values.astype(str), return_counts=True)
    winner = labels[int(np.argmax(counts))]
    return values[values.astype(str) == winner][0]


def held_out_scores(
    learner: FairLearner,
    data: pd.DataFrame,
    *,
    folds: int = 5,
    seed: int = 0,
    positive: Any = None,
) -> HeldOutScores:
    """Score ``learner`` on held-out rows by k-fold cross-fitting, beside a baseline.

    Parameters
    ----------
    learner : FairLearner
        A learner with an SCM fit (``scm_fit``); it is not changed (each fold fits
        a new learner with the same parameters).
    data : pandas.DataFrame
        The rows, with the target column.
    folds : int
        Number of folds (stratified by class for a classifier when every class has
        at least ``folds`` rows).
    seed : int
        Seed of the fold assignment.
    positive : optional
        The positive class of a binary target (default: the last of the learner's
        classes, 1 for a 0/1 target).

    Raises
    ------
    DataError
        When the target column is missing.
    ValueError
        When ``folds`` is not from 2 to the number of rows, or the learner has no
        SCM fit.
    """
    from counterfair.learn.fair import FairLearner

    if not isinstance(learner, FairLearner) or not isinstance(learner.model, Fit):
        raise ValueError("held_out_scores needs a FairLearner of a Fit (its SCM fit, shared "
                         "by the folds)")
    target = str(learner.target)
    if target not in data.columns:
        raise errors.DataError(
            errors.MISSING_COLUMN.format(column=target, columns=list(map(str, data.columns)))
        )
    y = data[target].to_numpy()
    classify = learner._is_classifier()
    splits = _folds(y, folds, seed, classify)
    params = learner.get_params(deep=False)
    n = len(data)
    if not classify:
        predicted, base = np.empty(n), np.empty(n)
        truth = y.astype(float)
        for train, test in splits:
            model = FairLearner(**params).fit(data.iloc[train])
            predicted[test] = model.predict(data.iloc[test])
            base[test] = truth[train].mean()
        sst = float(((truth - truth.mean()) ** 2).sum())

        def regression_row(values: np.ndarray) -> dict[str, float]:
            sse = float(((truth - values) ** 2).sum())
            return {"RMSE": float(np.sqrt(sse / n)),
                    "R2": 1.0 - sse / sst if sst > 0 else float("nan")}

        table = pd.DataFrame(
            [regression_row(predicted), regression_row(base)], index=["predictor", "baseline"]
        )
        gain, gain_se = _gain((truth - predicted) ** 2, (truth - base) ** 2)
        return HeldOutScores(table=table, task="regression", folds=folds, n_rows=n,
                             baseline=f"the training folds' mean (overall {truth.mean():.4g})",
                             loss_gain=gain, loss_gain_se=gain_se)
    probabilities: np.ndarray | None = None
    labels = np.empty(n, dtype=object)
    base_labels = np.empty(n, dtype=object)
    classes: list[Any] = []
    base_probabilities: np.ndarray | None = None
    for train, test in splits:
        model = FairLearner(**params).fit(data.iloc[train])
        fold_classes = list(model.classes_)
        if not classes:
            classes = sorted(set(y.tolist()), key=str) if len(fold_classes) < 2 else fold_classes
            probabilities = np.zeros((n, len(classes)))
            base_probabilities = np.zeros((n, len(classes)))
        assert probabilities is not None and base_probabilities is not None
        proba = model.predict_proba(data.iloc[test])
        for j, label in enumerate(fold_classes):
            probabilities[test, classes.index(label)] = proba[:, j]
        labels[test] = model.predict(data.iloc[test])
        base_labels[test] = _majority(y[train])
        for j, label in enumerate(classes):
            base_probabilities[test, j] = float(np.mean(y[train] == label))
    assert probabilities is not None and base_probabilities is not None
    truth = np.column_stack([y == label for label in classes]).astype(float)

    def classification_row(predicted: np.ndarray, proba: np.ndarray) -> dict[str, float]:
        row = {"accuracy": float(np.mean(predicted.astype(str) == y.astype(str)))}
        if len(classes) == 2:
            k = classes.index(chosen)
            both = truth[:, k].min() < truth[:, k].max()
            row["AUC"] = float(roc_auc_score(truth[:, k], proba[:, k])) if both else float("nan")
            row["Brier"] = float(np.mean((proba[:, k] - truth[:, k]) ** 2))
        else:
            row["Brier"] = float(np.mean(((proba - truth) ** 2).sum(axis=1)))
        return row

    chosen = classes[-1] if positive is None else positive
    if len(classes) == 2 and chosen not in classes:
        raise ValueError(f"positive={positive!r} is not one of the classes {classes}")
    table = pd.DataFrame(
        [classification_row(labels, probabilities),
         classification_row(base_labels, base_probabilities)],
        index=["predictor", "baseline"],
    )
    majority = _majority(y)
    described = f"majority class {majority!r} (share {np.mean(y == majority):.4f})"
    if len(classes) == 2:
        described += f"; P({chosen!r}) = its share in the training folds"
    if len(classes) == 2:
        k = classes.index(chosen)
        losses = [(p[:, k] - truth[:, k]) ** 2 for p in (probabilities, base_probabilities)]
    else:
        losses = [((p - truth) ** 2).sum(axis=1) for p in (probabilities, base_probabilities)]
    gain, gain_se = _gain(*losses)
    return HeldOutScores(table=table, task="classification", folds=folds, n_rows=n,
                         baseline=described, positive=chosen if len(classes) == 2 else None,
                         loss_gain=gain, loss_gain_se=gain_se)


def usefulness_warning(
    scores: HeldOutScores, predictions: Any, probabilities: Any = None
) -> str | None:
    """One line when the predictor is constant or no better than the baseline, else None.

    Parameters
    ----------
    scores : HeldOutScores
        Its held-out scores.
    predictions : array-like
        Its predictions (labels for a classifier) for the training rows.
    probabilities : array-like, optional
        Its probabilities of the positive class for those rows (a binary classifier).
    """
    values = pd.unique(pd.Series(np.asarray(predictions, dtype=object).ravel()))
    constant = len(values) == 1
    flat = probabilities is not None and float(np.ptp(np.asarray(probabilities, float))) < 1e-9
    no_better = scores.no_better()
    predictor, baseline = scores.table.loc["predictor"], scores.table.loc["baseline"]
    if scores.task == "regression":
        measure = f"RMSE {predictor['RMSE']:.4f} vs {baseline['RMSE']:.4f}"
    else:
        measure = f"Brier {predictor['Brier']:.4f} vs {baseline['Brier']:.4f}"
        if np.isfinite(predictor.get("AUC", np.nan)):
            measure += f", AUC {predictor['AUC']:.3f}"
    value = values[0].item() if constant and hasattr(values[0], "item") else values[0]
    if constant and (no_better or flat or probabilities is None):
        return (f"warning: constant predictor: every prediction is {value!r} and it does no "
                f"better than the baseline on held-out rows ({measure}); it is trivially fair "
                "and says nothing")
    if constant:
        return (f"warning: every predicted label is {value!r}; only the probabilities vary "
                f"(held-out {measure} against the baseline): use the probability column, "
                "not the labels")
    if no_better:
        return (f"warning: the predictor does no better than the baseline on held-out rows "
                f"({measure})")
    return None
