"""Turn a validated data frame into the data dictionary of the generated Stan programs."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.model import checks as validation
from counterfair.model.encoding import Encoding
from counterfair.model.params import ParamDraws
from counterfair.model.specs import Observed
from counterfair.stan.codegen import abduction_equations

if TYPE_CHECKING:
    from counterfair.model.scm import SCM


def observed_values(
    scm: SCM, data: pd.DataFrame, nodes: Collection[str] | None = None
) -> dict[str, np.ndarray]:
    """Validated float values of observed columns (all observed nodes by default)."""
    wanted = scm.observed if nodes is None else tuple(n for n in scm.observed if n in nodes)
    validation.validate_columns(data, wanted)
    values: dict[str, np.ndarray] = {}
    for node in wanted:
        spec = scm.specs[node]
        assert isinstance(spec, Observed)
        values[node] = validation.numeric_column(data, node, spec)
    return values


def _as_stan_column(scm: SCM, node: str, values: np.ndarray) -> np.ndarray:
    eq = scm.equations[node]
    return eq.family.stan_values(eq.spec, values)


def _base_data(
    scm: SCM, data: pd.DataFrame, encoding: Encoding, values: Mapping[str, np.ndarray]
) -> dict[str, object]:
    n = len(data)
    out: dict[str, object] = {"N": n}
    codes = encoding.codes(data)
    for node in scm.protected:
        if encoding.is_continuous(node):
            out[node] = codes[node].astype(float)
            continue
        out[f"n_levels_{node}"] = encoding.n_levels(node)
        out[node] = (codes[node] + 1).astype(np.int64)
    for node in scm.observed:
        eq = scm.equations[node]
        out.update(eq.family.stan_data(eq))
        column = values.get(node)
        if column is None:  # not needed by any conditioned equation
            column = np.zeros(n)
        out[node] = _as_stan_column(scm, node, column)
    return out


def fit_data(scm: SCM, data: pd.DataFrame, encoding: Encoding) -> dict[str, object]:
    """Data for the fit program: every protected and observed column, validated."""
    validation.validate_frame(data)
    validation.validate_columns(data, scm.protected)
    values = observed_values(scm, data)
    out = _base_data(scm, data, encoding, values)
    for node in scm.observed:
        eq = scm.equations[node]
        out[f"scale_{node}"] = eq.family.coefficient_scale(values[node])
    return out


def conditioning_nodes(scm: SCM, condition_on: Collection[str] | None) -> tuple[str, ...]:
    """The latents' children to condition on (default: all of them)."""
    candidates = tuple(eq.node for eq in abduction_equations(scm))
    if condition_on is None:
        return candidates
    for node in condition_on:
        if node not in scm.observed:
            raise errors.SCMError(
                f"cannot condition latents on {node!r}: it is not an observed node of the SCM"
            )
    return tuple(n for n in candidates if n in set(condition_on))


def abduction_data(
    scm: SCM,
    data: pd.DataFrame,
    encoding: Encoding,
    params: ParamDraws,
    condition_on: Collection[str],
) -> dict[str, object]:
    """Data for the abduction program: rows, parameter sets and conditioning flags."""
    validation.validate_frame(data)
    validation.validate_columns(data, scm.protected)
    needed: set[str] = set()
    for node in condition_on:
        needed.add(node)
        needed.update(t.parent for t in scm.equations[node].observed)
    out = _base_data(scm, data, encoding, observed_values(scm, data, needed))
    out["S"] = params.n
    for eq in abduction_equations(scm):
        out[f"observe_{eq.node}"] = int(eq.node in condition_on)
        for name in eq.parameter_names():
            out[name] = params[name]
    return out
