"""Split rows into chunks sized in bytes, run a stage per chunk, and join the results.

Row-wise stages (abduction of new rows, counterfactual worlds, fair predictions)
run on chunks of rows whose working memory is about
:func:`counterfair.options.chunk_bytes`. Each chunk carries the global 0-based
positions of its rows, and every random draw of the row path is keyed by those
positions (:class:`counterfair.rng.RowRandom`), so the joined result is the
same for any chunk size, any number of workers and any order of the chunks.

Examples
--------
>>> [(c.rows.start, c.rows.stop) for c in row_chunks(5, rows_per_chunk=2)]
[(0, 2), (2, 4), (4, 5)]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pandas as pd

from counterfair import options

T = TypeVar("T")

BYTES_PER_VALUE = 8
"""Bytes of one float64 value."""

WORKING_FACTOR = 4
"""Copies of the per-row arrays a stage holds at once (inputs, temporaries, output)."""


def bytes_per_row(n_samples: int, n_values: int, *, factor: float = WORKING_FACTOR) -> float:
    """Working memory per row of a stage holding ``n_samples x n_values`` floats per row.

    Parameters
    ----------
    n_samples : int
        Samples per row (posterior draws, abducted latents).
    n_values : int
        Values per row and sample (nodes, features, levels).
    factor : float
        Copies held at once (default :data:`WORKING_FACTOR`).
    """
    return float(max(n_samples, 1) * max(n_values, 1) * BYTES_PER_VALUE * factor)


@dataclass(frozen=True)
class Chunk:
    """One chunk: a slice of the rows at hand and the rows' global positions."""

    rows: slice
    positions: np.ndarray


def row_chunks(
    n_rows: int,
    *,
    bytes_per_row: float | None = None,
    rows_per_chunk: int | None = None,
    positions: np.ndarray | None = None,
) -> list[Chunk]:
    """The chunks of ``n_rows`` rows.

    Parameters
    ----------
    n_rows : int
        Rows at hand.
    bytes_per_row : float, optional
        Working memory per row (:func:`bytes_per_row`); the chunk holds
        :func:`counterfair.options.chunk_rows` rows.
    rows_per_chunk : int, optional
        Rows per chunk, instead of ``bytes_per_row``.
    positions : numpy.ndarray, optional
        Global positions of the rows (default ``0..n_rows-1``).

    Returns
    -------
    list of Chunk
        At least one chunk (an empty one when ``n_rows`` is 0).
    """
    if (bytes_per_row is None) == (rows_per_chunk is None):
        raise ValueError("give exactly one of bytes_per_row and rows_per_chunk")
    if rows_per_chunk is None:
        rows_per_chunk = options.chunk_rows(float(bytes_per_row or 1.0), n_rows)
    if rows_per_chunk < 1:
        raise ValueError(f"rows_per_chunk must be at least 1, got {rows_per_chunk}")
    if positions is None:
        positions = np.arange(n_rows, dtype=np.int64)
    positions = np.asarray(positions, dtype=np.int64)
    if len(positions) != n_rows:
        raise ValueError(f"{len(positions)} positions for {n_rows} rows")
    starts = range(0, max(n_rows, 1), rows_per_chunk)
    return [
        Chunk(slice(a, min(a + rows_per_chunk, n_rows)), positions[a : a + rows_per_chunk])
        for a in starts
    ]


def sample_mean(values: np.ndarray) -> np.ndarray:
    """Mean over the samples (axis 0) of a chunk's ``(S, n, ...)`` array, the same for any n.

    numpy sums a contiguous axis pairwise and a strided one in sequence, so
    ``values.mean(axis=0)`` of a one-row chunk differs in the last bit from the same row's
    mean in a wider chunk. Here every row's samples are summed contiguously, always.
    """
    return np.ascontiguousarray(np.moveaxis(values, 0, -1)).mean(axis=-1)


def concat_rows(parts: list[np.ndarray], *, axis: int) -> np.ndarray:
    """Per-chunk arrays joined along their row ``axis`` (one part is returned as is)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=axis)


def apply_by_rows(
    function: Callable[[pd.DataFrame], np.ndarray], frame: pd.DataFrame, *, bytes_per_row: float
) -> np.ndarray:
    """``function`` of each chunk of a frame's rows, joined along axis 0.

    For row-wise deterministic functions (a baseline's predictions): the result is
    that of ``function(frame)``, with working memory bounded by the chunk.
    """
    parts = [
        np.asarray(function(frame.iloc[part.rows]))
        for part in row_chunks(len(frame), bytes_per_row=bytes_per_row)
    ]
    return concat_rows(parts, axis=0)
