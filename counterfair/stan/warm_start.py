"""Warm start of a large fit: the sampler's metric learned on a subsample first.

NUTS begins warm-up with a unit metric. For a fit with thousands of rows the structural
parameters' posterior sds differ by orders of magnitude (a coefficient of a rare race
level against the intercept of a common one), so the first few hundred warm-up
iterations need trees of depth 8 to 10 before the metric adapts; on the law school data
(17,432 rows) they were 97 % of all gradient evaluations. A pilot fit on a subsample
(default 2,000 rows, whose gradients are 9x cheaper) learns that metric instead:

* every structural parameter's unconstrained posterior variance shrinks like 1/rows, so
  the pilot's adapted variances are multiplied by ``pilot_rows / rows`` (the pilot uses
  the full data's coefficient scales, so the unconstrained parameters mean the same);
* the per-row latents (``z_K`` or ``K``) get the mean of the pilot's per-row variances;
* the step size is scaled by ``(pilot_rows / rows) ** 0.25`` (optimal steps shrink like
  dimension ** -1/4), and the structural parameters start at the pilot's posterior means.

The main fit then starts warm-up with that metric and only refines it: step size for
``INIT_PHASE`` iterations, one metric window, then ``TERM_PHASE`` iterations of step
size. The posterior is unchanged; only where warm-up starts is. CmdStan only: PyStan
cannot be given an initial metric.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from counterfair.model.params import ParamDraws
from counterfair.rows.validated import Rows
from counterfair.stan.backend import get_backend
from counterfair.stan.data import fit_data

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

PILOT_ROWS = 2000
"""Rows of the pilot fit."""
MIN_ROWS = 5000
"""``warm_start="auto"`` warm-starts fits of at least this many rows on CmdStan."""
INIT_PHASE = 75
"""Warm-up iterations that adapt the step size only, at the start of a warm-started fit."""
TERM_PHASE = 50
"""Warm-up iterations that adapt the step size only, at its end."""
MIN_WARMUP = INIT_PHASE + TERM_PHASE + 50
"""Shortest warm-up of a warm-started fit (leaves a metric window of 50 iterations)."""
PILOT_WARMUP = 300
PILOT_DRAWS = 100


@dataclass(frozen=True)
class WarmStart:
    """What the pilot fit hands to the main fit.

    Attributes
    ----------
    inv_metric : numpy.ndarray
        Diagonal inverse metric for the full data, in the order of the program's
        unconstrained parameters.
    step_size : float
        Initial step size.
    inits : dict
        Posterior means of the structural parameters (constrained scale).
    pilot_rows : int
        Rows of the pilot fit.
    seconds : float
        Wall time of the pilot fit.
    draws : ParamDraws or None
        The pilot's posterior draws of the structural parameters (a subsample's
        posterior: wider than the full data's).
    kind : str
        ``"pilot"`` (a Laplace start's is ``"laplace"``).
    """

    inv_metric: np.ndarray
    step_size: float
    inits: dict[str, Any]
    pilot_rows: int
    seconds: float
    draws: ParamDraws | None = None
    kind: str = "pilot"

    def sampler_args(self, warmup: int) -> dict[str, Any]:
        """Arguments of the main fit: metric, step size and adaptation windows."""
        if warmup < MIN_WARMUP:
            raise ValueError(
                f"a warm-started fit needs warmup >= {MIN_WARMUP} (got {warmup}); "
                "pass warm_start=False for a shorter warm-up"
            )
        return {
            "inv_metric": self.inv_metric,
            "stepsize": self.step_size,
            "init_phase": INIT_PHASE,
            "metric_window": warmup - INIT_PHASE - TERM_PHASE,
            "term_phase": TERM_PHASE,
        }


def pilot_rows(n: int, size: int, seed: int | None) -> np.ndarray:
    """Sorted positions of the pilot's rows (seeded uniform subsample)."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=min(size, n), replace=False))


def full_data_metric(
    pilot_metric: np.ndarray,
    layout: list[tuple[str, int]],
    per_row: set[str],
    n_pilot: int,
    n_full: int,
    dropped: Collection[str] = (),
) -> np.ndarray:
    """Turn the pilot's adapted inverse metric into one for the full data.

    Parameters
    ----------
    pilot_metric : numpy.ndarray
        The pilot's diagonal inverse metric (averaged over chains).
    layout : list of (name, size)
        The program's unconstrained parameters in order, with their sizes in the pilot.
    per_row : set of str
        Parameters with one entry per row (the latents or their standardised forms).
    n_pilot, n_full : int
        Rows of the pilot and of the full data.
    dropped : collection of str
        Parameters of the pilot that the main program does not have (the per-row
        latents of a fit that integrates them out).
    """
    pieces = []
    position = 0
    for name, size in layout:
        block = pilot_metric[position : position + size]
        position += size
        if name in dropped:
            continue
        if name in per_row:
            pieces.append(np.full(n_full, float(np.mean(block))))
        else:
            pieces.append(block * (n_pilot / n_full))
    if position != pilot_metric.size:
        raise ValueError(
            f"parameter layout covers {position} entries, the metric has {pilot_metric.size}"
        )
    return np.concatenate(pieces)


def pilot_fit(
    scm: SCM,
    data: Rows,
    full_data: Mapping[str, Any],
    *,
    chains: int,
    seed: int | None,
    size: int = PILOT_ROWS,
    integrate: Collection[str] = (),
) -> WarmStart:
    """Fit ``scm`` to a subsample with CmdStan and turn its adaptation into a warm start.

    The pilot always runs the joint program (its gradients are cheapest); for a main fit
    that integrates ``integrate`` out, those latents' entries leave the metric and the
    step size is left at the pilot's (the main program has no per-row dimensions).
    """
    from counterfair.stan.cmdstan_adapter import CmdStanPyBackend
    from counterfair.stan.inits import latent_inits

    start = time.perf_counter()
    rows = data.take(pilot_rows(len(data), size, seed))
    pilot_data = fit_data(scm, rows)
    for key, value in full_data.items():  # the same coefficient scales as the main fit
        if key.startswith("scale_"):
            pilot_data[key] = value
    backend = get_backend("cmdstanpy")
    assert isinstance(backend, CmdStanPyBackend)
    adapted = backend.adapt(
        scm.stan_code(),
        pilot_data,
        chains=chains,
        warmup=PILOT_WARMUP,
        draws=PILOT_DRAWS,
        seed=seed,
        init=latent_inits(scm, pilot_data, chains, seed),
        keep=scm.parameter_names(),
    )
    per_row = {*scm.latents, *(f"z_{latent}" for latent in scm.latents)}
    dropped = {*integrate, *(f"z_{latent}" for latent in integrate)}
    metric = full_data_metric(
        adapted.inv_metric, adapted.layout, per_row, len(rows), len(data), dropped
    )
    shrink = 1.0 if integrate else (len(rows) / len(data)) ** 0.25
    structural = set(scm.parameter_names())
    inits = {k: v for k, v in adapted.means.items() if k in structural or k.startswith("sigma2_")}
    return WarmStart(
        inv_metric=metric,
        step_size=adapted.step_size * shrink,
        inits=inits,
        pilot_rows=len(rows),
        seconds=time.perf_counter() - start,
        draws=ParamDraws({k: v for k, v in adapted.draws.items() if k in structural})
        if adapted.draws
        else None,
    )

