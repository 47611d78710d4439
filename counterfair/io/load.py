"""Load any saved folder: a fit (:mod:`counterfair.io.fit_folder`) or a learner
(:mod:`counterfair.io.learner_folder`).

:func:`load` checks every file's sha256 first. skops files are opened only when
every type they name is trusted (:data:`TRUSTED_PREFIXES`); an untrusted type is
refused and named.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import arviz as az
import skops.io as sio

from counterfair import errors
from counterfair.inference.abduct import LOADED_BACKEND
from counterfair.inference.diagnostics import diagnose
from counterfair.inference.fit import Fit
from counterfair.inference.quadrature_nodes import QuadratureRule
from counterfair.io.fit_folder import (
    NETCDF_ENGINE,
    read_data,
    read_fit_parts,
    read_manifest,
)
from counterfair.io.learner_folder import ESTIMATORS, abduction_args_of
from counterfair.learn import inputs
from counterfair.learn.baselines import BaselinePredictor
from counterfair.learn.fair import FairLearner
from counterfair.model.encoding import Encoding
from counterfair.model.scm import SCM

TRUSTED_PREFIXES: tuple[str, ...] = ("sklearn.", "numpy.", "builtins.", "scipy.sparse.")
"""Modules whose types a saved skops file may name; anything else is refused."""



def untrusted_types(path: Path) -> list[str]:
    """Types named by the skops file ``path`` that are not trusted."""
    found = sio.get_untrusted_types(file=path)
    return [name for name in found if not name.startswith(TRUSTED_PREFIXES)]


def _load_skops(path: Path) -> Any:
    bad = untrusted_types(path)
    if bad:
        raise errors.DataError(
            f"{path} names type(s) {bad} that are not trusted (trusted modules: "
            f"{list(TRUSTED_PREFIXES)}); refusing to load it"
        )
    return sio.load(path, trusted=sio.get_untrusted_types(file=path))


# ---------------------------------------------------------------------- loading
def _load_fit(folder: Path) -> Fit:
    parts = read_fit_parts(folder)
    scm = SCM.from_dict(parts["scm"])
    info = parts["info"]
    idata = az.from_netcdf(str(folder / "posterior.nc"), engine=NETCDF_ENGINE)
    idata.load()  # read everything now; the file may be moved or deleted later
    encoding = Encoding(
        levels={node: tuple(levels) for node, levels in info["levels"].items()},
        continuous=frozenset(info["continuous"]),
    )
    diagnostics = dataclasses.replace(
        diagnose(idata, scm.parameter_names(), scm.latents),
        max_treedepth_hits=int(info["max_treedepth_hits"]),
    )
    return Fit(
        scm=scm,
        idata=idata,
        encoding=encoding,
        data=read_data(folder / "data.json"),
        seconds=float(info["seconds"]),
        backend=str(info["backend"]),
        seed=info["seed"],
        diagnostics=diagnostics,
        _backend_name=LOADED_BACKEND,
        subsample=info.get("subsample"),
        missing=info.get("missing"),
        method=str(info.get("method", "nuts")),
        integrated=tuple(str(name) for name in info.get("integrated", [])),
        quadrature=None if info.get("quadrature") is None else QuadratureRule(**info["quadrature"]),
    )


def _load_learner(folder: Path) -> FairLearner | BaselinePredictor:
    settings = json.loads((folder / "learner.json").read_text(encoding="utf-8"))
    estimators = _load_skops(folder / ESTIMATORS)
    if settings.get("type") == "BaselinePredictor":
        baseline = BaselinePredictor(
            columns=settings["columns"],
            target=settings["target"],
            categorical=settings["categorical"],
            estimator=estimators["estimator"],
        )
        baseline.levels_ = settings["levels_"]
        baseline.estimator_ = estimators["estimator_"]
        return baseline
    if settings.get("type") != "FairLearner":
        raise errors.DataError(f"{folder / 'learner.json'}: unknown type {settings.get('type')!r}")
    fit = _load_fit(folder / "fit")
    try:
        strategy = inputs.from_document(settings["features"])
    except (TypeError, ValueError, AttributeError) as error:
        raise errors.DataError(
            f"{folder / 'learner.json'}: its features are not a fair-input strategy ({error})"
        ) from error
    learner = FairLearner(
        fit,
        target=settings["target"],
        features=strategy,
        estimator=estimators["estimator"],
        n_samples=settings["n_samples"],
        abduction_args=abduction_args_of(settings["abduction_args"]),
        seed=settings["seed"],
    )
    learner.reference_ = dict(settings.get("reference_", {}))
    learner.scm_fit_ = fit
    learner.estimator_ = estimators["estimator_"]
    learner.feature_names_ = list(settings["feature_names_"])
    if "classes_" in estimators:
        learner.classes_ = estimators["classes_"]
    return learner


def load(path: str | os.PathLike[str]) -> Fit | FairLearner | BaselinePredictor:
    """Load a folder written by :meth:`Fit.save` or :meth:`FairLearner.save`.

    Every file is checked against the manifest's sha256 first. A loaded fit
    runs no Stan program: it abducts new rows, builds counterfactuals and
    audits wherever exact abduction applies, and raises
    :class:`~counterfair.errors.FairnessError` saying so where MCMC would be needed.

    Raises
    ------
    DataError
        If the folder is not a saved counterfair folder, was written by a newer
        format version (both versions named), a file is missing or edited
        (checksum mismatch, the file named), or a skops file names an
        untrusted type (the type named).
    """
    folder = Path(path)
    manifest = read_manifest(folder)
    kind = manifest.get("kind")
    if kind == "fit":
        return _load_fit(folder)
    if kind == "learner":
        return _load_learner(folder)
    raise errors.DataError(f"{folder / 'manifest.json'}: unknown kind {kind!r}")
