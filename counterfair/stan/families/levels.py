"""What the Stan emitters of level-valued families share (ordinal, categorical).

Level codes ``0 .. K-1`` are ``1 .. K`` in the Stan data, with the number of levels
``n_levels_<node>`` as data; as a parent the node enters a child's design matrix as
reference-coded indicators of its levels (``indicators(node, n_levels_node, 1)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from counterfair.model.families.levels import LevelFamily
from counterfair.stan.families.base import StanFamily

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation


class LevelStan(StanFamily):
    """Base of the level-valued families' emitters: codes from 1, levels as data."""

    def stan_values(self, eq: NodeEquation, values: np.ndarray) -> np.ndarray:
        return np.rint(values).astype(np.int64) + 1

    def values_from_stan(self, stan_column: np.ndarray) -> np.ndarray:
        return np.asarray(stan_column, dtype=float) - 1.0

    def stan_data(self, eq: NodeEquation) -> dict[str, object]:
        return {str(eq.levels): self.family.n_levels(eq.spec)}

    def data_declarations(self, eq: NodeEquation) -> list[str]:
        family = self.family
        ordered = isinstance(family, LevelFamily) and family.ordered_levels
        first = "lowest" if ordered else "reference"
        return [
            f"int<lower=2> {eq.levels};  // number of levels of {self.name} {eq.node}",
            f"array[N] int<lower=1, upper={eq.levels}> {eq.node};"
            f"  // observed {eq.node} (level 1 = {first})",
        ]

    def design_column(self, eq: NodeEquation) -> str:
        return f"indicators({eq.node}, {eq.levels}, 1)"

    def design_width(self, eq: NodeEquation) -> str:
        return f"({eq.levels} - 1)"
