"""Do a latent's indicators measure it alike in every group? The invariance check.

Counterfactual fairness through a latent (Fair K) rests on the latent being the same
quantity in every group: a test score that measures knowledge with a loading that
differs by race (measurement non-invariance) makes the abducted latent, and every
prediction built on it, move with race. :func:`invariance_check` fits the declared
SCM (every loading the same for everybody) and, for each indicator of the latent in
turn, the same SCM with that indicator's loading differing by the level of a
categorical parent (``loading_by``, :mod:`counterfair.model.terms`), and reports

* the PSIS-LOO difference of the two fits (latents integrated out,
  :func:`counterfair.inference.loo.compare`), with its standard error: a group-specific
  loading the data support by more than a few standard errors is a warning sign;
* each level's loading relative to the reference level's, ``(lambda + dlambda) /
  lambda``, with its posterior mean and equal-tailed interval: 1 is invariance.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.inference.loo import compare
from counterfair.model.specs import Observed

if TYPE_CHECKING:
    from counterfair.inference.fit import Fit
    from counterfair.model.scm import SCM

logger = logging.getLogger("counterfair")

COLUMNS = [
    "indicator",
    "level",
    "loading_ratio",
    "ratio_low",
    "ratio_high",
    "elpd_diff",
    "se_diff",
    "preferred",
]
"""Columns of the invariance table (one row per indicator and non-reference level)."""


def invariance_check(
    scm: SCM,
    data: pd.DataFrame,
    *,
    latent: str,
    by: str,
    indicators: Sequence[str] | None = None,
    interval: float = 0.9,
    base_fit: Fit | None = None,
    **fit_args: Any,
) -> pd.DataFrame:
    """LOO of invariant against group-specific loadings of a latent, and the loading ratios.

    Parameters
    ----------
    scm : SCM
        The declared model (its loadings on ``latent`` the same for everybody).
    data : pandas.DataFrame
        The training rows.
    latent : str
        The latent whose indicators are checked.
    by : str
        A categorical protected attribute (or an ordinal or categorical node) that is a
        parent of each checked indicator.
    indicators : sequence of str, optional
        The children of ``latent`` to check (default: every child with ``by`` as a
        parent and no group-specific loading yet).
    interval : float
        Mass of the equal-tailed interval of each loading ratio.
    base_fit : Fit, optional
        A fit of ``scm`` to ``data`` to reuse (otherwise it is fitted here).
    **fit_args
        Passed to :meth:`counterfair.SCM.fit` (``chains``, ``draws``, ``seed``, ...).

    Returns
    -------
    pandas.DataFrame
        One row per indicator and non-reference level of ``by``: ``loading_ratio``
        (posterior mean of that level's loading over the reference level's) with
        ``ratio_low`` / ``ratio_high``, and per indicator ``elpd_diff`` (the
        group-specific fit's expected log predictive density minus the invariant
        one's: positive favours group-specific loadings), ``se_diff`` and
        ``preferred`` (``"group-specific"`` when ``elpd_diff > 4 * se_diff``,
        ``"invariant"`` when ``elpd_diff < -4 * se_diff``, else ``"either"``).
        ``attrs["fits"]`` holds the fits by name.

    Raises
    ------
    SCMError
        If ``latent`` is not a latent, ``by`` not a parent of an indicator, or no
        indicator is left to check.
    """
    if latent not in scm.latents:
        raise errors.SCMError(f"{latent!r} is not a latent of the SCM; latents: {scm.latents}")
    if not 0.0 < interval < 1.0:
        raise ValueError(f"interval must lie in (0, 1), got {interval}")
    children = [c for c in scm.children(latent) if c in scm.observed]
    if indicators is None:
        chosen = [
            c for c in children
            if by in scm.parents(c) and scm.equations[c].loading_by is None
        ]
    else:
        chosen = list(indicators)
        for node in chosen:
            if node not in children:
                raise errors.SCMError(f"{node!r} is not an indicator (child) of {latent!r}")
            if by not in scm.parents(node):
                raise errors.SCMError(
                    f"indicator {node!r}: {by!r} is not one of its parents, so its loading "
                    "cannot differ by it; add the edge first"
                )
    if not chosen:
        raise errors.SCMError(
            f"no indicator of {latent!r} has {by!r} as a parent: nothing to check"
        )
    base = base_fit if base_fit is not None else scm.fit(data, **fit_args)
    fits: dict[str, Fit] = {"invariant": base}
    rows: list[dict[str, Any]] = []
    tail = (1.0 - interval) / 2.0
    for node in chosen:
        spec = scm.specs[node]
        assert isinstance(spec, Observed)
        variant = scm.with_specs({node: dataclasses.replace(spec, loading_by=by)})
        logger.info("invariance check of %r: fitting %r with a loading by %r", latent, node, by)
        fit = variant.fit(data, **fit_args)
        name = f"{node} by {by}"
        fits[name] = fit
        table = compare({"invariant": base, name: fit})
        elpd = table["elpd_loo"]
        difference = float(elpd[name] - elpd["invariant"])
        se = float(table["dse"].max())
        if difference > 4.0 * se:
            preferred = "group-specific"
        elif difference < -4.0 * se:
            preferred = "invariant"
        else:
            preferred = "either"
        term = next(t for t in fit.scm.equations[node].latent if t.parent == latent)
        posterior = fit.idata.posterior
        loading = np.asarray(posterior[term.param].values).reshape(-1)
        extra = np.asarray(posterior[str(term.by_param)].values)
        extra = extra.reshape(loading.shape[0], -1)
        levels = _levels(fit, by, extra.shape[1])
        for j, level in enumerate(levels):
            ratio = (loading + extra[:, j]) / loading
            rows.append(
                {
                    "indicator": node,
                    "level": level,
                    "loading_ratio": float(ratio.mean()),
                    "ratio_low": float(np.quantile(ratio, tail)),
                    "ratio_high": float(np.quantile(ratio, 1.0 - tail)),
                    "elpd_diff": difference,
                    "se_diff": se,
                    "preferred": preferred,
                }
            )
    out = pd.DataFrame(rows, columns=COLUMNS)
    out.attrs["fits"] = fits
    return out


def _levels(fit: Fit, by: str, count: int) -> list[str]:
    """The non-reference levels of ``by`` (its encoding, or its spec's levels)."""
    if by in fit.encoding.levels:
        return list(fit.encoding.levels[by])[1:]
    levels = getattr(fit.scm.specs[by], "levels", None)
    if isinstance(levels, tuple):
        return [str(level) for level in levels[1:]]
    return [f"level {j + 2}" for j in range(count)]
