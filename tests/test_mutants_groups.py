"""Group layouts and group sums by enumeration (tools/mutation.py, module groups).

Small frames of protected attributes whose groups, intersections, strata and
references are written out by hand; group and stratum sums against a pandas
``groupby`` of the same rows; the membership matrix against the group sums; the
cell coder of rows that arrive in pieces against the layout of the whole frame.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted

from counterfair.audit import _groups as grp
from counterfair.audit._validation import (
    DUPLICATE_ATTRIBUTE,
    EMPTY_GROUP,
    REFERENCE_NOT_FOUND,
    UNKNOWN_ATTRIBUTE,
    shown,
)

FRAME = pd.DataFrame({
    "race": ["w", "b", "a", "b", "w", "w", "a", "b"],
    "sex": pd.Categorical(["M", "F", "F", "M", "F", "M", "M", "F"], categories=["M", "F"]),
})

def exactly(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern for the whole message and nothing else."""
    return "^" + re.escape(message) + "$"



def test_layout_of_two_attributes_and_their_intersection() -> None:
    layout = grp.build_layout(grp.protected_frame(FRAME))
    assert layout.attributes == ("race", "sex", "race x sex")
    assert layout.labels[0] == ("a", "b", "w")  # sorted
    assert layout.labels[1] == ("M", "F")  # category order
    assert layout.labels[2] == ("a x M", "a x F", "b x M", "b x F", "w x M", "w x F")
    assert layout.codes[0].tolist() == [2, 1, 0, 1, 2, 2, 0, 1]
    assert layout.codes[1].tolist() == [0, 1, 1, 0, 1, 0, 0, 1]
    assert layout.codes[2].tolist() == [4, 3, 1, 2, 5, 4, 0, 3]
    assert layout.strata.tolist() == [4, 3, 1, 2, 5, 4, 0, 3]
    assert layout.n == 8 and layout.n_strata == 6
    assert list(layout.index) == [("race", "a"), ("race", "b"), ("race", "w"), ("sex", "M"),
                                  ("sex", "F"), *[("race x sex", g) for g in layout.labels[2]]]
    assert layout.index.names == ["attribute", "group"]
    assert layout.attribute_of_row.tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 2]
    assert grp.build_layout(grp.protected_frame(FRAME), False).attributes == ("race", "sex")
    one = grp.build_layout(grp.protected_frame(FRAME[["race"]]))
    assert one.attributes == ("race",) and one.strata.tolist() == one.codes[0].tolist()


def test_only_occurring_cells_become_groups_and_strata() -> None:
    frame = pd.DataFrame({"x": ["p", "q", "p"], "y": ["1", "1", "2"]})
    layout = grp.build_layout(frame, [["y", "x"]])
    assert layout.attributes == ("x", "y", "y x x")
    assert layout.labels[2] == ("1 x p", "1 x q", "2 x p")
    assert layout.codes[2].tolist() == [0, 1, 2]
    assert layout.strata.tolist() == [0, 2, 1] and layout.n_strata == 3
    with pytest.raises(ValueError) as info:
        grp.build_layout(frame, [["x", "z"]])
    assert str(info.value) == UNKNOWN_ATTRIBUTE.format(name="intersections", attribute="z",
                                                       available=["x", "y"])
    three = pd.DataFrame({"a": [0, 1, 1, 0], "b": [0, 0, 1, 1], "c": [1, 0, 1, 0]})
    layout3 = grp.build_layout(three)
    assert layout3.labels[3] == ("0 x 0 x 1", "0 x 1 x 0", "1 x 0 x 0", "1 x 1 x 1")
    assert layout3.codes[3].tolist() == [0, 2, 3, 1]


def test_group_and_stratum_sums_match_groupby() -> None:
    gen = np.random.default_rng(shifted(8))
    n = 40
    frame = pd.DataFrame({"a": gen.choice(["x", "y", "z"], n), "b": gen.choice([3, 1], n)})
    weights = gen.standard_normal((n, 3))
    layout = grp.build_layout(grp.protected_frame(frame))
    sums = layout.group_sums(weights)
    assert sums.shape == (len(layout.index), 3)
    frame["a x b"] = frame["a"] + " x " + frame["b"].astype(str)
    want = []
    for attribute, labels in zip(layout.attributes, layout.labels, strict=True):
        by = pd.DataFrame(weights).groupby(frame[attribute].to_numpy()).sum()
        want.extend(by.loc[label].to_numpy() for label in labels)
    np.testing.assert_allclose(sums, np.array(want), rtol=1e-12)
    rows = np.array([0, 3, 3, 7, 19])
    np.testing.assert_allclose(layout.group_sums(weights, rows),
                               _subset_sums(layout, weights, rows), rtol=1e-12)
    strata = layout.stratum_sums(weights)
    assert strata.shape == (layout.n_strata, 3)
    for k in range(layout.n_strata):
        np.testing.assert_allclose(strata[k], weights[layout.strata == k].sum(axis=0))
    membership = layout.strata_membership()
    assert membership.shape == (len(layout.index), layout.n_strata)
    assert set(np.unique(membership)) <= {0.0, 1.0}
    np.testing.assert_allclose(membership @ strata, sums, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grp.stratum_sums(layout.strata, weights, layout.n_strata + 2)
                               [-2:], 0.0)


def _subset_sums(layout: grp.GroupLayout, weights: np.ndarray, rows: np.ndarray) -> np.ndarray:
    out = []
    for codes, labels in zip(layout.codes, layout.labels, strict=True):
        for g in range(len(labels)):
            pick = rows[codes[rows] == g]
            out.append(weights[pick].sum(axis=0))
    return np.array(out)


def test_references() -> None:
    layout = grp.build_layout(grp.protected_frame(FRAME))
    assert layout.reference_rows(None).tolist() == [0, 3, 5]
    rows = layout.reference_rows({"race": "w", "race x sex": ("b", "F")})
    assert rows.tolist() == [2, 3, 5 + 3]
    assert layout.reference_labels(rows) == {"race": "w", "sex": "M", "race x sex": "b x F"}
    assert layout.reference_rows({"sex": "F", "race x sex": "w x F"}).tolist() == [0, 4, 10]
    with pytest.raises(ValueError) as info:
        layout.reference_rows({"age": "1"})
    assert str(info.value) == UNKNOWN_ATTRIBUTE.format(
        name="reference", attribute="age", available=list(layout.attributes))
    with pytest.raises(ValueError) as info:
        layout.reference_rows({"race": "q"})
    assert str(info.value) == REFERENCE_NOT_FOUND.format(
        group="q", attribute="race", available=shown(["a", "b", "w"]))
    # a tuple for a plain attribute is not joined
    with pytest.raises(ValueError, match="reference group"):
        layout.reference_rows({"race": ("w", "M")})


def test_encode_orders_and_refuses_empty_categories() -> None:
    codes, labels = grp.encode(np.array([3, 1, 2, 1]), "x")
    assert codes.tolist() == [2, 0, 1, 0] and labels == [1, 2, 3]
    assert all(type(v) is int for v in labels)  # numpy scalars become Python ones
    codes, labels = grp.encode(pd.Series(["b", 1, "a", 1], dtype=object), "m")  # mixed
    assert [labels[c] for c in codes] == ["b", 1, "a", 1] and len(labels) == 3
    cat = pd.Series(pd.Categorical(["y", "x"], categories=["y", "x"]))
    codes, labels = grp.encode(cat, "c")
    assert codes.tolist() == [0, 1] and labels == ["y", "x"] and codes.dtype == np.intp
    empty = pd.Series(pd.Categorical(["y", "y"], categories=["x", "y", "z"]))
    with pytest.raises(ValueError) as info:
        grp.encode(empty, "c")
    assert str(info.value) == EMPTY_GROUP.format(group="x", attribute="c")
    assert grp._python_scalar(np.int64(3)) == 3 and type(grp._python_scalar(np.int64(3))) is int
    assert grp._python_scalar("s") == "s"


def test_protected_frame_normalises_every_input() -> None:
    series = grp.protected_frame(pd.Series(["a", "b"], index=[5, 9], name="g"))
    assert list(series.columns) == ["g"] and list(series.index) == [0, 1]
    assert list(grp.protected_frame(pd.Series(["a", "b"])).columns) == ["protected"]
    frame = grp.protected_frame(pd.DataFrame({0: ["a"], "s": ["b"]}, index=[7]))
    assert list(frame.columns) == ["0", "s"] and list(frame.index) == [0]
    assert list(grp.protected_frame(["a", "b", "a"]).columns) == ["protected"]
    two = grp.protected_frame(np.array([["a", 1], ["b", 2]], dtype=object))
    assert list(two.columns) == ["protected_0", "protected_1"]
    assert two["protected_1"].tolist() == [1, 2]
    mapped = grp.protected_frame({"r": ["a", "b"], 3: [1, 2]}, n=2)
    assert list(mapped.columns) == ["r", "3"] and mapped["r"].tolist() == ["a", "b"]
    with pytest.raises(ValueError, match=exactly(
            "protected must be a DataFrame, Series, mapping or 1-D / 2-D array; got an array "
            "of shape (1, 1, 1)")):
        grp.protected_frame(np.zeros((1, 1, 1)))
    with pytest.raises(ValueError, match=exactly(
            "protected must contain at least one attribute (column)")):
        grp.protected_frame(pd.DataFrame(index=[0, 1]))
    with pytest.raises(ValueError) as info:
        grp.protected_frame(pd.DataFrame([[1, 2]], columns=["a", "a"]))
    assert str(info.value) == DUPLICATE_ATTRIBUTE.format(attribute="a")
    with pytest.raises(ValueError, match="protected"):
        grp.protected_frame(["a", "b"], n=3)
    with pytest.raises(ValueError):
        grp.protected_frame(["a", None])


def test_reference_levels_of_a_fit_and_of_an_scm() -> None:
    fit = SimpleNamespace(encoding=SimpleNamespace(levels={"race": ("w", "b"),
                                                           "sex": ("F", "M")}))
    assert grp.reference_levels(fit) == {"race": "w", "sex": "F"}

    def spec(reference: str | None, levels: tuple[str, ...] | None) -> SimpleNamespace:
        return SimpleNamespace(reference=reference, levels=levels)

    scm = SimpleNamespace(encoding=None, protected=("a", "b"),
                          specs={"a": spec("y", ("x", "y")), "b": spec(None, ("p", "q"))})
    assert grp.reference_levels(scm) == {"a": "y", "b": "p"}
    scm.specs = {"a": spec(None, None), "b": spec(None, ("p", "q"))}
    with pytest.raises(ValueError, match=exactly(
            "protected attribute 'a' declares no levels or reference; pass a fitted SCM (its "
            "levels are fixed at fit time) or reference={...} explicitly")):
        grp.reference_levels(scm)


def test_cell_coder_numbers_pieces_as_the_whole_frame() -> None:
    cells = FRAME.drop_duplicates().iloc[::-1]
    coder = grp.CellCoder.of(cells)
    whole = grp.build_layout(grp.protected_frame(FRAME))
    assert coder.layout.labels == whole.labels and coder.names == ("race", "sex")
    assert coder.strata(FRAME).tolist() == whole.strata.tolist()
    assert coder.strata(FRAME.iloc[3:5]).tolist() == whole.strata[3:5].tolist()
    assert coder.combined.tolist() == sorted(set(coder.combined.tolist()))
    assert coder.strata(FRAME.iloc[:0]).tolist() == []
    with pytest.raises(ValueError, match=exactly(
            "piece 2: protected attribute 'sex' is not a column")):
        coder.strata(FRAME[["race"]], "piece 2")
    bad = pd.DataFrame({"race": ["w", "q"], "sex": ["M", "M"]})
    with pytest.raises(ValueError) as info:
        coder.strata(bad, "piece 3")
    assert str(info.value) == grp.UNSEEN_CELL.format(
        where="piece 3", attribute="race", value="q", available=shown(["a", "b", "w"]))
    partial = grp.CellCoder.of(pd.DataFrame({"race": ["w", "b"], "sex": ["M", "F"]}))
    assert partial.strata(pd.DataFrame({"race": ["b", "w"], "sex": ["F", "M"]})).tolist() == [
        0, 1]
    with pytest.raises(ValueError) as info:
        partial.strata(pd.DataFrame({"race": ["b", "w"], "sex": ["F", "F"]}))
    assert str(info.value) == ("the rows: the cell 'w x F' of the protected attributes is not "
                               "among the cells of the audit")
    with pytest.raises(ValueError, match="the cell 'b x M'"):
        partial.strata(pd.DataFrame({"race": ["b"], "sex": ["M"]}))
