"""Abduction of rows chunk by chunk: each chunk of rows paired with its abduction."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from counterfair.inference.abduction import Abduction
from counterfair.rows import chunking
from counterfair.rows.rows import Rows

if TYPE_CHECKING:  # counterfactual frames of a Fit come through here
    from counterfair.inference.fit import Fit


def abduct_chunks(
    fit: Fit,
    rows: Rows | None,
    *,
    bytes_per_row: float,
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
