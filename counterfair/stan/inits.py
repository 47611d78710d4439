"""Data-driven initial values that start every chain in the identified mode, near the posterior.

A latent factor with a positive first loading still has a second, reflected
mode: the first loading pinned near zero and every other loading with the
wrong sign. HMC cannot leave it (that would flip every row's latent at once), so
chains started at random may settle there and disagree (R-hat >> 1). Starting
each chain from the first principal component of the latent's children,
oriented so that it rises with the first child, avoids this.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from counterfair.model.specs import Latent
from counterfair.stan.anchoring import all_anchors_of

if TYPE_CHECKING:
    from counterfair.model.scm import SCM


def _least_squares(y: np.ndarray, design: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    return coef, y - design @ coef


def _principal_axis(cov: np.ndarray, iterations: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """One-factor principal-axis solution: loadings and unique variances."""
    diag = np.diag(cov).copy()
    unique = 0.5 * diag
    loadings = np.sqrt(0.5 * diag)
    for _ in range(iterations):
        values, vectors = np.linalg.eigh(cov - np.diag(unique))
        loadings = vectors[:, -1] * np.sqrt(max(values[-1], 1e-8))
        unique = np.maximum(diag - loadings**2, 0.05 * diag)
    return loadings, unique


def latent_inits(
    scm: SCM,
    stan_data: Mapping[str, object],
    chains: int,
    seed: int | None,
    jitter: float = 0.1,
) -> list[dict[str, object]]:
    """Initial values of every structural parameter and latent, one dict per chain.

    For each latent, its children's residuals given the protected attributes
    (of each family's ``init_score``: log counts for count children) get a
    one-factor principal-axis solution: loadings (oriented so the first child's
    is positive), unique variances (the Normal children's sigma^2), and per-row
    factor scores with their conditional sd, from which each chain draws its
    starting latents. Intercepts and protected effects start at their
    least-squares values. Loadings get a
    multiplicative jitter per chain so chains do not start at one point.

    Parameters
    ----------
    scm : SCM
        The model.
    stan_data : mapping
        The fit program's data (as built by :func:`counterfair.stan.data.fit_data`).
    chains : int
        Number of chains.
    seed : int, optional
        Seed of the per-chain draws.
    jitter : float
        Relative spread of the loadings across chains.
    """
    if not scm.latents or scm.coding != "reference":
        return [{} for _ in range(chains)]
    rng = np.random.default_rng(seed)
    n = int(stan_data["N"])  # type: ignore[call-overload]
    columns = [np.ones(n)]
    slices: dict[str, slice] = {}
    for node in scm.protected:
        if f"n_levels_{node}" not in stan_data:  # continuous: its value is one column
            slices[node] = slice(len(columns), len(columns) + 1)
            columns.append(np.asarray(stan_data[node], dtype=float))
            continue
        level = np.asarray(stan_data[node])
        n_levels = int(stan_data[f"n_levels_{node}"])  # type: ignore[call-overload]
        start = len(columns)
        columns += [(level == k).astype(float) for k in range(2, n_levels + 1)]
        slices[node] = slice(start, len(columns))
    design = np.column_stack(columns)
    fixed: dict[str, object] = {}
    means: dict[str, np.ndarray] = {}
    sds: dict[str, np.ndarray] = {}
    loadings: dict[str, float] = {}
    for latent in scm.latents:
        spec = scm.specs[latent]
        assert isinstance(spec, Latent)
        children = [
            c
            for c in scm.children(latent)
            if c in scm.observed and not scm.equations[c].family.declares_coefficients
        ]
        residuals = []
        for child in children:
            eq = scm.equations[child]
            score = eq.family.init_score(np.asarray(stan_data[child]))
            coef, residual = _least_squares(score, design)
            residuals.append(residual)
            if eq.intercept:
                fixed[eq.intercept] = float(coef[0])
            if not eq.observed:  # protected-only design: the regression gives the effects
                for term in eq.protected:
                    effect = coef[slices[term.parent]]
                    fixed[term.param] = float(effect[0]) if term.continuous else effect
        z = np.column_stack(residuals)
        lam, unique = _principal_axis(np.atleast_2d(np.cov(z, rowvar=False)))
        if lam[0] < 0:
            lam = -lam
        precision = 1.0 + float(np.sum(lam**2 / unique))
        means[latent] = (z - z.mean(axis=0)) @ (lam / unique) / precision
        sds[latent] = np.full(n, 1.0 / np.sqrt(precision))
        for child, loading, psi in zip(children, lam, unique, strict=True):
            eq = scm.equations[child]
            lterm = next(t for t in eq.latent if t.parent == latent)
            value = float(loading) * spec.scale
            loadings[lterm.param] = max(value, 0.05) if lterm.positive else value
            if eq.sigma and eq.sigma_fixed is None:
                fixed[str(eq.variance)] = float(psi)
        means[latent] = spec.loc + spec.scale * means[latent]
        sds[latent] = spec.scale * sds[latent]
    anchored = all_anchors_of(scm)
    inits = []
    for _ in range(chains):
        chain: dict[str, object] = dict(fixed)
        for latent in scm.latents:
            if latent in anchored:  # z is close to standard normal a posteriori
                chain[f"z_{latent}"] = rng.standard_normal(n)
            else:
                chain[latent] = means[latent] + sds[latent] * rng.standard_normal(n)
        for name, value in loadings.items():
            chain[name] = value * float(np.exp(jitter * rng.standard_normal()))
        inits.append(chain)
    return inits
