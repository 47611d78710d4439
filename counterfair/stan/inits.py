"""Data-driven initial values that start every chain in the identified mode.

A latent factor with a positive first loading still has a second, reflected
mode: the first loading pinned near zero and every other loading with the
wrong sign. HMC cannot leave it (that would flip every row's latent at once), so
chains started at random may settle there and disagree (R-hat >> 1). Starting
each chain from the first principal component of the latent's children,
oriented so that it rises with the first child, avoids this.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from counterfair.scm import SCM
from counterfair.specs import Latent


def _residualise(y: np.ndarray, design: np.ndarray) -> np.ndarray:
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    return y - design @ coef


def _child_score(family: str, values: np.ndarray) -> np.ndarray:
    if family == "poisson":
        return np.log1p(values)
    return values.astype(float)


def latent_inits(
    scm: SCM,
    stan_data: Mapping[str, object],
    chains: int,
    seed: int | None,
    jitter: float = 0.1,
) -> list[dict[str, object]]:
    """Initial values of latents and loadings for each chain of the fit program.

    Parameters
    ----------
    scm : SCM
        The model.
    stan_data : mapping
        The fit program's data (as built by :func:`counterfair.stan.data.fit_data`).
    chains : int
        Number of chains.
    seed : int, optional
        Seed of the per-chain jitter.
    jitter : float
        Standard deviation of the noise added to each chain's latents, so that
        chains do not start at one point.

    Returns
    -------
    list of dict
        One dict per chain (empty dicts when the SCM has no latent).
    """
    if not scm.latents:
        return [{} for _ in range(chains)]
    n = int(stan_data["N"])  # type: ignore[call-overload]
    columns = [np.ones(n)]
    for node in scm.protected:
        level = np.asarray(stan_data[node])
        n_levels = int(stan_data[f"n_levels_{node}"])  # type: ignore[call-overload]
        columns += [(level == k).astype(float) for k in range(2, n_levels + 1)]
    design = np.column_stack(columns)
    base: dict[str, np.ndarray] = {}
    loadings: dict[str, float] = {}
    for latent in scm.latents:
        spec = scm.specs[latent]
        assert isinstance(spec, Latent)
        children = [c for c in scm.children(latent) if c in scm.observed]
        scores = []
        for child in children:
            family = scm.equations[child].spec.family
            z = _residualise(_child_score(family, np.asarray(stan_data[child])), design)
            scale = z.std()
            scores.append(z / scale if scale > 0 else z)
        matrix = np.column_stack(scores)
        _, _, vt = np.linalg.svd(matrix - matrix.mean(axis=0), full_matrices=False)
        component = matrix @ vt[0]
        if np.corrcoef(component, scores[0])[0, 1] < 0:
            component = -component
        std = component.std()
        component = (component - component.mean()) / (std if std > 0 else 1.0)
        base[latent] = spec.loc + spec.scale * component
        for child, score in zip(children, scores, strict=True):
            eq = scm.equations[child]
            term = next(t for t in eq.latent if t.parent == latent)
            raw = np.asarray(stan_data[child], dtype=float)
            spread = _child_score(eq.spec.family, raw).std()
            slope = float(np.cov(score, component)[0, 1]) * (spread if spread > 0 else 1.0)
            if eq.spec.family == "bernoulli":
                slope *= 4.0
            loadings[term.param] = max(slope, 0.05) if term.positive else slope
    rng = np.random.default_rng(seed)
    inits = []
    for _ in range(chains):
        chain: dict[str, object] = {
            name: values + jitter * rng.standard_normal(values.shape)
            for name, values in base.items()
        }
        chain.update(
            {
                name: value * float(np.exp(jitter * rng.standard_normal()))
                for name, value in loadings.items()
            }
        )
        inits.append(chain)
    return inits
