"""The categorical family's Stan: its own coefficient layout and ``categorical_logit_glm``.

``categorical_logit_glm(x, append_row(0, alpha), with_reference(beta))`` with the
latents as extra columns of ``x`` (``with_reference`` prepends the reference level's
zero column; it joins the program's functions block). Every coefficient is a vector
over the non-reference levels (a matrix for a parent entering as indicator columns);
the layout is :mod:`counterfair.model.families.categorical`'s. In the quadrature of
integrated latents the node takes one column per non-reference level (code 5, then 6s).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from counterfair.stan.families.base import CATEGORICAL_CODE, Index, Width, append_rows
from counterfair.stan.families.levels import LevelStan

if TYPE_CHECKING:
    from counterfair.model.equation import NodeEquation

WITH_REFERENCE_FUNCTION = """\
  // Coefficients of every level of a categorical node from those of its non-reference
  // levels: a zero column (the reference level, level 1) in front.
  matrix with_reference(matrix beta) {
    return append_col(rep_vector(0.0, rows(beta)), beta);
  }"""


class CategoricalStan(LevelStan):
    """Categorical nodes: their coefficients' declarations, priors and statements."""

    name = "categorical"
    glm = "categorical_logit_glm"
    plain = "categorical_logit"
    quadrature_code = CATEGORICAL_CODE

    def stan_functions(self) -> list[str]:
        return [WITH_REFERENCE_FUNCTION]

    def coefficient_declarations(
        self, eq: NodeEquation, array_prefix: str, scaled: str, width: Width
    ) -> list[tuple[str, str]]:
        node, k = eq.node, f"{eq.levels} - 1"
        out = []
        if eq.intercept:
            out.append(
                (
                    f"{array_prefix}vector{scaled}[{k}] {eq.intercept}",
                    f"intercept of each non-reference level of {node}",
                )
            )
        terms = [(t.parent, t.param) for t in eq.protected]
        terms += [(t.parent, t.param) for t in eq.observed]
        for parent, param in terms:
            rows = width(parent)
            kind = f"row_vector{scaled}[{k}]" if rows is None else f"matrix{scaled}[{rows}, {k}]"
            out.append(
                (f"{array_prefix}{kind} {param}", f"effect of {parent} on each level of {node}")
            )
        for lterm in eq.latent:
            out.append(
                (
                    f"{array_prefix}row_vector{scaled}[{k}] {lterm.param}",
                    f"loading of {lterm.parent} on each non-reference level of {node}",
                )
            )
            if lterm.by_param is not None and eq.loading_by is not None:
                by = eq.loading_by
                out.append(
                    (
                        f"{array_prefix}matrix{scaled}[{by.levels} - 1, {k}] {lterm.by_param}",
                        f"extra loading of {lterm.parent} on each non-reference level of "
                        f"{node}, per non-reference level of {by.name}",
                    )
                )
        return out

    def coefficient_priors(self, eq: NodeEquation) -> list[str]:
        spec = eq.spec
        out = [f"{eq.intercept} ~ {spec.prior_intercept.stan()};"] if eq.intercept else []
        matrices = [t.param for t in eq.protected if not t.continuous]
        matrices += [t.param for t in eq.observed if t.levels is not None]
        rows = [t.param for t in eq.protected if t.continuous]
        rows += [t.param for t in eq.observed if t.levels is None]
        rows += [t.param for t in eq.latent]
        matrices += [t.by_param for t in eq.latent if t.by_param is not None]
        out += [f"to_vector({param}) ~ {spec.prior_weights.stan()};" for param in matrices]
        out += [f"{param} ~ {spec.prior_weights.stan()};" for param in rows]
        return out

    def _glm_parts(
        self, eq: NodeEquation, design: str | None, index: Index
    ) -> tuple[str | None, str, str | None]:
        """The columns (the design and the latents), the levels' intercepts and the
        coefficient matrix (reference level not included) of the node's GLM."""
        columns = design
        for lterm in eq.latent:
            latent = index(lterm.parent)
            columns = f"append_col({columns}, {latent})" if columns else f"to_matrix({latent})"
            if lterm.by_param is not None:  # the latent times each non-reference level's indicator
                columns = f"append_col({columns}, diag_pre_multiply({latent}, Lby_{eq.node}))"
        alpha = (
            f"append_row(0.0, {index(eq.intercept)})"
            if eq.intercept
            else f"rep_vector(0.0, {eq.levels})"
        )
        pieces = [index(t.param) for t in eq.protected]
        pieces += [index(t.param) for t in eq.observed]
        pieces += [index(t.param) for t in eq.bending]  # the bending columns F_<node>
        for lterm in eq.latent:
            pieces.append(index(lterm.param))
            if lterm.by_param is not None:
                pieces.append(index(lterm.by_param))
        if columns is None:
            return None, alpha, None
        rows = append_rows(pieces) if len(pieces) > 1 else f"to_matrix({pieces[0]})"
        return columns, alpha, rows

    def statement(
        self, eq: NodeEquation, design: str | None, index: Index, *, target: str | None = None
    ) -> str:
        lhs = eq.node if target is None else target
        columns, alpha, rows = self._glm_parts(eq, design, index)
        if columns is None:
            return f"{lhs} ~ {self.plain}({alpha});"
        return f"{lhs} ~ {self.glm}({columns}, {alpha}, with_reference({rows}));"

    def level_predictors(
        self, eq: NodeEquation, design: str | None, index: Index, size: str
    ) -> str:
        """The ``size x levels`` linear predictors of the GLM (the reference level's column
        0), as one matrix expression: a summed parent's rows (``missing="model"``) take
        them once per level of the parent, then their log softmax per row."""
        columns, alpha, rows = self._glm_parts(eq, design, index)
        if columns is None:
            return f"rep_matrix({alpha}', {size})"
        return f"rep_matrix({alpha}', {size}) + {columns} * with_reference({rows})"

    def integrated_predictor(self, eq: NodeEquation, design: str | None) -> str:
        """The ``N x (K-1)`` linear predictors of the non-reference levels without the
        latent terms (the fit program with its latent integrated out,
        :mod:`counterfair.stan.integrated`)."""
        alpha = (
            f"rep_matrix({eq.intercept}', N)"
            if eq.intercept
            else f"rep_matrix(0.0, N, {eq.levels} - 1)"
        )
        pieces = [t.param for t in eq.protected]
        pieces += [t.param for t in eq.observed]
        pieces += [t.param for t in eq.bending]
        if design is None or not pieces:
            return alpha
        rows = append_rows(pieces) if len(pieces) > 1 else f"to_matrix({pieces[0]})"
        return f"{alpha} + {design} * {rows}"
