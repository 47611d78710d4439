"""How a counterfactual audit moves when the SCM's untestable assumptions are loosened.

A counterfactual audit is only as good as the SCM it takes as the world. Two of
its assumptions cannot be checked from the data and are re-run here over a range:

* **A path from the protected attribute to a latent** of strength ``rho``. The
  SCM assumes the latent ``U`` is independent of ``A``. Suppose instead
  ``U = rho * c(A) + U'`` with ``U'`` independent of ``A`` (``c`` a numeric
  coding of the levels). Then the abducted ``U`` of a row is still the value of
  the latent in the factual world (the data and the fitted equations say nothing
  about how it splits), but under ``do(A = a')`` the latent becomes
  ``U + rho * (c(a') - c(a))``; its descendants are recomputed from the shifted
  latent and the row's abducted noise (for a discrete descendant, the noise the
  ``"monotone"`` coupling abducts from its factual value with the unshifted
  latent). This reinterpretation costs one counterfactual frame per ``rho`` and
  needs no refit: the factual world, hence the fit, is the same for every ``rho``.
* **The prior scale of the latent**. The abducted samples ``u`` were drawn under
  ``Normal(loc, scale)``; under ``Normal(loc, k * scale)`` each row's samples are
  importance-reweighted by the ratio of the two prior densities (normalised over
  the row's samples). This keeps the parameters at their posterior under the
  assumed prior -- a refit would also move them, but with thousands of rows the
  parameters are pinned by the likelihood while each row's latent is driven by
  its prior and two or three children, which is exactly what the weights
  correct. The row's effective sample size (Kish) is reported: where it falls to
  a few samples, the reweighted numbers are unreliable and a refit is needed.

:func:`sensitivity` returns the mean |counterfactual change| of each predictor on
the grid of ``rho`` and ``prior_scale``; :func:`plot_sensitivity` draws it.
See ``docs/sensitivity.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from counterfair import atomic, errors
from counterfair.counterfactual.frames import counterfactual_frame
from counterfair.counterfactual.prediction import Predictor, frame_predictions
from counterfair.inference.fit import Abduction, Fit

SENSITIVITY_COLUMNS = (
    "predictor",
    "rho",
    "prior_scale",
    "attribute",
    "latent",
    "mean_abs_change",
    "mean_change",
    "min_ess_share",
)


def shifted_frame(
    fit: Fit,
    abduction: Abduction,
    do: Mapping[str, Any],
    shift: Mapping[str, np.ndarray],
    *,
    seed: int | None = None,
) -> pd.DataFrame:
    """A counterfactual frame in which the latents move by ``shift`` in the counterfactual world.

    Parameters
    ----------
    fit : Fit
        The fitted SCM.
    abduction : Abduction
        Joint samples of the rows.
    do : mapping
        The intervention on protected attributes, as for :func:`counterfactual_frame`.
    shift : mapping
        Latent -> shift per row, shape ``(N,)`` (or ``(S, N)``).
    seed : int, optional
        As for :func:`counterfair.counterfactual.frames.counterfactual_frame`; with every shift 0
        the frame equals it.

    Returns
    -------
    pandas.DataFrame
        The long frame of :func:`counterfair.counterfactual.frames.counterfactual_frame`.
    """
    return counterfactual_frame(
        fit, abduction, do, seed=seed, coupling="monotone", latent_shift=shift
    )


def prior_scale_weights(
    fit: Fit, abduction: Abduction, latent: str, prior_scale: float
) -> np.ndarray:
    """Importance weights of the samples under the latent's prior scale times ``prior_scale``.

    Returns
    -------
    numpy.ndarray
        Shape ``(S, N)``; each row's weights sum to 1 over the samples.
    """
    if not prior_scale > 0:
        raise ValueError(f"prior_scale must be positive, got {prior_scale}")
    spec = fit.scm.specs[latent]
    z = (abduction.latents[latent] - spec.loc) / spec.scale  # type: ignore[attr-defined]
    log_w = -0.5 * z**2 * (1.0 / prior_scale**2 - 1.0)
    log_w -= log_w.max(axis=0, keepdims=True)
    w = np.exp(log_w)
    return np.asarray(w / w.sum(axis=0, keepdims=True))


def _check(fit: Fit, attribute: str, latent: str | None) -> str:
    scm = fit.scm
    if attribute not in scm.protected:
        raise errors.SCMError(
            f"attribute {attribute!r} is not a protected node of the SCM; protected: "
            f"{list(scm.protected)}"
        )
    if fit.encoding.is_continuous(attribute):
        raise errors.SCMError(
            f"attribute {attribute!r} is continuous: sensitivity swaps levels of a categorical one"
        )
    if latent is None:
        if len(scm.latents) != 1:
            raise errors.SCMError(
                f"the SCM has latents {list(scm.latents)}: name one with latent="
            )
        latent = scm.latents[0]
    elif latent not in scm.latents:
        raise errors.SCMError(
            f"{latent!r} is not a latent of the SCM; latents: {list(scm.latents)}"
        )
    return latent


def sensitivity(
    fit: Fit,
    data: pd.DataFrame,
    predictors: Mapping[str, Predictor],
    *,
    attribute: str,
    latent: str | None = None,
    rho: Sequence[float] = (0.0, 0.25, 0.5, 1.0),
    prior_scale: Sequence[float] = (1.0,),
    coding: Mapping[str, float] | None = None,
    n_samples: int = 50,
    seed: int | None = None,
    abduction: Abduction | None = None,
) -> pd.DataFrame:
    """Mean |counterfactual change| of each predictor when ``A -> latent`` has strength ``rho``.

    For every row and every level ``a'`` of ``attribute`` other than its own, the
    predictors are evaluated in the factual world and under ``do(attribute = a')``
    with the latent shifted by ``rho * (c(a') - c(a))`` (see the module notes),
    for every ``rho``; every ``prior_scale`` reweights the same samples.

    Parameters
    ----------
    fit : Fit
        The fitted SCM taken as the world (at ``rho = 0``, ``prior_scale = 1``).
    data : pandas.DataFrame
        Rows to audit.
    predictors : mapping
        Name -> predictor (anything
        :func:`~counterfair.counterfactual.prediction.counterfactual_predictions` takes).
    attribute : str
        Categorical protected attribute to swap.
    latent : str, optional
        The latent the path reaches (default: the SCM's only latent).
    rho : sequence of float
        Strengths of the path, in units of the latent per unit of ``c``.
    prior_scale : sequence of float
        Multipliers of the latent's prior standard deviation.
    coding : mapping, optional
        Level -> number ``c``; default 0 for the reference (first) level and 1 for
        every other level.
    n_samples : int
        Joint samples per row when ``data`` is abducted here (``abduction`` not given).
    seed : int, optional
        Seed of that abduction and of the counterfactual draws.
    abduction : Abduction, optional
        Joint samples of ``data`` to reuse: abduct them with the options you want
        (``fit.abduct(data, method="draws", engine=...)``); every row is audited at
        once, so this is the one way to choose how ``data`` is abducted.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`SENSITIVITY_COLUMNS`: per predictor, ``rho`` and
        ``prior_scale``, the (weighted) mean |change| and mean signed change over
        rows, samples and target levels, and the smallest share of a row's samples
        that the importance weights effectively keep (1 at ``prior_scale = 1``).

    Raises
    ------
    SCMError
        If ``attribute`` is not a categorical protected node or ``latent`` not a latent.
    """
    latent = _check(fit, attribute, latent)
    levels = list(fit.encoding.levels[attribute])
    values = {lv: (0.0 if i == 0 else 1.0) for i, lv in enumerate(levels)}
    if coding is not None:
        unknown = [k for k in coding if k not in levels]
        missing = [lv for lv in levels if lv not in coding]
        if unknown or missing:
            raise errors.DataError(
                f"coding of {attribute!r} must give a number for each level {levels}; "
                f"unknown: {unknown}, missing: {missing}"
            )
        values = {k: float(v) for k, v in coding.items()}
    if abduction is None:
        abduction = fit.abduct(data, n_samples=n_samples, seed=seed)
    own = fit.encoding.decode(attribute, abduction.codes[attribute])
    own_c = np.array([values[str(v)] for v in own])
    weights = {k: prior_scale_weights(fit, abduction, latent, k) for k in prior_scale}
    ess = {k: float((1.0 / (w**2).sum(axis=0)).min() / w.shape[0]) for k, w in weights.items()}
    totals: dict[tuple[str, float, float], list[float]] = {}
    for target in levels:
        mask = own.astype(str) != target
        if not mask.any():
            continue
        part = abduction.take_rows(mask)
        delta = values[target] - own_c[mask]
        for r in rho:
            frame = shifted_frame(
                fit, part, {attribute: target}, {latent: r * delta}, seed=seed
            )
            for name, predictor in predictors.items():
                result = frame_predictions(fit, frame, predictor, abduction=part)
                change = result["change"].to_numpy().reshape(part.n_samples, -1)
                for k, w in weights.items():
                    wk = w[:, mask]
                    entry = totals.setdefault((name, float(r), float(k)), [0.0, 0.0, 0.0])
                    entry[0] += float((wk * np.abs(change)).sum())
                    entry[1] += float((wk * change).sum())
                    entry[2] += float(mask.sum())
    rows = [
        {
            "predictor": name,
            "rho": r,
            "prior_scale": k,
            "attribute": attribute,
            "latent": latent,
            "mean_abs_change": t[0] / t[2],
            "mean_change": t[1] / t[2],
            "min_ess_share": ess[k],
        }
        for (name, r, k), t in totals.items()
    ]
    return pd.DataFrame(rows, columns=list(SENSITIVITY_COLUMNS))


def plot_sensitivity(table: pd.DataFrame, path: str | Path) -> Path:
    """Mean |change| against ``rho`` (one line per predictor and prior scale); a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for (name, scale), part in table.groupby(["predictor", "prior_scale"], sort=False):
        part = part.sort_values("rho")
        style = "-" if scale == 1.0 else "--"
        ax.plot(part["rho"], part["mean_abs_change"], style, marker="o",
                label=f"{name} (prior scale x{scale:g})")
    ax.set_xlabel("rho: strength of the path attribute -> latent")
    ax.set_ylabel("mean |counterfactual change|")
    ax.legend(fontsize=7)
    fig.tight_layout()
    try:
        return atomic.write(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    finally:
        plt.close(fig)


__all__ = ["plot_sensitivity", "prior_scale_weights", "sensitivity", "shifted_frame"]
