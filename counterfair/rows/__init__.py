"""Rows: checked and encoded once at one door (:class:`Rows`), cut into chunks by
``chunk_bytes``, subsampled by stratum, and dispatched on their type (Dask)."""

from counterfair.rows.validated import Rows

__all__ = ["Rows"]
