"""The fitted nuisance models of the Standard Fairness Model, once, for every use.

:func:`fit_sfm` checks the roles, encodes the rows and fits the outcome's and the
attribute's regressions (:mod:`counterfair.audit.sfm_models`); the :class:`SFMFit` it
returns is what :func:`~counterfair.audit.decompose_sfm` decomposes and what
:func:`~counterfair.audit.sfm_predictor` builds a predictor from, so a user who wants
both fits the models once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .sfm_models import GROUPINGS, NuisanceModel, SFMFrame, fit_nuisance, sfm_frame
from .sfm_roles import SFMRoles, check_sfm_roles

__all__ = ["FIT_DEFAULTS", "METHODS", "SFMFit", "fit_sfm"]

METHODS = ("nuts", "pathfinder")
"""How the nuisance models are fitted (``method=`` of :func:`fit_sfm`)."""

FIT_DEFAULTS: dict[str, Any] = {
    "categorical": None, "family": None, "seed": 0, "chains": 2, "warmup": 300,
    "draws": 300, "groups": "encoded", "fit_rows": None, "method": "nuts", "progress": None,
}
""":func:`fit_sfm`'s defaults beyond the roles (the command line reads them too)."""

_log = logging.getLogger("counterfair.audit.sfm")


@dataclass(frozen=True)
class SFMFit:
    """The nuisance models of one data set's Standard Fairness Model, fitted.

    Attributes
    ----------
    roles : SFMRoles
        The checked roles (attribute, levels, confounders, mediators, outcome, family).
    encoded : SFMFrame
        The rows of ``x0`` and ``x1`` as the models read them.
    models : dict of str to NuisanceModel
        ``"outcome"`` and, with confounders, ``"attribute"``.
    seed : int
        The fits' seed (the decomposition's row weights use it too).
    n_rows : int
        Rows of the data given (with those of other levels of the attribute).
    seconds : float
        Time of the fits.
    """

    roles: SFMRoles
    encoded: SFMFrame
    models: dict[str, NuisanceModel]
    seed: int
    n_rows: int
    seconds: float

    @property
    def confounded(self) -> bool:
        """Whether there are confounders (and so an attribute model)."""
        return "attribute" in self.models

    def description(self) -> list[str]:
        """Notes on what was fitted: the family and the covariates' kinds, the estimator."""
        roles = self.roles
        return [
            f"the Standard Fairness Model's roles, no SCM: the outcome's family is "
            f"{roles.family} ({roles.family_reason}); numeric covariates "
            f"{list(roles.numeric)}, categorical {list(roles.categorical)}, partially "
            f"pooled groups {list(roles.grouped)}",
            f"estimator: the outcome's regression on {roles.attribute!r}, the confounders "
            f"and the mediators, {roles.attribute!r} interacting with every other term "
            "and, for the spurious and general terms, the attribute's regression on the "
            "confounders (plug-in and reweighting; see counterfair.audit.sfm)",
        ]

    def diagnostics(self) -> list[str]:
        """Notes on the fits: rows left out, each model's diagnostics, encodings, columns."""
        notes = []
        others = self.n_rows - len(self.encoded)
        if others:
            notes.append(
                f"{others:,} rows have another level of {self.roles.attribute!r} and are "
                "left out"
            )
        notes += [_diagnostic_note(m, len(self.encoded)) for m in self.models.values()]
        for name, m in self.models.items():
            if m.encodings:
                notes.append(
                    f"the {name} model reads {list(m.encodings)} by their groups' "
                    "cross-fitted empirical-Bayes means (groups='encoded'): their means, "
                    "not their uncertainty"
                )
            if m.left_out:
                notes.append(
                    f"the {name} model leaves out columns constant on its rows (or spanned "
                    f"by the others): {list(m.left_out)}"
                )
        return notes

    def encode(self, data: pd.DataFrame) -> SFMFrame:
        """Other rows encoded as the fitted ones were (their outcome may be missing)."""
        return sfm_frame(data, self.roles, like=self.encoded)


def check_fit_options(
    *, method: object, groups: object, fit_rows: object, chains: object, draws: object
) -> None:
    """Raise ``ValueError`` for a fit option out of range."""
    if fit_rows is not None and (
        isinstance(fit_rows, bool) or not isinstance(fit_rows, int) or fit_rows < 100
    ):
        raise ValueError(f"fit_rows must be an integer of at least 100 or None, got {fit_rows!r}")
    if groups not in GROUPINGS:
        raise ValueError(f"groups must be one of {GROUPINGS}, got {groups!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    for name, value in (("chains", chains), ("draws", draws)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def fit_sfm(
    data: pd.DataFrame,
    *,
    attribute: str,
    x0: object,
    x1: object,
    outcome: str,
    confounders: str | Sequence[str] | None,
    mediators: str | Sequence[str] | None,
    categorical: str | Sequence[str] | None = None,
    family: str | None = None,
    seed: int = 0,
    chains: int = 2,
    warmup: int = 300,
    draws: int = 300,
    groups: str = "encoded",
    fit_rows: int | None = None,
    method: str = "nuts",
    progress: bool | None = None,
    **sampler_args: Any,
) -> SFMFit:
    """Fit the Standard Fairness Model's nuisance models, with no SCM.

    The outcome's regression on the attribute, the confounders and the mediators (the
    attribute interacting with every other term) and the attribute's regression on the
    confounders are fitted by NUTS in Stan (:mod:`counterfair.audit.sfm_models`). Pass
    the result to :func:`~counterfair.audit.decompose_sfm` and
    :func:`~counterfair.audit.sfm_predictor`.

    Parameters
    ----------
    data : pandas.DataFrame
        The rows (a Dask frame is computed). Rows whose attribute is neither ``x0`` nor
        ``x1`` are left out (a note counts them).
    attribute, x0, x1, outcome, confounders, mediators, categorical, family
        The roles, as :func:`~counterfair.audit.decompose_sfm` documents them.
    seed : int
        Seed of the fits (and of the decomposition's row weights).
    chains, warmup, draws : int
        NUTS settings of each fit (``draws`` per chain).
    groups : {"encoded", "pooled"}
        How a grouping covariate enters (:mod:`counterfair.audit.sfm_models`).
    fit_rows : int, optional
        Fit each model on at most this many rows (a seeded subsample).
    method : {"nuts", "pathfinder"}
        How the models are fitted.
    progress : bool, optional
        The sampler's progress bars.
    **sampler_args
        Passed to every :meth:`~counterfair.SCM.fit`.

    Returns
    -------
    SFMFit

    Raises
    ------
    DataError
        A role naming no column, a column in two roles, and the other mistakes
        :func:`~counterfair.audit.decompose_sfm` lists.
    ValueError
        An option out of range.
    """
    check_fit_options(method=method, groups=groups, fit_rows=fit_rows, chains=chains,
                      draws=draws)
    if hasattr(data, "dask") and hasattr(data, "compute"):
        data = data.compute()  # the fits read every row; a Dask frame is brought in once
    roles = check_sfm_roles(
        data, attribute=attribute, x0=x0, x1=x1, outcome=outcome, confounders=confounders,
        mediators=mediators, categorical=categorical, family=family,
    )
    encoded = sfm_frame(data, roles)
    started = time.perf_counter()
    models = _fit_models(
        roles, encoded, groups, fit_rows, method, chains, warmup, draws, seed, progress,
        sampler_args,
    )
    return SFMFit(
        roles=roles, encoded=encoded, models=models, seed=seed, n_rows=len(data),
        seconds=time.perf_counter() - started,
    )


def _fit_options(
    method: str, chains: int, warmup: int, draws: int, seed: int, progress: bool | None,
    sampler_args: dict[str, Any],
) -> dict[str, Any]:
    if method == "pathfinder":
        if sampler_args:
            raise ValueError(
                f"sampler arguments {sorted(sampler_args)} apply to NUTS only, and a model "
                "is fitted by Pathfinder here: pass method='nuts' to use them"
            )
        return {"method": "pathfinder", "draws": chains * draws, "seed": seed,
                "progress": progress}
    return {
        "chains": chains, "warmup": warmup, "draws": draws, "seed": seed,
        "progress": progress, **sampler_args,
    }


def _diagnostic_note(model: NuisanceModel, n_rows: int) -> str:
    fitted = len(model.fit.data)
    rows = f"{n_rows:,} rows" if fitted == n_rows else f"{fitted:,} of its {n_rows:,} rows"
    if model.fit.method == "pathfinder":
        return (
            f"{model.name} model: {rows}, {model.fit.seconds:.0f} s, by Pathfinder "
            "(approximate draws: no R-hat; its sds tend to be too small)"
        )
    d = model.fit.diagnostics
    return (
        f"{model.name} model: {rows}, {model.fit.seconds:.0f} s, by NUTS, max "
        f"R-hat {d.max_rhat:.3f}, min bulk ESS {d.min_ess_bulk:.0f}, {d.divergences} "
        "divergences"
    )


def _fit_models(
    roles: SFMRoles,
    encoded: SFMFrame,
    groups: str,
    fit_rows: int | None,
    method: str,
    chains: int,
    warmup: int,
    draws: int,
    seed: int,
    progress: bool | None,
    sampler_args: dict[str, Any],
) -> dict[str, NuisanceModel]:
    models: dict[str, NuisanceModel] = {}
    every = np.ones(len(encoded.x), dtype=bool)
    plan = [("outcome", every, 0)]
    if roles.confounders:
        plan.append(("attribute", every, 2))
    for which, mask, k in plan:
        t0 = time.perf_counter()
        options = _fit_options(method, chains, warmup, draws, seed + k, progress, sampler_args)
        models[which] = fit_nuisance(
            roles, encoded, which, mask, name=which, groups=groups, fit_options=options,
            fit_rows=fit_rows, subsample_seed=seed + 100 + k,
        )
        _log.info(
            "decompose_sfm: the %s model on %d rows fitted by %s in %.1f s",
            which, int(mask.sum()), method, time.perf_counter() - t0,
        )
    return models
