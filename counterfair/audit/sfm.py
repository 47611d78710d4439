"""The decomposition of a gap from the Standard Fairness Model's roles alone.

:meth:`~counterfair.audit.sfm_fit.SFMFit.decompose` (of :func:`~counterfair.audit.fit_sfm`)
splits ``TV = E[y | x1] - E[y | x0]`` into the same direct, indirect and spurious terms
as :func:`counterfair.audit.decompose`, in both forms, but needs no SCM and no mechanism
for any mediator: the user names ``X``, ``x0``, ``x1``, the confounders ``Z``, the
mediators ``W`` and the outcome ``Y``, and the terms are
identified under the Standard Fairness Model (Plečko and Bareinboim, *Causal Fairness
Analysis*, 2024, Theorem 4.6 and its general-form counterpart) from

* ``mu_x(z, w) = E[y | x, z, w]``, the outcome's regression on ``X``, ``Z`` and ``W``
  with ``X`` interacting with every other term (:mod:`counterfair.audit.sfm_models`),
  and
* ``pi(z) = P(x1 | z)``, the attribute's dependence on the confounders.

With ``r(z) = (1 - pi(z)) / pi(z)`` and every sum over the rows of the given level,
weighted by the rows' weights ``omega`` (see below)::

    E[y_{x1, W_{x0}} | x0] = sum_{x0} omega mu_1(z, w) / sum_{x0} omega
    E[y_{x1} | x0]         = sum_{x1} omega r(z) mu_1(z, w) / sum_{x1} omega r(z)
    E[y_{x0} | x1]         = sum_{x0} omega mu_0(z, w) / r(z) / sum_{x0} omega / r(z)
    E[y_{x1, W_{x0}}]      = sum_{x0} omega mu_1(z, w) / (1 - pi(z))
                             / sum_{x0} omega / (1 - pi(z))

The first needs no model of ``X``: the mediators keep the values the rows of ``x0``
have, and ``mu_1`` says what ``y`` would be with ``X = x1`` and those mediators. The
second reweights the rows of ``x1`` to the confounders of ``x0`` (``P(z | x0) / P(z |
x1)`` is ``r(z)`` times a constant); the last reweights the rows of ``x0`` to the
confounders of everybody. The factual terms are the rows' own means, ``E[y_{x0} | x0]
= E[y | x0]`` and ``E[y_{x1} | x1] = E[y | x1]``, so TV is the (weighted) raw gap and
both identities, ``TV = Ctf-DE - Ctf-IE - Ctf-SE`` and ``TV = NDE - NIE + Exp-SE_x1 -
Exp-SE_x0``, hold draw by draw.

Uncertainty
-----------
Each of the ``n_samples`` draws pairs one posterior draw of every nuisance model with
one weight vector over the rows: ``rows="bayesian_bootstrap"`` (the default) draws
``omega`` from a flat Dirichlet (Rubin 1981), so the intervals carry the sampling of
the rows (the distribution of ``Z`` and ``W``) as well as the models' uncertainty, as a
frequentist's intervals over repeated samples do; ``rows="fixed"`` takes every weight
as 1: the intervals are then the models' alone, given these rows, and TV is exactly the
raw gap. The weights are counter-based random numbers keyed by the row's position, so
the result does not depend on ``chunk_rows``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from counterfair.rng import RowRandom

from .decomposition_result import DECOMPOSITION_TERMS, Decomposition, table_of
from .sfm_models import NuisanceModel, SFMFrame

if TYPE_CHECKING:  # SFMFit's methods call this module
    from .sfm_fit import SFMFit

__all__ = [
    "ROW_WEIGHTS",
    "Sums",
    "add_sums",
    "check_options",
    "chunk_means",
    "decompose_fit",
    "decomposition_of",
    "evaluate",
    "row_weights",
    "sample_params",
    "terms_of",
]

ROW_WEIGHTS = ("bayesian_bootstrap", "fixed")
"""What the rows' weights are (``rows=`` of
:meth:`~counterfair.audit.sfm_fit.SFMFit.decompose`)."""

PROPENSITY_FLOOR = 0.01
"""``pi(z)`` is kept within ``[floor, 1 - floor]`` (trimmed weights, a common choice);
row-draws beyond are counted in a note. At ``1e-3`` the Census's spurious term had a
posterior sd four times its 95 % interval's half-width: a few rows of one draw with
odds near 1,000 carried its reweighted mean."""

_log = logging.getLogger("counterfair.audit.sfm")


@dataclass
class Sums:
    """Weighted sums over the rows, one entry per draw (:func:`add_sums`)."""

    n_samples: int
    parts: dict[str, np.ndarray] = field(default_factory=dict)
    clipped: int = 0

    def add(self, name: str, value: np.ndarray) -> None:
        if name in self.parts:
            self.parts[name] = self.parts[name] + value
        else:
            self.parts[name] = np.asarray(value, dtype=float).copy()

    def __getitem__(self, name: str) -> np.ndarray:
        return self.parts[name]


def check_options(n_samples: object, interval: object, rows: object, chunk_rows: object) -> None:
    if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 2:
        raise ValueError(f"n_samples must be an integer of at least 2, got {n_samples!r}")
    if not isinstance(interval, float | int) or not 0 < float(interval) < 1:
        raise ValueError(f"interval must be a number in (0, 1), got {interval!r}")
    if rows not in ROW_WEIGHTS:
        raise ValueError(f"rows must be one of {ROW_WEIGHTS}, got {rows!r}")
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")


def _draw_indices(model: NuisanceModel, n_samples: int) -> np.ndarray:
    total = model.fit.params().n
    if total < n_samples:
        raise ValueError(
            f"the {model.name} model has {total} posterior draws, fewer than n_samples="
            f"{n_samples}: ask for more draws (SFMSettings(draws=) per chain) or fewer "
            "samples"
        )
    return np.unique(np.linspace(0, total - 1, n_samples).round().astype(int))


def chunk_means(
    encoded: SFMFrame, part: slice, models: dict[str, NuisanceModel], params: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``mu_0``, ``mu_1`` (on y's scale) and ``pi`` (``None`` without confounders) on the
    rows ``part``, one row per draw: ``(S, N)`` each."""

    def outcome(level: int) -> np.ndarray:
        mu = models["outcome"].means(encoded, part, params["outcome"], level=level)
        return encoded.y_location + encoded.y_scale * mu

    pi = None
    if "attribute" in models:
        pi = models["attribute"].means(encoded, part, params["attribute"])
    return outcome(0), outcome(1), pi


def sample_params(fitted: SFMFit, n_samples: int) -> tuple[dict[str, Any], int]:
    """``n_samples`` posterior draws of every nuisance model, spread over its chains, and
    how many there are (the same number for every model)."""
    params = {
        name: model.fit.params().take(_draw_indices(model, n_samples))
        for name, model in fitted.models.items()
    }
    n_used = min(p.n for p in params.values())
    return {name: p.take(np.arange(n_used)) for name, p in params.items()}, n_used


def row_weights(seed: int, part: slice, n_samples: int, rows: str) -> np.ndarray:
    """The weights of the rows ``part`` in each draw, ``(n_samples, N)``: standard
    exponentials (a flat Dirichlet once normalised) keyed by the row's position, or 1."""
    n = part.stop - part.start
    if rows == "bayesian_bootstrap":
        positions = np.arange(part.start, part.start + n, dtype=np.int64)
        return -np.log(RowRandom(seed, positions).random((n_samples, n), row_axis=1))
    return np.ones((n_samples, n))


def add_sums(
    sums: Sums,
    x1: np.ndarray,
    y: np.ndarray,
    mu0: np.ndarray,
    mu1: np.ndarray,
    pi: np.ndarray | None,
    omega: np.ndarray,
) -> None:
    """Add the weighted sums of some rows: ``x1`` (1 where ``X = x1``) and ``y`` of shape
    ``(N,)``; ``mu0``, ``mu1`` (the outcome models' means), ``pi`` (the attribute
    model's ``P(x1 | z)``, ``None`` without confounders) and ``omega`` (the rows'
    weights) of shape ``(S, N)``. Any estimate of the nuisances may be given (the
    Census benchmark's gradient boosting, say); the terms are :func:`terms_of`."""
    x0 = 1.0 - x1
    w0, w1 = omega * x0, omega * x1
    sums.add("n0", w0.sum(axis=1))
    sums.add("n1", w1.sum(axis=1))
    sums.add("y0", w0 @ y)
    sums.add("y1", w1 @ y)
    sums.add("a", (w0 * mu1).sum(axis=1))
    if pi is None:
        return
    sums.clipped += int(np.count_nonzero((pi < PROPENSITY_FLOOR) | (pi > 1 - PROPENSITY_FLOOR)))
    pi = np.clip(pi, PROPENSITY_FLOOR, 1 - PROPENSITY_FLOOR)
    odds0 = (1.0 - pi) / pi  # r(z): to the confounders of x0
    sums.add("b_num", (w1 * odds0 * mu1).sum(axis=1))
    sums.add("b_den", (w1 * odds0).sum(axis=1))
    sums.add("c_num", (w0 * mu0 / odds0).sum(axis=1))
    sums.add("c_den", (w0 / odds0).sum(axis=1))
    sums.add("g_num", (w0 * mu1 / (1.0 - pi)).sum(axis=1))
    sums.add("g_den", (w0 / (1.0 - pi)).sum(axis=1))


def terms_of(sums: Sums, confounded: bool) -> dict[str, np.ndarray]:
    """Every term of :data:`DECOMPOSITION_TERMS` from the sums of all the rows, per draw."""
    n0, n1 = sums["n0"], sums["n1"]
    p0, p1 = n0 / (n0 + n1), n1 / (n0 + n1)
    ey0, ey1 = sums["y0"] / n0, sums["y1"] / n1
    a = sums["a"] / n0
    if confounded:
        b = sums["b_num"] / sums["b_den"]
        c = sums["c_num"] / sums["c_den"]
        g = sums["g_num"] / sums["g_den"]
    else:  # no confounder: X is independent of the rest, nothing is spurious
        b, c, g = ey1, ey0, a
    if confounded:
        e_x1 = p1 * ey1 + p0 * b
        e_x0 = p0 * ey0 + p1 * c
    else:  # exactly: the interventional means are the conditional ones
        e_x1, e_x0 = ey1, ey0
    return {
        "TV": ey1 - ey0,
        "Ctf-DE": a - ey0,
        "Ctf-IE": a - b,
        "Ctf-SE": b - ey1,
        "NDE": g - e_x0,
        "NIE": g - e_x1,
        "Exp-SE_x0": ey0 - e_x0,
        "Exp-SE_x1": ey1 - e_x1,
    }


def decompose_fit(
    fitted: SFMFit, *, n_samples: int, interval: float, rows: str, chunk_rows: int
) -> Decomposition:
    """:meth:`SFMFit.decompose <counterfair.audit.sfm_fit.SFMFit.decompose>`: the options
    checked, then every term from the fits."""
    check_options(n_samples, interval, rows, chunk_rows)
    return _decompose(fitted, n_samples=n_samples, interval=float(interval), rows=rows,
                      chunk_rows=chunk_rows)


def _decompose(
    fitted: SFMFit, *, n_samples: int, interval: float, rows: str, chunk_rows: int
) -> Decomposition:
    sums = evaluate(fitted, n_samples=n_samples, rows=rows, chunk_rows=chunk_rows)
    return decomposition_of(fitted, sums, interval=interval, rows=rows)


ChunkHook = Callable[[slice, np.ndarray, np.ndarray, "np.ndarray | None", np.ndarray], None]
"""What :func:`evaluate` also gives each chunk: its rows, ``mu_0``, ``mu_1``, ``pi`` and
the rows' weights ``omega`` (each ``(S, N)``)."""


def evaluate(
    fitted: SFMFit,
    *,
    n_samples: int,
    rows: str,
    chunk_rows: int,
    also: ChunkHook | None = None,
) -> Sums:
    """The decomposition's sums over every row, ``chunk_rows`` at a time, and, if given,
    ``also`` of each chunk's means and weights (:mod:`counterfair.audit.sfm_split`)."""
    encoded, models = fitted.encoded, fitted.models
    started = time.perf_counter()
    params, n_used = sample_params(fitted, n_samples)
    sums = Sums(n_used)
    n = len(encoded)
    for start in range(0, n, chunk_rows):
        part = slice(start, min(start + chunk_rows, n))
        mu0, mu1, pi = chunk_means(encoded, part, models, params)
        omega = row_weights(fitted.seed, part, n_used, rows)
        add_sums(sums, encoded.x[part].astype(float), encoded.y[part], mu0, mu1, pi, omega)
        if also is not None:
            also(part, mu0, mu1, pi, omega)
    _log.info(
        "SFM decomposition: models fitted in %.1f s, %d rows x %d draws evaluated in %.1f s",
        fitted.seconds, n, n_used, time.perf_counter() - started,
    )
    return sums


def decomposition_of(fitted: SFMFit, sums: Sums, *, interval: float, rows: str) -> Decomposition:
    """The :class:`Decomposition` of the sums of every row (:func:`evaluate`)."""
    encoded, roles = fitted.encoded, fitted.roles
    terms = terms_of(sums, confounded=fitted.confounded)
    draws_frame = pd.DataFrame(
        {term: terms[term] for term in DECOMPOSITION_TERMS},
        index=pd.RangeIndex(sums.n_samples, name="sample"),
    )
    return Decomposition(
        table=table_of(draws_frame, interval),
        draws=draws_frame,
        attribute=roles.attribute,
        x0=roles.x0,
        x1=roles.x1,
        target=roles.outcome,
        confounders=roles.confounders,
        mediators=roles.mediators,
        notes=tuple(_notes(fitted, sums, rows)),
        interval=interval,
        n_rows=fitted.n_rows,
        n_x0=int(np.count_nonzero(~encoded.x)),
        n_x1=int(np.count_nonzero(encoded.x)),
    )


def _notes(fitted: SFMFit, sums: Sums, rows: str) -> list[str]:
    roles, encoded = fitted.roles, fitted.encoded
    head = fitted.description()
    notes = [
        *head,
        "rows weighted by a Bayesian bootstrap (a flat Dirichlet per draw): the intervals "
        "carry the sampling of the rows and the models' uncertainty"
        if rows == "bayesian_bootstrap"
        else "rows weighted 1: the intervals carry the models' uncertainty only",
    ]
    if roles.family == "bernoulli":
        notes.append(f"y is the indicator of {roles.outcome} = {encoded.positive!r}")
    if not roles.confounders:
        notes.append(
            "no confounder: X is independent of everything else it does not cause, so "
            "the spurious terms are 0"
        )
    if sums.clipped:
        notes.append(
            f"the attribute model's P({roles.attribute} = {roles.x1!r} | z) was beyond "
            f"[{PROPENSITY_FLOOR}, {1 - PROPENSITY_FLOOR}] for {sums.clipped:,} row-draws "
            "and was clipped there (near-violations of positivity)"
        )
    return notes + fitted.diagnostics()
