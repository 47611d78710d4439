"""Dispatch of row-wise calls on the type of the rows, as xarray dispatches on array type.

Public functions that take rows (``FairLearner.predict``, baselines,
:func:`counterfair.counterfactual_predictions`,
:func:`counterfair.audit.counterfactual_fairness`) ask :func:`handler_for` at
their top whether another module handles rows of this type (a
``dask.dataframe.DataFrame``, say). Such a module registers its handlers when it
is imported (:mod:`counterfair.dask` does). It is a plug-in, loaded by name the
first time rows of its library arrive (:data:`PLUGINS`, as xarray loads its chunk
managers by entry point): this module imports nothing from the pipeline, the
pipeline imports no back end, and ``import counterfair`` imports no dask.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

Handler = Callable[..., Any]
"""Takes the same arguments as the public function it stands in for."""

Accepts = Callable[[object], bool]
"""Whether a handler takes these rows."""

_HANDLERS: dict[str, list[tuple[Accepts, Handler]]] = {}

PLUGINS: dict[str, str] = {"dask": "counterfair.dask"}
"""Top-level package of a rows type -> the counterfair module that handles such rows."""


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
    for item in rows if isinstance(rows, tuple | list) else (rows,):  # several inputs, too
        plugin = PLUGINS.get(type(item).__module__.partition(".")[0])
        if plugin is not None and plugin not in sys.modules:
            importlib.import_module(plugin)  # registers its handlers
    for accepts, handler in _HANDLERS.get(operation, ()):
        if accepts(rows):
            return handler
    return None


def operations() -> list[str]:
    """Every operation with a registered handler."""
    return sorted(name for name, entries in _HANDLERS.items() if entries)
