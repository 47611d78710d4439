"""Where a disparity comes from: its causal decomposition into direct, indirect and
spurious effects, with posterior intervals, for the world (an outcome) or for a model.

Causal Fairness Analysis (Plečko and Bareinboim, *Foundations and Trends in Machine
Learning* 17(3), 2024; the R package faircause) splits the observed gap between two
levels ``x0`` and ``x1`` of a protected attribute ``X``,

    TV = E[y | x1] - E[y | x0],

into what ``X`` does along the direct path, what it does through the mediators ``W``
(its observed descendants) and what comes with it through the confounders ``Z`` (its
non-descendants) without being caused by it. ``y`` is an observed node of the fitted SCM
or the output of any predictor. Each term compares potential outcomes of the same units:
``y_x`` is ``y`` under ``do(X = x)``, and ``y_{x1, W_{x0}}`` is ``y`` when ``X`` is set
to ``x1`` but the mediators keep the values they take under ``x0``.

x-specific form (the units of group ``x0``)::

    Ctf-DE(y | x0) = E[y_{x1, W_{x0}} | x0] - E[y_{x0} | x0]
    Ctf-IE(y | x0) = E[y_{x1, W_{x0}} | x0] - E[y_{x1} | x0]
    Ctf-SE(y)      = E[y_{x1} | x0]         - E[y_{x1} | x1]
    TV             = Ctf-DE - Ctf-IE - Ctf-SE

The identity holds because ``E[y_{x0} | x0] = E[y | x0]`` and ``E[y_{x1} | x1] =
E[y | x1]`` (consistency: the world of the factual level is the factual world).

General form (all the rows)::

    NDE        = E[y_{x1, W_{x0}}] - E[y_{x0}]
    NIE        = E[y_{x1, W_{x0}}] - E[y_{x1}]
    Exp-SE_x   = E[y | x] - E[y_x]              (for x = x0 and x = x1)
    TV         = NDE - NIE + Exp-SE_x1 - Exp-SE_x0

Here the identity is algebra: ``NDE - NIE = E[y_{x1}] - E[y_{x0}]`` and ``Exp-SE_x1 -
Exp-SE_x0 = TV - (E[y_{x1}] - E[y_{x0}])``. The signs are faircause's: its ``ExpSE_x1``
is ``P(y | x1) - P(y_{x1})`` and its ``ExpSE_x0`` is ``P(y | x0) - P(y_{x0})``, its
``NIE`` is ``NIE_{x1, x0}``, and its estimates satisfy ``TV = NDE - NIE + ExpSE_x1 -
ExpSE_x0`` (the text its ``summary`` prints names the two spurious terms in the other
order).

How the terms are computed
--------------------------
Every term comes from one abduction of the rows (:meth:`counterfair.Fit.abduct` with
``method="draws"``): joint samples of parameters and latents, each row's noise abducted
once and shared by all worlds. For each sample ``s`` the worlds of the rows are built --
the factual world, ``do(X = x0)``, ``do(X = x1)`` (a row already at ``x`` keeps its
factual world under ``do(X = x)``: only the other rows are moved)
(:func:`counterfair.counterfactual.action.counterfactual_world`) and the nested world
``y_{x1, W_{x0}}`` (:func:`counterfair.counterfactual.paths.path_specific_values`: the
paths from ``X`` through a mediator see ``x0``, every other path sees ``x1``) -- ``y``
is read in each (an outcome's column, or the predictor applied to the world's frame, as
the counterfactual audit does), and each term is an average over rows: over the rows
with ``X = x`` for a conditional expectation, over every row for ``E[y_x]``. The rows
keep their own joint distribution of ``X`` and ``Z`` (protected attributes are roots in
counterfair, so their dependence lives in the rows); nothing assumes them independent.
The posterior mean and an equal-tailed interval are taken over the samples, so they
carry the uncertainty of the parameters and of the latents, and the identities hold
sample by sample.

Without a confounder (``Z`` empty) the SCM makes ``X`` independent of every exogenous
variable, so ``y_{x1}`` given ``x0`` has the law of ``y`` given ``x1``: the spurious
terms are 0, reported as 0 with a note, and ``E[y_{x1} | x0]`` and ``E[y_x]`` are taken
as ``E[y | x1]`` and ``E[y | x]`` so that the identities still hold sample by sample.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.counterfactual.action import (
    WORLD_COUNTERFACTUAL,
    counterfactual_world,
    coupled_noise,
    factual_world,
    missing_nodes,
)
from counterfair.counterfactual.paths import mediator_paths, path_specific_values
from counterfair.counterfactual.prediction import (
    RESPONSES,
    Predictor,
    Response,
    audited_response,
    multiclass_labels,
    needs_both_worlds,
    predict_deployed,
    predict_output,
    predict_world,
    response_text,
    takes_rows,
)
from counterfair.counterfactual.world import World
from counterfair.errors import (
    CONTINUOUS_ATTRIBUTE,
    NOT_AN_OUTCOME,
    NOT_PROTECTED,
    SAME_LEVELS,
    UNKNOWN_LEVEL,
    UNKNOWN_ROLE_NODE,
)
from counterfair.inference.abducted_chunks import abduct_chunks
from counterfair.inference.fit import Abduction, Fit
from counterfair.rng import RandomSource
from counterfair.rows.measure import Measure, run
from counterfair.rows.validated import Rows

from ._validation import check_open_unit
from .decomposition_result import (
    DECOMPOSITION_FORMS,
    DECOMPOSITION_TERMS,
    EFFECTS,
    TABLE_COLUMNS,
    Decomposition,
    table_of,
)
from .streaming import DecompositionSums

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

__all__ = [
    "DECOMPOSITION_FORMS",
    "DECOMPOSITION_TERMS",
    "EFFECTS",
    "TABLE_COLUMNS",
    "Decomposition",
    "DecompositionMeasure",
    "DecompositionSettings",
    "decompose",
    "decomposition_measure",
    "decomposition_sums",
    "finish_decomposition",
    "mediator_paths",
]



DEFAULT_DECOMPOSITION_SAMPLES = 200
"""Joint samples of parameters and latents per row unless ``n_samples`` is given."""

MCMC_PARAM_DRAWS = 20
"""Posterior parameter draws the MCMC abduction program conditions on by default (as the
counterfactual audit); exact abduction takes one parameter draw per sample."""


@dataclass(frozen=True, kw_only=True)
class DecompositionSettings:
    """How :func:`decompose` estimates its terms, checked when made.

    ``cf.audit.decompose(fit, rows, attribute="race", x0="White", x1="Black",
    outcome="ZFYA", settings=cf.audit.DecompositionSettings(n_samples=500))``.

    Parameters
    ----------
    n_samples : int
        Joint samples of parameters and latents per row.
    n_param_draws : int, optional
        Posterior parameter draws the abduction integrates over (default: one per
        sample where abduction is exact or the SCM has no latent, else
        :data:`MCMC_PARAM_DRAWS`).
    seed : int, optional
        Seed of the abduction and of the counterfactual draws.
    interval : float
        Mass of the equal-tailed posterior intervals.
    """

    n_samples: int = DEFAULT_DECOMPOSITION_SAMPLES
    n_param_draws: int | None = None
    seed: int | None = 0
    interval: float = 0.9

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_samples", _check_samples(self.n_samples, "n_samples"))
        if self.n_param_draws is not None:
            object.__setattr__(
                self, "n_param_draws", _check_samples(self.n_param_draws, "n_param_draws")
            )
        object.__setattr__(self, "interval", check_open_unit(self.interval, "interval"))

# ---------------------------------------------------------------------- error texts
# (the refusals ``counterfair decompose`` makes before loading a fit are in
# counterfair.errors, imported above, so that the command line reads them cheaply)
NO_ROWS = (
    "no row has {attribute}={level!r} ({name}): the rows' levels of {attribute!r} are "
    "{present}; a conditional expectation given {name} needs rows of that group"
)
OUTCOME_OR_PREDICTOR = (
    "give exactly one of outcome= (a node of the SCM: is the world fair?) and predictor= "
    "(a model's output: is the model fair?); got {got}"
)
RESPONSE_WITH_OUTCOME = (
    "response={response!r} applies to a predictor's output; the outcome {outcome!r} is "
    "averaged as its column holds it: drop response="
)
BAD_RESPONSE = "response must be one of {allowed}, got {got!r}"
MULTICLASS = (
    "predictor {name} predicts labels of more than two classes, which have no mean to "
    "decompose; give response='probability' for a binary classifier, or a function "
    "returning one number per row"
)
PREDICTOR_NOT_NUMERIC = (
    "predictor {name}: its output is not numeric, so it has no mean to decompose ({error})"
)
PREDICTOR_SHAPE = (
    "predictor {name} returned {got} value(s) for a world of {expected} rows x samples; "
    "it must return one number per row"
)
PREDICTOR_NOT_FINITE = (
    "predictor {name} returned {count} non-finite value(s) (NaN or inf) in the {world} "
    "world; every output must be a finite number"
)
ROLE_IS_SPECIAL = "{option} names {node!r}, which is the {what}; it cannot be one of {role}"
ROLE_KIND = (
    "{option} names {node!r}, a {kind} node; {role} are {allowed} nodes"
)
BOTH_ROLES = (
    "{node!r} is named both a mediator and a confounder; a node is one or the other (a "
    "descendant of the attribute mediates, a non-descendant confounds)"
)
BAD_SAMPLES = "{name} must be a positive integer, got {value!r}"

# ---------------------------------------------------------------------- notes
NOTE_NO_CONFOUNDER = (
    "no confounder: Ctf-SE, Exp-SE_x0 and Exp-SE_x1 are 0 because {why}, so in the SCM "
    "{attribute!r} is independent of every exogenous variable and y_x1 given {attribute} = "
    "x0 has the law of y given {attribute} = x1; E[y_x1 | x0] is taken as E[y | x1] and "
    "E[y_x] as E[y | x], so TV = Ctf-DE - Ctf-IE = NDE - NIE"
)
NOTE_NO_MEDIATOR = (
    "no mediator: Ctf-IE and NIE are 0 because no path from {attribute!r} runs through a "
    "mediator, so y_(x1, W_x0) is y_x1"
)
NOTE_NOT_A_DESCENDANT = (
    "mediator {node!r} is not a descendant of {attribute!r}: no path from {attribute!r} "
    "runs through it, so holding it at its x0 value changes nothing"
)
NOTE_DIRECT = (
    "{node!r} is a descendant of {attribute!r} but not a mediator: paths from "
    "{attribute!r} through it count as direct (it sees x1 in y_(x1, W_x0))"
)
NOTE_CONFOUNDER_DESCENDANT = (
    "confounder {node!r} is a descendant of {attribute!r}: {attribute!r} causes it, so it "
    "does not confound; paths from {attribute!r} through it count as direct (it sees x1 "
    "in y_(x1, W_x0))"
)
NOTE_OUTCOME_NOT_DESCENDANT = (
    "the outcome {outcome!r} is not a descendant of {attribute!r}: {attribute!r} has no "
    "effect on it in the SCM, so the direct and indirect effects are 0 and the whole gap "
    "is spurious"
)
NOTE_OUTCOME_SIMULATED = (
    "the outcome {outcome!r} is not a column of the rows: its factual values are "
    "simulated from the abducted inputs, so TV is the model's gap, not the data's"
)
NOTE_RESPONSE = (
    "y is {what} (response={response!r}){other}"
)
NOTE_OTHER_LEVELS = (
    "{count} row(s) have another level of {attribute!r}: they enter the averages over all "
    "rows of the general form (E[y_x], NDE, NIE), not the x-specific terms"
)


# ---------------------------------------------------------------------- the checks
def _check_levels(fit: Fit, attribute: str, x0: object, x1: object) -> tuple[str, str]:
    """The two levels as strings, checked: a categorical protected attribute, two
    different levels known to the fit."""
    scm = fit.scm
    if attribute not in scm.protected:
        specs = scm.specs
        role = (
            f" (it is a {type(specs[attribute]).__name__} node)"
            if attribute in specs
            else " (it is not a node of the SCM)"
        )
        raise errors.SCMError(
            NOT_PROTECTED.format(attribute=attribute, role=role, protected=list(scm.protected))
        )
    if fit.encoding.is_continuous(attribute):
        raise ValueError(CONTINUOUS_ATTRIBUTE.format(attribute=attribute))
    level0, level1 = str(x0), str(x1)
    if level0 == level1:
        raise ValueError(SAME_LEVELS.format(level=level0, attribute=attribute))
    levels = list(fit.encoding.levels[attribute])
    for name, value, level in (("x0", x0, level0), ("x1", x1, level1)):
        if level not in levels:
            raise errors.DataError(
                UNKNOWN_LEVEL.format(name=name, value=value, attribute=attribute, levels=levels)
            )
    return level0, level1


def _check_target(
    scm: SCM, outcome: str | None, predictor: Predictor | None, response: str | None
) -> None:
    """Exactly one of outcome and predictor; an observed outcome; a known response."""
    if (outcome is None) == (predictor is None):
        got = "both" if outcome is not None else "neither"
        raise ValueError(OUTCOME_OR_PREDICTOR.format(got=got))
    if response is not None and response not in RESPONSES:
        raise ValueError(BAD_RESPONSE.format(allowed=RESPONSES, got=response))
    if outcome is not None:
        if outcome not in scm.observed:
            what = (
                f"a {type(scm.specs[outcome]).__name__} node"
                if outcome in scm.specs
                else "not a node of the SCM"
            )
            raise errors.SCMError(
                NOT_AN_OUTCOME.format(outcome=outcome, what=what, observed=list(scm.observed))
            )
        if response not in (None, "prediction"):
            raise ValueError(RESPONSE_WITH_OUTCOME.format(response=response, outcome=outcome))


def _check_samples(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(BAD_SAMPLES.format(name=name, value=value))
    return int(value)


def _named_nodes(
    scm: SCM,
    given: str | Sequence[str],
    *,
    option: str,
    role: str,
    attribute: str,
    outcome: str | None,
    allowed: tuple[str, ...],
) -> tuple[str, ...]:
    """Nodes given by hand for a role, checked, in the SCM's order, without repeats."""
    names = [given] if isinstance(given, str) else [str(node) for node in given]
    specs = scm.specs
    for node in names:
        if node not in specs:
            raise errors.SCMError(
                UNKNOWN_ROLE_NODE.format(option=option, node=node, nodes=list(scm.nodes))
            )
        if node in (attribute, outcome):
            what = "protected attribute decomposed" if node == attribute else "outcome"
            raise errors.SCMError(
                ROLE_IS_SPECIAL.format(option=option, node=node, what=what, role=role)
            )
        kind = _kind(scm, node)
        if kind not in allowed:
            raise errors.SCMError(
                ROLE_KIND.format(
                    option=option, node=node, kind=kind, role=role, allowed=" or ".join(allowed)
                )
            )
    chosen = set(names)
    return tuple(node for node in scm.nodes if node in chosen)


def _kind(scm: SCM, node: str) -> str:
    if node in scm.protected:
        return "protected"
    if node in scm.latents:
        return "latent"
    return "observed"


@dataclass(frozen=True)
class _Roles:
    """The confounders and mediators, and the notes about them."""

    confounders: tuple[str, ...]
    mediators: tuple[str, ...]
    notes: tuple[str, ...]


def _roles(
    scm: SCM,
    attribute: str,
    outcome: str | None,
    mediators: str | Sequence[str] | None,
    confounders: str | Sequence[str] | None,
) -> _Roles:
    """Z and W: by default the observed and protected non-descendants of the attribute and
    its observed descendants, leaving out the outcome and what it causes (which cannot
    mediate or confound an effect on it)."""
    caused = scm.descendants(attribute)
    after_outcome: frozenset[str] = (
        scm.descendants(outcome) | {outcome} if outcome is not None else frozenset()
    )
    if mediators is None:
        w = tuple(n for n in scm.observed if n in caused and n not in after_outcome)
    else:
        w = _named_nodes(
            scm, mediators, option="mediators", role="the mediators", attribute=attribute,
            outcome=outcome, allowed=("observed",),
        )
    if confounders is None:
        z = tuple(
            n
            for n in scm.nodes
            if n != attribute
            and n not in caused
            and n not in after_outcome
            and _kind(scm, n) != "latent"
        )
    else:
        z = _named_nodes(
            scm, confounders, option="confounders", role="the confounders",
            attribute=attribute, outcome=outcome, allowed=("observed", "protected"),
        )
    for node in w:
        if node in z:
            raise errors.SCMError(BOTH_ROLES.format(node=node))
    notes: list[str] = []
    if outcome is not None and outcome not in caused:
        notes.append(NOTE_OUTCOME_NOT_DESCENDANT.format(outcome=outcome, attribute=attribute))
    if not z:
        why = (
            "no confounder was given (confounders=[])"
            if confounders is not None
            else f"{attribute!r} has no observed or protected non-descendant"
        )
        notes.append(NOTE_NO_CONFOUNDER.format(why=why, attribute=attribute))
    for node in w:
        if node not in caused:
            notes.append(NOTE_NOT_A_DESCENDANT.format(node=node, attribute=attribute))
    if not any(node in caused for node in w):
        notes.append(NOTE_NO_MEDIATOR.format(attribute=attribute))
    for node in scm.observed:
        if node in caused and node not in w and node not in after_outcome:
            text = NOTE_CONFOUNDER_DESCENDANT if node in z else NOTE_DIRECT
            notes.append(text.format(node=node, attribute=attribute))
    return _Roles(confounders=z, mediators=w, notes=tuple(notes))


# ---------------------------------------------------------------------- the worlds
def _nested_world(
    fit: Fit,
    factual: World,
    *,
    attribute: str,
    code0: int,
    code1: int,
    mediators: Sequence[str],
    rng: RandomSource,
) -> World:
    """The world of ``y_{x1, W_{x0}}``: ``X`` at ``x1`` on every path except those through
    a mediator, which see ``x0`` (the path-specific engine, with ``x1`` as its default)."""
    scm = fit.scm
    abduction = factual.abduction
    n = len(abduction.data)
    simulated = {node: factual.values[node] for node in missing_nodes(scm, abduction)}
    simulated_noise = {k: v for k, v in factual.noise.items() if k in simulated}
    at_x1 = np.full(n, code1, dtype=np.int64)
    paths = mediator_paths(scm, attribute, mediators)
    layers = [(paths, np.full(n, code0, dtype=np.int64))] if paths else []
    values = path_specific_values(
        scm,
        abduction,
        source=attribute,
        layers=layers,
        default_codes=at_x1,
        rng=rng,
        simulated=simulated,
        simulated_noise=simulated_noise,
    )
    return World(
        name=WORLD_COUNTERFACTUAL,
        abduction=abduction,
        codes={**abduction.codes, attribute: at_x1},
        values=values,
        noise=factual.noise,
    )


def _predictor_name(predictor: Predictor) -> str:
    owner = getattr(predictor, "__self__", None)
    if owner is not None:
        return f"{type(owner).__name__}.{getattr(predictor, '__name__', 'method')}"
    name = getattr(predictor, "__name__", None)
    return str(name) if name is not None else type(predictor).__name__


def _outputs(
    fit: Fit,
    abduction: Abduction,
    *,
    attribute: str,
    levels: tuple[str, str],
    mediators: Sequence[str],
    outcome: str | None,
    predictor: Predictor | None,
    response: Response,
    seed: int | None,
) -> dict[str, np.ndarray]:
    """``y`` in the four worlds of the rows, each ``(S, N)``: ``"factual"``, ``"x0"``,
    ``"x1"`` and ``"x1,W_x0"``."""
    scm = fit.scm
    shape = (abduction.n_samples, len(abduction.data))
    code0, code1 = (int(fit.encoding.code(attribute, [level])[0]) for level in levels)
    if predictor is not None and needs_both_worlds(predictor, fit):
        return _path_learner_outputs(
            predictor, abduction, attribute=attribute, codes=(code0, code1),
            mediators=mediators, response=response, shape=shape,
        )
    rng = abduction.row_random(seed)
    factual = factual_world(fit, abduction, rng)
    shared = coupled_noise(scm, factual, rng, sorted(scm.descendants(attribute)))

    def read(world: World, name: str, rows: int) -> np.ndarray:
        if outcome is not None:
            return np.broadcast_to(world.values[outcome], (shape[0], rows)).astype(float)
        return _predict(fit, predictor, world, response, name, (shape[0], rows))

    out = {"factual": _factual_output(fit, abduction, factual, predictor, response, read)}
    codes = np.asarray(abduction.codes[attribute])
    for name, level, code in (("x0", levels[0], code0), ("x1", levels[1], code1)):
        # consistency: the world do(X = x) of a row whose level is x is its factual world,
        # so only the other rows are moved (the audit's subsets, keyed by row position)
        moved = codes != code
        values = out["factual"].copy()
        if moved.any():
            rows = abduction.take_rows(moved)
            counter = counterfactual_world(
                fit, factual.take_rows(moved, rows), {attribute: level}, rows.row_random(seed),
                shared_noise={k: v[:, moved] for k, v in shared.items()},
            )
            values[:, moved] = read(counter, name, int(moved.sum()))
        out[name] = values
    nested = _nested_world(
        fit, factual, attribute=attribute, code0=code0, code1=code1, mediators=mediators,
        rng=rng,
    )
    out["x1,W_x0"] = read(nested, "x1,W_x0", shape[1])
    return out


def _factual_output(
    fit: Fit,
    abduction: Abduction,
    factual: World,
    predictor: Predictor | None,
    response: Response,
    read: Any,
) -> np.ndarray:
    """``y`` in the factual world, ``(S, N)``. A learner (deployed: its output depends on
    the rows' columns and positions only) is run once on the rows when they hold every
    observed node, every sample being the same rows, and its output repeated: the
    learner's output on the rows, whose gap between the groups is TV in every sample."""
    s, n = abduction.n_samples, len(abduction.data)
    if (
        predictor is None
        or not takes_rows(predictor)
        or missing_nodes(fit.scm, abduction)
        or abduction.holes  # each sample holds its own values where the rows miss them
    ):
        return np.asarray(read(factual, "factual", n))
    frame = factual.frame(fit.scm, fit.encoding, latents=False).iloc[:n]
    frame.index = abduction.data.index  # the rows, as a Dask task keys them
    label = _predictor_name(predictor)
    try:
        values = predict_output(
            predictor, frame, response, positions=np.asarray(abduction.row_positions)
        )
    except TypeError as error:
        raise TypeError(PREDICTOR_NOT_NUMERIC.format(name=label, error=error)) from error
    once = _checked_output(label, values, "factual", (1, n))
    return np.repeat(once, s, axis=0)


def _path_learner_outputs(
    predictor: Predictor,
    abduction: Abduction,
    *,
    attribute: str,
    codes: tuple[int, int],
    mediators: Sequence[str],
    response: Response,
    shape: tuple[int, int],
) -> dict[str, np.ndarray]:
    """A path-specific learner's output in the four worlds, ``(S, N)`` each: its corrected
    inputs recomputed from the abduction in each world (the learner's own engine), the
    nested world holding the paths into the mediators at ``x0`` and the others at
    ``x1``."""
    owner: Any = getattr(predictor, "__self__", predictor)
    if getattr(predictor, "__name__", "") == "predict_proba":
        response = "probability"
    n = shape[1]
    at0, at1 = (np.full(n, code, dtype=np.int64) for code in codes)
    paths = mediator_paths(owner.scm_fit_.scm, attribute, mediators)

    def output(**world: Any) -> np.ndarray:
        return np.asarray(
            owner.path_specific_output(abduction, response=response, **world), dtype=float
        ).reshape(shape)

    x1 = output(world={attribute: at1})
    nested = (
        output(world={attribute: at0}, world_paths=list(paths), rest=at1) if paths else x1
    )
    return {
        "factual": output(),
        "x0": output(world={attribute: at0}),
        "x1": x1,
        "x1,W_x0": nested,
    }


def _predict(
    fit: Fit,
    predictor: Predictor,
    world: World,
    response: Response,
    name: str,
    shape: tuple[int, int],
) -> np.ndarray:
    """The predictor's output in a world, ``(S, N)``, checked to be finite numbers. A
    FairLearner is run as it is deployed (:func:`predict_deployed`): on the world's
    columns, abducting its inputs again, as the same function given as a plain callable
    would be."""
    label = _predictor_name(predictor)
    try:
        if takes_rows(predictor):
            values = predict_deployed(predictor, world, fit.scm, fit.encoding, response)
        else:
            values = predict_world(fit, predictor, world, response)
    except TypeError as error:
        raise TypeError(PREDICTOR_NOT_NUMERIC.format(name=label, error=error)) from error
    return _checked_output(label, values, name, shape)


def _checked_output(
    label: str, values: Any, name: str, shape: tuple[int, int]
) -> np.ndarray:
    """A predictor's output as ``(S, N)`` floats, checked to be finite numbers."""
    values = np.asarray(values)
    if values.dtype.kind not in "biuf":
        raise TypeError(
            PREDICTOR_NOT_NUMERIC.format(name=label, error=f"dtype {values.dtype}")
        )
    if values.shape != (shape[0] * shape[1],):
        raise ValueError(
            PREDICTOR_SHAPE.format(name=label, got=values.size, expected=shape[0] * shape[1])
        )
    values = values.astype(float)
    bad = int((~np.isfinite(values)).sum())
    if bad:
        raise ValueError(PREDICTOR_NOT_FINITE.format(name=label, count=bad, world=name))
    return values.reshape(shape)


# ---------------------------------------------------------------------- the terms
# ---------------------------------------------------------------------- the entry point
def decompose(
    fit: Fit,
    data: pd.DataFrame,
    *,
    attribute: str,
    x0: object,
    x1: object,
    outcome: str | None = None,
    predictor: Predictor | None = None,
    response: Response | None = None,
    mediators: str | Sequence[str] | None = None,
    confounders: str | Sequence[str] | None = None,
    settings: DecompositionSettings | None = None,
) -> Decomposition:
    """Split the gap ``E[y | x1] - E[y | x0]`` into direct, indirect and spurious effects.

    ``y`` is an observed node of the SCM (``outcome=``: is the world fair?) or a
    predictor's output (``predictor=``: is the model fair?). The x-specific form gives
    ``TV = Ctf-DE - Ctf-IE - Ctf-SE`` and the general form ``TV = NDE - NIE + Exp-SE_x1
    - Exp-SE_x0``; the module docstring (:mod:`counterfair.audit.decomposition`) has the
    definitions. Every term comes from the same abduction of the rows, so both
    identities hold sample by sample.

    Parameters
    ----------
    fit : Fit
        The fitted SCM, taken as the true world.
    data : pandas.DataFrame
        The rows: the protected columns and the observed columns they have (absent
        observed nodes are simulated from the abducted inputs, as in the counterfactual
        audit). Conditional expectations are averages over these rows, so they carry
        the rows' own joint distribution of the attribute and the confounders.
    attribute : str
        A categorical protected attribute ``X``.
    x0, x1 : str
        Two levels of ``attribute`` known to the fit; TV is ``E[y | x1] - E[y | x0]``
        and the x-specific terms speak of the units of group ``x0``.
    outcome : str, optional
        An observed node of the SCM to decompose.
    predictor : estimator, pipeline or callable, optional
        Any predictor the counterfactual audit takes (an estimator with ``predict``, a
        :class:`~counterfair.FairLearner`, a function of a DataFrame returning one
        number per row), applied to every world's frame. A FairLearner is run as it is
        deployed, a function of the world's protected and observed columns that
        abducts its inputs again (keyed by each row's position, so the factual world
        gives its outputs on the rows and TV is their raw gap between the groups), as
        the same function given as a plain callable would be; a path-specific
        learner computes its corrected inputs from the decomposition's abduction in
        each world (its own engine). Give exactly one of ``outcome`` and
        ``predictor``.
    response : {"prediction", "probability"}, optional
        For a predictor: the probability of the positive class
        (:func:`counterfair.counterfactual.prediction.predict_output`), or its
        predictions (a classifier's labels). By default a binary classifier with
        ``predict_proba`` (an estimator, a pipeline, a classifying
        :class:`~counterfair.FairLearner`) is decomposed on its probabilities and
        any other predictor on its predictions; a note says which.
    mediators : sequence of str, optional
        ``W``, observed nodes (default: the observed descendants of ``attribute``, other
        than the outcome and its descendants; for a predictor, every observed
        descendant, since it may read any of them -- one it does not read changes
        nothing). In ``y_{x1, W_{x0}}`` every path from ``attribute`` through a mediator
        sees ``x0``, every other path ``x1``.
    confounders : sequence of str, optional
        ``Z``, observed or protected nodes (default: the observed and protected
        non-descendants of ``attribute``, other than the outcome and its descendants).
        The SCM and the rows decide the numbers; ``Z`` is reported, and an empty ``Z``
        sets the spurious terms to 0 (with a note).
    settings : DecompositionSettings, optional
        Samples, parameter draws, seed and the intervals' mass (default:
        ``DecompositionSettings()``).

    Returns
    -------
    Decomposition
        ``.table`` (tidy: term, form, mean, sd, lower, upper), ``.draws`` (samples x
        terms), ``.notes``; ``print(result)`` shows :meth:`Decomposition.summary`.
        ``result.allow(("IE",))`` declares effects a business necessity: the others
        are the unfair part of the gap (:meth:`Decomposition.unfair`).

    Raises
    ------
    ValueError
        If both or neither of ``outcome`` and ``predictor`` are given, ``x0`` equals
        ``x1``, ``attribute`` is continuous, ``response`` is unknown (or given with an
        outcome), ``interval`` is not in (0, 1), ``n_samples`` is not a positive
        integer, or the predictor's output has the wrong length or is not finite.
    DataError
        If ``x0`` or ``x1`` is not a level of ``attribute``, or no row has ``X = x0``
        (or ``X = x1``).
    SCMError
        If ``attribute`` is not a protected attribute, ``outcome`` is not an observed
        node, or ``mediators`` / ``confounders`` name an unknown node, the attribute or
        the outcome, a node of the wrong kind, or one node in both roles.
    TypeError
        If the predictor's output is not numeric.

    Examples
    --------
    >>> result = cf.audit.decompose(fit, rows, attribute="race", x0="White",
    ...                             x1="Black", outcome="ZFYA")  # doctest: +SKIP
    >>> result.table  # doctest: +SKIP
    >>> print(result)  # doctest: +SKIP
    """
    measure = decomposition_measure(
        fit, attribute=attribute, x0=x0, x1=x1, outcome=outcome, predictor=predictor,
        response=response, mediators=mediators, confounders=confounders, settings=settings,
    )
    return run(measure, data)


@dataclass(frozen=True)
class DecompositionMeasure(Measure[DecompositionSums, "Decomposition"]):
    """A decomposition as a measure (:mod:`counterfair.rows.measure`): its checked
    settings, shared by every chunk or partition, and the sums of its four worlds."""

    fit: Fit | None
    attribute: str
    levels: tuple[str, str]
    codes: tuple[int, int]
    roles: _Roles
    outcome: str | None
    predictor: Predictor | None
    response: Response
    n_samples: int
    n_param_draws: int | None
    seed: int | None
    interval: float

    @property
    def model(self) -> tuple[Fit | None, Predictor | None]:
        return self.fit, self.predictor

    def with_model(self, model: Any) -> DecompositionMeasure:
        fit, predictor = (None, None) if model is None else model
        return dataclasses.replace(self, fit=fit, predictor=predictor)

    def _fit(self) -> Fit:
        if self.fit is None:
            raise RuntimeError("this decomposition travels without its fit")
        return self.fit

    def rows(self, data: pd.DataFrame, positions: np.ndarray | None = None) -> Rows:
        return self._fit().rows_of(data, positions=positions)

    def check(self, rows: Rows) -> None:
        codes = np.asarray(rows.codes[self.attribute])
        for name, code in zip(("x0", "x1"), self.codes, strict=True):
            if not (codes == code).any():  # before any abduction
                _no_rows(self._fit(), self, name, set(np.unique(codes).tolist()))

    def empty(self) -> DecompositionSums:
        return DecompositionSums(n_samples=self.n_samples)

    def sums(self, rows: Rows) -> DecompositionSums:
        return decomposition_sums(self._fit(), rows, self)

    def merge(self, a: DecompositionSums, b: DecompositionSums) -> DecompositionSums:
        return a.merge(b)

    def result(self, total: DecompositionSums, *, columns: Sequence[str]) -> Decomposition:
        return finish_decomposition(
            self._fit(), self, total, outcome_in_rows=self.outcome in columns
        )


def decomposition_measure(
    fit: Fit,
    *,
    attribute: str,
    x0: object,
    x1: object,
    outcome: str | None = None,
    predictor: Predictor | None = None,
    response: Response | None = None,
    mediators: str | Sequence[str] | None = None,
    confounders: str | Sequence[str] | None = None,
    settings: DecompositionSettings | None = None,
) -> DecompositionMeasure:
    """Check the arguments of :func:`decompose` but the rows once, against the fit."""
    scm = fit.scm
    levels = _check_levels(fit, attribute, x0, x1)
    _check_target(scm, outcome, predictor, response)
    options = DecompositionSettings() if settings is None else settings
    response = "prediction" if predictor is None else audited_response(predictor, response)
    if predictor is not None and multiclass_labels(predictor, response):
        raise ValueError(MULTICLASS.format(name=_predictor_name(predictor)))
    code0, code1 = (int(fit.encoding.code(attribute, [level])[0]) for level in levels)
    return DecompositionMeasure(
        fit=fit,
        attribute=attribute,
        levels=levels,
        codes=(code0, code1),
        roles=_roles(scm, attribute, outcome, mediators, confounders),
        outcome=outcome,
        predictor=predictor,
        response=response,
        n_samples=options.n_samples,
        n_param_draws=options.n_param_draws,
        seed=options.seed,
        interval=options.interval,
    )


def _no_rows(fit: Fit, plan: DecompositionMeasure, name: str, seen: set[int]) -> None:
    level = plan.levels[0 if name == "x0" else 1]
    present = sorted(
        set(fit.encoding.decode(plan.attribute, np.asarray(sorted(seen))).tolist())
    )
    raise errors.DataError(
        NO_ROWS.format(attribute=plan.attribute, level=level, name=name, present=present)
    )


def decomposition_sums(fit: Fit, rows: Rows, plan: DecompositionMeasure) -> DecompositionSums:
    """The mergeable sums of a decomposition over ``rows``, chunk by chunk.

    The rows are abducted and their four worlds built one chunk at a time
    (:func:`counterfair.inference.abducted_chunks.abduct_chunks`, sized by
    :func:`counterfair.options.chunk_bytes`), so memory holds samples x the chunk's rows,
    never samples x all rows. Exact abduction and every draw of the worlds are keyed by
    the rows' global positions and the sums run over the rows in order, so the sums do
    not depend on the chunk size. ``rows`` may be one partition of a larger data set
    (its global positions): the partitions' sums merge
    (:meth:`~counterfair.audit.streaming.DecompositionSums.merge`).
    """
    draws = plan.n_param_draws
    if draws is None:
        draws = plan.n_samples if fit.abduction_is_exact(rows) else MCMC_PARAM_DRAWS
    sums = DecompositionSums(n_samples=plan.n_samples)
    chunks = abduct_chunks(
        fit, rows, method="draws", n_samples=plan.n_samples, n_param_draws=draws,
        seed=plan.seed,
    )
    for _, chunk in chunks:
        y = _outputs(
            fit,
            chunk,
            attribute=plan.attribute,
            levels=plan.levels,
            mediators=plan.roles.mediators,
            outcome=plan.outcome,
            predictor=plan.predictor,
            response=plan.response,
            seed=plan.seed,
        )
        codes = np.asarray(chunk.codes[plan.attribute])
        sums.update(y, codes == plan.codes[0], codes == plan.codes[1], codes)
    return sums


def finish_decomposition(
    fit: Fit, plan: DecompositionMeasure, sums: DecompositionSums, *, outcome_in_rows: bool
) -> Decomposition:
    """The :class:`Decomposition` of the sums of all the rows."""
    for name, count in (("x0", sums.n_x0), ("x1", sums.n_x1)):
        if count == 0:
            _no_rows(fit, plan, name, sums.codes)
    notes = list(plan.roles.notes)
    if plan.outcome is not None and not outcome_in_rows:
        notes.append(NOTE_OUTCOME_SIMULATED.format(outcome=plan.outcome))
    if plan.predictor is not None:
        other = (
            "; response='prediction' decomposes its labels"
            if plan.response == "probability"
            else ""
        )
        notes.append(
            NOTE_RESPONSE.format(
                what=response_text(plan.predictor, plan.response), response=plan.response,
                other=other,
            )
        )
    others = sums.n_rows - sums.n_x0 - sums.n_x1
    if others:
        notes.append(NOTE_OTHER_LEVELS.format(count=others, attribute=plan.attribute))
    terms = sums.terms(no_confounder=not plan.roles.confounders)
    draws = pd.DataFrame(
        {term: terms[term] for term in DECOMPOSITION_TERMS},
        index=pd.RangeIndex(sums.n_samples, name="sample"),
    )
    predictor = plan.predictor
    target = (
        plan.outcome if predictor is None else f"predictor {_predictor_name(predictor)}"
    )
    return Decomposition(
        table=table_of(draws, plan.interval),
        draws=draws,
        attribute=plan.attribute,
        x0=plan.levels[0],
        x1=plan.levels[1],
        target=str(target),
        confounders=plan.roles.confounders,
        mediators=plan.roles.mediators,
        notes=tuple(notes),
        interval=plan.interval,
        n_rows=sums.n_rows,
        n_x0=sums.n_x0,
        n_x1=sums.n_x1,
    )
