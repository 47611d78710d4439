"""Does the data contradict the graph? The test of a declared SCM's implications.

:func:`falsify` derives what the graph implies over the data's columns
(:func:`counterfair.model.implications.implications`: conditional independences of its
latent projection, vanishing tetrads of latents with four or more Normal indicators, and
what is not testable), tests every implication
(:mod:`counterfair.audit.graph_tests`) and gives a verdict:

* ``"falsified"``: some implication is rejected with the family-wise error rate held at
  ``alpha`` (Holm's step-down adjustment of the p-values);
* ``"not falsified"``: the graph has testable implications and none is rejected;
* ``"not falsifiable"``: the graph implies nothing these tests can reject (Kusner's law
  school SCM: a latent behind three columns, all children of race and sex).

Beside the verdict, the permutation baseline of DoWhy's ``falsify_graph`` (dowhy.gcm):
the graph's labels are permuted among the columns ``n_permutations`` times, each
permuted graph's statements tested alike (a test is run once per statement, however
many graphs share it; the statements are DoWhy's parental triples for a graph without
latents, each column against each non-descendant that is not a parent given its parents,
and the graph's implications with latents, which DoWhy does not handle), and the share
of its statements violated at ``alpha`` compared with the given graph's:
``permutation_p`` is the share of permuted graphs that violate no more than the given
one (small: the given graph fits the data better than random ones).
``same_implications`` is the share of permuted graphs whose every statement holds in the
given graph (by d-separation: DoWhy's test of the Markov equivalence class); when it is
above ``alpha`` DoWhy calls the graph not informative.
:attr:`Falsification.dowhy_verdict` applies DoWhy's rule to these two numbers, for the
comparison with DoWhy (``benchmarks/falsify_dowhy.py``).
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from counterfair.errors import DataError, SCMError
from counterfair.inference.fit import Fit
from counterfair.model.families.categorical import Categorical
from counterfair.model.families.normal import Normal
from counterfair.model.families.ordinal import Ordinal
from counterfair.model.implications import (
    Implications,
    Independence,
    Tetrad,
    implications,
    implications_of_graph,
)
from counterfair.model.nodes import Protected
from counterfair.model.scm import SCM

from .falsification_ppc import DEFAULT_REPLICATIONS, ppc_p_values
from .falsification_result import TABLE_COLUMNS, Falsification
from .graph_tests import TestColumns, independence_test, tetrad_test

__all__ = ["falsify"]


def _holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values."""
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p)
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, (m - rank) * p[i])
        adjusted[i] = min(1.0, running)
    return adjusted


def _graph_of(
    model: SCM | nx.DiGraph, data: pd.DataFrame, latents: tuple[str, ...]
) -> tuple[nx.DiGraph, tuple[str, ...], tuple[str, ...], tuple[str, ...], frozenset[str],
           frozenset[str]]:
    """The graph, its columns, latents and protected columns, the Normal columns and the
    numeric ones."""
    if isinstance(model, SCM):
        if latents:
            raise TypeError("latents= is for a bare graph; an SCM declares its latents")
        specs = model.specs
        columns = tuple(n for n in model.nodes if n not in set(model.latents))
        categories = {n for n, s in specs.items()
                      if isinstance(s, Categorical | Ordinal)
                      or (isinstance(s, Protected) and not s.continuous)}
        normal = {n for n in model.observed if isinstance(specs[n], Normal)}
        numeric = frozenset(
            c for c in columns if c not in categories and c in data.columns
            and pd.api.types.is_numeric_dtype(data[c])  # a two-valued text column: levels
        )
        return (model.graph, columns, model.latents, model.protected, frozenset(normal),
                numeric)
    if not isinstance(model, nx.DiGraph):
        raise TypeError(f"falsify needs an SCM or a networkx.DiGraph, got {type(model).__name__}")
    try:
        cycle = nx.find_cycle(model)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        raise SCMError(
            f"the graph has a cycle through node {cycle[0][0]!r}: "
            + " -> ".join(str(e[0]) for e in cycle) + f" -> {cycle[0][0]}"
        )
    unknown = [lat for lat in latents if lat not in model]
    if unknown:
        raise SCMError(f"latents= names {unknown[0]!r}, which is not a node of the graph")
    columns = tuple(n for n in nx.topological_sort(model) if n not in set(latents))
    numeric = frozenset(c for c in columns if c in data.columns
                        and pd.api.types.is_numeric_dtype(data[c]))
    return model.copy(), columns, tuple(latents), (), numeric, numeric


def _check_data(data: pd.DataFrame, columns: tuple[str, ...]) -> None:
    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"falsify needs a pandas DataFrame, got {type(data).__name__}")
    for column in columns:
        if column not in data.columns:
            raise DataError(f"node {column!r} has no column in the data; columns: "
                            f"{list(data.columns)}")
        values = data[column]
        if values.isna().any():
            raise DataError(f"column {column!r} has {int(values.isna().sum())} missing "
                            "values: drop or impute them before testing the graph")
        if values.nunique() < 2:
            raise DataError(f"column {column!r} (node {column!r}) is constant: no "
                            "implication about it can be tested")


def falsify(
    model: SCM | nx.DiGraph | Fit,
    data: pd.DataFrame | None = None,
    *,
    alpha: float = 0.05,
    n_permutations: int = 20,
    latents: tuple[str, ...] | list[str] = (),
    seed: int = 0,
    n_replications: int = DEFAULT_REPLICATIONS,
) -> Falsification:
    """Test the implications of a declared graph on data, with a verdict.

    Parameters
    ----------
    model : SCM, networkx.DiGraph or Fit
        The declared SCM (its latents are its latent nodes), a bare DAG whose nodes are
        columns (but ``latents``), or a fitted SCM: then its training rows are tested
        (``data`` must not be given) and each implication also gets its posterior
        predictive p-value under the fit (``ppc_p``, :mod:`counterfair.audit.
        falsification_ppc`).
    data : pandas.DataFrame
        A column per protected attribute and observed node; no missing values.
    alpha : float
        The family-wise error rate of the verdict and the level of each violation in the
        permutation baseline.
    n_permutations : int
        Random relabellings of the graph for the baseline (DoWhy's default is
        ``1 / alpha``); 0 for none.
    latents : sequence of str
        With a bare graph: its unobserved nodes.
    seed : int
        Seed of the permutations (and of the replications).
    n_replications : int
        With a fit: the replicated data sets of the posterior predictive check.

    Returns
    -------
    Falsification
        The verdict and its reasons, the table of implications and tests, what is not
        testable and the permutation baseline.

    Raises
    ------
    DataError
        A node with no column, a column with missing values or constant, fewer rows than
        a test needs (each naming the node or column).
    SCMError
        A bare graph with a cycle (naming a node on it).
    """
    fit = model if isinstance(model, Fit) else None
    if fit is not None:
        if data is not None:
            raise TypeError("falsify of a Fit tests its training rows: drop data= (or "
                            "pass fit.scm and the rows to test them without the fit)")
        model, data = fit.scm, fit.data
    elif data is None:
        raise TypeError("falsify needs the rows to test: data=")
    if not 0 < float(alpha) < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int) \
            or n_permutations < 0:
        raise ValueError(f"n_permutations must be a non-negative integer, got {n_permutations!r}")
    graph, columns, latent_nodes, protected, normal, numeric = _graph_of(
        model, data, tuple(latents)
    )
    _check_data(data, columns)
    given = (implications(model) if isinstance(model, SCM) else implications_of_graph(
        graph, columns=columns, latents=latent_nodes, protected=protected, normal=normal))
    encoded = TestColumns(data, numeric, columns)
    cache: dict[object, float] = {}
    rows = _tested(given, encoded, cache)
    table = pd.DataFrame(rows, columns=[c for c in TABLE_COLUMNS
                                        if c not in ("p_holm", "rejected", "ppc_p")])
    table["p_holm"] = _holm(table["p_value"].to_numpy(dtype=float))
    table["rejected"] = table["p_holm"] < alpha
    table["ppc_p"] = (ppc_p_values(fit, given, numeric, n_draws=n_replications, seed=seed)
                      if fit is not None and len(table) else np.nan)
    table = table[list(TABLE_COLUMNS)]
    baseline = _permutations(graph, given, columns, latent_nodes, protected, normal, encoded,
                             cache, alpha=float(alpha), n=n_permutations, seed=seed)
    return Falsification(
        table=table, implications=given, alpha=float(alpha), n_rows=len(data), **baseline,
    )


def _tested(given: Implications, encoded: TestColumns, cache: dict[object, float]
            ) -> list[dict[str, Any]]:
    statements: list[Independence | Tetrad] = [*given.independences, *given.tetrads]
    return [_test(statement, encoded, cache) for statement in statements]


def _key(statement: Independence | Tetrad) -> object:
    if isinstance(statement, Independence):
        return ("independence", *statement.key())
    a, b, c, d = statement.indicators
    return ("tetrad", frozenset((frozenset((a, b)), frozenset((c, d)))),
            frozenset((frozenset((a, c)), frozenset((b, d)))), frozenset(statement.given))


def _test(statement: Independence | Tetrad, encoded: TestColumns,
          cache: dict[object, float]) -> dict[str, Any]:
    if isinstance(statement, Independence):
        statistic, df, p = independence_test(encoded, statement.node, statement.others,
                                             statement.given)
        row = {"kind": "independence", "statement": str(statement),
               "statistic": statistic, "df": df, "p_value": p}
    else:
        z, p = tetrad_test(encoded, statement.indicators, statement.given)
        row = {"kind": "tetrad", "statement": str(statement), "statistic": z, "df": 1,
               "p_value": p}
    cache[_key(statement)] = p
    return row


def _p_value(statement: Independence | Tetrad, encoded: TestColumns,
             cache: dict[object, float]) -> float:
    key = _key(statement)
    if key not in cache:
        _test(statement, encoded, cache)
    return cache[key]


def _baseline_statements(
    graph: nx.DiGraph, implied: Implications, latents: tuple[str, ...],
) -> list[Independence | Tetrad]:
    """The statements the permutation baseline counts: for a graph without latents,
    DoWhy's parental triples (each column against each non-descendant that is not a
    parent, given its parents, both ways round for two non-descendants of each other);
    with latents, which DoWhy does not handle, the graph's own implications."""
    if latents:
        return [*implied.independences, *implied.tetrads]
    out: list[Independence | Tetrad] = []
    for node in implied.columns:
        parents = tuple(sorted(graph.predecessors(node)))
        excluded = nx.descendants(graph, node) | {node} | set(parents)
        for other in sorted(set(implied.columns) - excluded):
            out.append(Independence(node, (other,), parents))
    return out


def _share(statements: list[Independence | Tetrad], encoded: TestColumns,
           cache: dict[object, float], alpha: float) -> float:
    p = [_p_value(s, encoded, cache) for s in statements]
    return float(np.mean(np.asarray(p) <= alpha)) if p else 0.0


def _permutations(
    graph: nx.DiGraph, given: Implications, columns: tuple[str, ...],
    latents: tuple[str, ...], protected: tuple[str, ...], normal: frozenset[str],
    encoded: TestColumns, cache: dict[object, float], *, alpha: float, n: int, seed: int,
) -> dict[str, Any]:
    """DoWhy's baseline: the share of violations of randomly relabelled graphs, and the
    share of those whose every statement holds in the given graph."""
    own = _baseline_statements(graph, given, latents)
    share = _share(own, encoded, cache, alpha)
    if n == 0 or len(given) == 0:
        return {"violated_share": share, "permutation_shares": (),
                "permutation_p": float("nan"), "same_implications": float("nan")}
    rng = np.random.default_rng(seed)
    shares, same = [], 0
    tetrads = set(given.tetrads)
    for _ in range(n):
        mapping = dict(zip(columns, rng.permutation(columns), strict=True))
        permuted = nx.relabel_nodes(graph, mapping, copy=True)
        moved = implications_of_graph(
            permuted, columns=columns, latents=latents, protected=protected, normal=normal,
        )
        statements = _baseline_statements(permuted, moved, latents)
        # DoWhy's informativeness: a relabelled graph all of whose statements hold in the
        # given one (by d-separation) is no different as far as the tests can tell
        same += all(
            nx.is_d_separator(graph, {i.node}, set(i.others), set(i.given))
            for i in statements if isinstance(i, Independence)
        ) and all(t in tetrads for t in statements if isinstance(t, Tetrad))
        shares.append(_share(statements, encoded, cache, alpha))
    values = np.asarray(shares)
    return {"violated_share": share, "permutation_shares": tuple(shares),
            "permutation_p": float(np.mean(values <= share)),
            "same_implications": same / n}
