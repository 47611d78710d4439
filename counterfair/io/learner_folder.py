"""Write fitted learners to folders without pickle (read back by :func:`counterfair.load`).

``learner.save(path)`` writes a folder like a saved fit's
(:mod:`counterfair.io.fit_folder`): ``manifest.json`` with the sha256 of every file,
``learner.json`` (the learner's settings), ``estimators.skops`` (the wrapped
scikit-learn estimator, unfitted and fitted, via skops, not pickle) and, for a
:class:`~counterfair.FairLearner`, its SCM fit under ``fit/``. This module does not
import :mod:`counterfair.learn.fair` (whose ``save`` methods call it).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import skops.io as sio

from counterfair import errors
from counterfair.inference.abduct import MCMCAbduction
from counterfair.io.fit_folder import fill_fit, write_folder, write_json
from counterfair.learn import inputs
from counterfair.model.nodes import plain

if TYPE_CHECKING:
    from counterfair.learn.baselines import BaselinePredictor
    from counterfair.learn.fair import FairLearner

ESTIMATORS = "estimators.skops"
"""The skops file of a saved learner."""




def abduction_document(args: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A learner's ``abduction_args`` as JSON: an ``engine=MCMCAbduction(...)`` becomes
    ``{"MCMCAbduction": {its settings}}`` (:func:`abduction_args_of` reads it back)."""
    if args is None:
        return None
    document = dict(args)
    engine = document.get("engine")
    if isinstance(engine, MCMCAbduction):
        document["engine"] = {"MCMCAbduction": dataclasses.asdict(engine)}
    return document


def abduction_args_of(document: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``abduction_args`` of a saved learner's JSON (:func:`abduction_document`)."""
    if document is None:
        return None
    args = dict(document)
    engine = args.get("engine")
    if isinstance(engine, Mapping) and set(engine) == {"MCMCAbduction"}:
        args["engine"] = MCMCAbduction(**engine["MCMCAbduction"])
    return args


def _learner_settings(learner: FairLearner) -> dict[str, Any]:
    settings = {
        "target": learner.target,
        "features": inputs.to_document(inputs.checked(learner.features)),
        "n_samples": learner.n_samples,
        "fit_args": learner.fit_args,
        "abduction_args": abduction_document(learner.abduction_args),
        "seed": learner.seed,
        "reference_": getattr(learner, "reference_", {}),
    }
    document = plain(settings)
    try:
        json.dumps(document)
    except TypeError as error:
        raise errors.DataError(f"cannot save this learner's settings as JSON: {error}") from error
    return {"type": "FairLearner", **document, "feature_names_": list(learner.feature_names_)}


def save_learner(
    learner: FairLearner | BaselinePredictor,
    path: str | os.PathLike[str],
    *,
    overwrite: bool = False,
) -> Path:
    """Save a fitted :class:`FairLearner` or :class:`BaselinePredictor` to a folder.

    Raises
    ------
    ValueError
        If the learner is not fitted.
    """
    if not hasattr(learner, "estimator_"):
        raise ValueError(f"this {type(learner).__name__} is not fitted; call fit() first")

    def fill(folder: Path) -> None:
        estimators: dict[str, Any] = {
            "estimator": learner.estimator,
            "estimator_": learner.estimator_,
        }
        if type(learner).__name__ == "FairLearner":
            settings = _learner_settings(learner)
            if hasattr(learner, "classes_"):
                estimators["classes_"] = np.asarray(learner.classes_)
            (folder / "fit").mkdir()
            fill_fit(learner.scm_fit_, folder / "fit")
        else:
            settings = {
                "type": "BaselinePredictor",
                "columns": list(learner.columns),
                "target": learner.target,
                "categorical": list(learner.categorical),
                "levels_": {k: list(v) for k, v in learner.levels_.items()},
            }
        write_json(folder / "learner.json", settings)
        sio.dump(estimators, folder / ESTIMATORS)

    return write_folder(path, "learner", fill, overwrite=overwrite)


