"""The Dask side of the one driver (:func:`counterfair.rows.measure.run`).

Importing this module (the package does) registers :func:`run_on_partitions` with
:mod:`counterfair.rows.dispatch`. The measure's settings were checked once on the
client; its :attr:`~counterfair.rows.measure.Measure.model` (the fit and a predictor)
is scattered to every worker once; each partition is validated, encoded and summed
where it lies, keyed by its rows' global positions; the sums merge pairwise on the
workers in partition order (:func:`~counterfair.dask.partitions.merge_tree`), and the
client receives one small object. The result equals the in-memory run of the same rows
to the order of floating-point sums (about 1e-12 relative), for any partitioning.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from counterfair.dask.partitions import fit_of, run_partitions
from counterfair.dask.row_calls import _check_frame, is_dask_frame
from counterfair.inference.fit import Fit
from counterfair.rows import dispatch
from counterfair.rows.measure import OPERATION, Measure


def _kernel(
    model: Any, part: pd.DataFrame, start: int, number: int, *, measure: Measure[Any, Any]
) -> Any:
    local = measure.with_model(model)  # the task's own view: abductions by global position
    if len(part) == 0:
        return local.empty()
    return local.sums(local.rows(part, positions=np.arange(start, start + len(part))))


def run_on_partitions(measure: Measure[Any, Any], data: Any) -> Any:
    """:func:`counterfair.rows.measure.run` for a Dask frame."""
    model = measure.model
    first = model[0] if isinstance(model, tuple) else model
    _check_frame(data, first if isinstance(first, Fit) else fit_of(first))
    bare = measure.with_model(None)  # the model travels once, scattered, not in every task
    total = run_partitions(data, model, _kernel, merge=bare.merge, measure=bare)
    return measure.result(total, columns=[str(c) for c in data.columns])


dispatch.register(OPERATION, is_dask_frame, run_on_partitions)
