"""Joint samples of parameters and latents for rows: the result of abduction.

:meth:`counterfair.Fit.abduct` returns an :class:`Abduction`; action and prediction
(:mod:`counterfair.counterfactual.action`) read it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.model.evaluate import linear_predictor
from counterfair.model.params import ParamDraws
from counterfair.rng import RowRandom

DEFAULT_CHAINS = 2
"""Chains of the MCMC abduction program unless given."""

DEFAULT_WARMUP = 300
"""Warm-up iterations per chain of the MCMC abduction program unless given."""

MIN_DRAWS_PER_CHAIN = 100
"""Fewest draws per chain of the MCMC abduction program when ``draws`` is not given."""

EXACT_DRAWS_PER_SET = DEFAULT_CHAINS * MIN_DRAWS_PER_CHAIN
"""Draws per parameter set of exact abduction without ``n_samples`` (as many as MCMC's default)."""


logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

AbductionEngineUsed = Literal["exact", "mcmc", "fit", "none"]


@dataclass(frozen=True)
class Abduction:
    """Joint samples of parameters and latents for a set of rows.

    Sample ``s`` pairs the parameter set ``params.take([s])`` with the latents
    ``latents[name][s]`` of every row, so counterfactuals can be computed sample
    by sample.

    Attributes
    ----------
    data : pandas.DataFrame
        The rows.
    params : ParamDraws
        ``S`` parameter sets, one per sample.
    latents : dict of str to numpy.ndarray
        Latent draws by latent node, shape ``(S, N)``.
    codes : dict of str to numpy.ndarray
        Protected level codes of the rows, shape ``(N,)``.
    observed : dict of str to numpy.ndarray
        Factual values of the rows' observed nodes, shape ``(N,)``; ``(S, N)`` for a
        node with missing values in training rows fitted with ``missing="model"``
        (:attr:`holes`): each sample's own value where it is missing.
    conditioned_on : tuple of str
        Observed nodes the latents were conditioned on.
    engine : str
        How the latents were obtained: ``"exact"`` (grid abduction given the
        parameter sets, :mod:`counterfair.inference.exact_abduction`), ``"mcmc"`` (the
        Stan abduction program), ``"fit"`` (the training rows' draws from the
        fit's joint posterior) or ``"none"`` (the SCM has no latent).
    positions : numpy.ndarray, optional
        Global 0-based positions of the rows in the whole data set they were cut
        from (default ``0..N-1``); random draws made for the rows are keyed by them
        (:class:`~counterfair.rng.RowRandom`), so they do not depend on the
        chunking.
    holes : dict of str to numpy.ndarray
        For training rows fitted with ``missing="model"``: a mask ``(N,)`` per node with
        missing values, True where the value in :attr:`observed` is a posterior draw
        (a sampled node) or a draw from its equation (a node without children).
    """

    data: pd.DataFrame
    params: ParamDraws
    latents: dict[str, np.ndarray]
    codes: dict[str, np.ndarray]
    observed: dict[str, np.ndarray]
    conditioned_on: tuple[str, ...]
    engine: AbductionEngineUsed = "fit"
    positions: np.ndarray | None = None
    holes: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n_samples(self) -> int:
        """Number of joint samples ``S``."""
        return self.params.n

    @property
    def row_positions(self) -> np.ndarray:
        """Global positions of the rows, ``0..N-1`` unless set (int64, shape ``(N,)``)."""
        if self.positions is None:
            return np.arange(len(self.data), dtype=np.int64)
        return np.asarray(self.positions, dtype=np.int64)

    def row_random(self, seed: int | None) -> RowRandom:
        """The :class:`~counterfair.rng.RowRandom` of these rows for ``seed``."""
        return RowRandom(seed, self.row_positions)

    def take_rows(self, mask: np.ndarray) -> Abduction:
        """The same samples for a subset of the rows (boolean mask or integer positions)."""
        index = np.arange(len(self.data))[np.asarray(mask)]
        return Abduction(
            data=self.data.iloc[index],
            params=self.params,
            latents={k: v[:, index] for k, v in self.latents.items()},
            codes={k: v[index] for k, v in self.codes.items()},
            observed={k: v[..., index] for k, v in self.observed.items()},
            conditioned_on=self.conditioned_on,
            engine=self.engine,
            positions=self.row_positions[index],
            holes={k: v[index] for k, v in self.holes.items()},
        )

    def without_holes(self, what: str) -> Abduction:
        """This abduction, or a DataError when its rows have missing values: ``what``
        (a check that compares the rows' values with replications) needs every value."""
        if self.holes:
            raise errors.DataError(
                f"{what} compares every row's values with replications; these rows have "
                f"missing values in {sorted(self.holes)} (fitted with missing='model'), so it "
                "is not run on them: check a fit of complete rows"
            )
        return self

    def factual_values(self) -> dict[str, np.ndarray]:
        """The observed nodes' factual values, each ``(1, N)`` or ``(S, N)`` (a node with
        missing values, :attr:`holes`): what a world starts from."""
        return {k: v if v.ndim == 2 else v[None, :] for k, v in self.observed.items()}

    def noise(self, scm: SCM, nodes: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """Additive noise of Normal nodes: ``x - mu(parents)`` per sample, shape ``(S, N)``.

        This is exact abduction of the noise (Kusner et al.'s level 3): given the
        parameters and latents of a sample, the noise is determined by the data.

        Parameters
        ----------
        scm : SCM
            The model the abduction belongs to.
        nodes : sequence of str, optional
            Normal nodes (default: every Normal node whose value is known).
        """
        wanted = (
            nodes
            if nodes is not None
            else [
                n
                for n in scm.observed
                if scm.equations[n].family.additive_noise and n in self.observed
            ]
        )
        values: dict[str, np.ndarray] = {**self.observed, **self.latents}
        reference = scm.coding == "reference"
        out: dict[str, np.ndarray] = {}
        for node in wanted:
            eq = scm.equations[node]
            if not eq.family.additive_noise:
                raise ValueError(
                    f"node {node!r} is {eq.spec.family}: only Normal nodes have additive noise"
                )
            if node not in self.observed:
                raise ValueError(f"node {node!r} has no observed values in these rows")
            eta = linear_predictor(
                eq,
                self.params,
                values,
                self.codes,
                reference_coding=reference,
                n_rows=len(self.data),
            )
            factual = self.observed[node]
            out[node] = (factual if factual.ndim == 2 else factual[None, :]) - eta
        return out
