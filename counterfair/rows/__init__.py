"""Rows: checked and encoded once at one door (:class:`Rows`), cut into chunks by
``chunk_bytes``, subsampled by stratum, and dispatched on their type (Dask)."""

from counterfair.rows.rows import Rows, abduct_chunks, slice_do

__all__ = ["Rows", "abduct_chunks", "slice_do"]
