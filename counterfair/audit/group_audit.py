"""One group audit: the data and the settings given once, the measures as methods.

In the manner of fairlearn's ``MetricFrame``, :class:`GroupAudit` takes the outcomes, the
predictions and the protected attributes with the settings every group measure shares
(the task, the groups, the reference groups, the intervals), checks them once when it is
made, and answers each measure as a method:

* :meth:`GroupAudit.metrics` -- per-group measures, disparities to a reference group and
  (classification) parity verdicts: a :class:`~counterfair.audit.classification.GroupReport`
  or, for ``task=Regression()``, a :class:`~counterfair.audit.regression.RegressionReport`;
* :meth:`GroupAudit.disparate_impact` -- favourable-rate ratio of one group to its
  reference, in percent (:class:`~counterfair.audit.impact.DisparateImpact`);
* :meth:`GroupAudit.two_group` -- statistical parity and equal opportunity differences
  and disparate impact against the reference (privileged) group;
* :meth:`GroupAudit.class_balance` -- mean score per group among actual positives and
  among actual negatives.

The same object is what :func:`~counterfair.audit.write_report` reports. The task is a
settings object: :class:`Classification` carries the options only classification has
(the score threshold, the parity threshold ``tau``, the group size from which the report
judges a group), :class:`Regression` has none.

Rows in Dask collections go through the same object: :meth:`GroupAudit.metrics` hands
such rows to :mod:`counterfair.dask.group_audits` (loaded when they arrive), which gives
the report of the same rows in memory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from counterfair.rows import dispatch

from ._findings import MIN_GROUP_ROWS
from ._groups import GroupLayout, Intersections, Protected, build_layout, protected_frame
from ._validation import (
    NO_PREDICTORS,
    UNKNOWN_ATTRIBUTE,
    as_binary,
    as_numeric,
    check_count,
    check_finite,
    check_lengths,
    check_open_unit,
    check_tau,
)
from .balance import _class_balance
from .bootstrap import Seed, resolve_ci_method
from .classification import GroupReport, binary_decisions, rows_report
from .impact import DisparateImpact, _disparate_impact
from .poisson_bootstrap import check_row_ids
from .regression import RegressionReport
from .regression import rows_report as regression_rows_report
from .two_groups import _two_group_measures

OPERATION = "GroupAudit.metrics"
"""Name under which a rows plug-in (Dask) registers its :meth:`GroupAudit.metrics`."""

NOT_A_TASK = (
    "task must be Classification(...) or Regression() (from counterfair.audit.group_audit), "
    "not {value!r}"
)
SEVERAL_PREDICTORS = (
    "this audit holds the predictors {names}; choose one with audit.predictor(name)"
)
UNKNOWN_PREDICTOR = "no predictor {name!r} in this audit; predictors: {names}"
CLASSIFICATION_ONLY = "{measure} is a classification measure; this audit's task is Regression()"
WHICH_ATTRIBUTE = (
    "this audit has the attributes {available}; name the one to compare with attribute="
)
NO_PRIVILEGED = (
    "two_group() compares with the reference (privileged) group of {attribute!r}: pass "
    "reference= or give the audit reference={{{attribute!r}: ...}}"
)
NO_OUTCOMES = (
    "this measure needs the actual outcomes: the audit was made with y_true=None "
    "(decisions alone answer only disparate_impact())"
)
ONLY_EXACT_BOOTSTRAP = (
    "class_balance() has only the exact bootstrap; this audit's ci_method is {method!r}"
)


@dataclass(frozen=True)
class Classification:
    """Binary outcomes and decisions (or scores), judged by parity.

    Parameters
    ----------
    threshold
        Scores (predictions that are not all 0/1) become decisions ``score >=
        threshold``.
    tau
        Parity threshold in (0, 1]: a group passes when ``tau <= ratio <= 1 / tau`` (the
        four-fifths rule for 0.8); disparate impact is flagged at or below it; the report
        opens at it.
    min_group_rows
        The report marks a group with fewer rows (or whose reference group has fewer)
        ``"too few rows"`` instead of pass or FAIL (default :data:`MIN_GROUP_ROWS`, 30;
        0 judges every group).
    """

    threshold: float = 0.5
    tau: float = 0.8
    min_group_rows: int = MIN_GROUP_ROWS

    def __post_init__(self) -> None:
        object.__setattr__(self, "threshold", check_finite(self.threshold, "threshold"))
        object.__setattr__(self, "tau", check_tau(self.tau))
        object.__setattr__(self, "min_group_rows",
                           check_count(self.min_group_rows, "min_group_rows"))


@dataclass(frozen=True)
class Regression:
    """Real outcomes and predictions: group means, residuals and RMSE (no verdicts)."""


def _deferred(arguments: tuple[Any, ...]) -> bool:
    """Whether a rows plug-in (Dask) takes these inputs: they are not checked in memory."""
    return dispatch.handler_for(OPERATION, arguments) is not None


@dataclass(frozen=True, eq=False)
class GroupAudit:
    """The group audit of one or more predictors: data and settings once, measures as
    methods.

    ``GroupAudit(y_true, y_pred, attributes).metrics()`` is the per-group report;
    ``write_report(path, GroupAudit(...))`` the HTML report of the same audit.

    Parameters
    ----------
    y_true
        Actual outcomes: binary labels (0/1 or booleans) for :class:`Classification`,
        real values for :class:`Regression`; ``None`` for an audit of decisions alone,
        which answers only :meth:`disparate_impact`.
    y_pred
        Predictions: decisions (0/1 or booleans) or scores for classification, real
        values for regression; or a mapping predictor name -> predictions. An audit of
        several predictors shares one set of rows and one set of settings, which is what
        the report of several predictors needs (one page, one tau, the same groups);
        its measures are asked of one predictor at a time, :meth:`predictor`.
    attributes
        Protected attributes: a DataFrame (one column per attribute), a named Series or
        a mapping name -> values (a 1-D array is one attribute named ``"protected"``).
        Categorical dtypes keep their category order.
    task
        :class:`Classification` (default; its score threshold, ``tau`` and
        ``min_group_rows``) or :class:`Regression`.
    intersections
        ``True`` (default) adds the intersection of all attributes when there are at
        least two (``"race x sex"``); ``False`` adds none; a sequence of attribute-name
        sequences adds exactly those.
    reference
        Reference group per attribute (``{"race": "White"}``; an intersection as
        ``"White x Male"`` or a tuple). Attributes not given use their first group in
        order (:data:`~counterfair.audit._groups.REFERENCE_RULE`; pass
        ``reference=reference_levels(fit)`` for a fitted SCM's reference levels); the
        report uses the largest group instead
        (:data:`~counterfair.audit.report.REPORT_REFERENCE_RULE`).
    n_bootstrap
        Bootstrap resamples for intervals (0: none), stratified by all protected
        attributes crossed.
    interval
        Level of the intervals.
    seed
        Seed of the bootstrap (exact or Poisson).
    ci_method
        ``"auto"`` (default): no intervals when ``n_bootstrap == 0``, else the exact
        bootstrap up to 100,000 rows
        (:data:`~counterfair.audit.bootstrap.EXACT_BOOTSTRAP_MAX_ROWS`) and the chunked
        Poisson bootstrap above, whose memory is O(groups x resamples) whatever the
        number of rows. ``"bootstrap"``: the exact stratified bootstrap. ``"poisson"``:
        the chunked Poisson bootstrap (:mod:`~counterfair.audit.poisson_bootstrap`; the
        same numbers for any chunk size, ``cf.set_options(chunk_bytes=...)``).
        ``"analytic"``: Wilson score intervals for rates, log-scale delta-method
        intervals for their ratios, delta-method intervals for differences and the
        share of positive decisions (:mod:`~counterfair.audit.analytic`), normal
        intervals for regression means; one pass over the rows, no ``n_bootstrap``.
        For millions of rows ``"analytic"`` is the fast choice.

    Raises
    ------
    ValueError
        On mismatched lengths, non-binary ``y_true`` for classification, missing
        values, an unknown reference attribute or group, an unused category, an
        unknown ``ci_method`` or an option the chosen method would ignore
        (``n_bootstrap`` or ``seed`` with ``"analytic"``), an empty mapping of
        predictors. Rows in Dask collections are checked partition by partition when
        :meth:`metrics` runs.
    TypeError
        If ``task`` is not a :class:`Classification` or :class:`Regression`.
    """

    y_true: ArrayLike | None
    y_pred: Mapping[str, ArrayLike] | ArrayLike
    attributes: Protected
    _: KW_ONLY
    task: Classification | Regression = dataclasses.field(default_factory=Classification)
    intersections: Intersections = True
    reference: Mapping[str, Hashable] | None = None
    n_bootstrap: int = 0
    interval: float = 0.95
    seed: Seed = 0
    ci_method: str = "auto"

    def __post_init__(self) -> None:
        if not isinstance(self.task, Classification | Regression):
            raise TypeError(NOT_A_TASK.format(value=self.task))
        object.__setattr__(self, "n_bootstrap", check_count(self.n_bootstrap, "n_bootstrap"))
        object.__setattr__(self, "interval", check_open_unit(self.interval, "interval"))
        predictors = self.predictors
        if not predictors:
            raise ValueError(NO_PREDICTORS)
        layout: GroupLayout | None = None
        frame: pd.DataFrame | None = None
        n_rows = 0
        if not _deferred((self.y_true, *predictors.values(), self.attributes)):
            first = "y_true" if self.y_true is not None else "y_pred"
            n_rows = -1 if self.y_true is None else self._outcomes().size
            for predictions in predictors.values():
                scores = as_numeric(predictions, "y_pred")
                n_rows = scores.size if n_rows < 0 else n_rows
                check_lengths([(first, n_rows), ("y_pred", scores.size)])
            frame = protected_frame(self.attributes)
            check_lengths([(first, n_rows), ("protected", len(frame))])
            layout = build_layout(frame, self.intersections)
            layout.reference_rows(self.reference)  # refuses an unknown attribute or group
        resolve_ci_method(self.ci_method, n_bootstrap=self.n_bootstrap, n_rows=n_rows,
                          seed=self.seed)
        object.__setattr__(self, "_frame", frame)
        object.__setattr__(self, "_layout", layout)

    # ------------------------------------------------------------------ the data
    @property
    def classification(self) -> bool:
        """Whether the task is :class:`Classification`."""
        return isinstance(self.task, Classification)

    @property
    def predictors(self) -> dict[str, ArrayLike]:
        """Predictor name -> predictions (one array given alone is ``"prediction"``)."""
        if isinstance(self.y_pred, Mapping):
            return {str(k): v for k, v in self.y_pred.items()}
        return {"prediction": self.y_pred}

    def predictor(self, name: str) -> GroupAudit:
        """The audit of one predictor of a mapping ``y_pred``, with the same settings."""
        predictors = self.predictors
        if name not in predictors:
            raise KeyError(UNKNOWN_PREDICTOR.format(name=name, names=list(predictors)))
        return dataclasses.replace(self, y_pred=predictors[name])

    @property
    def frame(self) -> pd.DataFrame:
        """The protected attributes as a DataFrame (string column names, index 0..n-1)."""
        frame: pd.DataFrame | None = getattr(self, "_frame", None)
        if frame is None:
            raise ValueError("the attributes of rows in Dask collections are not in memory")
        return frame

    @property
    def layout(self) -> GroupLayout:
        """The groups: every attribute and intersection, their codes and labels."""
        layout: GroupLayout | None = getattr(self, "_layout", None)
        if layout is None:
            raise ValueError("the groups of rows in Dask collections are not in memory")
        return layout

    def _outcomes(self) -> np.ndarray:
        if self.y_true is None:
            raise ValueError(NO_OUTCOMES)
        if self.classification:
            return as_binary(self.y_true, "y_true")
        return as_numeric(self.y_true, "y_true")

    def _one(self) -> ArrayLike:
        """The predictions of a single-predictor audit."""
        predictors = self.predictors
        if len(predictors) != 1:
            raise ValueError(SEVERAL_PREDICTORS.format(names=list(predictors)))
        return next(iter(predictors.values()))

    def _classification_task(self, measure: str) -> Classification:
        if not isinstance(self.task, Classification):
            raise ValueError(CLASSIFICATION_ONLY.format(measure=measure))
        return self.task

    def _decisions(self) -> np.ndarray:
        task = self._classification_task("this measure")
        return binary_decisions(as_numeric(self._one(), "y_pred"), task.threshold)

    def _column(self, attribute: str | None) -> tuple[str, pd.Series]:
        """One protected attribute (the only one when ``attribute`` is None)."""
        columns = list(self.frame.columns)
        if attribute is None:
            if len(columns) != 1:
                raise ValueError(WHICH_ATTRIBUTE.format(available=columns))
            attribute = columns[0]
        if attribute not in columns:
            raise ValueError(UNKNOWN_ATTRIBUTE.format(name="attribute", attribute=attribute,
                                                      available=columns))
        return attribute, self.frame[attribute]

    # ------------------------------------------------------------------ the measures
    def metrics(self, *, row_ids: ArrayLike | None = None) -> GroupReport | RegressionReport:
        """Per-group measures, disparities to the reference groups and, for
        classification, parity verdicts.

        Parameters
        ----------
        row_ids
            Distinct non-negative integer id per row, only with ``ci_method="poisson"``:
            the draws are then keyed by id instead of row position, so the intervals do
            not depend on the order of the rows either.

        Returns
        -------
        GroupReport or RegressionReport
            Tables indexed by ``(attribute, group)``:
            :class:`~counterfair.audit.classification.GroupReport` for
            :class:`Classification` (counts, rates, ratios, differences, verdicts),
            :class:`~counterfair.audit.regression.RegressionReport` for
            :class:`Regression`.

        Raises
        ------
        ValueError
            For a mapping of several predictors (choose one with :meth:`predictor`), or
            ``row_ids`` without ``ci_method="poisson"``.
        """
        predictions = self._one()
        arguments = (self.y_true, predictions, self.attributes)
        if (handler := dispatch.handler_for(OPERATION, arguments)) is not None:
            result: GroupReport | RegressionReport = handler(self, row_ids=row_ids)
            return result
        y = self._outcomes()
        scores = as_numeric(predictions, "y_pred")
        layout = self.layout
        method = resolve_ci_method(self.ci_method, n_bootstrap=self.n_bootstrap,
                                   n_rows=y.size, row_ids_given=row_ids is not None,
                                   seed=self.seed)
        keys = None if row_ids is None else check_row_ids(row_ids, y.size)
        if isinstance(self.task, Classification):
            return rows_report(
                y, binary_decisions(scores, self.task.threshold), layout,
                reference=self.reference, tau=self.task.tau, threshold=self.task.threshold,
                n_bootstrap=self.n_bootstrap, interval=self.interval, seed=self.seed,
                method=method, keys=keys)
        return regression_rows_report(
            y, scores, layout, reference=self.reference, n_bootstrap=self.n_bootstrap,
            interval=self.interval, seed=self.seed, method=method, keys=keys)

    def disparate_impact(self, protected_group: Hashable, *, attribute: str | None = None,
                         reference: Hashable | None = None,
                         favourable: int = 1) -> DisparateImpact:
        """Favourable rate of ``protected_group`` over that of its reference, in percent.

        Flagged when at or below ``100 * tau`` (the task's ``tau``): a ratio of exactly
        80 % already counts as disparate impact at ``tau = 0.8``, as in IBM Watson
        OpenScale's fairness monitor and in Cesaro's definition.

        Parameters
        ----------
        protected_group
            Group whose treatment is examined.
        attribute
            Attribute of the group (needed when the audit has several).
        reference
            Group compared against; default: the audit's reference of ``attribute``,
            else the first group in order other than ``protected_group``.
        favourable
            Which decision (1 or 0) is favourable.

        Returns
        -------
        DisparateImpact
            With an interval on the ratio by the audit's ``ci_method`` (stratified by
            group) when it has one.
        """
        task = self._classification_task("disparate_impact()")
        decisions = self._decisions()
        name, values = self._column(attribute)
        if reference is None:
            reference = dict(self.reference or {}).get(name)
        return _disparate_impact(
            decisions, values, protected_group=protected_group, reference=reference,
            favourable=favourable, threshold_percent=100.0 * task.tau,
            n_bootstrap=self.n_bootstrap, interval=self.interval, seed=self.seed,
            ci_method=self.ci_method)

    def two_group(self, *, attribute: str | None = None,
                  reference: Hashable | None = None) -> pd.DataFrame:
        """Statistical parity difference, equal opportunity difference and disparate
        impact of everyone else against the reference (privileged) group.

        With ``A = 1`` the reference group and ``A = 0`` every other row: ``P(Y^ = 1 | A
        = 0) - P(Y^ = 1 | A = 1)``, ``TPR(A = 0) - TPR(A = 1)`` and ``P(Y^ = 1 | A = 0)
        / P(Y^ = 1 | A = 1)``, unfair when ``<= tau`` (the task's ``tau``). Negative
        differences and ratios below 1 favour the reference group.

        Parameters
        ----------
        attribute
            The attribute (needed when the audit has several).
        reference
            The privileged group; default: the audit's reference of ``attribute``.

        Returns
        -------
        pandas.DataFrame
            Rows :data:`~counterfair.audit.two_groups.TWO_GROUP_MEASURES`, columns
            ``estimate, lower, upper`` (the audit's ``ci_method``; NaN without
            intervals) and ``unfair`` (disparate impact only; ``<NA>`` elsewhere or when
            undefined).
        """
        task = self._classification_task("two_group()")
        decisions = self._decisions()
        name, values = self._column(attribute)
        if reference is None:
            reference = dict(self.reference or {}).get(name)
            if reference is None:
                raise ValueError(NO_PRIVILEGED.format(attribute=name))
        return _two_group_measures(
            self._outcomes(), decisions, values, privileged=reference, tau=task.tau,
            n_bootstrap=self.n_bootstrap, interval=self.interval, seed=self.seed,
            ci_method=self.ci_method)

    def class_balance(self) -> pd.DataFrame:
        """Mean score of each group among actual positives and among actual negatives
        (Kleinberg, Mullainathan and Raghavan 2017); the predictions are the scores.

        Returns
        -------
        pandas.DataFrame
            Indexed by ``(attribute, group)``; columns ``balance_positive``,
            ``balance_negative``, their differences to the reference group
            (``*_difference``) and, with ``n_bootstrap``, ``*_lower`` / ``*_upper`` for
            all four (exact stratified bootstrap). A group without positives
            (negatives) has NaN for that class.
        """
        self._classification_task("class_balance()")
        if self.ci_method not in ("auto", "bootstrap"):
            raise ValueError(ONLY_EXACT_BOOTSTRAP.format(method=self.ci_method))
        return _class_balance(
            self._outcomes(), self._one(), self.frame, intersections=self.intersections,
            reference=self.reference, n_bootstrap=self.n_bootstrap, interval=self.interval,
            seed=self.seed)


__all__ = ["Classification", "GroupAudit", "Regression"]
