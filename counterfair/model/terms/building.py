"""Building a node's bending terms: parents' kinds checked, ranges and groups learned."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from counterfair import errors
from counterfair.model.terms.bases import learn_range
from counterfair.model.terms.declare import GroupEffect, Smooth, Term, check_terms
from counterfair.model.terms.group_codes import learn_groups
from counterfair.model.terms.term import EquationTerm, ParentKind


# ---------------------------------------------------------------------- building
def parent_kind(node: str, parent: str, specs: Mapping[str, Any], label: str) -> ParentKind:
    """How a term of ``node`` reads ``parent`` (an error naming both when it cannot)."""
    from counterfair.model.families import family_of
    from counterfair.model.nodes import Latent, Observed, Protected

    spec = specs.get(parent)
    if spec is None:
        raise errors.SCMError(f"node {node!r}, term {label}: {parent!r} is not a node of the SCM")
    if isinstance(spec, Latent):
        raise errors.SCMError(
            f"node {node!r}, term {label}: {parent!r} is a latent; a latent enters linearly "
            "(group-specific loadings: loading_by=)"
        )
    if isinstance(spec, Protected):
        levels = None if spec.continuous else f"n_levels_{parent}"
        return ParentKind(parent, "codes", levels)
    assert isinstance(spec, Observed)
    if family_of(spec).parent_levels(spec) is not None:
        return ParentKind(parent, "values", f"n_levels_{parent}")
    return ParentKind(parent, "values", None)


def _binary(spec: Any) -> bool:
    return getattr(spec, "family", None) == "bernoulli"


def equation_terms(
    node: str,
    spec: Any,
    parents: Sequence[str],
    specs: Mapping[str, Any],
    predictors: str | None = None,
) -> tuple[tuple[EquationTerm, ...], ParentKind | None]:
    """The bending terms and the ``loading_by`` parent of one node, checked.

    Raises
    ------
    SCMError
        Naming the node and the term: a parent that is not a parent of the node, a
        smooth term of a binary or categorical parent, a ``by=`` that is not
        categorical, an interaction of two categorical parents; or a ``loading_by``
        that is not a categorical parent of a node with a latent parent.
    """
    from counterfair.model.nodes import Latent

    out: list[EquationTerm] = []
    for term in check_terms(node, spec.terms):
        if isinstance(term, GroupEffect) and term.column in specs:
            raise errors.SCMError(
                f"node {node!r}, term {term.label}: {term.column!r} is a node of the SCM; a "
                "group effect is by a column that is not a node (a node enters as a parent)"
            )
        if isinstance(term, Smooth) and term.dims > 2:
            raise errors.SCMError(
                f"node {node!r}, term {term.label}: an HSGP in {term.dims} dimensions is not "
                "supported (at most two parents per surface); add the parents' effects as "
                "separate terms"
            )
        if isinstance(term, Smooth) and term.dims == 2 and term.by is not None:
            raise errors.SCMError(
                f"node {node!r}, term {term.label}: by= with an HSGP surface of two parents is "
                "not supported; use an Interaction with the factor, or one surface per node"
            )
        for parent in term.parents:
            if parent not in parents:
                raise errors.SCMError(
                    f"node {node!r}, term {term.label}: {parent!r} is not a parent of {node!r} "
                    "(add the edge first)"
                )
        kinds = tuple(parent_kind(node, p, specs, term.label) for p in term.parents)
        if isinstance(term, GroupEffect):
            for kind in kinds:
                if kind.levels is not None:
                    raise errors.SCMError(
                        f"node {node!r}, term {term.label}: slope of {kind.name!r}, which is "
                        "categorical; group slopes are of numeric parents"
                    )
            out.append(EquationTerm(node, term, kinds, f"u_{node}_{term.column}", predictors))
            continue
        if isinstance(term, Smooth):
            for kind in kinds[: term.dims]:
                if kind.levels is not None or _binary(specs[kind.name]):
                    raise errors.SCMError(
                        f"node {node!r}, term {term.label}: {kind.name!r} is binary or "
                        "categorical; a smooth term needs a numeric parent (an interaction or "
                        "the parent's own level effects cover a categorical one)"
                    )
            if term.by is not None and kinds[-1].levels is None:
                raise errors.SCMError(
                    f"node {node!r}, term {term.label}: by={term.by!r} is not categorical; by= "
                    "takes a categorical protected attribute or an ordinal or categorical parent"
                )
            stem = f"{node}_{'_'.join(term.inputs)}" + (f"_by_{term.by}" if term.by else "")
            prefix = "s" if term.basis == "ps" else "gp"
            out.append(EquationTerm(node, term, kinds, f"{prefix}_{stem}", predictors))
        else:
            if kinds[0].levels is not None and kinds[1].levels is not None:
                raise errors.SCMError(
                    f"node {node!r}, term {term.label}: both parents are categorical, which is "
                    "not supported; interact a categorical parent with a numeric one"
                )
            out.append(
                EquationTerm(
                    node, term, kinds, f"beta_{node}_{term.first}_x_{term.second}", predictors
                )
            )
    by = None
    if spec.loading_by is not None:
        label = f"loading_by={spec.loading_by}"
        if spec.loading_by not in parents:
            raise errors.SCMError(
                f"node {node!r}, {label}: {spec.loading_by!r} is not a parent of {node!r}"
            )
        by = parent_kind(node, spec.loading_by, specs, label)
        if by.levels is None:
            raise errors.SCMError(
                f"node {node!r}, {label}: {spec.loading_by!r} is not categorical; loadings differ "
                "by the level of a categorical protected attribute or an ordinal or categorical "
                "parent"
            )
        if not any(isinstance(specs[p], Latent) for p in parents):
            raise errors.SCMError(
                f"node {node!r}, {label}: {node!r} has no latent parent, so it has no loading"
            )
    return tuple(out), by


def learn_terms(spec: Any, node: str, values: Mapping[str, np.ndarray]) -> Any:
    """``spec`` with the range of each smooth term learned from training values.

    ``values`` holds the training values of the node's numeric parents (protected
    continuous ones included). A term whose range was given keeps it.
    """
    terms = check_terms(node, spec.terms)
    if all(t.learned for t in terms):
        return spec
    learned: list[Term] = []
    for t in terms:
        if isinstance(t, Smooth) and not t.learned:
            x = values[t.inputs[0]] if t.dims == 1 else tuple(values[n] for n in t.inputs)
            learned.append(learn_range(node, t, x))
        elif isinstance(t, GroupEffect) and not t.learned:
            learned.append(learn_groups(node, t, values[t.column]))
        else:
            learned.append(t)
    return replace(spec, terms=tuple(learned))
