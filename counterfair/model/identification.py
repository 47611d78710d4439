"""Structural identification checks of an SCM's latents (run when an SCM is built).

A latent ``L ~ Normal(loc, scale)`` enters each child's linear predictor as
``lambda_child * L``. Whether the loadings (and so the latent) are identified
follows from the moments the children give about ``L``, counted per latent:

* every pair of children gives one covariance, unless one is a parent of the
  other (then the pair's direct coefficient explains the same covariance);
* a Normal child with a fixed ``sigma`` gives its variance (its residual
  variance is not free); a Poisson child gives its overdispersion (its
  variance is fixed by its mean); a Normal child with a free ``sigma``,
  a negative binomial, Bernoulli, ordinal or categorical child gives none;

against one loading per child. With fewer moments than loadings the latent is
**not identified**: two Normal indicators with free residual sds identify
only the product of their loadings (the classic factor-analysis rule needs
three), a single child's loading is confounded with its noise. A child whose
loading differs by group (``loading_by``) has one loading per group, and the
groups' covariances count separately, since the latent has the same law in every
group (a root, independent of the protected attributes): two Normal indicators,
one of them group-specific, are identified, but only through the difference
between the groups (reported as weak). Moreover:

* a latent with a **single child** is at best weakly identified (only through
  that child's family, e.g. Poisson overdispersion);
* two latents with the **same children** can be rotated into each other:
  only their joint effect is identified;
* **sign**: counterfair constrains the loading of each latent's first
  non-categorical child (in graph order) to be positive, which removes the
  reflection ``(L, lambda) -> (-L, -lambda)``; an SCM without such a child is
  refused (:data:`counterfair.errors.NO_SIGN_CHILD`). The reflection returns
  (a bimodal posterior, bad R-hat) only if that loading's true value is near 0:
  then order the nodes so that a strong indicator comes first.

:func:`findings` lists the problems; :class:`counterfair.SCM` warns
(:class:`counterfair.errors.IdentificationWarning`) for each when built.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import pandas as pd

from counterfair.errors import IdentificationWarning
from counterfair.logs import in_words, user_stacklevel
from counterfair.model.families import family_of
from counterfair.model.specs import Observed

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

COLUMNS = ["latent", "problem", "reason", "remedy"]

_REMEDY = (
    "add {another} indicator (child) of {latent!r} that is neither a parent nor a child of "
    "its other children, fix a Normal child's residual sd ({fixed_sd}) or a loading, or give "
    "the loadings an informative prior"
)
_FIXED_SD = ("e.g. cf.Normal(sigma=1.0)", "e.g. sigma: 1.0 on the node in the SCM file")

def _remedy(scm: SCM, latent: str) -> str:
    """The remedy in the user's language (Python, or SCM-file keys on the command line)."""
    another = "a third" if len(scm.children(latent)) == 2 else "another"
    return _REMEDY.format(latent=latent, another=another, fixed_sd=in_words(*_FIXED_SD))


def _count_reason(scm: SCM, latent: str, moments: int, loadings: int) -> str:
    """Why ``latent``'s children give ``moments`` moments: which pairs count and which
    children give a variance moment, counted as :func:`_moments` counts them."""
    children = scm.children(latent)
    graph = scm.graph
    joined = [
        f"{a} -> {b}" if graph.has_edge(a, b) else f"{b} -> {a}"
        for i, a in enumerate(children)
        for b in children[i + 1 :]
        if graph.has_edge(a, b) or graph.has_edge(b, a)
    ]
    pairs = len(children) * (len(children) - 1) // 2
    text = (
        f"its {len(children)} children give {moments} moment(s) for {loadings} loadings: "
        f"{pairs - len(joined)} of their {pairs} pair(s) give a covariance"
    )
    if joined:
        text += (
            f" (the other {len(joined)} are joined by an edge, {', '.join(joined)}, whose own "
            "coefficient explains their covariance)"
        )
    own, none_fixed, none_free = [], [], []
    for child in children:
        spec = scm.specs[child]
        assert isinstance(spec, Observed)
        family = family_of(spec)
        fixed_sd = family.additive_noise and getattr(spec, "sigma", None) is not None
        if fixed_sd or family.name == "poisson":
            own.append(child)
        elif family.additive_noise or family.name == "negative_binomial":
            none_free.append(child)
        else:
            none_fixed.append(child)
    if own:
        text += f"; {', '.join(own)} give(s) a variance moment (Poisson overdispersion, or a " \
            "fixed-sd Normal's variance)"
    if none_fixed:
        text += f"; {', '.join(none_fixed)} give(s) none: a binary or level-valued " \
            "child's variance is fixed by its mean"
    if none_free:
        text += f"; {', '.join(none_free)} give(s) none: a free dispersion absorbs it"
    return text


def _group_levels(scm: SCM, latent: str) -> int:
    """Levels of the factor by which some child's loading on ``latent`` differs (1: none).

    A factor whose levels come from the data counts as 2, the fewest it may have.
    """
    for child in scm.children(latent):
        by = getattr(scm.specs[child], "loading_by", None)
        if by is not None:
            spec = scm.specs[by]
            levels = getattr(spec, "levels", None)
            return len(levels) if isinstance(levels, tuple) else 2
    return 1


def _moments(scm: SCM, latent: str, *, by_group: bool = True) -> tuple[int, int]:
    """Moments the children of ``latent`` give about it, and its loadings to identify.

    With a child whose loading differs by group (``loading_by``, ``G`` levels), the
    latent has the same law in every group, so each group's covariances are moments
    of their own (``G`` per pair), and the differences between groups of a free-sigma
    Normal child's variance (``G - 1``) identify its loadings' squares; each such
    child has ``G`` loadings. ``by_group=False`` counts as if every loading were the same.
    """
    children = scm.children(latent)
    groups = _group_levels(scm, latent) if by_group else 1
    graph = scm.graph
    pairs = 0
    for i, a in enumerate(children):
        for b in children[i + 1 :]:
            if not (graph.has_edge(a, b) or graph.has_edge(b, a)):
                pairs += groups
    own = 0
    loadings = 0
    for child in children:
        spec = scm.specs[child]
        assert isinstance(spec, Observed)
        family = family_of(spec)
        grouped = groups > 1 and spec.loading_by is not None
        loadings += groups if grouped else 1
        if (
            family.additive_noise and getattr(spec, "sigma", None) is not None
        ) or family.name == "poisson":
            own += groups
        elif grouped and family.additive_noise:
            own += groups - 1
    return pairs + own, loadings


def findings(scm: SCM) -> pd.DataFrame:
    """Identification problems of the SCM's latents, one row each (empty when none).

    Returns
    -------
    pandas.DataFrame
        Columns ``latent``, ``problem`` (``"not identified"`` or ``"weak"``),
        ``reason`` and ``remedy``.
    """
    rows: list[dict[str, str]] = []
    for latent in scm.latents:
        children = scm.children(latent)
        moments, loadings = _moments(scm, latent)
        remedy = _remedy(scm, latent)
        if len(children) == 1:
            rows.append(
                {
                    "latent": latent,
                    "problem": "not identified" if moments < loadings else "weak",
                    "reason": f"a single child ({children[0]!r}): its loading is confounded "
                    "with the child's own noise",
                    "remedy": remedy,
                }
            )
        elif moments < loadings:
            normal = [
                c
                for c in children
                if family_of(scm.specs[c]).additive_noise  # type: ignore[arg-type]
            ]
            detail = (
                f"{len(normal)} Normal indicators with free residual sds identify only the "
                "product of their loadings"
                if len(normal) == len(children) == 2 and moments == 1
                else _count_reason(scm, latent, moments, loadings)
            )
            rows.append(
                {"latent": latent, "problem": "not identified", "reason": detail, "remedy": remedy}
            )
        elif _group_levels(scm, latent) > 1 and (
            _moments(scm, latent, by_group=False)[0] < len(children)
        ):
            grouped = [c for c in children if scm.specs[c].loading_by is not None]  # type: ignore[attr-defined]
            rows.append(
                {
                    "latent": latent,
                    "problem": "weak",
                    "reason": f"identified only through the loadings of {grouped} differing "
                    "between groups: weak where they barely differ",
                    "remedy": remedy,
                }
            )
    seen: dict[frozenset[str], str] = {}
    for latent in scm.latents:
        key = frozenset(scm.children(latent))
        if key in seen:
            rows.append(
                {
                    "latent": latent,
                    "problem": "not identified",
                    "reason": f"same children as latent {seen[key]!r} ({sorted(key)}): the two "
                    "can be rotated into each other",
                    "remedy": f"merge {latent!r} and {seen[key]!r}, or give one of them a "
                    "child the other lacks",
                }
            )
        else:
            seen[key] = latent
    return pd.DataFrame(rows, columns=COLUMNS)


def message(row: pd.Series) -> str:
    """One finding as a sentence: latent, reason and remedy."""
    return (
        f"latent {row['latent']!r} is {row['problem']}: {row['reason']}; "
        f"to identify it, {row['remedy']}"
    )


def warn(scm: SCM) -> None:
    """Emit one :class:`IdentificationWarning` per finding."""
    for _, row in findings(scm).iterrows():
        warnings.warn(message(row), IdentificationWarning, stacklevel=user_stacklevel())


def convergence_hint(scm: SCM) -> str | None:
    """A sentence for a convergence warning when some latent is not identified."""
    table = findings(scm)
    if table.empty:
        return None
    names = sorted(set(table["latent"]))
    return (
        f"the SCM has identification problems ({names}; see scm.identification()), "
        "which can cause this"
    )
