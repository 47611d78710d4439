"""Tolerances of the suite's random checks, derived from the error they must allow.

A check on a random quantity is written so that it fails with probability about 1e-3 or
less when the code is right, and fails surely when the code is wrong by more than the
Monte Carlo error:

* :func:`coverage_floor`: the least number of true values that must fall inside their
  posterior intervals, from the binomial tail at ``tail`` (1e-3), instead of a fixed share;
* :func:`assert_within_mcse`: a posterior mean (or sd) against a reference, within
  ``k`` (4) Monte Carlo standard errors computed from the draws' effective sample size.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import binom

from counterfair.inference.mcmc_stats import bulk_ess

TAIL = 1e-3
"""Probability that a calibrated check fails by chance."""


def coverage_floor(n: int, level: float = 0.9, tail: float = TAIL) -> int:
    """Least count of ``n`` calibrated ``level`` intervals that must cover their truth.

    The largest ``k`` with ``P(Binomial(n, level) < k) <= tail``: a calibrated posterior
    fails the check with probability at most ``tail``.
    """
    k = 0
    while k < n and binom.cdf(k, n, level) <= tail:
        k += 1
    return k


def mcse_of_mean(draws: np.ndarray) -> np.ndarray:
    """Monte Carlo standard error of the mean of ``draws`` (chain, draw, ...) per element."""
    draws = np.asarray(draws, dtype=float)
    flat = draws.reshape(draws.shape[0], draws.shape[1], -1)
    ess = bulk_ess(flat)
    sd = flat.reshape(-1, flat.shape[2]).std(axis=0, ddof=1)
    return (sd / np.sqrt(ess)).reshape(draws.shape[2:])


def mcse_of_sd(draws: np.ndarray) -> np.ndarray:
    """Monte Carlo standard error of the sd of ``draws`` (chain, draw, ...) per element.

    For a near-normal posterior, ``sd(s) ~ sd / sqrt(2 ess)``.
    """
    draws = np.asarray(draws, dtype=float)
    flat = draws.reshape(draws.shape[0], draws.shape[1], -1)
    ess = bulk_ess(flat)
    sd = flat.reshape(-1, flat.shape[2]).std(axis=0, ddof=1)
    return (sd / np.sqrt(2 * ess)).reshape(draws.shape[2:])


def assert_within_mcse(
    value: np.ndarray | float, reference: np.ndarray | float, mcse: np.ndarray | float,
    *, k: float = 4.0, what: str = "",
) -> None:
    """``|value - reference| <= k * mcse`` element-wise, with a message naming ``what``."""
    value, reference, mcse = (np.asarray(x, dtype=float) for x in (value, reference, mcse))
    gap = np.abs(value - reference)
    bad = gap > k * mcse
    assert not np.any(bad), (
        f"{what}: {value[bad] if value.ndim else value} differ from "
        f"{reference[bad] if reference.ndim else reference} by more than {k} MCSE "
        f"({(k * mcse)[bad] if mcse.ndim else k * mcse})"
    )
