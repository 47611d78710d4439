"""What a family's Stan emitter writes, with the common defaults, and the quadrature's codes.

A :class:`StanFamily` is the Stan side of one distribution family of observed nodes
(its distribution, back-end neutral, is a :class:`~counterfair.model.families.base.Family`
of :mod:`counterfair.model.families`): a stateless object, one per family, kept in the
registry of :mod:`counterfair.stan.families`, that writes everything of the Stan
programs that differs by family:

* **data**: the node's column as the Stan data holds it (integers, level codes from 1)
  and back, the extra data it needs (its number of levels) and its data declaration;
* **as a parent**: the Stan expression of its columns in a child's design matrix;
* **parameters**: the declarations, transformed parameters and priors of its own
  parameters (a residual sd, a dispersion, cutpoints);
* **the statement**: its sampling statement with or without a design matrix (a GLM
  function where Stan has one), and for a family that lays out its own coefficients
  (``declares_coefficients``, categorical) their declarations, priors, statement and
  predictors;
* **the quadrature**: its code in the C++ family switch of integrated latents
  (``counterfair/stan/quadrature.hpp``) and its own parameters as that C++ takes them.

The codes of that switch are the constants below, the one place Python reads them
from (the C++ ``switch`` itself keeps its literals).

The defaults fit a count or binary family with one linear predictor and no parameter
of its own (Poisson, Bernoulli); a new family's emitter overrides what differs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from counterfair.model.families import FAMILIES, Family

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation
    from counterfair.model.params import ParamDraws

Index = Callable[[str], str]
"""Maps a parameter or latent name to the Stan expression that reads it (``name[s]``)."""

Width = Callable[[str], "str | None"]
"""Stan number of indicator columns of a parent, None when it enters as one column."""

# ---------------------------------------------------------------------- quadrature codes
POISSON_CODE = 1
"""Quadrature code of a Poisson child (log link)."""
NEGATIVE_BINOMIAL_CODE = 2
"""Quadrature code of a negative binomial child (log link, dispersion ``phi``)."""
BERNOULLI_CODE = 3
"""Quadrature code of a Bernoulli child (logit link)."""
ORDINAL_CODE = 4
"""Quadrature code of an ordinal child (ordered logistic, levels 1..K, K - 1 cutpoints)."""
CATEGORICAL_CODE = 5
"""Quadrature code of a categorical child's first non-reference level."""
CATEGORICAL_MORE = 6
"""The quadrature's code of a categorical child's second and later non-reference levels."""
NORMAL_CODE = 7
"""Quadrature code of a Normal child (two latents per row only: ``eta`` holds ``mu - y``,
``phi`` the sd; :mod:`counterfair.stan.integrated_pairs`)."""

ROW_CODES = (POISSON_CODE, NEGATIVE_BINOMIAL_CODE, BERNOULLI_CODE, ORDINAL_CODE,
             CATEGORICAL_CODE, CATEGORICAL_MORE)
"""The codes the one-latent row functions take (:mod:`counterfair.stan.native`)."""

ONE_COLUMN_CODES = (POISSON_CODE, NEGATIVE_BINOMIAL_CODE, BERNOULLI_CODE, ORDINAL_CODE)
"""Codes of the families with one quadrature column (what two latents per row cover,
besides a Normal child)."""


def append_rows(pieces: list[str]) -> str:
    """Stack Stan coefficient blocks with ``append_row`` (in column order)."""
    out = pieces[-1]
    for piece in reversed(pieces[:-1]):
        out = f"append_row({piece}, {out})"
    return out


class StanFamily:
    """The Stan emitter of one distribution family of observed nodes.

    Attributes
    ----------
    name : str
        The family's name (``spec.family``; the key of both registries).
    glm, plain : str
        Stan sampling functions with and without a design matrix.
    quadrature_code : int or None
        The family's code in the C++ quadrature of integrated latents (the constants
        of this module), None where it does not cover the family.
    """

    name: ClassVar[str]
    glm: ClassVar[str] = ""
    plain: ClassVar[str] = ""
    quadrature_code: ClassVar[int | None] = None

    @property
    def family(self) -> Family:
        """The family's distribution (back-end neutral)."""
        return FAMILIES[self.name]

    # ------------------------------------------------------------------ data
    def stan_values(self, eq: NodeEquation, values: np.ndarray) -> np.ndarray:
        """The column as the Stan data expects it (integers by default)."""
        return np.rint(values).astype(np.int64)

    def values_from_stan(self, stan_column: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`stan_values`: the column's values (level codes from 0)."""
        return np.asarray(stan_column, dtype=float)

    def stan_data(self, eq: NodeEquation) -> dict[str, object]:
        """Extra Stan data the node needs besides its column (e.g. its number of levels)."""
        return {}

    def data_declarations(self, eq: NodeEquation) -> list[str]:
        """Lines of the data block declaring the node (without indentation)."""
        raise NotImplementedError

    def stan_functions(self) -> list[str]:
        """Stan function definitions the family's statements use (indented by 2)."""
        return []

    # ------------------------------------------------------------------ as a parent
    def design_column(self, eq: NodeEquation) -> str:
        """Stan expression of the node's columns in a child's design matrix."""
        return f"to_matrix(to_vector({eq.node}))"

    def design_width(self, eq: NodeEquation) -> str:
        """Stan expression of the number of those columns."""
        return "1"

    # ------------------------------------------------------------------ parameters
    def parameter_declarations(self, eq: NodeEquation, array_prefix: str) -> list[tuple[str, str]]:
        """(declaration, comment) of the family's own parameters.

        With ``array_prefix`` (``"array[S] "``) they are data of the abduction
        program: one value per parameter set.
        """
        return []

    def transformed_parameters(self, eq: NodeEquation) -> list[tuple[str, str]]:
        """(definition, comment) lines of the fit program's transformed parameters."""
        return []

    def priors(self, eq: NodeEquation) -> list[str]:
        """Prior statements of the family's own parameters (fit program)."""
        return []

    # ------------------------------------------------------------------ the statement
    def statement_arguments(self, eq: NodeEquation, index: Index) -> list[str]:
        """Trailing arguments of the sampling statement (a sd, a dispersion, cutpoints)."""
        return []

    def sampling_statement(
        self,
        eq: NodeEquation,
        design: str | None,
        alpha: str,
        alpha_is_vector: bool,
        beta: str | None,
        arguments: list[str],
        *,
        target: str | None = None,
        size: str = "N",
    ) -> str:
        """``node ~ <GLM>(X, alpha, beta, ...);``, or the plain function without columns.

        Parameters
        ----------
        eq : NodeEquation
            The node's equation.
        design : str or None
            Name of its design matrix (None without columns).
        alpha : str
            The intercept expression (a real, or a vector when ``alpha_is_vector``).
        alpha_is_vector : bool
            Whether ``alpha`` has per-row terms (latents).
        beta : str or None
            The stacked coefficient vector (None without columns).
        arguments : list of str
            Trailing arguments (:meth:`statement_arguments`, or the fit program's own).
        target : str, optional
            What is sampled (default the node's column; ``node[obs_node]`` for the rows
            that hold it, or ``node_full`` with missing values filled in).
        size : str
            The number of rows the statement covers (Stan), for a family that repeats a
            scalar predictor.
        """
        lhs = eq.node if target is None else target
        if beta is not None:
            return f"{lhs} ~ {self.glm}({', '.join([str(design), alpha, beta, *arguments])});"
        return f"{lhs} ~ {self.plain}({', '.join([alpha, *arguments])});"

    # ------------------------------------------------------------------ own coefficients
    def coefficient_declarations(
        self, eq: NodeEquation, array_prefix: str, scaled: str, width: Width
    ) -> list[tuple[str, str]]:
        """(declaration, comment) of every coefficient (``declares_coefficients`` only).

        ``scaled`` is the ``<multiplier=...>`` of the fit program (empty for
        data); ``width(parent)`` the Stan number of indicator columns of a
        parent, None for a parent entering as one column.
        """
        raise NotImplementedError

    def coefficient_priors(self, eq: NodeEquation) -> list[str]:
        """Prior statements of every coefficient (``declares_coefficients`` only)."""
        raise NotImplementedError

    def statement(
        self, eq: NodeEquation, design: str | None, index: Index, *, target: str | None = None
    ) -> str:
        """The whole sampling statement, latents included (``declares_coefficients`` only);
        ``target`` as in :meth:`sampling_statement`."""
        raise NotImplementedError

    def level_predictors(
        self, eq: NodeEquation, design: str | None, index: Index, size: str
    ) -> str:
        """The ``size x levels`` linear predictors of every level, one matrix expression
        (``declares_coefficients`` only)."""
        raise NotImplementedError

    def integrated_predictor(self, eq: NodeEquation, design: str | None) -> str:
        """The linear predictors without the latent terms, one column per quadrature column,
        for a program that integrates the latent out (``declares_coefficients`` only)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the quadrature
    def quadrature_parameters(
        self, eq: NodeEquation, params: ParamDraws
    ) -> tuple[np.ndarray, np.ndarray]:
        """The family's own parameters as the C++ quadrature takes them (``quadrature_code``).

        A dispersion per set, shape ``(S,)`` (1 where the family has none), and the
        cutpoints per set, shape ``(S, m)`` (``m = 0`` where it has none); what the fit
        program passes as ``phi`` and ``cuts`` (:mod:`counterfair.stan.integrated`).
        """
        return np.ones(params.n), np.zeros((params.n, 0))


def count_data_declaration(node: str) -> list[str]:
    """Data block line of a count node."""
    return [f"array[N] int<lower=0> {node};  // observed {node} (counts)"]


class CountStan(StanFamily):
    """What the count families' emitters share (Poisson, negative binomial): count data."""

    def data_declarations(self, eq: NodeEquation) -> list[str]:
        return count_data_declaration(eq.node)
