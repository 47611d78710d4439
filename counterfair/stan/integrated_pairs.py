"""Two latents per row integrated out together: the fit program's pieces.

Two latents that share a child (and no child with a third latent,
:func:`counterfair.stan.integrated.pair_of`) are integrated out of every child of either,
Normal children included, by the product rule of :data:`PAIR_NODES` Gauss-Hermite nodes
per axis around each row's mode (``quadrature.hpp``'s ``integrate2``), and drawn exactly
per row in the generated quantities (``draw_row2``). Which latents may be integrated,
alone or as a pair, is decided in :mod:`counterfair.stan.integrated`, with the one-latent
program pieces; this module holds what only pairs need.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from counterfair.model.equation import NodeEquation
from counterfair.model.specs import Latent, stan_real
from counterfair.stan.families.base import NEGATIVE_BINOMIAL_CODE, NORMAL_CODE, ORDINAL_CODE
from counterfair.stan.integrated import (
    columns,
    cut_arguments,
    family_code,
    int_list,
    joined,
    pair_of,
    row_vector,
)

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

PAIR_NODES = 7
"""Gauss-Hermite nodes per axis for two latents per row (49 per row), from the accuracy
test (``tests/test_integrated_pairs.py``)."""

PAIR_NEWTON = 4
"""Newton steps to each row's mode for two latents per row."""

FUNCTIONS_PAIR = """\
  // Two latents per row integrated out of all their children (quadrature.hpp's
  // integrate2 and draw_row2): the sum over rows, each row, one exact draw per row.
  real cf_integrated2(array[,] int y, matrix eta, row_vector load1, row_vector load2,
                      array[] int family, vector phi, vector cuts, array[] int cut_start,
                      array[] int cut_len, vector gh_x, vector gh_logw, int n_newton);
  vector cf_integrated2_rows(array[,] int y, matrix eta, row_vector load1,
                             row_vector load2, array[] int family, vector phi, vector cuts,
                             array[] int cut_start, array[] int cut_len, vector gh_x,
                             vector gh_logw, int n_newton);
  matrix cf_integrated2_rng(array[,] int y, matrix eta, row_vector load1, row_vector load2,
                            array[] int family, vector phi, vector cuts,
                            array[] int cut_start, array[] int cut_len, vector gh_x,
                            vector gh_logw, int n_newton);"""

PAIR_DATA_LINES = (
    "int<lower=1> n_gh2;  // Gauss-Hermite nodes per axis (two latents per row)",
    "vector[n_gh2] gh2_x;  // their positions",
    "vector[n_gh2] gh2_logw;  // log of their weights",
    "int<lower=0> n_newton2;  // Newton steps to each row's mode (two latents per row)",
)


def pair_quadrature_data(nodes: int = PAIR_NODES, newton: int = PAIR_NEWTON) -> dict[str, Any]:
    """The fit program's quadrature data for two latents per row (nodes per axis)."""
    x, w = np.polynomial.hermite.hermgauss(nodes)
    return {"n_gh2": nodes, "gh2_x": x, "gh2_logw": np.log(w), "n_newton2": newton}


@dataclass(frozen=True)
class PairChild:
    """A child of an integrated pair: ``eta + load1 * z1 + load2 * z2`` in the program
    (``z`` the pair's standardised latents; a Normal child's ``eta`` is ``mu - y``)."""

    eq: NodeEquation
    eta: str  # vector[N] expression
    load1: str  # real expressions ("0.0" for a latent that is not its parent)
    load2: str

    @property
    def code(self) -> int:
        """The quadrature's family code."""
        return NORMAL_CODE if self.eq.family.additive_noise else family_code(self.eq)

    @property
    def phi(self) -> str:
        """The family's dispersion (negative binomial) or sd (Normal), else ``1.0``."""
        if self.code == NEGATIVE_BINOMIAL_CODE:
            return self.eq.param("phi")
        if self.code == NORMAL_CODE:
            fixed = self.eq.sigma_fixed
            assert self.eq.sigma is not None
            return self.eq.sigma if fixed is None else stan_real(fixed)
        return "1.0"


def pair_name(pair: tuple[str, str]) -> str:
    """The program's name of a pair's pieces (``<first>_<second>``)."""
    return f"{pair[0]}_{pair[1]}"


def pair_children(scm: SCM, pair: tuple[str, str]) -> list[NodeEquation]:
    """Every child of either latent of ``pair``, in graph order."""
    nodes = set(scm.children(pair[0])) | set(scm.children(pair[1]))
    return [scm.equations[n] for n in scm.observed if n in nodes and n in scm.equations]


def pair_loads(scm: SCM, pair: tuple[str, str], eq: NodeEquation) -> tuple[str, str, str]:
    """``eq``'s loadings on the pair's standardised latents and the shift their locations
    add to its predictor (``"0.0"`` where none)."""
    loads = ["0.0", "0.0"]
    shifts: list[str] = []
    for lterm in eq.latent:
        spec = scm.specs[lterm.parent]
        assert isinstance(spec, Latent)
        k = pair.index(lterm.parent)
        loads[k] = lterm.param if spec.scale == 1.0 else f"{lterm.param} * {stan_real(spec.scale)}"
        if spec.loc != 0.0:
            shifts.append(f"{lterm.param} * {stan_real(spec.loc)}")
    return loads[0], loads[1], " + ".join(shifts) if shifts else "0.0"


def pair_call_arguments(pair: tuple[str, str], children: Sequence[PairChild]) -> str:
    """The arguments of ``cf_integrated2*`` for ``pair`` (its outcomes in ``Y_<pair>``)."""
    etas = columns([c.eta for c in children])
    load1 = joined([f"[{c.load1}]" for c in children])
    load2 = joined([f"[{c.load2}]" for c in children])
    families = int_list([c.code for c in children])
    phis = row_vector([c.phi for c in children])
    cuts, starts, lengths = cut_arguments(
        [(c.eq if c.code == ORDINAL_CODE else None, 1) for c in children]
    )
    return (
        f"Y_{pair_name(pair)}, {etas}, {load1}, {load2}, {families}, {phis}, {cuts}, "
        f"{starts}, {lengths}, gh2_x, gh2_logw, n_newton2"
    )


def pair_outcome_lines(
    pair: tuple[str, str], children: Sequence[PairChild], indent: str
) -> list[str]:
    """Transformed data: the outcomes of the pair's non-Normal children (0 for Normal ones,
    whose values are in their ``eta``)."""
    lines = [
        f"{indent}array[N, {len(children)}] int Y_{pair_name(pair)};  // outcomes of "
        f"{', '.join(c.eq.node for c in children)} (integrated {pair[0]} and {pair[1]})"
    ]
    for k, child in enumerate(children, start=1):
        value = "rep_array(0, N)" if child.code == NORMAL_CODE else child.eq.node
        lines.append(f"{indent}Y_{pair_name(pair)}[:, {k}] = {value};")
    return lines


def pair_model_lines(
    pair: tuple[str, str], children: Sequence[PairChild], indent: str
) -> list[str]:
    """The model block's statement of every child of ``pair``, both latents integrated out."""
    nodes = ", ".join(c.eq.node for c in children)
    return [
        f"{indent}// {nodes}: {pair[0]} and {pair[1]} integrated out together (adaptive "
        "Gauss-Hermite, n_gh2 x n_gh2 nodes per row)",
        f"{indent}target += cf_integrated2({pair_call_arguments(pair, children)});",
    ]


def pair_draw_lines(
    scm: SCM, pair: tuple[str, str], children: Sequence[PairChild], indent: str
) -> list[str]:
    """Generated quantities (inside a local block): both latents of ``pair`` drawn exactly
    per row, ``loc + scale * z``."""
    z = f"z_{pair_name(pair)}"
    call = f"cf_integrated2_rng({pair_call_arguments(pair, children)})"
    lines = [f"{indent}matrix[N, 2] {z} = {call};"]
    for k, latent in enumerate(pair, start=1):
        spec = scm.specs[latent]
        assert isinstance(spec, Latent)
        value = f"{z}[:, {k}]"
        if spec.scale != 1.0:
            value = f"{stan_real(spec.scale)} * {value}"
        if spec.loc != 0.0:
            value = f"{stan_real(spec.loc)} + {value}"
        lines.append(f"{indent}{latent} = {value};")
    return lines


def pairs_of(scm: SCM, integrate: Collection[str]) -> list[tuple[str, str]]:
    """The pairs among the integrated latents, in the SCM's order."""
    out: list[tuple[str, str]] = []
    for latent in scm.latents:
        if latent in integrate:
            pair = pair_of(scm, latent)
            if pair is not None and pair not in out:
                out.append(pair)
    return out
