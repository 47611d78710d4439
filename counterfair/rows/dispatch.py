"""Dispatch of row-wise calls on the type of the rows, as xarray dispatches on array type.

Public functions that take rows (``FairLearner.predict``, baselines,
:func:`counterfair.counterfactual_predictions`,
:func:`counterfair.audit.counterfactual_fairness`) ask :func:`handler_for` at
their top whether another module handles rows of this type (a
``dask.dataframe.DataFrame``, say). Such a module registers its handlers when it
is imported (:mod:`counterfair.dask.rows` does, without importing dask), so this
module imports nothing from the pipeline and the pipeline imports no back end:
no import cycle, and the package imports without dask.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Handler = Callable[..., Any]
"""Takes the same arguments as the public function it stands in for."""

Accepts = Callable[[object], bool]
"""Whether a handler takes these rows."""

_HANDLERS: dict[str, list[tuple[Accepts, Handler]]] = {}


def register(operation: str, accepts: Accepts, handler: Handler) -> None:
    """Make ``handler`` run ``operation`` for rows that ``accepts``.

    Parameters
    ----------
    operation : str
        Name of the public call, e.g. ``"FairLearner.predict"``.
    accepts : callable
        ``accepts(rows) -> bool``; must be cheap and must not import anything heavy.
    handler : callable
        Called with the public function's arguments in place of its body.
    """
    entries = _HANDLERS.setdefault(operation, [])
    entries[:] = [(a, h) for a, h in entries if h is not handler]
    entries.append((accepts, handler))


def handler_for(operation: str, rows: object) -> Handler | None:
    """The handler registered for ``operation`` that takes ``rows``, or ``None``."""
    for accepts, handler in _HANDLERS.get(operation, ()):
        if accepts(rows):
            return handler
    return None


def operations() -> list[str]:
    """Every operation with a registered handler."""
    return sorted(name for name, entries in _HANDLERS.items() if entries)
