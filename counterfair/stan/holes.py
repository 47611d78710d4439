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
  (``<design>_f``). Integrating ``node_mis`` out of the joint posterior is what NUTS's
  marginal over the parameters does;
* a **summed** node (Bernoulli, categorical, ordinal, with children) is summed out of
  each row that misses it: its equation and its children's enter those rows as
  ``log_sum_exp`` over its levels of the node's and the children's log densities, the
  rows that hold it as usual (``obs_node``, and ``obs_child`` for each child); the
  generated quantities draw each missing value from its posterior given the row
  (``node_draw``), for the later stages.

A latent whose children (or the parents of its children) have missing values is sampled
directly: neither anchored on its Normal children (:mod:`counterfair.stan.anchoring`)
nor integrated out (:mod:`counterfair.stan.integrated`), whose closed forms assume every
row holds every child. :func:`touched_latents` names them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from counterfair.model.scm import SCM
    from counterfair.rows.rows import Rows

__all__ = [
    "data_lines",
    "draw_name",
    "fill_lines",
    "filled",
    "hole_data",
    "mis_name",
    "parameter_lines",
    "program_plan",
    "subset_nodes",
    "summed_children",
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


def draw_name(node: str) -> str:
    """The generated quantity of a summed node's missing values, drawn per row."""
    return f"{node}_draw"


def data_lines(scm: SCM, holes: Mapping[str, str]) -> list[str]:
    """Data block: the rows each subset statement covers (:func:`subset_nodes`); the rows
    that miss a sampled node, with the location and scale of its observed values; the
    rows that miss a summed node, with which of them hold each child that has holes."""
    lines = []
    for node in subset_nodes(scm, holes):
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


def fill_lines(
    holes: Mapping[str, str],
    designs: Mapping[str, tuple[str, tuple[str, ...]]],
    width: Mapping[str, str],
) -> list[str]:
    """Model block: each sampled node filled in (``node_full``), and each design matrix
    that holds a sampled node's column copied with the missing values in (``<design>_f``).

    ``designs``: design name -> (its first user, its column blocks); ``width``: block ->
    its number of columns (Stan).
    """
    lines = []
    for node, kind in holes.items():
        if kind == "sample":
            lines += [
                f"vector[N] {filled(node)} = {node};  // {node} with its missing values",
                f"{filled(node)}[mis_{node}] = {mis_name(node)};",
            ]
    for name, (_, blocks) in designs.items():
        sampled = [b for b in blocks if holes.get(b) == "sample"]
        if not sampled:
            continue
        total = " + ".join(width[b] for b in blocks)
        lines.append(f"matrix[N, {total}] {name}_f = {name};  // {name} with missing values in")
        for node in sampled:
            before = blocks[: blocks.index(node)]
            column = " + ".join(["1", *(width[b] for b in before)])
            lines.append(f"{name}_f[mis_{node}, {column}] = {mis_name(node)};")
    return [_INDENT + line for line in lines]


def hole_data(scm: SCM, rows: Rows, holes: Mapping[str, str]) -> dict[str, object]:
    """The data of :func:`data_lines` for ``rows`` (1-based row numbers, as Stan counts)."""
    out: dict[str, object] = {}
    values = rows.values(list(holes), holes=True)
    n = len(rows)
    none = np.zeros(n, dtype=bool)
    for node in subset_nodes(scm, holes):
        # a sampled node's own missing rows stay (their values are parameters)
        own = none if holes.get(node) == "sample" else rows.holes.get(node, none)
        gone = np.asarray(own, dtype=bool).copy()
        for term in scm.equations[node].observed:
            if holes.get(term.parent) == "sum":
                gone |= np.asarray(rows.holes[term.parent], dtype=bool)
        held = np.flatnonzero(~gone) + 1
        out[f"N_obs_{node}"] = int(held.size)
        out[f"obs_{node}"] = held.astype(np.int64)
    for node, kind in holes.items():
        mask = np.asarray(rows.holes[node], dtype=bool)
        if kind == "omit":
            continue
        where = np.flatnonzero(mask) + 1
        out[f"N_mis_{node}"] = int(where.size)
        out[f"mis_{node}"] = where.astype(np.int64)
        if kind == "sum":
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
