"""Levels read from the training rows: a fitted SCM's specs with every level declared.

A :class:`~counterfair.Categorical` or :class:`~counterfair.Ordinal` node declared
without levels, and a :class:`~counterfair.Bernoulli` node whose column holds two labels
(``no``/``yes``) rather than 0/1, take their levels from the rows the SCM is fitted on
(:meth:`Family.levels_from_data <counterfair.model.families.base.Family.levels_from_data>`).
:func:`with_levels_from_data` returns the SCM with those levels written into its specs, so
that the fit, its saved ``scm.json`` and every later check of new rows use them: a level
unseen in training is then an error naming the column, the level and the row. Each node
whose levels were read writes one INFO line.
"""

from __future__ import annotations

import logging
import warnings
from typing import TYPE_CHECKING

import pandas as pd

from counterfair.model.families import family_of
from counterfair.model.nodes import SPEC_KEY, Observed

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

logger = logging.getLogger(__name__)

__all__ = ["with_levels_from_data"]


def _describe(spec: Observed) -> str:
    levels = getattr(spec, "levels", None)
    if spec.family == "bernoulli" and levels is not None:
        return f"{levels[0]!r} -> 0, {levels[1]!r} -> 1 (positive)"
    return ", ".join(repr(level) for level in levels or ())


def with_levels_from_data(scm: SCM, data: pd.DataFrame) -> SCM:
    """``scm`` with the levels its specs leave to the data read from ``data``.

    Returns ``scm`` itself when no spec needs levels from the data (or the data has
    no column for those that do: the row checks then name the missing column).

    Raises
    ------
    DataError
        When a column's levels cannot be read (a Bernoulli column of two labels that
        are not a recognised pair and no ``positive``; an Ordinal column of strings;
        a single level), naming the column and what to declare.
    """
    resolved: dict[str, Observed] = {}
    for node in scm.observed:
        spec = scm.specs[node]
        if not isinstance(spec, Observed) or node not in data.columns:
            continue
        new = family_of(spec).levels_from_data(spec, data[node], node)
        if new is not None and new != spec:
            resolved[node] = new
    if not resolved:
        return scm
    graph = scm.graph
    for node, spec in resolved.items():
        graph.nodes[node][SPEC_KEY] = spec
        logger.info(
            "%s node %r: levels read from the data: %s", type(spec).__name__, node,
            _describe(spec),
        )
    with warnings.catch_warnings():  # the SCM's own warnings were given when it was built
        warnings.simplefilter("ignore")
        return type(scm)(graph, coding=scm.coding)
