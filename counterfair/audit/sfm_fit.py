"""The fitted nuisance models of the Standard Fairness Model, once, for every use.

:func:`fit_sfm` is the entry point of the SFM decomposition (no SCM): it checks the roles,
encodes the rows and fits the outcome's and the attribute's regressions
(:mod:`counterfair.audit.sfm_models`) as its :class:`SFMSettings` say. The
:class:`SFMFit` it returns is everything else, so a user who wants several fits the
models once::

    fitted = cf.audit.fit_sfm(data, attribute="sex", x0="male", x1="female",
                              outcome="salary", confounders=["age"], mediators=["hours"])
    fitted.decompose()                            # the terms (counterfair.audit.sfm)
    fitted.split(confounders=[...], mediators=[...])   # (counterfair.audit.sfm_split)
    fitted.predictor(allow=["IE"])                # (counterfair.audit.sfm_predictor)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .decomposition_result import Decomposition
from .sfm import decompose_fit
from .sfm_models import GROUPINGS, NuisanceModel, SFMFrame, fit_nuisance, sfm_frame
from .sfm_predictor import SFMPredictor, predictor_of
from .sfm_roles import SFMRoles, check_sfm_roles
from .sfm_split import Groups, split_fit
from .split_result import EffectSplit

__all__ = ["METHODS", "SFMFit", "SFMSettings", "fit_sfm"]

METHODS = ("nuts", "pathfinder")
"""How the nuisance models are fitted (``method=`` of :class:`SFMSettings`)."""

_log = logging.getLogger("counterfair.audit.sfm")


@dataclass(frozen=True, kw_only=True)
class SFMSettings:
    """How :func:`fit_sfm` fits the nuisance models: one frozen object, checked when made.

    Parameters
    ----------
    method : {"nuts", "pathfinder"}
        How the nuisance models are fitted (Pathfinder's draws are approximate; the
        notes say so).
    chains, warmup, draws : int
        NUTS settings of each nuisance fit (``draws`` per chain; at least the
        decomposition's ``n_samples`` draws in all; the default 2, 300 and 300 gives
        each of its 200 samples its own posterior draw). Pathfinder draws ``chains *
        draws``.
    groups : {"encoded", "pooled"}
        How a grouping covariate enters a model (:mod:`counterfair.audit.sfm_models`):
        its cross-fitted empirical-Bayes means over both levels' rows with one weight
        (default), or partially pooled intercepts in Stan shared by both levels of X
        (slow for many levels: see there).
    fit_rows : int, optional
        Fit each nuisance model on at most this many of its rows (a seeded random
        subsample; the posterior is then that of the subsample, wider than all the
        rows'), while every row is still evaluated and weighted. Default: all the rows.
    progress : bool, optional
        The sampler's progress bars.
    sampler_args : mapping, optional
        Passed to every :meth:`~counterfair.SCM.fit` (``max_depth``, ``backend``, ...);
        NUTS only.

    Raises
    ------
    ValueError
        An option out of range, or sampler arguments with Pathfinder.
    """

    method: str = "nuts"
    chains: int = 2
    warmup: int = 300
    draws: int = 300
    groups: str = "encoded"
    fit_rows: int | None = None
    progress: bool | None = None
    sampler_args: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        fit_rows = self.fit_rows
        if fit_rows is not None and (
            isinstance(fit_rows, bool) or not isinstance(fit_rows, int) or fit_rows < 100
        ):
            raise ValueError(
                f"fit_rows must be an integer of at least 100 or None, got {fit_rows!r}"
            )
        if self.groups not in GROUPINGS:
            raise ValueError(f"groups must be one of {GROUPINGS}, got {self.groups!r}")
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        for name, value in (("chains", self.chains), ("draws", self.draws)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        warmup = self.warmup
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise ValueError(f"warmup must be 0 or a positive integer, got {warmup!r}")
        if not isinstance(self.sampler_args, Mapping):
            raise TypeError(
                "sampler_args is a mapping of SCM.fit's sampler arguments (e.g. "
                f"{{'max_depth': 12}}), got {self.sampler_args!r}"
            )
        if self.method == "pathfinder" and self.sampler_args:
            raise ValueError(
                f"sampler arguments {sorted(self.sampler_args)} apply to NUTS only, and a "
                "model is fitted by Pathfinder here: pass method='nuts' to use them"
            )
        object.__setattr__(self, "sampler_args", dict(self.sampler_args))


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

    def decompose(
        self,
        *,
        n_samples: int = 200,
        interval: float = 0.9,
        rows: str = "bayesian_bootstrap",
        chunk_rows: int = 20_000,
    ) -> Decomposition:
        """Decompose the gap ``TV = E[y | x1] - E[y | x0]`` from these fits, with no SCM.

        Every term of :func:`~counterfair.audit.decompose` is computed from the
        outcome's and the attribute's regressions, draw by draw
        (:mod:`counterfair.audit.sfm`).

        Parameters
        ----------
        n_samples : int
            Draws of the terms (each a posterior draw of every model and a weight
            vector); at most the posterior draws of each fit.
        interval : float
            Mass of the equal-tailed intervals.
        rows : {"bayesian_bootstrap", "fixed"}
            The rows' weights: a flat Dirichlet per draw (intervals carry the sampling
            of the rows) or all 1 (the models' uncertainty only; TV is the raw gap
            exactly).
        chunk_rows : int
            Rows evaluated at a time (memory ``~ 8 * n_samples * chunk_rows`` bytes per
            array); the result does not depend on it.

        Returns
        -------
        Decomposition
            The terms' draws and table; its notes say the outcome's family and why, the
            estimator, the rows' weights and each nuisance fit's diagnostics.

        Raises
        ------
        ValueError
            An option out of range, or more samples than a fit has draws.
        """
        return decompose_fit(self, n_samples=n_samples, interval=interval, rows=rows,
                             chunk_rows=chunk_rows)

    def split(
        self,
        *,
        confounders: Groups | None = None,
        mediators: Groups | None = None,
        n_samples: int = 200,
        interval: float = 0.9,
        rows: str = "bayesian_bootstrap",
        chunk_rows: int = 20_000,
    ) -> EffectSplit:
        """Split the spurious effect by confounder and the indirect effect by mediator
        (:mod:`counterfair.audit.sfm_split`).

        Parameters
        ----------
        confounders, mediators : sequence of str or of sequences of str, optional
            The ordered groups of the fit's confounders (splitting Ctf-SE) and of its
            mediators (splitting Ctf-IE): each entry a column or a list of columns,
            every one of the role's columns in exactly one group, at least two groups;
            the earliest group first (causal order: :mod:`counterfair.audit.sfm_split`
            says why it matters). At least one of the two.
        n_samples, interval, rows, chunk_rows
            As :meth:`decompose`'s; the decomposition the parts add up to is the one it
            gives for the same options, draw for draw.

        Returns
        -------
        EffectSplit
            The parts' table and draws, the decomposition, and notes on the assumptions.

        Raises
        ------
        ValueError
            A group naming a column not in the role, a column named twice or left out,
            one group only, or a split of a role the fit does not have.
        """
        return split_fit(self, confounders=confounders, mediators=mediators,
                         n_samples=n_samples, interval=interval, rows=rows,
                         chunk_rows=chunk_rows)

    def predictor(
        self, *, allow: str | Sequence[str] = ("IE",), n_draws: int = 200
    ) -> SFMPredictor:
        """A prediction of the outcome that carries only the ``allow``-ed x-specific
        effects (:mod:`counterfair.audit.sfm_predictor`).

        Parameters
        ----------
        allow : str or sequence of {"DE", "IE", "SE"}
            The effects the prediction may carry (the business necessity set); the
            others are removed. Default: the indirect effect only.
        n_draws : int
            Posterior draws of the outcome model averaged into its mean.

        Returns
        -------
        SFMPredictor

        Raises
        ------
        ValueError
            An effect not in :data:`~counterfair.audit.sfm_predictor.EFFECTS`, or named
            twice.
        """
        return predictor_of(self, allow=allow, n_draws=n_draws)


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
    settings: SFMSettings | None = None,
) -> SFMFit:
    """Fit the Standard Fairness Model's nuisance models, with no SCM.

    The user names the protected attribute ``X`` and its levels, the confounders ``Z``,
    the mediators ``W`` and the outcome ``Y``; the outcome's regression on ``X``, ``Z``
    and ``W`` (``X`` interacting with every other term) and the attribute's regression
    on ``Z`` are fitted by NUTS in Stan (:mod:`counterfair.audit.sfm_models`). The
    result decomposes the gap (:meth:`SFMFit.decompose`), splits its terms
    (:meth:`SFMFit.split`) and builds a predictor fair by business necessity
    (:meth:`SFMFit.predictor`) from these fits.

    Parameters
    ----------
    data : pandas.DataFrame
        The rows (a Dask frame is computed). Rows whose ``X`` is neither ``x0`` nor
        ``x1`` are left out (a note counts them).
    attribute : str
        ``X``.
    x0, x1 : object
        The two levels compared (``TV = E[y | x1] - E[y | x0]``); compared as strings.
    outcome : str
        ``Y``: a number, a count or a two-valued column.
    confounders, mediators : str or sequence of str
        ``Z`` and ``W`` (either may be empty).
    categorical : str or sequence of str, optional
        Numeric covariates to treat as categories (codes). Non-numeric columns are
        categories anyway; a category with more than
        :data:`~counterfair.audit.sfm_roles.GROUP_LEVELS` levels is a partially pooled
        group effect.
    family : {"normal", "negative_binomial", "poisson", "bernoulli"}, optional
        The outcome's family. Default: chosen from the column (two values: Bernoulli;
        an overdispersed non-negative whole number: negative binomial with a log link;
        a count: Poisson; else Normal); the choice and its reason are in the notes.
    seed : int
        Seed of the fits (and of the decomposition's row weights).
    settings : SFMSettings, optional
        How the models are fitted (method, chains, warmup, draws, groups, fit_rows,
        progress, sampler arguments). Default: ``SFMSettings()``.

    Returns
    -------
    SFMFit

    Raises
    ------
    DataError
        Naming the column: a column in two roles, a role naming no column, ``X`` with
        one level, ``x0`` equal to ``x1``, a constant mediator, missing values.
    TypeError
        ``settings`` that is not an :class:`SFMSettings`.
    """
    if settings is None:
        settings = SFMSettings()
    elif not isinstance(settings, SFMSettings):
        raise TypeError(
            "settings= takes an SFMSettings (e.g. cf.audit.SFMSettings(chains=4)), got "
            f"{type(settings).__name__}"
        )
    if hasattr(data, "dask") and hasattr(data, "compute"):
        data = data.compute()  # the fits read every row; a Dask frame is brought in once
    roles = check_sfm_roles(
        data, attribute=attribute, x0=x0, x1=x1, outcome=outcome, confounders=confounders,
        mediators=mediators, categorical=categorical, family=family,
    )
    encoded = sfm_frame(data, roles)
    started = time.perf_counter()
    models = _fit_models(roles, encoded, seed, settings)
    return SFMFit(
        roles=roles, encoded=encoded, models=models, seed=seed, n_rows=len(data),
        seconds=time.perf_counter() - started,
    )


def _fit_options(settings: SFMSettings, seed: int) -> dict[str, Any]:
    if settings.method == "pathfinder":
        return {"method": "pathfinder", "draws": settings.chains * settings.draws,
                "seed": seed, "progress": settings.progress}
    return {
        "chains": settings.chains, "warmup": settings.warmup, "draws": settings.draws,
        "seed": seed, "progress": settings.progress, **settings.sampler_args,
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
    roles: SFMRoles, encoded: SFMFrame, seed: int, settings: SFMSettings
) -> dict[str, NuisanceModel]:
    models: dict[str, NuisanceModel] = {}
    every = np.ones(len(encoded.x), dtype=bool)
    plan = [("outcome", every, 0)]
    if roles.confounders:
        plan.append(("attribute", every, 2))
    for which, mask, k in plan:
        t0 = time.perf_counter()
        models[which] = fit_nuisance(
            roles, encoded, which, mask, name=which, groups=settings.groups,
            fit_options=_fit_options(settings, seed + k), fit_rows=settings.fit_rows,
            subsample_seed=seed + 100 + k,
        )
        _log.info(
            "fit_sfm: the %s model on %d rows fitted by %s in %.1f s",
            which, int(mask.sum()), settings.method, time.perf_counter() - t0,
        )
    return models
