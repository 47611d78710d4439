"""Levels read from the data (issue 30): two-level Bernoulli columns as they come
(no/yes, false/true, 0/1, or positive= named), Categorical() and Ordinal() without
levels, recorded in the fit's SCM and its saved files, and unseen levels in new rows
named with their column, level and row.

The spec and reading checks run without Stan; the fitted checks share one small NUTS
fit of the loans data (tests/_loans.py).
"""

from __future__ import annotations

import logging
import warnings

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from _loans import SCM_YAML, loans

import counterfair as cf
from counterfair.io.scm_file import parse_yaml
from counterfair.model.data_levels import with_levels_from_data
from counterfair.model.families import family_of


def bernoulli_levels(series: pd.Series, **spec: object) -> tuple[str, ...] | None:
    """The levels a Bernoulli spec reads from a column (None: used as 0/1)."""
    bernoulli = cf.Bernoulli(**spec)  # type: ignore[arg-type]
    found = family_of(bernoulli).levels_from_data(bernoulli, series, "y")
    return None if found is None else found.levels  # type: ignore[attr-defined]


# ---------------------------------------------------------------------- Bernoulli
@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["no", "yes", "no"], ("no", "yes")),
        (["Yes", "No"], ("No", "Yes")),
        (["TRUE", "FALSE", "TRUE"], ("FALSE", "TRUE")),
        (["y", "n"], ("n", "y")),
        (["0", "1"], ("0", "1")),  # strings 0/1 (an object column)
    ],
)
def test_bernoulli_reads_a_recognised_pair(values: list[str], expected: tuple[str, str]) -> None:
    assert bernoulli_levels(pd.Series(values, dtype=object)) == expected


def test_numeric_and_boolean_zero_one_columns_stay_as_today() -> None:
    assert bernoulli_levels(pd.Series([0, 1, 1])) is None
    assert bernoulli_levels(pd.Series([0.0, 1.0])) is None
    assert bernoulli_levels(pd.Series([True, False])) is None
    assert bernoulli_levels(pd.Series([0, 1]), positive=1) is None


def test_bernoulli_any_pair_with_positive_named() -> None:
    series = pd.Series(["approved", "denied", "approved"])
    assert bernoulli_levels(series, positive="approved") == ("denied", "approved")
    assert bernoulli_levels(series, positive="denied") == ("approved", "denied")
    # numbers other than 0/1: 2 is the positive one
    assert bernoulli_levels(pd.Series([1, 2, 2]), positive=2) == ("1", "2")
    # 0/1 with 0 named positive: recoded
    assert bernoulli_levels(pd.Series([0, 1]), positive=0) == ("1", "0")


def test_bernoulli_refuses_what_it_cannot_read() -> None:
    with pytest.raises(cf.errors.DataError, match=r"column 'y' .* say which is the positive one"):
        bernoulli_levels(pd.Series(["approved", "denied"]))
    with pytest.raises(cf.errors.DataError, match=r"holds 3 distinct values \('a', 'b', 'c'\)"):
        bernoulli_levels(pd.Series(["a", "b", "c"]))
    with pytest.raises(cf.errors.DataError, match=r"positive='ok', but its values are 'a', 'b'"):
        bernoulli_levels(pd.Series(["a", "b"]), positive="ok")
    with pytest.raises(cf.errors.DataError, match="holds 1 distinct values"):
        bernoulli_levels(pd.Series(["yes", "yes"]))


def test_bernoulli_spec_levels_negative_first() -> None:
    spec = cf.Bernoulli(levels=("no", "yes"))
    assert spec.levels == ("no", "yes") and spec.positive == "yes"
    spec = cf.Bernoulli(levels=["approved", "denied"], positive="approved")
    assert spec.levels == ("denied", "approved") and spec.positive == "approved"
    for bad in (("a",), ("a", "a"), ("a", "b", "c"), "ab", 2):
        with pytest.raises(ValueError, match="two levels"):
            cf.Bernoulli(levels=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive level 'x' is not one of"):
        cf.Bernoulli(levels=("a", "b"), positive="x")


def test_labelled_bernoulli_values_and_unseen_label() -> None:
    spec = cf.Bernoulli(levels=("no", "yes"))
    family = family_of(spec)
    values = family.column_values(spec, pd.Series(["yes", "no", "yes"]), "deny")
    np.testing.assert_array_equal(values, [1.0, 0.0, 1.0])
    with pytest.raises(cf.errors.DataError, match=(
        r"column 'deny' is a Bernoulli node with levels \['no', 'yes'\]; value 'maybe' at "
        r"row 'c' is not one of them"
    )):
        family.column_values(spec, pd.Series(["no", "yes", "maybe"], index=list("abc")), "deny")
    # frames (simulation, counterfactual worlds) give the labels back
    column = family.frame_column(spec, np.array([1.0, 0.0]))
    assert list(column) == ["yes", "no"]


# ---------------------------------------------------------------------- level families
def test_categorical_levels_sorted_numbers_in_numeric_order() -> None:
    spec = cf.Categorical()
    family = family_of(spec)
    found = family.levels_from_data(spec, pd.Series(["refi", "home", "other", "home"]), "p")
    assert found.levels == ("home", "other", "refi")  # type: ignore[union-attr]
    found = family.levels_from_data(spec, pd.Series([10, 2, 1, 2]), "p")
    assert found.levels == ("1", "2", "10")  # type: ignore[union-attr]
    # floats that are whole numbers (a CSV column with a gap) are the same levels
    values = family.column_values(found, pd.Series([2.0, 10.0, 1.0]), "p")  # type: ignore[arg-type]
    np.testing.assert_array_equal(values, [1.0, 2.0, 0.0])
    with_reference = cf.Categorical(reference="refi")
    found = family.levels_from_data(with_reference, pd.Series(["home", "refi"]), "p")
    assert found.labels == ("refi", "home")  # type: ignore[union-attr]
    with pytest.raises(cf.errors.DataError, match="reference level 'x' of a Categorical node"):
        family.levels_from_data(cf.Categorical(reference="x"), pd.Series(["a", "b"]), "p")
    with pytest.raises(cf.errors.DataError, match=r"column 'p' is a Categorical node and holds a "
                       r"single value \('a'\)"):
        family.levels_from_data(spec, pd.Series(["a", "a"]), "p")
    assert family.levels_from_data(cf.Categorical(levels=("a", "b")), pd.Series(["a"]), "p") is None


def test_ordinal_levels_numbers_only() -> None:
    spec = cf.Ordinal()
    family = family_of(spec)
    found = family.levels_from_data(spec, pd.Series([3, 1, 6, 2, 10]), "history")
    assert found.levels == ("1", "2", "3", "6", "10")  # type: ignore[union-attr]
    ordered = pd.Series(pd.Categorical(["mid", "low"], categories=["low", "mid", "high"],
                                       ordered=True))
    assert family.levels_from_data(spec, ordered, "h").levels == ("low", "mid")  # type: ignore[union-attr]
    with pytest.raises(cf.errors.DataError, match=(
        r"column 'grade' is an Ordinal node without levels, and its values are not numbers "
        r"\('A', 'B', 'C'\); their order cannot be guessed: give it, lowest first"
    )):
        family.levels_from_data(spec, pd.Series(["B", "A", "C"]), "grade")


def test_a_level_family_without_levels_before_the_fit_says_so() -> None:
    spec = cf.Categorical()
    with pytest.raises(cf.errors.DataError, match="are read from the training rows when the SCM"):
        family_of(spec).column_values(spec, pd.Series(["a"]), "p")


# ---------------------------------------------------------------------- the SCM
def loans_scm() -> cf.SCM:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cf.errors.IdentificationWarning)
        return cf.SCM.from_dict(parse_yaml(SCM_YAML))


def test_with_levels_from_data_records_every_level_and_logs_once_each() -> None:
    scm = loans_scm()
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("counterfair.model.data_levels")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        resolved = with_levels_from_data(scm, loans(80))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    specs = resolved.specs
    assert specs["deny"].levels == ("no", "yes")  # type: ignore[attr-defined]
    assert specs["deny"].positive == "yes"  # type: ignore[attr-defined]
    assert specs["purpose"].levels == ("home", "other", "refi")  # type: ignore[attr-defined]
    assert specs["history"].levels[0] == "1"  # type: ignore[attr-defined]
    messages = [r.getMessage() for r in records if r.levelno == logging.INFO]
    assert len(messages) == 3
    assert "Bernoulli node 'deny': levels read from the data: 'no' -> 0, 'yes' -> 1" in (
        "\n".join(messages)
    )
    # the SCM file keeps them; read back it needs nothing from the data
    again = cf.SCM.from_dict(resolved.to_dict())
    assert again.specs == resolved.specs
    assert with_levels_from_data(again, loans(80)) is again
    assert resolved.stan_code() == scm.stan_code()  # the program does not change


def test_yaml_reads_yes_and_no_as_strings() -> None:
    document = parse_yaml(
        "nodes:\n  a: {family: protected}\n"
        "  y: {family: bernoulli, parents: [a], levels: [no, yes], positive: yes}\n"
        "  z: {family: normal, parents: [a], intercept: true}\n"
    )
    scm = cf.SCM.from_dict(document)
    assert scm.specs["y"].levels == ("no", "yes")  # type: ignore[attr-defined]
    assert scm.specs["z"].intercept is True  # type: ignore[attr-defined]


def test_python_scm_with_levels_from_data() -> None:
    graph = nx.DiGraph()
    graph.add_node("race", spec=cf.Protected())
    graph.add_node("purpose", spec=cf.Categorical())
    graph.add_node("deny", spec=cf.Bernoulli())
    graph.add_edges_from([("race", "purpose"), ("race", "deny"), ("purpose", "deny")])
    resolved = with_levels_from_data(cf.SCM(graph), loans(50))
    assert resolved.specs["purpose"].levels == ("home", "other", "refi")  # type: ignore[attr-defined]
    assert resolved.equations["deny"].observed[0].levels == 3


def test_values_too_large_to_model_are_refused_with_column_and_row() -> None:
    """Fuzzing found NaN latents for an income of 1e308 (finite, but its square is not)."""
    spec = cf.Normal()
    with pytest.raises(cf.errors.DataError, match=(
        r"column 'income' has value 1e\+308 at row 'b', beyond \+-1e\+100"
    )):
        family_of(spec).column_values(spec, pd.Series([1.0, 1e308], index=["a", "b"]), "income")
    values = family_of(spec).column_values(spec, pd.Series([1.0, -1e100]), "income")
    assert values[1] == -1e100
