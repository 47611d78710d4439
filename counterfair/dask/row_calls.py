"""The same row-wise calls on a ``dask.dataframe.DataFrame``, partition by partition.

Importing this module (the package does) registers handlers with
:mod:`counterfair.rows.dispatch`; it imports dask only when a Dask frame arrives, so
counterfair imports without dask. Given a Dask frame,

* ``FairLearner.predict`` / ``predict_proba`` and the baselines'
  ``predict`` / ``predict_proba`` return NumPy arrays, computed (as
  ``.compute()`` would), in the frame's row order; ``predict(ddf, rows_out=...)``
  writes them as parquet partitions instead and returns a Dask frame reading them;
* ``Fit.latents`` returns NumPy arrays ``(S, N)`` per latent;
* :func:`counterfair.counterfactual_predictions` writes its per-row-and-sample
  frame as parquet partitions to the folder ``rows_out=`` names and returns a
  Dask frame reading them;
* :func:`counterfair.audit.counterfactual_fairness` merges mergeable summaries
  (:mod:`counterfair.dask.summary`) on the workers and on the client, without
  collecting rows, and writes the per-row-and-sample changes to ``rows_out=``
  when it is given.

How a run goes: the frame's columns are checked against the fit's dtypes
(before any task is sent); the partition lengths are computed and turned into
each partition's global row positions, so that results do not depend on how
the rows are partitioned; the fitted model goes to every worker once
(``client.scatter(..., broadcast=True)``) and each task receives it by
reference. Work runs on the current ``distributed.Client`` if there is one,
else on dask's default local scheduler. A level unseen in the fit can only be
seen inside a task: the task raises :class:`~counterfair.errors.DataError` naming the
level and the partition.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.audit.causal import (
    PATH_COLUMNS,
    SUMMARY_COLUMNS,
    CheckedAudit,
    CounterfactualReport,
    audit_stream,
    report_of,
)
from counterfair.audit.streaming import ROW_COLUMNS
from counterfair.counterfactual.prediction import (
    counterfactual_predictions_chunk,
    multiclass_labels,
    response_text,
)
from counterfair.dask import parquet as dask_parquet
from counterfair.dask.partitions import fit_of, partition_starts, partitions, run_partitions
from counterfair.dask.summary import AuditSummary
from counterfair.inference.fit import Fit
from counterfair.learn.baselines import BaselinePredictor
from counterfair.learn.fair import FairLearner
from counterfair.rows import dispatch
from counterfair.rows.validated import Rows

DTYPE_MISMATCH = (
    "column {column!r} of the Dask frame has dtype {got} but the fit's data had {expected} "
    "({got_kind} vs {expected_kind}); cast it first, e.g. ddf[{column!r}].astype({hint!r})"
)
"""Error when a Dask column's dtype differs in kind from the fit's."""


NEEDS_ROWS_OUT = (
    "counterfactual_predictions on a Dask frame writes its rows x samples frame as parquet: "
    "give rows_out= a folder (it returns a Dask frame reading it)"
)
IN_MEMORY_ONLY = (
    "{name}= holds in-memory results of given rows; it cannot be used with a Dask frame"
)


def is_dask_frame(rows: object) -> bool:
    """Whether ``rows`` is a Dask DataFrame (checked without importing dask)."""
    module = type(rows).__module__ or ""
    return module.split(".")[0] == "dask" and hasattr(rows, "map_partitions") and hasattr(
        rows, "columns"
    )


# ---------------------------------------------------------------------- checks
def dtype_kind(dtype: Any) -> str:
    """The kind of a column's dtype that must agree with the fit's.

    ``"category"``, ``"string"`` (object or any string dtype: dask turns object
    columns into ``string[pyarrow]``), ``"bool"``, ``"integer"``, ``"float"``,
    or the dtype's name.
    """
    if isinstance(dtype, pd.CategoricalDtype):
        return "category"
    if pd.api.types.is_bool_dtype(dtype):
        return "bool"
    if pd.api.types.is_integer_dtype(dtype):
        return "integer"
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    if pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype):
        return "string"
    return str(dtype)


def check_dtypes(columns: Mapping[str, Any], expected: Mapping[str, Any]) -> None:
    """Every column present in both must have a dtype of the same kind.

    Raises
    ------
    DataError
        Naming the first column that differs and both dtypes.
    """
    for column, got in columns.items():
        if column not in expected:
            continue
        want = expected[column]
        if dtype_kind(got) != dtype_kind(want):
            hint = "category" if dtype_kind(want) == "category" else str(want)
            raise errors.DataError(
                DTYPE_MISMATCH.format(
                    column=column,
                    got=got,
                    expected=want,
                    got_kind=dtype_kind(got),
                    expected_kind=dtype_kind(want),
                    hint=hint,
                )
            )


def _check_frame(ddf: Any, fit: Fit | None) -> None:
    if not is_dask_frame(ddf) or not hasattr(ddf, "dtypes"):
        raise errors.DataError(f"expected a dask.dataframe.DataFrame, got {type(ddf).__name__}")
    if fit is not None:
        check_dtypes(dict(ddf.dtypes.items()), dict(fit.data.dtypes.items()))


def _check_baseline(ddf: Any, baseline: BaselinePredictor) -> None:
    _check_frame(ddf, None)
    dtypes = dict(ddf.dtypes.items())
    missing = [c for c in baseline.columns if c not in dtypes]
    if missing:
        raise errors.DataError(
            errors.MISSING_COLUMN.format(column=missing[0], columns=list(dtypes))
        )
    for column in baseline.columns:
        kind = dtype_kind(dtypes[column])
        if column not in baseline.levels_ and kind not in ("integer", "float", "bool"):
            raise errors.DataError(
                f"column {column!r} of the Dask frame has dtype {dtypes[column]} but the "
                "baseline was fitted on it as a number; cast it first"
            )


# ---------------------------------------------------------------------- prediction
def _predict_kernel(model: Any, part: pd.DataFrame, start: int, number: int, *, method: str) -> Any:
    return np.asarray(getattr(model, method)(part))


def _predict_rows_kernel(
    model: Any, part: pd.DataFrame, start: int, number: int, *, method: str, folder: str
) -> int:
    values = np.asarray(getattr(model, method)(part)) if len(part) else np.zeros(0)
    frame = pd.DataFrame(
        {
            "row": part.index.to_numpy(),
            "position": np.arange(start, start + len(part), dtype=np.int64),
            "prediction": values,
        }
    )
    dask_parquet.write_part(folder, number, frame)
    return len(frame)


def _predict_handler(method: str) -> Callable[..., Any]:
    def handler(
        model: Any,
        X: Any,
        *,
        rows_out: str | os.PathLike[str] | None = None,
        overwrite: bool = False,
    ) -> Any:
        if isinstance(model, BaselinePredictor):
            _check_baseline(X, model)
        else:
            _check_frame(X, fit_of(model))
        if rows_out is not None:
            import dask.dataframe as dd

            _, target = _write_rows(
                X, model, _predict_rows_kernel, rows_out, overwrite, None, method=method
            )
            return dd.read_parquet(str(target))
        if overwrite:
            raise ValueError("overwrite=True without rows_out= would be ignored")
        pieces = run_partitions(X, model, _predict_kernel, method=method)
        return np.concatenate(pieces, axis=0)

    handler.__name__ = f"dask_{method}"
    return handler


# ---------------------------------------------------------------------- latents
def _latents_kernel(
    fit: Fit, part: pd.DataFrame, start: int, number: int, *, options: Mapping[str, Any]
) -> dict[str, np.ndarray]:
    if len(part) == 0:
        return {}
    return fit.abduct(part, **options).latents  # positions: the fit is the task's own


def dask_latents(fit: Fit, data: Any, **options: Any) -> dict[str, np.ndarray]:
    """:meth:`Fit.latents` for a Dask frame: per latent, shape ``(S, N)`` as NumPy arrays
    (computed), the rows in the frame's order."""
    if options.get("positions") is not None:
        raise ValueError("positions= is set by the partitions of a Dask frame; drop it")
    _check_frame(data, fit)
    pieces = run_partitions(data, fit, _latents_kernel, options=options)
    return {
        name: np.concatenate([piece[name] for piece in pieces if len(piece)], axis=1)
        for name in fit.scm.latents
    }


# ---------------------------------------------------------------------- counterfactuals
def _rows_slice(value: Any, start: int, n: int) -> Any:
    if isinstance(value, str) or np.ndim(value) == 0:
        return value
    return np.asarray(value, dtype=object)[start : start + n]


def _check_do_length(do: Mapping[str, Any], n_rows: int) -> None:
    for node, value in do.items():
        if not isinstance(value, str) and np.ndim(value) > 0 and len(value) != n_rows:
            raise errors.DataError(
                errors.DO_LENGTH.format(node=node, got=len(value), expected=n_rows)
            )


def _cf_kernel(
    model: Any,
    part: pd.DataFrame,
    start: int,
    number: int,
    *,
    do: Mapping[str, Any],
    folder: str,
    options: Mapping[str, Any],
) -> int:
    fit, predictor = model
    if len(part) == 0:
        frame = pd.DataFrame()
    else:
        part_do = {k: _rows_slice(v, start, len(part)) for k, v in do.items()}
        rows = Rows.from_frame(part, np.arange(start, start + len(part), dtype=np.int64))
        frame = counterfactual_predictions_chunk(fit, rows, predictor, do=part_do, **options)
    dask_parquet.write_part(folder, number, frame)
    return len(frame)


def _write_rows(
    ddf: Any,
    model: Any,
    kernel: Callable[..., Any],
    rows_out: str | os.PathLike[str],
    overwrite: bool,
    merge: Callable[[Any, Any], Any] | None,
    **options: Any,
) -> tuple[Any, Path]:
    target = dask_parquet.check_target(rows_out, overwrite=overwrite)
    partial = dask_parquet.start(target)
    try:
        parts = partitions(ddf)
        result = run_partitions(ddf, model, kernel, merge=merge, parts=parts,
                                folder=str(partial), **options)
        dask_parquet.finish(partial, target, len(parts.parts), overwrite=overwrite)
    except BaseException:
        dask_parquet.abandon(partial)
        raise
    return result, target


def dask_counterfactual_predictions(
    fit: Fit,
    data: Any,
    predictor: Any,
    *,
    do: Mapping[str, Any],
    rows_out: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    abduction: Any = None,
    **options: Any,
) -> Any:
    """:func:`counterfair.counterfactual_predictions` for a Dask frame.

    The per-row-and-sample frame of each partition is written to the folder
    ``rows_out`` (atomically, :mod:`counterfair.dask.parquet`); returns a Dask
    frame reading it. ``abduction=`` (in-memory results of given rows) is refused;
    a per-row ``do`` value is sliced by global row position. ``options``: the other
    keywords of :func:`~counterfair.counterfactual.prediction.counterfactual_predictions_chunk`.
    """
    import dask.dataframe as dd

    if abduction is not None:
        raise ValueError(IN_MEMORY_ONLY.format(name="abduction"))
    if rows_out is None:
        raise ValueError(NEEDS_ROWS_OUT)
    _check_frame(data, fit)
    if any(not isinstance(v, str) and np.ndim(v) > 0 for v in do.values()):
        _check_do_length(do, len(data))
    _, target = _write_rows(
        data, (fit, predictor), _cf_kernel, rows_out, overwrite, None, do=dict(do), options=options
    )
    return dd.read_parquet(str(target))


# ---------------------------------------------------------------------- audit
def _audit_kernel(
    model: Any,
    part: pd.DataFrame,
    start: int,
    number: int,
    *,
    folder: str | None,
    settings: CheckedAudit,
) -> AuditSummary:
    fit, predictor = model
    attribute_rank = {a: i for i, a in enumerate(fit.scm.protected)}
    level_rank = {
        (a, level): j for a, levels in fit.encoding.levels.items() for j, level in enumerate(levels)
    }
    if len(part) == 0:
        summary, changes = AuditSummary(), pd.DataFrame()
    else:
        if settings.do is not None:  # per-row values: this partition's slice
            do = {k: _rows_slice(v, start, len(part)) for k, v in settings.do.items()}
            settings = dataclasses.replace(settings, do=do)
        # every draw of a row (abduction, the flip test's and any FairLearner's, of this
        # fit or another) is keyed by its global position, as in one in-memory audit
        positions = np.arange(start, start + len(part), dtype=np.int64)
        settings = dataclasses.replace(settings, keep_samples=folder is not None)
        stream = audit_stream(fit, part, predictor, settings, positions=positions)
        if folder is None:
            # summaries only: the partition streams chunk by chunk (memory set by the
            # chunk, not by the partition's rows x samples)
            return AuditSummary.of_stream(
                stream, attribute_rank=attribute_rank, level_rank=level_rank
            )
        changes = report_of(stream, settings, predictor).changes
        assert changes is not None  # keep_samples=True: this partition's rows x samples
        for attribute in changes["attribute"].unique():  # a do= audit's label
            attribute_rank.setdefault(attribute, -1)
        labels = dict(zip(part.index, range(start, start + len(part)), strict=True))
        summary = AuditSummary.of(
            changes,
            labels,
            attribute_rank=attribute_rank,
            level_rank=level_rank,
            tolerance=settings.tolerance,
        )
    if folder is not None:
        dask_parquet.write_part(folder, number, changes)
    return summary


def _merge_summaries(a: AuditSummary, b: AuditSummary) -> AuditSummary:
    return a.merge(b)


def dask_counterfactual_fairness(
    fit: Fit,
    data: Any,
    predictor: Any,
    settings: CheckedAudit,
    *,
    abduction: Any = None,
    rows_out: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> CounterfactualReport:
    """:func:`counterfair.audit.counterfactual_fairness` for a Dask frame, with the
    audit's settings checked once on the client
    (:meth:`~counterfair.audit.causal.AuditSettings.check`).

    Each partition is audited where it lies and reduced to an
    :class:`~counterfair.dask.summary.AuditSummary`; summaries merge pairwise on
    the workers and the client receives one. The report's ``changes`` is empty
    (its columns only) unless ``rows_out`` names a folder, where the
    per-row-and-sample changes are written as parquet partitions
    (``changes.attrs["rows_out"]`` gives the folder).
    """
    if abduction is not None:
        raise ValueError(IN_MEMORY_ONLY.format(name="abduction"))
    _check_frame(data, fit)
    do = settings.do
    if do is not None and any(not isinstance(v, str) and np.ndim(v) > 0 for v in do.values()):
        _check_do_length(do, len(data))
    model = (fit, predictor)
    if rows_out is None:
        summary = run_partitions(
            data, model, _audit_kernel, merge=_merge_summaries, folder=None, settings=settings
        )
        target = None
    else:
        summary, target = _write_rows(
            data, model, _audit_kernel, rows_out, overwrite, _merge_summaries, settings=settings
        )
    paths = settings.unfair_paths
    columns = list(SUMMARY_COLUMNS) + (list(PATH_COLUMNS) if paths is not None else [])
    by_group, overall = summary.result(columns, settings.interval, paths=paths is not None)
    if multiclass_labels(predictor, settings.response):
        by_group["wasserstein"] = np.nan
        overall["wasserstein"] = np.nan
    change_columns = [
        "attribute", "from_level", "to_level", "row", "sample", "factual", "counterfactual",
        "change", "flip_change", *(["path_specific_change"] if paths is not None else []),
    ]
    changes = pd.DataFrame(columns=change_columns)
    changes.attrs["rows_out"] = None if target is None else str(target)
    # per-row summaries stay on the workers (rows_out= writes every row and sample);
    # collecting them would bring the rows back to the client
    row_summaries = pd.DataFrame(columns=list(ROW_COLUMNS))
    row_summaries.attrs["rows_out"] = changes.attrs["rows_out"]
    return CounterfactualReport(
        by_group=by_group,
        overall=overall,
        rows=row_summaries,
        changes=changes,
        tolerance=settings.tolerance,
        interval=settings.interval,
        unfair_paths=paths,
        response=settings.response,
        compared=response_text(predictor, settings.response),
    )


def _register() -> None:
    for operation, method in (
        ("FairLearner.predict", "predict"),
        ("FairLearner.predict_proba", "predict_proba"),
        ("BaselinePredictor.predict", "predict"),
        ("BaselinePredictor.predict_proba", "predict_proba"),
    ):
        dispatch.register(operation, is_dask_frame, _predict_handler(method))
    dispatch.register("Fit.latents", is_dask_frame, dask_latents)
    dispatch.register(
        "counterfactual_predictions", is_dask_frame, dask_counterfactual_predictions
    )
    dispatch.register("counterfactual_fairness", is_dask_frame, dask_counterfactual_fairness)


_register()

__all__: Sequence[str] = [
    "check_dtypes",
    "dask_counterfactual_fairness",
    "dask_counterfactual_predictions",
    "dask_latents",
    "dtype_kind",
    "is_dask_frame",
    "partition_starts",
    "run_partitions",
]
_ = FairLearner  # the handlers stand in for its methods
