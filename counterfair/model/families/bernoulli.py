"""The Bernoulli family: 0/1 values with a logit link (``bernoulli_logit_glm``).

A Bernoulli column holds 0/1 numbers (or booleans), or two labels (``no``/``yes``,
``denied``/``approved``): the spec's ``levels`` name them, negative first, or they are
read from the training rows (:meth:`BernoulliFamily.levels_from_data`). Inside, the
values are always 0/1; frames (simulations, counterfactual worlds) give them back in the
labels.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd
from scipy.special import expit

from counterfair import errors
from counterfair.model.families.base import (
    Family,
    Statistic,
    mean_statistic,
    row_label,
    share_statistic,
)
from counterfair.model.families.levels import distinct_levels, level_key
from counterfair.model.nodes import Observed
from counterfair.rng import RandomSource

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation
    from counterfair.model.params import ParamDraws


VOCABULARY: tuple[tuple[str, str], ...] = (
    ("no", "yes"),
    ("false", "true"),
    ("0", "1"),
    ("n", "y"),
)
"""Pairs of labels read without being named, (negative, positive), compared in lower case."""

BERNOULLI_LEVELS = (
    "a Bernoulli node has two levels, [negative, positive]; got levels={levels!r}"
)
"""Error when a Bernoulli spec's levels are not two distinct labels."""

NOT_TWO_VALUES = (
    "column {column!r} is a Bernoulli node and holds {count} distinct values ({values}); "
    "it needs two (a yes/no, true/false or 0/1 column, or two labels with positive= named)"
)
"""Error when a Bernoulli training column does not hold exactly two values."""

NAME_POSITIVE = (
    "column {column!r} is a Bernoulli node with values {values}: say which is the positive "
    "one (positive: {example} in the SCM file, Bernoulli(positive={example!r}) in Python), "
    "or list both, negative first (levels: [{negative}, {example}])"
)
"""Error when a Bernoulli column's two labels are not a pair counterfair recognises."""

UNKNOWN_POSITIVE = (
    "column {column!r} is a Bernoulli node with positive={positive!r}, but its values are "
    "{values}"
)
"""Error when the named positive label is not one of the column's values."""

NOT_A_LEVEL = (
    "column {column!r} is a Bernoulli node with levels {levels}; value {value!r} at row "
    "{row!r} is not one of them"
)
"""Error when a labelled Bernoulli column holds another value (new rows)."""


@dataclass(frozen=True)
class Bernoulli(Observed):
    """A binary node with logit link: ``x ~ Bernoulli(logit^-1(eta(parents)))``.

    Parameters
    ----------
    levels : pair of str, optional
        The two labels of the column, negative first: ``("no", "yes")``. The model
        sees 0 for the first and 1 for the second; predictions are written back in
        these labels. Without ``levels``, a numeric 0/1 (or boolean) column is used
        as it is, and any other two-valued column has its labels read from the
        training rows at fit time: no/yes, false/true, 0/1 and n/y (in any case)
        are recognised, any other pair needs ``positive``. The labels read are
        recorded in the fit's SCM and its saved files.
    positive : str, optional
        The positive label (the one modelled as 1); with ``levels``, one of them.

    Examples
    --------
    >>> Bernoulli(levels=("approved", "denied"), positive="approved").levels
    ('denied', 'approved')
    """

    family: ClassVar[str] = "bernoulli"
    link: ClassVar[str] = "logit"
    levels: tuple[str, ...] | None = None
    positive: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        positive = None if self.positive is None else level_key(self.positive)
        if self.levels is not None:
            levels = self.levels
            if isinstance(levels, str | bytes | int | float) or not hasattr(levels, "__iter__"):
                raise ValueError(BERNOULLI_LEVELS.format(levels=levels))
            labels = tuple(level_key(level) for level in levels)
            if len(labels) != 2 or labels[0] == labels[1]:
                raise ValueError(BERNOULLI_LEVELS.format(levels=levels))
            if positive is not None:
                if positive not in labels:
                    raise ValueError(
                        f"positive level {self.positive!r} is not one of the levels {labels}"
                    )
                labels = (labels[1 - labels.index(positive)], positive)
            object.__setattr__(self, "levels", labels)
            positive = labels[1]
        object.__setattr__(self, "positive", positive)

    @property
    def labels(self) -> tuple[str, ...] | None:
        """The two labels, negative then positive (None for a 0/1 column)."""
        return self.levels


def _spec(spec: Observed) -> Bernoulli:
    assert isinstance(spec, Bernoulli)
    return spec


class BernoulliFamily(Family):
    """Binary nodes; a classification task.

    Coupled across worlds through ``x = 1[u > 1 - p(eta)]`` with one uniform
    ``u`` per unit (the monotone coupling): a factual 1 stays 1 when ``p``
    rises, and a factual 0 becomes 1 with probability ``(p' - p) / (1 - p)``.
    """

    name = "bernoulli"
    spec = Bernoulli
    task = "classifier"
    exact = True

    def levels_from_data(self, spec: Observed, series: pd.Series, column: str) -> Observed | None:
        """The two labels of a column that is not numeric 0/1, negative first.

        A numeric or boolean 0/1 column needs none (it is used as it is) unless
        ``positive`` names another value. Otherwise the labels are a recognised
        pair (:data:`VOCABULARY`) or two values one of which is ``positive``.
        """
        bernoulli = _spec(spec)
        if bernoulli.levels is not None:
            return None
        present = series.dropna()
        binary = (
            pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series)
        ) and not isinstance(series.dtype, pd.CategoricalDtype)
        if binary and bernoulli.positive in (None, "1", "True"):
            values = present.to_numpy(dtype=float)
            if np.isin(values, (0.0, 1.0)).all():
                return None
        found = distinct_levels(series)
        shown = ", ".join(repr(v) for v in found[:4]) + (", ..." if len(found) > 4 else "")
        if len(found) > 2 or not found:
            raise errors.DataError(
                NOT_TWO_VALUES.format(column=column, count=len(found), values=shown or "none")
            )
        positive = bernoulli.positive
        if positive is not None:
            if positive not in found or len(found) < 2:
                if positive not in found:
                    raise errors.DataError(
                        UNKNOWN_POSITIVE.format(column=column, positive=positive, values=shown)
                    )
                raise errors.DataError(
                    NOT_TWO_VALUES.format(column=column, count=len(found), values=shown)
                )
            negative = found[1 - found.index(positive)]
            return dataclasses.replace(bernoulli, levels=(negative, positive), positive=positive)
        lower = {label.lower(): label for label in found}
        for no, yes in VOCABULARY:
            if len(found) == 2 and set(lower) == {no, yes}:
                return dataclasses.replace(
                    bernoulli, levels=(lower[no], lower[yes]), positive=lower[yes]
                )
        if len(found) < 2:
            raise errors.DataError(
                NOT_TWO_VALUES.format(column=column, count=len(found), values=shown)
            )
        raise errors.DataError(
            NAME_POSITIVE.format(
                column=column, values=shown, example=found[1], negative=found[0]
            )
        )

    def column_values(self, spec: Observed, series: pd.Series, column: str) -> np.ndarray:
        """0/1 values: the column itself, or 1 where it holds the positive label."""
        labels = _spec(spec).levels
        if labels is None:
            return super().column_values(spec, series, column)
        lookup = {labels[0]: 0.0, labels[1]: 1.0}
        raw = series.to_numpy(dtype=object)
        keys = pd.Series(raw, dtype=object).map(level_key)
        codes = keys.map(lookup).to_numpy(dtype=float)
        bad = ~np.isfinite(codes)
        if bad.any():
            i = int(np.argmax(bad))
            item = getattr(raw[i], "item", None)
            raise errors.DataError(
                NOT_A_LEVEL.format(
                    column=column,
                    levels=list(labels),
                    value=item() if callable(item) else raw[i],
                    row=row_label(series.index, i),
                )
            )
        return codes

    def frame_column(self, spec: Observed, values: np.ndarray) -> Any:
        """0/1 values as integers, or in the node's labels (a Categorical) when it has them."""
        labels = _spec(spec).levels
        codes = np.asarray(values)
        if labels is None or not np.isfinite(codes).all():
            return super().frame_column(spec, values)
        return pd.Categorical.from_codes(codes.astype(np.int64), categories=list(labels))

    def check_values(self, values: np.ndarray, column: str, index: pd.Index) -> None:
        bad = (values != 0) & (values != 1)
        if bad.any():
            i = int(np.argmax(bad))
            raise errors.DataError(
                errors.BERNOULLI_NOT_BINARY.format(
                    column=column, value=float(values[i]), row=row_label(index, i)
                )
            )

    def coefficient_scale(self, values: np.ndarray) -> float:
        p = float(np.clip(values.mean(), 0.05, 0.95))
        return float(1.0 / np.sqrt(max(values.shape[0], 1) * p * (1.0 - p)))

    def check_statistics(self, spec: Observed) -> dict[str, Statistic]:
        labels = _spec(spec).levels
        if labels is None:
            return {"mean": mean_statistic, "share of 0": share_statistic(0)}
        return {f"share of {labels[1]}": mean_statistic,
                f"share of {labels[0]}": share_statistic(0)}

    def mean(self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray) -> np.ndarray:
        return np.asarray(expit(eta))

    def draw(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, rng: RandomSource
    ) -> np.ndarray:
        return rng.binomial(1, expit(eta)).astype(float)

    def cdf_interval(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, y: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        below_one = np.asarray(expit(-eta))  # F(0) = 1 - p, exact in the tail p -> 1
        one = y >= 1
        lower = np.where(one, below_one, 0.0)
        upper = np.where(one, 1.0, below_one)
        return lower, upper

    def quantile(
        self, eq: NodeEquation, params: ParamDraws, eta: np.ndarray, u: np.ndarray
    ) -> np.ndarray:
        return (u > expit(-eta)).astype(float)

    def log_likelihood(self, y: np.ndarray, eta: np.ndarray, *args: np.ndarray) -> np.ndarray:
        return y * eta - np.logaddexp(0.0, eta)

    def derivatives(
        self, y: np.ndarray, eta: np.ndarray, *args: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        p = expit(eta)
        return y - p, -p * (1.0 - p)
