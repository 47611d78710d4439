"""Tests of the FairTest-style subpopulation search: planted subgroup found, null not found."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted

from counterfair.audit import SubpopulationSettings, find_subpopulations
from counterfair.audit._validation import GROUP_NOT_FOUND, LENGTH_MISMATCH
from counterfair.audit.dependence import g_test
from counterfair.audit.subpopulations import subpopulation_mask

ALPHA = 0.05


def _users(rng: np.random.Generator, n: int) -> pd.DataFrame:
    return pd.DataFrame({
        "region": rng.choice(["north", "south", "east", "west"], n),
        "job": rng.choice(["a", "b", "c", "d", "e"], n),
        "age": rng.integers(18, 80, n),
    })


def _planted(seed: int, n: int = 16000) -> tuple[pd.DataFrame, np.ndarray, np.ndarray,
                                                  np.ndarray]:
    rng = np.random.default_rng(seed)
    users = _users(rng, n)
    a = rng.integers(0, 2, n)
    inside = ((users["region"] == "north") & (users["job"] == "a")).to_numpy()  # 1/4 * 1/5
    p = np.where(inside, np.where(a == 1, 0.75, 0.25), 0.5)
    outcome = (rng.random(n) < p).astype(int)
    return users, a, outcome, inside


def test_planted_subgroup_is_found() -> None:
    users, a, outcome, inside = _planted(seed=shifted(1))
    assert inside.mean() == pytest.approx(0.05, abs=0.005)
    report = find_subpopulations(
        users, a, outcome, protected_group=1,
        settings=SubpopulationSettings(max_depth=3, alpha=ALPHA, n_bootstrap=100, seed=shifted(0)),
    )
    top = report.top(1)
    assert len(top) == 1
    node = int(top["node"].iloc[0])
    members = report.mask(users, node)
    # the strongest subgroup found lies inside the planted one
    assert (members & inside).sum() / members.sum() >= 0.9
    # and a significant node is the planted subgroup itself (pure and covering it)
    best_cover = 0.0
    for other in report.table.loc[report.table["significant"], "node"]:
        rows = report.mask(users, int(other))
        if (rows & inside).sum() / rows.sum() >= 0.9:
            best_cover = max(best_cover, (rows & inside).sum() / inside.sum())
    assert best_cover >= 0.95
    row = top.iloc[0]
    assert row["difference"] == pytest.approx(0.5, abs=0.15)
    assert row["lower"] > 0.25 and row["p_adjusted"] <= ALPHA
    # no subpopulation disjoint from the planted subgroup is reported
    for other in report.table.loc[report.table["significant"], "node"]:
        assert (report.mask(users, int(other)) & inside).any()
    text = report.tree_text()
    assert text.splitlines()[0].startswith("[0] all: n = ")
    assert "region == 'north'" in text and "job == 'a'" in text


def test_statistics_are_computed_on_the_test_half() -> None:
    users, a, outcome, _ = _planted(seed=shifted(2), n=4000)
    report = find_subpopulations(
        users, a, outcome, protected_group=1,
        settings=SubpopulationSettings(max_depth=1, n_bootstrap=0, seed=shifted(5)),
    )
    root = report.table.set_index("node").loc[0]
    assert root["size"] == 2000 and root["description"] == "all"
    children = report.table[report.table["depth"] == 1]
    assert children["size"].sum() == 2000  # a binary split partitions the test half
    # the root's p-value is the G-test on the test half alone: recompute it
    rng = np.random.default_rng(shifted(5))
    test_rows = np.zeros(4000, dtype=bool)
    test_rows[rng.permutation(4000)[:2000]] = True
    expected = g_test(a[test_rows] == 1, outcome[test_rows] == 1)
    assert root["p_value"] == pytest.approx(expected.p_value)
    assert root["g"] == pytest.approx(expected.statistic)


@pytest.mark.parametrize("seed", [3, 4])
def test_null_data_has_no_significant_subpopulation(seed: int) -> None:
    rng = np.random.default_rng(shifted(seed))
    n = 16000
    users = _users(rng, n)
    a = rng.integers(0, 2, n)
    outcome = (rng.random(n) < 0.5).astype(int)
    # family-wise error at 1e-3 (Holm), so that a null data set fails the check with
    # probability about 1e-3 under any seed shift (at 0.05, shift 1 failed)
    report = find_subpopulations(
        users, a, outcome, protected_group=1,
        settings=SubpopulationSettings(max_depth=3, alpha=1e-3, n_bootstrap=0, seed=shifted(0)),
    )
    assert len(report.table) > 5
    assert not report.table["significant"].any()
    assert report.top().empty


def test_conditional_test_explains_away_a_legitimate_attribute() -> None:
    rng = np.random.default_rng(shifted(6))
    n = 6000
    users = _users(rng, n)
    skill = rng.integers(0, 2, n)
    a = (rng.random(n) < np.where(skill == 1, 0.8, 0.2)).astype(int)
    outcome = (rng.random(n) < np.where(skill == 1, 0.8, 0.2)).astype(int)
    # tested at a family-wise error of 1e-3: the conditional test's null holds
    plain = find_subpopulations(
        users, a, outcome, protected_group=1,
        settings=SubpopulationSettings(max_depth=1, alpha=1e-3, n_bootstrap=0),
    )
    conditional = find_subpopulations(
        users, a, outcome, protected_group=1,
        settings=SubpopulationSettings(max_depth=1, alpha=1e-3, n_bootstrap=0), given=skill,
    )
    assert plain.table["significant"].all()
    assert not conditional.table["significant"].any()


def test_mask_and_errors() -> None:
    users = pd.DataFrame({"c": ["x", "y", "x"], "n": [1, 5, 9]})
    mask = subpopulation_mask(users, [("c", "==", "x"), ("n", ">", 2.0)])
    assert mask.tolist() == [False, False, True]
    with pytest.raises(ValueError, match=re.escape(GROUP_NOT_FOUND.format(
            name="protected_group", group="q", where="protected", available="[0, 1]"))):
        find_subpopulations(users, [0, 1, 0], [1, 0, 1], protected_group="q")
    with pytest.raises(ValueError, match=re.escape(LENGTH_MISMATCH.format(
            name="protected", length=2, other_name="data", other_length=3))):
        find_subpopulations(users, [0, 1], [1, 0, 1], protected_group=1)


def test_family_wise_error_rate_is_kept_across_null_data_sets() -> None:
    # 40 independent null data sets: with Holm's correction at most alpha of them may show
    # any significant node. The bound is the binomial tail at 1e-3, so that the test holds
    # under every seed shift: P(Binomial(40, 0.05) >= 8) = 7e-4 (>= 6 was 1.4 %).
    hits = 0
    for seed in range(40):
        rng = np.random.default_rng(shifted(100 + seed))
        n = 3000
        users = _users(rng, n)
        a = rng.integers(0, 2, n)
        outcome = (rng.random(n) < 0.3).astype(int)
        report = find_subpopulations(
            users, a, outcome, protected_group=1,
            settings=SubpopulationSettings(
                max_depth=2, alpha=ALPHA, n_bootstrap=0, seed=shifted(seed),
            ),
        )
        hits += bool(report.table["significant"].any())
    assert hits <= 7
