"""Latents integrated out of the fit program: NUTS samples the structural parameters only.

With ``SCM.fit(..., latents="integrated")`` the fit program has no per-row latent.
For each integrated latent ``L`` (a root with a Normal prior whose children have no
other latent parent):

1. its Normal children (the anchors of :mod:`counterfair.stan.anchoring`) enter with
   ``L`` integrated out exactly, as in the joint program, and leave ``L`` Normal
   with a closed-form mean and precision: ``L = m + z / sqrt(P)`` with
   ``z ~ Normal(0, 1)`` (``L = loc + scale * z`` when it has no Normal child);
2. its other children (Poisson, negative binomial, Bernoulli, ordinal, categorical) enter through
   ``log int prod_c p_c(y_c | eta_c + load_c z) Normal(z | 0, 1) dz`` per row, by
   adaptive Gauss-Hermite quadrature (the C++ of ``quadrature.hpp``, included through
   ``integrated.hpp`` as CmdStan's user header, and shared with the native library of
   :mod:`counterfair.stan.native` that LOO and the node check call):
   :data:`NEWTON_STEPS` Newton steps to the mode and :data:`GH_NODES` nodes scaled by
   the curvature there;
3. each training row's ``z`` is drawn exactly from its posterior given each draw's
   parameters (rejection under a tangent hull of the log-concave density) after
   sampling, by exact abduction's code (:mod:`counterfair.inference.training_latents`;
   :func:`drawn_in_program`). The fit carries every training row's latent draws as the
   joint fit does, and every later stage reads the same ``Fit``.

**Two latents per row.** Two latents that share a child (and no child with a third
latent) are integrated out together (:func:`pair_of`): every child of either, Normal
ones included, enters ``log int prod_c p_c(y_c | eta_c + load1_c z1 + load2_c z2)
Normal(z | 0, I) dz`` per row, by the product rule of ``PAIR_NODES`` nodes per
axis rotated to the Hessian at the row's mode (``PAIR_NEWTON`` Newton steps);
``cf_integrated2`` in ``quadrature.hpp``; the program's pieces are in
:mod:`counterfair.stan.integrated_pairs`. The generated quantities draw each row's
``(z1, z2)`` exactly (rejection from a Gaussian bound, ``draw_row2``), and the fit
carries both latents per row as the joint fit does; new rows are abducted by MCMC.

A latent with a loading that differs by group (``loading_by``), one that shares
children with two others (more than two per row), a pair with a categorical child,
or a non-root latent is not integrated: its reason is :func:`unsupported_reason`. A
latent with a categorical child is (the joint program cannot anchor it: it samples it
directly, which mixes slowly), and exact abduction draws its rows, as any other's.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from counterfair.model.equation import NodeEquation
from counterfair.model.specs import Latent
from counterfair.stan.families import stan_family
from counterfair.stan.families.base import (
    CATEGORICAL_MORE,
    NEGATIVE_BINOMIAL_CODE,
    ONE_COLUMN_CODES,
    ORDINAL_CODE,
)

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

logger = logging.getLogger(__name__)

LatentsMode = Literal["joint", "integrated", "auto"]
LATENTS_MODES: tuple[str, ...] = ("joint", "integrated", "auto")

HEADER = Path(__file__).with_name("integrated.hpp")
"""The Stan face of the quadrature and of the exact draws (CmdStan user header)."""

CORE = Path(__file__).with_name("quadrature.hpp")
"""The quadrature and the exact draws themselves (plain C++), included by :data:`HEADER`
and by the ctypes library of :mod:`counterfair.stan.native`."""

GH_NODES = 9
"""Gauss-Hermite nodes per row, from the accuracy test (``tests/test_integrated.py``,
``docs/integrated.md``): against brute-force integration, the worst error of a row's log
marginal over Poisson, negative binomial, Bernoulli and ordinal children, predictors 3
units either side of the data and loadings (per standard deviation of the latent given
its Normal children) up to 0.3 is 2.4e-8 (7 nodes: 1.5e-7, 5 nodes: 4.4e-6); at a
loading of 0.6 it is 1.2e-6, at 1.0 2.2e-5 (a Poisson child's posterior is then skewed
beyond what nine nodes follow)."""

NEWTON_STEPS = 3
"""Newton steps from the Normal approximation's mode to the integrand's mode."""

FUNCTIONS = """\
  // Each row's latent integrated out of its non-Normal children (counterfair's
  // integrated.hpp, compiled in as CmdStan's user header): the sum over rows of the
  // log marginal, each row's log marginal, and one exact draw of each row's latent.
  real cf_integrated(array[,] int y, matrix eta, row_vector load, array[] int family,
                     vector phi, vector cuts, array[] int cut_start, array[] int cut_len,
                     vector gh_x, vector gh_logw, int n_newton);
  vector cf_integrated_rows(array[,] int y, matrix eta, row_vector load, array[] int family,
                            vector phi, vector cuts, array[] int cut_start,
                            array[] int cut_len, vector gh_x, vector gh_logw, int n_newton);
  vector cf_integrated_rng(array[,] int y, matrix eta, row_vector load, array[] int family,
                           vector phi, vector cuts, array[] int cut_start,
                           array[] int cut_len, vector gh_x, vector gh_logw, int n_newton);"""

DATA_LINES = (
    "int<lower=1> n_gh;  // Gauss-Hermite nodes per row (integrated latents)",
    "vector[n_gh] gh_x;  // their positions",
    "vector[n_gh] gh_logw;  // log of their weights",
    "int<lower=0> n_newton;  // Newton steps to each row's mode",
)


def uses_header(code: str) -> bool:
    """Whether a program calls the integrated-latent functions (needs :data:`HEADER`)."""
    return "cf_integrated(" in code or "cf_integrated2(" in code


@cache
def header_text() -> str:
    """The C++ headers' text, both (part of a compiled program's cache key)."""
    return HEADER.read_text(encoding="utf-8") + CORE.read_text(encoding="utf-8")


def header_digest() -> str:
    """sha256 of the header, first 16 hex digits."""
    return hashlib.sha256(header_text().encode()).hexdigest()[:16]


def quadrature_data(nodes: int = GH_NODES, newton: int = NEWTON_STEPS) -> dict[str, Any]:
    """The fit program's quadrature data: nodes, log weights and Newton steps."""
    x, w = np.polynomial.hermite.hermgauss(nodes)
    return {"n_gh": nodes, "gh_x": x, "gh_logw": np.log(w), "n_newton": newton}


# ---------------------------------------------------------------------- applicability
def partners(scm: SCM, latent: str) -> list[str]:
    """The other latents that share a child with ``latent``, in the SCM's order."""
    found: set[str] = set()
    for child in scm.children(latent):
        eq = scm.equations.get(child)
        if eq is not None:
            found.update(t.parent for t in eq.latent if t.parent != latent)
    return [name for name in scm.latents if name in found]


def pair_of(scm: SCM, latent: str) -> tuple[str, str] | None:
    """The two latents integrated together with ``latent`` (in the SCM's order), or None
    when it shares no child with another latent."""
    others = partners(scm, latent)
    if not others:
        return None
    first, second = sorted([latent, others[0]], key=scm.latents.index)
    return first, second


def _root_reason(scm: SCM, latent: str) -> str | None:
    spec = scm.specs[latent]
    if not isinstance(spec, Latent) or scm.parents(latent):
        return "it is not a root latent with a Normal prior"
    return None


def _pair_reason(scm: SCM, latent: str, others: list[str]) -> str | None:
    """Why ``latent`` and its one partner cannot be integrated out together."""
    if len(others) > 1:
        return f"it shares children with {others} (more than two latents per row)"
    (other,) = others
    beyond = [name for name in partners(scm, other) if name != latent]
    if beyond:
        return (
            f"its partner {other!r} shares children with {beyond} too (more than two "
            "latents per row)"
        )
    reason = _root_reason(scm, other)
    if reason is not None:
        return f"its partner {other!r}: {reason}"
    for name in (latent, other):
        for child in scm.children(name):
            eq = scm.equations.get(child)
            if eq is None:
                continue
            if eq.loading_by is not None:
                return f"the loading of {name!r} on {child!r} differs by group (loading_by)"
            if eq.family.additive_noise or stan_family(eq).quadrature_code in ONE_COLUMN_CODES:
                continue
            return (
                f"the child {child!r} of {name!r} has family {eq.spec.family!r}, which the "
                "quadrature of two latents per row does not cover"
            )
    return None


def unsupported_reason(scm: SCM, latent: str) -> str | None:
    """Why ``latent`` cannot be integrated out, or None when it can (alone, or with the
    one latent it shares children with, :func:`pair_of`)."""
    reason = _root_reason(scm, latent)
    if reason is not None:
        return reason
    others = partners(scm, latent)
    if others:
        return _pair_reason(scm, latent, others)
    for child in scm.children(latent):
        eq = scm.equations.get(child)
        if eq is None:
            continue
        if eq.loading_by is not None:
            return f"its loading on {child!r} differs by group (loading_by)"
        if eq.family.additive_noise:
            continue
        if stan_family(eq).quadrature_code is None:
            return (
                f"its child {child!r} has family {eq.spec.family!r}, which the quadrature "
                "does not cover"
            )
    return None


def integrated_latents(scm: SCM, latents: str, backend: str) -> tuple[str, ...]:
    """The latents the fit program integrates out, for ``SCM.fit(latents=...)``.

    ``"joint"``: none. ``"integrated"``: every latent, or a ValueError naming the
    first that cannot be and why. ``"auto"``: those that can be alone (a pair only
    under ``"integrated"``), with one log line naming the others (sampled jointly) and
    why.

    Raises
    ------
    ValueError
        For an unknown mode, or ``"integrated"`` where it does not apply (a latent,
        or the PyStan back end, which cannot compile the C++ quadrature).
    """
    if latents not in LATENTS_MODES:
        raise ValueError(f"latents must be one of {list(LATENTS_MODES)}, got {latents!r}")
    if latents == "joint" or not scm.latents:
        return ()
    if backend == "pystan":
        if latents == "integrated":
            raise ValueError(
                "latents='integrated' needs the cmdstanpy back end: its quadrature is C++ "
                "compiled into the program, which PyStan cannot include; use backend='cmdstanpy'"
            )
        for name in scm.latents:
            logger.info(
                "latent %r sampled jointly: the PyStan back end cannot compile the "
                "quadrature's C++ (backend='cmdstanpy' integrates it out)", name,
            )
        return ()
    reasons = {name: unsupported_reason(scm, name) for name in scm.latents}
    for name in scm.latents:  # a pair is integrated together or not at all
        pair = pair_of(scm, name)
        if pair is not None and reasons[name] is None:
            other = pair[1] if pair[0] == name else pair[0]
            if reasons[other] is not None:
                reasons[name] = f"its partner {other!r} cannot be: {reasons[other]}"
    if latents == "integrated":
        for name, reason in reasons.items():
            if reason is not None:
                raise ValueError(
                    f"latent {name!r} cannot be integrated out: {reason}; "
                    "use latents='joint' (or 'auto' to integrate the others)"
                )
    if latents == "auto":  # a pair only when asked: on the measured model it cost more time
        for name in scm.latents:
            if reasons[name] is None and pair_of(scm, name) is not None:
                reasons[name] = (
                    "it shares a child with another latent, and 'auto' integrates two "
                    "latents per row only when asked (latents='integrated'): their 49 "
                    "nodes per row cost more wall time than joint sampling saves"
                )
    chosen = tuple(name for name, reason in reasons.items() if reason is None)
    for name, reason in reasons.items():
        if reason is not None:
            logger.info("latent %r sampled jointly: %s", name, reason)
    return chosen


# ---------------------------------------------------------------------- program pieces
@dataclass(frozen=True)
class IntegratedChild:
    """A non-Normal child of an integrated latent: ``eta + load * z`` in the program.

    A categorical child with ``K`` levels takes ``width = K - 1`` columns of the
    quadrature's arguments, one per non-reference level: ``eta`` is then an
    ``N x (K-1)`` matrix expression and ``load`` a ``row_vector[K-1]`` one.
    """

    eq: NodeEquation
    eta: str  # vector[N] expression: the child's predictor without the latent's z
    load: str  # real expression: the coefficient of z
    width: int = 1

    @property
    def codes(self) -> list[int]:
        """The family code of each of the child's columns (5 then 6s: categorical)."""
        code = family_code(self.eq)
        return [code] if self.width == 1 else [code] + [CATEGORICAL_MORE] * (self.width - 1)

    @property
    def loads(self) -> str:
        """The ``width`` loadings, a row vector (the same for every row)."""
        if self.width == 1:
            return f"[{self.load}]"
        return self.load


def categorical_width(eq: NodeEquation) -> int:
    """Columns a categorical child takes in the quadrature: its non-reference levels."""
    levels = getattr(eq.spec, "n_levels", 0)
    if levels < 2:
        raise ValueError(
            f"the levels of {eq.node!r} are not known yet: give them in its spec or fit "
            "from data (they are read from the column)"
        )
    return int(levels) - 1


def family_code(eq: NodeEquation) -> int:
    code = stan_family(eq).quadrature_code
    assert code is not None
    return code


def int_list(values: Sequence[int]) -> str:
    return "{" + ", ".join(str(v) for v in values) + "}"


def row_vector(values: Sequence[str]) -> str:
    return "[" + ", ".join(values) + "]'"


def columns(parts: Sequence[str]) -> str:
    out = f"to_matrix({parts[-1]})"
    for part in reversed(parts[:-1]):
        out = f"append_col({part}, {out})"
    return out


def joined(parts: Sequence[str]) -> str:
    """Row vectors side by side."""
    out = parts[-1]
    for part in reversed(parts[:-1]):
        out = f"append_col({part}, {out})"
    return out


def call_arguments(latent: str, children: Sequence[IntegratedChild]) -> str:
    """The arguments of ``cf_integrated*`` for ``latent`` (its outcomes in ``Y_<latent>``)."""
    etas = columns([c.eta for c in children])
    loads = joined([c.loads for c in children])
    families = int_list([code for c in children for code in c.codes])
    phis = row_vector(
        [
            c.eq.param("phi") if family_code(c.eq) == NEGATIVE_BINOMIAL_CODE else "1.0"
            for c in children
            for _ in range(c.width)
        ]
    )
    cuts, starts, lengths = cut_arguments(
        [(c.eq if family_code(c.eq) == ORDINAL_CODE else None, c.width) for c in children]
    )
    return (
        f"Y_{latent}, {etas}, {loads}, {families}, {phis}, {cuts}, "
        f"{starts}, {lengths}, gh_x, gh_logw, n_newton"
    )


def cut_arguments(children: Sequence[tuple[NodeEquation | None, int]]) -> tuple[str, str, str]:
    """The cutpoint arguments of a quadrature call: every ordinal child's cutpoints
    appended, and each column's 1-based start and count in them (``{...}`` lists).

    ``children`` holds, per child, its equation when it is ordinal (else None) and the
    columns it takes (a categorical child's non-reference levels, else 1).
    """
    cut_names: list[str] = []
    starts: list[str] = []
    lengths: list[str] = []
    offset: list[str] = ["1"]
    for ordinal, width in children:
        if ordinal is not None:
            cut_names.append(ordinal.param("cutpoints"))
            count = f"rows({ordinal.param('cutpoints')})"
            starts.append(" + ".join(offset))
            lengths.append(count)
            offset.append(count)
        else:
            starts += ["1"] * width
            lengths += ["0"] * width
    cuts = "[0.0]'"
    if cut_names:
        cuts = cut_names[-1]
        for name in reversed(cut_names[:-1]):
            cuts = f"append_row({name}, {cuts})"
    return cuts, "{" + ", ".join(starts) + "}", "{" + ", ".join(lengths) + "}"


def outcome_lines(latent: str, children: Sequence[IntegratedChild], indent: str) -> list[str]:
    """Transformed data: the outcomes of ``latent``'s non-Normal children, one column each."""
    columns = sum(c.width for c in children)
    lines = [
        f"{indent}array[N, {columns}] int Y_{latent};  // outcomes of "
        f"{', '.join(c.eq.node for c in children)} (integrated {latent})"
    ]
    k = 1
    for child in children:
        for _ in range(child.width):  # a categorical child's level, once per column
            lines.append(f"{indent}Y_{latent}[:, {k}] = {child.eq.node};")
            k += 1
    return lines


def model_line(latent: str, children: Sequence[IntegratedChild], indent: str) -> list[str]:
    """The model block's statement of ``latent``'s non-Normal children, latent integrated out."""
    nodes = ", ".join(c.eq.node for c in children)
    return [
        f"{indent}// {nodes}: {latent} integrated out (adaptive Gauss-Hermite, n_gh nodes per row)",
        f"{indent}target += cf_integrated({call_arguments(latent, children)});",
    ]


def drawn_in_program(scm: SCM, latent: str) -> bool:
    """Whether the fit program's generated quantities draw the training rows' ``latent``.

    Only the latents of a pair (exact abduction covers one latent per row): the others
    are drawn after sampling, in Python, by the C++ that abducts new rows
    (:mod:`counterfair.inference.training_latents`), which keeps them out of CmdStan's
    output files.
    """
    return pair_of(scm, latent) is not None


def nonfinite_rows(draws: np.ndarray) -> list[int]:
    """Rows (0-based) whose latent draw is not finite in some posterior draw."""
    bad = ~np.isfinite(np.asarray(draws, dtype=float))
    bad = bad.reshape(-1, bad.shape[-1]).any(axis=0)
    return [int(i) for i in np.flatnonzero(bad)]


def children_of(scm: SCM, latent: str) -> list[NodeEquation]:
    """``latent``'s non-Normal children, in graph order."""
    out = []
    for child in scm.children(latent):
        eq = scm.equations.get(child)
        if eq is not None and not eq.family.additive_noise:
            out.append(eq)
    return out


def integrated_names(integrate: Collection[str]) -> tuple[str, ...]:
    """The integrated latents in a stable order."""
    return tuple(sorted(integrate))
