"""``SFMFit.split`` (counterfair.audit.sfm_split): the spurious effect split by confounder and the
indirect effect by mediator, against the closed forms of a simulated chain.

* **Truth** (no Stan): the chain's closed-form parts (``tests/_sfm.Chain``) agree with a
  Monte Carlo of its potential outcomes that uses no algebra, and add up to its effects.
* **Truth** (``stan``, one fit of 3,000 rows): every part within ``K_SD`` posterior sds of
  its closed form; the projection's and the reweighting's ``E[y_{x1} | x0]`` agree.
* **Mechanics** (``stan``, the same fit): the parts add up to the decomposition's effects
  in every draw, and that decomposition is ``SFMFit.decompose``'s of the same fit; nothing
  depends on ``chunk_rows``; another order gives other parts and the same sums.
* **Bad input**: each mistake in the groups raises, naming the column.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted
from _sfm import Chain
from test_sfm import K_SD, N_SAMPLES, RECORDED, SETTINGS

import counterfair as cf
from counterfair.stan.backend import resolve_backend_name

ROWS = 3000
"""Rows of the chain's data set."""

PARTS = ["Ctf-SE[Z1]", "Ctf-SE[Z2]", "Ctf-IE[W1]", "Ctf-IE[W2]"]
ORDER = {"confounders": ["Z1", "Z2"], "mediators": ["W1", "W2"]}
SAMPLES = {"n_samples": N_SAMPLES}


@functools.cache
def _chain_fit(backend: str) -> cf.audit.sfm_fit.SFMFit:
    chain = Chain()
    seed = shifted(40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RECORDED)  # short chains; the spline columns
        return cf.audit.fit_sfm(chain.data(ROWS, seed=seed), **chain.roles(), seed=seed,
                                settings=SETTINGS)


def chain_fit() -> cf.audit.sfm_fit.SFMFit:
    return _chain_fit(resolve_backend_name("auto"))


@functools.cache
def chain_split() -> cf.audit.split_result.EffectSplit:
    return chain_fit().split(**ORDER, **SAMPLES)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- the truth
def test_closed_form_parts_match_the_potential_outcomes() -> None:
    """The closed forms the fits are checked against, checked by a Monte Carlo of the
    chain's potential outcomes (2 million units, no algebra), and their sums."""
    chain = Chain()
    exact = chain.closed_form()
    mc = chain.monte_carlo(2_000_000, seed=shifted(3))
    for part in PARTS:
        assert abs(mc[part] - exact[part]) < 0.01, (part, mc[part], exact[part])
    assert abs(mc["Ctf-SE"] - (mc["Ctf-SE[Z1]"] + mc["Ctf-SE[Z2]"])) < 1e-12
    assert abs(mc["Ctf-IE"] - (mc["Ctf-IE[W1]"] + mc["Ctf-IE[W2]"])) < 1e-12
    assert all(abs(v) > 0.3 for v in exact.values()), exact  # no vacuous check


@pytest.mark.stan
def test_parts_match_the_closed_forms() -> None:
    split = chain_split()
    table = split.table.assign(name=lambda t: t["effect"] + "[" + t["part"] + "]")
    table = table.set_index("name").loc[PARTS]
    truth = pd.Series(Chain().closed_form())[PARTS]
    gap = (table["mean"] - truth).abs()
    assert (gap <= K_SD * table["sd"]).all(), pd.DataFrame(
        {"mean": table["mean"], "sd": table["sd"], "truth": truth}
    )
    note = next(n for n in split.notes if n.startswith("E[y_{x1} | x0]"))
    apart = float(note.split("(")[-1].split(" of")[0])
    assert abs(apart) < 3, note


# ---------------------------------------------------------------------- mechanics
@pytest.mark.stan
def test_parts_add_up_to_the_decomposition_in_every_draw() -> None:
    split = chain_split()
    assert (split.identity_residuals() < 1e-9).all(), split.identity_residuals()
    alone = chain_fit().decompose(**SAMPLES)
    pd.testing.assert_frame_equal(split.decomposition.draws, alone.draws, rtol=0, atol=1e-12)
    assert list(split.draws.columns) == PARTS
    assert list(split.table.columns) == list(cf.audit.split_result.SPLIT_COLUMNS)
    assert "Parts (in the order moved)" in str(split)


@pytest.mark.stan
def test_parts_do_not_depend_on_chunk_rows() -> None:
    other = chain_fit().split(**ORDER, **SAMPLES, chunk_rows=337)  # type: ignore[arg-type]
    np.testing.assert_allclose(other.draws.to_numpy(), chain_split().draws.to_numpy(),
                               rtol=0, atol=1e-9)


@pytest.mark.stan
def test_another_order_gives_other_parts_and_the_same_sums() -> None:
    """Moving Z2 before Z1 (and W2 before W1) changes the attribution, not the effects."""
    reverse = chain_fit().split(confounders=["Z2", "Z1"], mediators=["W2", "W1"], **SAMPLES)
    forward = chain_split()
    for effect in ("Ctf-SE", "Ctf-IE"):
        cols = [c for c in forward.draws.columns if c.startswith(effect)]
        rcols = [c for c in reverse.draws.columns if c.startswith(effect)]
        np.testing.assert_allclose(reverse.draws[rcols].sum(axis=1),
                                   forward.draws[cols].sum(axis=1), rtol=0, atol=1e-9)
    # in the chain Z2's part moved first is not Z2's part moved last
    assert abs(reverse.draws["Ctf-SE[Z2]"].mean() - forward.draws["Ctf-SE[Z2]"].mean()) > 0.1


@pytest.mark.stan
def test_one_effect_alone() -> None:
    split = chain_fit().split(mediators=[["W1"], ["W2"]], **SAMPLES)
    assert list(split.order) == ["Ctf-IE"]
    np.testing.assert_allclose(split.draws.to_numpy(),
                               chain_split().draws[["Ctf-IE[W1]", "Ctf-IE[W2]"]].to_numpy(),
                               rtol=0, atol=1e-9)


# ---------------------------------------------------------------------- bad input
@pytest.mark.stan
@pytest.mark.parametrize(
    ("groups", "error", "match"),
    [
        ({"confounders": ["Z1", "W1"]}, ValueError, "'W1', which is not one of the confounders"),
        ({"confounders": ["Z1", ["Z1", "Z2"]]}, ValueError, "names 'Z1' twice"),
        ({"mediators": ["W1"]}, ValueError, r"leaves out \['W2'\]"),
        ({"confounders": [["Z1", "Z2"]]}, ValueError, "one group"),
        ({"confounders": "Z1"}, TypeError, "ordered groups"),
        ({"mediators": ["W1", []]}, ValueError, "empty group"),
        ({}, TypeError, "needs confounders= or mediators="),
    ],
)
def test_bad_groups_name_the_column(groups: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        chain_fit().split(**groups)


def test_no_confounder_no_spurious_split() -> None:
    """A fit without confounders has nothing spurious to split (the check ``SFMFit.split``
    and the command line run before anything else)."""
    from counterfair.audit.sfm_split import check_groups

    with pytest.raises(ValueError, match="splits the confounders, but there are none"):
        check_groups(["Z1", "Z2"], (), "confounders")
    assert check_groups(["W1", ["W2", "W3"]], ("W1", "W2", "W3"), "mediators") == [
        ("W1",), ("W2", "W3")
    ]
