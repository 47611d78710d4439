"""Identification checks of latents (``SCM.identification`` and IdentificationWarning)."""

from __future__ import annotations

import warnings

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from _models import law_level2_scm
from _seeds import shifted

import counterfair as cf
from counterfair.inference.diagnostics import Diagnostics, warn_on_problems
from counterfair.model.identification import convergence_hint


def _scm(nodes: dict[str, object], edges: list[tuple[str, str]]) -> cf.SCM:
    g = nx.DiGraph()
    g.add_node("A", spec=cf.Protected())
    for name, spec in nodes.items():
        g.add_node(name, spec=spec)
    g.add_edges_from(edges)
    return cf.SCM(g)


def _children(latent: str, children: list[str]) -> list[tuple[str, str]]:
    return [(latent, c) for c in children] + [("A", c) for c in children]


def test_two_normal_indicators_identify_only_the_product_of_loadings() -> None:
    with pytest.warns(cf.errors.IdentificationWarning) as caught:
        scm = _scm(
            {"U": cf.Latent(), "X1": cf.Normal(), "X2": cf.Normal()},
            _children("U", ["X1", "X2"]),
        )
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith("latent 'U' is not identified: 2 Normal indicators")
    assert "product of their loadings" in message
    assert "add a third indicator" in message and "fix a Normal child's residual sd" in message
    assert "cf.Normal(sigma=1.0)" in message  # Python's words, from Python
    table = scm.identification()
    assert table[["latent", "problem"]].values.tolist() == [["U", "not identified"]]


def test_four_children_joined_by_edges_say_what_they_count_and_why() -> None:
    """The user's shape: four children of U, four of their pairs joined by edges, three
    binary children. The message counts the pairs that give a covariance, names the
    edges that explain the others, says which children give no variance moment and why,
    and asks for "another" indicator, not "a third"; from the command line, the fix is an
    SCM-file key."""
    from counterfair.logs import speaking_scm_file

    nodes = {"U": cf.Latent(), "employed": cf.Bernoulli(), "citizen": cf.Bernoulli(),
             "checks": cf.Poisson(), "released": cf.Bernoulli()}
    children = ["employed", "citizen", "checks", "released"]
    edges = [*_children("U", children), ("employed", "released"), ("checks", "released"),
             ("citizen", "released"), ("employed", "checks")]
    with pytest.warns(cf.errors.IdentificationWarning) as caught:
        scm = _scm(nodes, edges)
    message = str(caught[0].message)
    assert "its 4 children give 3 moment(s) for 4 loadings" in message
    assert "2 of their 6 pair(s) give a covariance" in message
    assert "employed -> checks, employed -> released, citizen -> released, checks -> released" \
        in message
    assert "checks give(s) a variance moment" in message
    assert "employed, citizen, released give(s) none" in message and "fixed by its mean" in message
    assert "add another indicator" in message and "third" not in message
    with speaking_scm_file():
        remedy = scm.identification()["remedy"].iloc[0]
    assert "sigma: 1.0 on the node in the SCM file" in remedy and "cf." not in remedy


def test_three_normal_indicators_or_a_fixed_sd_identify_the_latent() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        three = _scm(
            {"U": cf.Latent(), "X1": cf.Normal(), "X2": cf.Normal(), "X3": cf.Normal()},
            _children("U", ["X1", "X2", "X3"]),
        )
        fixed = _scm(
            {"U": cf.Latent(), "X1": cf.Normal(), "X2": cf.Normal(sigma=1.0)},
            _children("U", ["X1", "X2"]),
        )
    assert three.identification().empty and fixed.identification().empty


def test_a_single_child_warns() -> None:
    with pytest.warns(
        cf.errors.IdentificationWarning,
        match=r"latent 'U' is not identified: a single "
        r"child \('X'\)",
    ):
        _scm({"U": cf.Latent(), "X": cf.Normal()}, _children("U", ["X"]))
    with pytest.warns(cf.errors.IdentificationWarning, match=r"latent 'U' is weak: a single child"):
        _scm({"U": cf.Latent(), "C": cf.Poisson()}, _children("U", ["C"]))  # overdispersion only


def test_two_latents_with_the_same_children_warn() -> None:
    children = ["X1", "X2", "X3"]
    with pytest.warns(cf.errors.IdentificationWarning) as caught:
        scm = _scm(
            {"U": cf.Latent(), "V": cf.Latent(), **{c: cf.Normal() for c in children}},
            _children("U", children) + [("V", c) for c in children],
        )
    messages = [str(w.message) for w in caught]
    assert messages == [
        "latent 'V' is not identified: same children as latent 'U' (['X1', 'X2', 'X3']): the "
        "two can be rotated into each other; to identify it, merge 'V' and 'U', or give one "
        "of them a child the other lacks"
    ]
    assert scm.identification()["latent"].tolist() == ["V"]


def test_an_unobserved_confounder_of_two_normal_nodes_warns() -> None:
    """U -> X, U -> Y, X -> Y with free sds: 3 moments for 5 parameters."""
    with pytest.warns(cf.errors.IdentificationWarning, match="its 2 children give 0 moment"):
        _scm(
            {"U": cf.Latent(), "X": cf.Normal(), "Y": cf.Normal()},
            [*_children("U", ["X", "Y"]), ("X", "Y")],
        )


def test_law_school_level2_and_shipped_models_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for scm in (law_level2_scm(), cf.datasets.law_school_level2(),
                    cf.datasets.law_school_level3()):
            assert scm.identification().empty
    assert law_level2_scm().children("K") == ("UGPA", "LSAT", "ZFYA")


def test_bad_rhat_warning_points_to_the_identification_problem() -> None:
    with pytest.warns(cf.errors.IdentificationWarning):
        scm = _scm(
            {"U": cf.Latent(), "X1": cf.Normal(), "X2": cf.Normal()}, _children("U", ["X1", "X2"])
        )
    hint = convergence_hint(scm)
    assert hint is not None and "['U']" in hint and "scm.identification()" in hint
    assert convergence_hint(law_level2_scm()) is None
    fit = _fit_two_indicators(scm)
    bad_rhat = [m for m in fit if "R-hat" in m]
    # 4 short chains on a ridge of loadings: max R-hat 1.05 to 1.32 under seed shifts 0-4
    # (2 chains of 150 + 150 gave 1.007 to 1.031: no warning under shift 4)
    assert bad_rhat
    for message in bad_rhat:  # every R-hat warning of the fit names the problem
        assert hint in message


def _fit_two_indicators(scm: cf.SCM) -> list[str]:
    """A short real fit of the unidentified SCM; its convergence warnings."""
    rng = np.random.default_rng(shifted(5))
    u = rng.standard_normal(150)
    data = pd.DataFrame(
        {
            "A": rng.choice(["a", "b"], 150),
            "X1": 0.9 * u + 0.5 * rng.standard_normal(150),
            "X2": 0.7 * u + 0.5 * rng.standard_normal(150),
        }
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scm.fit(data, chains=4, warmup=40, draws=40, seed=shifted(3), progress=False)
    return [str(w.message) for w in caught if issubclass(w.category, cf.errors.ConvergenceWarning)]


def test_warn_on_problems_appends_the_hint_to_rhat_problems_only() -> None:
    table = pd.DataFrame({"r_hat": [1.2], "ess_bulk": [10.0]}, index=["lambda_X1_U"])
    diagnostics = Diagnostics(
        max_rhat=1.2,
        min_ess_bulk=10.0,
        latent_max_rhat=float("nan"),
        latent_min_ess_bulk=float("nan"),
        divergences=0,
        max_treedepth_hits=0,
        table=table,
        chains=2,
        draws=100,
    )
    with pytest.warns(cf.errors.ConvergenceWarning) as caught:
        warn_on_problems(diagnostics, rhat_hint="HINT")
    messages = [str(w.message) for w in caught]
    assert any("R-hat" in m and m.endswith("; HINT") for m in messages)
    assert all("HINT" not in m for m in messages if "R-hat" not in m)
