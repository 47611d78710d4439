"""Rows are checked once, at one door (:meth:`counterfair.rows.Rows.check`).

A frame of rows is checked (non-empty DataFrame, protected columns complete), its
protected attributes encoded and each observed column parsed by its family exactly
once per public call: once for ``SCM.fit``, once for ``counterfactual_predictions``.
The counts come from the real functions, wrapped; a second check anywhere below the
door (as ``stan/data.py``, ``Fit.abduct`` and ``scales.py`` each made before) fails.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _models import linear_gaussian_data, linear_gaussian_scm, quietly
from _seeds import shifted
from sklearn.linear_model import LinearRegression

import counterfair as cf
from counterfair import errors
from counterfair.model.encoding import Encoding
from counterfair.model.families.normal import NormalFamily
from counterfair.rows import validated as rows_module
from counterfair.rows.validated import Rows


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """How often the door's frame check, the encoding and each column's parser ran."""
    seen: Counter[str] = Counter()
    frame_check = rows_module.check_frame
    codes = Encoding.codes
    parse = NormalFamily.column_values

    def counted_frame_check(data: object) -> pd.DataFrame:
        seen["check"] += 1
        return frame_check(data)

    def counted_codes(self: Encoding, data: pd.DataFrame) -> dict[str, np.ndarray]:
        seen["codes"] += 1
        return codes(self, data)

    def counted_parse(self: Any, spec: Any, series: pd.Series, node: str) -> np.ndarray:
        seen[f"parse {node}"] += 1
        return parse(self, spec, series, node)

    monkeypatch.setattr(rows_module, "check_frame", counted_frame_check)
    monkeypatch.setattr(Encoding, "codes", counted_codes)
    monkeypatch.setattr(NormalFamily, "column_values", counted_parse)
    yield seen


def test_the_door_checks_encodes_and_parses_once(counts: Counter[str]) -> None:
    scm = linear_gaussian_scm()
    data = linear_gaussian_data().drop(columns="U")
    rows = Rows.check(data, scm)
    assert Rows.check(rows, scm, rows.encoding) is rows  # checked rows pass straight through
    first, again = rows.values(), rows.values()
    assert all(first[n] is again[n] for n in first)  # parsed once, kept
    chunk = rows.take(np.arange(10, 20))
    assert np.array_equal(chunk.values(["X"])["X"], first["X"][10:20])
    assert np.array_equal(chunk.positions, np.arange(10, 20))
    assert counts == Counter({"check": 1, "codes": 1, "parse X": 1, "parse Y": 1})


def test_the_door_names_what_is_wrong() -> None:
    scm = linear_gaussian_scm()
    data = linear_gaussian_data().drop(columns="U")
    with pytest.raises(errors.DataError, match="'A'"):
        Rows.check(data.drop(columns="A"), scm)
    with pytest.raises(errors.DataError, match="row 7"):
        Rows.check(data.assign(X=data["X"].where(data.index != 7)), scm).values()
    with pytest.raises(errors.DataError):
        Rows.check(data.iloc[:0], scm)
    with pytest.raises(ValueError, match="positions"):
        Rows.check(data, scm, positions=np.arange(3))


@pytest.mark.stan
def test_one_check_per_fit_and_per_counterfactual_run(
    stan_backend: str, counts: Counter[str]
) -> None:
    scm = linear_gaussian_scm()
    data = linear_gaussian_data().drop(columns="U")
    fit = quietly(scm.fit, data, chains=1, warmup=150, draws=150, seed=shifted(31),
                  progress=False)
    assert counts["check"] == 1, counts
    assert counts["codes"] == 1, counts
    assert counts["parse X"] == counts["parse Y"] == 1, counts

    fair = cf.FairLearner(
        fit,
        target="Y",
        features=cf.inputs.Latent(),
        estimator=LinearRegression(),
        n_samples=20,
        seed=shifted(32),
    ).fit(data)
    counts.clear()
    moved = cf.counterfactual_predictions(
        fit, data.drop(columns="Y").iloc[:50], fair, do={"A": "1"}, n_samples=20, seed=shifted(33)
    )
    assert counts["check"] == 1, counts
    assert counts["codes"] == 1, counts
    assert counts["parse X"] == 1 and counts["parse Y"] == 0, counts
    assert np.abs(moved["change"]).max() < 1e-9  # Fair K does not move under do(A)
