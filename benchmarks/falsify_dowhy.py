"""Issue 47: ``cf.falsify`` beside DoWhy 0.14's ``falsify_graph``, and its speed.

**Comparison** (needs dowhy in the benchmark's environment, not the package's:
``pip install dowhy==0.14``). For each repetition ``r``, a random latent-free DAG of 6
nodes (each edge of a random order present with probability 0.4, weights of size 0.5 to
1 with random signs) and 2,000 rows of linear-Gaussian data; the true graph and a wrong
one (one of its edges removed, so that it implies a false independence). Both packages
run on the same data with the same conditional independence test (counterfair's
generalised covariance measure, handed to DoWhy as its ``conditional_independence_test``)
and 20 permutations at level 0.05; printed: the verdicts of DoWhy, of counterfair's
DoWhy rule on its own baseline (:attr:`~counterfair.audit.falsification_result.
Falsification.dowhy_verdict`) and of counterfair's own Holm verdict, and how often the
first two agree. They differ by design in the statements tested (DoWhy tests each node
against each of its non-descendants given its parents, both ways round; counterfair one
statement per non-adjacent pair, the later node against the earlier) and in the random
permutations.

**Speed** (``--speed``): a random DAG of 20 nodes (edge probability 0.15) on 100,000
rows, 20 permutations; the time against issue 47's 60 s target.

**Size and power** (``--size-power``): the rejection rate of the verdict over
``--reps`` data sets of each simulated truth of ``tests/test_falsify.py``.

    python benchmarks/falsify_dowhy.py [--reps 20] [--speed | --size-power] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd


def random_dag(n_nodes: int, p: float, rng: np.random.Generator) -> nx.DiGraph:
    names = [f"v{i}" for i in range(n_nodes)]
    order = list(rng.permutation(names))
    graph = nx.DiGraph()
    graph.add_nodes_from(names)
    for i, child in enumerate(order):
        for parent in order[:i]:
            if rng.random() < p:
                graph.add_edge(parent, child,
                               weight=float(rng.choice([-1, 1]) * rng.uniform(0.5, 1.0)))
    return graph


def simulate(graph: nx.DiGraph, n: int, rng: np.random.Generator) -> pd.DataFrame:
    values: dict[str, np.ndarray] = {}
    for node in nx.topological_sort(graph):
        total = rng.normal(size=n)
        for parent in graph.predecessors(node):
            total = total + graph[parent][node]["weight"] * values[parent]
        values[node] = total / np.sqrt(1 + len(list(graph.predecessors(node))))
    return pd.DataFrame(values)[sorted(graph.nodes)]


def our_test(x: np.ndarray, y: np.ndarray, z: np.ndarray | None = None) -> float:
    """counterfair's generalised covariance measure, in DoWhy's calling convention."""
    from counterfair.audit.graph_tests import TestColumns, independence_test

    frame = {"x": np.ravel(x), "y": np.ravel(y)}
    given = []
    if z is not None:
        z = np.asarray(z).reshape(len(frame["x"]), -1)
        for j in range(z.shape[1]):
            frame[f"z{j}"] = z[:, j]
            given.append(f"z{j}")
    data = pd.DataFrame(frame)
    return independence_test(TestColumns(data, frozenset(data.columns)), "x", ["y"], given)[2]


def dowhy_verdict(result: Any) -> str:
    if not result.can_evaluate:
        return "not falsifiable"
    if not result.falsifiable:
        return "not falsifiable"
    return "falsified" if result.falsified else "not falsified"


def compare(reps: int) -> dict[str, Any]:
    from dowhy.gcm.falsify import falsify_graph

    import counterfair as cf

    records = []
    for r in range(reps):
        rng = np.random.default_rng(r)
        graph = random_dag(6, 0.4, rng)
        while graph.number_of_edges() < 3:
            graph = random_dag(6, 0.4, rng)
        data = simulate(graph, 2000, rng)
        edges = list(graph.edges)
        wrong = graph.copy()
        wrong.remove_edge(*edges[int(rng.integers(len(edges)))])
        for kind, g in (("true", graph), ("wrong", wrong)):
            bare = nx.DiGraph(g.edges)
            bare.add_nodes_from(g.nodes)
            ours = cf.falsify(bare, data, n_permutations=20, seed=r)
            np.random.seed(r)  # noqa: NPY002 - DoWhy permutes with numpy's global generator
            theirs = falsify_graph(bare, data, independence_test=our_test,
                                   conditional_independence_test=our_test,
                                   significance_level=0.05, significance_ci=0.05,
                                   n_permutations=20, show_progress_bar=False)
            records.append({"rep": r, "graph": kind, "edges": g.number_of_edges(),
                            "holm": ours.verdict, "ours_dowhy_rule": ours.dowhy_verdict,
                            "dowhy": dowhy_verdict(theirs)})
            print(records[-1], flush=True)
    table = pd.DataFrame(records)
    summary = {}
    for kind, block in table.groupby("graph"):
        summary[str(kind)] = {
            column: block[column].value_counts().to_dict()
            for column in ("holm", "ours_dowhy_rule", "dowhy")
        }
        summary[str(kind)]["agreement"] = float(
            (block["ours_dowhy_rule"] == block["dowhy"]).mean())
    return {"records": records, "summary": summary}


def speed() -> dict[str, Any]:
    import counterfair as cf

    rng = np.random.default_rng(0)
    graph = random_dag(20, 0.15, rng)
    data = simulate(graph, 100_000, rng)
    bare = nx.DiGraph(graph.edges)
    bare.add_nodes_from(graph.nodes)
    started = time.perf_counter()
    result = cf.falsify(bare, data, n_permutations=20, seed=0)
    seconds = time.perf_counter() - started
    print(f"20 nodes, {graph.number_of_edges()} edges, 100,000 rows: {len(result.table)} "
          f"implications, verdict {result.verdict}; {seconds:.1f} s "
          f"({seconds / 60:.2f}x the 60 s target)")
    return {"nodes": 20, "edges": graph.number_of_edges(), "rows": 100_000,
            "implications": len(result.table), "verdict": result.verdict,
            "seconds": seconds, "ratio": seconds / 60}


def size_power(reps: int) -> dict[str, Any]:
    """The verdict's rejection rate on the simulated truths of ``tests/test_falsify.py``."""
    import sys

    import counterfair as cf

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_falsify import CHAIN, chain_data, factor_data, factor_scm

    cases = {
        "chain, true (a curved edge)": (lambda rng: chain_data(800, rng), CHAIN),
        "chain missing a -> c (weight 0.3)": (lambda rng: chain_data(800, rng, extra=0.3),
                                              CHAIN),
        "one factor, four indicators, true": (lambda rng: factor_data(800, rng),
                                              factor_scm()),
        "residual correlation 0.5 of two indicators (800 rows)": (
            lambda rng: factor_data(800, rng, residual=0.5), factor_scm()),
        "residual correlation 0.5 of two indicators (1,500 rows)": (
            lambda rng: factor_data(1500, rng, residual=0.5), factor_scm()),
        "latent moved by the protected attribute": (
            lambda rng: factor_data(800, rng, latent_on_group=1.0), factor_scm()),
    }
    out = {}
    for name, (make, model) in cases.items():
        rng = np.random.default_rng(100)
        rejected = [cf.falsify(model, make(rng), n_permutations=0).verdict == "falsified"
                    for _ in range(reps)]
        rate = float(np.mean(rejected))
        out[name] = {"rate": rate, "se": float(np.sqrt(rate * (1 - rate) / reps)),
                     "reps": reps}
        print(f"{name:<58} {rate:.3f} +- {out[name]['se']:.3f}", flush=True)
    return {"size_power": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--speed", action="store_true", help="the speed benchmark only")
    parser.add_argument("--size-power", action="store_true",
                        help="the size and power table only (--reps data sets per case)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    stem = ("falsify_speed" if args.speed else "falsify_size_power" if args.size_power
            else "falsify_dowhy")
    out = Path(args.out or Path(__file__).parent / "results" / f"{stem}.json")
    if args.speed:
        result = speed()
    elif args.size_power:
        result = size_power(args.reps)
    else:
        result = compare(args.reps)
    if "summary" in result:
        for kind, counts in result["summary"].items():
            print(kind, json.dumps(counts))
    result["machine"] = platform.platform()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str))
    print(f"written {out}")


if __name__ == "__main__":
    main()
