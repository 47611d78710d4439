"""Compile an SCM to Stan programs, and an SCM plus a data frame to Stan data.

Two programs are generated from every SCM:

* the **fit program** samples the structural parameters and every row's latents
  given the data (abduction on the training rows);
* the **abduction program** takes ``S`` sets of parameter values as data and
  samples the latents of new rows given the observed nodes the user chooses to
  condition on (``observe_<node>`` flags), one block of latents per parameter set.

Both are data-independent: sizes and numbers of levels come from the data block,
so one compiled binary serves any number of rows. Categorical parents enter a
design matrix (reference or one-hot indicators) built once in ``transformed
data``, so every observed node is a single call to Stan's GLM functions
(``normal_id_glm``, ``poisson_log_glm``, ``bernoulli_logit_glm``,
``neg_binomial_2_log_glm``, ``ordered_logistic_glm``, ``categorical_logit_glm``).
What differs between
families (data declarations, their own parameters and priors, the sampling
statement, how a node enters its children's design matrices) is asked of the
node's family (:mod:`counterfair.model.families`); this module lays out the program. In the fit
program, latents with Normal children are anchored on them (see
:mod:`counterfair.stan.anchoring`): those children enter with the latent
integrated out, and the latent's conditional mean becomes extra design columns of
its other children. In the abduction program the latent terms sit in the GLM
intercept vector. Constants are written as real literals (the GLM
functions of the Stan bundled with httpstan 4.13 fail on an integer sigma).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING

from counterfair import errors
from counterfair._version import __version__
from counterfair.model.equation import NodeEquation
from counterfair.model.families import family_of
from counterfair.model.specs import Latent, Observed, Protected, stan_real
from counterfair.stan import holes as holes_code
from counterfair.stan import integrated as integrated_latents
from counterfair.stan import integrated_pairs
from counterfair.stan.anchoring import (
    Predictor,
    anchors_of,
    bending_block,
    bending_coefficients,
    conditional_mean_predictor,
    fit_predictor,
    join_terms,
    latent_term,
    loading_matrix,
    precision_lines,
    precision_name,
    vector_anchors_of,
)
from counterfair.stan.families import stan_family
from counterfair.stan.families.base import append_rows
from counterfair.stan.families.categorical import CategoricalStan

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

_INDENT = "  "

_INDICATORS_FUNCTION = """\
functions {
  // Indicator (dummy) columns of a categorical variable with levels 1..n_levels.
  // drop_reference = 1: one column per non-reference level (level 1 is the reference);
  // drop_reference = 0: one column per level (one-hot coding).
  matrix indicators(array[] int level, int n_levels, int drop_reference) {
    int n = size(level);
    matrix[n, n_levels - drop_reference] x = rep_matrix(0.0, n, n_levels - drop_reference);
    for (i in 1:n) {
      int column = level[i] - drop_reference;
      if (column >= 1) {
        x[i, column] = 1.0;
      }
    }
    return x;
  }
}"""


def _functions_block(scm: SCM, integrated: bool = False, pairs: bool = False) -> str:
    """The functions block: ``indicators``, the functions the SCM's families need, and the
    integrated latents' C++ functions (declared here, defined in ``integrated.hpp``)."""
    extra: list[str] = [integrated_latents.FUNCTIONS] if integrated else []
    if pairs:
        extra.append(integrated_pairs.FUNCTIONS_PAIR)
    for node in scm.observed:
        for function in stan_family(scm.equations[node]).stan_functions():
            if function not in extra:
                extra.append(function)
        for term in scm.equations[node].bending:
            for function in term.stan_functions():
                if function not in extra:
                    extra.append(function)
    if not extra:
        return _INDICATORS_FUNCTION
    body = _INDICATORS_FUNCTION.rstrip("}").rstrip("\n")
    return "\n".join([body, *extra, "}"])


def _drop(scm: SCM) -> int:
    return 1 if scm.coding == "reference" else 0


def _levels_size(scm: SCM, protected: str) -> str:
    return f"n_levels_{protected} - 1" if scm.coding == "reference" else f"n_levels_{protected}"


def _level_words(scm: SCM) -> str:
    return "per non-reference level" if scm.coding == "reference" else "per level (one-hot)"


def _family_words(eq: NodeEquation) -> str:
    return f"{eq.spec.family}, {eq.spec.link} link"


def _header(scm: SCM, purpose: str) -> list[str]:
    def describe(node: str) -> str:
        spec = scm.specs[node]
        if node in scm.protected:
            kind = ", continuous" if _continuous(scm, node) else ""
            return f"{node} (protected{kind})"
        if isinstance(spec, Latent):
            return f"{node} (latent)"
        eq = scm.equations[node]
        parents = ", ".join(scm.parents(node)) or "no parents"
        return f"{node} ~ {_family_words(eq)} | {parents}"

    coding = (
        "reference coding (level 1 is the reference level)"
        if scm.coding == "reference"
        else "one-hot coding (one effect per level)"
    )
    lines = [
        f"// Generated by counterfair {__version__}: {purpose}",
        "// Do not edit: regenerate with SCM.stan_code() / SCM.abduction_code().",
        "// Nodes:",
        *(f"//   {describe(node)}" for node in scm.nodes),
        f"// Protected parents use {coding}.",
    ]
    if any(_continuous(scm, node) for node in scm.protected):
        lines.append("// Continuous protected parents enter as their value, with one weight.")
    if any(t.levels is not None for eq in scm.equations.values() for t in eq.observed):
        lines.append(
            "// Level-valued observed parents (ordinal, categorical) enter as indicators of "
            "their levels other than level 1."
        )
    if scm.latents:
        lines.append(
            "// The first child of each latent has a positive loading (sign identification)."
        )
    for eq in scm.equations.values():
        if eq.bending:
            labels = ", ".join(t.term.label for t in eq.bending)
            lines.append(
                f"// {eq.node} also has bending terms {labels}: columns F_{eq.node} (data, "
                "computed by counterfair at the training knots)."
            )
        if eq.loading_by is not None:
            lines.append(
                f"// The loadings of {eq.node} differ by level of {eq.loading_by.name} "
                "(the reference level's loading plus dlambda)."
            )
    return lines


def _data_block(scm: SCM) -> list[str]:
    lines = ["data {", f"{_INDENT}int<lower=1> N;  // number of individuals (rows)"]
    for node in scm.protected:
        if _continuous(scm, node):
            lines.append(f"{_INDENT}vector[N] {node};  // value of continuous protected {node}")
            continue
        lines += [
            f"{_INDENT}int<lower=2> n_levels_{node};  // number of levels of protected {node}",
            f"{_INDENT}array[N] int<lower=1, upper=n_levels_{node}> {node};"
            f"  // level of {node} per row",
        ]
    for node in scm.observed:
        eq = scm.equations[node]
        lines += [f"{_INDENT}{line}" for line in stan_family(eq).data_declarations(eq)]
    columns: list[str] = []
    for node in scm.observed:
        for term in scm.equations[node].bending:
            column = getattr(term.term, "column", None)
            if column is not None and column not in columns:
                columns.append(column)
                lines.append(
                    f"{_INDENT}int<lower=2> n_groups_{column};  // number of groups of the "
                    f"grouping column {column} (seen in training)"
                )
    for node in scm.observed:
        eq = scm.equations[node]
        if not eq.bending:
            continue
        labels = ", ".join(t.term.label for t in eq.bending)
        lines += [
            f"{_INDENT}int<lower=1> P_{node};  // number of bending columns of {node}",
            f"{_INDENT}matrix[N, P_{node}] F_{node};  // bending columns of {node}: {labels}",
        ]
    return lines


def _parent_family_spec(scm: SCM, parent: str) -> Observed:
    spec = scm.specs[parent]
    assert isinstance(spec, Observed)
    return spec


def _continuous(scm: SCM, node: str) -> bool:
    """Whether ``node`` is a continuous protected attribute."""
    spec = scm.specs[node]
    return isinstance(spec, Protected) and spec.continuous


def _bending_node(scm: SCM, block: str) -> str | None:
    """The node whose bending columns a design block is (``F_<node>``), else None."""
    if block.startswith("F_") and block not in scm.specs:
        node = block[2:]
        if node in scm.equations and scm.equations[node].bending:
            return node
    return None


def _vector_parent(scm: SCM, parent: str) -> bool:
    """Whether a data parent's coefficient is a vector (categorical or level-valued parent)."""
    if _bending_node(scm, parent) is not None:
        return True
    if parent in scm.protected:
        return not _continuous(scm, parent)
    spec = _parent_family_spec(scm, parent)
    return family_of(spec).parent_levels(spec) is not None


def _block_width(scm: SCM, parent: str) -> str:
    node = _bending_node(scm, parent)
    if node is not None:
        return f"P_{node}"
    if parent in scm.protected:
        return "1" if _continuous(scm, parent) else f"({_levels_size(scm, parent)})"
    return stan_family(scm.equations[parent]).design_width(scm.equations[parent])


def _column_piece(scm: SCM, parent: str) -> str:
    if _bending_node(scm, parent) is not None:
        return parent
    if _continuous(scm, parent):
        return f"to_matrix({parent})"
    if parent in scm.protected:
        return f"indicators({parent}, n_levels_{parent}, {_drop(scm)})"
    return stan_family(scm.equations[parent]).design_column(scm.equations[parent])


def own_columns(eq: NodeEquation) -> tuple[str, ...]:
    """The data parents of an equation, in design-matrix column order (then its bending
    columns ``F_<node>``)."""
    blocks = tuple(t.parent for t in eq.protected) + tuple(t.parent for t in eq.observed)
    return blocks + ((bending_block(eq),) if eq.bending else ())


def design_names(columns: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """Name of the design matrix of each equation, given its column blocks (data parents).

    Equations with the same column blocks share one matrix, named after the
    first of them (``X_<node>``). Equations without columns have no matrix.
    """
    names: dict[str, str] = {}
    seen: dict[tuple[str, ...], str] = {}
    for node, blocks in columns.items():
        if blocks:
            names[node] = seen.setdefault(blocks, f"X_{node}")
    return names


def _term_data_lines(scm: SCM, equations: list[NodeEquation], frequencies: bool) -> list[str]:
    """Transformed data of the terms: HSGP frequencies, indicators of ``loading_by`` levels."""
    lines = []
    for eq in equations:
        if eq.loading_by is not None:
            by = eq.loading_by
            lines.append(
                f"{_INDENT}matrix[N, {by.levels} - 1] {loading_matrix(eq)} = "
                f"indicators({by.name}, {by.levels}, 1);  // levels of {by.name} other than "
                f"the reference, for the loadings of {eq.node}"
            )
        if not frequencies:
            continue
        for term in eq.bending:
            lines += [
                f"{_INDENT}{definition};  // {comment}"
                for definition, comment in term.stan_transformed_data()
            ]
    return lines


def _transformed_data_block(
    scm: SCM,
    columns: dict[str, tuple[str, ...]],
    equations: list[NodeEquation] | None = None,
    *,
    frequencies: bool = True,
) -> list[str]:
    names = design_names(columns)
    extra = _term_data_lines(scm, equations or [], frequencies)
    if not names and not extra:
        return []
    lines = ["transformed data {", *extra]
    for node, blocks in columns.items():
        if names.get(node) != f"X_{node}":
            continue
        users = [other for other, name in names.items() if name == f"X_{node}"]
        pieces = [_column_piece(scm, p) for p in blocks]
        expression = pieces[-1]
        for piece in reversed(pieces[:-1]):
            expression = f"append_col({piece}, {expression})"
        width = " + ".join(_block_width(scm, p) for p in blocks)
        lines += [
            f"{_INDENT}// design matrix of {', '.join(users)}: columns for {', '.join(blocks)}",
            f"{_INDENT}matrix[N, {width}] X_{node} = {expression};",
        ]
    lines.append("}")
    return lines


def _indicator_rows(scm: SCM, parent: str) -> str | None:
    """Number of indicator columns of a data parent (Stan), None for a one-column parent."""
    if not _vector_parent(scm, parent):
        return None
    if parent in scm.protected:
        return _levels_size(scm, parent)
    return f"{scm.equations[parent].levels} - 1"


def _parameter_declarations(
    scm: SCM, eq: NodeEquation, array_prefix: str = ""
) -> list[tuple[str, str]]:
    """(declaration, comment) pairs for an equation's parameters.

    With ``array_prefix`` (``"array[S] "``) the declarations become data arrays
    of parameter values for the abduction program; constraints are kept for
    sigma only (values come from a posterior that already satisfies them).
    """
    node = eq.node
    as_data = bool(array_prefix)
    # in the fit program, coefficients are sampled on the scale scale_<node> (data), a rough
    # posterior sd, so that the sampler's starting (unit) metric already fits them
    scaled = "" if as_data else f"<multiplier=scale_{node}>"
    if eq.family.declares_coefficients:
        coefficients = stan_family(eq).coefficient_declarations(
            eq, array_prefix, scaled, lambda parent: _indicator_rows(scm, parent)
        )
        for bending in eq.bending:
            if as_data:
                coefficients.append(
                    (bending.stan_data_declaration(), f"weights of {bending.term.label}")
                )
            else:
                coefficients += bending.stan_parameters(eq.spec.prior_weights, scaled)
        return coefficients + stan_family(eq).parameter_declarations(eq, array_prefix)
    out: list[tuple[str, str]] = []
    if eq.intercept:
        out.append((f"{array_prefix}real{scaled} {eq.intercept}", f"intercept of {node}"))
    for term in eq.protected:
        if term.continuous:
            out.append(
                (f"{array_prefix}real{scaled} {term.param}", f"weight of {term.parent} on {node}")
            )
            continue
        out.append(
            (
                f"{array_prefix}vector{scaled}[{_levels_size(scm, term.parent)}] {term.param}",
                f"effect of {term.parent} on {node}, {_level_words(scm)}",
            )
        )
    for oterm in eq.observed:
        if oterm.levels is not None:
            size = f"{scm.equations[oterm.parent].levels} - 1"
            out.append(
                (
                    f"{array_prefix}vector{scaled}[{size}] {oterm.param}",
                    f"effect of {oterm.parent} on {node}, per level above the lowest",
                )
            )
        else:
            out.append(
                (f"{array_prefix}real{scaled} {oterm.param}", f"weight of {oterm.parent} on {node}")
            )
    for lterm in eq.latent:
        if as_data:
            constraint = ""
        else:
            constraint = "<lower=0>" if lterm.positive else scaled
        note = " (positive: fixes the sign of the latent)" if lterm.positive else ""
        if lterm.by_param is not None:
            note += " for the reference level"
        out.append(
            (
                f"{array_prefix}real{constraint} {lterm.param}",
                f"loading of {lterm.parent} on {node}{note}",
            )
        )
        if lterm.by_param is not None and eq.loading_by is not None:
            by = eq.loading_by
            out.append(
                (
                    f"{array_prefix}vector{'' if as_data else scaled}[{by.levels} - 1] "
                    f"{lterm.by_param}",
                    f"extra loading of {lterm.parent} on {node} per non-reference level of "
                    f"{by.name}",
                )
            )
    for bending in eq.bending:
        if as_data:
            out.append((bending.stan_data_declaration(), f"weights of {bending.term.label}"))
            out += bending.stan_data_extra()
        else:
            out += bending.stan_parameters(eq.spec.prior_weights, scaled)
    out += stan_family(eq).parameter_declarations(eq, array_prefix)
    return out


def _sampling_statement(
    eq: NodeEquation,
    design: str | None,
    alpha: str,
    alpha_is_vector: bool,
    beta_pieces: list[str],
    arguments: list[str],
) -> str:
    """The family's sampling statement: a GLM with columns, the plain function without.

    ``beta_pieces`` are the coefficient blocks in column order (stacked with
    ``append_row``); ``arguments`` the family's trailing arguments (a Normal
    node's sd, a dispersion, cutpoints).
    """
    beta = append_rows(beta_pieces) if beta_pieces else None
    return stan_family(eq).sampling_statement(eq, design, alpha, alpha_is_vector, beta, arguments)


def _glm_statement(
    eq: NodeEquation, design: str | None, index: Callable[[str], str], indent: str
) -> list[str]:
    """The sampling statement of one observed node, latent terms in the GLM intercept.

    ``index`` maps a parameter or latent name to the expression that reads it
    (``name[s]`` in the abduction program).
    """
    if eq.family.declares_coefficients:
        return [indent + stan_family(eq).statement(eq, design, index)]
    alpha_terms = [index(eq.intercept)] if eq.intercept else []
    alpha_terms += [latent_term(eq, t, index) for t in eq.latent]
    alpha = " + ".join(alpha_terms) if alpha_terms else "0.0"
    arguments = stan_family(eq).statement_arguments(eq, index)
    pieces = [f"[{index(t.param)}]'" if t.continuous else index(t.param) for t in eq.protected]
    pieces += [
        index(t.param) if t.levels is not None else f"[{index(t.param)}]'" for t in eq.observed
    ]
    if eq.bending:
        pieces.append(bending_coefficients(eq, index))
    statement = _sampling_statement(eq, design, alpha, bool(eq.latent), pieces, arguments)
    return [indent + statement]


def _latent_prior(scm: SCM, latent: str, target: str) -> str:
    spec = scm.specs[latent]
    assert isinstance(spec, Latent)
    if spec.loc == 0.0 and spec.scale == 1.0:
        return f"{target} ~ std_normal();"
    return f"{target} ~ normal({stan_real(spec.loc)}, {stan_real(spec.scale)});"


def _fit_statement(
    scm: SCM,
    eq: NodeEquation,
    predictor: Predictor,
    design: str | None,
    hole: str | None = None,
    *,
    rows: str | None = None,
    target: str | None = None,
    size: str | None = None,
    design_rows: bool = True,
) -> str:
    """The sampling statement of one observed node in the fit program.

    ``hole`` (``missing="model"``, :mod:`counterfair.stan.holes`): ``"omit"`` samples
    the rows ``obs_<node>`` only, ``"sample"`` samples the node with its missing values
    filled in. Or by hand: ``rows`` (a Stan multi-index the per-row terms are read at),
    ``target`` (what is sampled), ``size`` (the number of rows, Stan) and
    ``design_rows`` (False: ``design`` is already those rows).
    """
    if hole == "omit":
        rows, target, size = f"obs_{eq.node}", f"{eq.node}[obs_{eq.node}]", f"N_obs_{eq.node}"
    elif hole == "sample":
        target = holes_code.filled(eq.node)
    elif hole == "sample-subset":  # a sampled child of a summed node: the rows that hold it
        filled = holes_code.filled(eq.node)
        rows, target, size = f"obs_{eq.node}", f"{filled}[obs_{eq.node}]", f"N_obs_{eq.node}"
    if rows is not None and design is not None and design_rows:
        design = f"{design}[{rows}]"
    if eq.family.declares_coefficients:  # its latents are never anchored: plain terms
        if rows is None:
            return stan_family(eq).statement(eq, design, lambda name: name, target=target)
        if eq.loading_by is not None:
            raise ValueError(
                f"node {eq.node!r}: missing values of a categorical node whose loadings "
                "differ by group (loading_by) are not modelled"
            )
        latents = {t.parent for t in eq.latent}
        return stan_family(eq).statement(
            eq, design, lambda name: f"{name}[{rows}]" if name in latents else name,
            target=target,
        )
    scalar = join_terms(predictor.intercept) if predictor.intercept else ""
    alpha = " + ".join(([scalar] if scalar else []) + predictor.vectors) or "0.0"
    if rows is not None and predictor.vectors:
        alpha = f"({alpha})[{rows}]"
    pieces = []
    for parent, terms in predictor.blocks.items():
        coefficient = join_terms(terms)
        pieces.append(coefficient if _vector_parent(scm, parent) else f"[{coefficient}]'")
    arguments = (
        [predictor.sd]
        if predictor.sd is not None
        else stan_family(eq).statement_arguments(eq, lambda name: name)
    )
    beta = append_rows(pieces) if pieces else None
    return stan_family(eq).sampling_statement(
        eq, design, alpha, bool(predictor.vectors), beta, arguments,
        target=target, size=size or "N",
    )


def _log_density(statement: str, continuous: bool) -> str:
    """``y ~ f(args);`` as the expression ``f_lpmf(y | args)`` (``_lpdf`` if continuous)."""
    lhs, rest = statement.rstrip(";").split(" ~ ", 1)
    function, arguments = rest.split("(", 1)
    suffix = "lpdf" if continuous else "lpmf"
    return f"{function}_{suffix}({lhs} | {arguments[:-1]})"


_ROW_DENSITIES = ("normal", "bernoulli", "poisson")
"""Families whose log density per row the summed loops write as vector arithmetic; the
others are evaluated one row at a time by their GLM function."""


def _eta(scm: SCM, predictor: Predictor, design: str | None, rows: str, size: str) -> str:
    """An equation's linear predictor at ``rows`` (a multi-index; ``design`` already holds
    those rows), latent terms included, as a vector expression of length ``size``."""
    scalar = join_terms(predictor.intercept) if predictor.intercept else "0.0"
    if predictor.blocks and design is not None:
        pieces = []
        for parent, terms in predictor.blocks.items():
            coefficient = join_terms(terms)
            pieces.append(coefficient if _vector_parent(scm, parent) else f"[{coefficient}]'")
        eta = f"{scalar} + {design} * {append_rows(pieces)}"
    else:
        eta = f"rep_vector({scalar}, {size})"
    if predictor.vectors:
        eta += f" + ({' + '.join(predictor.vectors)})[{rows}]"
    return eta


def _row_density(eq: NodeEquation, predictor: Predictor, y: str, eta: str) -> str:
    """The log density of each row, as a vector (a family of :data:`_ROW_DENSITIES`)."""
    family = eq.spec.family
    if family == "normal":
        sd = predictor.sd if predictor.sd is not None else stan_real(1.0)
        return (
            f"-0.5 * square(({y} - ({eta})) / {sd}) - log({sd}) - 0.918938533204672741"
        )
    if family == "bernoulli":
        return f"to_vector({y}) .* ({eta}) - log1p_exp({eta})"
    return f"to_vector({y}) .* ({eta}) - exp({eta}) - lgamma(to_vector({y}) + 1)"


def _at_rows(latents: set[str], rows: str, name: str) -> str:
    """``name`` read at ``rows`` when it is one of ``latents`` (a vector over all rows)."""
    return f"{name}[{rows}]" if name in latents else name


def _summed_lines(
    scm: SCM,
    node: str,
    predictors: dict[str, Predictor],
    designs: dict[str, str],
    columns: dict[str, tuple[str, ...]],
    holes: dict[str, str],
    indent: str,
) -> list[str]:
    """``lp``, the ``N_mis_<node> x levels`` log densities of the rows that miss the summed
    ``node`` at each of its levels: the node's own and its children's (the caller adds
    ``log_sum_exp`` of each row to the target, or draws the level in the generated
    quantities). Normal, Bernoulli and Poisson terms are vector arithmetic over the rows;
    an ordinal or categorical child's linear predictors are one vector or matrix, then
    its density per row; a node's own categorical or count term with a loading by group
    takes one GLM call per row and level."""
    eq = scm.equations[node]
    binary = eq.spec.family == "bernoulli"
    count = holes_code.summed_count(scm, node)  # over 0..K_node: level k is the count k - 1
    levels = "2" if binary else f"(K_{node} + 1)" if count else str(eq.levels)
    size = f"N_mis_{node}"
    rows = f"mis_{node}"
    inner = indent + _INDENT
    lines = [f"{indent}matrix[{size}, {levels}] lp = rep_matrix(0.0, {size}, {levels});"]
    children = holes_code.summed_children(scm, node)

    def local_design(user: str, name: str) -> str | None:
        """A copy of ``user``'s design at the rows, sampled parents filled in."""
        design = designs.get(user)
        if design is None:
            return None
        blocks = columns[user]
        width = " + ".join(_block_width(scm, b) for b in blocks)
        lines.append(f"{indent}matrix[{size}, {width}] {name} = {design}[{rows}];")
        for block in blocks:
            if holes.get(block) == "sample":
                before = blocks[: blocks.index(block)]
                column = " + ".join(["1", *(_block_width(scm, b) for b in before)])
                lines.append(
                    f"{indent}{name}[:, {column}] = {holes_code.filled(block)}[{rows}];"
                )
        return name

    def set_level(name: str, user: str, at: str) -> str:
        """The statement putting the node at level ``k`` in ``user``'s design ``name``."""
        blocks = columns[user]
        before = blocks[: blocks.index(node)]
        first = " + ".join(["1", *(_block_width(scm, b) for b in before)])
        if binary or count:
            return f"{at}{name}[:, {first}] = rep_vector(k - 1, {size});"
        last = f"{first} + {eq.levels} - 2"
        return (
            f"{at}{name}[:, ({first}):({last})] = "
            f"rep_matrix(indicators({{k}}, {eq.levels}, 1)[1], {size});"
        )

    # the node's own term
    own = local_design(node, f"D_{node}_own")
    if binary and not eq.family.declares_coefficients:
        eta = _eta(scm, predictors[node], own, rows, size)
        lines += [
            f"{indent}{{",
            f"{inner}vector[{size}] eta = {eta};",
            f"{inner}lp[:, 1] += log_inv_logit(-eta);",
            f"{inner}lp[:, 2] += log_inv_logit(eta);",
            f"{indent}}}",
        ]
    elif count and eq.spec.family == "poisson":  # log P(k - 1), vectors over the rows
        eta = _eta(scm, predictors[node], own, rows, size)
        lines += [
            f"{indent}{{",
            f"{inner}vector[{size}] eta = {eta};",
            f"{inner}vector[{size}] rate = exp(eta);",
            f"{inner}for (k in 1:{levels}) {{",
            f"{inner}{_INDENT}lp[:, k] += (k - 1) * eta - rate - lgamma(k);",
            f"{inner}}}",
            f"{indent}}}",
        ]
    elif count:  # negative binomial (mean exp(eta), dispersion phi): log P(k - 1)
        eta = _eta(scm, predictors[node], own, rows, size)
        phi = eq.param("phi")
        lines += [
            f"{indent}{{",
            f"{inner}vector[{size}] eta = {eta};",
            f"{inner}vector[{size}] log_total = log({phi}) + log1p_exp(eta - log({phi}));"
            "  // log(mu + phi)",
            f"{inner}for (k in 1:{levels}) {{",
            f"{inner}{_INDENT}lp[:, k] += lgamma(k - 1 + {phi}) - lgamma(k) - lgamma({phi}) "
            f"+ {phi} * (log({phi}) - log_total) + (k - 1) * (eta - log_total);",
            f"{inner}}}",
            f"{indent}}}",
        ]
    elif eq.spec.family == "ordinal":  # P(k) = F(c_k - eta) - F(c_{k-1} - eta), logistic F
        eta = _eta(scm, predictors[node], own, rows, size)
        cuts = eq.param("cutpoints")
        lines += [
            f"{indent}{{",
            f"{inner}vector[{size}] eta = {eta};",
            f"{inner}lp[:, 1] += log1m_inv_logit(eta - {cuts}[1]);",
            f"{inner}for (k in 2:({levels} - 1)) {{",
            f"{inner}{_INDENT}lp[:, k] += log_diff_exp(log_inv_logit(eta - {cuts}[k - 1]), "
            f"log_inv_logit(eta - {cuts}[k]));",
            f"{inner}}}",
            f"{inner}lp[:, {levels}] += log_inv_logit(eta - {cuts}[{levels} - 1]);",
            f"{indent}}}",
        ]
    elif eq.family.declares_coefficients and own is None and not eq.latent:
        # a categorical root: the same level probabilities in every row
        alpha = f"append_row(0.0, {eq.intercept})" if eq.intercept else f"rep_vector(0.0, {levels})"
        lines.append(f"{indent}lp += rep_matrix(log_softmax({alpha})', {size});")
    else:
        statement = _fit_statement(
            scm, eq, predictors[node], f"{own}[{{i}}]" if own else None, rows=f"{rows}[{{i}}]",
            target="{k}", size="1", design_rows=False,
        )
        lines += [
            f"{indent}for (i in 1:{size}) {{",
            f"{inner}for (k in 1:{levels}) {{",
            f"{inner}{_INDENT}lp[i, k] += {_log_density(statement, False)};",
            f"{inner}}}",
            f"{indent}}}",
        ]
    # each child's term
    for child in children:
        ceq = scm.equations[child]
        value = holes_code.filled(child) if holes.get(child) == "sample" else child
        has = f"has_{child}_{node}" if holes.get(child) == "omit" else None
        name = local_design(child, f"D_{child}_{node}")
        assert name is not None  # a child reads the node: it has a design
        lines.append(f"{indent}for (k in 1:{levels}) {{")
        lines.append(set_level(name, child, inner))
        if ceq.spec.family in _ROW_DENSITIES and not ceq.family.declares_coefficients:
            eta = _eta(scm, predictors[child], name, rows, size)
            density = _row_density(ceq, predictors[child], f"{value}[{rows}]", eta)
            if has is not None:
                density = f"to_vector({has}) .* ({density})"
            lines.append(f"{inner}lp[:, k] += {density};")
        elif isinstance(stan_family(ceq), CategoricalStan) and ceq.loading_by is None:
            # the levels' linear predictors as one matrix, then the log softmax per row
            predictors_at = stan_family(ceq).level_predictors(
                ceq, name, functools.partial(_at_rows, {t.parent for t in ceq.latent}, rows),
                size,
            )
            term = f"categorical_logit_lpmf({value}[{rows}[i]] | eta[i]')"
            if has is not None:
                term = f"({has}[i] ? {term} : 0.0)"
            lines += [
                f"{inner}{{",
                f"{inner}{_INDENT}matrix[{size}, {ceq.levels}] eta = {predictors_at};",
                f"{inner}{_INDENT}for (i in 1:{size}) {{",
                f"{inner}{_INDENT * 2}lp[i, k] += {term};",
                f"{inner}{_INDENT}}}",
                f"{inner}}}",
            ]
        elif ceq.spec.family == "ordinal":  # the linear predictor as a vector, then per row
            eta = _eta(scm, predictors[child], name, rows, size)
            term = f"ordered_logistic_lpmf({value}[{rows}[i]] | eta[i], {ceq.param('cutpoints')})"
            if has is not None:
                term = f"({has}[i] ? {term} : 0.0)"
            lines += [
                f"{inner}{{",
                f"{inner}{_INDENT}vector[{size}] eta = {eta};",
                f"{inner}{_INDENT}for (i in 1:{size}) {{",
                f"{inner}{_INDENT * 2}lp[i, k] += {term};",
                f"{inner}{_INDENT}}}",
                f"{inner}}}",
            ]
        else:
            statement = _fit_statement(
                scm, ceq, predictors[child], f"{name}[{{i}}]", rows=f"{rows}[{{i}}]",
                target=f"{value}[{{{rows}[i]}}]", size="1", design_rows=False,
            )
            term = _log_density(statement, ceq.family.additive_noise)
            if has is not None:
                term = f"({has}[i] ? {term} : 0.0)"
            lines += [
                f"{inner}for (i in 1:{size}) {{",
                f"{inner}{_INDENT}lp[i, k] += {term};",
                f"{inner}}}",
            ]
        lines.append(f"{indent}}}")
    return lines


def _statement_comment(eq: NodeEquation, anchors: dict[str, tuple[NodeEquation, ...]]) -> str:
    """Why a fit-program statement has the terms it has (empty for a plain equation)."""
    notes = []
    for lterm in eq.latent:
        chain = anchors.get(lterm.parent)
        if chain is None:
            continue
        nodes = [a.node for a in chain]
        if eq.node in nodes:
            before = nodes[: nodes.index(eq.node)]
            given = f" given {', '.join(before)}" if before else ""
            notes.append(f"{lterm.parent} integrated out{given}")
        else:
            notes.append(
                f"{lterm.parent} = its mean given {', '.join(nodes)} (extra columns) "
                f"+ z_{lterm.parent} / sqrt(precision)"
            )
    return f"// {eq.node}: {'; '.join(notes)}" if notes else ""


def _fit_data_block(
    scm: SCM, equations: list[NodeEquation], integrated: bool = False, pairs: bool = False
) -> list[str]:
    """The fit program's data block: the rows, a sampler scale per equation, and the
    quadrature's nodes when latents are integrated out."""
    lines = _data_block(scm)
    for eq in equations:
        lines.append(
            f"{_INDENT}real<lower=0> scale_{eq.node};  // rough posterior sd of the coefficients "
            f"of {eq.node} (sampler scale only)"
        )
    if integrated:
        lines += [_INDENT + line for line in integrated_latents.DATA_LINES]
    if pairs:
        lines += [_INDENT + line for line in integrated_pairs.PAIR_DATA_LINES]
    lines.append("}")
    return lines


def _fit_parameters_block(
    scm: SCM,
    equations: list[NodeEquation],
    anchors: dict[str, tuple[NodeEquation, ...]],
    integrated: Collection[str] = (),
) -> list[str]:
    """The fit program's parameters: every row's latents (standardised when anchored; none
    when integrated out), then each equation's parameters."""
    lines = ["parameters {"]
    for latent in scm.latents:
        if latent in integrated:
            continue
        if latent in anchors:
            given = ", ".join(a.node for a in anchors[latent])
            lines.append(
                f"{_INDENT}vector[N] z_{latent};  // {latent} standardised given {given} "
                "(see the model block)"
            )
        else:
            lines.append(f"{_INDENT}vector[N] {latent};  // latent {latent} of every individual")
    for eq in equations:
        for declaration, comment in _parameter_declarations(scm, eq):
            lines.append(f"{_INDENT}{declaration};  // {comment}")
    lines.append("}")
    return lines


def _fit_transformed_parameters_block(equations: list[NodeEquation]) -> list[str]:
    """The families' and the terms' transformed parameters, or no block when none has any."""
    transformed = [line for eq in equations for line in stan_family(eq).transformed_parameters(eq)]
    transformed += [line for eq in equations for t in eq.bending for line in t.stan_transformed()]
    if not transformed:
        return []
    lines = ["transformed parameters {"]
    for definition, comment in transformed:
        lines.append(f"{_INDENT}{definition};  // {comment}")
    lines.append("}")
    return lines


def _anchor_preamble(scm: SCM, anchors: dict[str, tuple[NodeEquation, ...]]) -> list[str]:
    """The model block's opening: what anchoring samples, and each anchored latent's
    precision."""
    lines = []
    if anchors:
        lines.append(
            f"{_INDENT}// Anchored latents are Normal given their Normal children (conjugate), so "
            "the program samples z = (latent - mean) * sqrt(precision);"
        )
        lines.append(
            f"{_INDENT}// the latents themselves are not written out: counterfair rebuilds them "
            "from z and the parameters after sampling."
        )
    for latent, chain in anchors.items():
        lines += [_INDENT + line for line in precision_lines(scm, latent, chain)]
    return lines


def _latent_priors(
    scm: SCM, anchors: dict[str, tuple[NodeEquation, ...]], integrated: Collection[str] = ()
) -> list[str]:
    """One prior per sampled latent: standard normal on ``z`` for an anchored latent, else its
    own (an integrated latent's is in its quadrature)."""
    lines = []
    for latent in scm.latents:
        if latent in integrated:
            continue
        if latent in anchors:
            given = ", ".join(a.node for a in anchors[latent])
            lines.append(
                f"{_INDENT}z_{latent} ~ std_normal();  // {latent} | {given} is Normal, "
                f"so z_{latent} is standard normal a priori"
            )
        else:
            lines.append(_INDENT + _latent_prior(scm, latent, latent))
    return lines


def _equation_priors(eq: NodeEquation) -> list[str]:
    """The priors of one equation's parameters (the family's own when it declares its
    coefficients)."""
    emitter = stan_family(eq)
    if eq.family.declares_coefficients:
        bending = [line for t in eq.bending for line in t.stan_priors(eq.spec.prior_weights)]
        return [
            f"{_INDENT}{line}"
            for line in [*emitter.coefficient_priors(eq), *bending, *emitter.priors(eq)]
        ]
    spec = eq.spec
    lines = []
    if eq.intercept:
        lines.append(f"{_INDENT}{eq.intercept} ~ {spec.prior_intercept.stan()};")
    for name in [t.param for t in eq.protected] + [t.param for t in eq.observed]:
        lines.append(f"{_INDENT}{name} ~ {spec.prior_weights.stan()};")
    for lterm in eq.latent:
        lines.append(f"{_INDENT}{lterm.param} ~ {spec.prior_weights.stan()};")
        if lterm.by_param is not None:
            lines.append(f"{_INDENT}{lterm.by_param} ~ {spec.prior_weights.stan()};")
    for term in eq.bending:
        lines += [f"{_INDENT}{line}" for line in term.stan_priors(spec.prior_weights)]
    lines += [f"{_INDENT}{line}" for line in emitter.priors(eq)]
    return lines


def _fit_model_block(
    scm: SCM,
    equations: list[NodeEquation],
    anchors: dict[str, tuple[NodeEquation, ...]],
    predictors: dict[str, Predictor],
    designs: dict[str, str],
    vector_anchors: dict[str, tuple[NodeEquation, ...]] | None = None,
    integrated: dict[str, list[integrated_latents.IntegratedChild]] | None = None,
    pairs: dict[tuple[str, str], list[integrated_pairs.PairChild]] | None = None,
    holes: dict[str, str] | None = None,
    columns: dict[str, tuple[str, ...]] | None = None,
) -> list[str]:
    """The fit program's model block: anchoring, priors, then the structural equations
    (with ``holes``, the missing values filled in first, :mod:`counterfair.stan.holes`)."""
    vector_anchors = vector_anchors or {}
    integrated = integrated or {}
    pairs = pairs or {}
    holes = holes or {}
    lines = ["model {", *_anchor_preamble(scm, anchors), f"{_INDENT}// priors"]
    skipped = set(integrated) | {latent for pair in pairs for latent in pair}
    lines += _latent_priors(scm, {**anchors, **vector_anchors}, skipped)
    for eq in equations:
        lines += _equation_priors(eq)
    if holes:
        lines.append(f"{_INDENT}// missing values (missing='model')")
        lines += holes_code.fill_lines(holes)
    lines.append(f"{_INDENT}// structural equations")
    done: set[str] = {c.eq.node for children in integrated.values() for c in children}
    done |= {c.eq.node for children in pairs.values() for c in children}
    for latent, chain in vector_anchors.items():
        lines += _vector_anchor_lines(scm, latent, chain, predictors, designs)
        done.update(eq.node for eq in chain)
    subsets = set(holes_code.subset_nodes(scm, holes))
    split = set(holes_code.split_nodes(scm, holes))
    for eq in equations:
        if eq.node in done:
            continue
        comment = _statement_comment(eq, anchors)
        if comment:
            lines.append(_INDENT + comment)
        if eq.node in split:
            lines += _split_statements(
                scm, eq, predictors[eq.node], designs[eq.node], columns or {}, holes
            )
            continue
        kind = holes.get(eq.node)
        if eq.node in subsets:
            kind = "sample-subset" if kind == "sample" else "omit"
        lines.append(
            _INDENT + _fit_statement(scm, eq, predictors[eq.node], designs.get(eq.node), kind)
        )
    for node, kind in holes.items():
        if kind != "sum":
            continue
        lines.append(f"{_INDENT}// {node} summed over its levels where missing (missing='model')")
        lines.append(f"{_INDENT}{{")
        lines += _summed_lines(scm, node, predictors, designs, columns or {}, holes, _INDENT * 2)
        lines += [
            f"{_INDENT * 2}for (i in 1:N_mis_{node}) {{",
            f"{_INDENT * 3}target += log_sum_exp(lp[i]);",
            f"{_INDENT * 2}}}",
            f"{_INDENT}}}",
        ]
    for latent, children in integrated.items():
        if children:
            lines += integrated_latents.model_line(latent, children, _INDENT)
    for pair, pair_children in pairs.items():
        lines += integrated_pairs.pair_model_lines(pair, pair_children, _INDENT)
    lines.append("}")
    return lines


def _split_statements(
    scm: SCM,
    eq: NodeEquation,
    predictor: Predictor,
    design: str,
    columns: dict[str, tuple[str, ...]],
    holes: dict[str, str],
) -> list[str]:
    """The usual statement of a node that reads a sampled node, in two: the rows whose
    design is data (``keep_<node>``), and the rows where a sampled parent is missing
    (``fill_<node>``), whose design is copied with the parameters in."""
    node = eq.node
    blocks = columns[node]
    width = " + ".join(_block_width(scm, b) for b in blocks)
    value = holes_code.filled(node) if holes.get(node) == "sample" else node
    local = f"M_{node}"
    lines = [
        f"{_INDENT}// {node}: its rows with a sampled parent missing read the parameters",
        f"{_INDENT}if (N_fill_{node} > 0) {{",
        f"{_INDENT * 2}matrix[N_fill_{node}, {width}] {local} = {design}[fill_{node}];",
    ]
    for parent in holes_code.sampled_parents(scm, holes, node):
        before = blocks[: blocks.index(parent)]
        column = " + ".join(["1", *(_block_width(scm, b) for b in before)])
        lines.append(
            f"{_INDENT * 2}{local}[at_{node}_{parent}, {column}] = "
            f"{holes_code.mis_name(parent)}[which_{node}_{parent}];"
        )
    fill = _fit_statement(
        scm, eq, predictor, local, rows=f"fill_{node}", target=f"{value}[fill_{node}]",
        size=f"N_fill_{node}", design_rows=False,
    )
    keep = _fit_statement(
        scm, eq, predictor, design, rows=f"keep_{node}", target=f"{value}[keep_{node}]",
        size=f"N_keep_{node}",
    )
    return [
        *lines,
        f"{_INDENT * 2}{fill}",
        f"{_INDENT}}}",
        f"{_INDENT}if (N_keep_{node} > 0) {{",
        f"{_INDENT * 2}{keep}",
        f"{_INDENT}}}",
    ]


def _linear_part(scm: SCM, predictor: Predictor, design: str | None) -> str:
    """An equation's linear predictor without its latent terms, as a vector expression."""
    scalar = join_terms(predictor.intercept) if predictor.intercept else "0.0"
    if not predictor.blocks or design is None:
        return f"rep_vector({scalar}, N)"
    pieces = []
    for parent, terms in predictor.blocks.items():
        coefficient = join_terms(terms)
        pieces.append(coefficient if _vector_parent(scm, parent) else f"[{coefficient}]'")
    return f"{scalar} + {design} * {append_rows(pieces)}"


def _vector_anchor_lines(
    scm: SCM,
    latent: str,
    chain: tuple[NodeEquation, ...],
    predictors: dict[str, Predictor],
    designs: dict[str, str],
) -> list[str]:
    """Model-block lines of a latent anchored row by row (loadings that differ by group).

    The same factorisation as :mod:`counterfair.stan.anchoring`, with the precision
    ``prec`` and the information ``info`` (precision times mean) of the latent given the
    anchors so far as vectors over rows; each anchor enters with the latent integrated
    out, and the latent is rebuilt from ``z`` for its other children.
    """
    spec = scm.specs[latent]
    assert isinstance(spec, Latent)
    prec = f"rep_vector({stan_real(1.0 / spec.scale**2)}, N)"
    info = f"rep_vector({stan_real(spec.loc / spec.scale**2)}, N)"
    lines = [
        f"// {latent}: loadings that differ by group, so its precision and mean given "
        f"{', '.join(a.node for a in chain)} are vectors over rows"
    ]
    for eq in chain:
        lterm = eq.latent[0]
        node = eq.node
        if lterm.by_param is not None:
            loading = f"{lterm.param} + {loading_matrix(eq)} * {lterm.by_param}"
        else:
            loading = f"rep_vector({lterm.param}, N)"
        predictor = fit_predictor(scm, eq, {})
        variance = (
            f"square({eq.sigma})" if eq.sigma_fixed is None else stan_real(eq.sigma_fixed**2)
        )
        lines += [
            f"vector[N] lam_{latent}_{node} = {loading};  // loading of {latent} on {node}, "
            "per row",
            f"vector[N] res_{latent}_{node} = {node} - ("
            f"{_linear_part(scm, predictor, designs.get(node))});  // {node} less its "
            "other terms",
            f"{node} ~ normal({node} - res_{latent}_{node} + lam_{latent}_{node} .* {info} ./ "
            f"{prec}, sqrt(square(lam_{latent}_{node}) ./ {prec} + {variance}));  // "
            f"{latent} integrated out",
            f"vector[N] info_{latent}_{node} = {info} + lam_{latent}_{node} .* "
            f"res_{latent}_{node} / {variance};",
            f"vector[N] prec_{latent}_{node} = {prec} + square(lam_{latent}_{node}) / "
            f"{variance};",
        ]
        prec, info = f"prec_{latent}_{node}", f"info_{latent}_{node}"
    lines.append(
        f"vector[N] {latent} = {info} ./ {prec} + z_{latent} ./ sqrt({prec});  // {latent} "
        "for its other children"
    )
    return [_INDENT + line for line in lines]


def fit_program(
    scm: SCM,
    *,
    anchor_latents: bool = True,
    integrate: Collection[str] = (),
    holes: Mapping[str, str] | None = None,
) -> str:
    """Stan program sampling the SCM's parameters and every row's latents.

    Parameters
    ----------
    scm : SCM
        The structural causal model.
    anchor_latents : bool
        Sample every latent that has Normal children through its standardised
        conditional (see :mod:`counterfair.stan.anchoring`; the default, and
        what ``SCM.fit`` uses). ``False`` samples every latent directly (the
        centred form, the same posterior; kept for checks).
    integrate : collection of str
        Latents integrated out of the likelihood (:mod:`counterfair.stan.integrated`):
        NUTS samples the parameters only, and the generated quantities draw the
        latents of a pair exactly per draw (one latent per row is drawn after sampling,
        :func:`counterfair.stan.integrated.drawn_in_program`).
        Each must pass :func:`counterfair.stan.integrated.unsupported_reason`.
    holes : mapping of str to str, optional
        ``missing="model"``'s plan (:func:`counterfair.rows.missing.hole_plan`): node ->
        ``"omit"`` or ``"sample"`` (:mod:`counterfair.stan.holes`). A latent those nodes
        touch is sampled directly, and may not be integrated out.

    Returns
    -------
    str
        The program text (deterministic: the same SCM gives the same text).
    """
    integrate = integrated_latents.integrated_names(integrate)
    for latent in integrate:
        reason = integrated_latents.unsupported_reason(scm, latent)
        if reason is not None:
            raise ValueError(f"latent {latent!r} cannot be integrated out: {reason}")
    if integrate and not anchor_latents:
        raise ValueError("integrate= needs anchor_latents=True: it integrates the anchors first")
    plan = holes_code.program_plan(holes)
    touched = holes_code.touched_latents(scm, plan)
    for latent in integrate:
        if latent in touched:
            raise ValueError(
                f"latent {latent!r} cannot be integrated out: {touched[latent]!r} has "
                "missing values (missing='model' samples the latent with them)"
            )
    equations = [scm.equations[n] for n in scm.observed]
    anchors = anchors_of(scm, integrate) if anchor_latents else {}
    vector_anchors = vector_anchors_of(scm) if anchor_latents else {}
    anchors = {k: v for k, v in anchors.items() if k not in touched}
    vector_anchors = {k: v for k, v in vector_anchors.items() if k not in touched}
    # a categorical node's latents are never folded into its design (its loadings are
    # a row vector): an integrated latent's anchored mean enters it as one vector
    predictors = {
        eq.node: fit_predictor(scm, eq, {} if eq.family.declares_coefficients else anchors)
        for eq in equations
    }
    columns = {node: tuple(pred.blocks) for node, pred in predictors.items()}
    means = {
        latent: conditional_mean_predictor(scm, latent, anchors[latent])
        for latent in integrate
        if latent in anchors
        and any(c.family.declares_coefficients for c in integrated_latents.children_of(scm, latent))
    }
    columns.update({latent: tuple(pred.blocks) for latent, pred in means.items()})
    designs = design_names(columns)
    pairs = {
        pair: _pair_children(scm, pair, predictors, designs)
        for pair in integrated_pairs.pairs_of(scm, integrate)
    }
    paired = {latent for pair in pairs for latent in pair}
    integrated = {
        latent: _integrated_children(
            scm, latent, anchors, predictors, designs, means.get(latent)
        )
        for latent in integrate
        if latent not in paired
    }

    purpose = (
        "fit of the structural causal model (parameters; latents integrated out)"
        if integrate
        else "fit of the structural causal model (parameters and latents)"
    )
    lines = _header(scm, purpose)
    lines.append(_functions_block(scm, integrated=bool(integrate), pairs=bool(pairs)))
    data = _fit_data_block(scm, equations, integrated=bool(integrate), pairs=bool(pairs))
    lines += [*data[:-1], *holes_code.data_lines(scm, plan), data[-1]]
    lines += _with_outcomes(_transformed_data_block(scm, columns, equations), integrated, pairs)
    parameters = _fit_parameters_block(scm, equations, {**anchors, **vector_anchors}, integrate)
    lines += [*parameters[:-1], *holes_code.parameter_lines(plan), parameters[-1]]
    lines += _fit_transformed_parameters_block(equations)
    lines += _fit_model_block(
        scm, equations, anchors, predictors, designs, vector_anchors, integrated, pairs,
        holes=plan, columns=columns,
    )
    draws = _integrated_draws_block(scm, pairs)
    summed = _summed_draws(scm, plan, predictors, designs, columns)
    if summed and not draws:
        draws = ["generated quantities {", "}"]
    lines += [*draws[:-1], *summed, *draws[-1:]]
    return "\n".join(lines) + "\n"


def _summed_draws(
    scm: SCM,
    holes: dict[str, str],
    predictors: dict[str, Predictor],
    designs: dict[str, str],
    columns: dict[str, tuple[str, ...]],
) -> list[str]:
    """Generated quantities: each summed node's missing values drawn from their posterior
    given the row and the draw's parameters (``<node>_draw``, Stan's coding), with the
    sampled missing values filled in first as the model block fills them."""
    summed = [node for node, kind in holes.items() if kind == "sum"]
    if not summed:
        return []
    lines = [
        f"{_INDENT}array[N_mis_{node}] int {holes_code.draw_name(node)};  // {node} where "
        "missing, drawn from its posterior given the row"
        for node in summed
    ]
    fills = [_INDENT + line for line in holes_code.fill_lines(holes)]
    counts = [node for node in summed if holes_code.summed_count(scm, node)]
    lines += [
        f"{_INDENT}real {holes_code.top_name(node)} = 0;  // the largest posterior share of "
        f"K_{node}, the last count summed over"
        for node in counts
    ]
    lines += [f"{_INDENT}{{", *fills]
    for node in summed:
        binary = scm.equations[node].spec.family == "bernoulli"
        shift = " - 1" if binary or node in counts else ""
        lines += [f"{_INDENT * 2}{{"]
        lines += _summed_lines(scm, node, predictors, designs, columns, holes, _INDENT * 3)
        lines += [
            f"{_INDENT * 3}for (i in 1:N_mis_{node}) {{",
            f"{_INDENT * 4}{holes_code.draw_name(node)}[i] = "
            f"categorical_rng(softmax(lp[i]')){shift};",
        ]
        if node in counts:
            top = holes_code.top_name(node)
            lines.append(
                f"{_INDENT * 4}{top} = fmax({top}, exp(lp[i, K_{node} + 1] - "
                "log_sum_exp(lp[i])));"
            )
        lines += [f"{_INDENT * 3}}}", f"{_INDENT * 2}}}"]
    lines.append(f"{_INDENT}}}")
    return lines


def _integrated_children(
    scm: SCM,
    latent: str,
    anchors: dict[str, tuple[NodeEquation, ...]],
    predictors: dict[str, Predictor],
    designs: dict[str, str],
    mean: Predictor | None = None,
) -> list[integrated_latents.IntegratedChild]:
    """``latent``'s non-Normal children as ``eta + load * z`` (``z`` standard normal).

    ``mean``: the anchored latent's mean given its anchors (design ``X_<latent>``), which
    a categorical child adds to its own predictors times its loadings.
    """
    spec = scm.specs[latent]
    assert isinstance(spec, Latent)
    chain = anchors.get(latent)
    out = []
    for eq in integrated_latents.children_of(scm, latent):
        (lterm,) = eq.latent
        width = 1
        if eq.family.declares_coefficients:  # categorical: one column per non-reference level
            width = integrated_latents.categorical_width(eq)
            eta = stan_family(eq).integrated_predictor(eq, designs.get(eq.node))
            if chain is not None:
                assert mean is not None
                centre = _linear_part(scm, mean, designs.get(latent))
                eta = f"{eta} + ({centre}) * {lterm.param}"
        else:
            eta = _linear_part(scm, predictors[eq.node], designs.get(eq.node))
        if chain is not None:
            load = f"{lterm.param} / sqrt({precision_name(latent, chain[-1].node)})"
        else:
            if spec.loc != 0.0:
                shift = f"{lterm.param} * {stan_real(spec.loc)}"
                eta = f"{eta} + {shift if width == 1 else f'rep_matrix({shift}, N)'}"
            load = (
                lterm.param if spec.scale == 1.0 else f"{lterm.param} * {stan_real(spec.scale)}"
            )
        out.append(integrated_latents.IntegratedChild(eq=eq, eta=eta, load=load, width=width))
    return out


def _pair_children(
    scm: SCM,
    pair: tuple[str, str],
    predictors: dict[str, Predictor],
    designs: dict[str, str],
) -> list[integrated_pairs.PairChild]:
    """Every child of an integrated ``pair`` as ``eta + load1 * z1 + load2 * z2`` (``z``
    standard normal; a Normal child's ``eta`` is its mean less its value)."""
    out = []
    for eq in integrated_pairs.pair_children(scm, pair):
        load1, load2, shift = integrated_pairs.pair_loads(scm, pair, eq)
        eta = _linear_part(scm, predictors[eq.node], designs.get(eq.node))
        if shift != "0.0":
            eta = f"{eta} + {shift}"
        if eq.family.additive_noise:
            eta = f"{eta} - {eq.node}"
        out.append(integrated_pairs.PairChild(eq=eq, eta=eta, load1=load1, load2=load2))
    return out


def _with_outcomes(
    block: list[str],
    integrated: dict[str, list[integrated_latents.IntegratedChild]],
    pairs: dict[tuple[str, str], list[integrated_pairs.PairChild]] | None = None,
) -> list[str]:
    """The transformed data block with the integrated latents' outcome arrays added."""
    extra = [
        line
        for latent, children in integrated.items()
        if children
        for line in integrated_latents.outcome_lines(latent, children, _INDENT)
    ]
    for pair, children in (pairs or {}).items():
        extra += integrated_pairs.pair_outcome_lines(pair, children, _INDENT)
    if not extra:
        return block
    if not block:
        return ["transformed data {", *extra, "}"]
    return [*block[:-1], *extra, block[-1]]


def _integrated_draws_block(
    scm: SCM, pairs: dict[tuple[str, str], list[integrated_pairs.PairChild]]
) -> list[str]:
    """Generated quantities: the latents of each integrated pair drawn exactly per row and
    draw (:func:`counterfair.stan.integrated.drawn_in_program`; one latent per row is
    drawn after sampling, by exact abduction's code)."""
    if not pairs:
        return []
    lines = ["generated quantities {"]
    for pair in pairs:
        for latent in pair:
            lines.append(
                f"{_INDENT}vector[N] {latent};  // {latent} drawn exactly (with "
                f"{pair[1] if latent == pair[0] else pair[0]}) given the draw's parameters"
            )
    lines.append(f"{_INDENT}{{")
    inner = _INDENT * 2
    for pair, pair_children in pairs.items():
        lines += integrated_pairs.pair_draw_lines(scm, pair, pair_children, inner)
    lines += [f"{_INDENT}}}", "}"]
    return lines


def abduction_equations(scm: SCM) -> list[NodeEquation]:
    """Equations that inform the latents: those of the latents' children."""
    latent_set = set(scm.latents)
    return [
        scm.equations[n]
        for n in scm.observed
        if any(t.parent in latent_set for t in scm.equations[n].latent)
    ]


def abduction_program(scm: SCM) -> str:
    """Stan program sampling latents of new rows given ``S`` sets of parameter values.

    Only the latents' children carry information about the latents, so only their
    equations appear; each has an ``observe_<node>`` flag in the data so the user
    can leave a node (e.g. the outcome) out of the conditioning set.

    Raises
    ------
    SCMError
        If the SCM has no latent node (abduction is then deterministic).
    """
    if not scm.latents:
        raise errors.SCMError("the SCM has no latent node: there is nothing to abduct by MCMC")
    equations = abduction_equations(scm)
    lines = _header(scm, "abduction of latents for new rows, given parameter values")
    lines.append(_functions_block(scm))
    lines += _data_block(scm)
    lines.append(f"{_INDENT}int<lower=1> S;  // number of parameter sets (posterior draws)")
    for eq in equations:
        lines.append(
            f"{_INDENT}int<lower=0, upper=1> observe_{eq.node};"
            f"  // 1: condition the latents on {eq.node}"
        )
    for eq in equations:
        for declaration, comment in _parameter_declarations(scm, eq, array_prefix="array[S] "):
            lines.append(f"{_INDENT}{declaration};  // {comment}, per parameter set")
    lines.append("}")
    columns = {eq.node: own_columns(eq) for eq in equations}
    lines += _transformed_data_block(scm, columns, equations, frequencies=False)
    lines.append("parameters {")
    for latent in scm.latents:
        lines.append(
            f"{_INDENT}array[S] vector[N] {latent};"
            f"  // latent {latent} of every row, per parameter set"
        )
    lines += ["}", "model {", f"{_INDENT}for (s in 1:S) {{"]
    inner = _INDENT * 2
    for latent in scm.latents:
        lines.append(inner + _latent_prior(scm, latent, f"{latent}[s]"))
    designs = design_names(columns)
    for eq in equations:
        lines.append(f"{inner}if (observe_{eq.node}) {{")
        lines += _glm_statement(
            eq,
            designs.get(eq.node),
            lambda name: f"{name}[s]",
            inner + _INDENT,
        )
        lines.append(f"{inner}}}")
    lines += [f"{_INDENT}}}", "}"]
    return "\n".join(lines) + "\n"
