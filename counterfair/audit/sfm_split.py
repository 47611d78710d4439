"""Past the Standard Fairness Model: the spurious effect split by confounder, the indirect
effect split by mediator.

:meth:`SFMFit.split <counterfair.audit.sfm_fit.SFMFit.split>` takes the nuisance models
of :func:`~counterfair.audit.fit_sfm` and splits two of the x-specific terms of
:meth:`~counterfair.audit.sfm_fit.SFMFit.decompose` into parts, one per group of
covariates, in an order the user gives (Plečko and Bareinboim, *Causal Fairness
Analysis*, 2024, the decompositions beyond the SFM; faircause's COMPAS example splits the
spurious effect between sex and age, and the indirect effect between juvenile and prior
counts and the charge degree).

The spurious effect, ``Ctf-SE = E[y_{x1} | x0] - E[y_{x1} | x1]``, moves the
confounders' distribution from that of ``x1`` to that of ``x0`` while ``X`` stays at
``x1``. With the confounders in ordered groups ``Z_1, ..., Z_k``, let ``Q_i`` be the mean
of ``E[y | x1, z]`` when ``Z_1..Z_i`` are drawn as for ``x0`` and the rest, given them,
as for ``x1``::

    Q_i = E_{z_{<=i} ~ P(. | x0)} E[y | x1, z_{<=i}]

(``E[y | x1, z_{<=i}]`` averages the later groups as they are among the rows of ``x1``).
``Q_0 = E[y | x1]`` and ``Q_k = E[y_{x1} | x0]``, so the parts ``SE_i = Q_i - Q_{i-1}``
add up to ``Ctf-SE``. They are identified under the SFM whatever the order; reading
``SE_i`` as the spurious variation that ``Z_i`` carries assumes the order is causal (no
later group causes an earlier one), and another order gives other parts with the same
sum (a sequential attribution, not a Shapley one).

The indirect effect, ``Ctf-IE = E[y_{x1, W_{x0}} | x0] - E[y_{x1} | x0]``, moves the
mediators from their values under ``x1`` to those under ``x0``. With the mediators in
ordered groups ``W_1, ..., W_m``, let ``T_j`` be the mean outcome of ``x0``'s units with
``X = x1``, the first ``j`` groups at their values under ``x0`` and the later ones
responding to ``x1`` (and to the first ``j``)::

    T_j = E_{(z, w_{<=j}) ~ P(. | x0)} E[y | x1, z, w_{<=j}]

``T_0 = E[y_{x1} | x0]`` and ``T_m = E[y_{x1, W_{x0}} | x0]``, so the parts ``IE_j =
T_j - T_{j-1}`` add up to ``Ctf-IE``. ``T_j`` is that nested counterfactual when the
groups are in causal order (no later group causes an earlier one) and no unobserved
variable confounds two groups (mediators so linked belong in one group), besides the
SFM's own assumptions.

Both are the same computation: the mean over the rows of ``x0`` of the regression of
``mu_1(z, w) = E[y | x1, z, w]`` (the outcome model's, draw by draw) on some of the
covariates over the rows of ``x1``. The inner points are least-squares projections of
``mu_1``'s draws on the moved covariates' columns (:func:`~counterfair.audit.sfm_columns.
covariate_columns`: splines, indicators and, for a grouping covariate, its levels'
shrunk means of ``y`` among ``x1``'s rows), each draw's weighted by that draw's row
weights (so that the intervals carry the sampling of the rows the projection reads: with
the projections unweighted, the part of a last mediator had a posterior sd of 0.026
against an empirical 0.078 over 12 simulated data sets, and 33 % coverage); the end
points are the decomposition's own terms, so every split adds up to its term exactly,
draw by draw.
The projection at all the confounders is a second estimate of ``E[y_{x1} | x0]`` beside
the decomposition's reweighting one; a note says how far apart they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .sfm import check_options, decomposition_of, evaluate, terms_of
from .sfm_columns import covariate_columns, level_means_of_y
from .split_result import EffectSplit, split_table

if TYPE_CHECKING:  # SFMFit's methods call this module
    from .sfm_fit import SFMFit

__all__ = ["Groups", "check_groups", "split_fit"]

Groups = Sequence[str | Sequence[str]]
"""The ordered groups of a split: each entry a column or a sequence of columns."""


@dataclass
class _Projection:
    """The sums of one weighted least-squares projection of ``mu_1`` on some covariates'
    columns over ``x1``'s rows, per draw (each draw's own row weights), and of those
    columns weighted over ``x0``'s rows."""

    owners: tuple[str, ...]
    xtx: np.ndarray | None = None
    xtm: np.ndarray | None = None
    wx0: np.ndarray | None = None

    def add(self, columns: np.ndarray, x1: np.ndarray, mu1: np.ndarray,
            omega: np.ndarray) -> None:
        on1, w1 = columns[x1], omega[:, x1]
        xtx = np.empty((len(omega), columns.shape[1], columns.shape[1]))
        for s, weights in enumerate(w1):  # one small product per draw: (p, N1) (N1, p)
            xtx[s] = (on1 * weights[:, None]).T @ on1
        parts = (xtx, (w1 * mu1[:, x1]) @ on1, (omega * ~x1) @ columns)
        if self.xtx is None:
            self.xtx, self.xtm, self.wx0 = parts
        else:
            assert self.xtm is not None and self.wx0 is not None
            self.xtx += parts[0]
            self.xtm += parts[1]
            self.wx0 += parts[2]

    def mean_over_x0(self, n0: np.ndarray) -> np.ndarray:
        """Per draw, the weighted mean over ``x0``'s rows of that draw's projection."""
        assert self.xtx is not None and self.xtm is not None and self.wx0 is not None
        diag = np.diagonal(self.xtx, axis1=1, axis2=2)
        scale = np.sqrt(np.maximum(diag, 1e-300))  # (S, p): columns to unit scale
        normal = self.xtx / (scale[:, :, None] * scale[:, None, :])
        inverse = np.linalg.pinv(normal, rcond=1e-12, hermitian=True)
        coef = np.einsum("spq,sq->sp", inverse, self.xtm / scale) / scale  # (S, p)
        return np.einsum("sp,sp->s", self.wx0, coef) / n0


def check_groups(
    given: object, available: tuple[str, ...], role: str, *, option: str | None = None
) -> list[tuple[str, ...]]:
    """The ordered groups of a split of the ``role`` (``"confounders"`` or
    ``"mediators"``) whose columns are ``available``: every one exactly once, at least two
    groups. ``option`` is what the errors call the groups (default ``"<role>="``)."""
    option = option or f"{role}="
    if not available:
        raise ValueError(
            f"{option} splits the {role}, but there are none: "
            + ("nothing is spurious" if role == "confounders" else "there is no indirect effect")
        )
    if isinstance(given, str) or not isinstance(given, Sequence):
        raise TypeError(
            f"{option} is the ordered groups of the split, a list of column names or of lists "
            f"of them (e.g. {list(available[:2])!r}), got {given!r}"
        )
    groups: list[tuple[str, ...]] = []
    seen: set[str] = set()
    for entry in given:
        group = (entry,) if isinstance(entry, str) else tuple(entry)
        if not group:
            raise ValueError(f"{option} has an empty group")
        for column in group:
            if not isinstance(column, str) or column not in available:
                raise ValueError(
                    f"{option} names {column!r}, which is not one of the {role} "
                    f"{list(available)}"
                )
            if column in seen:
                raise ValueError(f"{option} names {column!r} twice")
            seen.add(column)
        groups.append(group)
    left = [c for c in available if c not in seen]
    if left:
        raise ValueError(f"{option} leaves out {left}: every one of the {role} is in one group")
    if len(groups) < 2:
        raise ValueError(f"{option} has one group: a split needs at least two")
    return groups


def split_fit(
    fitted: SFMFit,
    *,
    confounders: Groups | None,
    mediators: Groups | None,
    n_samples: int,
    interval: float,
    rows: str,
    chunk_rows: int,
) -> EffectSplit:
    """:meth:`SFMFit.split <counterfair.audit.sfm_fit.SFMFit.split>`: the groups and
    options checked, then the parts of each split and the decomposition they add up to."""
    if confounders is None and mediators is None:
        raise TypeError("SFMFit.split needs confounders= or mediators= (the ordered groups)")
    check_options(n_samples, interval, rows, chunk_rows)
    roles, encoded = fitted.roles, fitted.encoded
    order: dict[str, tuple[tuple[str, ...], ...]] = {}
    if confounders is not None:
        order["Ctf-SE"] = tuple(check_groups(confounders, roles.confounders, "confounders"))
    if mediators is not None:
        order["Ctf-IE"] = tuple(check_groups(mediators, roles.mediators, "mediators"))

    # the inner points of each split, and the check of E[y_{x1} | x0]
    stages: dict[str, list[_Projection]] = {}
    if "Ctf-SE" in order:
        groups = order["Ctf-SE"]
        stages["Ctf-SE"] = [
            _Projection(tuple(c for g in groups[: i + 1] for c in g))
            for i in range(len(groups) - 1)
        ]
    if "Ctf-IE" in order:
        groups = order["Ctf-IE"]
        stages["Ctf-IE"] = [
            _Projection(roles.confounders + tuple(c for g in groups[: j + 1] for c in g))
            for j in range(len(groups) - 1)
        ]
    check = _Projection(roles.confounders) if fitted.confounded else None
    projections = [p for ps in stages.values() for p in ps] + ([check] if check else [])
    encodings = level_means_of_y(encoded)

    def also(part: slice, mu0: np.ndarray, mu1: np.ndarray, pi: np.ndarray | None,
             omega: np.ndarray) -> None:
        x1 = encoded.x[part]
        for projection in projections:
            columns = covariate_columns(encoded, projection.owners, encodings, part)
            projection.add(columns, x1, mu1, omega)

    sums = evaluate(fitted, n_samples=n_samples, rows=rows, chunk_rows=chunk_rows, also=also)
    decomposition = decomposition_of(fitted, sums, interval=float(interval), rows=rows)
    terms = terms_of(sums, confounded=fitted.confounded)
    n0, n1 = sums["n0"], sums["n1"]
    ey1, a = sums["y1"] / n1, sums["a"] / n0
    b = ey1 + terms["Ctf-SE"]  # E[y_{x1} | x0], as the decomposition has it

    columns: dict[str, np.ndarray] = {}
    labels: list[tuple[str, str, str]] = []
    for effect, groups in order.items():
        inner = [p.mean_over_x0(n0) for p in stages[effect]]
        points = [ey1, *inner, b] if effect == "Ctf-SE" else [b, *inner, a]
        for group, lo, hi in zip(groups, points[:-1], points[1:], strict=True):
            label = "+".join(group)
            columns[f"{effect}[{label}]"] = hi - lo
            labels.append((effect, label, ", ".join(group)))
    draws = pd.DataFrame(columns, index=pd.RangeIndex(sums.n_samples, name="sample"))
    notes = _notes(order, check, b, n0)
    return EffectSplit(
        table=split_table(draws, labels, decomposition, float(interval)), draws=draws,
        decomposition=decomposition, order=order, notes=tuple(notes),
        interval=float(interval),
    )


def _notes(
    order: dict[str, tuple[tuple[str, ...], ...]],
    check: _Projection | None,
    b: np.ndarray,
    n0: np.ndarray,
) -> list[str]:
    meanings = {
        "Ctf-SE": ("confounders", "the change in E[y | x1, z] when its group is drawn as for "
                   "x0 rather than x1, the earlier groups moved already; identified under the "
                   "SFM in any order, read as the spurious variation a group carries only if "
                   "the order is causal; another order gives other parts with the same sum"),
        "Ctf-IE": ("mediators", "the change in y (X at x1) when its group takes its value "
                   "under x0, the earlier groups at theirs and the later ones responding to "
                   "x1; a nested counterfactual if the groups are in causal order and no "
                   "unobserved variable confounds two of them"),
    }
    notes = []
    for effect, groups in order.items():
        role, meaning = meanings[effect]
        moved = ", then ".join("+".join(g) for g in groups)
        notes.append(f"{effect} split by {role}, moved in the order {moved}: each part is "
                     f"{meaning}")
    notes.append(
        "the inner points are least-squares projections of the outcome model's mu_1 draws "
        "on the moved covariates' columns over x1's rows, averaged over x0's rows, each "
        "draw with its rows' weights; the end points are the decomposition's terms, so "
        "the parts add up to them in every draw"
    )
    if check is not None:
        regression = check.mean_over_x0(n0)
        gap = float(np.mean(regression - b))
        sd = float(np.std(b, ddof=1)) or 1.0
        notes.append(
            f"E[y_{{x1}} | x0] is {float(np.mean(b)):,.4g} by the attribute model's "
            f"reweighting and {float(np.mean(regression)):,.4g} by the projection on all "
            f"the confounders ({gap / sd:+.1f} of its posterior sds apart)"
        )
    return notes
