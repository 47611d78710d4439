"""The row path's one chunk loop: each chunk of rows paired with its abduction.

Every row-wise stage that abducts (counterfactual frames and predictions, the
counterfactual audit, a fair learner's predictions) iterates :func:`abduct_chunks`
and folds what it computes per chunk (:func:`counterfair.rows.chunking.concat_rows`,
or a stage's own merge). The chunk is sized once, here, by :func:`row_bytes`: the
working memory of one row of the row path under ``chunk_bytes``
(:func:`counterfair.options.chunk_bytes`). Results do not depend on the chunk size.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from counterfair.inference.abduction_result import EXACT_DRAWS_PER_SET, Abduction
from counterfair.rows import chunking
from counterfair.rows.validated import Rows

if TYPE_CHECKING:  # counterfactual frames of a Fit come through here
    from counterfair.inference.fit import Fit


VALUES_PER_NODE = 8
"""Floats per node, row and sample the row path holds at once: the node in the factual
and counterfactual worlds, its abducted noise, a prediction per world and temporaries."""


def row_bytes(fit: Fit, n_samples: int | None) -> float:
    """Working memory of one row of the row path with ``n_samples`` samples per row."""
    samples = n_samples or EXACT_DRAWS_PER_SET
    return chunking.bytes_per_row(samples, VALUES_PER_NODE * len(fit.scm.specs))


def abduct_chunks(
    fit: Fit,
    rows: Rows | None,
    *,
    abduction: Abduction | None = None,
    **abduct_args: Any,
) -> Iterator[tuple[slice, Abduction]]:
    """``(slice, abduction)`` for each chunk of the rows, in order.

    Exact abduction (and an SCM without latents) runs chunk by chunk, each chunk
    keyed by its rows' global positions, so the abductions do not depend on the
    chunk size. MCMC abduction of new rows, and the training rows' own draws
    (``rows=None``), are computed once for all the rows and then cut: MCMC
    abduction is not chunk-invariant (one Stan program samples all rows at once).
    A given ``abduction`` is cut likewise.
    """
    given = abduction.n_samples if abduction is not None else abduct_args.get("n_samples")
    bytes_per_row = row_bytes(fit, given)
    if abduction is None and (rows is None or not fit.abduction_is_exact(rows, **abduct_args)):
        abduction = fit.abduct(rows, **abduct_args)
    if abduction is not None:
        n = len(abduction.data)
        for part in chunking.row_chunks(n, bytes_per_row=bytes_per_row):
            yield part.rows, abduction.take_rows(np.arange(n)[part.rows])
        return
    assert rows is not None
    for where, chunk in rows.chunks(bytes_per_row):
        yield where, fit.abduct(chunk, **abduct_args)
