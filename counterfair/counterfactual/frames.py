"""Counterfactual and interventional frames of a fit: the long tables users read.

:func:`counterfactual` is what :meth:`counterfair.Fit.counterfactual` runs: it
abducts the rows chunk by chunk (:func:`counterfair.inference.abducted_chunks.abduct_chunks`),
builds each chunk's worlds (:mod:`counterfair.counterfactual.action`, or
:mod:`counterfair.counterfactual.paths` for path-specific effects) and merges the
chunks' frames in the order one call on all the rows gives.
:func:`interventional_frame` is what :meth:`counterfair.Fit.interventional` runs.
The semantics are those of :mod:`counterfair.counterfactual.action`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from counterfair.counterfactual.action import (
    DEFAULT_COUPLING,
    Coupling,
    DoValue,
    check_coupling,
    check_do_nodes,
    counterfactual_world,
    do_values,
    factual_world,
    missing_nodes,
    recorded_do,
    slice_do,
)
from counterfair.counterfactual.paths import path_specific_frame
from counterfair.inference.abducted_chunks import abduct_chunks
from counterfair.inference.abduction_result import Abduction
from counterfair.model.evaluate import draw_node, linear_predictor
from counterfair.model.params import ParamDraws
from counterfair.rng import RowRandom

if TYPE_CHECKING:  # Fit.counterfactual and Fit.interventional delegate here
    from counterfair.inference.fit import Fit

__all__ = [
    "Coupling",
    "DoValue",
    "counterfactual",
    "counterfactual_frame",
    "interventional_frame",
    "merge_chunk_frames",
]


def counterfactual(
    fit: Fit,
    data: pd.DataFrame | None,
    do: Mapping[str, DoValue],
    *,
    n_samples: int | None = 100,
    seed: int | None = None,
    abduction: Abduction | None = None,
    coupling: Coupling = "monotone",
    unfair_paths: Sequence[Sequence[str]] | None = None,
    **abduct_args: Any,
) -> pd.DataFrame:
    """Counterfactual values of every node under ``do(...)``.

    What :meth:`counterfair.Fit.counterfactual` runs; see it for the options.
    """
    coupling = check_coupling(coupling)
    seed = fit.seed if seed is None else seed

    def frame_of(rows_abduction: Abduction, rows_do: Mapping[str, DoValue]) -> pd.DataFrame:
        if unfair_paths is not None:
            return path_specific_frame(
                fit, rows_abduction, rows_do, unfair_paths, seed=seed, coupling=coupling
            )
        return counterfactual_frame(fit, rows_abduction, rows_do, seed=seed, coupling=coupling)

    if abduction is not None:
        return frame_of(abduction, do)
    rows = None if data is None else fit.rows_of(data)
    n_rows = len(fit.data) if rows is None else len(rows)
    parts = [
        (chunk, frame_of(chunk, slice_do(do, where, n_rows)))
        for where, chunk in abduct_chunks(
            fit, rows, n_samples=n_samples, seed=seed, **abduct_args
        )
    ]
    return merge_chunk_frames(parts, do)


def counterfactual_frame(
    fit: Fit,
    abduction: Abduction,
    do: Mapping[str, DoValue],
    *,
    seed: int | None = None,
    coupling: Coupling = DEFAULT_COUPLING,
    latent_shift: Mapping[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """Factual and counterfactual values of every node, per row and sample.

    Parameters
    ----------
    fit : Fit
        The fitted SCM taken as the true world.
    abduction : Abduction
        Joint samples of parameters and latents for the rows (from
        :meth:`Fit.abduct`). Observed nodes absent from the rows (the outcome
        of a test set, say) are simulated in both worlds from the abducted
        inputs (:func:`simulate_missing`); ``frame.attrs["simulated"]`` lists
        them.
    do : mapping
        Node -> value for every row, or a sequence of values, one per row: a
        level (or a number, for a continuous attribute) of a protected
        attribute, or a value of an observed node as its column would hold it.
        Several nodes may be intervened on at once; latents cannot be.
    seed : int, optional
        Seed of the simulated absent nodes and of the abducted noise (or fresh
        draws) of discrete descendants. The draws are keyed by the seed and the
        rows' global positions (``abduction.positions``), so a chunk of rows gives
        the rows of the whole frame.
    coupling : {"monotone", "redraw"}
        How discrete descendants whose parents changed share their noise with
        the factual world: abducted from the factual value and reused (default),
        or drawn afresh (see the module docstring).
    latent_shift : mapping, optional
        Latent -> shift per row, ``(N,)`` or ``(S, N)``, added to the latent in the
        counterfactual world only (a path from the intervened attribute to the latent
        that the SCM assumed away; :func:`counterfair.counterfactual.sensitivity.sensitivity`).

    Returns
    -------
    pandas.DataFrame
        Long format, ``2 * S * N`` rows with columns ``row`` (the data's index
        label), ``sample`` (0..S-1), ``world`` (``"factual"`` or
        ``"counterfactual"``), one column per node (protected attributes as
        categoricals, latents, observed nodes) and ``<node>:noise`` for the
        abducted additive noise of each Normal node. Rows with the same
        ``(row, sample)`` in the two worlds share latents and noise.
        ``frame.attrs["do"]`` records the intervention and
        ``frame.attrs["coupling"]`` the coupling.

    Raises
    ------
    ValueError
        If ``coupling`` is not one of :data:`COUPLINGS`.
    """
    coupling = check_coupling(coupling)
    rng = abduction.row_random(seed)
    factual = factual_world(fit, abduction, rng)
    counter = counterfactual_world(
        fit, factual, do, rng, coupling=coupling, latent_shift=latent_shift
    )
    simulated = missing_nodes(fit.scm, abduction)
    frame = pd.concat(
        [factual.frame(fit.scm, fit.encoding), counter.frame(fit.scm, fit.encoding)],
        ignore_index=True,
    )
    frame.attrs["do"] = recorded_do(do)
    frame.attrs["simulated"] = sorted(simulated)
    frame.attrs["coupling"] = coupling
    return frame


def merge_chunk_frames(
    parts: Sequence[tuple[Abduction, pd.DataFrame]], do: Mapping[str, DoValue]
) -> pd.DataFrame:
    """One counterfactual frame from the frames of chunks of rows, in the whole frame's order.

    Parameters
    ----------
    parts : sequence of (Abduction, DataFrame)
        Each chunk's abduction (its rows' global positions) and its frame from
        :func:`counterfactual_frame` or
        :func:`counterfair.counterfactual.paths.path_specific_frame`.
    do : mapping
        The intervention on all the rows (recorded in ``attrs["do"]``).

    Returns
    -------
    pandas.DataFrame
        The rows ordered by world, sample and global position, as one call on all
        the rows orders them; the attributes of the first chunk's frame, with ``do``.
    """
    if len(parts) == 1:
        return parts[0][1]
    keys: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for abduction, _ in parts:
        s, positions = abduction.n_samples, abduction.row_positions
        n = len(positions)
        keys.append(
            (
                np.repeat([0, 1], s * n),
                np.tile(np.repeat(np.arange(s), n), 2),
                np.tile(positions, 2 * s),
            )
        )
    world, sample, position = (np.concatenate([k[i] for k in keys]) for i in range(3))
    order = np.lexsort((position, sample, world))
    frame = pd.concat([f for _, f in parts], ignore_index=True).iloc[order]
    frame = frame.reset_index(drop=True)
    frame.attrs = dict(parts[0][1].attrs)
    frame.attrs["do"] = recorded_do(do)
    return frame


def interventional_frame(
    fit: Fit,
    n: int,
    do: Mapping[str, str | float],
    *,
    n_samples: int = 100,
    seed: int | None = None,
) -> pd.DataFrame:
    """Population-level samples under ``do(...)``, conditioning on no row.

    For each of ``n_samples`` posterior parameter draws, ``n`` new units are
    simulated forward: intervened nodes (protected or observed) are set, other
    protected attributes are resampled from the training rows, latents come from
    their prior and every other observed node is drawn from its conditional
    distribution.

    Returns
    -------
    pandas.DataFrame
        Columns ``sample``, ``unit`` and one per node; ``n_samples * n`` rows.
    """
    scm = fit.scm
    posterior = fit.params()
    pick = np.random.default_rng(seed).choice(
        posterior.n, size=min(n_samples, posterior.n), replace=False
    )
    units = RowRandom.for_rows(seed, n)
    params: ParamDraws = posterior.take(np.sort(pick))
    s = params.n
    check_do_nodes(scm, do)
    set_values = do_values(scm, do, pd.RangeIndex(n))
    training_codes = fit.encoding.codes(fit.data)
    codes: dict[str, np.ndarray] = {}
    for node in scm.protected:
        if node in do:
            level = fit.encoding.code(node, [do[node]])[0]
            codes[node] = np.full((s, n), level)
        else:
            codes[node] = units.child("protected", node).choice(training_codes[node], size=(s, n))
    values: dict[str, np.ndarray] = {}
    for node in scm.latents:
        spec = scm.specs[node]
        values[node] = getattr(spec, "loc", 0.0) + getattr(spec, "scale", 1.0) * units.child(
            "latent", node
        ).standard_normal((s, n))
    reference = scm.coding == "reference"
    for node in scm.observed:
        if node in set_values:
            values[node] = np.broadcast_to(set_values[node], (s, n)).astype(float)
            continue
        eq = scm.equations[node]
        eta = linear_predictor(eq, params, values, codes, reference_coding=reference, n_rows=n)
        values[node] = draw_node(eq, params, eta, units.child("draw", node))
    frame: dict[str, Any] = {
        "sample": np.repeat(np.arange(s), n),
        "unit": np.tile(np.arange(n), s),
    }
    for node in scm.protected:
        frame[node] = fit.encoding.column(node, codes[node].reshape(-1))
    for node in (*scm.latents, *scm.observed):
        frame[node] = values[node].reshape(-1)
    out = pd.DataFrame(frame)
    out.attrs["do"] = dict(do)
    return out
