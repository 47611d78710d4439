"""A predictor fair by business necessity, built on the SFM decomposition's own models.

The user says which of the x-specific effects a prediction may carry (``allow``: any of
``"DE"``, ``"IE"``, ``"SE"``; faircause's "business necessity" set) and
:meth:`SFMFit.predictor <counterfair.audit.sfm_fit.SFMFit.predictor>` removes the
others. With the outcome model's posterior mean ``mu_x(z, w)``
(:mod:`counterfair.audit.sfm_models`) and ``m(z)``, the least-squares regression of
``mu_1(z, W)`` on the confounders' columns over the rows of ``x1`` (an estimate of
``E[mu_1(z, W) | x1, z]``), the outcome model splits into three parts::

    mu_x(z, w) = [mu_x(z, w) - mu_1(z, w)] + [mu_1(z, w) - m(z)] + m(z)
                 direct part  A             indirect part  B        spurious part  C

and each part carries exactly one of the x-specific effects of
:meth:`~counterfair.audit.sfm_fit.SFMFit.decompose`, in the population:

* ``A`` is 0 for ``X = x1``, so its indirect and spurious effects (which compare
  ``X = x1`` worlds) are 0, and its direct effect is ``E[mu_1 - mu_0 | x0]``, the
  outcome's Ctf-DE;
* ``B`` does not read ``X``, so its direct effect is 0; its mean given ``x1`` and ``z``
  is 0, so its spurious effect (``x1``'s rows reweighted to ``x0``'s confounders, less
  their own mean) is 0; its indirect effect is the outcome's Ctf-IE;
* ``C`` reads the confounders alone: no direct effect, no indirect one (the mediators do
  not enter), and its spurious effect is the outcome's Ctf-SE.

The prediction is a constant plus the allowed parts (the constant makes its mean the
outcome's on the fitted rows). With ``allow=("IE",)`` it is ``mu_1(z, w) - m(z)`` plus a
constant: the same for both levels of ``X``, and blind to what the confounders say
beyond the mediators. Its decomposition (:meth:`SFMPredictor.decompose`) needs no
outcome regression (the prediction is a known function of ``x``, ``z`` and ``w``), only
the attribute model and the rows' weights: a removed direct effect is 0 in every draw,
and removed indirect and spurious effects are 0 up to how well ``m`` and the attribute
model balance the confounders (Monte Carlo and estimation error). The general-form terms
(NDE, NIE, Exp-SE) are not constrained: ``B``'s mean given ``x0`` and ``z`` need not be
0, so its Exp-SE_x0 is not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from counterfair.errors import DataError

from .decomposition_result import DECOMPOSITION_TERMS, Decomposition, table_of
from .sfm import ROW_WEIGHTS, Sums, add_sums, row_weights, terms_of
from .sfm_columns import covariate_columns, level_means_of_y
from .sfm_models import SFMFrame

if TYPE_CHECKING:  # SFMFit's methods call this module
    from .sfm_fit import SFMFit

__all__ = ["EFFECTS", "SFMPredictor", "predictor_of"]

EFFECTS = ("DE", "IE", "SE")
"""The x-specific effects a prediction may be allowed to carry (``allow=``)."""

_PARTS = {"DE": "direct", "IE": "indirect", "SE": "spurious"}


@dataclass(frozen=True)
class SFMPredictor:
    """A prediction of the outcome that carries only the allowed x-specific effects.

    Build it with :meth:`SFMFit.predictor <counterfair.audit.sfm_fit.SFMFit.predictor>`.
    :meth:`predict` gives the prediction for any rows with the attribute, the
    confounders and the mediators; :meth:`parts` its three parts; :meth:`decompose` its
    own decomposition.

    Attributes
    ----------
    fitted : SFMFit
        The nuisance models it is built from.
    allow : tuple of str
        The effects it carries (a subset of :data:`EFFECTS`).
    m_coef : numpy.ndarray
        ``m(z)``'s least-squares coefficients (intercept first) on the confounders'
        columns (:meth:`_z_columns`).
    constant : float
        Added to the allowed parts (the outcome's mean less theirs, on the fitted rows).
    n_draws : int
        Posterior draws averaged for ``mu_x``.
    """

    fitted: SFMFit
    allow: tuple[str, ...]
    m_coef: np.ndarray
    constant: float
    n_draws: int

    # ---------------------------------------------------------------- rows
    def _encoded(self, data: pd.DataFrame | None) -> SFMFrame:
        if data is None:
            return self.fitted.encoded
        _check_rows(self.fitted, data)
        return self.fitted.encode(data)

    def parts(self, data: pd.DataFrame | None = None) -> pd.DataFrame:
        """The direct, indirect and spurious parts and the prediction, one row per row
        of ``data`` (default: the fitted rows) whose attribute is ``x0`` or ``x1``."""
        encoded = self._encoded(data)
        a, b, c = _parts(self.fitted, encoded, self.m_coef, self.n_draws)
        kept = {"DE": a, "IE": b, "SE": c}
        prediction = self.constant + sum(
            (kept[e] for e in self.allow), start=np.zeros(len(encoded))
        )
        return pd.DataFrame(
            {"direct": a, "indirect": b, "spurious": c, "prediction": prediction}
        )

    def predict(self, data: pd.DataFrame | None = None) -> np.ndarray:
        """The prediction for each row of ``data`` (default: the fitted rows)."""
        return self.parts(data)["prediction"].to_numpy()

    # ---------------------------------------------------------------- its effects
    def decompose(
        self,
        *,
        n_samples: int = 200,
        interval: float = 0.9,
        rows: str = "bayesian_bootstrap",
    ) -> Decomposition:
        """The prediction's own decomposition on the fitted rows.

        The prediction is a known function of ``x``, ``z`` and ``w``, so its regression
        on them is itself; each draw pairs a posterior draw of the attribute model with
        a weight vector over the rows (as
        :meth:`~counterfair.audit.sfm_fit.SFMFit.decompose`).
        """
        if rows not in ROW_WEIGHTS:
            raise ValueError(f"rows must be one of {ROW_WEIGHTS}, got {rows!r}")
        if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 2:
            raise ValueError(f"n_samples must be an integer of at least 2, got {n_samples!r}")
        fitted = self.fitted
        encoded = fitted.encoded
        a, b, c = _parts(fitted, encoded, self.m_coef, self.n_draws)
        kept = {"DE": a, "IE": b, "SE": c}
        # g(x, z, w) at x = x1 and x = x0: A is 0 at x1; at x0 it is mu_0 - mu_1
        at_x1 = self.constant + sum((kept[e] for e in self.allow if e != "DE"),
                                    start=np.zeros(len(encoded)))
        direct0 = _direct_at_x0(fitted, encoded, self.n_draws)
        at_x0 = at_x1 + (direct0 if "DE" in self.allow else 0.0)
        factual = np.where(encoded.x, at_x1, at_x0)
        pi = None
        s = n_samples
        if fitted.confounded:
            model = fitted.models["attribute"]
            total = model.fit.params().n
            take = np.unique(np.linspace(0, total - 1, min(s, total)).round().astype(int))
            s = len(take)
            pi = model.means(encoded, slice(0, len(encoded)), model.fit.params().take(take))
        sums = Sums(s)
        omega = row_weights(fitted.seed, slice(0, len(encoded)), s, rows)
        add_sums(sums, encoded.x.astype(float), factual, np.broadcast_to(at_x0, (s, len(encoded))),
                 np.broadcast_to(at_x1, (s, len(encoded))), pi, omega)
        terms = terms_of(sums, confounded=fitted.confounded)
        draws = pd.DataFrame({t: terms[t] for t in DECOMPOSITION_TERMS},
                             index=pd.RangeIndex(s, name="sample"))
        roles = fitted.roles
        allowed = ", ".join(self.allow) or "none"
        notes = (
            f"the decomposition of a prediction fair by business necessity (allowed: "
            f"{allowed}), from the outcome model's posterior mean over {self.n_draws} "
            "draws; the intervals carry the attribute model's uncertainty and the rows' "
            "weights, not the outcome model's",
            *fitted.description(),
        )
        return Decomposition(
            table=table_of(draws, float(interval)), draws=draws,
            attribute=roles.attribute, x0=roles.x0, x1=roles.x1,
            target=f"{roles.outcome} (predicted, allowed: {allowed})",
            confounders=roles.confounders, mediators=roles.mediators, notes=notes,
            interval=float(interval), n_rows=fitted.n_rows,
            n_x0=int(np.count_nonzero(~encoded.x)), n_x1=int(np.count_nonzero(encoded.x)),
        )


def predictor_of(
    fitted: SFMFit, *, allow: str | Sequence[str], n_draws: int
) -> SFMPredictor:
    """:meth:`SFMFit.predictor <counterfair.audit.sfm_fit.SFMFit.predictor>`: the allowed
    effects checked, then ``m(z)`` and the constant fitted."""
    chosen = (allow,) if isinstance(allow, str) else tuple(allow)
    unknown = [e for e in chosen if e not in EFFECTS]
    if unknown:
        raise ValueError(f"allow names {unknown}; the effects are {EFFECTS}")
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"allow names an effect twice: {list(chosen)}")
    if isinstance(n_draws, bool) or not isinstance(n_draws, int) or n_draws < 1:
        raise ValueError(f"n_draws must be a positive integer, got {n_draws!r}")
    ordered = tuple(e for e in EFFECTS if e in chosen)
    encoded = fitted.encoded
    mu1 = _mean_outcome(fitted, encoded, 1, n_draws)
    z = _z_columns(fitted, encoded)
    x1 = encoded.x
    coef, *_ = np.linalg.lstsq(z[x1], mu1[x1], rcond=None)
    a, b, c = _parts(fitted, encoded, coef, n_draws)
    kept = {"DE": a, "IE": b, "SE": c}
    allowed = sum((kept[e] for e in ordered), start=np.zeros(len(encoded)))
    constant = float(np.mean(encoded.y - allowed))
    return SFMPredictor(fitted=fitted, allow=ordered, m_coef=coef, constant=constant,
                        n_draws=n_draws)


# -------------------------------------------------------------------- helpers
def _mean_outcome(fitted: SFMFit, encoded: SFMFrame, level: int, n_draws: int) -> np.ndarray:
    """The outcome model's posterior mean of ``mu_level`` at every row (on y's scale)."""
    model = fitted.models["outcome"]
    total = model.fit.params().n
    take = np.unique(np.linspace(0, total - 1, min(n_draws, total)).round().astype(int))
    params = model.fit.params().take(take)
    out = np.empty(len(encoded))
    step = max(1, 4_000_000 // max(len(take), 1))  # rows per block: ~32 MB of draws
    for start in range(0, len(encoded), step):
        part = slice(start, min(start + step, len(encoded)))
        mu = model.means(encoded, part, params, level=level).mean(axis=0)
        out[part] = encoded.y_location + encoded.y_scale * mu
    return out


def _z_columns(fitted: SFMFit, encoded: SFMFrame) -> np.ndarray:
    """An intercept and the confounders' columns: their splines and indicators, and a
    grouped confounder's encoded outcome mean (the outcome model's encoding or, for a
    group pooled in Stan, its levels' shrunk means of y among the fitted rows of x1)."""
    encodings = {**level_means_of_y(fitted.encoded), **fitted.models["outcome"].encodings}
    return covariate_columns(encoded, fitted.roles.confounders, encodings)


def _parts(
    fitted: SFMFit, encoded: SFMFrame, coef: np.ndarray, n_draws: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``A``, ``B`` and ``C`` at every row (``A`` at the row's own ``x``)."""
    mu1 = _mean_outcome(fitted, encoded, 1, n_draws)
    m = _z_columns(fitted, encoded) @ coef
    direct = np.where(encoded.x, 0.0, _direct_at_x0(fitted, encoded, n_draws, mu1=mu1))
    return direct, mu1 - m, m


def _direct_at_x0(
    fitted: SFMFit, encoded: SFMFrame, n_draws: int, mu1: np.ndarray | None = None
) -> np.ndarray:
    """``A`` with ``X = x0`` at every row: ``mu_0 - mu_1``."""
    mu0 = _mean_outcome(fitted, encoded, 0, n_draws)
    if mu1 is None:
        mu1 = _mean_outcome(fitted, encoded, 1, n_draws)
    return mu0 - mu1


def _check_rows(fitted: SFMFit, data: pd.DataFrame) -> None:
    """Rows to predict: every covariate and the attribute present, no missing value, the
    attribute at ``x0`` or ``x1``, each category at a level the fit saw."""
    roles = fitted.roles
    needed = [roles.attribute, *roles.covariates]
    absent = [c for c in needed if c not in data.columns]
    if absent:
        raise DataError(f"the rows to predict have no column {absent[0]!r} (needed: {needed})")
    for column in needed:
        if data[column].isna().any():
            raise DataError(f"column {column!r} has missing values in the rows to predict")
    levels = data[roles.attribute].astype(str)
    other = sorted(set(levels) - {roles.x0, roles.x1})
    if other:
        raise DataError(
            f"column {roles.attribute!r} has level {other[0]!r} in the rows to predict; the "
            f"predictor is defined for {roles.x0!r} and {roles.x1!r}"
        )
    for column in roles.categorical:
        seen = set(roles.levels[column])
        unseen = sorted(set(data[column].astype(str)) - seen)
        if unseen:
            raise DataError(
                f"column {column!r} has level {unseen[0]!r} in the rows to predict, which "
                "the fitted rows never had"
            )
