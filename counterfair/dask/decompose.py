"""The causal decomposition (:func:`counterfair.audit.decompose`) of a Dask frame.

Importing this module (the package does) registers the handler with
:mod:`counterfair.rows.dispatch`. The settings are checked once on the client
(:func:`~counterfair.audit.decomposition.decomposition_plan`); each partition is
abducted and its four worlds built chunk by chunk where it lies, keyed by its rows'
global positions, and reduced to mergeable per-sample sums
(:class:`~counterfair.audit.streaming.DecompositionSums`); the sums merge pairwise on
the workers and the client receives one small object. The result equals the in-memory
decomposition of the same rows to the order of floating-point sums (about 1e-12
relative), for any partitioning.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from counterfair.audit.decomposition import (
    Decomposition,
    DecompositionPlan,
    decomposition_plan,
    decomposition_sums,
    finish_decomposition,
)
from counterfair.audit.streaming import DecompositionSums
from counterfair.dask.partitions import run_partitions
from counterfair.dask.row_calls import _check_frame, is_dask_frame
from counterfair.inference.fit import Fit
from counterfair.rows import dispatch
from counterfair.rows.validated import Rows


def _kernel(
    model: Any, part: pd.DataFrame, start: int, number: int, *, plan: DecompositionPlan
) -> DecompositionSums:
    fit, predictor = model  # the task's own view: abductions keyed by global position
    if len(part) == 0:
        return DecompositionSums(n_samples=plan.n_samples)
    local = dataclasses.replace(plan, predictor=predictor)
    rows = Rows.check(
        part, fit.scm, fit.encoding, positions=np.arange(start, start + len(part))
    )
    return decomposition_sums(fit, rows, local)


def _merge(a: DecompositionSums, b: DecompositionSums) -> DecompositionSums:
    return a.merge(b)


def dask_decompose(fit: Fit, data: Any, **options: Any) -> Decomposition:
    """:func:`counterfair.audit.decompose` for a Dask frame (same arguments)."""
    plan = decomposition_plan(fit, **options)
    _check_frame(data, fit)
    # the predictor travels once with the scattered model, not inside every task's plan
    bare = dataclasses.replace(plan, predictor=None)
    sums = run_partitions(data, (fit, plan.predictor), _kernel, merge=_merge, plan=bare)
    return finish_decomposition(
        fit, plan, sums, outcome_in_rows=plan.outcome in data.columns
    )


dispatch.register("decompose", is_dask_frame, dask_decompose)
