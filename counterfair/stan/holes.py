"""Missing values in the fit program (``SCM.fit(missing="model")``): the Stan pieces.

The plan comes from :func:`counterfair.rows.missing.hole_plan`: node -> ``"omit"`` or
``"sample"``. Under missing at random the fit's likelihood is the density of what each
row holds, the missing values integrated out:

* an **omitted** node (no children) is sampled on the rows that hold it only,
  ``node[obs_node] ~ ...`` with its design and latent terms read at ``obs_node``: the
  density of a node over all its values is one, so the rows where it is missing drop
  out of its term and keep their other terms;
* a **sampled** node (Normal, with children) has its missing values as parameters,
  ``node_mis`` (on the scale of its observed values: offset ``loc_node``, multiplier
  ``scl_node``); the model block fills them into ``node_full``, which its own equation
  samples, and into the column ``node`` takes in each child's design matrix
  (its rows that miss a sampled parent, ``fill_<child>``, get a small design with the
  parameters in, the others keep their data design, ``keep_<child>``). Integrating
  ``node_mis`` out of the joint posterior is what NUTS's marginal over the parameters
  does;
* a **summed** node (Bernoulli, categorical, ordinal, with children) is summed out of
  each row that misses it: its equation and its children's enter those rows as
  ``log_sum_exp`` over its levels of the node's and the children's log densities, the
  rows that hold it as usual (``obs_node``, and ``obs_child`` for each child); the
  generated quantities draw each missing value from its posterior given the row
  (``node_draw``), for the later stages. A count (Poisson, negative binomial) is summed
  over ``0..K_node`` (:func:`counterfair.rows.missing.count_bound`); the generated
  quantities also give the largest posterior share of ``K_node`` over the rows
  (``node_top``), which the fit checks.

A latent whose children (or the parents of its children) have missing values is sampled
directly: neither anchored on its Normal children (:mod:`counterfair.stan.anchoring`)
nor integrated out (:mod:`counterfair.stan.integrated`), whose closed forms assume every
row holds every child. :func:`touched_latents` names them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from counterfair.rows.missing import COUNT_FAMILIES, count_bound

if TYPE_CHECKING:
    from counterfair.model.scm import SCM
    from counterfair.rows.validated import Rows

__all__ = [
    "data_lines",
    "draw_name",
    "fill_lines",
    "filled",
    "hole_data",
    "mis_name",
    "parameter_lines",
    "program_plan",
    "sampled_parents",
    "split_nodes",
    "subset_nodes",
    "summed_children",
    "summed_count",
    "top_name",
    "touched_latents",
]

_INDENT = "  "


def mis_name(node: str) -> str:
    """The fit program's parameter of ``node``'s missing values."""
    return f"{node}_mis"


def filled(node: str) -> str:
    """The model block's vector of ``node`` with its missing values filled in."""
    return f"{node}_full"


def program_plan(holes: Mapping[str, str] | None) -> dict[str, str]:
    """The plan as the program needs it: node -> kind, in a fixed (sorted) order, so that
    the same plan always gives the same text."""
    given = dict(holes or {})
    return {node: given[node] for node in sorted(given)}


def touched_latents(scm: SCM, holes: Mapping[str, str]) -> dict[str, str]:
    """Latents the program must sample directly -> the node with missing values that
    forces it (a child of the latent, or a sampled parent of such a child)."""
    out: dict[str, str] = {}
    for latent in scm.latents:
        for child in scm.children(latent):
            eq = scm.equations.get(child)
            if eq is None:
                continue
            if child in holes:
                out.setdefault(latent, child)
            for term in eq.observed:
                if holes.get(term.parent) in ("sample", "sum"):
                    out.setdefault(latent, term.parent)
    return out


def subset_nodes(scm: SCM, holes: Mapping[str, str]) -> tuple[str, ...]:
    """Nodes whose usual statement covers a subset of the rows, ``obs_<node>``: omitted
    and summed nodes (the rows that hold them) and the children of summed nodes (the
    rows that hold them and their summed parent), in the SCM's order."""
    summed = [n for n, kind in holes.items() if kind == "sum"]
    wanted = {n for n, kind in holes.items() if kind in ("omit", "sum")}
    for node in summed:
        wanted.update(c for c in scm.children(node) if c in scm.equations)
    return tuple(n for n in scm.observed if n in wanted)


def summed_children(scm: SCM, node: str) -> tuple[str, ...]:
    """The observed children of a summed node, in the SCM's order."""
    return tuple(c for c in scm.observed if c in scm.children(node))


def summed_count(scm: SCM, node: str) -> bool:
    """Whether the summed ``node`` is a count, summed over ``0..K_node``."""
    return scm.equations[node].spec.family in COUNT_FAMILIES


def top_name(node: str) -> str:
    """The generated quantity of a summed count: the largest posterior share of its last
    count ``K_node`` over the rows that miss it (the truncation's check)."""
    return f"{node}_top"


def draw_name(node: str) -> str:
    """The generated quantity of a summed node's missing values, drawn per row."""
    return f"{node}_draw"


def data_lines(scm: SCM, holes: Mapping[str, str]) -> list[str]:
    """Data block: the rows each subset statement covers (:func:`subset_nodes`); the rows
    that miss a sampled node, with the location and scale of its observed values; the
    rows that miss a summed node, with which of them hold each child that has holes."""
    lines = []
    split = split_nodes(scm, holes)
    for node in split:
        lines += [
            f"int<lower=0, upper=N> N_keep_{node};  // rows of {node} whose design is data",
            f"array[N_keep_{node}] int<lower=1, upper=N> keep_{node};",
            f"int<lower=0, upper=N> N_fill_{node};  // rows of {node} where a sampled "
            "parent is missing",
            f"array[N_fill_{node}] int<lower=1, upper=N> fill_{node};",
        ]
        for parent in sampled_parents(scm, holes, node):
            lines += [
                f"int<lower=0, upper=N> N_at_{node}_{parent};  // rows of fill_{node} that "
                f"miss {parent}",
                f"array[N_at_{node}_{parent}] int<lower=1, upper=N_fill_{node}> "
                f"at_{node}_{parent};  // their positions in fill_{node}",
                f"array[N_at_{node}_{parent}] int<lower=1, upper=N> which_{node}_{parent};"
                f"  // and in {mis_name(parent)}",
            ]
    for node in subset_nodes(scm, holes):
        if node in split:
            continue
        lines += [
            f"int<lower=0, upper=N> N_obs_{node};  // rows of the usual statement of {node}",
            f"array[N_obs_{node}] int<lower=1, upper=N> obs_{node};  // which rows (the "
            f"others miss {node} or a summed parent)",
        ]
    for node, kind in holes.items():
        if kind == "sample":
            lines += [
                f"int<lower=1, upper=N> N_mis_{node};  // rows where {node} is missing",
                f"array[N_mis_{node}] int<lower=1, upper=N> mis_{node};  // which rows miss "
                f"{node} (their values are parameters)",
                f"real loc_{node};  // mean of the observed values of {node} (sampler scale "
                "only)",
                f"real<lower=0> scl_{node};  // sd of the observed values of {node} (sampler "
                "scale only)",
            ]
        elif kind == "sum":
            lines += [
                f"int<lower=1, upper=N> N_mis_{node};  // rows where {node} is missing",
                f"array[N_mis_{node}] int<lower=1, upper=N> mis_{node};  // which rows miss "
                f"{node} (summed over its levels)",
            ]
            if summed_count(scm, node):
                lines.append(
                    f"int<lower=0> K_{node};  // the largest count of {node} summed over"
                )
            for child in summed_children(scm, node):
                if holes.get(child) == "omit":
                    lines.append(
                        f"array[N_mis_{node}] int<lower=0, upper=1> has_{child}_{node};  "
                        f"// whether each row that misses {node} holds {child}"
                    )
    return [_INDENT + line for line in lines]


def parameter_lines(holes: Mapping[str, str]) -> list[str]:
    """Parameters block: the missing values of every sampled node."""
    return [
        f"{_INDENT}vector<offset=loc_{node}, multiplier=scl_{node}>[N_mis_{node}] "
        f"{mis_name(node)};  // the missing values of {node}"
        for node, kind in holes.items()
        if kind == "sample"
    ]


def fill_lines(holes: Mapping[str, str]) -> list[str]:
    """Each sampled node with its missing values filled in, ``node_full`` (model block and
    generated quantities)."""
    lines = []
    for node, kind in holes.items():
        if kind == "sample":
            lines += [
                f"vector[N] {filled(node)} = {node};  // {node} with its missing values",
                f"{filled(node)}[mis_{node}] = {mis_name(node)};",
            ]
    return [_INDENT + line for line in lines]


def split_nodes(scm: SCM, holes: Mapping[str, str]) -> tuple[str, ...]:
    """Equations that read a sampled node: their usual statement is split into the rows
    whose design is data (``keep_<node>``) and the rows where a sampled parent is missing
    (``fill_<node>``, a small design with the parameters filled in), so that the GLM never
    differentiates with respect to a whole design matrix."""
    return tuple(
        n for n in scm.observed
        if any(holes.get(t.parent) == "sample" for t in scm.equations[n].observed)
    )


def sampled_parents(scm: SCM, holes: Mapping[str, str], node: str) -> tuple[str, ...]:
    """The sampled parents of ``node``, in its equation's order."""
    return tuple(
        t.parent for t in scm.equations[node].observed if holes.get(t.parent) == "sample"
    )


def _usual_rows(scm: SCM, rows: Rows, holes: Mapping[str, str], node: str) -> np.ndarray:
    """Rows of ``node``'s usual statement: not those where it is left out or summed, nor
    those where a summed parent is missing (a sampled node keeps its own missing rows)."""
    gone = np.zeros(len(rows), dtype=bool)
    if holes.get(node) in ("omit", "sum"):
        gone |= np.asarray(rows.holes[node], dtype=bool)
    for term in scm.equations[node].observed:
        if holes.get(term.parent) == "sum":
            gone |= np.asarray(rows.holes[term.parent], dtype=bool)
    return ~gone


def hole_data(scm: SCM, rows: Rows, holes: Mapping[str, str]) -> dict[str, object]:
    """The data of :func:`data_lines` for ``rows`` (1-based row numbers, as Stan counts)."""
    out: dict[str, object] = {}
    values = rows.values(list(holes), holes=True)
    n = len(rows)
    split = split_nodes(scm, holes)
    for node in subset_nodes(scm, holes):
        if node in split:
            continue
        held = np.flatnonzero(_usual_rows(scm, rows, holes, node)) + 1
        out[f"N_obs_{node}"] = int(held.size)
        out[f"obs_{node}"] = held.astype(np.int64)
    for node in split:
        usual = _usual_rows(scm, rows, holes, node)
        parents = sampled_parents(scm, holes, node)
        some = np.zeros(n, dtype=bool)
        for parent in parents:
            some |= np.asarray(rows.holes[parent], dtype=bool)
        keep = np.flatnonzero(usual & ~some)
        fill = np.flatnonzero(usual & some)
        out[f"N_keep_{node}"], out[f"keep_{node}"] = int(keep.size), keep + 1
        out[f"N_fill_{node}"], out[f"fill_{node}"] = int(fill.size), fill + 1
        for parent in parents:
            mask = np.asarray(rows.holes[parent], dtype=bool)
            where = np.flatnonzero(mask[fill])  # positions in fill_<node>
            rank = np.cumsum(mask) - 1  # a missing row's position in <parent>_mis
            out[f"N_at_{node}_{parent}"] = int(where.size)
            out[f"at_{node}_{parent}"] = where + 1
            out[f"which_{node}_{parent}"] = rank[fill[where]] + 1
    for node, kind in holes.items():
        mask = np.asarray(rows.holes[node], dtype=bool)
        if kind == "omit":
            continue
        where = np.flatnonzero(mask) + 1
        out[f"N_mis_{node}"] = int(where.size)
        out[f"mis_{node}"] = where.astype(np.int64)
        if kind == "sum":
            if summed_count(scm, node):
                out[f"K_{node}"] = count_bound(values[node][~mask])
            for child in summed_children(scm, node):
                if holes.get(child) == "omit":
                    has = ~np.asarray(rows.holes[child], dtype=bool)[mask]
                    out[f"has_{child}_{node}"] = has.astype(np.int64)
            continue
        seen = values[node][~mask]
        out[f"loc_{node}"] = float(seen.mean())
        sd = float(seen.std())
        out[f"scl_{node}"] = sd if sd > 0 else 1.0
    return out
