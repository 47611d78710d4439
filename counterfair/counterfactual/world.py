"""One world of a chunk of rows: protected codes and every node's values, as arrays.

Action (:mod:`counterfair.counterfactual.action`) computes a :class:`World` per intervention
from an :class:`~counterfair.inference.abduction_result.Abduction`; prediction reads it.
The arrays stay arrays from abduction to the summary: the long data frame a predictor reads
(:meth:`World.frame`) is built once per world, with the columns that predictor needs,
its protected columns as categoricals built from their codes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from counterfair.inference.abduction_result import Abduction

if TYPE_CHECKING:
    from counterfair.model.encoding import Encoding
    from counterfair.model.scm import SCM

NOISE_SUFFIX = ":noise"
"""Columns ``<node>:noise`` hold the abducted additive noise of Normal nodes."""


def noise_column(node: str) -> str:
    """Name of the column holding the additive noise of a Normal node."""
    return f"{node}{NOISE_SUFFIX}"


WORLDS = ("factual", "counterfactual")
"""The names of the two worlds, the categories of a frame's ``world`` column."""


def world_column(name: str, size: int) -> Any:
    """The ``world`` column: a categorical of :data:`WORLDS` (no string per row), so the
    frames of both worlds concatenate into one categorical column."""
    if name not in WORLDS:
        return np.full(size, name, dtype=object)
    return pd.Categorical.from_codes(
        np.full(size, WORLDS.index(name), dtype=np.int8), categories=list(WORLDS)
    )


@dataclass(frozen=True)
class World:
    """The values of every node in one world, for the rows and samples of an abduction.

    Attributes
    ----------
    name : str
        ``"factual"`` or ``"counterfactual"`` (the ``world`` column of a frame).
    abduction : Abduction
        The rows' joint samples of parameters and latents.
    codes : dict of str to numpy.ndarray
        Protected level codes in this world, shape ``(N,)`` (values for a
        continuous attribute).
    values : dict of str to numpy.ndarray
        Latents and observed nodes, each broadcastable to ``(S, N)``.
    noise : dict of str to numpy.ndarray
        Abducted (or simulated) additive noise of Normal nodes, ``(S, N)``; the
        same arrays in every world of the rows (one unit, one noise).
    """

    name: str
    abduction: Abduction
    codes: Mapping[str, np.ndarray]
    values: Mapping[str, np.ndarray]
    noise: Mapping[str, np.ndarray]

    @property
    def shape(self) -> tuple[int, int]:
        """``(S, N)``: samples and rows."""
        return self.abduction.n_samples, len(self.abduction.data)

    def take_rows(self, mask: np.ndarray, abduction: Abduction | None = None) -> World:
        """The same world for a subset of the rows (boolean mask).

        ``abduction`` is the subset's abduction when the caller already cut it
        (``self.abduction.take_rows(mask)``); it is cut here otherwise.
        """
        s, _ = self.shape
        index = np.flatnonzero(np.asarray(mask))

        def cut(array: np.ndarray) -> np.ndarray:
            return np.asarray(array)[..., index]  # rows are the last axis

        return World(
            name=self.name,
            abduction=abduction if abduction is not None else self.abduction.take_rows(index),
            codes={k: v[index] for k, v in self.codes.items()},
            values={k: np.broadcast_to(cut(v), (s, len(index))) for k, v in self.values.items()},
            noise={k: cut(v) for k, v in self.noise.items()},
        )

    def frame(
        self, scm: SCM, encoding: Encoding, *, latents: bool = True
    ) -> pd.DataFrame:
        """The world as a long frame, ``S * N`` rows, sample-major.

        Columns ``row`` (the data's index label), ``sample``, ``world``, one per
        protected attribute (a categorical of its levels, built from the codes),
        the latents, the observed nodes (as their columns hold them) and
        ``<node>:noise`` per Normal node with noise; without ``latents`` the
        latent and noise columns are left out (what a predictor of observed
        columns reads).
        """
        s, n = self.shape
        frame: dict[str, Any] = {
            "row": np.tile(self.abduction.data.index.to_numpy(), s),
            "sample": np.repeat(np.arange(s), n),
            "world": world_column(self.name, s * n),
        }
        for node in scm.protected:
            frame[node] = encoding.column(node, np.tile(self.codes[node], s))
        if latents:
            for node in scm.latents:
                frame[node] = np.broadcast_to(self.values[node], (s, n)).reshape(-1)
        for node in scm.observed:
            column = np.broadcast_to(self.values[node], (s, n)).reshape(-1)
            eq = scm.equations[node]
            frame[node] = eq.family.frame_column(eq.spec, column)
        if latents:
            for node, array in self.noise.items():
                frame[noise_column(node)] = np.broadcast_to(array, (s, n)).reshape(-1)
        return pd.DataFrame(frame)

