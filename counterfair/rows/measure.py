"""One way to compute: a row-wise measure, and the one driver that runs it anywhere.

A *measure* is one row-wise computation of a fitted SCM (a decomposition, an audit):
its settings, checked once when it is made (a frozen dataclass), and four steps,

- :meth:`Measure.rows`: the rows of a piece of the data, validated and encoded once
  (:class:`~counterfair.rows.validated.Rows`, carrying their global positions);
- :meth:`Measure.sums`: the mergeable partial sums of those rows. A measure keeps
  its memory to :func:`counterfair.options.chunk_bytes` by working chunk by chunk
  inside, and keys every draw by the seed and each row's global position, so the sums
  do not depend on where the pieces were cut;
- :meth:`Measure.merge`: two partial sums into one (associative);
- :meth:`Measure.result`: the result of the sums of all the rows.

:func:`run` is the one driver. Rows in memory are checked once and summed; a Dask
frame goes to the handler :mod:`counterfair.dask.measures` registers (through
:mod:`counterfair.rows.dispatch`, so this module imports no Dask): each partition is
summed where it lies, with the measure's :attr:`~Measure.model` (the fit and a
predictor) sent to every worker once, and the sums merge pairwise in partition order.
A new measure written against this protocol runs in memory and on Dask, with the same
numbers, by being a measure.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Generic, TypeVar, cast

import numpy as np
import pandas as pd

from counterfair.rows import dispatch
from counterfair.rows.validated import Rows

S = TypeVar("S")
"""The partial sums of a measure."""
R = TypeVar("R")
"""The result of a measure."""
M = TypeVar("M", bound="Measure[Any, Any]")

OPERATION = "measure"
"""The name a back end registers its driver under (:func:`counterfair.rows.dispatch.register`)."""


class Measure(ABC, Generic[S, R]):
    """The protocol every row-wise measure follows (see the module docstring)."""

    @property
    @abstractmethod
    def model(self) -> Any:
        """What every piece of the work needs besides the rows: a fit, a predictor.

        A partitioned run sends it to each worker once and gives each task its own view
        of it (abducting by the partition's global positions)."""

    @abstractmethod
    def with_model(self: M, model: Any) -> M:
        """The same settings with ``model`` (a task's view of it, or ``None`` to travel
        without it)."""

    @abstractmethod
    def rows(self, data: pd.DataFrame, positions: np.ndarray | None = None) -> Rows:
        """``data`` validated and encoded, at its global ``positions`` (default 0..N-1)."""

    def check(self, rows: Rows) -> None:
        """Checks of all the rows before any work (in memory only: a partition cannot
        see the others; :meth:`result` checks the same from the sums)."""

    @abstractmethod
    def empty(self) -> S:
        """The sums of no rows (an empty partition)."""

    @abstractmethod
    def sums(self, rows: Rows) -> S:
        """The mergeable partial sums of ``rows``."""

    @abstractmethod
    def merge(self, a: S, b: S) -> S:
        """``a`` and ``b`` as one (associative; the driver fixes the order)."""

    @abstractmethod
    def result(self, total: S, *, columns: Sequence[str]) -> R:
        """The result of the sums of all the rows; ``columns`` are the data's columns."""


def run(measure: Measure[S, R], data: Any) -> R:
    """Run ``measure`` over ``data``: a pandas DataFrame in memory, a Dask frame by its
    partitions (:mod:`counterfair.dask.measures`), with the same numbers either way."""
    if (handler := dispatch.handler_for(OPERATION, data)) is not None:
        return cast(R, handler(measure, data))
    rows = measure.rows(data)
    measure.check(rows)
    total = measure.sums(rows) if len(rows.frame) else measure.empty()
    return measure.result(total, columns=[str(c) for c in rows.frame.columns])


__all__ = ["Measure", "run"]
