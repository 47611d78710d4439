"""Exact queries on finite discrete SCMs (counterfair.DiscreteSCM), checked against
closed forms (a textbook example) and a hand-written brute-force enumeration."""

from __future__ import annotations

import itertools
from fractions import Fraction

import networkx as nx
import pandas as pd
import pytest

import counterfair as cf

HALF = Fraction(1, 2)


def textbook(p: Fraction | float = HALF) -> cf.DiscreteSCM:
    """U, U0, U1, UX ~ Bernoulli(p); X := UX; Y := X max(U, U1) + (1 - X) max(U, U0)."""
    g = nx.DiGraph([("U", "Y"), ("U0", "Y"), ("U1", "Y"), ("UX", "X"), ("X", "Y")])
    for node in ("U", "U0", "U1", "UX"):
        g.nodes[node]["spec"] = cf.DiscreteNoise({0: 1 - p, 1: p})
    g.nodes["X"]["spec"] = cf.Deterministic(lambda UX: UX, levels=[0, 1])
    g.nodes["Y"]["spec"] = cf.Deterministic(
        lambda X, U, U0, U1: X * max(U, U1) + (1 - X) * max(U, U0), levels=[0, 1]
    )
    return cf.DiscreteSCM(g)


def test_textbook_numbers_are_exact_fractions() -> None:
    m = textbook()
    posterior = m.query("U", given={"X": 1, "Y": 1})
    assert posterior[1] == Fraction(2, 3) and isinstance(posterior[1], Fraction)
    assert posterior[0] == Fraction(1, 3)
    interventional = m.query("Y", do={"X": 0})
    assert interventional[0] == Fraction(1, 4)
    counterfactual = m.query("Y", given={"X": 1, "Y": 1}, do={"X": 0})
    assert counterfactual[0] == Fraction(1, 6)
    assert counterfactual[1] == Fraction(5, 6)
    assert counterfactual.dtype == object
    assert list(counterfactual.index) == [0, 1] and counterfactual.index.name == "Y"


def test_float_probabilities_give_the_same_numbers() -> None:
    m = textbook(0.5)
    posterior = m.query("U", given={"X": 1, "Y": 1})
    assert isinstance(posterior[1], float)
    assert abs(posterior[1] - 2 / 3) < 1e-12
    assert abs(m.query("Y", do={"X": 0})[0] - 0.25) < 1e-12
    assert abs(m.query("Y", given={"X": 1, "Y": 1}, do={"X": 0})[0] - 1 / 6) < 1e-12


def test_do_without_evidence_is_not_conditioning() -> None:
    """P(Y=0 | X=0) differs from P(Y=0 | do(X=0)) only when X and Y share noise; here
    they do not, so both are 1/4, while the counterfactual given X=1, Y=1 is 1/6."""
    m = textbook()
    assert m.query("Y", given={"X": 0})[0] == Fraction(1, 4)
    # X=1, Y=0 forces U=U1=0 and leaves U0 ~ Bernoulli(1/2): P(Y_{X<-0}=0 | X=1, Y=0) = 1/2
    assert m.query("Y", given={"X": 1, "Y": 0}, do={"X": 0})[0] == HALF


# --------------------------------------------------------------------- brute force
P_A = {0: Fraction(1, 3), 1: Fraction(1, 6), 2: Fraction(1, 2)}
P_B = {"lo": Fraction(2, 5), "hi": Fraction(3, 5)}
P_C = {0: Fraction(1, 4), 1: Fraction(3, 4)}


def f_m(A: int, B: str) -> int:
    return (A + (1 if B == "hi" else 0)) % 3


def f_z(M: int, C: int) -> str:
    return "yes" if M + C >= 2 else "no"


def f_w(M: int, Z: str, C: int) -> int:
    return min(2, M * C + (Z == "yes"))


def second_scm() -> cf.DiscreteSCM:
    g = nx.DiGraph([("A", "M"), ("B", "M"), ("M", "Z"), ("C", "Z"), ("M", "W")])
    g.add_edges_from([("Z", "W"), ("C", "W")])
    g.nodes["A"]["spec"] = cf.DiscreteNoise(P_A)
    g.nodes["B"]["spec"] = cf.DiscreteNoise(P_B)
    g.nodes["C"]["spec"] = cf.DiscreteNoise(P_C)
    g.nodes["M"]["spec"] = cf.Deterministic(f_m, levels=[0, 1, 2])
    g.nodes["Z"]["spec"] = cf.Deterministic(f_z, levels=["no", "yes"])
    g.nodes["W"]["spec"] = cf.Deterministic(f_w, levels=[0, 1, 2])
    return cf.DiscreteSCM(g)


def brute_force(given: dict, do: dict, target: str) -> dict:
    """Pearl's three steps written out for the second SCM."""

    def world(a: int, b: str, c: int, setting: dict) -> dict:
        v = {"A": a, "B": b, "C": c}
        v.update({k: x for k, x in setting.items() if k in v})
        v["M"] = setting.get("M", f_m(v["A"], v["B"]))
        v["Z"] = setting.get("Z", f_z(v["M"], v["C"]))
        v["W"] = setting.get("W", f_w(v["M"], v["Z"], v["C"]))
        return v

    mass: dict = {}
    evidence = Fraction(0)
    for a, b, c in itertools.product(P_A, P_B, P_C):
        p = P_A[a] * P_B[b] * P_C[c]
        factual = world(a, b, c, {})
        if any(factual[k] != x for k, x in given.items()):
            continue
        evidence += p
        value = world(a, b, c, do)[target]
        mass[value] = mass.get(value, 0) + p
    return {k: v / evidence for k, v in mass.items()}


@pytest.mark.parametrize(
    ("target", "given", "do"),
    [
        ("W", {}, {}),
        ("W", {}, {"M": 2}),
        ("Z", {"W": 1}, {"M": 0}),
        ("W", {"Z": "yes", "M": 1}, {"M": 2}),
        ("A", {"W": 2}, {}),
        ("W", {"W": 0}, {"C": 1}),
        ("M", {"Z": "no"}, {"A": 2}),
        ("W", {"A": 1, "Z": "no"}, {"A": 0}),
        ("C", {"C": 1, "W": 2}, {"M": 1}),
        ("M", {"W": 1}, {"M": 1}),
    ],
)
def test_matches_brute_force_enumeration(target: str, given: dict, do: dict) -> None:
    got = second_scm().query(target, given=given, do=do)
    expected = brute_force(given, do, target)
    assert sum(got) == 1
    for level, prob in got.items():
        assert prob == expected.get(level, 0), (level, prob, expected)
    assert set(expected) <= set(got.index)


def test_mixed_float_and_fraction_probabilities_give_floats() -> None:
    g = nx.DiGraph([("U", "X"), ("V", "X")])
    g.nodes["U"]["spec"] = cf.DiscreteNoise({0: Fraction(1, 3), 1: Fraction(2, 3)})
    g.nodes["V"]["spec"] = cf.DiscreteNoise({0: 0.25, 1: 0.75})
    g.nodes["X"]["spec"] = cf.Deterministic(lambda U, V: U * V, levels=[0, 1])
    result = cf.DiscreteSCM(g).query("X")
    assert isinstance(result[1], float)
    assert abs(result[1] - 0.5) < 1e-12


def test_evidence_on_a_zero_probability_noise_level_is_refused() -> None:
    g = nx.DiGraph([("U", "X")])
    g.nodes["U"]["spec"] = cf.DiscreteNoise({0: Fraction(0), 1: Fraction(1)})
    g.nodes["X"]["spec"] = cf.Deterministic(lambda U: U, levels=[0, 1])
    m = cf.DiscreteSCM(g)
    assert list(m.query("X")) == [0, 1]
    with pytest.raises(cf.errors.DataError, match=r"given=\{'U': 0\} has probability 0"):
        m.query("X", given={"U": 0}, do={"U": 1})


def test_mapping_call_style_allows_non_identifier_names() -> None:
    g = nx.DiGraph([("noise u", "out put")])
    g.nodes["noise u"]["spec"] = cf.DiscreteNoise({0: Fraction(1, 3), 1: Fraction(2, 3)})
    g.nodes["out put"]["spec"] = cf.Deterministic(
        lambda v: 2 * v["noise u"], levels=[0, 2], call="mapping"
    )
    result = cf.DiscreteSCM(g).query("out put")
    assert result[2] == Fraction(2, 3)


def test_irrelevant_noise_is_not_enumerated() -> None:
    g = nx.DiGraph([("U", "X")])
    g.nodes["U"]["spec"] = cf.DiscreteNoise({0: HALF, 1: HALF})
    g.nodes["X"]["spec"] = cf.Deterministic(lambda U: U, levels=[0, 1])
    for i in range(30):  # 2**30 joint states in all, but none bears on X
        g.add_node(f"N{i}", spec=cf.DiscreteNoise({0: HALF, 1: HALF}))
    assert cf.DiscreteSCM(g).query("X", max_states=2)[1] == HALF


# --------------------------------------------------------------------- bad input
def one_node(spec: object) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_node("U", spec=spec)
    return g


@pytest.mark.parametrize(
    ("probabilities", "message"),
    [
        ({0: Fraction(1, 2), 1: Fraction(1, 3)}, r"'U'.*sum to 5/6"),
        ({0: Fraction(3, 2), 1: Fraction(-1, 2)}, r"'U'.*negative"),
        ({0: 0.5, 1: 0.4}, r"'U'.*sum to 0\.9"),
        ({0: 0.5, 1: "half"}, r"'U'.*finite float or Fraction"),
        ({}, r"'U' has no levels"),
    ],
)
def test_bad_noise_probabilities_name_the_node(probabilities: dict, message: str) -> None:
    with pytest.raises(cf.errors.SCMError, match=message):
        cf.DiscreteSCM(one_node(cf.DiscreteNoise(probabilities)))


def test_float_sum_within_tolerance_is_accepted() -> None:
    m = cf.DiscreteSCM(one_node(cf.DiscreteNoise({0: 0.1, 1: 0.2, 2: 0.7 + 1e-12})))
    assert abs(sum(m.query("U")) - 1) < 1e-9


def test_bad_graphs_and_specs() -> None:
    with pytest.raises(cf.errors.SCMError, match="'U' has no spec"):
        cf.DiscreteSCM(one_node(None))
    with pytest.raises(cf.errors.SCMError, match=r"'U' has spec .*only DiscreteNoise"):
        cf.DiscreteSCM(one_node(cf.Normal()))
    g = nx.DiGraph([("X", "U")])
    g.nodes["X"]["spec"] = cf.DiscreteNoise({0: 1})
    g.nodes["U"]["spec"] = cf.DiscreteNoise({0: 1})
    with pytest.raises(cf.errors.SCMError, match=r"noise node 'U' has parent\(s\) \['X'\]"):
        cf.DiscreteSCM(g)
    g = nx.DiGraph([("X", "Y"), ("Y", "X")])
    with pytest.raises(cf.errors.SCMError, match="cycle"):
        cf.DiscreteSCM(g)
    g = nx.DiGraph([("U", "age group"), ("age group", "Y")])
    g.nodes["U"]["spec"] = cf.DiscreteNoise({0: 1})
    g.nodes["age group"]["spec"] = cf.Deterministic(lambda v: 0, levels=[0], call="mapping")
    g.nodes["Y"]["spec"] = cf.Deterministic(lambda **kw: 0, levels=[0])
    with pytest.raises(cf.errors.SCMError, match=r"node 'Y': parent 'age group'.*call='mapping'"):
        cf.DiscreteSCM(g)
    with pytest.raises(cf.errors.SCMError, match="repeat"):
        cf.DiscreteSCM(one_node(cf.Deterministic(lambda: 0, levels=[0, 0])))
    with pytest.raises(cf.errors.SCMError, match="callable"):
        cf.Deterministic(3, levels=[0])  # type: ignore[arg-type]


def test_mechanism_errors_name_node_and_parent_values() -> None:
    g = nx.DiGraph([("U", "X")])
    g.nodes["U"]["spec"] = cf.DiscreteNoise({0: HALF, 1: HALF})
    g.nodes["X"]["spec"] = cf.Deterministic(lambda U: 1 / U, levels=[1])
    with pytest.raises(cf.errors.SCMError, match=r"node 'X' raised ZeroDivisionError.*\{'U': 0\}"):
        cf.DiscreteSCM(g).query("X")
    g.nodes["X"]["spec"] = cf.Deterministic(lambda U: U + 5, levels=[5])
    with pytest.raises(
        cf.errors.SCMError, match=r"node 'X' returned 6 for parent values \{'U': 1\}.*levels \[5\]"
    ):
        cf.DiscreteSCM(g).query("X")


def test_bad_queries_name_what_is_wrong() -> None:
    m = textbook()
    with pytest.raises(cf.errors.DataError, match=r"target 'Q' is not a node.*'UX'"):
        m.query("Q")
    with pytest.raises(cf.errors.DataError, match=r"given names 'Q' is not a node.*'X'"):
        m.query("Y", given={"Q": 1})
    with pytest.raises(cf.errors.DataError, match=r"do names 'Q' is not a node"):
        m.query("Y", do={"Q": 1})
    with pytest.raises(cf.errors.DataError, match=r"given sets 'X' to 3.*levels \[0, 1\]"):
        m.query("Y", given={"X": 3})
    with pytest.raises(cf.errors.DataError, match=r"do sets 'X' to 2.*levels \[0, 1\]"):
        m.query("Y", do={"X": 2})
    with pytest.raises(cf.errors.DataError, match="probability 0"):
        m.query("Y", given={"X": 0, "UX": 1})
    with pytest.raises(cf.errors.SCMError, match=r"needs 16 joint noise states.*max_states=15"):
        m.query("Y", max_states=15)
    assert isinstance(m.query("Y", max_states=16), pd.Series)
    with pytest.raises(cf.errors.DataError, match="max_states"):
        m.query("Y", max_states=0)


@pytest.mark.toy_latents  # a toy latent
def test_stan_scm_refuses_discrete_specs_and_exact_queries() -> None:
    """cf.SCM (the Stan pipeline) names a discrete node it cannot compile, and its query
    names the node that is not finite; the discrete model answers the same question."""
    g = nx.DiGraph([("race", "Y"), ("U", "Y")])
    g.nodes["race"]["spec"] = cf.Protected()
    g.nodes["U"]["spec"] = cf.DiscreteNoise({0: HALF, 1: HALF})
    g.nodes["Y"]["spec"] = cf.Normal()
    with pytest.raises(
        cf.errors.SCMError, match=r"node 'U' has spec DiscreteNoise.*cf\.DiscreteSCM"
    ):
        cf.SCM(g)
    g.nodes["U"]["spec"] = cf.Latent()
    g.nodes["Y"]["spec"] = cf.Deterministic(lambda race, U: U, levels=[0, 1])
    with pytest.raises(
        cf.errors.SCMError, match=r"node 'Y' has spec Deterministic.*compiled to Stan"
    ):
        cf.SCM(g)
    g.nodes["Y"]["spec"] = cf.Normal()
    glm = cf.SCM(g)
    with pytest.raises(cf.errors.SCMError, match=r"node 'U' has spec Latent, which is not finite"):
        glm.query("Y", given={"race": 0})


def test_scm_of_a_finite_graph_is_the_discrete_scm_and_queries_exactly() -> None:
    """cf.SCM(g).query(...) as the issue writes it: the textbook counterfactual is 1/6."""
    g = nx.DiGraph([("U", "Y"), ("U0", "Y"), ("U1", "Y"), ("UX", "X"), ("X", "Y")])
    for node in ("U", "U0", "U1", "UX"):
        g.nodes[node]["spec"] = cf.DiscreteNoise({0: HALF, 1: HALF})
    g.nodes["X"]["spec"] = cf.Deterministic(lambda UX: UX, levels=[0, 1])
    g.nodes["Y"]["spec"] = cf.Deterministic(
        lambda X, U, U0, U1: X * max(U, U1) + (1 - X) * max(U, U0), levels=[0, 1]
    )
    scm = cf.SCM(g)
    assert isinstance(scm, cf.DiscreteSCM)
    assert scm.query("Y", given={"X": 1, "Y": 1}, do={"X": 0})[0] == Fraction(1, 6)
    assert scm.query("Y", do={"X": 0})[0] == Fraction(1, 4)
    with pytest.raises(cf.errors.SCMError, match="takes no option"):
        cf.SCM(g, coding="onehot")
