"""Counterfactual fairness of any predictor, judged with a fitted SCM.

For every protected attribute ``A``, every row and every level ``a'`` other
than the row's own, the predictor is evaluated in the factual world and in the
world of ``do(A = a')`` (abduction, action, prediction with the fitted SCM);
the change of the prediction has a posterior distribution over the joint
samples. Any other intervention -- on observed nodes (a mediator such as a
charge degree), several nodes at once, one value per row -- is audited the
same way with ``do=``. Beside it stands the naive *flip test* that production monitors run:
swap only the protected column and keep every other input as observed. A
predictor that ignores the protected column passes the flip test by
construction even when it leans on the attribute's descendants; the causal
measure shows how much the flip test misses. With ``unfair_paths=`` the report
adds the *path-specific* change (Chiappa, 2019): the prediction when only the
paths from ``A`` beginning with one of the given tuples see ``a'``
(:mod:`counterfair.counterfactual.paths`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from counterfair.counterfactual.action import (
    DEFAULT_COUPLING,
    Coupling,
    DoValue,
    check_coupling,
    counterfactual_world,
    coupled_noise,
    factual_world,
    slice_do,
)
from counterfair.counterfactual.frames import counterfactual_frame
from counterfair.counterfactual.paths import (
    PATHS_DO,
    PATHS_REDRAW,
    check_paths,
    path_source,
    path_specific_frame,
)
from counterfair.counterfactual.prediction import (
    RESPONSES,
    audited_response,
    frame_predictions,
    multiclass_labels,
    needs_both_worlds,
    predict_output,
    predict_world,
    response_text,
)
from counterfair.errors import NOT_A_DATAFRAME, DataError, SCMError
from counterfair.inference.abducted_chunks import abduct_chunks
from counterfair.inference.fit import Abduction, Fit
from counterfair.logs import progress
from counterfair.rows import dispatch
from counterfair.rows.validated import Rows

from .causal_report import CounterfactualReport, counterfactual_html
from .streaming import (
    CHANGE_COLUMNS,
    PATH_COLUMNS,
    ROW_COLUMNS,
    SUMMARY_COLUMNS,
    AuditStream,
    TargetChanges,
)

__all__ = [
    "CHANGE_COLUMNS",
    "PATH_COLUMNS",
    "ROW_COLUMNS",
    "SUMMARY_COLUMNS",
    "AuditSettings",
    "CheckedAudit",
    "CounterfactualReport",
    "audit_stream",
    "counterfactual_fairness",
    "counterfactual_html",
    "do_label",
    "report_of",
]

DEFAULT_AUDIT_SAMPLES = 50
"""Joint samples per row when ``n_samples`` is not given."""

ABDUCTION_WITH_SETTINGS = (
    "abduction= is given, so {names} would be ignored: the audit reuses the given "
    "samples; drop {names} or abduction="
)
ABDUCTION_ROWS = (
    "abduction= holds {got} rows with index {got_index}, but data has {expected} rows with "
    "index {expected_index}; abduct exactly the audited rows (fit.abduct(data, ...))"
)
DO_WITH_ATTRIBUTES = (
    "attributes= and do= both choose the interventions: give attributes= to swap protected "
    "levels, or do= for one intervention of your own, not both"
)

PATHS_ATTRIBUTES = (
    "unfair_paths start at {source!r}, but attributes= names {other!r}: a path-specific "
    "audit swaps the levels of the paths' attribute only"
)

_Target = tuple[str, str, dict[str, DoValue]]
"""One audited intervention: ``(attribute, to_level, do)``; a ``do=`` audit has its label
as both attribute and level."""


def _short(index: pd.Index) -> str:
    values = list(index[:3])
    return f"{values}{'...' if len(index) > 3 else ''}"


def _difference(
    predictor: Any, response: str, after: np.ndarray, before: np.ndarray
) -> np.ndarray:
    """``after - before``; for labels of more than two classes, 1 where they differ (as the
    causal change of :func:`counterfair.counterfactual.prediction.frame_predictions`)."""
    if multiclass_labels(predictor, response):  # type: ignore[arg-type]
        return (after != before).astype(float)
    return after - before


def do_label(do: Mapping[str, DoValue]) -> str:
    """The intervention written out: ``do(felony=1, race=Caucasian)``; per-row values elided."""
    parts = []
    for node, value in do.items():
        shown = value if isinstance(value, str) or np.ndim(value) == 0 else "<per row>"
        parts.append(f"{node}={shown}")
    return f"do({', '.join(parts)})"


def _set_columns(data: pd.DataFrame, do: Mapping[str, DoValue]) -> pd.DataFrame:
    """``data`` with the columns named in ``do`` set to its values (the flip test's input)."""
    out = data.copy()
    for node, value in do.items():
        single = isinstance(value, str) or np.ndim(value) == 0
        values: list[Any] = [value] * len(data) if single else list(np.asarray(value, dtype=object))
        column = out[node] if node in out.columns else None
        if column is not None and isinstance(column.dtype, pd.CategoricalDtype):
            out[node] = pd.Categorical(
                values, categories=column.cat.categories, ordered=column.cat.ordered
            )
        else:
            out[node] = pd.Series(values, index=out.index).infer_objects()
    return out


def _path_change(
    fit: Fit,
    data: pd.DataFrame,
    predictor: Any,
    do: Mapping[str, DoValue],
    abduction: Abduction,
    unfair_paths: Sequence[tuple[str, ...]],
    response: Literal["prediction", "probability"],
    seed: int | None,
) -> np.ndarray:
    """Per row and sample change of the prediction under the path-specific ``do``."""
    frame = path_specific_frame(fit, abduction, do, unfair_paths, seed=seed)
    result = frame_predictions(fit, frame, predictor, response=response, abduction=abduction)
    return result["change"].to_numpy()


@dataclass(frozen=True)
class _Targets:
    """The audit's interventions with, per intervention, the rows it applies to and the
    flip test's change, one value per row (arrays over the rows of one call)."""

    targets: Sequence[_Target]
    masks: Sequence[np.ndarray]
    flips: Sequence[np.ndarray]


def _audit_chunk(
    fit: Fit,
    chunk: Abduction,
    predictor: Any,
    plan: _Targets,
    settings: CheckedAudit,
    do: Mapping[str, DoValue] | None,
    stream: AuditStream,
) -> None:
    """Every target's changes on one chunk of rows, from arrays (no counterfactual frame).

    The factual world, its predictions and the noise of discrete descendants
    (``"monotone"``) are computed once for the chunk; each target then builds its
    counterfactual world on its rows and predicts it. The draws are those of
    :func:`counterfair.counterfactual.frames.counterfactual_frame` on the same rows (keyed by
    row position), so the numbers are the same. ``plan`` holds this chunk's slices and
    ``do`` the chunk's slice of a ``do=`` audit's values.
    """
    targets, masks, flips = plan.targets, plan.masks, plan.flips
    seed, coupling, response = settings.seed, settings.coupling, settings.response
    scm = fit.scm
    s, n = chunk.n_samples, len(chunk.data)
    rng = chunk.row_random(seed)
    factual = factual_world(fit, chunk, rng)
    before = predict_world(fit, predictor, factual, response).reshape(s, n)
    shared = None
    if coupling == "monotone":
        moved = [node for _, _, action in targets for node in action]
        shared = coupled_noise(scm, factual, rng, sorted(scm.descendants(moved)))
    positions = chunk.row_positions
    for t, (attribute, level, action) in enumerate(targets):
        mask = masks[t]
        if not mask.any():
            continue
        is_do = do is not None and t == 0
        if is_do:
            rows_world, rows_shared, rows_rng = factual, shared, rng
            rows_before = before
            chunk_do: Mapping[str, DoValue] = do  # type: ignore[assignment]
        else:
            rows = chunk.take_rows(mask)
            rows_world = factual.take_rows(mask, rows)
            rows_shared = None if shared is None else {k: v[:, mask] for k, v in shared.items()}
            rows_rng = rows.row_random(seed)
            rows_before = before[:, mask]
            chunk_do = action
        counter = counterfactual_world(
            fit, rows_world, chunk_do, rows_rng, coupling=coupling, shared_noise=rows_shared
        )
        after = predict_world(fit, predictor, counter, response).reshape(rows_before.shape)
        m = len(rows_world.abduction.data)
        stream.update(
            t,
            TargetChanges(
                attribute=attribute,
                to_level=level,
                from_level=(
                    np.full(m, "factual", dtype=object) if is_do
                    else fit.encoding.decode(attribute, rows_world.codes[attribute])
                ),
                rows=rows_world.abduction.data.index.to_numpy(),
                positions=positions[mask],
                factual=rows_before,
                counterfactual=after,
                change=_difference(predictor, response, after, rows_before),
                flip=flips[t][mask],
            ),
        )


def counterfactual_fairness(
    fit: Fit,
    data: pd.DataFrame,
    predictor: Any,
    *,
    settings: AuditSettings | None = None,
    abduction: Abduction | None = None,
    rows_out: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> CounterfactualReport:
    """Audit a predictor's counterfactual fairness with a fitted SCM.

    Parameters
    ----------
    fit : Fit
        Fitted SCM taken as the true world.
    data : pandas.DataFrame
        Rows to audit: the protected columns and any observed columns. Rows
        need not hold the outcome (a test set, a production payload): observed
        nodes absent from ``data`` are simulated in both worlds from the
        abducted inputs.
    predictor : estimator, pipeline or callable
        A fitted scikit-learn estimator or pipeline (given the columns named by
        its ``feature_names_in_``), a :class:`~counterfair.FairLearner` or a
        baseline, or a function of a DataFrame returning one number per row.
    settings : AuditSettings, optional
        What is audited and how: the attributes or the intervention (``do=``),
        samples, tolerance, interval, seed, response, coupling, unfair paths,
        whether the per-sample changes are kept (default: ``AuditSettings()``,
        every categorical protected attribute's levels swapped).
    abduction : Abduction, optional
        Joint samples for exactly the rows of ``data`` to reuse, e.g. one
        abduction for several predictors on the same rows. Settings that choose
        the abduction (``n_samples``, ``condition_on``) cannot come with it.
        Every draw of a row -- abduction, counterfactual noise, and the flip
        test's and the factual prediction of a predictor that abducts its inputs
        (a :class:`~counterfair.FairLearner`) -- is keyed by the seed and the
        row's position (``0..N-1``, or the positions the abduction was given:
        ``fit.abduct(rows, positions=...)``), so a subset of rows abducted at its
        global positions gets, row by row, the results of the audit of the whole
        data set (with exact abduction). A Dask frame's partitions are given theirs.
    rows_out : str or path, optional
        With a Dask DataFrame ``data`` only: a folder where the per-row-and-sample
        changes are written as parquet partitions (atomically; a non-empty folder
        is replaced only with ``overwrite=True``). A Dask frame is audited
        partition by partition and its summaries merged without collecting rows
        (:func:`counterfair.dask.row_calls.dask_counterfactual_fairness`).
    overwrite : bool
        Replace a non-empty ``rows_out``.

    Returns
    -------
    CounterfactualReport

    Notes
    -----
    The rows are audited chunk by chunk (:func:`counterfair.options.chunk_bytes`):
    exact abduction, the counterfactual predictions and the summaries run per
    chunk, so the memory of the per-sample values is set by the chunk. The
    summaries are mergeable statistics (:mod:`counterfair.audit.streaming`);
    every column is exact but ``wasserstein``, computed from a histogram sketch
    whose error is at most its bin width (at most 2 x the range of the
    predictions / 4096). Draws are keyed by the seed and each row's position, so
    the report is the same for any chunk size (sums to ~1e-15). The factual
    predictions and the flip test, one value per row, are computed on all rows,
    each row at its position: the flip test of a level swap predicts only the rows
    whose level differs, and a FairLearner abducts each of them again with the
    draws it has among all the rows (the same numbers as on a Dask frame).
    """
    checked = (AuditSettings() if settings is None else settings).check(fit, predictor)
    if (handler := dispatch.handler_for("counterfactual_fairness", data)) is not None:
        if checked.keep_samples:
            raise ValueError(
                "keep_samples=True collects rows x samples on the client; for a Dask "
                "DataFrame write them as parquet partitions with rows_out= instead"
            )
        return handler(
            fit, data, predictor, checked, abduction=abduction, rows_out=rows_out,
            overwrite=overwrite,
        )
    if rows_out is not None or overwrite:
        raise ValueError(
            "rows_out= and overwrite= are for a Dask DataFrame (parquet partitions); an "
            "in-memory audit keeps its changes in report.changes"
        )
    stream = audit_stream(fit, data, predictor, checked, abduction=abduction)
    return report_of(stream, checked, predictor)


@dataclass(frozen=True, kw_only=True)
class AuditSettings:
    """The options of one counterfactual audit (:func:`counterfactual_fairness`),
    checked when made; what needs the fit is checked once when the audit starts.

    ``cf.audit.counterfactual_fairness(fit, rows, model,
    settings=cf.audit.AuditSettings(attributes=["race"], n_samples=100))``.

    Parameters
    ----------
    attributes : sequence of str, optional
        Categorical protected attributes to intervene on (default: all of
        them). A continuous protected attribute has no levels to swap; audit it
        with ``do={name: value}``.
    do : mapping, optional
        One intervention of your own instead of the level swaps of
        ``attributes`` (giving both is an error): node -> value for every row,
        or a sequence of values, one per row, on protected attributes
        (continuous ones included) or observed nodes, as
        :meth:`Fit.counterfactual` takes it. Every row is audited, including
        rows whose factual value already equals the one set (their change is 0:
        nothing downstream moves). The report's ``attribute`` is the
        intervention written out (``do(felony=1)``); its flip test sets the
        same columns of the rows and keeps every other input as observed.
    n_samples : int, optional
        Joint samples of parameters and latents per row (default
        :data:`DEFAULT_AUDIT_SAMPLES`).
    tolerance : float
        A row counts as changed when its posterior mean |change| exceeds this.
    interval : float
        Mass of the posterior interval of the mean |change|.
    condition_on : sequence of str, optional
        Observed nodes that condition the latents (default, as everywhere: the
        latents' children present in the rows). Abduction integrates over up
        to 20 posterior parameter draws, so the intervals carry parameter
        uncertainty. ``n_samples`` and ``condition_on`` are options of the
        abduction: giving them with ``abduction=`` is an error.
    seed : int, optional
        Seed of abduction and counterfactual draws.
    response : {"prediction", "probability"}, optional
        What is compared: the probability of the positive class
        (``predict_proba``) or the predictions (labels for a classifier). By
        default a binary classifier with ``predict_proba`` (an estimator, a
        pipeline, a classifying :class:`~counterfair.FairLearner`) is audited on
        its probabilities -- labels can stay put while the probabilities move
        (a classifier predicting one label for every row changes by 0 on
        labels) -- and any other predictor on its predictions; give
        ``"prediction"`` to audit a classifier's labels. The report says which
        (:attr:`CounterfactualReport.response`). A
        :class:`~counterfair.FairLearner` of the fit (or its bound methods)
        reads its inputs from the same abducted samples in both worlds, so a
        fair learner changes by exactly 0; its flip test abducts them again
        from the flipped rows.
    coupling : {"monotone", "redraw"}
        How discrete descendants of the attribute share their noise across
        worlds (:mod:`counterfair.counterfactual.action`): abducted and reused
        (default), or drawn afresh.
    unfair_paths : list of tuple, optional
        Also report the path-specific change: node tuples ``(A, V, ...)`` from
        one protected attribute ``A``; only paths beginning with one of them
        see the new level (:mod:`counterfair.counterfactual.paths`). The audited
        attribute is then ``A`` (``attributes=`` may name only it; ``do=`` must
        set only it) and ``coupling`` must be ``"monotone"``.
    keep_samples : bool
        Also return the per-row-and-sample frame ``report.changes`` (default:
        ``None``, only the summaries and the per-row frame ``report.rows``). A
        Dask frame writes them with ``rows_out=`` instead.
    """

    attributes: Sequence[str] | None = None
    do: Mapping[str, DoValue] | None = None
    n_samples: int | None = None
    tolerance: float = 0.05
    interval: float = 0.9
    condition_on: Sequence[str] | None = None
    seed: int | None = 0
    response: Literal["prediction", "probability"] | None = None
    coupling: Coupling = DEFAULT_COUPLING
    unfair_paths: Sequence[Sequence[str]] | None = None
    keep_samples: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.interval < 1:
            raise ValueError(f"interval must be in (0, 1), got {self.interval}")
        if self.tolerance < 0:
            raise ValueError(f"tolerance must be non-negative, got {self.tolerance}")
        if self.response is not None and self.response not in RESPONSES:
            raise ValueError(f"response must be one of {RESPONSES}, got {self.response!r}")
        object.__setattr__(self, "coupling", check_coupling(self.coupling))
        if self.do is not None and self.attributes is not None:
            raise ValueError(DO_WITH_ATTRIBUTES)
        if self.do is not None and not self.do:
            raise ValueError("do= is empty: name at least one node to intervene on")
        for name in ("attributes", "condition_on"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(
                    self, name, (value,) if isinstance(value, str) else tuple(value)
                )
        if self.n_samples is not None:
            object.__setattr__(self, "n_samples", int(self.n_samples))
        if not isinstance(self.keep_samples, bool):
            raise ValueError(f"keep_samples must be True or False, got {self.keep_samples!r}")

    def check(self, fit: Fit, predictor: Any) -> CheckedAudit:
        """These settings checked against ``fit`` and ``predictor``, before any row is
        read: the attributes to swap, the unfair paths, the response compared."""
        chosen_response = audited_response(predictor, self.response)
        chosen = _chosen_attributes(fit, self.attributes, self.do)
        paths, chosen = _checked_paths(
            fit, self.unfair_paths, self.coupling, chosen, attributes=self.attributes,
            do=self.do,
        )
        _check_categorical(fit, chosen)
        return CheckedAudit(
            attributes=tuple(chosen),
            unfair_paths=paths,
            n_samples=self.n_samples,
            tolerance=self.tolerance,
            interval=self.interval,
            condition_on=None if self.condition_on is None else tuple(self.condition_on),
            seed=self.seed,
            response=chosen_response,
            do=self.do,
            coupling=self.coupling,
            keep_samples=self.keep_samples,
        )


@dataclass(frozen=True)
class CheckedAudit:
    """The settings of one counterfactual audit checked against its fit and predictor
    (what :meth:`AuditSettings.check` returns), shared by every chunk of rows and every
    Dask partition.

    ``attributes`` are the protected attributes whose levels are swapped (none for a
    ``do=`` audit; only the paths' source for a path-specific audit of levels);
    ``unfair_paths`` are the checked paths (``None`` without them); ``n_samples`` is
    ``None`` for the default (or a given abduction's own); ``response`` is the one
    compared."""

    attributes: tuple[str, ...]
    unfair_paths: tuple[tuple[str, ...], ...] | None
    n_samples: int | None
    tolerance: float
    interval: float
    condition_on: tuple[str, ...] | None
    seed: int | None
    response: Literal["prediction", "probability"]
    do: Mapping[str, DoValue] | None
    coupling: Coupling
    keep_samples: bool = False


def report_of(
    stream: AuditStream, settings: CheckedAudit, predictor: Any
) -> CounterfactualReport:
    """The report of an audit's statistics over all its rows."""
    by_group, overall, row_frame, changes = stream.result(
        multiclass_labels(predictor, settings.response)
    )
    return CounterfactualReport(
        by_group=by_group,
        overall=overall,
        rows=row_frame,
        changes=changes,
        tolerance=settings.tolerance,
        interval=settings.interval,
        unfair_paths=settings.unfair_paths,
        response=settings.response,
        compared=response_text(predictor, settings.response),
    )


def _check_rows(data: pd.DataFrame) -> None:
    """The audited rows: a DataFrame with a unique index."""
    if not isinstance(data, pd.DataFrame):
        raise DataError(NOT_A_DATAFRAME.format(type=type(data).__name__))
    if not data.index.is_unique:
        duplicated = data.index[data.index.duplicated()][0]
        raise DataError(
            f"data has a duplicated index label (row {duplicated!r}); reset_index() it first"
        )


def _chosen_attributes(
    fit: Fit, attributes: Sequence[str] | None, do: Mapping[str, DoValue] | None
) -> list[str]:
    """The protected attributes whose levels are swapped (none for a ``do=`` audit)."""
    scm = fit.scm
    if do is not None and attributes is not None:
        raise ValueError(DO_WITH_ATTRIBUTES)
    if do is not None and not do:
        raise ValueError("do= is empty: name at least one node to intervene on")
    categorical = [a for a in scm.protected if not fit.encoding.is_continuous(a)]
    chosen = [] if do is not None else list(categorical if attributes is None else attributes)
    unknown = [a for a in chosen if a not in scm.protected]
    if unknown:
        raise ValueError(
            f"attribute {unknown[0]!r} is not a protected node; protected: {list(scm.protected)}"
        )
    return chosen


def _checked_paths(
    fit: Fit,
    unfair_paths: Sequence[Sequence[str]] | None,
    coupling: Coupling,
    chosen: list[str],
    *,
    attributes: Sequence[str] | None,
    do: Mapping[str, DoValue] | None,
) -> tuple[tuple[tuple[str, ...], ...] | None, list[str]]:
    """The checked unfair paths (``None`` without them) and the attributes to swap: only
    the paths' source in a path-specific audit of levels."""
    if unfair_paths is None:
        return None, chosen
    scm = fit.scm
    if coupling != "monotone":
        raise SCMError(PATHS_REDRAW)
    source = path_source(scm, unfair_paths)
    paths = check_paths(scm, source, unfair_paths)
    other = [a for a in chosen if a != source]
    if attributes is not None and other:
        raise ValueError(PATHS_ATTRIBUTES.format(source=source, other=other[0]))
    if do is not None and list(do) != [source]:
        raise SCMError(PATHS_DO.format(nodes=list(do)))
    return paths, [source] if do is None else chosen


def _check_categorical(fit: Fit, chosen: Sequence[str]) -> None:
    """Refuse to swap the levels of a continuous attribute."""
    continuous = [a for a in chosen if fit.encoding.is_continuous(a)]
    if continuous:
        raise ValueError(
            f"attribute {continuous[0]!r} is continuous: this audit swaps levels of categorical "
            f"attributes; use fit.counterfactual(data, do={{{continuous[0]!r}: value}}) for it"
        )


def _check_abduction(
    abduction: Abduction,
    data: pd.DataFrame,
    *,
    n_samples: int | None,
    condition_on: Sequence[str] | None,
) -> None:
    """A given abduction comes without abduction settings, for exactly the rows of ``data``."""
    ignored = [
        name
        for name, value in (("n_samples", n_samples), ("condition_on", condition_on))
        if value is not None
    ]
    if ignored:
        raise ValueError(ABDUCTION_WITH_SETTINGS.format(names=" and ".join(ignored)))
    if len(abduction.data) != len(data) or not abduction.data.index.equals(data.index):
        raise ValueError(
            ABDUCTION_ROWS.format(
                got=len(abduction.data),
                got_index=_short(abduction.data.index),
                expected=len(data),
                expected_index=_short(data.index),
            )
        )


def _row_positions(
    abduction: Abduction | None, rows: Rows | None, positions: np.ndarray | None
) -> np.ndarray:
    """The audited rows' global positions: those of the checked rows, or of the given
    abduction (``positions=`` must then agree with them)."""
    if rows is not None:
        return rows.positions
    assert abduction is not None
    given = abduction.row_positions
    if positions is not None and not np.array_equal(np.asarray(positions), given):
        raise ValueError(
            "positions= differ from the row positions of the given abduction= (its rows "
            "were abducted at other positions); drop positions=, or abduct the rows with "
            "fit.abduct(data, positions=...)"
        )
    return given


def _abduction_plan(
    abduction: Abduction | None,
    n_samples: int | None,
    condition_on: Sequence[str] | None,
    seed: int | None,
) -> tuple[int, dict[str, Any]]:
    """Joint samples per row, and the arguments of the abduction (none when it is given)."""
    samples = abduction.n_samples if abduction is not None else (
        DEFAULT_AUDIT_SAMPLES if n_samples is None else int(n_samples)
    )
    abduct_args: dict[str, Any] = {}
    if abduction is None:
        abduct_args = {
            "condition_on": condition_on,
            "method": "draws",
            "n_param_draws": min(samples, 20),
            "n_samples": samples,
            "seed": seed,
        }
    return samples, abduct_args


def _targets(
    fit: Fit,
    data: pd.DataFrame,
    predictor: Any,
    response: Literal["prediction", "probability"],
    do: Mapping[str, DoValue] | None,
    chosen: Sequence[str],
    positions: np.ndarray,
) -> tuple[list[_Target], list[np.ndarray], list[np.ndarray]]:
    """The interventions, each with its flip-test change and the rows it applies to.

    One value per row (not per sample), on all rows at once: the ``do=`` intervention on
    every row, then per attribute each level on the rows whose factual level differs.
    Every prediction is made at the rows' global ``positions``: a predictor that abducts
    its inputs (a FairLearner) draws for a flipped row what it draws for that row among
    all the rows, whichever rows are flipped with it.
    """
    factual_prediction = predict_output(predictor, data, response, positions=positions)
    n_rows = len(data)
    targets: list[_Target] = []
    flips: list[np.ndarray] = []
    masks: list[np.ndarray] = []
    if do is not None:
        label = do_label(do)
        targets.append((label, label, dict(do)))
        flips.append(
            _difference(
                predictor, response,
                predict_output(predictor, _set_columns(data, do), response, positions=positions),
                factual_prediction,
            )
        )
        masks.append(np.ones(n_rows, dtype=bool))
    for attribute in chosen:
        factual_levels = data[attribute].astype(str).to_numpy()
        for level in fit.encoding.levels[attribute]:
            mask = factual_levels != level
            if not mask.any():
                continue
            flipped = data[mask].copy()
            flipped[attribute] = (
                pd.Categorical([level] * len(flipped), categories=data[attribute].cat.categories)
                if isinstance(data[attribute].dtype, pd.CategoricalDtype)
                else level
            )
            flip = np.full(n_rows, np.nan)
            flip[mask] = _difference(
                predictor, response,
                predict_output(predictor, flipped, response, positions=positions[mask]),
                factual_prediction[mask],
            )
            targets.append((attribute, level, {attribute: level}))
            flips.append(flip)
            masks.append(mask)
    return targets, flips, masks


def _audit_chunk_frames(
    fit: Fit,
    data: pd.DataFrame,
    where: slice,
    chunk: Abduction,
    predictor: Any,
    plan: _Targets,
    settings: CheckedAudit,
    stream: AuditStream,
) -> None:
    """Every target's changes on one chunk of rows, through counterfactual frames.

    The path of predictors that read both worlds and of path-specific audits; ``where``
    is the chunk's slice of ``data`` (the per-row arrays of ``plan`` span all of ``data``).
    """
    targets, masks, flips = plan.targets, plan.masks, plan.flips
    do, paths, seed = settings.do, settings.unfair_paths, settings.seed
    coupling, response = settings.coupling, settings.response
    samples = chunk.n_samples
    n_rows = len(data)
    positions = chunk.row_positions  # global (a Dask partition's rows start anywhere)
    local = np.arange(n_rows)[where]  # this call's rows, for its own per-row arrays
    for t, (attribute, level, action) in enumerate(targets):
        mask = masks[t][where]
        if not mask.any():
            continue
        is_do = do is not None and t == 0
        subset = chunk if is_do else chunk.take_rows(mask)
        rows = data.iloc[where][mask]
        chunk_do = slice_do(action, where, n_rows) if is_do else action
        frame = counterfactual_frame(fit, subset, chunk_do, seed=seed, coupling=coupling)
        result = frame_predictions(fit, frame, predictor, response=response, abduction=subset)
        if paths is not None:
            result["path_specific_change"] = _path_change(
                fit, rows, predictor, chunk_do, subset, paths, response, seed
            )
        result["attribute"] = attribute
        result["from_level"] = (
            "factual" if is_do else result[attribute].astype(str).to_numpy()
        )
        result["to_level"] = level
        result["flip_change"] = np.tile(flips[t][local[mask]], samples)
        result["position"] = np.tile(positions[mask], samples)
        stream.update(t, TargetChanges.from_frame(result, samples))


def audit_stream(
    fit: Fit,
    data: pd.DataFrame,
    predictor: Any,
    settings: CheckedAudit,
    *,
    abduction: Abduction | None = None,
    positions: np.ndarray | None = None,
) -> AuditStream:
    """The statistics of :func:`counterfactual_fairness` on in-memory rows, before the report.

    ``settings`` are the audit's checked settings (:meth:`AuditSettings.check`); ``positions``
    the rows' global positions, which a Dask partition's task passes. The returned
    :class:`~counterfair.audit.streaming.AuditStream` holds one mergeable
    :class:`~counterfair.audit.streaming.ChangeStats` per group (what a partitioned
    run merges, :mod:`counterfair.dask.summary`) and the per-row summaries
    (:func:`report_of` makes the report).
    """
    _check_rows(data)
    if abduction is not None:
        _check_abduction(
            abduction, data, n_samples=settings.n_samples, condition_on=settings.condition_on
        )
    samples, abduct_args = _abduction_plan(
        abduction, settings.n_samples, settings.condition_on, settings.seed
    )
    rows = None if abduction is not None else fit.rows_of(data, positions=positions)
    row_positions = _row_positions(abduction, rows, positions)
    do = settings.do
    targets, flips, masks = _targets(
        fit, data, predictor, settings.response, do, settings.attributes, row_positions
    )
    stream = AuditStream(
        n_samples=samples,
        tolerance=settings.tolerance,
        interval=settings.interval,
        paths=settings.unfair_paths,
        keep_samples=settings.keep_samples,
        n_targets=len(targets),
    )
    chunks = abduct_chunks(fit, rows, abduction=abduction, **abduct_args)
    n_rows = len(data)
    by_world = settings.unfair_paths is None and not needs_both_worlds(predictor, fit)
    everything = _Targets(targets, masks, flips)
    for where, chunk in progress(chunks, desc="counterfactual audit"):
        if by_world:
            local = np.arange(n_rows)[where]  # this call's rows, for its own per-row arrays
            plan = _Targets(targets, [m[where] for m in masks], [f[local] for f in flips])
            chunk_do = None if do is None else slice_do(do, where, n_rows)
            _audit_chunk(fit, chunk, predictor, plan, settings, chunk_do, stream)
        else:
            _audit_chunk_frames(fit, data, where, chunk, predictor, everything, settings, stream)
    return stream
