"""The group audits of rows held in Dask collections, without collecting the rows.

:meth:`counterfair.audit.GroupAudit.metrics` hands its audit here when any of
``y_true``, ``y_pred`` and ``attributes`` is a Dask collection (a ``dask.dataframe``
Series or DataFrame). Every report of these audits is a function of per-stratum sums
(a stratum is one combination of the protected values), so the run makes two passes over
the partitions:

1. each partition is validated and gives its distinct protected cells (and, for
   classification, whether its scores are all 0/1); the client builds the group layout
   from the union of the cells (:class:`~counterfair.audit._groups.CellCoder`), which is
   the layout the whole frame would get;
2. each partition gives its per-stratum sums and, for the Poisson bootstrap, its
   replicate sums, with draws keyed by the rows' global positions; the sums merge
   pairwise on the workers and the client receives one small object.

The report equals the in-memory report of the same rows: counts exactly, sums to
rounding (about 1e-12 relative), for any partitioning. The exact bootstrap resamples
rows: on a Dask frame of up to
:data:`~counterfair.audit.bootstrap.EXACT_BOOTSTRAP_MAX_ROWS` rows those rows are
collected and audited in memory; above, it is refused (``"poisson"`` and
``"analytic"`` give intervals at any size). Inputs that are not Dask collections
(the NumPy predictions of ``FairLearner.predict(ddf)``, say) are cut at the partition
boundaries of the Dask inputs. Dask is imported only when a Dask input arrives.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from counterfair.audit._groups import (
    CellCoder,
    Intersections,
    protected_frame,
    stratum_sums,
)
from counterfair.audit._validation import (
    as_binary,
    as_numeric,
    check_lengths,
    is_binary,
)
from counterfair.audit.bootstrap import EXACT_BOOTSTRAP_MAX_ROWS, Seed, resolve_ci_method
from counterfair.audit.classification import (
    GroupReport,
    classification_weights,
    group_report,
)
from counterfair.audit.group_audit import OPERATION, Classification, GroupAudit, Regression
from counterfair.audit.poisson_bootstrap import PoissonAccumulator, accumulate, seed_word
from counterfair.audit.regression import (
    N_POINT_SUMS,
    RegressionReport,
    regression_report,
    regression_weights,
)
from counterfair.dask.partitions import IN_PARTITION, compute, merge_tree, partitions
from counterfair.rows import dispatch

NO_ROW_IDS = (
    "row_ids= cannot be used with Dask inputs: the Poisson bootstrap keys each row's "
    "draws by its global position, which does not depend on the partitioning"
)
EXACT_TOO_LARGE = (
    "ci_method='bootstrap' resamples the rows in memory; these Dask inputs hold {n:,} rows "
    "(more than {limit:,}): use ci_method='poisson' or 'analytic', which merge sums "
    "partition by partition"
)


def is_dask_collection(value: object) -> bool:
    """Whether ``value`` is a Dask collection (checked without importing dask)."""
    module = type(value).__module__ or ""
    return module.split(".")[0] == "dask" and hasattr(value, "to_delayed") and hasattr(
        value, "npartitions")


def has_dask_input(arguments: object) -> bool:
    """Whether any item of the tuple ``arguments`` is a Dask collection."""
    return isinstance(arguments, tuple) and any(is_dask_collection(a) for a in arguments)


# ---------------------------------------------------------------------- partitions
Y_TRUE = "__counterfair_y_true__"
Y_PRED = "__counterfair_y_pred__"


@dataclass(frozen=True)
class _Inputs:
    """The inputs cut into the same partitions.

    The Dask inputs are joined into one frame (columns :data:`Y_TRUE`, :data:`Y_PRED` and
    the protected attributes), so that they are cut alike: Dask may fuse the partitions of
    a frame of few columns when it reads them, and two columns computed on their own could
    be cut differently. In-memory inputs are sliced at the resulting boundaries.
    """

    parts: list[Any]
    y: list[Any] | None
    pred: list[Any] | None
    protected: list[Any] | None
    protected_columns: list[str]
    starts: np.ndarray
    n_rows: int


def _slices(value: Any, name: str, starts: np.ndarray, n_rows: int) -> list[Any]:
    length = len(value)
    if length != n_rows:
        raise ValueError(f"{name} has {length:,} rows but the Dask inputs have {n_rows:,}")
    ends = [*starts[1:], n_rows]
    if isinstance(value, pd.DataFrame | pd.Series):
        return [value.iloc[int(a):int(b)] for a, b in zip(starts, ends, strict=True)]
    if isinstance(value, Mapping):
        return [{k: np.asarray(v)[int(a):int(b)] for k, v in value.items()}
                for a, b in zip(starts, ends, strict=True)]
    array = np.asarray(value)
    return [array[int(a):int(b)] for a, b in zip(starts, ends, strict=True)]


def _joined(y_true: Any, y_pred: Any, protected: Any) -> tuple[Any, list[str]]:
    """One Dask frame of the Dask inputs, and the names of its protected columns."""
    frame = None
    columns: list[str] = []
    if is_dask_collection(protected):
        if protected.ndim == 1:  # a Series: one attribute
            name = "protected" if protected.name is None else str(protected.name)
            protected = protected.to_frame(name=name)
        columns = [str(c) for c in protected.columns]
        frame = protected.rename(columns=dict(zip(protected.columns, columns, strict=True)))
    for name, value in ((Y_TRUE, y_true), (Y_PRED, y_pred)):
        if not is_dask_collection(value):
            continue
        if value.ndim != 1:
            raise ValueError(f"{'y_true' if name == Y_TRUE else 'y_pred'} must be one column "
                             "(a Dask Series), not a frame")
        if frame is None:
            frame = value.to_frame(name=name)
            continue
        if value.npartitions != frame.npartitions:
            raise ValueError(
                f"{'y_true' if name == Y_TRUE else 'y_pred'} has {value.npartitions} "
                f"partitions but the other Dask inputs have {frame.npartitions}; give them "
                "the same partitions (columns of one frame do)")
        frame = frame.assign(**{name: value})
    return frame, columns


def _inputs(y_true: Any, y_pred: Any, protected: Any) -> _Inputs:
    frame, columns = _joined(y_true, y_pred, protected)
    whole = partitions(frame)
    cut = {name: None if is_dask_collection(v) else _slices(v, name, whole.starts, whole.n_rows)
           for name, v in (("y_true", y_true), ("y_pred", y_pred), ("protected", protected))}
    return _Inputs(whole.parts, cut["y_true"], cut["y_pred"], cut["protected"], columns,
                   whole.starts, whole.n_rows)


def _in_partition(task: Callable[..., Any]) -> Callable[..., Any]:
    """Run a partition's task on its three inputs; its errors name the partition."""

    def run(number: int, start: int, part: pd.DataFrame, y: Any, pred: Any, protected: Any,
            protected_columns: list[str], **options: Any) -> Any:
        y = part[Y_TRUE] if y is None else y
        pred = part[Y_PRED] if pred is None else pred
        protected = part[protected_columns] if protected is None else protected
        try:
            return task(y, pred, protected, start=start, **options)
        except (ValueError, TypeError) as error:
            raise type(error)(IN_PARTITION.format(
                number=number, first=start, last=start + len(part) - 1, message=error)
            ) from error

    run.__name__ = task.__name__
    return run


def _over_partitions(inputs: _Inputs, task: Callable[..., Any], *,
                     merge: Callable[[Any, Any], Any] | None = None, **options: Any) -> Any:
    import dask

    run = _in_partition(task)
    n = len(inputs.parts)
    pieces = [[None] * n if v is None else v for v in (inputs.y, inputs.pred, inputs.protected)]
    tasks = [
        dask.delayed(run, pure=True)(number, int(start), part, y, pred, prot,
                                     inputs.protected_columns, **options)
        for number, (part, y, pred, prot, start) in enumerate(
            zip(inputs.parts, *pieces, inputs.starts, strict=True))
    ]
    final = merge_tree(tasks, merge) if merge is not None else tasks
    return compute(final)


# ---------------------------------------------------------------------- the two passes
def _values(y: Any, pred: Any, protected: Any, *, kind: str,
            ) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """A partition's outcomes, predictions (scores) and protected frame, validated as the
    in-memory audit validates them."""
    outcome = as_binary(y, "y_true") if kind == "classification" else as_numeric(y, "y_true")
    scores = as_numeric(pred, "y_pred")
    check_lengths([("y_true", outcome.size), ("y_pred", scores.size)])
    return outcome, scores, protected_frame(protected, outcome.size)


def _survey(y: Any, pred: Any, protected: Any, *, start: int, kind: str
            ) -> tuple[pd.DataFrame, bool]:
    """Pass 1: the partition's distinct protected cells and whether its scores are 0/1."""
    _, scores, frame = _values(y, pred, protected, kind=kind)
    return frame.drop_duplicates(), is_binary(scores)


@dataclass
class StratumSums:
    """Mergeable per-stratum sums of one or more partitions (and Poisson replicates)."""

    sums: np.ndarray
    accumulator: PoissonAccumulator | None

    def merge(self, other: StratumSums) -> StratumSums:
        """The sums of both (a new object; neither input changes)."""
        accumulator = None
        if self.accumulator is not None and other.accumulator is not None:
            accumulator = copy.deepcopy(self.accumulator).merge(other.accumulator)
        return StratumSums(self.sums + other.sums, accumulator)


def _merge(a: StratumSums, b: StratumSums) -> StratumSums:
    return a.merge(b)


def _sums(y: Any, pred: Any, protected: Any, *, start: int, kind: str, coder: CellCoder,
          decisions: Callable[[np.ndarray], np.ndarray] | None, n_bootstrap: int,
          seed: int) -> StratumSums:
    """Pass 2: the partition's per-stratum sums, and its Poisson replicate sums keyed by
    the rows' global positions."""
    outcome, scores, frame = _values(y, pred, protected, kind=kind)
    strata = coder.strata(frame, "the rows")
    if kind == "classification":
        weights = classification_weights(outcome, decisions(scores) if decisions else scores)
        point = weights
    else:
        weights = regression_weights(outcome, scores)
        point = weights[:, :N_POINT_SUMS]
    n_strata = coder.combined.size
    sums = stratum_sums(strata, weights, n_strata)
    accumulator = None
    if n_bootstrap:
        keys = np.arange(start, start + strata.size, dtype=np.uint64)
        accumulator = accumulate(strata, point, n_strata=n_strata, n_replicates=n_bootstrap,
                                 seed=seed, keys=keys)
    return StratumSums(sums, accumulator)


def _layout_and_sums(inputs: _Inputs, *, kind: str, intersections: Intersections,
                     method: str | None, n_bootstrap: int, seed: Seed, threshold: float | None,
                     ) -> tuple[CellCoder, StratumSums]:
    surveys = _over_partitions(inputs, _survey, kind=kind)
    cells = pd.concat([c for c, _ in surveys], ignore_index=True).drop_duplicates()
    binary = all(b for _, b in surveys)
    coder = CellCoder.of(cells, intersections)
    decisions = None
    if kind == "classification" and not binary:
        cut = float(threshold)  # type: ignore[arg-type]

        def decide(scores: np.ndarray) -> np.ndarray:
            return (scores >= cut).astype(np.float64)

        decisions = decide
    poisson = method == "poisson"
    total = _over_partitions(
        inputs, _sums, merge=_merge, kind=kind, coder=coder, decisions=decisions,
        n_bootstrap=n_bootstrap if poisson else 0, seed=seed_word(seed) if poisson else 0)
    return coder, total


def _collected(value: Any) -> Any:
    return value.compute() if is_dask_collection(value) else value


def _check_method(ci_method: str, *, n_bootstrap: int, n_rows: int, row_ids: Any,
                  seed: Seed) -> str | None:
    if row_ids is not None:
        raise ValueError(NO_ROW_IDS)
    method = resolve_ci_method(ci_method, n_bootstrap=n_bootstrap, n_rows=n_rows, seed=seed)
    if method == "bootstrap" and n_rows > EXACT_BOOTSTRAP_MAX_ROWS:
        raise ValueError(EXACT_TOO_LARGE.format(n=n_rows, limit=EXACT_BOOTSTRAP_MAX_ROWS))
    return method


# ---------------------------------------------------------------------- the audits
def _single(audit: GroupAudit) -> Any:
    predictions = audit.predictors
    if len(predictions) != 1:
        raise ValueError(f"this audit holds the predictors {list(predictions)}; choose one "
                         "with audit.predictor(name)")
    return next(iter(predictions.values()))


def _in_memory(audit: GroupAudit, y_pred: Any) -> GroupAudit:
    """The same audit of the rows collected (the exact bootstrap resamples rows)."""
    return dataclasses.replace(
        audit, y_true=_collected(audit.y_true), y_pred=_collected(y_pred),
        attributes=_collected(audit.attributes), ci_method="bootstrap")


def dask_group_metrics(audit: GroupAudit, *, row_ids: Any = None) -> GroupReport:
    """:meth:`counterfair.audit.GroupAudit.metrics` of a classification audit whose rows
    are in Dask collections (see the module's description); the same report."""
    task = audit.task
    if not isinstance(task, Classification):
        raise ValueError("dask_group_metrics() needs an audit with task=Classification()")
    y_pred = _single(audit)
    inputs = _inputs(audit.y_true, y_pred, audit.attributes)
    method = _check_method(audit.ci_method, n_bootstrap=audit.n_bootstrap,
                           n_rows=inputs.n_rows, row_ids=row_ids, seed=audit.seed)
    if method == "bootstrap":
        report = _in_memory(audit, y_pred).metrics()
        assert isinstance(report, GroupReport)
        return report
    coder, total = _layout_and_sums(
        inputs, kind="classification", intersections=audit.intersections, method=method,
        n_bootstrap=audit.n_bootstrap, seed=audit.seed, threshold=task.threshold)
    return group_report(
        coder.layout, total.sums, reference=audit.reference, tau=task.tau,
        threshold=task.threshold, interval=audit.interval, n_bootstrap=audit.n_bootstrap,
        method=method, accumulator=total.accumulator)


def dask_regression_metrics(audit: GroupAudit, *, row_ids: Any = None) -> RegressionReport:
    """:meth:`counterfair.audit.GroupAudit.metrics` of a regression audit whose rows are
    in Dask collections (see the module's description); the same report."""
    if not isinstance(audit.task, Regression):
        raise ValueError("dask_regression_metrics() needs an audit with task=Regression()")
    y_pred = _single(audit)
    inputs = _inputs(audit.y_true, y_pred, audit.attributes)
    method = _check_method(audit.ci_method, n_bootstrap=audit.n_bootstrap,
                           n_rows=inputs.n_rows, row_ids=row_ids, seed=audit.seed)
    if method == "bootstrap":
        report = _in_memory(audit, y_pred).metrics()
        assert isinstance(report, RegressionReport)
        return report
    coder, total = _layout_and_sums(
        inputs, kind="regression", intersections=audit.intersections, method=method,
        n_bootstrap=audit.n_bootstrap, seed=audit.seed, threshold=None)
    return regression_report(
        coder.layout, total.sums, reference=audit.reference, interval=audit.interval,
        n_bootstrap=audit.n_bootstrap, method=method, accumulator=total.accumulator)


def dask_metrics(audit: GroupAudit, *, row_ids: Any = None) -> GroupReport | RegressionReport:
    """The handler of :meth:`counterfair.audit.GroupAudit.metrics` for Dask rows: the
    classification or the regression report, by the audit's task."""
    if isinstance(audit.task, Classification):
        return dask_group_metrics(audit, row_ids=row_ids)
    return dask_regression_metrics(audit, row_ids=row_ids)


def _register() -> None:
    dispatch.register(OPERATION, has_dask_input, dask_metrics)


_register()

__all__: Sequence[str] = [
    "StratumSums",
    "dask_group_metrics",
    "dask_metrics",
    "dask_regression_metrics",
    "has_dask_input",
    "is_dask_collection",
]
