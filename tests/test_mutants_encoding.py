"""Protected levels and codes, case by case (tools/mutation.py, module encoding).

Every branch of :class:`Encoding` on small frames whose levels, codes and errors are
written out by hand: level order (reference first), implicit levels from categoricals
and from sorted values, the refusal of numeric columns with many values, codes and
their inverse, continuous attributes and their number checks.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from counterfair import errors
from counterfair.model.encoding import Encoding, _check_implicit_levels, _levels_from_column
from counterfair.model.nodes import MAX_IMPLICIT_LEVELS, Protected


def exactly(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern for the whole message and nothing else."""
    return "^" + re.escape(message) + "$"



def test_levels_from_sorted_values_and_from_categories() -> None:
    assert _levels_from_column(pd.Series(["b", "a", "c", "a"])) == ("a", "b", "c")
    assert _levels_from_column(pd.Series([2, 10, 1])) == ("1", "10", "2")  # sorted as str
    cat = pd.Series(pd.Categorical(["y", "x", "y"], categories=["z", "y", "x", "w"]))
    # the categories' order, only those present
    assert _levels_from_column(cat) == ("y", "x")


def test_from_data_orders_reference_first() -> None:
    data = pd.DataFrame({"a": ["m", "f", "m", "x"], "b": ["1", "0", "0", "1"],
                         "age": [20.0, 30.0, 40.0, 50.0]})
    specs = {"a": Protected(reference="m"), "b": Protected(levels=("1", "0")),
             "age": Protected(kind="continuous")}
    enc = Encoding.from_data(specs, data)
    assert enc.levels == {"a": ("m", "f", "x"), "b": ("1", "0")}
    assert enc.continuous == frozenset({"age"})
    assert enc.nodes == ("a", "b", "age")
    assert enc.n_levels("a") == 3 and enc.n_levels("b") == 2
    assert enc.is_continuous("age") and not enc.is_continuous("a")
    # no reference: the first level found is the reference
    enc2 = Encoding.from_data({"a": Protected()}, data)
    assert enc2.levels["a"] == ("f", "m", "x")
    # declared levels win over the data (a level absent from the data is kept)
    enc3 = Encoding.from_data({"a": Protected(levels=("x", "m", "f", "q"), reference="f")},
                              data)
    assert enc3.levels["a"] == ("f", "x", "m", "q")
    assert Encoding(levels={}).continuous == frozenset()


def test_nodes_sorts_the_continuous_ones_after_the_categorical() -> None:
    enc = Encoding(levels={"z": ("0", "1"), "a": ("0", "1")},
                   continuous=frozenset({"y", "b"}))
    assert enc.nodes == ("z", "a", "b", "y")


def test_a_single_level_is_refused() -> None:
    data = pd.DataFrame({"a": ["m", "m"]})
    with pytest.raises(errors.DataError, match=exactly(
            "protected attribute 'a' has a single level ('m',) in the data; "
            "it needs at least 2 (or declare Protected(levels=[...]) (or make the column a "
            "pandas Categorical))")):
        Encoding.from_data({"a": Protected()}, data)
    from counterfair.logs import speaking_scm_file

    with speaking_scm_file(), pytest.raises(errors.DataError, match=exactly(
            "protected attribute 'a' has a single level ('m',) in the data; it needs at "
            "least 2 (or declare its levels in the SCM file (a: {family: protected, levels: "
            "[...]}))")):
        Encoding.from_data({"a": Protected()}, data)


def test_numeric_columns_with_many_values_are_refused_without_levels() -> None:
    many = pd.Series(np.arange(MAX_IMPLICIT_LEVELS + 1) * 1.5 + 3)
    with pytest.raises(errors.DataError) as info:
        _check_implicit_levels("age", many)
    message = str(info.value)
    assert message.startswith("protected attribute 'age' is a numeric column with 11 distinct")
    assert "(e.g. 3.0, 4.5, 6.0, ...)" in message
    with pytest.raises(errors.DataError, match="with 11 distinct values"):
        Encoding.from_data({"age": Protected()}, pd.DataFrame({"age": many}))
    # exactly the limit is allowed, and so are strings, booleans and categoricals
    _check_implicit_levels("age", pd.Series(np.arange(MAX_IMPLICIT_LEVELS)))
    _check_implicit_levels("s", pd.Series([str(i) for i in range(30)]))
    _check_implicit_levels("c", pd.Series(pd.Categorical(np.arange(30))))
    _check_implicit_levels("b", pd.Series([True, False] * 10))
    # declared levels skip the check
    enc = Encoding.from_data({"age": Protected(levels=tuple(str(v) for v in many))},
                             pd.DataFrame({"age": many}))
    assert enc.n_levels("age") == 11
    # repeated values count once
    _check_implicit_levels("r", pd.Series(list(range(MAX_IMPLICIT_LEVELS)) * 3))


def test_examples_of_integers_are_shown_as_python_numbers() -> None:
    many = pd.Series(np.arange(20, 40, dtype=np.int64))
    with pytest.raises(errors.DataError, match=r"\(e\.g\. 20, 21, 22, \.\.\.\)"):
        _check_implicit_levels("age", many)


def test_code_and_decode_are_inverse() -> None:
    enc = Encoding(levels={"a": ("m", "f", "x")})
    codes = enc.code("a", ["f", "m", "x", "x"])
    assert codes.dtype == np.int64 and codes.tolist() == [1, 0, 2, 2]
    assert enc.code("a", np.array([["x"], ["m"]])).tolist() == [2, 0]  # raveled
    assert enc.decode("a", codes).tolist() == ["f", "m", "x", "x"]
    column = enc.column("a", codes)
    assert isinstance(column, pd.Categorical)
    assert list(column.categories) == ["m", "f", "x"] and list(column) == ["f", "m", "x", "x"]
    # values compared by str(): integers find their string levels
    enc2 = Encoding(levels={"b": ("1", "0")})
    assert enc2.code("b", [0, 1, 1]).tolist() == [1, 0, 0]


def test_unseen_level_names_value_row_and_levels() -> None:
    enc = Encoding(levels={"a": ("m", "f")})
    with pytest.raises(errors.DataError) as info:
        enc.code("a", ["m", "f", "q", "z"], index=pd.Index([10, 11, 12, 13]))
    assert str(info.value) == errors.UNSEEN_LEVEL.format(
        node="a", value="q", row=12, levels=["m", "f"])
    with pytest.raises(errors.DataError, match=r"level 'q' \(row 2\)"):
        enc.code("a", ["m", "f", "q"])
    with pytest.raises(errors.DataError, match=r"level 7 \(row 'r1'\)"):
        enc.code("a", np.array([7], dtype=object), index=pd.Index(["r1"]))


def test_codes_of_a_frame() -> None:
    enc = Encoding(levels={"a": ("m", "f")}, continuous=frozenset({"age"}))
    data = pd.DataFrame({"a": ["f", "m"], "age": [1.5, 2.0], "y": [0, 1]},
                        index=[5, 6])
    codes = enc.codes(data)
    assert list(codes) == ["a", "age"]
    assert codes["a"].tolist() == [1, 0] and codes["age"].tolist() == [1.5, 2.0]
    with pytest.raises(errors.DataError, match=r"row 6"):
        enc.codes(pd.DataFrame({"a": ["f", "q"], "age": [1.0, 2.0]}, index=[5, 6]))


def test_continuous_codes_are_checked_numbers() -> None:
    enc = Encoding(levels={}, continuous=frozenset({"age"}))
    out = enc.code("age", ["1.5", 2, np.float32(3.0), -1e100, 1e100])
    assert out.dtype == np.float64 and out.tolist() == [1.5, 2.0, 3.0, -1e100, 1e100]
    assert enc.decode("age", np.array([1, 2])).dtype == np.float64
    column = enc.column("age", np.array([1, 2]))
    assert isinstance(column, np.ndarray) and column.dtype == np.float64
    for bad, shown in [("abc", "'abc'"), (None, "None"), (float("nan"), "nan"),
                       (np.inf, "inf"), (2e100, "2e+100"), (-2e100, "-2e+100")]:
        with pytest.raises(errors.DataError) as info:
            enc.code("age", [1.0, bad], index=pd.Index(["a", "b"]))
        assert str(info.value) == (
            "protected attribute 'age' is continuous and needs finite numbers (of magnitude "
            f"at most 1e100); value {shown} (row 'b') is not")
    with pytest.raises(errors.DataError, match=r"value 'x' \(row 0\)"):
        enc.code("age", ["x"])
    with pytest.raises(errors.DataError, match=r"value inf \(row 3\)"):
        enc.code("age", np.array([np.inf]), index=pd.Index(np.array([3], dtype=np.int64)))


def test_continuous_nodes_before_categorical_ones_are_skipped_not_stopped_at() -> None:
    data = pd.DataFrame({"age": [1.0, 2.0], "a": ["x", "y"]})
    enc = Encoding.from_data({"age": Protected(kind="continuous"), "a": Protected()}, data)
    assert enc.levels == {"a": ("x", "y")} and enc.continuous == frozenset({"age"})


def test_values_are_compared_as_their_own_strings() -> None:
    """Mixed ints and floats keep their own ``str()`` (1 is "1", not "1.0")."""
    enc = Encoding(levels={"b": ("1", "2.5")})
    assert enc.code("b", [1, 2.5]).tolist() == [0, 1]


def test_decode_and_column_values() -> None:
    enc = Encoding(levels={"a": ("m", "f")}, continuous=frozenset({"age"}))
    assert enc.decode("age", np.array([1, 2])).tolist() == [1.0, 2.0]
    assert enc.column("age", np.array([3, 4])).tolist() == [3.0, 4.0]
    decoded = enc.decode("a", np.array([1, 0]))
    assert decoded.dtype == object and decoded.tolist() == ["f", "m"]
    column = enc.column("a", np.array([1.0, 0.0]))  # float codes are cast
    assert list(column) == ["f", "m"]


def test_numpy_scalars_are_shown_as_python_numbers() -> None:
    enc = Encoding(levels={}, continuous=frozenset({"age"}))
    with pytest.raises(errors.DataError) as info:
        enc.code("age", [np.float64(np.inf)])
    assert "value inf (row 0)" in str(info.value)


def test_unseen_numpy_levels_are_shown_as_python_values() -> None:
    enc = Encoding(levels={"a": ("m", "f")})
    with pytest.raises(errors.DataError) as info:
        enc.code("a", [np.int64(7)])
    assert str(info.value) == errors.UNSEEN_LEVEL.format(node="a", value=7, row=0,
                                                         levels=["m", "f"])
