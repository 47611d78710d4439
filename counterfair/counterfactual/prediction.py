"""Any predictor's output, and its counterfactual predictions under ``do``, per row and sample.

:func:`predict_output` turns what a predictor gives (labels, probabilities, a callable's
array) into numbers; :func:`counterfactual_predictions` runs a predictor in the
factual world and under an intervention with a fitted SCM, chunk by chunk
(:func:`counterfactual_predictions_chunk`, :func:`iter_counterfactual_predictions`).
A ``FairLearner`` of the same fit is recognised by its
attributes (``scm_fit_``), so this module does not import the learners.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.counterfactual.action import DoValue, recorded_do, slice_do
from counterfair.counterfactual.path_features import (
    learner_worlds,
)
from counterfair.counterfactual.world import World
from counterfair.inference.abducted_chunks import abduct_chunks
from counterfair.inference.fit import Abduction, Fit
from counterfair.rows import dispatch
from counterfair.rows.validated import Rows

MULTICLASS_PROBABILITY = (
    "response='probability' compares one number per row, the probability of the positive "
    "class, but {name} has {n} classes {classes}; audit labels (response='prediction', a "
    "change is a different label) or pass a function returning the probability of the "
    "class you mean"
)

Predictor = Any  # an estimator / pipeline with .predict(DataFrame), or a callable -> array
Response = Literal["prediction", "probability"]
RESPONSES: tuple[str, ...] = ("prediction", "probability")

NO_FEATURE_COLUMN = (
    "predictor {name} was fitted on column {column!r}, which the rows do not have; "
    "columns: {columns}"
)
NO_PREDICT_PROBA = (
    "response='probability' needs a predictor with predict_proba; {name} has none "
    "(pass a function returning probabilities instead)"
)


def _estimator_input(predictor: Any, frame: pd.DataFrame | Rows) -> pd.DataFrame | Rows:
    """The columns a fitted scikit-learn estimator was trained on (``feature_names_in_``);
    rows for a predictor that takes them (:func:`takes_rows`) as they are."""
    names = getattr(predictor, "feature_names_in_", None)
    if names is None or isinstance(frame, Rows):
        return frame
    missing = [str(c) for c in names if c not in frame.columns]
    if missing:
        raise errors.DataError(
            NO_FEATURE_COLUMN.format(
                name=type(predictor).__name__, column=missing[0], columns=list(frame.columns)
            )
        )
    return frame[list(names)]


def refuse_rows_out(rows_out: object, overwrite: bool) -> None:
    """``rows_out=`` / ``overwrite=`` are for a Dask frame; refuse them for in-memory rows."""
    if rows_out is not None or overwrite:
        raise ValueError(
            "rows_out= and overwrite= write a Dask frame's predictions as parquet partitions; "
            "in-memory rows get the predictions returned"
        )


def takes_rows(predictor: Predictor) -> bool:
    """Whether the predictor abducts its inputs for the rows it is given, by their positions:
    a ``FairLearner`` (of any fit), or its bound ``predict`` / ``predict_proba``.

    Such a predictor takes :class:`~counterfair.rows.validated.Rows` with the rows' global
    positions (recognised by its attributes: this module does not import the learners).
    """
    owner = getattr(predictor, "__self__", predictor)
    if not (hasattr(owner, "predict_abduction") and hasattr(owner, "scm_fit_")):
        return False
    return owner is predictor or getattr(predictor, "__name__", "") in (
        "predict", "predict_proba"
    )


def predict_output(
    predictor: Predictor,
    frame: pd.DataFrame,
    response: Response = "prediction",
    *,
    positions: np.ndarray | None = None,
) -> np.ndarray:
    """One number per row of ``frame``: a prediction, or the probability of the positive class.

    Parameters
    ----------
    predictor : estimator, pipeline or callable
        A fitted scikit-learn estimator or pipeline (its columns are chosen by
        ``feature_names_in_`` when it has them), a ``FairLearner``, a
        baseline, or a function of a DataFrame returning one number per row.
    frame : pandas.DataFrame
        Rows.
    response : {"prediction", "probability"}
        ``"probability"`` calls ``predict_proba`` and keeps the column of the
        last class (the positive class of a binary classifier); a function is
        taken to return probabilities already. A two-column output (a bound
        ``predict_proba``) is reduced to its last column; ``predict_proba``
        with more than two classes is an error (one number per row is compared).
        Predicted labels that are not numbers become their index in the
        predictor's ``classes_``.
    positions : numpy.ndarray, optional
        Global 0-based positions of the rows of ``frame`` (default: their positions in
        ``frame``). A predictor that abducts its inputs (:func:`takes_rows`: a
        ``FairLearner`` or its bound methods) is given the rows with these positions,
        so each row draws what it draws among all the rows, whatever subset ``frame``
        is; any other predictor is given ``frame``.
    """
    if response not in RESPONSES:
        raise ValueError(f"response must be one of {RESPONSES}, got {response!r}")
    given: pd.DataFrame | Rows = frame
    if positions is not None and takes_rows(predictor):
        given = Rows.from_frame(frame, positions)  # it abducts by these positions
    name = type(predictor).__name__
    if response == "probability" and hasattr(predictor, "predict_proba"):
        proba = np.asarray(predictor.predict_proba(_estimator_input(predictor, given)))
        if proba.ndim == 2 and proba.shape[1] > 2:
            classes = list(getattr(predictor, "classes_", range(proba.shape[1])))
            raise ValueError(
                MULTICLASS_PROBABILITY.format(name=name, n=proba.shape[1], classes=classes)
            )
        return np.asarray(proba[:, -1] if proba.ndim == 2 else proba, dtype=float)
    if hasattr(predictor, "predict"):
        if response == "probability":
            raise TypeError(NO_PREDICT_PROBA.format(name=name))
        labels = np.asarray(predictor.predict(_estimator_input(predictor, given)))
        return as_numbers(predictor, labels)
    if callable(predictor):
        owner = getattr(predictor, "__self__", None)  # a bound method of an estimator
        out = np.asarray(predictor(given))
        if out.ndim == 2 and out.shape[1] > 2:
            classes = list(getattr(owner, "classes_", range(out.shape[1])))
            raise ValueError(
                MULTICLASS_PROBABILITY.format(
                    name=type(owner).__name__ if owner is not None else name,
                    n=out.shape[1],
                    classes=classes,
                )
            )
        if out.ndim == 2:  # a bound predict_proba
            return np.asarray(out[:, -1], dtype=float)
        return as_numbers(owner if owner is not None else predictor, out)
    raise TypeError(f"predictor must have .predict or be callable, got {name}")


def as_numbers(predictor: Predictor, labels: np.ndarray) -> np.ndarray:
    """Predictions as floats; class labels that are not numbers become their index in
    ``classes_`` (so that two worlds' labels can be compared)."""
    if labels.dtype.kind in "biuf":
        return labels.astype(float)
    classes = getattr(predictor, "classes_", None)
    if classes is None:
        raise TypeError(
            f"{type(predictor).__name__} predicts non-numeric values and has no classes_; "
            "pass a function returning one number per row"
        )
    lookup = {str(c): i for i, c in enumerate(np.asarray(classes))}
    return np.array([lookup[str(label)] for label in labels], dtype=float)


def _is_learner(predictor: Predictor) -> bool:
    """Whether the predictor (or the object of a bound method) is a FairLearner, recognised
    by what it has (this module does not import the learners)."""
    owner = getattr(predictor, "__self__", predictor)
    return hasattr(owner, "predict_abduction") and hasattr(owner, "scm_fit_")


def has_probabilities(predictor: Predictor) -> bool:
    """Whether the predictor is a binary classifier with ``predict_proba``: it has
    ``predict``, ``predict_proba`` and the ``classes_`` of a fitted classifier (at most
    two), as a scikit-learn classifier or pipeline, a classifying ``FairLearner`` or a
    baseline of a classifier has. A function (a bound ``predict_proba`` included)
    returns what it returns and is compared as it is."""
    if not hasattr(predictor, "predict") or not hasattr(predictor, "predict_proba"):
        return False
    if _is_learner(predictor):
        classify = getattr(predictor, "_is_classifier", None)
        if classify is None or not classify():
            return False
    inner = getattr(predictor, "estimator_", None)
    if inner is not None and not _is_learner(predictor) and not hasattr(inner, "predict_proba"):
        return False  # a wrapper (a baseline) of a regressor: its predict_proba refuses
    classes = getattr(predictor, "classes_", None)
    return classes is not None and 1 <= len(classes) <= 2


def audited_response(predictor: Predictor, response: Response | None) -> Response:
    """The output an audit compares: ``response`` when given, else the probability of
    the positive class for a predictor that has it (:func:`has_probabilities`) and the
    prediction for any other (a regressor, a multi-class classifier's labels, a
    function)."""
    if response is not None:
        if response not in RESPONSES:
            raise ValueError(f"response must be one of {RESPONSES}, got {response!r}")
        return response
    return "probability" if has_probabilities(predictor) else "prediction"


def response_text(predictor: Predictor, response: Response) -> str:
    """What an audit of ``predictor`` on ``response`` compares, in words (the reports
    say it): the probability of the positive class, labels, or predictions."""
    owner = getattr(predictor, "__self__", predictor)
    classes = getattr(owner, "classes_", None)
    if response == "probability" or getattr(predictor, "__name__", "") == "predict_proba":
        if classes is not None and len(classes) == 2:
            return f"the probability of class {str(np.asarray(classes)[-1])!r}"
        return "the probability of the positive class"
    if classes is not None:
        return "the predicted labels"
    return "the predictions"


def multiclass_labels(predictor: Predictor, response: Response) -> bool:
    """Whether the outputs compared are labels of more than two classes (a change is then
    0 or 1: the label differs or not). A bound ``predict_proba`` gives probabilities."""
    owner = getattr(predictor, "__self__", predictor)
    if getattr(predictor, "__name__", "") == "predict_proba":
        return False
    return response == "prediction" and len(getattr(owner, "classes_", ())) > 2


def _shared_learner(predictor: Predictor, fit: Fit) -> bool:
    """Whether the predictor (or the object of a bound method) is a FairLearner of ``fit``."""
    owner = getattr(predictor, "__self__", predictor)
    # a FairLearner, recognised by what it has (this module does not import the learners)
    return hasattr(owner, "predict_abduction") and getattr(owner, "scm_fit_", None) is fit


def counterfactual_predictions(
    fit: Fit,
    data: pd.DataFrame | Rows,
    predictor: Predictor,
    *,
    do: Mapping[str, DoValue],
    n_samples: int = 100,
    seed: int | None = None,
    response: Response = "prediction",
    abduction: Abduction | None = None,
    abduction_args: Mapping[str, Any] | None = None,
    rows_out: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> pd.DataFrame:
    """Predictions of any predictor in the factual world and under ``do``, per row and sample.

    The rows are abducted, their counterfactual computed (``coupling="monotone"``) and
    the predictor run in both worlds, chunk by chunk. For another counterfactual (a
    path-specific one, ``coupling="redraw"``, a shifted latent), compute its frame
    with :meth:`Fit.counterfactual` and give it to :func:`frame_predictions`.

    Parameters
    ----------
    fit : Fit
        Fitted SCM taken as the true world.
    data : pandas.DataFrame or Rows
        Rows (every observed column known).
    predictor : estimator or callable
        Anything with ``predict(DataFrame)``, or a function of a DataFrame. A
        ``FairLearner`` whose SCM fit is ``fit`` reads its inputs (latents,
        abducted noise) from the shared samples, so its predictions do not move.
    do : mapping
        The intervention, as for :meth:`Fit.counterfactual` (as the audit's ``do=``).
    n_samples : int
        Joint samples per row.
    seed : int, optional
        Seed of abduction and of the counterfactual draws.
    response : {"prediction", "probability"}
        What to compare: predictions, or the probability of the positive class
        (see :func:`predict_output`). A ``FairLearner`` of ``fit`` (or its
        bound ``predict`` / ``predict_proba``) reads its inputs from the shared
        samples in both worlds.
    abduction : Abduction, optional
        The joint samples of the rows, reused instead of abducting them.
    abduction_args : mapping, optional
        Options of :meth:`Fit.abduct` for the rows (``condition_on``, ``method``,
        ``n_param_draws``, ``engine``, as ``FairLearner(abduction_args=...)`` takes
        them); ``n_samples`` and ``seed`` are this function's own. Giving them with
        ``abduction=`` is an error, as they would be ignored.
    rows_out : str or path-like, optional
        With a Dask DataFrame ``data`` (and only then): the folder its parquet
        partitions are written to.
    overwrite : bool
        With ``rows_out=``: replace a non-empty folder.

    Returns
    -------
    pandas.DataFrame
        Columns ``row``, ``sample``, ``factual``, ``counterfactual``, ``change``
        (counterfactual minus factual; for labels of more than two classes,
        which are class indices here, 1 where the label differs and 0 where it
        does not) and the factual protected attributes.

    A Dask DataFrame ``data`` runs partition by partition
    (:func:`counterfair.dask.row_calls.dask_counterfactual_predictions`): give
    ``rows_out=`` a folder for the parquet partitions (and ``overwrite=True`` to
    replace a non-empty one); a Dask frame reading them is returned.
    """
    if (handler := dispatch.handler_for("counterfactual_predictions", data)) is not None:
        return handler(
            fit, data, predictor, do=do, n_samples=n_samples, seed=seed, response=response,
            abduction=abduction, abduction_args=abduction_args, rows_out=rows_out,
            overwrite=overwrite,
        )
    refuse_rows_out(rows_out, overwrite)
    parts = list(
        iter_counterfactual_predictions(
            fit,
            data,
            predictor,
            do=do,
            n_samples=n_samples,
            seed=seed,
            response=response,
            abduction=abduction,
            abduction_args=abduction_args,
        )
    )
    return merge_prediction_chunks(parts, do)


def frame_predictions(
    fit: Fit,
    frame: pd.DataFrame,
    predictor: Predictor,
    *,
    response: Response = "prediction",
    abduction: Abduction | None = None,
) -> pd.DataFrame:
    """The predictions of :func:`counterfactual_predictions` in the two worlds of a
    counterfactual frame.

    Parameters
    ----------
    fit : Fit
        Fitted SCM taken as the true world.
    frame : pandas.DataFrame
        A counterfactual frame: from :meth:`Fit.counterfactual` (any ``coupling``,
        ``unfair_paths``) or :func:`counterfair.counterfactual.sensitivity.shifted_frame`.
    predictor : estimator or callable
        As for :func:`counterfactual_predictions`.
    response : {"prediction", "probability"}
        As for :func:`counterfactual_predictions`.
    abduction : Abduction, optional
        The joint samples the frame was computed from. A path-specific
        ``FairLearner`` of ``fit`` recomputes its corrected inputs from them in each
        world and needs them; a ``FairLearner`` of another fit abducts its inputs
        keyed by the rows' positions in them.

    Returns
    -------
    pandas.DataFrame
        The frame of :func:`counterfactual_predictions`; ``attrs["do"]`` is the frame's.
    """
    return _frame_predictions(fit, frame, {}, predictor, response, abduction)


def predict_world(
    fit: Fit, predictor: Predictor, world: World, response: Response = "prediction"
) -> np.ndarray:
    """The predictor's output for every sample and row of a world, sample-major ``(S * N,)``.

    A :class:`~counterfair.FairLearner` of ``fit`` reads the world's latents and
    noise (the same in every world of the rows); any other predictor reads the
    protected and observed columns (a FairLearner of another fit abducts its inputs
    for each row and sample, keyed by :func:`world_positions`). A path-specific
    learner needs both worlds at once
    (:func:`counterfair.counterfactual.path_features.learner_worlds`) and is refused here.
    """
    if needs_both_worlds(predictor, fit):
        raise ValueError(
            "a path-specific FairLearner reads the factual and counterfactual worlds "
            "together; use counterfactual_predictions for it"
        )
    shared = _shared_learner(predictor, fit)
    frame = world.frame(fit.scm, fit.encoding, latents=shared)
    positions = None
    if not shared and takes_rows(predictor):  # a FairLearner of another fit abducts
        positions = world_positions(world.abduction.row_positions, world.shape[0])
    return predict_output(predictor, frame, response, positions=positions)


def predict_deployed(
    predictor: Predictor,
    world: World,
    scm: Any,
    encoding: Any,
    response: Response = "prediction",
) -> np.ndarray:
    """A FairLearner's output in a world as it is deployed, sample-major ``(S * N,)``.

    The learner is a function of what it is given: the world's protected and observed
    columns (not its latents), from which it abducts its inputs again, each row of every
    sample keyed by the row's global position. A row whose columns are the same in two
    samples or two worlds gets the same output; in the factual world of rows that hold
    every observed column, that is the learner's output on the rows
    (``predictor.predict_proba(rows)[:, 1]`` for ``response="probability"``), so the gap
    between two groups is the raw gap of its outputs.
    """
    frame = world.frame(scm, encoding, latents=False)
    s = world.shape[0]
    # every sample's copy of a row carries the row's own index label and position (a Dask
    # task's fit keys its abductions by the label)
    frame.index = pd.Index(np.tile(world.abduction.data.index.to_numpy(), s))
    positions = np.tile(np.asarray(world.abduction.row_positions, dtype=np.int64), s)
    return predict_output(predictor, frame, response, positions=positions)


def world_positions(positions: np.ndarray, n_samples: int) -> np.ndarray:
    """Keys of the rows of a world's long frame (sample-major), one per row and sample:
    ``position * n_samples + sample``.

    A FairLearner of another fit abducts its inputs for each (row, sample) of a world
    again; keyed by the row's global position and the sample, its draws do not depend on
    the chunk or partition the row is in, nor on the other rows.
    """
    where = np.asarray(positions, dtype=np.int64)
    return (where[None, :] * int(n_samples) + np.arange(n_samples)[:, None]).reshape(-1)


def needs_both_worlds(predictor: Predictor, fit: Fit) -> bool:
    """Whether the predictor reads the factual and counterfactual worlds together (a
    path-specific FairLearner of ``fit``), so :func:`predict_world` cannot serve it."""
    return _is_path_learner(predictor, fit)


def _is_path_learner(predictor: Predictor, fit: Fit) -> bool:
    owner = getattr(predictor, "__self__", predictor)
    kind = getattr(getattr(owner, "features", None), "kind", None)  # a strategy's kind
    return _shared_learner(predictor, fit) and kind == "path_specific"


def _frame_predictions(
    fit: Fit,
    frame: pd.DataFrame,
    do: Mapping[str, DoValue],
    predictor: Predictor,
    response: Response,
    abduction: Abduction | None,
) -> pd.DataFrame:
    """The predictions frame of :func:`counterfactual_predictions` from a counterfactual frame."""
    path_learner = _is_path_learner(predictor, fit)
    factual = frame[frame["world"] == "factual"].reset_index(drop=True)
    counter = frame[frame["world"] == "counterfactual"].reset_index(drop=True)
    if path_learner:
        before, after = learner_worlds(predictor, fit, frame, abduction, response)
    elif _shared_learner(predictor, fit):
        before = predict_output(predictor, factual, response)
        after = predict_output(predictor, counter, response)
    else:
        drop: Callable[[pd.DataFrame], pd.DataFrame] = lambda f: f.drop(  # noqa: E731
            columns=[c for c in f.columns if c.endswith(":noise") or c in fit.scm.latents]
        )
        positions = _frame_positions(factual, abduction) if takes_rows(predictor) else None
        before = predict_output(predictor, drop(factual), response, positions=positions)
        after = predict_output(predictor, drop(counter), response, positions=positions)
    out = pd.DataFrame(
        {
            "row": factual["row"].to_numpy(),
            "sample": factual["sample"].to_numpy(),
            "factual": before,
            "counterfactual": after,
            "change": (
                (after != before).astype(float)
                if multiclass_labels(predictor, response)
                else after - before
            ),
        }
    )
    for node in fit.scm.protected:
        out[node] = factual[node].to_numpy()
    out.attrs["do"] = frame.attrs.get("do", dict(do))
    return out


def _frame_positions(world: pd.DataFrame, abduction: Abduction | None) -> np.ndarray | None:
    """:func:`world_positions` of one world of a counterfactual frame computed from
    ``abduction`` (``None`` without it, or when the frame's rows are not its rows)."""
    if abduction is None:
        return None
    s, index = abduction.n_samples, abduction.data.index.to_numpy()
    if len(world) != s * len(index) or not np.array_equal(
        world["row"].to_numpy(), np.tile(index, s)
    ):
        return None
    return world_positions(abduction.row_positions, s)


def counterfactual_predictions_chunk(
    fit: Fit,
    rows: Rows | None,
    predictor: Predictor,
    *,
    do: Mapping[str, DoValue],
    n_samples: int = 100,
    seed: int | None = None,
    response: Response = "prediction",
    abduction: Abduction | None = None,
    abduction_args: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """:func:`counterfactual_predictions` of one chunk of rows, with a ``position`` column.

    Parameters
    ----------
    rows : Rows or None
        The chunk's rows and their global positions (:class:`counterfair.rows.validated.Rows`);
        ``None`` with ``abduction`` given (the chunk's joint samples).
    do : mapping
        The intervention for these rows (per-row values already cut to the chunk,
        :func:`counterfair.counterfactual.action.slice_do`).
    n_samples, seed, response, abduction_args
        As in :func:`counterfactual_predictions`.
    abduction : Abduction, optional
        The chunk's joint samples (e.g. cut from an MCMC abduction of all rows).

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`counterfactual_predictions` and ``position``, the
        row's global position. The values do not depend on how rows are chunked:
        every draw is keyed by the seed and the position.
    """
    if abduction is None:
        abduction = fit.abduct(rows, n_samples=n_samples, seed=seed, **(abduction_args or {}))
    frame = fit.counterfactual(
        None, do, n_samples=n_samples, seed=seed, coupling="monotone", abduction=abduction
    )
    out = _frame_predictions(fit, frame, do, predictor, response, abduction)
    out["position"] = np.tile(abduction.row_positions, abduction.n_samples)
    return out


def iter_counterfactual_predictions(
    fit: Fit,
    data: pd.DataFrame | Rows | None,
    predictor: Predictor,
    *,
    do: Mapping[str, DoValue],
    n_samples: int = 100,
    seed: int | None = None,
    response: Response = "prediction",
    abduction: Abduction | None = None,
    abduction_args: Mapping[str, Any] | None = None,
) -> Iterator[pd.DataFrame]:
    """Per-chunk frames of :func:`counterfactual_predictions_chunk`, in row order.

    Rows are cut into chunks of :func:`counterfair.options.chunk_bytes` of working
    memory; exact abduction runs per chunk, MCMC abduction (and a given
    ``abduction``) once for all rows and is then cut (not chunk-invariant for MCMC,
    see :meth:`Fit.abduct`). Each frame is sample-major within its chunk and has a
    ``position`` column.
    """
    if abduction is not None and abduction_args:
        raise TypeError(
            f"abduction_args {sorted(abduction_args)} would be ignored with abduction= "
            "(the rows' joint samples are given); drop one of them"
        )
    if abduction is not None:
        n_rows = len(abduction.data)
        rows = None
    else:
        rows = None if data is None else fit.rows_of(data)
        n_rows = len(fit.data) if rows is None else len(rows)
    for where, chunk in abduct_chunks(
        fit,
        rows,
        abduction=abduction,
        n_samples=n_samples,
        seed=seed,
        **(abduction_args or {}),
    ):
        yield counterfactual_predictions_chunk(
            fit,
            None,
            predictor,
            do=slice_do(do, where, n_rows),
            n_samples=n_samples,
            seed=seed,
            response=response,
            abduction=chunk,
        )


def merge_prediction_chunks(parts: Sequence[pd.DataFrame], do: Mapping[str, Any]) -> pd.DataFrame:
    """The frame of :func:`counterfactual_predictions` from its per-chunk frames.

    Rows are ordered by sample, then global position (as one call on all rows
    orders them), and the ``position`` column is dropped.
    """
    joined = pd.concat(list(parts), ignore_index=True) if len(parts) > 1 else parts[0]
    order = np.lexsort((joined["position"].to_numpy(), joined["sample"].to_numpy()))
    out = joined.iloc[order].drop(columns="position").reset_index(drop=True)
    out.attrs["do"] = parts[0].attrs.get("do", dict(do))
    if len(parts) > 1:
        out.attrs["do"] = recorded_do(do)
    return out
