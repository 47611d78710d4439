"""Inputs of a path-specific counterfactually fair predictor (Chiappa, 2019).

A :class:`~counterfair.FairLearner` with path-specific inputs
(:class:`counterfair.inputs.PathSpecific`) feeds its
estimator *corrected* observed inputs: for each joint sample of parameters and
latents of a row, every observed node other than the target (and the target's
descendants) is recomputed with the protected attribute ``A`` set to a
``baseline`` level along the unfair paths, while the fair paths keep the row's
own ``a`` and every node keeps its abducted noise (:mod:`counterfair.counterfactual.paths`).
Nodes reached from ``A`` through fair paths only, and non-descendants of ``A``,
keep their observed values; the latents are inputs too (they are fair, as in
Kusner et al.'s level 2).

The corrected inputs no longer depend on ``A`` along the unfair paths, so the
prediction's path-specific change under ``do(A = a')`` is 0 for every sample,
while a change of ``A`` along the fair paths still moves it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from counterfair import errors
from counterfair.counterfactual.action import do_codes, simulate_missing
from counterfair.counterfactual.paths import check_paths, path_source, path_specific_values

if TYPE_CHECKING:
    import pandas as pd

    from counterfair.inference.fit import Abduction, Fit
    from counterfair.model.scm import SCM

NO_PATH_INPUT = (
    "a path-specific learner gives no input for target {target!r}: the SCM has no other "
    "observed node and no latent"
)


def check_path_options(
    scm: SCM, unfair_paths: Sequence[Sequence[str]], baseline: object
) -> tuple[str, tuple[tuple[str, ...], ...]]:
    """The protected attribute and the checked unfair paths of a path-specific learner.

    ``unfair_paths`` and ``baseline`` come from :class:`counterfair.inputs.PathSpecific`,
    which checks their form; this checks them against the graph.

    Raises
    ------
    SCMError
        If the paths are not directed paths of the graph from one protected
        attribute.
    """
    del baseline  # checked against the levels where the worlds are coded
    source = path_source(scm, unfair_paths)
    return source, check_paths(scm, source, unfair_paths)


def input_names(scm: SCM, target: str) -> list[str]:
    """Inputs of a path-specific learner: latents, then observed nodes other than the target
    and its descendants.

    Raises
    ------
    FairnessError
        If there is none.
    """
    after = scm.descendants(target) if target in scm.specs else frozenset()
    observed = [n for n in scm.observed if n != target and n not in after]
    names = [*scm.latents, *observed]
    if not names:
        raise errors.FairnessError(NO_PATH_INPUT.format(target=target))
    return names


def corrected_inputs(
    fit: Fit,
    abduction: Abduction,
    *,
    target: str,
    source: str,
    unfair_paths: Sequence[tuple[str, ...]],
    baseline: object,
    seed: int | None,
    world: Mapping[str, np.ndarray] | None = None,
    world_paths: Sequence[tuple[str, ...]] | None = None,
    rest: np.ndarray | None = None,
) -> np.ndarray:
    """Corrected inputs, shape ``(S, N, p)`` in the order of :func:`input_names`.

    Parameters
    ----------
    fit : Fit
        The fitted SCM.
    abduction : Abduction
        Joint samples of parameters and latents of the rows.
    target : str
        The learner's target (excluded with its descendants).
    source : str
        The protected attribute.
    unfair_paths : sequence of tuple
        Checked unfair paths; they see ``baseline``.
    baseline : str or float
        A level of ``source`` (a number for a continuous attribute).
    seed : int, optional
        Seed of the simulated absent nodes and of discrete nodes' abducted noise
        (the same in every world, so that a unit keeps its noise).
    world : mapping, optional
        Protected codes of the world the inputs are read in, shape ``(N,)``
        (default: the rows' own). Without ``world_paths`` the other paths of
        ``source`` see ``world[source]``: a total intervention.
    world_paths : sequence of tuple, optional
        A path-specific world: these paths see ``world[source]``, the other
        fair paths the rows' own level (or ``rest``).
    rest : numpy.ndarray, optional
        With ``world_paths``: the codes of ``source``, shape ``(N,)``, that the paths
        neither unfair nor in ``world_paths`` see (default: the rows' own). A nested
        counterfactual such as ``y_{x1, W_{x0}}`` is ``world`` at ``x0`` along the paths
        into ``W`` and ``rest`` at ``x1``.

    Raises
    ------
    DataError
        If ``baseline`` is not a level of ``source``.
    """
    scm = fit.scm
    n = len(abduction.data)
    codes = {**abduction.codes, **(world or {})}
    base = np.full(n, fit.encoding.code(source, [baseline])[0])
    layers: list[tuple[Sequence[tuple[str, ...]], np.ndarray]] = (
        [(unfair_paths, base)] if unfair_paths else []
    )
    if rest is not None and world_paths is None:
        raise ValueError("rest= applies to a path-specific world: give world_paths= with it")
    if world_paths is None:
        default = codes[source]
    else:
        layers.append((world_paths, codes[source]))
        default = abduction.codes[source] if rest is None else rest
    others = {p: c for p, c in codes.items() if p != source}
    rng = abduction.row_random(seed)
    simulated, simulated_noise = simulate_missing(scm, abduction, rng)
    values = path_specific_values(
        scm,
        abduction,
        source=source,
        layers=layers,
        default_codes=default,
        rng=rng,
        simulated=simulated,
        simulated_noise=simulated_noise,
        world_codes=others,
    )
    s = abduction.n_samples
    columns = [np.broadcast_to(values[name], (s, n)) for name in input_names(scm, target)]
    return np.stack(columns, axis=-1).astype(float)


PATH_LEARNER_ABDUCTION = (
    "a FairLearner with features='path_specific' recomputes its corrected inputs from the "
    "abduction the frame was computed from: pass abduction= with frame="
)
PATH_LEARNER_OBSERVED_DO = (
    "a FairLearner with features='path_specific' is audited under do() on protected "
    "attributes only; the frame sets observed node(s) {nodes}"
)


def learner_worlds(
    predictor: Any,
    fit: Fit,
    frame: pd.DataFrame,
    abduction: Abduction | None,
    response: Literal["prediction", "probability"],
) -> tuple[np.ndarray, np.ndarray]:
    """A path-specific learner's outputs in the frame's two worlds, from the abduction.

    ``predictor`` is a :class:`~counterfair.FairLearner` with
    ``features="path_specific"`` (or a bound method of one); the factual world
    is the rows' own, the counterfactual one the frame's ``do`` (along the
    frame's ``unfair_paths`` if it has them, else along every path).

    Raises
    ------
    ValueError
        Without ``abduction``, or if the frame sets an observed node.
    """
    owner: Any = getattr(predictor, "__self__", predictor)
    if getattr(predictor, "__name__", "") == "predict_proba":
        response = "probability"
    if abduction is None:
        raise ValueError(PATH_LEARNER_ABDUCTION)
    do = frame.attrs.get("do", {})
    observed = [node for node in do if node not in fit.scm.protected]
    if observed:
        raise ValueError(PATH_LEARNER_OBSERVED_DO.format(nodes=observed))
    world = do_codes(fit, do, abduction)
    paths = frame.attrs.get("unfair_paths")
    before = owner.path_specific_output(abduction, response=response)
    after = owner.path_specific_output(
        abduction,
        response=response,
        world=world,
        world_paths=None if paths is None else [tuple(p) for p in paths],
    )
    return before, after
