"""Validation of causal graphs (``cf.SCM``), node specs and data (``fit_data``, ``Encoding``).

Every error must name the node, column or value at fault. Expected messages are
built from the constants of :mod:`counterfair.errors`, never retyped.
"""

from __future__ import annotations

import re

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from _models import dag

import counterfair as cf
from counterfair import errors
from counterfair.model.encoding import Encoding
from counterfair.model.specs import NodeSpec, Protected
from counterfair.stan.data import fit_data


def _basic_graph() -> nx.DiGraph:
    """A -> X <- U: one protected, one latent, one Normal node."""
    return dag(
        {"A": cf.Protected(), "U": cf.Latent(), "X": cf.Normal()},
        [("A", "X"), ("U", "X")],
    )


def _exact(message: str) -> str:
    return re.escape(message)


def _around(template: str, hole: str, **fields: object) -> str:
    """Regex of ``template`` formatted with ``fields``, any text in place of ``{hole!r}``.

    Checks everything a message says except how one value is printed.
    """
    head, tail = template.split("{" + hole + "!r}")
    return re.escape(head.format(**fields)) + ".+" + re.escape(tail.format(**fields)) + "$"


# --------------------------------------------------------------------------- graph


def test_valid_graph_gives_an_scm() -> None:
    scm = cf.SCM(_basic_graph())
    assert scm.protected == ("A",)
    assert scm.latents == ("U",)
    assert scm.observed == ("X",)
    assert scm.parameter_names() == ["alpha_X", "beta_X_A", "lambda_X_U", "sigma_X"]


@pytest.mark.parametrize(
    ("graph", "type_name"),
    [(nx.Graph([("A", "X")]), "Graph"), ({"A": ["X"]}, "dict"), (None, "NoneType")],
)
def test_not_a_digraph(graph: object, type_name: str) -> None:
    with pytest.raises(
        cf.errors.SCMError, match=_exact(errors.NOT_A_DIGRAPH.format(type=type_name))
    ):
        cf.SCM(graph)  # type: ignore[arg-type]


def test_empty_graph() -> None:
    with pytest.raises(cf.errors.SCMError, match=_exact(errors.EMPTY_GRAPH)):
        cf.SCM(nx.DiGraph())


def test_cycle_is_named() -> None:
    g = dag(
        {"A": cf.Protected(), "X": cf.Normal(), "Y": cf.Normal(), "Z": cf.Normal()},
        [("A", "X"), ("X", "Y"), ("Y", "Z"), ("Z", "X")],
    )
    with pytest.raises(
        cf.errors.SCMError, match=_exact(errors.CYCLE.format(cycle="X -> Y -> Z -> X"))
    ):
        cf.SCM(g)


def test_self_loop_is_a_cycle() -> None:
    g = dag({"A": cf.Protected(), "X": cf.Normal()}, [("A", "X"), ("X", "X")])
    with pytest.raises(cf.errors.SCMError, match=_exact(errors.CYCLE.format(cycle="X -> X"))):
        cf.SCM(g)


def test_node_without_spec() -> None:
    g = _basic_graph()
    g.add_edge("X", "Y")  # Y is created by the edge, without a spec
    with pytest.raises(cf.errors.SCMError, match=_exact(errors.MISSING_SPEC.format(node="Y"))):
        cf.SCM(g)


@pytest.mark.parametrize(
    "spec",
    ["normal", cf.Normal, NodeSpec(), 3.0],
    ids=["string", "class-not-instance", "base-NodeSpec", "float"],
)
def test_unknown_family(spec: object) -> None:
    g = _basic_graph()
    g.nodes["X"]["spec"] = spec
    with pytest.raises(
        cf.errors.SCMError, match=_exact(errors.UNKNOWN_SPEC.format(node="X", spec=spec))
    ):
        cf.SCM(g)


def test_protected_node_with_a_parent() -> None:
    g = dag(
        {"A": cf.Protected(), "B": cf.Protected(), "X": cf.Normal()},
        [("X", "B"), ("A", "B"), ("A", "X")],
    )
    message = errors.PROTECTED_WITH_PARENT.format(node="B", parents=["A", "X"])
    with pytest.raises(cf.errors.SCMError, match=_exact(message)):
        cf.SCM(g)


def test_latent_node_with_a_parent() -> None:
    g = _basic_graph()
    g.add_edge("A", "U")
    message = errors.LATENT_WITH_PARENT.format(node="U", parents=["A"])
    with pytest.raises(cf.errors.SCMError, match=_exact(message)):
        cf.SCM(g)


def test_latent_without_children() -> None:
    g = _basic_graph()
    g.add_node("V", spec=cf.Latent())
    with pytest.raises(
        cf.errors.SCMError, match=_exact(errors.LATENT_WITHOUT_CHILD.format(node="V"))
    ):
        cf.SCM(g)


def test_no_protected_node() -> None:
    g = dag({"U": cf.Latent(), "X": cf.Normal()}, [("U", "X")])
    with pytest.raises(cf.errors.SCMError, match=_exact(errors.NO_PROTECTED)):
        cf.SCM(g)


@pytest.mark.parametrize(
    "name",
    [
        "my node",  # space
        "x__y",  # double underscore (reserved by Stan for generated names)
        "for",  # Stan keyword
        "target",
        "data",
        "lower",
        "N",  # size of the generated programs
        "S",
        "lambda",  # Python keyword
        "_x",
        "x_",
        "1x",
        "x-y",
        "é",
        "",
        3,
    ],
)
def test_bad_node_name(name: object) -> None:
    g = _basic_graph()
    g.add_node(name, spec=cf.Normal())
    g.add_edge("A", name)
    with pytest.raises(cf.errors.SCMError, match=_exact(errors.BAD_NODE_NAME.format(node=name))):
        cf.SCM(g)


@pytest.mark.parametrize(
    ("name", "role"),
    [
        # the loop index of the abduction program's model block
        ("s", "observed"),
        # reserved words of stanc 2.35 that validation does not list
        ("struct", "observed"),
        ("typedef", "latent"),
        ("auto", "protected"),
        ("complex_vector", "observed"),
        # the name of the generated indicators() function
        ("indicators", "observed"),
        # identifiers the generated programs declare for other nodes
        ("n_levels_A", "observed"),
        ("observe_X", "observed"),
    ],
)
def test_node_names_that_break_generated_stan_are_rejected(name: str, role: str) -> None:
    g = _basic_graph()
    if role == "protected":
        g.add_node(name, spec=cf.Protected())
        g.add_edge(name, "X")
    elif role == "latent":
        g.add_node(name, spec=cf.Latent())
        g.add_edge(name, "X")
    else:
        g.add_node(name, spec=cf.Normal())
        g.add_edges_from([("A", name), ("U", name)])
    try:
        cf.SCM(g)
    except cf.errors.SCMError as exc:
        assert repr(name) in str(exc)
    else:
        raise AssertionError(f"SCM accepted node name {name!r}")


def test_name_clash_between_a_node_and_a_parameter() -> None:
    g = _basic_graph()
    g.add_node("alpha_X", spec=cf.Normal())
    g.add_edge("A", "alpha_X")
    message = errors.NAME_CLASH.format(first="alpha_X", second="X", name="alpha_X")
    with pytest.raises(cf.errors.SCMError, match=_exact(message)):
        cf.SCM(g)


def test_bad_coding() -> None:
    with pytest.raises(cf.errors.SCMError, match=_exact(errors.BAD_CODING.format(coding="dummy"))):
        cf.SCM(_basic_graph(), coding="dummy")  # type: ignore[arg-type]


def test_unknown_node_in_a_query() -> None:
    scm = cf.SCM(_basic_graph())
    message = errors.UNKNOWN_NODE.format(node="Q", nodes=["A", "U", "X"])
    with pytest.raises(cf.errors.SCMError, match=_exact(message)):
        scm.parents("Q")


def test_scm_copies_the_graph() -> None:
    g = _basic_graph()
    scm = cf.SCM(g)
    g.add_edge("X", "A")  # later edits of the user's graph do not reach the SCM
    assert scm.parents("A") == ()
    assert nx.is_directed_acyclic_graph(scm.graph)


# --------------------------------------------------------------------------- specs


def test_prior_with_an_unknown_family() -> None:
    with pytest.raises(ValueError, match=r"unknown prior family 'foo'"):
        cf.Prior("foo", (1.0,))


def test_prior_with_the_wrong_number_of_arguments() -> None:
    with pytest.raises(ValueError, match=r"prior 'normal' takes 2 argument\(s\), got 1"):
        cf.Prior("normal", (1.0,))


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda: cf.Protected(levels=("a",)), "at least 2 levels"),
        (lambda: cf.Protected(levels=("a", "a")), "distinct"),
        (lambda: cf.Protected(levels=("a", "b"), reference="c"), "'c'"),
        (lambda: cf.Latent(scale=0.0), "scale must be positive"),
        (lambda: cf.Normal(sigma=0.0), "sigma must be positive"),
        (lambda: cf.Normal(sigma=float("inf")), "sigma must be a finite number"),
        # fuzzing found 1e308 overflowing (sigma squared) when the Stan program is written
        (lambda: cf.Normal(sigma=1e308), "magnitude at most 1e+100, got 1e+308"),
        (lambda: cf.Prior("normal", (0.0, 1e308)), "argument 2 of prior 'normal'"),
        (lambda: cf.Latent(scale=1e308), "a latent's scale must be a finite number"),
        (lambda: cf.Prior("normal", (0.0, "1")), "must be a number, got '1'"),
    ],
)
def test_invalid_spec_arguments(make, fragment: str) -> None:
    with pytest.raises(ValueError, match=re.escape(fragment)):
        make()


# --------------------------------------------------------------------------- data


def _data_scm() -> cf.SCM:
    """A protected A and latent U cause a Normal X, a Poisson C and a Bernoulli B."""
    nodes = {
        "A": cf.Protected(),
        "U": cf.Latent(),
        "X": cf.Normal(),
        "C": cf.Poisson(),
        "B": cf.Bernoulli(),
    }
    edges = [(p, c) for p in ("A", "U") for c in ("X", "C", "B")]
    return cf.SCM(dag(nodes, edges))


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "A": ["a", "b", "a", "b"],
            "X": [0.1, -0.3, 1.2, 0.0],
            "C": [0, 3, 1, 7],
            "B": [0, 1, 1, 0],
        }
    )


def _encoding(scm: cf.SCM, df: pd.DataFrame) -> Encoding:
    specs = {node: scm.specs[node] for node in scm.protected}
    assert all(isinstance(s, Protected) for s in specs.values())
    return Encoding.from_data(specs, df)  # type: ignore[arg-type]


def _fit_data(df: pd.DataFrame) -> dict[str, object]:
    scm = _data_scm()
    return fit_data(scm, df, _encoding(scm, _frame()))


def test_fit_data_of_a_valid_frame() -> None:
    data = _fit_data(_frame())
    assert data["N"] == 4
    assert data["n_levels_A"] == 2
    np.testing.assert_array_equal(data["A"], [1, 2, 1, 2])
    np.testing.assert_array_equal(data["X"], [0.1, -0.3, 1.2, 0.0])
    for node in ("A", "C", "B"):
        assert np.asarray(data[node]).dtype == np.int64, node
    assert np.asarray(data["X"]).dtype == np.float64


def test_fit_data_accepts_a_boolean_bernoulli_column() -> None:
    data = _fit_data(_frame().assign(B=[False, True, True, False]))
    np.testing.assert_array_equal(data["B"], [0, 1, 1, 0])


def test_data_not_a_frame() -> None:
    scm = _data_scm()
    message = errors.NOT_A_DATAFRAME.format(type="dict")
    with pytest.raises(cf.errors.DataError, match=_exact(message)):
        fit_data(scm, _frame().to_dict(), _encoding(scm, _frame()))  # type: ignore[arg-type]


def test_data_without_rows() -> None:
    with pytest.raises(cf.errors.DataError, match=_exact(errors.EMPTY_DATA)):
        _fit_data(_frame().iloc[:0])


@pytest.mark.parametrize("column", ["A", "X", "C", "B"])
def test_data_missing_a_column(column: str) -> None:
    df = _frame().drop(columns=column)
    message = errors.MISSING_COLUMN.format(column=column, columns=list(df.columns))
    with pytest.raises(cf.errors.DataError, match=_exact(message)):
        _fit_data(df)


@pytest.mark.parametrize("column", ["A", "X", "C", "B"])
def test_nan_values(column: str) -> None:
    df = _frame()
    df[column] = df[column].astype(object)
    df.loc[[1, 3], column] = np.nan
    message = errors.NAN_COLUMNS.format(
        n=1, columns=f"{column!r} 2 (first at row 1 (0-based data rows))", complete=2, rows=4
    ) + errors.NAN_HINT
    with pytest.raises(cf.errors.DataError, match=_exact(message)):
        _fit_data(df)


def test_nan_values_in_several_columns_are_named_at_once() -> None:
    """Every column with missing values is named in one refusal, with its count and first
    row, and the number of complete rows (the user fixed one column per attempt)."""
    df = _frame().astype({"X": object, "C": object})
    df.loc[[2], "X"] = np.nan
    df.loc[[1, 2], "C"] = np.nan
    df.index = ["a", "b", "c", "d"]
    with pytest.raises(cf.errors.DataError) as info:
        _fit_data(df)
    text = str(info.value)
    assert "in 2 column(s)" in text
    assert "'X' 1 (first at index label 'c')" in text
    assert "'C' 2 (first at index label 'b')" in text
    assert "2 of 4 rows are complete" in text
    assert "missing='drop'" in text


def test_non_numeric_observed_column() -> None:
    df = _frame().assign(X=["low", "high", "low", "high"])
    message = errors.NOT_NUMERIC.format(column="X", node="X", family="normal", dtype=df["X"].dtype)
    with pytest.raises(cf.errors.DataError, match=_exact(message)):
        _fit_data(df)


def test_non_finite_value() -> None:
    df = _frame().assign(X=[0.1, 0.2, np.inf, 0.0])
    with pytest.raises(
        cf.errors.DataError, match=_around(errors.NOT_FINITE, "value", column="X", row=2)
    ):
        _fit_data(df)


@pytest.mark.parametrize(
    ("values", "row"),
    [([0, 3, 1.5, 7], 2), ([0, -1, 1, 7], 1), ([0.0, 3.0, 1.0, 6.999], 3)],
    ids=["fraction", "negative", "almost-integer"],
)
def test_poisson_needs_non_negative_integers(values: list[float], row: int) -> None:
    pattern = _around(errors.POISSON_NOT_COUNT, "value", column="C", row=row)
    with pytest.raises(cf.errors.DataError, match=pattern):
        _fit_data(_frame().assign(C=values))


@pytest.mark.parametrize(
    ("values", "row"),
    [([0, 1, 2, 0], 2), ([-1, 1, 1, 0], 0), ([0, 1, 1, 0.5], 3)],
    ids=["two", "minus-one", "half"],
)
def test_bernoulli_needs_zero_or_one(values: list[float], row: int) -> None:
    pattern = _around(errors.BERNOULLI_NOT_BINARY, "value", column="B", row=row)
    with pytest.raises(cf.errors.DataError, match=pattern):
        _fit_data(_frame().assign(B=values))


@pytest.mark.parametrize(
    ("template", "column", "values", "value", "row"),
    [
        (errors.POISSON_NOT_COUNT, "C", [0, 3, 1.5, 7], 1.5, 2),
        (errors.BERNOULLI_NOT_BINARY, "B", [0, 1, 2, 0], 2.0, 2),
        (errors.NOT_FINITE, "X", [0.1, 0.2, np.inf, 0.0], float("inf"), 2),
    ],
    ids=["poisson", "bernoulli", "not-finite"],
)
def test_bad_value_is_printed_as_a_plain_number(
    template: str, column: str, values: list[float], value: float, row: int
) -> None:
    message = template.format(column=column, value=value, row=row)
    with pytest.raises(cf.errors.DataError, match=_exact(message) + "$"):
        _fit_data(_frame().assign(**{column: values}))


# --------------------------------------------------------------------------- levels


def test_encoding_puts_the_reference_level_first() -> None:
    df = pd.DataFrame({"A": ["b", "c", "a", "b"]})
    assert Encoding.from_data({"A": cf.Protected()}, df).levels["A"] == ("a", "b", "c")
    assert Encoding.from_data({"A": cf.Protected(reference="c")}, df).levels["A"] == (
        "c",
        "a",
        "b",
    )
    categorical = df.assign(A=pd.Categorical(df["A"], categories=["c", "b", "a", "z"]))
    # categories order, levels absent from the data dropped
    assert Encoding.from_data({"A": cf.Protected()}, categorical).levels["A"] == ("c", "b", "a")


def test_encoding_needs_two_levels() -> None:
    df = pd.DataFrame({"A": ["a", "a"]})
    with pytest.raises(cf.errors.DataError, match=r"protected attribute 'A' has a single level"):
        Encoding.from_data({"A": cf.Protected()}, df)


def test_unseen_level_in_codes() -> None:
    encoding = Encoding.from_data({"A": cf.Protected()}, _frame())
    new = pd.DataFrame({"A": ["b", "a", "c"]})
    message = errors.UNSEEN_LEVEL.format(node="A", value="c", row=2, levels=["a", "b"])
    with pytest.raises(cf.errors.DataError, match=_exact(message)):
        encoding.codes(new)


def test_unseen_level_in_code() -> None:
    encoding = Encoding.from_data({"A": cf.Protected()}, _frame())
    np.testing.assert_array_equal(encoding.code("A", ["b", "a"]), [1, 0])
    message = errors.UNSEEN_LEVEL.format(node="A", value="z", row=1, levels=["a", "b"])
    with pytest.raises(cf.errors.DataError, match=_exact(message)):
        encoding.code("A", ["a", "z"])


def test_unseen_level_in_fit_data() -> None:
    scm = _data_scm()
    encoding = _encoding(scm, _frame())
    df = _frame().assign(A=["a", "b", "other", "a"])
    message = errors.UNSEEN_LEVEL.format(node="A", value="other", row=2, levels=["a", "b"])
    with pytest.raises(cf.errors.DataError, match=_exact(message)):
        fit_data(scm, df, encoding)


def test_unseen_level_names_the_row_label() -> None:
    encoding = Encoding.from_data({"A": cf.Protected()}, _frame())
    new = pd.DataFrame({"A": ["a", "c"]}, index=["first", "second"])
    message = errors.UNSEEN_LEVEL.format(node="A", value="c", row="second", levels=["a", "b"])
    with pytest.raises(cf.errors.DataError, match=_exact(message)):
        encoding.codes(new)


def test_unseen_level_integer_row_label_is_printed_plainly() -> None:
    encoding = Encoding.from_data({"A": cf.Protected()}, _frame())
    new = pd.DataFrame({"A": ["a", "c"]}, index=[10, 11])
    message = errors.UNSEEN_LEVEL.format(node="A", value="c", row=11, levels=["a", "b"])
    with pytest.raises(cf.errors.DataError, match=_exact(message)):
        encoding.codes(new)


# Small SCMs built here to exercise code generation, simulation or validation include latents
# that are not identified (e.g. two Normal children with free sds); SCM() warns about them
# (IdentificationWarning), which tests/test_identification.py checks. Not what these tests test.
pytestmark = pytest.mark.toy_latents
