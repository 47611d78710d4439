"""Action and prediction: the factual and counterfactual worlds of abducted rows.

Semantics (Pearl's three steps, per joint sample of parameters and latents):

1. **Abduction** -- latents come from the posterior given each row's data; the
   additive noise of every Normal node is then exact: ``x - mu(parents)``; the
   exogenous noise of a discrete node is drawn from its posterior given the
   node's factual value (see *Coupling* below).
2. **Action** -- ``do(A = a')`` replaces the value of a protected attribute or of
   any observed node (several at once, one value for every row or one per row).
3. **Prediction** -- nodes are recomputed in topological order:

   * intervened observed nodes take the values set;
   * non-descendants of the intervened nodes keep their factual values;
   * latents keep their abducted draws in every world;
   * a Normal node is ``mu(counterfactual parents) + its abducted noise``
     (Kusner et al.'s level 3);
   * a discrete node (Poisson, Bernoulli, NegativeBinomial, Ordinal,
     Categorical) where none of its parents changed keeps its factual value, so
     ``do(A = a)`` with the factual ``a`` returns the factual world exactly;
     where a parent changed, its value depends on the ``coupling``.

   Which a node gets is its family's ``additive_noise`` and noise methods
   (:mod:`counterfair.model.families`).

Coupling of discrete nodes across worlds (``coupling=``):

* ``"monotone"`` (default) -- the node's structural equation is the inverse
  CDF ``x = F^{-1}(U; parents)`` with one exogenous ``U ~ Uniform(0, 1)`` per
  unit, shared by both worlds. Abduction draws ``U`` uniformly inside the
  factual value's CDF interval ``(F(y - 1), F(y)]`` under the factual parents,
  latents and parameters of the sample; prediction applies ``F^{-1}`` with the
  counterfactual parents. A Poisson, negative binomial, ordinal or Bernoulli
  node then never moves against its linear predictor: where a parent raises
  it, a count or level never decreases, a factual 1 stays 1 and a factual 0
  becomes 1 with probability ``(p' - p) / (1 - p)``. A categorical node (no order) uses the
  Gumbel-max equation ``x = argmax(logits + G)`` with Gumbel noise abducted
  given the factual category (Oberst and Sontag, 2019). Nodes absent from the
  data (simulated in both worlds) get their noise abducted from the simulated
  factual value, which has the same distribution as reusing the noise that
  generated it.
* ``"redraw"`` -- where a parent changed, the node is drawn afresh from its
  conditional distribution given the counterfactual parents and the latents:
  the noise is independent across worlds.

Why monotone is the default: in a structural causal model the exogenous noise
is a property of the unit, shared by every world; only the parents change. The
inverse-CDF equation is such an SCM with one uniform per unit and node; it is
consistent (the factual world comes back when nothing changes), it gives each
world the right marginal distribution, and for a binary node it is the
monotonicity assumption (``Y = 1`` under ``p`` implies ``Y = 1`` under any
``p' > p``) under which Pearl's probabilities of necessity and sufficiency are
identified (Tian and Pearl, 2000). Redrawing is not an SCM counterfactual: it
treats the noise as independent across worlds, an interventional draw given
the latents, and forgets where in its distribution the unit's factual value
lay; the counterfactual value is independent of the factual one, so even a
change of parents that barely moves the distribution changes most values (two
independent Poisson draws of mean 30 differ 95 % of the time).
``frame.attrs["coupling"]`` records the coupling used; ``"redraw"`` stays for
comparison and to reproduce results computed before the coupling existed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.counterfactual.world import NOISE_SUFFIX, World, noise_column
from counterfair.model.evaluate import draw_node, linear_predictor
from counterfair.rng import RandomSource, RowRandom

__all__ = [
    "NOISE_SUFFIX",
    "World",
    "counterfactual_world",
    "coupled_noise",
    "factual_world",
    "noise_column",
    "propagate",
]

if TYPE_CHECKING:
    from counterfair.inference.fit import Abduction, Fit
    from counterfair.model.scm import SCM

DoValue = str | float | Sequence[str] | Sequence[float] | np.ndarray
"""One level (a number for a continuous attribute) for every row, or one per row."""

WORLD_FACTUAL = "factual"
WORLD_COUNTERFACTUAL = "counterfactual"
Coupling = Literal["monotone", "redraw"]
"""How a discrete node's noise is shared across worlds (see the module docstring)."""

COUPLINGS: tuple[Coupling, ...] = ("monotone", "redraw")
"""Every coupling, the default first."""

DEFAULT_COUPLING: Coupling = "monotone"
"""The coupling of discrete counterfactuals unless given."""

UNKNOWN_COUPLING = "coupling must be one of {allowed}, got {got!r}"
"""Error when ``coupling=`` names no coupling."""

class RowValues(list[Any]):
    """Per-row values of an intervention, as a frame's ``attrs["do"]`` records them.

    A list (it compares equal to one) that :func:`copy.deepcopy` returns as is:
    pandas deep-copies ``attrs`` on every operation on a frame, which for thousands
    of per-row values cost more than the counterfactuals themselves. Treat it as
    read-only: frames derived from one another share it.
    """

    def __deepcopy__(self, memo: dict[int, Any]) -> RowValues:
        return self


def recorded_do(do: Mapping[str, Any]) -> dict[str, Any]:
    """The intervention as ``attrs["do"]`` records it: a scalar or level as given,
    per-row values as :class:`RowValues`."""
    return {
        k: v if isinstance(v, str) or np.ndim(v) == 0 else RowValues(np.asarray(v).tolist())
        for k, v in do.items()
    }


def check_coupling(coupling: str) -> Coupling:
    """``coupling`` if it names a coupling.

    Raises
    ------
    ValueError
        Naming the option and its allowed values.
    """
    if coupling not in COUPLINGS:
        raise ValueError(UNKNOWN_COUPLING.format(allowed=COUPLINGS, got=coupling))
    return coupling


def check_do_nodes(scm: SCM, do: Mapping[str, object]) -> None:
    """Every node of ``do`` must be protected or observed (latents are abducted, not set)."""
    for node in do:
        if node in scm.latents:
            raise errors.DataError(errors.LATENT_DO.format(node=node))
        if node not in scm.protected and node not in scm.observed:
            raise errors.DataError(
                errors.UNKNOWN_DO_NODE.format(
                    node=node, protected=list(scm.protected), observed=list(scm.observed)
                )
            )


def do_codes(fit: Fit, do: Mapping[str, DoValue], abduction: Abduction) -> dict[str, np.ndarray]:
    """Level codes of every protected attribute in the world of ``do``.

    The factual codes are the abducted rows' own (coded once, at their door); ``do``
    replaces those of the attributes it names.

    Observed nodes in ``do`` are checked to exist but otherwise left to
    :func:`do_values`.

    Raises
    ------
    DataError
        If ``do`` names a node that is neither protected nor observed, or a
        protected attribute with the wrong number of values or a level unseen at
        fit time.
    """
    scm = fit.scm
    check_do_nodes(scm, do)
    rows = abduction.data
    codes = {node: np.asarray(c).copy() for node, c in abduction.codes.items()}
    n = len(rows)
    for node, value in do.items():
        if node not in scm.protected:
            continue
        if isinstance(value, str) or np.ndim(value) == 0:
            codes[node] = np.full(n, fit.encoding.code(node, [value])[0])
        else:
            values = np.asarray(value, dtype=object)
            if values.shape[0] != n:
                raise errors.DataError(
                    errors.DO_LENGTH.format(node=node, got=values.shape[0], expected=n)
                )
            codes[node] = fit.encoding.code(node, values, rows.index)
    return codes


def do_values(scm: SCM, do: Mapping[str, DoValue], index: pd.Index) -> dict[str, np.ndarray]:
    """Values of the observed nodes set by ``do``, shape ``(N,)``, checked by their family.

    A value is given for every row or one per row, as the column would hold it
    (a level of an ordinal or categorical node, 0/1 for a Bernoulli node, ...);
    level-valued nodes get their codes.

    Raises
    ------
    DataError
        If ``do`` names a node that is neither protected nor observed, gives the
        wrong number of values, or a value the node's family does not allow (the
        message names the node and the value).
    """
    check_do_nodes(scm, do)
    n = len(index)
    out: dict[str, np.ndarray] = {}
    for node, value in do.items():
        if node not in scm.observed:
            continue
        if isinstance(value, str) or np.ndim(value) == 0:
            raw = [value] * n
        else:
            raw = list(np.asarray(value, dtype=object))
            if len(raw) != n:
                raise errors.DataError(errors.DO_LENGTH.format(node=node, got=len(raw), expected=n))
        eq = scm.equations[node]
        series = pd.Series(raw, index=index, dtype=object).infer_objects()
        out[node] = eq.family.column_values(eq.spec, series, node)
    return out


def _changed(cf: np.ndarray, factual: np.ndarray) -> np.ndarray:
    return ~np.isclose(cf, factual, rtol=1e-12, atol=1e-12)


def _stream(rng: RandomSource, stage: str, node: str) -> RandomSource:
    """The stream of one draw site: ``rng.child(stage, node)`` for a RowRandom, else ``rng``."""
    return rng.child(stage, node) if isinstance(rng, RowRandom) else rng


def missing_nodes(scm: SCM, abduction: Abduction) -> tuple[str, ...]:
    """Observed nodes with no value in the abducted rows (simulated in both worlds)."""
    return tuple(n for n in scm.observed if n not in abduction.observed)


MISSING_PARENT = (
    "node {node!r} is in the data but its parent {parent!r} is not: give column "
    "{parent!r}, or drop column {node!r} so that both are simulated"
)
"""Error when an observed node is given without one of its observed parents."""


def simulate_missing(
    scm: SCM, abduction: Abduction, rng: RandomSource
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Factual values of the observed nodes absent from the rows, shape ``(S, N)``.

    Each absent node is drawn, in topological order, from its conditional
    distribution given its factual parents and the abducted latents of each
    sample. The additive noise drawn for an absent Normal node is returned too,
    so the counterfactual world reuses it (the same unit in both worlds).
    With a :class:`~counterfair.rng.RowRandom` each node draws from its
    own stream ``rng.child("simulate", node)``.

    Returns
    -------
    (values, noise)
        Simulated values of every absent node and the noise of the absent Normal
        nodes, each shape ``(S, N)``.

    Raises
    ------
    DataError
        If a node is given without one of its observed parents.
    """
    missing = set(missing_nodes(scm, abduction))
    s, n = abduction.n_samples, len(abduction.data)
    for node in scm.observed:
        if node in missing:
            continue
        absent = [t.parent for t in scm.equations[node].observed if t.parent in missing]
        if absent:
            raise errors.DataError(MISSING_PARENT.format(node=node, parent=absent[0]))
    values: dict[str, np.ndarray] = {**abduction.latents}
    values.update(abduction.factual_values())
    simulated: dict[str, np.ndarray] = {}
    noise: dict[str, np.ndarray] = {}
    reference = scm.coding == "reference"
    for node in scm.observed:
        if node not in missing:
            continue
        eq = scm.equations[node]
        eta = linear_predictor(
            eq, abduction.params, values, abduction.codes, reference_coding=reference, n_rows=n
        )
        eta = np.broadcast_to(eta, (s, n, *eta.shape[2:]))
        draw = draw_node(eq, abduction.params, eta, _stream(rng, "simulate", node))
        if eq.family.additive_noise:
            noise[node] = draw - eta
        simulated[node] = draw
        values[node] = draw
    return simulated, noise


def propagate(
    scm: SCM,
    abduction: Abduction,
    codes: Mapping[str, np.ndarray],
    rng: RandomSource,
    *,
    simulated: Mapping[str, np.ndarray] | None = None,
    simulated_noise: Mapping[str, np.ndarray] | None = None,
    set_values: Mapping[str, np.ndarray] | None = None,
    coupling: Coupling = DEFAULT_COUPLING,
    latent_shift: Mapping[str, np.ndarray] | None = None,
    shared_noise: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Values of every observed node, shape ``(S, N)``, in the world with ``codes``.

    Parameters
    ----------
    scm : SCM
        The model.
    abduction : Abduction
        Joint samples of parameters and latents for the rows, with their
        factual observed values.
    codes : mapping
        Protected level codes in the target world, shape ``(N,)``.
    rng : RowRandom or numpy.random.Generator
        Source of the abducted noise (``"monotone"``) or of the fresh draws
        (``"redraw"``) of discrete descendants; with a
        :class:`~counterfair.rng.RowRandom` each node draws from its own
        stream ``rng.child("propagate", node)``, so a node propagated in one chunk
        and skipped in another does not shift the draws of the others.
    simulated, simulated_noise : mapping, optional
        Factual values (and Normal noise) of nodes absent from the rows, from
        :func:`simulate_missing`, shape ``(S, N)``.
    set_values : mapping, optional
        Observed nodes set by the intervention and their values, shape ``(N,)``
        (from :func:`do_values`).
    coupling : {"monotone", "redraw"}
        How a discrete descendant whose parents changed gets its value: from
        its noise abducted given its factual value (default), or by a fresh
        draw (see the module docstring).
    latent_shift : mapping, optional
        Latent -> shift added to its abducted values in the target world only,
        broadcastable to ``(S, N)`` (:mod:`counterfair.counterfactual.sensitivity`: a path from a
        protected attribute to the latent); noise stays that of the factual world.
    shared_noise : mapping, optional
        Discrete node -> its noise already abducted from its factual value
        (:func:`coupled_noise`, the same for every world of the rows), reused
        instead of abducting it again; ``"monotone"`` coupling only.

    Raises
    ------
    ValueError
        If ``coupling`` is not one of :data:`COUPLINGS`.
    """
    coupled = check_coupling(coupling) == "monotone"
    s, n = abduction.n_samples, len(abduction.data)
    params = abduction.params
    given = dict(simulated or {})
    fixed = dict(set_values or {})

    def factual_of(node: str) -> np.ndarray:
        source = given[node] if node in given else abduction.observed[node]
        return np.broadcast_to(source, (s, n))

    intervened = [p for p in scm.protected if np.any(codes[p] != abduction.codes[p])]
    intervened += list(fixed)
    shift = {
        k: np.broadcast_to(np.asarray(v, dtype=float), (s, n))
        for k, v in (latent_shift or {}).items()
    }
    intervened += [k for k, v in shift.items() if np.any(v != 0)]
    descendants = scm.descendants(intervened) if intervened else frozenset()
    noise = abduction.noise(
        scm,
        [
            d
            for d in descendants
            if scm.specs[d].role == "observed"
            and scm.equations[d].family.additive_noise
            and d not in given
            and d not in fixed
        ],
    )
    noise.update(simulated_noise or {})
    reference = scm.coding == "reference"
    values: dict[str, np.ndarray] = {
        k: v + shift[k] if k in shift else v for k, v in abduction.latents.items()
    }
    factual_values: dict[str, np.ndarray] = {**abduction.latents}
    for node in scm.observed:
        factual = factual_of(node)
        factual_values[node] = factual
        if node in fixed:
            values[node] = np.broadcast_to(np.asarray(fixed[node], dtype=float), (s, n))
            continue
        if node not in descendants:
            values[node] = factual
            continue
        eq = scm.equations[node]
        eta = linear_predictor(eq, params, values, codes, reference_coding=reference)
        parent_changed = np.zeros((s, n), dtype=bool)
        for pterm in eq.protected:
            parent_changed |= np.broadcast_to(
                codes[pterm.parent] != abduction.codes[pterm.parent], (s, n)
            )
        for oterm in eq.observed:
            parent_changed |= _changed(values[oterm.parent], factual_of(oterm.parent))
        for lterm in eq.latent:
            if lterm.parent in shift:
                parent_changed |= shift[lterm.parent] != 0
        if eq.family.additive_noise:
            fresh = eta + noise[node]
        elif coupled:
            if shared_noise is not None and node in shared_noise:
                shared = shared_noise[node]
            else:
                shared = _abduct_discrete(scm, abduction, node, factual_values, factual, rng)
            fresh = eq.family.apply_noise(eq, params, eta, shared)
            fresh = np.where(np.isnan(fresh), factual, fresh)  # no noise: keep the value
        else:
            fresh = draw_node(eq, params, eta, _stream(rng, "propagate", node))
        values[node] = np.where(parent_changed, fresh, factual)
    return values


def _abduct_discrete(
    scm: SCM,
    abduction: Abduction,
    node: str,
    factual_values: Mapping[str, np.ndarray],
    factual: np.ndarray,
    rng: RandomSource,
) -> np.ndarray:
    """A discrete node's noise abducted from its factual value (stream ``propagate, node``)."""
    eq = scm.equations[node]
    factual_eta = linear_predictor(
        eq,
        abduction.params,
        factual_values,
        abduction.codes,
        reference_coding=scm.coding == "reference",
        n_rows=len(abduction.data),
    )
    node_rng = _stream(rng, "propagate", node)
    return eq.family.abduct_noise(eq, abduction.params, factual_eta, factual, node_rng)


def coupled_noise(
    scm: SCM, factual: World, rng: RandomSource, nodes: Sequence[str]
) -> dict[str, np.ndarray]:
    """The noise of the discrete ``nodes``, abducted once from their factual values.

    Under ``"monotone"`` coupling a discrete descendant's noise depends on the
    factual world only; :func:`propagate` takes it as ``shared_noise=``, so
    several interventions on the same rows abduct it once. The draws are those
    :func:`propagate` would make (stream ``rng.child("propagate", node)``, keyed
    by row position), so a subset of the rows takes the columns of its rows.
    """
    s, n = factual.shape
    out: dict[str, np.ndarray] = {}
    for node in nodes:
        eq = scm.equations[node]
        if eq.family.additive_noise or scm.specs[node].role != "observed":
            continue
        value = np.broadcast_to(factual.values[node], (s, n))
        out[node] = _abduct_discrete(scm, factual.abduction, node, factual.values, value, rng)
    return out


def factual_world(fit: Fit, abduction: Abduction, rng: RandomSource) -> World:
    """The factual world of the rows: their values, with absent nodes simulated.

    Observed nodes absent from the rows are drawn from the abducted inputs
    (:func:`simulate_missing`, stream ``rng.child("simulate", node)``).
    """
    simulated, simulated_noise = simulate_missing(fit.scm, abduction, rng)
    values: dict[str, np.ndarray] = {**abduction.latents}
    values.update(abduction.factual_values())
    values.update(simulated)
    return World(
        name=WORLD_FACTUAL,
        abduction=abduction,
        codes=abduction.codes,
        values=values,
        noise={**abduction.noise(fit.scm), **simulated_noise},
    )


def counterfactual_world(
    fit: Fit,
    factual: World,
    do: Mapping[str, DoValue],
    rng: RandomSource,
    *,
    coupling: Coupling = DEFAULT_COUPLING,
    latent_shift: Mapping[str, np.ndarray] | None = None,
    shared_noise: Mapping[str, np.ndarray] | None = None,
) -> World:
    """The world of ``do`` for the rows of ``factual`` (action and prediction).

    Parameters
    ----------
    fit : Fit
        The fitted SCM.
    factual : World
        The rows' factual world (:func:`factual_world`), whose simulated absent
        nodes and noise the counterfactual world shares.
    do : mapping
        The intervention, as for :func:`counterfactual_frame`.
    rng : RowRandom or numpy.random.Generator
        As for :func:`propagate`.
    coupling, latent_shift, shared_noise
        As for :func:`propagate`.
    """
    scm = fit.scm
    abduction = factual.abduction
    cf_codes = do_codes(fit, do, abduction)
    cf_set = do_values(scm, do, abduction.data.index)
    simulated = {k: v for k, v in factual.values.items() if k in missing_nodes(scm, abduction)}
    simulated_noise = {k: v for k, v in factual.noise.items() if k in simulated}
    values = propagate(
        scm,
        abduction,
        cf_codes,
        rng,
        simulated=simulated,
        simulated_noise=simulated_noise,
        set_values=cf_set,
        coupling=coupling,
        latent_shift=latent_shift,
        shared_noise=shared_noise,
    )
    return World(
        name=WORLD_COUNTERFACTUAL,
        abduction=abduction,
        codes=cf_codes,
        values=values,
        noise=factual.noise,
    )


def slice_do(do: Mapping[str, Any], rows: slice, n_rows: int) -> dict[str, Any]:
    """``do`` for a slice of the rows: per-row sequences are sliced, single values kept.

    Raises
    ------
    ValueError
        If a per-row sequence does not have ``n_rows`` values.
    """
    out: dict[str, Any] = {}
    for node, value in do.items():
        if isinstance(value, str) or np.ndim(value) == 0:
            out[node] = value
            continue
        values = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
        if len(values) != n_rows:
            raise ValueError(
                f"do[{node!r}] has {len(values)} values for {n_rows} rows: give one value, "
                "or one per row"
            )
        out[node] = values[rows]
    return out
