"""Latents anchored by their Normal children, and the fit program's linear predictors.

A latent ``L`` is *anchored* when it has Normal children whose only latent
parent is ``L``: its anchors ``A_1 .. A_J``, in graph order. Each anchor is a
Gaussian measurement of ``L``: its residual ``r_k = A_k - mu_k`` (``mu_k``: the
intercept and the data parents' terms) is ``lambda_k L + e_k`` with
``e_k ~ Normal(0, sigma_k)``. Given the first ``j`` anchors, ``L`` is Normal in
closed form, with precision and mean

    P_j = 1 / scale^2 + sum_{k <= j} lambda_k^2 / sigma_k^2
    m_j = (loc / scale^2 + sum_{k <= j} g_k r_k) / P_j,   g_k = lambda_k / sigma_k^2

(``P_0``, ``m_0`` are the prior's). The fit program factorises the joint density as

    p(L) prod_k p(A_k | L) = prod_k p(A_k | A_1 .. A_{k-1}) * p(L | A_1 .. A_J),

so each anchor enters with ``L`` integrated out,
``A_k | A_<k ~ Normal(mu_k + lambda_k m_{k-1}, sqrt(lambda_k^2 / P_{k-1} + sigma_k^2))``,
and the program samples ``z_L`` with ``L = m_J + z_L / sqrt(P_J)``, which is
standard normal but for the pull of the latent's other (non-Normal) children.
Moving along the ridge between a loading and its sigma then no longer drags
every row's latent along.

Every ``m_j`` is affine in data columns (the anchors and their data parents)
with coefficients that depend only on the parameters. So a term
``lambda_E * m_j`` in another equation ``E`` is written as extra columns of
``E``'s design matrix with scalar coefficients, and the only per-row parameter
work left is ``(lambda_E / sqrt(P_J)) * z_L``: on the law school data this
halves the gradient's cost against building ``L`` as a vector per row.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from counterfair.model.equation import LatentTerm, NodeEquation
from counterfair.model.specs import Latent, stan_real

if TYPE_CHECKING:
    from counterfair.model.scm import SCM


def anchors_of(
    scm: SCM, integrate: Collection[str] = ()
) -> dict[str, tuple[NodeEquation, ...]]:
    """Latent -> its anchors: Normal children whose only latent parent it is, in graph order.

    Latents without such a child are absent (the fit program samples them
    directly), and so are latents with a child whose family lays out its own
    coefficients (categorical): its statement needs the latent's values. A latent
    in ``integrate`` (integrated out of the fit, :mod:`counterfair.stan.integrated`)
    is anchored even then: its categorical children enter through the quadrature; one
    integrated with the latent it shares a child with (two latents per row) is not: every
    child of the pair enters the pair's quadrature.
    """
    anchors: dict[str, tuple[NodeEquation, ...]] = {}
    for latent in scm.latents:
        children = [scm.equations[c] for c in scm.children(latent) if c in scm.equations]
        if latent in integrate and any(len(eq.latent) > 1 for eq in children):
            continue  # integrated with the latent it shares a child with: no anchors
        if latent not in integrate and any(eq.family.declares_coefficients for eq in children):
            continue  # a categorical child reads the latent itself: sample it directly
        if any(eq.loading_by is not None for eq in children):
            continue  # a loading per group: the latent's precision differs by row
        found = []
        for child in scm.children(latent):
            eq = scm.equations.get(child)
            if eq is not None and eq.family.additive_noise and len(eq.latent) == 1:
                found.append(eq)
        if found:
            anchors[latent] = tuple(found)
    return anchors


def _normal_anchors(scm: SCM, latent: str) -> list[NodeEquation]:
    """Normal children of ``latent`` whose only latent parent it is, in graph order."""
    found = []
    for child in scm.children(latent):
        eq = scm.equations.get(child)
        if eq is not None and eq.family.additive_noise and len(eq.latent) == 1:
            found.append(eq)
    return found


def vector_anchors_of(scm: SCM) -> dict[str, tuple[NodeEquation, ...]]:
    """Latents anchored row by row: their Normal children have loadings that differ by group.

    With a loading per row (``loading_by``), the latent's precision and mean given its
    anchors differ by row, so they are vectors of the model block (:func:`vector_anchor_lines`)
    rather than the scalars and extra design columns of :func:`anchors_of`'s latents; the
    factorisation is the same.
    """
    out: dict[str, tuple[NodeEquation, ...]] = {}
    for latent in scm.latents:
        children = [scm.equations[c] for c in scm.children(latent) if c in scm.equations]
        if any(eq.family.declares_coefficients for eq in children):
            continue
        if not any(eq.loading_by is not None for eq in children):
            continue
        found = _normal_anchors(scm, latent)
        if found:
            out[latent] = tuple(found)
    return out


def all_anchors_of(
    scm: SCM, integrate: Collection[str] = ()
) -> dict[str, tuple[NodeEquation, ...]]:
    """Every anchored latent (scalar or row-by-row) with its anchors: what is sampled as ``z``
    (or, for a latent in ``integrate``, drawn as ``z`` in the generated quantities)."""
    return {**anchors_of(scm, integrate), **vector_anchors_of(scm)}


def precision_name(latent: str, anchor: str) -> str:
    """Model-block name of ``P_j``: precision of ``latent`` given its anchors up to ``anchor``."""
    return f"prec_{latent}_{anchor}"


def weight_name(latent: str, anchor: str) -> str:
    """Model-block name of ``g_k = lambda_k / sigma_k^2`` of ``anchor`` (a child of ``latent``)."""
    return f"g_{latent}_{anchor}"


def _latent_spec(scm: SCM, latent: str) -> Latent:
    spec = scm.specs[latent]
    assert isinstance(spec, Latent)
    return spec


def _over_variance(eq: NodeEquation, numerator: str) -> str:
    """``numerator / sigma^2`` of a Normal equation (a literal for a fixed sigma)."""
    fixed = eq.sigma_fixed
    if fixed is None:
        return f"{numerator} / square({eq.sigma})"
    if fixed == 1.0:
        return numerator
    return f"{numerator} / {stan_real(fixed**2)}"


def precision_lines(scm: SCM, latent: str, anchors: tuple[NodeEquation, ...]) -> list[str]:
    """Declarations of ``g_1 .. g_J`` and ``P_1 .. P_J`` of an anchored latent (model block)."""
    spec = _latent_spec(scm, latent)
    previous = stan_real(1.0 / spec.scale**2)
    lines = []
    seen: list[str] = []
    for eq in anchors:
        loading = eq.latent[0].param
        seen.append(eq.node)
        weight = weight_name(latent, eq.node)
        name = precision_name(latent, eq.node)
        lines += [
            f"real {weight} = {_over_variance(eq, loading)};"
            f"  // loading / sigma^2 of {eq.node}: weight of its residual in the mean of {latent}",
            f"real {name} = {previous} + {loading} * {weight};"
            f"  // precision of {latent} given {', '.join(seen)}",
        ]
        previous = name
    return lines


@dataclass
class Predictor:
    """The linear predictor of one equation in the fit program.

    Attributes
    ----------
    blocks : dict
        Data parent (a protected or observed node) -> the terms of its
        coefficient (vector for a protected or level-valued parent, real for
        another observed one),
        each written ``"+ expr"`` or ``"- expr"``. Block order is column order.
    intercept : list of str
        Real-valued terms, each ``"+ expr"`` or ``"- expr"``.
    vectors : list of str
        Per-row (vector) terms.
    sd : str or None
        The sd of a Normal equation (with anchored latents integrated out).
    """

    blocks: dict[str, list[str]] = field(default_factory=dict)
    intercept: list[str] = field(default_factory=list)
    vectors: list[str] = field(default_factory=list)
    sd: str | None = None

    def add(self, parent: str, term: str) -> None:
        self.blocks.setdefault(parent, []).append(term)


def _data_terms(predictor: Predictor, eq: NodeEquation, sign: str, scale: str | None) -> None:
    """Add ``sign * scale * mu(eq)`` (intercept and data parents of ``eq``) to ``predictor``."""

    def scaled(param: str, vector: bool) -> str:
        if scale is None:
            return f"{sign} {param}"
        return f"{sign} ({scale}) * {param}" if vector else f"{sign} {scale} * {param}"

    if eq.intercept:
        predictor.intercept.append(scaled(eq.intercept, vector=False))
    for pterm in eq.protected:
        predictor.add(pterm.parent, scaled(pterm.param, vector=not pterm.continuous))
    for oterm in eq.observed:
        predictor.add(oterm.parent, scaled(oterm.param, vector=oterm.levels is not None))
    if eq.bending:
        predictor.add(bending_block(eq), scaled(bending_coefficients(eq), vector=True))


def bending_block(eq: NodeEquation) -> str:
    """Name of the data matrix of an equation's bending terms (``F_<node>``)."""
    return f"F_{eq.node}"


def bending_coefficients(eq: NodeEquation, index: Callable[[str], str] | None = None) -> str:
    """The stacked weights of an equation's bending terms, in the columns' order."""
    names = [index(t.param) if index else t.param for t in eq.bending]
    out = names[-1]
    for name in reversed(names[:-1]):
        out = f"append_row({name}, {out})"
    return out


def latent_term(eq: NodeEquation, lterm: LatentTerm, index: Callable[[str], str]) -> str:
    """``loading * latent``, with a loading per row when it differs by group (``loading_by``)."""
    if lterm.by_param is None:
        return f"{index(lterm.param)} * {index(lterm.parent)}"
    return (
        f"({index(lterm.param)} + {loading_matrix(eq)} * {index(lterm.by_param)}) .* "
        f"{index(lterm.parent)}"
    )


def loading_matrix(eq: NodeEquation) -> str:
    """Name of the indicator matrix of the ``loading_by`` parent's non-reference levels."""
    return f"Lby_{eq.node}"


def _conditional_mean_terms(
    scm: SCM,
    predictor: Predictor,
    loading: str,
    latent: str,
    conditioning: tuple[NodeEquation, ...],
) -> None:
    """Add ``loading * m_j`` (mean of ``latent`` given the ``conditioning`` anchors)."""
    spec = _latent_spec(scm, latent)
    if not conditioning:
        if spec.loc != 0.0:
            predictor.intercept.append(f"+ {loading} * {stan_real(spec.loc)}")
        return
    precision = precision_name(latent, conditioning[-1].node)
    if spec.loc != 0.0:
        prior_information = stan_real(spec.loc / spec.scale**2)
        predictor.intercept.append(f"+ {loading} * {prior_information} / {precision}")
    for anchor in conditioning:
        coefficient = f"{loading} * {weight_name(latent, anchor.node)} / {precision}"
        predictor.add(anchor.node, f"+ {coefficient}")  # the anchor's own column
        _data_terms(predictor, anchor, "-", coefficient)


def conditional_mean_predictor(
    scm: SCM, latent: str, chain: tuple[NodeEquation, ...]
) -> Predictor:
    """The mean of an anchored ``latent`` given all its anchors, as a linear predictor
    (the terms a child adds times its loading; a categorical child, whose loadings are
    a row vector, takes it as one vector instead)."""
    predictor = Predictor()
    _conditional_mean_terms(scm, predictor, "1.0", latent, chain)
    return predictor


def fit_predictor(
    scm: SCM, eq: NodeEquation, anchors: dict[str, tuple[NodeEquation, ...]]
) -> Predictor:
    """The linear predictor (and sd) of ``eq`` in the fit program."""
    predictor = Predictor()
    _data_terms(predictor, eq, "+", None)
    position = {
        (latent, anchor.node): k
        for latent, chain in anchors.items()
        for k, anchor in enumerate(chain)
    }
    for lterm in eq.latent:
        latent, loading = lterm.parent, lterm.param
        chain = anchors.get(latent)
        if chain is None:
            predictor.vectors.append(latent_term(eq, lterm, lambda name: name))
            continue
        k = position.get((latent, eq.node))
        if k is None:  # another child: the latent given all its anchors
            _conditional_mean_terms(scm, predictor, loading, latent, chain)
            last = precision_name(latent, chain[-1].node)
            predictor.vectors.append(f"({loading} / sqrt({last})) * z_{latent}")
            continue
        # an anchor: the latent integrated out, given the anchors before it
        _conditional_mean_terms(scm, predictor, loading, latent, chain[:k])
        spec = _latent_spec(scm, latent)
        if k == 0:
            spread = (
                f"square({loading})"
                if spec.scale == 1.0
                else f"square({loading} * {stan_real(spec.scale)})"
            )
        else:
            spread = f"square({loading}) / {precision_name(latent, chain[k - 1].node)}"
        if eq.sigma_fixed is not None:
            predictor.sd = f"sqrt({spread} + {stan_real(eq.sigma_fixed**2)})"
        else:
            predictor.sd = f"sqrt({spread} + square({eq.sigma}))"
    if predictor.sd is None and eq.sigma is not None:
        predictor.sd = stan_real(eq.sigma_fixed) if eq.sigma_fixed is not None else eq.sigma
    return predictor


def join_terms(terms: list[str]) -> str:
    """Join ``"+ expr"`` / ``"- expr"`` terms into one expression."""
    first = terms[0]
    text = first[2:] if first.startswith("+ ") else "-" + first[2:]
    for term in terms[1:]:
        text += f" {term}"
    return text
