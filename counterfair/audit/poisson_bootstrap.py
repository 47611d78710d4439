"""Chunked Poisson bootstrap: bootstrap intervals in memory O(groups x replicates).

The multinomial bootstrap draws ``n`` rows with replacement; the Poisson bootstrap gives
every row an independent Poisson(1) weight in each replicate instead (Hanley &
MacGibbon 2006; Chamandy et al. 2012). Weights of different rows are independent, so a
replicate's weighted sums can be accumulated chunk by chunk and merged, and the rows x
replicates weight matrix never exists beyond one chunk.

Weights are drawn by a counter-based generator: the uniform of row ``i`` in replicate
``b`` is a hash (splitmix64) of ``(seed, key_i, b)``, turned into a Poisson(1) draw by
its inverse CDF. ``key_i`` is the row's position (or a row id given by the user), never
its chunk, so the result is the same for every chunk size and for any order in which
chunks (or Dask partitions) are added; with row ids it is also the same for any order
of the rows. Sums of integer weights times 0/1 indicators are exact; sums of real
values agree to rounding (about 1e-12 relative) across chunkings.

The group audits stratify the exact bootstrap by the cross-classification of the
protected attributes (every stratum keeps its size). The Poisson bootstrap does the
same in expectation and exactly in size: per replicate, the weights of stratum ``s``
are rescaled so that they sum to its size ``n_s`` (a stratum whose weights are all 0 in
a replicate, which only small strata risk, keeps its observed sums). Rates are ratios of
weighted sums and do not see the rescaling; a group's share of all positive decisions
does, and then matches the stratified exact bootstrap.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # via scikit-learn

from ..options import chunk_rows
from ._validation import LENGTH_MISMATCH
from .bootstrap import Seed

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_MASK = (1 << 64) - 1


def _poisson1_cdf() -> NDArray[np.float64]:
    """CDF of Poisson(1) at 0, 1, ... up to where it rounds to 1 in double precision."""
    values = []
    term, total, k = math.exp(-1.0), 0.0, 0
    while total < 1.0 and k < 40:
        total += term
        values.append(min(total, 1.0))
        k += 1
        term /= k
    return np.asarray(values, dtype=np.float64)


POISSON1_CDF = _poisson1_cdf()
"""``P(K <= k)`` for ``K ~ Poisson(1)``, ``k = 0, 1, ...`` (inverse-CDF table)."""

GEMM_MAX_COLUMNS = 96
"""Up to this many strata x (values + 1), a chunk is summed by one matrix product."""

BYTES_PER_ROW_AND_REPLICATE = 64
"""Working memory per row and replicate of one chunk (hash words, weights, products)."""


def _splitmix64(x: NDArray[np.uint64], *, in_place: bool = False) -> NDArray[np.uint64]:
    """The splitmix64 finaliser (Steele, Lea & Flood 2014), elementwise, wrapping mod 2**64.

    With ``in_place`` the input array is overwritten (one scratch array instead of four).
    """
    z = x if in_place else x.copy()
    z += _GOLDEN
    scratch = np.right_shift(z, np.uint64(30))
    z ^= scratch
    z *= _MIX1
    np.right_shift(z, np.uint64(27), out=scratch)
    z ^= scratch
    z *= _MIX2
    np.right_shift(z, np.uint64(31), out=scratch)
    z ^= scratch
    return z


def seed_word(seed: Seed) -> int:
    """A 64-bit key from ``seed``: an int as is (mod 2**64), a Generator's next draw, or
    fresh entropy for ``None``."""
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(0, 2**63))
    if seed is None:
        return int(np.random.default_rng().integers(0, 2**63))
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"seed must be an integer, a numpy Generator or None, got {seed!r}")
    return int(seed) & _MASK


def keyed_uniforms(seed: int, keys: ArrayLike, n_replicates: int) -> NDArray[np.float64]:
    """Uniforms in [0, 1) for every (row key, replicate), a pure function of the key.

    The one place where random numbers of the Poisson bootstrap are made, so that it can
    be swapped for another counter-based generator.

    Parameters
    ----------
    seed
        64-bit seed word (see :func:`seed_word`).
    keys
        Non-negative integer key of each row (its position in the data, or a row id).
    n_replicates
        Number of replicates ``B``.

    Returns
    -------
    numpy.ndarray
        Array ``(len(keys), B)``; entry ``(i, b)`` depends only on ``(seed, keys[i], b)``.
    """
    seed_hash = _splitmix64(np.asarray([seed & _MASK], dtype=np.uint64))
    row_hash = _splitmix64(np.asarray(keys, dtype=np.uint64).reshape(-1) ^ seed_hash)
    replicate_hash = _splitmix64(np.arange(n_replicates, dtype=np.uint64) * _GOLDEN
                                 + np.uint64(1))
    mixed = _splitmix64(row_hash[:, None] ^ replicate_hash[None, :], in_place=True)
    mixed >>= np.uint64(11)
    uniforms = mixed.astype(np.float64)
    uniforms *= 2.0**-53
    return uniforms


_TABLE_BITS = 16
_BUCKET_LOW = np.arange(1 << _TABLE_BITS) / float(1 << _TABLE_BITS)
_BUCKET_HIGH = (np.arange(1 << _TABLE_BITS) + 1) / float(1 << _TABLE_BITS)
_TABLE = np.searchsorted(POISSON1_CDF, _BUCKET_LOW, side="right").astype(np.float64)
_STRADDLES = (np.searchsorted(POISSON1_CDF, _BUCKET_LOW, side="right")
              != np.searchsorted(POISSON1_CDF, _BUCKET_HIGH, side="left"))


def poisson1(uniforms: NDArray[np.float64]) -> NDArray[np.float64]:
    """Poisson(1) draws from uniforms by the inverse CDF: ``#{k : P(K <= k) <= u}``.

    Exact and fast: the unit interval is cut into 2**16 buckets; in a bucket that no CDF
    value falls inside the draw is read from a table, and only uniforms in the few
    buckets that a CDF value cuts (8 of 65,536) are compared with :data:`POISSON1_CDF`.
    """
    bucket = (uniforms * float(1 << _TABLE_BITS)).astype(np.intp)
    draws: NDArray[np.float64] = _TABLE[bucket]
    straddles = _STRADDLES[bucket]
    if straddles.any():
        draws[straddles] = np.searchsorted(POISSON1_CDF, uniforms[straddles], side="right")
    return draws


def poisson_weights(seed: int, keys: ArrayLike, n_replicates: int) -> NDArray[np.float64]:
    """Poisson(1) bootstrap weights ``(len(keys), B)`` keyed by ``(seed, key, replicate)``."""
    return poisson1(keyed_uniforms(seed, keys, n_replicates))


class PoissonAccumulator:
    """Mergeable per-stratum weighted sums of ``B`` Poisson bootstrap replicates.

    Memory is ``n_strata x (n_values + 1) x B`` numbers, whatever the number of rows.

    Parameters
    ----------
    n_strata
        Number of strata (cells of the finest partition of the rows).
    n_values
        Number of value columns summed per stratum.
    n_replicates
        Number of replicates ``B``.
    seed
        64-bit seed word.

    Attributes
    ----------
    weight_sums
        ``(n_strata, B)``: sum of the weights of each stratum per replicate.
    value_sums
        ``(n_strata, n_values, B)``: weighted sums of each value column.
    sizes
        ``(n_strata,)``: rows seen per stratum.
    """

    def __init__(self, n_strata: int, n_values: int, n_replicates: int, seed: int) -> None:
        self.seed = seed
        self.n_replicates = n_replicates
        self.weight_sums = np.zeros((n_strata, n_replicates))
        self.value_sums = np.zeros((n_strata, n_values, n_replicates))
        self.sizes = np.zeros(n_strata, dtype=np.int64)

    def add(self, strata: NDArray[np.intp], values: NDArray[np.float64],
            keys: ArrayLike) -> None:
        """Add one chunk: stratum code, value columns ``(rows, n_values)`` and key per row."""
        if strata.size == 0:
            return
        n_strata, n_values = self.value_sums.shape[:2]
        weights = poisson_weights(self.seed, keys, self.n_replicates)
        if n_strata * (n_values + 1) <= GEMM_MAX_COLUMNS:
            # one matrix product: weights^T (B x rows) times a design (rows x strata x
            # (1 + values)) holding each row's 1 and values in its stratum's columns
            rows = np.arange(strata.size)
            design = np.zeros((strata.size, n_strata, n_values + 1))
            design[rows, strata, 0] = 1.0
            design[rows, strata, 1:] = values
            block = (weights.T @ design.reshape(strata.size, -1)).reshape(
                self.n_replicates, n_strata, n_values + 1)
            self.weight_sums += block[:, :, 0].T
            self.value_sums += block[:, :, 1:].transpose(1, 2, 0)
        else:
            # many strata: sort the chunk by stratum, then sum each stratum's rows
            order = np.argsort(strata, kind="stable")
            present, starts = np.unique(strata[order], return_index=True)
            sorted_weights = weights[order]
            self.weight_sums[present] += np.add.reduceat(sorted_weights, starts, axis=0)
            sorted_values = values[order]
            for j in range(n_values):
                self.value_sums[present, j] += np.add.reduceat(
                    sorted_weights * sorted_values[:, j:j + 1], starts, axis=0)
        self.sizes += np.bincount(strata, minlength=n_strata)

    def merge(self, other: PoissonAccumulator) -> PoissonAccumulator:
        """Add another accumulator's sums (same seed and shape) into this one."""
        if other.seed != self.seed or other.value_sums.shape != self.value_sums.shape:
            raise ValueError("can only merge Poisson accumulators of the same seed and shape")
        self.weight_sums += other.weight_sums
        self.value_sums += other.value_sums
        self.sizes += other.sizes
        return self

    def stratified_sums(self) -> NDArray[np.float64]:
        """Per-stratum value sums with weights rescaled to sum to the stratum size.

        Returns ``(n_strata, n_values, B)``. A stratum whose weights are all zero in a
        replicate keeps its observed sums (``value_sums`` of unit weights are not kept, so
        the caller passes them to :func:`stratified_group_sums`).
        """
        scale = np.divide(self.sizes[:, None], self.weight_sums,
                          out=np.full(self.weight_sums.shape, np.nan),
                          where=self.weight_sums > 0)
        out: NDArray[np.float64] = self.value_sums * scale[:, None, :]
        return out


def stratified_group_sums(
    accumulator: PoissonAccumulator,
    observed: NDArray[np.float64],
    membership: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Per-group replicate sums ``(n_groups, n_values, B)`` from per-stratum sums.

    Parameters
    ----------
    accumulator
        Filled accumulator.
    observed
        Observed (unit-weight) per-stratum sums ``(n_strata, n_values)``, used in the
        replicates where a stratum drew only zero weights.
    membership
        ``(n_groups, n_strata)`` 0/1 matrix: which strata make up each group.
    """
    sums = accumulator.stratified_sums()
    empty = np.isnan(sums)
    if empty.any():
        sums = np.where(empty, observed[:, :, None], sums)
    out: NDArray[np.float64] = np.einsum("gs,skb->gkb", membership, sums)
    return out


def bytes_per_row(n_strata: int, n_values: int, n_replicates: int) -> int:
    """Working memory per row of a chunk: hash words, weights and products for every
    replicate, plus the row's line of the design matrix when a matrix product is used."""
    design = 8 * n_strata * (n_values + 1) if n_strata * (n_values + 1) <= GEMM_MAX_COLUMNS else 0
    return BYTES_PER_ROW_AND_REPLICATE * n_replicates + design


def accumulate(
    strata: NDArray[np.intp],
    values: NDArray[np.float64],
    *,
    n_strata: int,
    n_replicates: int,
    seed: int,
    keys: ArrayLike | None = None,
) -> PoissonAccumulator:
    """Stream the rows through a :class:`PoissonAccumulator`, one chunk at a time.

    The chunk holds ``counterfair.options.chunk_rows`` rows for :func:`bytes_per_row`
    bytes per row (set the chunk with ``cf.set_options(chunk_bytes=...)``); the result
    does not depend on it.

    Parameters
    ----------
    strata
        Stratum code of each row (``0 .. n_strata - 1``).
    values
        Value columns ``(rows, n_values)``.
    n_strata, n_replicates, seed
        As in :class:`PoissonAccumulator`.
    keys
        Non-negative integer key per row (default: the row position ``0 .. n - 1``).
    """
    n = strata.size
    if keys is None:
        key_array = np.arange(n, dtype=np.uint64)
    else:
        key_array = np.asarray(keys).reshape(-1)
        if key_array.size != n:
            raise ValueError(LENGTH_MISMATCH.format(name="row_ids", length=key_array.size,
                                                    other_name="data", other_length=n))
    accumulator = PoissonAccumulator(n_strata, values.shape[1], n_replicates, seed)
    step = chunk_rows(bytes_per_row(n_strata, values.shape[1], n_replicates), n)
    # one BLAS thread: the per-chunk products are small, a multi-threaded BLAS only adds
    # contention on a shared machine, and one thread sums in the same order everywhere
    with threadpool_limits(limits=1, user_api="blas"):
        for start in range(0, n, step):
            stop = min(start + step, n)
            accumulator.add(strata[start:stop], values[start:stop], key_array[start:stop])
    return accumulator


def check_row_ids(row_ids: ArrayLike, n: int) -> NDArray[np.uint64]:
    """Validate row ids: ``n`` distinct non-negative integers (as unsigned 64-bit keys)."""
    ids = np.asarray(row_ids).reshape(-1)
    if ids.size != n:
        raise ValueError(LENGTH_MISMATCH.format(name="row_ids", length=ids.size,
                                                other_name="y_true", other_length=n))
    if not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"row_ids must be integers, got dtype {ids.dtype}")
    if ids.size and int(ids.min()) < 0:
        raise ValueError(f"row_ids must be non-negative, got {int(ids.min())}")
    if np.unique(ids).size != ids.size:
        raise ValueError("row_ids must be distinct: two rows with one id draw the same weights")
    return ids.astype(np.uint64)
