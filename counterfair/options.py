"""Package-wide options: the size of the row chunks that row-wise work streams through.

Row-wise operations (abduction of new rows, fair predictions, counterfactual
predictions and audits) process rows in chunks so that peak memory is set by
the chunk, not by the number of rows. The chunk is sized in bytes of working
memory, like dask's ``array.chunk-size``; each operation turns it into a number
of rows from its own cost per row (samples x nodes x 8 bytes, say).

>>> import counterfair as cf
>>> with cf.set_options(chunk_bytes=32 * 2**20):  # 32 MiB chunks inside the block
...     pass
>>> cf.get_options()["chunk_bytes"] == cf.options.DEFAULT_CHUNK_BYTES
True

Results do not depend on the chunk size: random draws are keyed by the seed and
the row's position, never by the chunk.
"""

from __future__ import annotations

import os
from typing import Any

DEFAULT_CHUNK_BYTES = 128 * 2**20
"""Default working memory of one chunk of rows: 128 MiB."""

MIN_CHUNK_BYTES = 2**16
"""Smallest chunk accepted (64 KiB): smaller chunks only add overhead."""

DEFAULT_MAX_ROWS = 100_000
"""Above this many rows ``SCM.fit`` runs NUTS on a stratified subsample of this size."""

_OPTIONS: dict[str, Any] = {"chunk_bytes": DEFAULT_CHUNK_BYTES}


def physical_memory() -> int | None:
    """Bytes of physical memory of this machine, or ``None`` where unknown."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def check_chunk_bytes(value: object) -> int:
    """``value`` as a chunk size in bytes, or a ``ValueError`` saying why it is refused.

    A chunk must be an integer of at least :data:`MIN_CHUNK_BYTES` and at most half
    of the machine's physical memory (a chunk that cannot fit is refused before any
    work starts, rather than failing halfway).
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"chunk_bytes must be an integer number of bytes, got {value!r}")
    if value < MIN_CHUNK_BYTES:
        raise ValueError(
            f"chunk_bytes={value} is below the minimum of {MIN_CHUNK_BYTES} bytes (64 KiB)"
        )
    memory = physical_memory()
    if memory is not None and value > memory // 2:
        raise ValueError(
            f"chunk_bytes={value} ({value / 2**30:.1f} GiB) cannot fit in memory: this "
            f"machine has {memory / 2**30:.1f} GiB and a chunk may use at most half of it"
        )
    return value


def get_options() -> dict[str, Any]:
    """A copy of the current options."""
    return dict(_OPTIONS)


def chunk_bytes() -> int:
    """The current chunk size in bytes."""
    return int(_OPTIONS["chunk_bytes"])


def chunk_rows(bytes_per_row: float, n_rows: int) -> int:
    """Rows per chunk for an operation that needs ``bytes_per_row`` of working memory per row.

    At least one row, at most ``n_rows`` (and at least 1 when ``n_rows`` is 0).
    """
    per_row = max(float(bytes_per_row), 1.0)
    return max(1, min(max(n_rows, 1), int(chunk_bytes() // per_row)))


class set_options:  # noqa: N801 - used like a function, as xarray.set_options
    """Set options globally, or inside a ``with`` block only.

    Parameters
    ----------
    chunk_bytes : int
        Working memory of one chunk of rows, in bytes (default
        :data:`DEFAULT_CHUNK_BYTES`). Refused when below 64 KiB or above half of
        the machine's physical memory.

    Examples
    --------
    >>> import counterfair as cf
    >>> _ = cf.set_options(chunk_bytes=64 * 2**20)  # from now on
    >>> with cf.set_options(chunk_bytes=16 * 2**20):  # inside the block only
    ...     cf.get_options()["chunk_bytes"]
    16777216
    >>> _ = cf.set_options(chunk_bytes=cf.options.DEFAULT_CHUNK_BYTES)
    """

    def __init__(self, **options: Any) -> None:
        unknown = sorted(set(options) - set(_OPTIONS))
        if unknown:
            raise ValueError(f"unknown option(s) {unknown}; known: {sorted(_OPTIONS)}")
        checked = {"chunk_bytes": check_chunk_bytes(options["chunk_bytes"])} if options else {}
        self._previous = dict(_OPTIONS)
        _OPTIONS.update(checked)

    def __enter__(self) -> set_options:
        return self

    def __exit__(self, *exc: object) -> None:
        _OPTIONS.clear()
        _OPTIONS.update(self._previous)

