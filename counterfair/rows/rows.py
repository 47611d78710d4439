"""Rows validated once and cut into chunks that know their global positions.

A :class:`Rows` is built once at the top of a row-wise call (abduction of new rows,
fair predictions, counterfactual predictions) and passed down the stages:
abduction, then action, then prediction. :meth:`Rows.chunks` cuts it into chunks
of :func:`counterfair.options.chunk_bytes` of working memory; each chunk keeps the
global 0-based positions of its rows, by which every random draw is keyed
(:class:`counterfair.rng.RowRandom`), so results do not depend on the
chunking. :func:`counterfair.inference.chunks.abduct_chunks` pairs each chunk with its
abduction.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from counterfair.model import checks as validation
from counterfair.rows import chunking


@dataclass(frozen=True)
class Rows:
    """Validated rows and their global positions.

    Attributes
    ----------
    frame : pandas.DataFrame
        The rows (a non-empty DataFrame, checked once).
    positions : numpy.ndarray
        Global 0-based positions of the rows in the whole data set, int64,
        shape ``(N,)``.
    """

    frame: pd.DataFrame
    positions: np.ndarray

    @classmethod
    def from_frame(cls, data: object, positions: np.ndarray | None = None) -> Rows:
        """Validate ``data`` (a non-empty DataFrame) once; positions default to ``0..N-1``.

        A :class:`Rows` is returned as it is (with ``positions=None``).

        Raises
        ------
        DataError
            If ``data`` is not a non-empty DataFrame.
        ValueError
            If ``positions`` does not give one integer position per row.
        """
        if isinstance(data, Rows) and positions is None:
            return data
        frame = validation.validate_frame(data.frame if isinstance(data, Rows) else data)
        if positions is None:
            where = np.arange(len(frame), dtype=np.int64)
        else:
            where = np.asarray(positions)
            if where.shape != (len(frame),) or (where.size and where.dtype.kind not in "iu"):
                raise ValueError(
                    f"positions must hold one integer per row: shape {where.shape} for "
                    f"{len(frame)} rows"
                )
            where = where.astype(np.int64)
        return cls(frame, where)

    def __len__(self) -> int:
        return len(self.frame)

    def chunk(self, rows: slice) -> Rows:
        """The rows of a slice, with their global positions."""
        return Rows(self.frame.iloc[rows], self.positions[rows])

    def chunks(self, bytes_per_row: float) -> Iterator[tuple[slice, Rows]]:
        """``(slice, chunk)`` pairs covering the rows in order, sized by ``chunk_bytes``."""
        for part in chunking.row_chunks(
            len(self), bytes_per_row=bytes_per_row, positions=self.positions
        ):
            yield part.rows, self.chunk(part.rows)
