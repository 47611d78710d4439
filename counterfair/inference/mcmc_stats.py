"""Rank-normalised split R-hat and bulk ESS of many scalar quantities at once, in numpy.

``arviz.rhat`` and ``arviz.ess`` loop over variables in Python; for the per-row latents
of a fit (17,432 on the law school data) that took about 55 s. These functions compute
the same numbers (Vehtari et al. 2021, as implemented by arviz 0.2x) vectorised over the
last axis of a ``(chain, draw, n)`` array; ``tests/test_mcmc_stats.py`` checks them
against arviz.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy import special
from scipy.fft import next_fast_len


def _split_chains(draws: np.ndarray) -> np.ndarray:
    """``(chain, draw, n)`` -> ``(2 chain, draw // 2, n)``: first and last halves."""
    half = draws.shape[1] // 2
    return np.concatenate([draws[:, :half], draws[:, draws.shape[1] - half :]], axis=0)


def _average_ranks(ordered: np.ndarray) -> np.ndarray:
    """Average ranks (1-based) in sorted position of ``(k, m)`` rows sorted along axis 1.

    A run of equal values takes the mean of its first and last positions, as
    ``scipy.stats.rankdata(method="average")`` gives them (draws written with six
    significant digits repeat in about a quarter of 1,400-draw columns).
    """
    k, m = ordered.shape
    position = np.arange(m, dtype=float)[None, :]
    change = np.diff(ordered, axis=1) != 0  # (k, m - 1): a new value starts to the right
    starts = np.concatenate([np.ones((k, 1), bool), change], axis=1)
    ends = np.concatenate([change, np.ones((k, 1), bool)], axis=1)
    first = np.maximum.accumulate(np.where(starts, position, 0.0), axis=1)
    last = np.minimum.accumulate(np.where(ends, position, float(m))[:, ::-1], axis=1)[:, ::-1]
    return np.asarray((first + last) / 2.0 + 1.0)


def _z_scale(draws: np.ndarray) -> np.ndarray:
    """Rank-normalise each quantity over all its draws (average ranks for ties).

    Works on one contiguous row of draws per quantity (sorting along a strided axis
    took four times as long for the 17,432 latents of a fit).
    """
    c, d, n = draws.shape
    rows = np.ascontiguousarray(draws.reshape(c * d, n).T)  # (n, c * d)
    order = np.argsort(rows, axis=1)
    ordered = np.take_along_axis(rows, order, axis=1)
    tied = (np.diff(ordered, axis=1) == 0).any(axis=1)
    # the normal scores of the ranks 1 .. c d in sorted position, computed once: every
    # column without ties takes them as they are (the same numbers as scoring its ranks)
    scores = special.ndtri((np.arange(1.0, c * d + 1.0) - 0.375) / (c * d + 0.25))
    in_order = np.broadcast_to(scores[None, :], rows.shape).copy()
    if tied.any():  # average ranks where values repeat (constants, discrete draws)
        in_order[tied] = special.ndtri((_average_ranks(ordered[tied]) - 0.375) / (c * d + 0.25))
    z = np.empty_like(rows)
    np.put_along_axis(z, order, in_order, axis=1)
    return np.asarray(z.T).reshape(c, d, n)


def _plain_rhat(draws: np.ndarray) -> np.ndarray:
    """Potential scale reduction of each quantity, ``(chain, draw, n)`` -> ``(n,)``."""
    d = draws.shape[1]
    chain_mean = draws.mean(axis=1)
    within = draws.var(axis=1, ddof=1).mean(axis=0)
    between = d * chain_mean.var(axis=0, ddof=1)
    return np.asarray(np.sqrt((between / within + d - 1) / d))


CHUNK_VALUES = 2**21
"""Draws (chains x draws x quantities) per block in :func:`rhat_and_bulk_ess`."""


def rhat_and_bulk_ess(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`rank_rhat` (NaN with one chain) and :func:`bulk_ess`, sharing the ranking.

    Quantities are processed in blocks of about ``CHUNK_VALUES`` draws, so the FFTs and
    ranks of thousands of per-row latents do not hold several copies of all their draws
    at once, on one thread per core (numpy's sorts and FFTs release the GIL); each
    quantity's statistics depend on its own draws only: R-hat does not depend on the
    block size or the threads, ESS only through summation order (relative 1e-14).
    """
    draws = np.asarray(draws)
    workers = os.cpu_count() or 1  # blocks in flight at once: together about CHUNK_VALUES
    width = max(1, CHUNK_VALUES // max(1, workers * draws.shape[0] * draws.shape[1]))
    if draws.shape[2] <= width:
        return _rhat_and_bulk_ess(draws)
    blocks = [draws[:, :, i : i + width] for i in range(0, draws.shape[2], width)]
    with ThreadPoolExecutor(max_workers=min(len(blocks), workers)) as pool:
        parts = list(pool.map(_rhat_and_bulk_ess, blocks))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _rhat_and_bulk_ess(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    split = _split_chains(np.asarray(draws, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        z = _z_scale(split)
        ess = _ess(z)
        if draws.shape[0] < 2:
            return np.full(draws.shape[2], np.nan), ess
        folded = np.abs(split - np.median(split.reshape(-1, split.shape[2]), axis=0))
        rhat = np.maximum(_plain_rhat(z), _plain_rhat(_z_scale(folded)))
    return rhat, ess


def rank_rhat(draws: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat (the larger of bulk and folded-tail R-hat) per quantity.

    Parameters
    ----------
    draws : numpy.ndarray
        Shape ``(chain, draw, n)`` with at least 2 chains and 4 draws.

    Returns
    -------
    numpy.ndarray
        Shape ``(n,)``.
    """
    split = _split_chains(np.asarray(draws, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):  # constant quantities give NaN
        bulk = _plain_rhat(_z_scale(split))
        folded = np.abs(split - np.median(split.reshape(-1, split.shape[2]), axis=0))
        tail = _plain_rhat(_z_scale(folded))
    return np.maximum(bulk, tail)


def _autocovariance(draws: np.ndarray) -> np.ndarray:
    """Autocovariance along the draw axis of ``(chain, draw, n)``, lags ``0 .. draw - 1``."""
    d = draws.shape[1]
    centred = draws - draws.mean(axis=1, keepdims=True)
    size = next_fast_len(2 * d)
    spectrum = np.fft.rfft(centred, n=size, axis=1)
    return np.fft.irfft(spectrum * np.conjugate(spectrum), n=size, axis=1)[:, :d] / d


def _ess(draws: np.ndarray) -> np.ndarray:
    """ESS with Geyer's initial monotone sequence, per quantity of ``(chain, draw, n)``."""
    c, d, n = draws.shape
    acov = _autocovariance(draws)  # (chain, lag, n)
    mean_var = acov[:, 0].mean(axis=0) * d / (d - 1.0)
    var_plus = mean_var * (d - 1.0) / d
    if c > 1:
        var_plus = var_plus + draws.mean(axis=1).var(axis=0, ddof=1)
    rho = 1.0 - (mean_var - acov.mean(axis=0)) / var_plus  # (lag, n)
    rho[0] = 1.0
    k_max = max((d - 3) // 2, 0)  # pairs k = 1 .. k_max fit in Geyer's loop (2k - 1 < d - 3)
    pairs = rho[: 2 * k_max + 2 : 2][: k_max + 1] + rho[1 : 2 * k_max + 2 : 2][: k_max + 1]
    nonpositive = pairs <= 0.0
    first = np.where(nonpositive.any(axis=0), nonpositive.argmax(axis=0), k_max)
    computed = np.minimum(first, k_max)  # pairs 1..computed were evaluated
    monotone = np.minimum.accumulate(pairs, axis=0)
    below = np.arange(pairs.shape[0])[:, None] < computed[None, :]
    tau = -1.0 + 2.0 * np.where(below, monotone, 0.0).sum(axis=0)
    last_even = np.take_along_axis(rho, (2 * computed)[None, :], axis=0)[0]
    last_pair = np.take_along_axis(pairs, computed[None, :], axis=0)[0]
    tau += np.where((last_pair >= 0.0) | (last_even > 0.0), last_even, 0.0)
    total = c * d
    tau = np.maximum(tau, 1.0 / np.log10(total))
    ess = total / tau
    constant = np.ptp(draws.reshape(total, n), axis=0) < np.finfo(float).resolution
    return np.asarray(np.where(constant, float(total), ess))


def bulk_ess(draws: np.ndarray) -> np.ndarray:
    """Bulk effective sample size (rank-normalised split chains) per quantity.

    Parameters
    ----------
    draws : numpy.ndarray
        Shape ``(chain, draw, n)`` with at least 4 draws.

    Returns
    -------
    numpy.ndarray
        Shape ``(n,)``.
    """
    with np.errstate(invalid="ignore", divide="ignore"):  # constant quantities: all draws
        return _ess(_z_scale(_split_chains(np.asarray(draws, dtype=float))))
