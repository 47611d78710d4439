"""One predictor that is approximately counterfactually fair in several causal worlds.

Russell, Kusner, Loftus and Silva (*When Worlds Collide: Integrating Different
Counterfactual Assumptions in Fairness*, NeurIPS 2017, section 3) relax exact
counterfactual fairness to an epsilon-approximate form and, since the causal
model is uncertain, require it in every candidate world ``j`` (every SCM) at
once. The constraint is turned into a penalty: for row ``i`` with protected level
``a_i`` and world ``j``,

    mu_j(f, i) = 1/|A| * sum_{a' in A} max(0, |f(x_i) - f(x_i[A <- a'])| - eps)

(the term ``a' = a_i`` is zero), and the predictor minimises

    1/n sum_i loss(f(x_i), y_i) + lam * sum_j 1/n sum_i mu_j(f, i).

Here the counterfactual inputs ``x_i[A <- a']`` of world ``j`` come from that
world's own Bayesian abduction (:meth:`counterfair.Fit.counterfactual`), so the
inner mean also runs over its posterior/counterfactual samples.

Differences from the paper, chosen so the problem has an exact solution:

* The hinge is **squared**, ``max(0, |d| - eps) ** 2``. With ``eps = 0`` the
  penalty is ``w' P w`` with ``P = sum_j mean(dx dx')`` for a linear score
  ``f(x) = w.x + b`` (``d = w.(x_cf - x)``; the intercept cancels), so least
  squares becomes a generalised ridge solved by one linear system. With
  ``eps > 0`` (and for logistic regression) the objective is still convex and
  smooth and is minimised by L-BFGS with its analytic gradient.
* For logistic regression the penalised change is that of the **score** (the
  log-odds ``w.x + b``), not of the probability: that keeps the problem convex.

Only these two linear estimators are offered: for any other model the penalty is
not a convex function of the parameters and no exact solution exists, so asking
for one raises (use :class:`counterfair.FairLearner` for Kusner et al.'s exact
constructions).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import optimize, special
from sklearn.base import BaseEstimator, clone
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils.validation import check_is_fitted

from counterfair.errors import DataError, FairnessError
from counterfair.inference.fit import Fit

Estimator = Literal["linear", "logistic"]
ESTIMATORS: tuple[str, ...] = ("linear", "logistic")


@dataclass(frozen=True)
class WorldDifferences:
    """Counterfactual minus factual inputs of one world, encoded like the design.

    Attributes
    ----------
    delta : numpy.ndarray
        ``(M, p)``: one row per (level ``a'``, sample, data row); rows whose
        ``a'`` is the factual level are zero.
    other : numpy.ndarray
        ``(M,)`` bool, True where ``a'`` differs from the row's factual level.
    """

    delta: np.ndarray
    other: np.ndarray


def _check_worlds(fits: Sequence[Fit], features: Sequence[str], attribute: str) -> tuple[str, ...]:
    if len(fits) == 0:
        raise FairnessError("MultiWorldLearner needs at least one world (fits=[] was given)")
    levels: tuple[str, ...] | None = None
    for j, fit in enumerate(fits):
        if attribute not in fit.scm.protected:
            raise FairnessError(
                f"world {j}: {attribute!r} is not a protected attribute of its SCM "
                f"(protected: {list(fit.scm.protected)})"
            )
        if attribute not in fit.encoding.levels:
            raise FairnessError(f"world {j}: {attribute!r} is continuous; it needs levels")
        for column in features:
            if column not in fit.scm.observed and column not in fit.scm.protected:
                raise DataError(
                    f"world {j}: feature column {column!r} is not an observed node of its SCM "
                    f"(observed: {list(fit.scm.observed)})"
                )
        found = tuple(fit.encoding.levels[attribute])
        if levels is None:
            levels = found
        elif set(found) != set(levels):
            raise FairnessError(
                f"worlds disagree on the levels of {attribute!r}: world 0 has {list(levels)}, "
                f"world {j} has {list(found)}"
            )
    assert levels is not None
    return levels


def encode(
    frame: pd.DataFrame, features: Sequence[str], levels: dict[str, tuple[str, ...]]
) -> np.ndarray:
    """Design matrix: numeric features as floats, categorical ones one-hot (first level dropped).

    ``levels`` gives the levels of each categorical feature (protected attributes).
    """
    blocks: list[np.ndarray] = []
    for column in features:
        if column not in frame.columns:
            raise DataError(f"feature column {column!r} is missing from the data")
        values = frame[column]
        if column in levels:
            codes = pd.Categorical(values.astype(str), categories=list(levels[column])).codes
            if np.any(codes < 0):
                bad = sorted(set(values.astype(str)) - set(levels[column]))
                raise DataError(f"column {column!r} has unknown levels {bad}")
            blocks.append(np.eye(len(levels[column]))[codes][:, 1:])
        else:
            blocks.append(np.asarray(values, dtype=float)[:, None])
    return np.hstack(blocks)


def world_differences(
    fit: Fit,
    data: pd.DataFrame | None,
    *,
    features: Sequence[str],
    attribute: str,
    levels: dict[str, tuple[str, ...]],
    n_samples: int,
    seed: int | None,
) -> WorldDifferences:
    """Encoded ``x_cf - x`` for every level of ``attribute``, sample and row of one world.

    ``data=None`` uses the fit's training rows and its own posterior draws.
    """
    deltas: list[np.ndarray] = []
    others: list[np.ndarray] = []
    seed = fit.seed if seed is None else seed
    abduction = fit.abduct(data, n_samples=n_samples, seed=seed)  # once, shared by the levels
    for level in levels[attribute]:
        frame = fit.counterfactual(data, {attribute: level}, seed=seed, abduction=abduction)
        keys = ["row", "sample"]
        factual = frame[frame["world"] == "factual"].set_index(keys)
        counter = frame[frame["world"] == "counterfactual"].set_index(keys).reindex(factual.index)
        deltas.append(encode(counter, features, levels) - encode(factual, features, levels))
        others.append(factual[attribute].astype(str).to_numpy() != level)
    return WorldDifferences(np.vstack(deltas), np.concatenate(others))


def hinge_penalty(scores: np.ndarray, epsilon: float) -> tuple[float, np.ndarray]:
    """Mean of ``max(0, |d| - eps)**2`` over ``d`` and its derivative per ``d``."""
    excess = np.maximum(np.abs(scores) - epsilon, 0.0)
    return float(np.mean(excess**2)), 2.0 * np.sign(scores) * excess / scores.size


class MultiWorldLearner(BaseEstimator):  # type: ignore[misc]
    """A linear or logistic predictor penalised for its counterfactual change in every world.

    A scikit-learn estimator: the constructor only stores its arguments (every check
    happens in :meth:`fit`), so :meth:`get_params`, :meth:`set_params` and
    :func:`sklearn.base.clone` work; a clone shares the worlds ``fits`` (fitted
    posteriors, which are only read) and copies every other parameter.

    Parameters
    ----------
    fits : sequence of Fit
        The candidate worlds (SCMs fitted by NUTS); each must know every feature
        and the protected attribute ``attribute``, with the same levels.
    target : str
        Outcome column.
    features : sequence of str
        Observed inputs of the predictor (protected attributes are allowed and
        one-hot encoded; any descendant of ``attribute`` moves under ``do``).
    attribute : str
        The protected attribute's column: the attribute intervened on.
    estimator : {"linear", "logistic"}, default "linear"
        Least squares (exact generalised ridge when ``epsilon == 0``) or logistic
        regression (L-BFGS). Anything else raises in :meth:`fit`.
    lam : float, default 1.0
        Weight of the summed penalty of the worlds (>= 0).
    epsilon : float, default 0.0
        Tolerated change of the score (>= 0), the paper's epsilon.
    n_samples : int, default 50
        Posterior/counterfactual samples per row and world.
    seed : int, optional
        Seed of the counterfactual draws (default: each world's own fit seed, as
        for :class:`counterfair.FairLearner`). The same seed gives the same draws
        and so the same weights.

    Attributes
    ----------
    coef_ : numpy.ndarray
        Weights of the linear score (after :meth:`fit`).
    intercept_ : float
        Its intercept.
    levels_ : dict of str to tuple of str
        Levels of each categorical feature and of ``attribute``, as encoded.
    differences_ : list of WorldDifferences
        One per world, for the training rows.

    Raises
    ------
    FairnessError
        From :meth:`fit`: an unknown ``estimator``, ``lam`` or ``epsilon`` negative
        or not finite, no worlds, ``attribute`` not a protected attribute with
        levels in some world, or worlds that disagree on its levels.
    DataError
        From :meth:`fit`: ``target`` among ``features``, a feature that is not a
        node of some world, a missing column.
    """

    def __init__(
        self,
        *,
        fits: Sequence[Fit],
        target: str,
        features: Sequence[str],
        attribute: str,
        estimator: str = "linear",
        lam: float = 1.0,
        epsilon: float = 0.0,
        n_samples: int = 50,
        seed: int | None = None,
    ) -> None:
        self.fits = fits
        self.target = target
        self.features = features
        self.attribute = attribute
        self.estimator = estimator
        self.lam = lam
        self.epsilon = epsilon
        self.n_samples = n_samples
        self.seed = seed

    # ------------------------------------------------------------------ scikit-learn
    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import ClassifierTags, RegressorTags

        tags = super().__sklearn_tags__()
        if self.estimator == "logistic":
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags()
        else:
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
        return tags

    def __sklearn_clone__(self) -> MultiWorldLearner:
        """An unfitted copy with the same parameters; the worlds are shared, not copied.

        ``clone`` would deep-copy every Fit (its posterior and training rows), and two
        copies of a Fit do not compare equal; the copy of the container keeps its type.
        """
        params = self.get_params(deep=False)
        fits = params.pop("fits")
        copied = {name: clone(value, safe=False) for name, value in params.items()}
        return type(self)(fits=copy.copy(fits), **copied)

    def _checked(self) -> dict[str, tuple[str, ...]]:
        """Validate the parameters; the levels of each categorical feature and ``attribute``."""
        if self.estimator not in ESTIMATORS:
            raise FairnessError(
                f"estimator {self.estimator!r} is not supported: the multi-world penalty has "
                f"an exact convex solution only for {list(ESTIMATORS)}"
            )
        if not np.isfinite(self.lam) or self.lam < 0:
            raise FairnessError(f"lam must be a finite number >= 0, got {self.lam}")
        if not np.isfinite(self.epsilon) or self.epsilon < 0:
            raise FairnessError(f"epsilon must be a finite number >= 0, got {self.epsilon}")
        features = list(self.features)
        if self.target in features:
            raise DataError(f"target {self.target!r} cannot also be a feature")
        fits = list(self.fits)
        found = _check_worlds(fits, features, self.attribute)
        levels = {
            c: tuple(fits[0].encoding.levels[c]) for c in features if c in fits[0].encoding.levels
        }
        levels[self.attribute] = found
        return levels

    # ------------------------------------------------------------------ fitting
    def differences(self, data: pd.DataFrame | None = None) -> list[WorldDifferences]:
        """Each world's encoded counterfactual input changes for ``data`` (None: training rows).

        Checks the parameters as :meth:`fit` does; the learner need not be fitted.
        """
        levels = self._checked()
        return [
            world_differences(
                fit,
                data,
                features=list(self.features),
                attribute=self.attribute,
                levels=levels,
                n_samples=self.n_samples,
                seed=self.seed,
            )
            for fit in self.fits
        ]

    def fit(
        self,
        X: pd.DataFrame | None = None,
        y: Any = None,
        *,
        differences: list[WorldDifferences] | None = None,
    ) -> MultiWorldLearner:
        """Learn the weights on ``X`` (default: the first fit's training rows).

        Parameters
        ----------
        X : pandas.DataFrame, optional
            Training rows with every feature (default: the first fit's training rows).
        y : array-like, optional
            Target values, one per row; default ``X[target]``.
        differences : list of WorldDifferences, optional
            From :meth:`differences` on the same rows: reuses the counterfactual
            draws, e.g. along a sweep of ``lam``.

        Returns
        -------
        MultiWorldLearner
            The fitted learner.
        """
        levels = self._checked()
        fits = list(self.fits)
        rows = fits[0].data if X is None else X
        if y is None:
            if self.target not in rows.columns:
                raise DataError(f"target column {self.target!r} is missing from the data")
            y = rows[self.target]
        x = encode(rows, list(self.features), levels)
        target = np.asarray(y, dtype=float)
        if target.shape != (x.shape[0],):
            raise DataError(
                f"y has shape {target.shape}; expected one value per row ({x.shape[0]})"
            )
        if differences is None:
            differences = self.differences(X)
        if len(differences) != len(fits):
            raise FairnessError(f"{len(differences)} sets of differences for {len(fits)} worlds")
        for d in differences:
            if d.delta.shape[1] != x.shape[1]:
                raise DataError("differences were computed for other features")
        theta = solve(
            x,
            target,
            [d.delta for d in differences],
            estimator=self.estimator,
            lam=float(self.lam),
            epsilon=float(self.epsilon),
        )
        self.levels_ = levels
        self.differences_ = differences
        self.intercept_ = float(theta[0])
        self.coef_ = theta[1:]
        return self

    # ------------------------------------------------------------------ prediction
    def decision_function(self, X: pd.DataFrame) -> np.ndarray:
        """The linear score ``x.coef_ + intercept_``."""
        check_is_fitted(self, "coef_")
        return encode(X, list(self.features), self.levels_) @ self.coef_ + self.intercept_

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Predicted outcome (least squares) or class 0/1 (logistic)."""
        score = self.decision_function(X)
        return score if self.estimator == "linear" else (score > 0).astype(int)

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Probability of class 1 (logistic only)."""
        if self.estimator != "logistic":
            raise FairnessError("predict_proba is only defined for estimator='logistic'")
        return np.asarray(special.expit(self.decision_function(X)))

    def score(self, X: pd.DataFrame, y: Any = None) -> float:
        """R^2 (linear) or accuracy (logistic) on ``X``; ``y`` defaults to ``X[target]``."""
        truth = np.asarray(X[self.target] if y is None else y, dtype=float)
        predicted = self.predict(X)
        if self.estimator == "logistic":
            return float(accuracy_score(truth, predicted))
        return float(r2_score(truth, predicted))

    def world_changes(self, differences: list[WorldDifferences] | None = None) -> pd.DataFrame:
        """Per world: mean and max |change of the score| over rows, samples and other levels."""
        check_is_fitted(self, "coef_")
        differences = self.differences_ if differences is None else differences
        records = []
        for j, d in enumerate(differences):
            change = np.abs(d.delta[d.other] @ self.coef_)
            records.append(
                {
                    "world": j,
                    "mean_abs_change": float(change.mean()),
                    "max_abs_change": float(change.max()) if change.size else 0.0,
                }
            )
        return pd.DataFrame.from_records(records)


def objective(
    theta: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    deltas: Sequence[np.ndarray],
    *,
    estimator: str,
    lam: float,
    epsilon: float,
) -> tuple[float, np.ndarray]:
    """Penalised objective and its gradient; ``theta = (intercept, weights)``."""
    n = x.shape[0]
    b, w = theta[0], theta[1:]
    score = x @ w + b
    if estimator == "linear":
        resid = score - y
        value = float(np.mean(resid**2))
        dscore = 2.0 * resid / n
    else:
        value = float(np.mean(np.logaddexp(0.0, score) - y * score))
        dscore = (special.expit(score) - y) / n
    grad = np.concatenate([[dscore.sum()], x.T @ dscore])
    for delta in deltas:
        pen, dpen = hinge_penalty(delta @ w, epsilon)
        value += lam * pen
        grad[1:] += lam * (delta.T @ dpen)
    return value, grad


def penalty_matrix(deltas: Sequence[np.ndarray]) -> np.ndarray:
    """``sum_j mean(dx dx')``: the penalty ``w' P w`` of ``epsilon = 0``."""
    return sum((d.T @ d / d.shape[0] for d in deltas), np.zeros((deltas[0].shape[1],) * 2))


def solve(
    x: np.ndarray,
    y: np.ndarray,
    deltas: Sequence[np.ndarray],
    *,
    estimator: str,
    lam: float,
    epsilon: float,
) -> np.ndarray:
    """Minimiser ``(intercept, weights)`` of :func:`objective`.

    Least squares with ``epsilon == 0``: the normal equations
    ``(Z'Z/n + lam P~) theta = Z'y/n`` with ``Z = [1, x]`` and ``P~`` the penalty
    matrix bordered by a zero row/column for the intercept. Otherwise L-BFGS
    from the least-squares (or zero) start with the analytic gradient.
    """
    n, p = x.shape
    z = np.hstack([np.ones((n, 1)), x])
    bordered = np.zeros((p + 1, p + 1))
    bordered[1:, 1:] = penalty_matrix(deltas)
    lhs = z.T @ z / n + lam * bordered
    rhs = z.T @ y / n
    start = np.linalg.lstsq(lhs, rhs, rcond=None)[0]
    if estimator == "linear" and epsilon == 0.0:
        return np.asarray(start)
    if estimator == "logistic":
        start = np.zeros(p + 1)
    result = optimize.minimize(
        lambda t: objective(t, x, y, deltas, estimator=estimator, lam=lam, epsilon=epsilon),
        start,
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 10_000, "gtol": 1e-12, "ftol": 1e-15},
    )
    return np.asarray(result.x)


def trade_off(
    fits: Sequence[Fit],
    *,
    target: str,
    features: Sequence[str],
    attribute: str,
    lams: Sequence[float],
    test: pd.DataFrame,
    estimator: str = "linear",
    epsilon: float = 0.0,
    n_samples: int = 50,
    seed: int | None = None,
    test_differences: list[WorldDifferences] | None = None,
) -> pd.DataFrame:
    """Sweep ``lam``: test error against each world's counterfactual change.

    The learner is trained on the first fit's training rows; the change is the
    mean |change of the score| over ``test``'s rows, samples and other levels in
    each world (``test_differences``, else abducted for ``test`` in each fit).
    ``fits``, ``target``, ``features``, ``attribute``, ``estimator``, ``epsilon``,
    ``n_samples`` and ``seed`` are those of :class:`MultiWorldLearner`; the
    training draws are abducted once and shared by every ``lam``.

    Returns
    -------
    pandas.DataFrame
        One row per ``lam``: ``lam``, ``rmse`` (linear) or ``log_loss`` and
        ``accuracy`` (logistic), ``change_world_<j>`` and ``worst_change``.
    """
    if len(lams) == 0:
        raise FairnessError("trade_off needs at least one value of lam")
    base = MultiWorldLearner(
        fits=fits,
        target=target,
        features=features,
        attribute=attribute,
        estimator=estimator,
        lam=0.0,
        epsilon=epsilon,
        n_samples=n_samples,
        seed=seed,
    )
    train_diff = base.differences(None)
    if test_differences is None:
        test_differences = base.differences(test)
    y = np.asarray(test[target], dtype=float)
    records = []
    for lam in lams:
        learner = clone(base).set_params(lam=lam).fit(None, differences=train_diff)
        score = learner.decision_function(test)
        record: dict[str, float] = {"lam": float(lam)}
        if estimator == "linear":
            record["rmse"] = float(np.sqrt(np.mean((score - y) ** 2)))
        else:
            record["log_loss"] = float(np.mean(np.logaddexp(0.0, score) - y * score))
            record["accuracy"] = float(np.mean((score > 0) == (y > 0.5)))
        changes = learner.world_changes(test_differences)["mean_abs_change"].to_numpy()
        for j, value in enumerate(changes):
            record[f"change_world_{j}"] = float(value)
        record["worst_change"] = float(changes.max())
        records.append(record)
    return pd.DataFrame.from_records(records)
