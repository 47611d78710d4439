"""Measures on individuals: attribute flip without an SCM, consistency, generalized entropy.

* :func:`flip_counterfactual` -- Cesaro's counterfactual measure without a causal model:
  for every privileged individual (``A = 1``) the sensitive attribute in the model's
  input is set to the unprivileged value and to the privileged value, and
  ``P(Y^_{A<-0} | x, A = 1) - P(Y^_{A<-1} | x, A = 1)`` is taken per row (signed; negative
  favours the privileged) and averaged.  Descendants of ``A`` are *not* changed; for the
  causal version with a fitted SCM see :func:`counterfair.audit.counterfactual_fairness`.
* :func:`consistency` -- ``1 - (1/N) sum_n |y^_n - mean of y^ over the k nearest
  neighbours of x_n|`` (Zemel et al. 2013), neighbours found without the attribute
  attribute(s) and never counting a row as its own neighbour.
* :func:`generalized_entropy_index` -- inequality of the benefits ``b_i = y^_i - y_i + 1``
  (Speicher et al. 2018), with its exact between-group / within-group decomposition.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from sklearn.neighbors import NearestNeighbors

from ._groups import encode
from ._validation import (
    BAD_CHOICE,
    NOT_A_COLUMN,
    OUT_OF_RANGE,
    as_1d,
    as_binary,
    as_numeric,
    check_count,
    check_finite,
    check_lengths,
    check_open_unit,
    shown,
)
from .bootstrap import Seed, bootstrap_interval
from .two_groups import privileged_indicator

Predict = Callable[[pd.DataFrame], ArrayLike]
"""A model's scoring function: DataFrame of features -> one number per row."""


def _column(frame: pd.DataFrame, column: str, where: str = "X") -> None:
    if column not in frame.columns:
        raise ValueError(NOT_A_COLUMN.format(name="sensitive column", column=column,
                                             where=where, available=shown(list(frame.columns))))


# ------------------------------------------------------------------ flip counterfactual


@dataclass(frozen=True, kw_only=True)
class FlipReport:
    """Result of :func:`flip_counterfactual`.

    Attributes
    ----------
    per_row
        ``P(Y^_{A<-unprivileged}) - P(Y^_{A<-privileged})`` for every privileged row
        (indexed like ``X``).
    mean
        Average of ``per_row``: the counterfactual measure (negative favours the
        privileged group).
    lower, upper
        Percentile bootstrap interval of ``mean`` (NaN without bootstrap).
    changed
        Number of privileged rows whose output changes at all.
    n_privileged
        Number of privileged rows.
    interval
        Interval level.
    """

    per_row: pd.Series
    mean: float
    lower: float
    upper: float
    changed: int
    n_privileged: int
    interval: float


def flip_counterfactual(
    predict: Predict,
    X: pd.DataFrame,
    *,
    attribute: str,
    privileged: Hashable,
    unprivileged: Hashable,
    n_bootstrap: int = 0,
    interval: float = 0.95,
    seed: Seed = 0,
) -> FlipReport:
    """Cesaro's counterfactual measure: flip ``A`` in the model input of privileged rows.

    Parameters
    ----------
    predict
        Model output per row (decisions ``Y^`` or probabilities ``P(Y^ = 1 | x)``).
    X
        Model input, including the column ``attribute``.
    attribute
        Name of the sensitive column.
    privileged, unprivileged
        The values ``A = 1`` and ``A = 0`` of that column.
    n_bootstrap, interval, seed
        Percentile bootstrap interval of the mean over privileged rows.

    Returns
    -------
    FlipReport

    Raises
    ------
    ValueError
        If the column is missing, no row is privileged or every row is, or the model
        returns the wrong number of values.
    """
    _column(X, attribute)
    priv = privileged_indicator(X[attribute], privileged, name=f"X[{attribute!r}]")
    n_bootstrap = check_count(n_bootstrap, "n_bootstrap")
    interval = check_open_unit(interval, "interval")
    rows = X.loc[priv]
    as_unpriv = rows.copy()
    as_unpriv[attribute] = unprivileged
    as_priv = rows.copy()
    as_priv[attribute] = privileged
    out_u = as_numeric(predict(as_unpriv), "predict(X with A <- unprivileged)")
    out_p = as_numeric(predict(as_priv), "predict(X with A <- privileged)")
    check_lengths([("privileged rows", len(rows)), ("predict output", out_u.size)])
    diff = out_u - out_p
    lower = upper = float("nan")
    if n_bootstrap:
        lo, hi = bootstrap_interval(lambda r: diff[r].mean(), diff.size,
                                    n_resamples=n_bootstrap, interval=interval, seed=seed)
        lower, upper = float(lo), float(hi)
    return FlipReport(per_row=pd.Series(diff, index=rows.index, name="flip_difference"),
                      mean=float(diff.mean()), lower=lower, upper=upper,
                      changed=int((diff != 0).sum()), n_privileged=int(diff.size),
                      interval=interval)


# -------------------------------------------------------------------------- consistency


def consistency(
    X: pd.DataFrame,
    y_pred: ArrayLike,
    *,
    exclude: Sequence[str] = (),
    n_neighbors: int = 5,
    standardize: bool = True,
) -> float:
    """``1 - (1/N) sum_n |y^_n - mean_{j in kNN(x_n)} y^_j|``.

    Parameters
    ----------
    X
        Numeric features of the individuals.
    y_pred
        Decisions or scores, one per row of ``X``.
    exclude
        Columns left out of the distance (the sensitive attribute(s)).
    n_neighbors
        ``k``; a row is never its own neighbour (exact duplicates of it still count).
    standardize
        Scale each feature to unit variance before computing Euclidean distances
        (constant features are left as they are).

    Returns
    -------
    float
        1 for identical outputs among neighbours; lower is less consistent. See
        :func:`consistency_interval` for a bootstrap interval.
    """
    terms = _consistency_terms(X, y_pred, exclude, n_neighbors, standardize)
    return float(1.0 - terms.mean())


def consistency_interval(
    X: pd.DataFrame,
    y_pred: ArrayLike,
    *,
    exclude: Sequence[str] = (),
    n_neighbors: int = 5,
    standardize: bool = True,
    n_bootstrap: int = 1000,
    interval: float = 0.95,
    seed: Seed = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`consistency` (same arguments).

    Each row's neighbours are found once, in the whole sample; the rows' terms
    ``|y^_n - mean of y^ over its neighbours|`` are then resampled. (Resampling rows
    before the neighbour search would make a row's own copies its neighbours.)

    Returns
    -------
    tuple of float
        Lower and upper bound.
    """
    n_bootstrap = check_count(n_bootstrap, "n_bootstrap")
    if n_bootstrap == 0:
        raise ValueError("n_bootstrap must be at least 1 for an interval")
    interval = check_open_unit(interval, "interval")
    terms = _consistency_terms(X, y_pred, exclude, n_neighbors, standardize)
    lo, hi = bootstrap_interval(lambda r: 1.0 - terms[r].mean(), terms.size,
                                n_resamples=n_bootstrap, interval=interval, seed=seed)
    return float(lo), float(hi)


def _consistency_terms(
    X: pd.DataFrame,
    y_pred: ArrayLike,
    exclude: Sequence[str],
    n_neighbors: int,
    standardize: bool,
) -> NDArray[np.float64]:
    """Per row, ``|y^_n - mean of y^ over the k nearest other rows|``."""
    pred = as_numeric(y_pred, "y_pred")
    check_lengths([("X", len(X)), ("y_pred", pred.size)])
    for column in exclude:
        _column(X, column)
    if (isinstance(n_neighbors, bool) or not isinstance(n_neighbors, int)
            or not 1 <= n_neighbors <= len(X) - 1):
        raise ValueError(OUT_OF_RANGE.format(name="n_neighbors", low=1, high=len(X) - 1,
                                             value=n_neighbors))
    features = X.drop(columns=list(exclude))
    values = np.column_stack([as_numeric(features[c], f"X[{c!r}]") for c in features.columns])
    if standardize:
        scale = values.std(axis=0)
        scale[scale == 0] = 1.0
        values = (values - values.mean(axis=0)) / scale
    neighbours = NearestNeighbors(n_neighbors=n_neighbors).fit(values)
    _, index = neighbours.kneighbors()  # without X: a point is not its own neighbour
    return np.asarray(np.abs(pred - pred[index].mean(axis=1)), dtype=np.float64)


# ------------------------------------------------------------ generalized entropy index


@dataclass(frozen=True, kw_only=True)
class EntropyIndex:
    """Result of :func:`generalized_entropy_index`.

    Attributes
    ----------
    total
        ``GE(alpha)`` of all benefits.
    between
        ``GE`` of the benefits with every individual given their group's mean benefit.
    within
        ``sum_g (n_g / n) (mu_g / mu)^alpha GE_g``; ``between + within == total``.
    by_group
        Per group: ``size``, ``mean_benefit``, ``ge`` (the group's own index) and
        ``within_contribution``.
    alpha
        The order of the index.
    ci
        Percentile bootstrap intervals of ``total``, ``between`` and ``within``
        (rows; columns ``lower, upper``), resampling stratified by group; ``None``
        without bootstrap.
    """

    total: float
    between: float
    within: float
    by_group: pd.DataFrame
    alpha: float
    ci: pd.DataFrame | None = None


def _ge(b: NDArray[np.float64], alpha: float) -> float:
    mu = b.mean()
    if mu == 0:
        return float("nan")
    return float(((b / mu) ** alpha - 1.0).mean() / (alpha * (alpha - 1.0)))


def generalized_entropy_index(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    *,
    protected: ArrayLike | None = None,
    alpha: float = 2.0,
    n_bootstrap: int = 0,
    interval: float = 0.95,
    seed: Seed = 0,
) -> EntropyIndex:
    """Generalized entropy index of the benefits ``b_i = y^_i - y_i + 1``.

    ``GE(alpha) = 1 / (n alpha (alpha - 1)) sum_i ((b_i / mu)^alpha - 1)`` with ``mu`` the
    mean benefit; 0 when everyone gets the same benefit.

    Parameters
    ----------
    y_true
        Actual binary labels.
    y_pred
        Binary decisions.
    protected
        Optional group per individual for the between/within decomposition (without it,
        one group holds everyone and ``between == 0``).
    alpha
        Order, any real number except 0 and 1 (default 2: half the squared coefficient
        of variation).  Negative orders need every benefit to be positive.
    n_bootstrap, interval, seed
        Percentile bootstrap intervals of the total and its two parts (0: none).

    Returns
    -------
    EntropyIndex

    Raises
    ------
    ValueError
        For ``alpha`` in {0, 1}, a negative ``alpha`` with zero benefits, or invalid
        labels.
    """
    y = as_binary(y_true, "y_true")
    pred = as_binary(y_pred, "y_pred")
    check_lengths([("y_true", y.size), ("y_pred", pred.size)])
    alpha = check_finite(alpha, "alpha")
    if alpha in (0.0, 1.0):
        raise ValueError(BAD_CHOICE.format(name="alpha", choices="any real except 0 and 1",
                                           value=alpha))
    benefit = pred - y + 1.0
    if alpha < 0 and (benefit == 0).any():
        raise ValueError(f"alpha = {alpha:g} < 0 needs positive benefits, but "
                         f"{int((benefit == 0).sum())} individual(s) have benefit 0 "
                         "(y_pred = 0, y_true = 1)")
    labels: list[Hashable]
    if protected is None:
        codes, labels = np.zeros(y.size, dtype=np.intp), ["all"]
    else:
        values = as_1d(protected, "protected")
        check_lengths([("y_true", y.size), ("protected", values.size)])
        codes, labels = encode(values, "protected")
    n_bootstrap = check_count(n_bootstrap, "n_bootstrap")
    interval = check_open_unit(interval, "interval")
    total, between, within, rows = _decompose(benefit, codes, labels, alpha)
    ci = None
    if n_bootstrap:
        def statistic(r: NDArray[np.intp]) -> NDArray[np.float64]:
            return np.array(_decompose(benefit[r], codes[r], labels, alpha)[:3])

        lower, upper = bootstrap_interval(statistic, benefit.size, n_resamples=n_bootstrap,
                                          interval=interval, seed=seed, strata=codes)
        ci = pd.DataFrame({"lower": lower, "upper": upper},
                          index=pd.Index(["total", "between", "within"], name="part"))
    return EntropyIndex(total=total, between=between, within=within,
                        by_group=pd.DataFrame(rows).set_index("group"), alpha=alpha, ci=ci)


def _decompose(benefit: NDArray[np.float64], codes: NDArray[np.intp], labels: list[Hashable],
               alpha: float) -> tuple[float, float, float, list[dict[str, object]]]:
    """Total, between, within and the per-group rows of the GE decomposition."""
    mu = benefit.mean()
    total = _ge(benefit, alpha)
    group_mean = np.array([benefit[codes == g].mean() for g in range(len(labels))])
    between = _ge(group_mean[codes], alpha)
    rows: list[dict[str, object]] = []
    within = 0.0
    for g, label in enumerate(labels):
        b = benefit[codes == g]
        share = b.size / benefit.size
        ge_g = _ge(b, alpha)
        # a group whose benefits are all 0 contributes nothing for alpha > 0
        contribution = 0.0 if group_mean[g] == 0 else share * (group_mean[g] / mu) ** alpha * ge_g
        within += contribution
        rows.append({"group": label, "size": b.size, "mean_benefit": group_mean[g],
                     "ge": ge_g, "within_contribution": contribution})
    return total, between, float(within), rows
