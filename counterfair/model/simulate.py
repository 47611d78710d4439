"""Forward simulation from an SCM with known parameter values (for tests and studies).

This is counterfair's one forward simulator: every family draws through
:func:`counterfair.model.evaluate.draw_node`. Categorical protected attributes are
drawn from their level probabilities, continuous ones from a standard normal
(a standardised number), latents from their priors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.model.evaluate import draw_node, linear_predictor
from counterfair.model.params import ParamDraws
from counterfair.model.specs import Latent, Protected

if TYPE_CHECKING:
    from counterfair.model.scm import SCM


def _levels(scm: SCM, levels: Mapping[str, Iterable[str]] | None) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for node in scm.protected:
        spec = scm.specs[node]
        assert isinstance(spec, Protected)
        if spec.continuous:
            continue
        given = None if levels is None else levels.get(node)
        if given is not None:
            out[node] = tuple(str(v) for v in given)
        elif spec.levels is not None:
            ref = spec.reference or spec.levels[0]
            out[node] = (ref, *(lv for lv in spec.levels if lv != ref))
        else:
            raise errors.SCMError(
                f"protected node {node!r} has no levels: declare Protected(levels=...) "
                "or pass levels={...} to sample()"
            )
    return out


def simulate(
    scm: SCM,
    n: int,
    *,
    params: Mapping[str, Any],
    seed: int | None = None,
    levels: Mapping[str, Iterable[str]] | None = None,
    protected_probs: Mapping[str, Mapping[str, float]] | None = None,
    return_latents: bool = True,
) -> pd.DataFrame:
    """Simulate ``n`` rows from the SCM; see :meth:`counterfair.SCM.sample`."""
    if n < 1:
        raise ValueError(f"n must be a positive number of rows, got {n}")
    rng = np.random.default_rng(seed)
    all_levels = _levels(scm, levels)
    theta = ParamDraws.from_values(scm, params, {k: len(v) for k, v in all_levels.items()})
    codes: dict[str, np.ndarray] = {}
    for node, node_levels in all_levels.items():
        probs = np.full(len(node_levels), 1.0 / len(node_levels))
        if protected_probs is not None and node in protected_probs:
            given = protected_probs[node]
            unknown = [lv for lv in given if lv not in node_levels]
            if unknown:
                raise errors.SCMError(
                    f"protected_probs[{node!r}] names unknown level(s) {unknown}; "
                    f"levels: {list(node_levels)}"
                )
            probs = np.array([float(given.get(lv, 0.0)) for lv in node_levels])
            probs = probs / probs.sum()
        codes[node] = rng.choice(len(node_levels), size=n, p=probs)
    for node in scm.protected:
        if node not in all_levels:  # continuous: standard normal (a standardised number)
            codes[node] = rng.standard_normal(n)
    values: dict[str, np.ndarray] = {}
    for node in scm.latents:
        spec = scm.specs[node]
        assert isinstance(spec, Latent)
        values[node] = spec.loc + spec.scale * rng.standard_normal(n)
    reference = scm.coding == "reference"
    for node in scm.observed:
        eq = scm.equations[node]
        eta = linear_predictor(eq, theta, values, codes, reference_coding=reference, n_rows=n)
        values[node] = draw_node(eq, theta, eta, rng)[0]
    frame: dict[str, Any] = {}
    for node in scm.nodes:
        if node in codes and node not in all_levels:
            frame[node] = codes[node]
        elif node in codes:
            labels = np.asarray(all_levels[node], dtype=object)[codes[node]]
            frame[node] = pd.Categorical(labels, categories=list(all_levels[node]))
        elif node in scm.latents and not return_latents:
            continue
        elif node in scm.latents:
            frame[node] = values[node]
        else:
            eq = scm.equations[node]
            frame[node] = eq.family.frame_column(eq.spec, values[node])
    return pd.DataFrame(frame)
