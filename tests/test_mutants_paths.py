"""Path-specific counterfactuals against a closed form (tools/mutation.py, module paths).

In the linear-Gaussian part of the mediator SCM (tests/_mutant_models.py) a node's
value in a path context is its factual value plus its coefficients times the changes
of its inputs in that context: the level of A seen along the path, and its observed
parents, each evaluated in its own longer context. A plain recursion over the paths
(no memo, no depth cut) gives every counterfactual; the library's memoised evaluation
must agree to rounding for every set of unfair paths. The Poisson node C is checked
by its monotone coupling. Path checks and path finders are checked by enumeration.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import pytest
from _mutant_models import TRUTH, mediator_abduction, mediator_data, mediator_scm
from _seeds import shifted

from counterfair import errors
from counterfair.counterfactual import paths as pth
from counterfair.rng import RowRandom

NORMAL = ("M", "L", "Z", "Y")
PARENTS = {"M": (), "L": (), "Z": ("M",), "Y": ("M", "L", "Z")}
A_PARENT = {"M": True, "L": True, "Z": False, "Y": True}


def coefficient(node: str, parent: str) -> float:
    value = TRUTH[f"beta_{node}_{parent}"]
    return float(value[0] if isinstance(value, list) else value)


def reference(factual: dict[str, np.ndarray], a: np.ndarray,
              seen: Callable[[tuple[str, ...]], np.ndarray]) -> dict[str, np.ndarray]:
    """Every Normal node's path-specific value, by recursion over the full paths."""

    def value(tau: tuple[str, ...]) -> np.ndarray:
        node = tau[0]
        out = factual[node].copy()
        if A_PARENT[node]:
            out = out + coefficient(node, "A") * (seen(("A", *tau)) - a)
        for parent in PARENTS[node]:
            out = out + coefficient(node, parent) * (value((parent, *tau)) - factual[parent])
        return out

    return {node: value((node,)) for node in NORMAL}


def unfair(paths: Sequence[tuple[str, ...]], new: np.ndarray,
           old: np.ndarray) -> Callable[[tuple[str, ...]], np.ndarray]:
    def seen(path: tuple[str, ...]) -> np.ndarray:
        return new if any(path[: len(t)] == t for t in paths) else old
    return seen


PATH_SETS: list[list[tuple[str, ...]]] = [
    [], [("A", "M")], [("A", "L")], [("A", "Y")], [("A", "M", "Y")], [("A", "M", "Z")],
    [("A", "M", "Z", "Y")], [("A", "M", "Y"), ("A", "L", "Y")], [("A", "C")],
    [("A", "M"), ("A", "L"), ("A", "Y"), ("A", "C")],
]


@pytest.mark.parametrize("unfair_paths", PATH_SETS, ids=str)
def test_path_specific_values_match_the_recursion(unfair_paths: list[tuple[str, ...]]) -> None:
    fit, ab = mediator_abduction()
    frame = fit.counterfactual(None, {"A": "1"}, abduction=ab, unfair_paths=unfair_paths,
                               seed=shifted(7))
    s, n = ab.n_samples, len(ab.data)
    cf_world = frame[frame["world"] == "counterfactual"]
    fact_world = frame[frame["world"] == "factual"]
    assert len(cf_world) == len(fact_world) == s * n
    assert frame.attrs["unfair_paths"] == [list(p) for p in unfair_paths]
    assert frame.attrs["coupling"] == "monotone" and frame.attrs["do"] == {"A": "1"}
    assert frame.attrs["simulated"] == []
    assert (cf_world["A"].astype(str) == "1").all()
    assert (fact_world["A"].astype(str).to_numpy() == ab.data["A"].astype(str).tolist() * s).all()
    a = ab.codes["A"].astype(float)
    factual = {k: np.broadcast_to(ab.observed[k], (s, n)).astype(float) for k in NORMAL}
    want = reference(factual, a, unfair(unfair_paths, np.ones(n), a))
    for node in NORMAL:
        got = cf_world[node].to_numpy().reshape(s, n)
        np.testing.assert_allclose(got, want[node], rtol=1e-10, atol=1e-10, err_msg=node)
        np.testing.assert_allclose(fact_world[node].to_numpy().reshape(s, n), factual[node])
    # the Normal noise is the unit's, in both worlds
    for node in NORMAL:
        assert np.array_equal(cf_world[f"{node}:noise"].to_numpy(),
                              fact_world[f"{node}:noise"].to_numpy())
    c_fact = np.broadcast_to(ab.observed["C"], (s, n))
    c_cf = cf_world["C"].to_numpy().reshape(s, n)
    reaches_c = any(p[:2] in (("A", "C"), ("A", "M")) and (len(p) == 2 or p[2] == "C")
                    for p in unfair_paths)
    if not reaches_c:
        assert np.array_equal(c_cf, c_fact)
    else:
        # rows already at A = 1 do not move; the others move up (both effects positive)
        assert np.array_equal(c_cf[:, a == 1], c_fact[:, a == 1])
        assert (c_cf[:, a == 0] >= c_fact[:, a == 0]).all()


def test_total_effect_on_the_discrete_node_dominates_one_path() -> None:
    """The Poisson noise is shared across contexts: adding a path can only add to C."""
    fit, ab = mediator_abduction(40)
    c = {}
    for name, paths in {"direct": [("A", "C")], "both": [("A", "C"), ("A", "M")],
                        "none": []}.items():
        frame = fit.counterfactual(None, {"A": "1"}, abduction=ab, unfair_paths=paths,
                                   seed=shifted(7))
        c[name] = frame.loc[frame["world"] == "counterfactual", "C"].to_numpy()
    assert (c["both"] >= c["direct"]).all() and (c["direct"] >= c["none"]).all()
    assert (c["both"] > c["direct"]).any() and (c["direct"] > c["none"]).any()
    total = fit.counterfactual(None, {"A": "1"}, abduction=ab, seed=shifted(7))
    np.testing.assert_array_equal(
        total.loc[total["world"] == "counterfactual", "C"].to_numpy(), c["both"])


def test_first_matching_layer_wins() -> None:
    fit, ab = mediator_abduction()
    scm = fit.scm
    s, n = ab.n_samples, len(ab.data)
    a = ab.codes["A"]
    ones, zeros = np.ones(n, dtype=a.dtype), np.zeros(n, dtype=a.dtype)
    layers = [([("A", "M")], zeros), ([("A", "M"), ("A", "L")], ones)]
    got = pth.path_specific_values(scm, ab, source="A", layers=layers, default_codes=a,
                                 rng=RowRandom(shifted(1), ab.row_positions))
    factual = {k: np.broadcast_to(ab.observed[k], (s, n)).astype(float) for k in NORMAL}

    def seen(path: tuple[str, ...]) -> np.ndarray:
        if path[:2] == ("A", "M"):
            return zeros.astype(float)
        if path[:2] == ("A", "L"):
            return ones.astype(float)
        return a.astype(float)

    want = reference(factual, a.astype(float), seen)
    for node in NORMAL:
        np.testing.assert_allclose(got[node], want[node], rtol=1e-10, atol=1e-10)
    assert np.array_equal(got["U"], ab.latents["U"])
    # with a numpy Generator as the noise source, the Normal nodes are the same
    again = pth.path_specific_values(scm, ab, source="A", layers=layers, default_codes=a,
                                   rng=np.random.default_rng(shifted(2)))
    for node in NORMAL:
        np.testing.assert_allclose(again[node], got[node], rtol=1e-12)


def test_no_change_is_the_factual_world() -> None:
    fit, ab = mediator_abduction()
    a = ab.codes["A"]
    got = pth.path_specific_values(fit.scm, ab, source="A", layers=[([("A", "M")], a)],
                                 default_codes=a, rng=RowRandom(shifted(1), ab.row_positions))
    for node in (*NORMAL, "C"):
        assert np.array_equal(got[node], np.broadcast_to(ab.observed[node], got[node].shape))


def test_check_paths_errors_and_tuples() -> None:
    scm = mediator_scm()
    assert pth.check_paths(scm, "A", [["A", "M", "Y"], ("A", "L")]) == (("A", "M", "Y"),
                                                                        ("A", "L"))
    assert pth.check_paths(scm, "A", []) == ()
    with pytest.raises(errors.SCMError) as info:
        pth.check_paths(scm, "A", ["A"])
    assert str(info.value) == pth.SHORT_PATH.format(path=("A",))
    with pytest.raises(errors.SCMError) as info:
        pth.check_paths(scm, "A", [("A", "Q")])
    assert str(info.value) == pth.UNKNOWN_PATH_NODE.format(path=("A", "Q"), node="Q")
    with pytest.raises(errors.SCMError) as info:
        pth.check_paths(scm, "A", [("M", "Y")])
    assert str(info.value) == pth.WRONG_SOURCE.format(path=("M", "Y"), source="A")
    with pytest.raises(errors.SCMError) as info:
        pth.check_paths(scm, "A", [("A", "M"), ("A", "Z", "Y")])
    assert str(info.value) == pth.NOT_AN_EDGE.format(path=("A", "Z", "Y"), edge="A -> Z")


def test_path_source_and_do_source() -> None:
    scm = mediator_scm()
    assert pth.path_source(scm, [("A", "M"), ("A", "L")]) == "A"
    with pytest.raises(errors.SCMError) as info:
        pth.path_source(scm, [])
    assert str(info.value) == pth.SHORT_PATH.format(path=())
    with pytest.raises(errors.SCMError) as info:
        pth.path_source(scm, [()])
    assert str(info.value) == pth.SHORT_PATH.format(path=())
    with pytest.raises(errors.SCMError) as info:
        pth.path_source(scm, [("M", "Y")])
    assert str(info.value) == pth.NOT_PROTECTED.format(path=("M", "Y"), node="M",
                                                     protected=["A"])
    with pytest.raises(errors.SCMError) as info:
        pth.path_source(scm, [("A", "M"), ("M", "Y")])
    assert str(info.value) == pth.WRONG_SOURCE.format(path=("M", "Y"), source="A")
    assert pth._do_source(scm, {"A": "1"}) == "A"
    for do in ({"A": "1", "M": 0.0}, {"M": 0.0}, {}):
        with pytest.raises(errors.SCMError) as info:
            pth._do_source(scm, do)
        assert str(info.value) == pth.PATHS_DO.format(nodes=list(do))


def test_redraw_and_bad_do_are_refused() -> None:
    fit, ab = mediator_abduction()
    with pytest.raises(errors.SCMError) as info:
        pth.path_specific_frame(fit, ab, {"A": "1"}, [("A", "M")], coupling="redraw")
    assert str(info.value) == pth.PATHS_REDRAW
    with pytest.raises(errors.SCMError, match="does not start at the intervened"):
        pth.path_specific_frame(fit, ab, {"A": "1"}, [("M", "Y")])


def test_per_row_do_values_are_listed() -> None:
    fit, ab = mediator_abduction()
    n = len(ab.data)
    levels = np.array(["1", "0"] * (n // 2), dtype=object)
    frame = pth.path_specific_frame(fit, ab, {"A": levels}, [("A", "M")], seed=shifted(3))
    assert frame.attrs["do"] == {"A": list(levels)}
    s = ab.n_samples
    a = ab.codes["A"].astype(float)
    new = (levels == "1").astype(float)
    factual = {k: np.broadcast_to(ab.observed[k], (s, n)).astype(float) for k in NORMAL}
    want = reference(factual, a, unfair([("A", "M")], new, a))
    cf_world = frame[frame["world"] == "counterfactual"]
    for node in NORMAL:
        np.testing.assert_allclose(cf_world[node].to_numpy().reshape(s, n), want[node],
                                   rtol=1e-10, atol=1e-10)


def test_mediator_and_direct_paths_by_enumeration() -> None:
    scm = mediator_scm()
    assert pth.mediator_paths(scm, "A", ["M"]) == (("A", "M"),)
    assert pth.mediator_paths(scm, "A", ["Z"]) == (("A", "M", "Z"),)
    # the path to Z through M is cut at M
    assert pth.mediator_paths(scm, "A", ["Z", "M"]) == (("A", "M"),)
    assert set(pth.mediator_paths(scm, "A", ["Y"])) == {
        ("A", "Y"), ("A", "M", "Y"), ("A", "L", "Y"), ("A", "M", "Z", "Y")}
    assert pth.mediator_paths(scm, "A", ["U"]) == ()
    assert pth.mediator_paths(scm, "A", []) == ()
    assert set(pth.direct_paths(scm, "A", ["M"], ["Y"])) == {("A", "Y"), ("A", "L", "Y")}
    assert set(pth.direct_paths(scm, "A", ["L"], ["Y", "C"])) == {
        ("A", "Y"), ("A", "M", "Y"), ("A", "M", "Z", "Y"), ("A", "C"), ("A", "M", "C")}
    assert pth.direct_paths(scm, "A", ["M"], ["M"]) == ()
    assert pth.direct_paths(scm, "A", [], ["U"]) == ()
    assert set(pth.direct_paths(scm, "A", ["Z"], ["Y"])) == {
        ("A", "Y"), ("A", "M", "Y"), ("A", "L", "Y")}
    assert pth.shared_prefix(scm, [("A", "L")], ["Y"]) == ("L", "Y")
    assert pth.shared_prefix(scm, [("A", "Y"), ("A", "M")], ["Z"]) == ("M", "Z")
    assert pth.shared_prefix(scm, [("A", "Y")], ["M"]) is None
    assert pth.shared_prefix(scm, [], ["M"]) is None


def test_a_string_path_is_one_node_and_shared_prefix_reads_the_end() -> None:
    scm = mediator_scm()
    with pytest.raises(errors.SCMError) as info:
        pth.check_paths(scm, "A", ["AM"])
    assert str(info.value) == pth.SHORT_PATH.format(path=("AM",))
    assert pth.shared_prefix(scm, [("A", "M", "Z")], ["Y"]) == ("Z", "Y")


def test_frame_index_and_a_node_absent_from_the_rows() -> None:
    """Z and Y missing from the rows are simulated in the factual world; the closed form holds
    with the simulated values as the factual ones."""
    fit, _ = mediator_abduction()
    rows = mediator_data().drop(columns=["Z", "Y"])
    ab = fit.abduct(rows, condition_on=["M", "L"], engine="exact", n_samples=4,
                    seed=shifted(5))
    paths = [("A", "M", "Z"), ("A", "L", "Y")]
    frame = pth.path_specific_frame(fit, ab, {"A": "1"}, paths, seed=shifted(9))
    assert frame.index.equals(pd.RangeIndex(len(frame)))
    assert frame.attrs["simulated"] == ["Y", "Z"]
    s, n = ab.n_samples, len(ab.data)
    fact_world = frame[frame["world"] == "factual"]
    cf_world = frame[frame["world"] == "counterfactual"]
    factual = {k: fact_world[k].to_numpy().reshape(s, n) for k in NORMAL}
    assert not np.allclose(factual["Z"], factual["Z"][0])  # simulated per sample
    a = ab.codes["A"].astype(float)
    want = reference(factual, a, unfair(paths, np.ones(n), a))
    for node in NORMAL:
        np.testing.assert_allclose(cf_world[node].to_numpy().reshape(s, n), want[node],
                                   rtol=1e-10, atol=1e-10, err_msg=node)
