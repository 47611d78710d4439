"""Running a function on every partition of a Dask frame, with global row positions.

:func:`run_partitions` computes the partition lengths first (so each partition
knows the global position of its first row), sends the model to every worker
once (``client.scatter(..., broadcast=True)``), runs one task per partition and
returns the results in partition order, or merges them pairwise on the workers.
Inside a task, every abduction of the fit (a FairLearner's, an audit's, a flip
test's subset) is given the global positions of its rows, looked up by index
label (:func:`with_positions`), so its random draws are those the rows get in
one in-memory call on the whole frame. Dask is imported inside the functions:
this module is imported by :mod:`counterfair.dask.row_calls` when the package is.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import CancelledError
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.inference.fit import Fit
from counterfair.rows.validated import Rows

logger = logging.getLogger(__name__)

IN_PARTITION = "partition {number} (global rows {first}..{last}): {message}"
"""A task's error, with the partition it arose in."""

WORKER_ENV: dict[str, str] = {
    "MALLOC_MMAP_THRESHOLD_": str(16 * 2**20),
    "MALLOC_TRIM_THRESHOLD_": str(64 * 2**20),
}
"""Environment variables for Dask worker processes running counterfair.

Dask starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``, so glibc gives freed memory
back to the system at once; every NumPy temporary above 128 KiB is then mapped and
zeroed afresh. The row path's arrays are megabytes: a 100,000-row audit took 28 s in
such a worker against 12 s in a plain process. These two settings keep blocks up to
16 MiB in the heap and return memory beyond 64 MiB of slack (11 s in the worker); the
workers' memory stays bounded by the chunk, with at most 64 MiB held back. glibc reads
them when a process starts, so they must be in the environment the worker is started
with: :data:`WORKER_CONFIG` for the workers a nanny starts (``LocalCluster``,
``dask worker``), the worker pod or job specification on a cluster.
"""

WORKER_CONFIG: dict[str, str] = {
    f"distributed.nanny.pre-spawn-environ.{name}": value for name, value in WORKER_ENV.items()
}
""":data:`WORKER_ENV` as Dask configuration: ``dask.config.set(WORKER_CONFIG)`` before
the cluster starts (the nanny sets these before it spawns each worker)."""


def fit_of(model: Any) -> Fit | None:
    """The SCM fit of a FairLearner (or of its bound method), else ``None``."""
    owner = getattr(model, "__self__", model)
    fit = getattr(owner, "scm_fit_", None)
    return fit if isinstance(fit, Fit) else None

def current_client() -> Any:
    """The current ``distributed.Client``, or ``None`` (then dask's local scheduler runs)."""
    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover - distributed ships with the [dask] extra
        return None
    try:
        return default_client()
    except ValueError:
        return None


@dataclass(frozen=True)
class Partitions:
    """A frame's partitions as they will be computed, with their global row positions.

    ``parts`` is ``ddf.to_delayed()``: Dask's optimised graph, in which a frame of few
    columns read from parquet may fuse several files into one partition, so that
    ``ddf.npartitions`` need not be their number. The lengths are computed on these very
    partitions, so positions and partitions agree.
    """

    parts: list[Any]
    starts: np.ndarray
    n_rows: int


def partitions(ddf: Any) -> Partitions:
    """:class:`Partitions` of ``ddf`` (one pass over the partitions for their lengths)."""
    import dask

    parts = list(ddf.to_delayed())
    lengths = np.asarray(compute([dask.delayed(len)(part) for part in parts]), dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return Partitions(parts, starts, int(lengths.sum()))


def partition_starts(ddf: Any) -> np.ndarray:
    """Global position of each partition's first row (see :func:`partitions`)."""
    return partitions(ddf).starts


class Payload:
    """The object every task receives, sent as one piece.

    ``client.scatter`` would send a tuple's items separately and lose that a
    FairLearner's ``scm_fit_`` *is* the fit beside it; one object keeps it.
    """

    def __init__(self, value: Any) -> None:
        self.value = value


def _task(
    kernel: Callable[..., Any],
    payload: Payload,
    part: pd.DataFrame,
    start: int,
    number: int,
    options: Mapping[str, Any],
) -> Any:
    """Run ``kernel`` on one partition; errors name the partition."""
    try:
        model = with_positions(payload.value, part, int(start))
        return kernel(model, part, int(start), int(number), **options)
    except errors.DataError as error:
        raise errors.DataError(
            IN_PARTITION.format(
                number=number, first=start, last=start + len(part) - 1, message=error
            )
        ) from error


def _positioned_fit(fit: Fit, part: pd.DataFrame, start: int) -> Fit:
    """A shallow copy of ``fit`` whose ``abduct`` keys draws by global row position.

    Every abduction inside a partition's task (the audit's, a FairLearner's, the
    flip test's subsets) passes ``positions=``: the global positions of its rows,
    looked up by index label. The copy shares the posterior arrays.
    """
    lookup = dict(zip(part.index, range(start, start + len(part)), strict=True))
    original = fit.abduct
    local = copy.copy(fit)

    def abduct(data: pd.DataFrame | Rows | None = None, **kwargs: Any) -> Any:
        if data is not None and kwargs.get("positions") is None:
            frame = data.frame if isinstance(data, Rows) else data
            where = np.fromiter(
                (lookup[label] for label in frame.index), dtype=np.int64, count=len(frame)
            )
            if isinstance(data, Rows):
                data = Rows(frame, where)
            else:
                kwargs["positions"] = where
        return original(data, **kwargs)

    object.__setattr__(local, "abduct", abduct)
    return local


def _localise(obj: Any, fit: Fit, local: Fit) -> Any:
    """``obj`` with ``fit`` replaced by ``local``: a FairLearner of ``fit`` (or its bound
    method) becomes a shallow copy whose fit is ``local``, keeping them shared."""
    if obj is fit:
        return local
    owner = getattr(obj, "__self__", None)
    if owner is not None and not isinstance(owner, type):
        moved = _localise(owner, fit, local)
        return obj if moved is owner else getattr(moved, obj.__name__)
    if getattr(obj, "scm_fit_", None) is fit:
        clone = copy.copy(obj)
        clone.scm_fit_ = local
        if getattr(obj, "model", None) is fit:
            clone.model = local
        return clone
    return obj


def with_positions(model: Any, part: pd.DataFrame, start: int) -> Any:
    """The task's own view of the model, abducting by global row position."""
    if not part.index.is_unique:
        raise errors.DataError(
            "the partition has a duplicated index label; give the Dask frame a unique "
            "index (reset_index()) so that each row keeps its own draws"
        )
    if isinstance(model, Fit):
        return _positioned_fit(model, part, start)
    if isinstance(model, tuple):
        fit = model[0]
        local = _positioned_fit(fit, part, start)
        return tuple(_localise(item, fit, local) for item in model)
    fit = fit_of(model)
    if fit is None:
        return model
    return _localise(model, fit, _positioned_fit(fit, part, start))


def merge_tree(items: list[Any], merge: Callable[[Any, Any], Any]) -> Any:
    """Merge delayed summaries pairwise, so that merging runs on the workers.

    The pairs are fixed by partition number, so the merged floating-point sums do not
    depend on which task finishes first."""
    import dask

    level = list(items)
    while len(level) > 1:
        paired = [dask.delayed(merge)(a, b) for a, b in zip(level[::2], level[1::2], strict=False)]
        level = paired + ([level[-1]] if len(level) % 2 else [])
    return level[0]


def run_partitions(
    ddf: Any,
    model: Any,
    kernel: Callable[..., Any],
    *,
    merge: Callable[[Any, Any], Any] | None = None,
    parts: Partitions | None = None,
    **options: Any,
) -> Any:
    """``kernel(model, partition, start, number, **options)`` on every partition.

    The model is scattered to every worker once and passed by reference.
    Returns the list of results in partition order, or, with ``merge``, their
    pairwise merge (computed on the workers; only the result reaches the client).
    ``parts`` is :func:`partitions` of ``ddf`` when the caller has it already.
    """
    import dask

    cut = partitions(ddf) if parts is None else parts
    client = current_client()

    def graph() -> Any:
        shared = (
            client.scatter(Payload(model), broadcast=True, hash=False)
            if client is not None
            else dask.delayed(Payload(model), pure=False)
        )
        tasks = [
            dask.delayed(_task, pure=False)(kernel, shared, part, int(start), number, options)
            for number, (part, start) in enumerate(zip(cut.parts, cut.starts, strict=True))
        ]
        return merge_tree(tasks, merge) if merge is not None else tasks

    final = graph()
    return compute(final, rerun=graph)


def compute(final: Any, *, rerun: Callable[[], Any] | None = None) -> Any:
    """Compute a delayed result on the current client, else on dask's local scheduler.

    ``rerun`` builds the graph again when the client cancels it (a lost worker took a
    scattered input with it)."""
    import dask

    client = current_client()
    if client is not None:
        try:
            return client.gather(client.compute(final))
        except CancelledError:
            # a worker that died can take the scattered model's last copy with it, and
            # the scheduler then cancels what depends on it; scatter again and rerun:
            # draws are keyed by row position, so the rerun gives the same numbers
            if rerun is None:
                raise
            logger.warning("a Dask task was cancelled (a worker was lost); running again")
            return client.gather(client.compute(rerun()))
    (computed,) = dask.compute(final)
    return computed
