"""Posterior predictive checks conditional on the parents (issue 33, "checks that notice").

Numpy level: the per-group statistics, bins and indicator covariances against pandas.
Stan level: data simulated in numpy from a known SCM with two departures a linear
declaration cannot express, (a) a loading of one of three indicators of a latent that
differs by a binary protected group and (b) a Normal node that is an inverted U in a
continuous protected attribute (age), fitted with the linear declaration by NUTS: the
conditional statistics flag both, far outside their intervals, while the same
declaration fitted to data from a linear truth flags nothing far outside.
"""

from __future__ import annotations

import functools
import re

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from _conditional_models import declared_fit, declared_scm, simulate
from _seeds import shifted

import counterfair as cf
from counterfair.inference import ppc
from counterfair.inference.ppc_result import PosteriorPredictiveCheck

# modelling, not a back end: one back end is enough (the programs are the same for both)


def far_outside(table: pd.DataFrame) -> pd.Series:
    """Observed beyond the 90 % interval by more than the interval's own width."""
    width = table["replicated_q95"] - table["replicated_q05"]
    beyond = np.maximum(
        table["replicated_q05"] - table["observed"], table["observed"] - table["replicated_q95"]
    )
    return pd.Series(beyond > width, index=table.index)


# ---------------------------------------------------------------------- numpy level
def test_group_statistics_bins_and_covariances_against_pandas() -> None:
    scm = declared_scm()
    data = simulate(bent=True, seed=shifted(2)).iloc[:400].reset_index(drop=True)
    codes = {"A": (data["A"] == "b").to_numpy().astype(np.int64), "age": data["age"].to_numpy()}
    observed = {c: data[c].to_numpy() for c in ("X1", "X2", "X3", "Y")}
    rng = np.random.default_rng(shifted(5))
    replicated = {c: v + rng.standard_normal((30, 400)) for c, v in observed.items()}
    groups = ppc.protected_groups(scm, codes, labels={"A": ("a", "b")}, n_bins=4)
    assert [(g.by, g.label) for g in groups][:2] == [("A", "a"), ("A", "b")]
    bins = [g for g in groups if g.by == "age"]
    assert len(bins) == 4 and sum(g.size for g in bins) == 400
    assert all(95 <= g.size <= 105 for g in bins)
    low, _high = (float(x) for x in re.findall(r"[-\d.]+", bins[0].label))
    assert low == pytest.approx(data["age"].min(), rel=1e-3)
    assert bins[-1].label.endswith("]") and bins[0].label.endswith(")")
    check = ppc.summarise(scm, observed, replicated, protected=groups)
    assert list(check.table.columns) == list(PosteriorPredictiveCheck.COLUMNS)

    # per-group mean and variance of X3 against pandas, observed and replicated
    row = check.statistic("X3", "variance", by="A", group="b")
    in_b = data["A"] == "b"
    assert row["observed"] == pytest.approx(data.loc[in_b, "X3"].var())
    reps = replicated["X3"][:, in_b.to_numpy()].var(axis=1, ddof=1)
    assert row["replicated_mean"] == pytest.approx(reps.mean())
    assert row["replicated_q05"] == pytest.approx(np.quantile(reps, 0.05))
    assert check.statistic("Y", "mean", by="age", group=bins[2].label)["observed"] == (
        pytest.approx(data.loc[bins[2].rows, "Y"].mean())
    )
    # covariances of K's three Normal indicators, over all rows and per group
    assert ppc.indicator_pairs(scm, ["X1", "X2", "X3", "Y"]) == {
        "K": [("X1", "X2"), ("X1", "X3"), ("X2", "X3")]
    }
    cov = check.statistic("K", "covariance of X1 and X3", by="A", group="b")
    assert cov["family"] == "latent"
    assert cov["observed"] == pytest.approx(data.loc[in_b, ["X1", "X3"]].cov().iloc[0, 1])
    overall = check.statistic("K", "covariance of X2 and X3")
    assert overall["observed"] == pytest.approx(np.cov(observed["X2"], observed["X3"])[0, 1])
    # rows: 4 nodes x 2 statistics x (1 + 2 + 4 groups) and 3 pairs x (1 + 6 groups)
    assert len(check.table) == 4 * 2 * 7 + 3 * 7
    assert len(check.overall()) == 4 * 2 + 3 and len(check.conditional()) == 4 * 2 * 6 + 3 * 6
    assert check.statistic("X1", "mean")["by"] == ""  # the overall row by default
    with pytest.raises(KeyError, match=r"no statistic 'mean' of node 'X1' in group A=c"):
        check.statistic("X1", "mean", by="A", group="c")
    # the display: overall statistics and the flagged groups only
    text = str(check)
    assert re.search(r"\d+ of 66 statistics within groups", text)


def test_parent_bins_small_groups_and_bad_bins() -> None:
    g = nx.DiGraph()
    g.add_node("A", spec=cf.Protected(levels=("a", "b")))
    g.add_node("X", spec=cf.Normal())
    g.add_node("C", spec=cf.Poisson())
    g.add_node("Y", spec=cf.Bernoulli())
    g.add_edges_from([("A", "X"), ("X", "C"), ("X", "Y"), ("C", "Y")])
    scm = cf.SCM(g)
    assert ppc.continuous_parents(scm, "Y") == ("X", "C")
    assert ppc.continuous_parents(scm, "X") == ()
    rng = np.random.default_rng(shifted(3))
    x = rng.standard_normal(200)
    c = rng.poisson(0.7, 200).astype(float)  # half zeros: quantile edges tie whatever the seed
    groups = ppc.parent_groups(scm, "Y", {"X": x, "C": c}, n_bins=5)
    assert {gr.by for gr in groups} == {"X", "C"}
    assert sum(gr.size for gr in groups if gr.by == "X") == 200
    assert sum(gr.size for gr in groups if gr.by == "C") == 200  # tied count edges merged
    assert len([gr for gr in groups if gr.by == "C"]) < 5
    assert ppc.quantile_bins("X", np.ones(50)) == []  # a constant: nothing to compare
    for bad in (1, 0, 2.5, True):
        with pytest.raises(ValueError, match="n_bins must be an integer of at least 2"):
            ppc.quantile_bins("X", x, bad)  # type: ignore[arg-type]
    # a group of fewer than MIN_GROUP_ROWS rows gets no statistics
    codes = {"A": np.r_[np.zeros(195), np.ones(5)].astype(np.int64)}
    y = rng.integers(0, 2, 200).astype(float)
    check = ppc.summarise(
        scm,
        {"Y": y},
        {"Y": rng.integers(0, 2, (20, 200)).astype(float)},
        protected=ppc.protected_groups(scm, codes),
    )
    assert set(check.conditional()["group"]) == {"0"}  # level labels default to codes
    with pytest.raises(cf.errors.SCMError, match="no codes of protected attribute 'A'"):
        ppc.protected_groups(scm, {})


# ---------------------------------------------------------------------- fits (Stan)
@functools.cache
def _check(bent: bool) -> PosteriorPredictiveCheck:
    return declared_fit(bent).ppc(n_draws=200, seed=shifted(7))


@pytest.mark.stan
def test_conditional_check_flags_a_group_specific_loading_and_an_inverted_u(
    stan_backend: str,
) -> None:
    check = _check(bent=True)
    table = check.table.assign(far=far_outside(check.table))
    print(check)  # shown with pytest -rP: the numbers of the closing note
    # (a) X3 measures K with loading 1.2 in group b and 0.3 in group a; one loading is fitted
    variance_b = check.statistic("X3", "variance", by="A", group="b")
    assert variance_b["observed"] > variance_b["replicated_q95"], variance_b
    assert far_outside(variance_b.to_frame().T).all(), variance_b
    variance_a = check.statistic("X3", "variance", by="A", group="a")
    assert variance_a["observed"] < variance_a["replicated_q05"], variance_a
    covariance = table[(table["node"] == "K") & (table["by"] == "A") & table["far"]]
    assert set(covariance["statistic"]) >= {"covariance of X1 and X3"}, covariance
    # (b) Y is an inverted U in age: its mean in the outer age bins is far below the line's
    y_bins = table[(table["node"] == "Y") & (table["by"] == "age") & (table["statistic"] == "mean")]
    assert len(y_bins) == ppc.DEFAULT_BINS
    assert y_bins.iloc[0]["observed"] < y_bins.iloc[0]["replicated_q05"]
    assert y_bins.iloc[-1]["observed"] < y_bins.iloc[-1]["replicated_q05"]
    assert y_bins.iloc[2]["observed"] > y_bins.iloc[2]["replicated_q95"]
    assert y_bins["far"].sum() >= 3, y_bins
    # the overall statistics of Y and X3 alone do not tell (the residual sd absorbs both)
    for node in ("X3", "Y"):
        for name in ("mean", "variance"):
            assert not check.statistic(node, name)["outside_90"], check.statistic(node, name)
    assert "statistics within groups" in str(check)


@pytest.mark.stan
def test_conditional_check_of_a_correct_declaration_flags_nothing_far(
    stan_backend: str,
) -> None:
    check = _check(bent=False)
    print(check)
    far = check.table[far_outside(check.table)]
    assert far.empty, far
    assert len(check.conditional()) == (4 * 2 * (2 + ppc.DEFAULT_BINS) + 3 * (2 + ppc.DEFAULT_BINS))
