"""Fair by business necessity: FairLearner(features=cf.inputs.BusinessNecessity(allow=...,
baseline=...)) and decompose(...).allow(...).

The notes SCM of tests/test_decomposition.py (no Stan: a fixed-parameter fit): X, Z
protected (Z continuous, its rows depend on X); V a child of Z; M and D children of X;
Y the target, a child of X, M, D, Z and of the latent U. With ``mediators=["M"]`` the
mediated effect runs through M and the direct one through D (D is an input of the
learner; X itself is not).

* a disallowed direct or indirect effect is exactly 0 in the learner's decomposition,
  draw by draw (the paths carrying it see the baseline in every world);
* a disallowed spurious effect is 0 within the rows' sampling error: the learner reads
  every row with Z at a reference, so what is left between the groups at a fixed world
  is the rows' draw of the exogenous U and noise, which the SCM makes independent of X;
* an allowed effect is kept (far from 0), and the learner with everything allowed has
  a large spurious effect, so the tests can fail.
"""

from __future__ import annotations

import json
import re
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from _seeds import shifted
from test_decomposition import NOTES_TRUTH, given_fit, notes_rows, notes_scm

import counterfair as cf
from counterfair import errors
from counterfair.audit import decomposition as dec
from counterfair.audit import decomposition_result as dres
from counterfair.io import learner_folder
from counterfair.learn import fair

N_ROWS = 6000


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    return notes_rows(N_ROWS, shifted(91))


@pytest.fixture(scope="module")
def fit(rows: pd.DataFrame) -> cf.Fit:
    return given_fit(notes_scm(), rows, NOTES_TRUTH, n_sets=10, jitter=0.02, seed=shifted(5))


def learner(fit: cf.Fit, rows: pd.DataFrame, **options: Any) -> cf.FairLearner:
    settings: dict[str, Any] = {"baseline": "0", "attribute": "X", "mediators": ["M"]}
    settings.update(options)
    features = cf.inputs.BusinessNecessity(**settings)
    return cf.FairLearner(
        fit, target="Y", features=features, n_samples=5, seed=shifted(3)
    ).fit(rows)


def decomposition(
    fit: cf.Fit, rows: pd.DataFrame, model: cf.FairLearner, allow: tuple[str, ...] | None
) -> dec.Decomposition:
    result = cf.audit.decompose(
        fit, rows, attribute="X", x0="0", x1="1", predictor=model, mediators=["M"],
        settings=cf.audit.DecompositionSettings(n_samples=40, seed=shifted(2)),
    )
    return result if allow is None else result.allow(allow)


def spurious_error(fit: cf.Fit, rows: pd.DataFrame, model: cf.FairLearner) -> float:
    """Standard error of Ctf-SE from the rows' sampling: the two groups' means of each
    row's posterior-mean output in the world do(X = x1)."""
    abduction = fit.abduct(
        cf.rows.Rows.check(rows, fit.scm, fit.encoding), method="draws", n_samples=40,
        seed=shifted(2),
    )
    n = len(rows)
    at_x1 = np.full(n, int(fit.encoding.code("X", ["1"])[0]), dtype=np.int64)
    out = model.path_specific_output(abduction, world={"X": at_x1}).reshape(-1, n).mean(axis=0)
    group = rows["X"].astype(str).to_numpy() == "1"
    return float(
        np.sqrt(out[group].var(ddof=1) / group.sum() + out[~group].var(ddof=1) / (~group).sum())
    )


@pytest.fixture(scope="module")
def results(fit: cf.Fit, rows: pd.DataFrame) -> dict[tuple[str, ...], Any]:
    out = {}
    for allow in [("IE",), ("DE",), ("DE", "IE", "SE")]:
        model = learner(fit, rows, allow=allow)
        out[allow] = (model, decomposition(fit, rows, model, allow))
    return out


def test_allow_ie_removes_the_direct_and_spurious_effects(
    results: dict[tuple[str, ...], Any], fit: cf.Fit, rows: pd.DataFrame
) -> None:
    model, result = results[("IE",)]
    assert np.all(result.draws["Ctf-DE"] == 0.0)  # D sees the baseline in every world
    assert abs(result.mean("Ctf-SE")) < 4 * spurious_error(fit, rows, model)
    assert result.mean("Ctf-IE") < -0.5  # the mediated effect through M is kept
    unfair = result.unfair().set_index("effect")
    assert list(unfair.index) == ["DE", "SE", "unfair"]
    assert unfair.loc["unfair", "contribution"] == pytest.approx(
        -result.mean("Ctf-SE") + result.mean("Ctf-DE"), abs=1e-12
    )
    assert "business necessity: allowed IE; what remains unfair:" in result.summary()


def test_allow_de_removes_the_indirect_and_spurious_effects(
    results: dict[tuple[str, ...], Any], fit: cf.Fit, rows: pd.DataFrame
) -> None:
    model, result = results[("DE",)]
    assert np.all(np.abs(result.draws["Ctf-IE"]) < 1e-12)  # M sees the baseline
    assert abs(result.mean("Ctf-SE")) < 4 * spurious_error(fit, rows, model)
    assert abs(result.mean("Ctf-DE")) > 0.03  # the direct effect through D is kept


def test_allowing_everything_keeps_a_large_spurious_effect(
    results: dict[tuple[str, ...], Any], fit: cf.Fit, rows: pd.DataFrame
) -> None:
    model, result = results[("DE", "IE", "SE")]
    assert abs(result.mean("Ctf-SE")) > 5 * spurious_error(fit, rows, model)
    assert abs(result.mean("Ctf-DE")) > 0.03 and result.mean("Ctf-IE") < -0.5
    unfair = result.unfair()
    assert list(unfair["effect"]) == ["unfair"] and unfair["contribution"].iloc[0] == 0.0


def test_identities_hold_for_a_path_specific_learner(
    results: dict[tuple[str, ...], Any],
) -> None:
    for _, result in results.values():
        residuals = result.identity_residuals()
        assert np.abs(residuals.to_numpy()).max() < 1e-10


def test_the_saved_settings_hold_allow_and_the_reference(
    results: dict[tuple[str, ...], Any],
) -> None:
    """What a saved learner's learner.json holds (the fixed-parameter fit of this file
    has no sampler statistics, so the folder itself is not written here)."""
    model, _ = results[("IE",)]
    assert set(model.reference_) == {"Z"}
    settings = learner_folder._learner_settings(model)
    features = settings["features"]
    assert features["strategy"] == "BusinessNecessity"
    assert features["allow"] == ["IE"] and features["attribute"] == "X"
    assert features["mediators"] == ["M"] and features["baseline"] == "0"
    assert json.loads(json.dumps(settings))["features"] == features  # plain JSON
    assert cf.inputs.from_document(features) == model.features  # and back
    assert settings["reference_"] == pytest.approx(model.reference_)


def test_decompose_without_allow_has_no_business_necessity_line(
    results: dict[tuple[str, ...], Any], fit: cf.Fit, rows: pd.DataFrame
) -> None:
    model, _ = results[("IE",)]
    result = decomposition(fit, rows.head(300), model, allow=None)
    assert result.allowed is None
    assert "business necessity" not in result.summary()
    assert list(result.unfair()["effect"]) == ["DE", "IE", "SE", "unfair"]


# ---------------------------------------------------------------------- bad settings
@pytest.mark.parametrize(
    ("options", "error", "text"),
    [
        ({"allow": ("XE",)}, ValueError,
         "BusinessNecessity(allow=...) names 'XE', which is not an effect; effects: "
         "['DE', 'IE', 'SE']"),
        ({"allow": ("IE",), "unfair_paths": [("X", "M")]}, TypeError,
         "unexpected keyword argument 'unfair_paths'"),
        ({"allow": ("IE",), "baseline": None}, ValueError,
         "BusinessNecessity needs baseline=: the level x0"),
        ({"allow": ("IE",), "attribute": None}, ValueError,
         fair.ALLOW_ATTRIBUTE.format(count=2, names=["X", "Z"])),
        ({"allow": ("IE",), "attribute": "V"}, errors.SCMError,
         fair.ALLOW_NOT_PROTECTED.format(attribute="V", protected=["X", "Z"])),
        ({"allow": ("IE",), "mediators": ["V"]}, errors.SCMError,
         fair.ALLOW_MEDIATOR.format(node="V", what="not a descendant of 'X'",
                                    attribute="X", target="Y")),
    ],
    ids=["unknown effect", "with unfair_paths", "no baseline", "several attributes",
         "not protected", "bad mediator"],
)
def test_bad_allow_settings_name_the_culprit(
    fit: cf.Fit, rows: pd.DataFrame, options: dict[str, Any], error: type, text: str
) -> None:
    with pytest.raises(error, match=re.escape(text)):
        learner(fit, rows.head(100), **options)


def test_a_direct_path_into_a_mediator_cannot_be_split() -> None:
    """X -> D -> M with only M a mediator: the paths through D are direct and mediated."""
    graph = nx.DiGraph()
    for name, spec in {
        "X": cf.Protected(levels=("0", "1")), "D": cf.Normal(), "M": cf.Normal(),
        "Y": cf.Normal(),
    }.items():
        graph.add_node(name, spec=spec)
    graph.add_edges_from([("X", "D"), ("D", "M"), ("X", "M"), ("M", "Y"), ("D", "Y")])
    model = cf.FairLearner(
        cf.SCM(graph),
        target="Y",
        features=cf.inputs.BusinessNecessity(allow=("IE",), baseline="0", mediators=["M"]),
    )
    with pytest.raises(errors.SCMError, match=re.escape(
        fair.ALLOW_SHARED.format(node="D", mediator="M", attribute="X")
    )):
        model._check_setup()


def test_allow_refuses_an_unknown_effect(fit: cf.Fit, rows: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match=re.escape(
        errors.BAD_ALLOW.format(effect="TE", effects=list(dres.EFFECTS))
    )):
        cf.audit.decompose(
            fit, rows.head(100), attribute="X", x0="0", x1="1", outcome="Y",
        ).allow(("TE",))


def test_disallowing_se_with_an_observed_root_confounder_is_refused() -> None:
    """A: an observed root the rows may tie to X (as age in COMPAS). Holding protected
    confounders at a reference cannot remove the spurious effect through it: refused."""
    graph = nx.DiGraph()
    for name, spec in {
        "X": cf.Protected(levels=("0", "1")), "A": cf.Normal(sigma=1.0),
        "W": cf.Normal(sigma=0.5), "Y": cf.Normal(sigma=0.5),
    }.items():
        graph.add_node(name, spec=spec)
    graph.add_edges_from([("X", "W"), ("A", "W"), ("X", "Y"), ("W", "Y"), ("A", "Y")])
    scm = cf.SCM(graph)
    rng = np.random.default_rng(shifted(8))
    x = (rng.random(200) < 0.5).astype(int)
    a = rng.normal(0.5 * x, 1.0)
    w = 0.8 * x + 0.4 * a + 0.5 * rng.standard_normal(200)
    data = pd.DataFrame({"X": pd.Categorical(x.astype(str), categories=["0", "1"]), "A": a,
                         "W": w, "Y": 0.3 * x + 0.7 * w + 0.2 * a})
    fit = given_fit(scm, data, {"alpha_A": 0.0, "alpha_W": 0.0, "beta_W_X": [0.8],
                                "beta_W_A": 0.4, "alpha_Y": 0.0, "beta_Y_X": [0.3],
                                "beta_Y_W": 0.7, "beta_Y_A": 0.2}, seed=shifted(9))
    model = cf.FairLearner(
        fit,
        target="Y",
        features=cf.inputs.BusinessNecessity(allow=("IE",), baseline="0"),
        n_samples=3,
        seed=shifted(1),
    )
    with pytest.raises(ValueError, match=re.escape(
        fair.ALLOW_SE_OBSERVED.format(nodes=["A"], attribute="X")
    )):
        model.fit(data)
    allowed = cf.FairLearner(
        fit,
        target="Y",
        features=cf.inputs.BusinessNecessity(allow=("IE", "SE"), baseline="0"),
        n_samples=3,
        seed=shifted(1),
    ).fit(data)
    assert allowed.reference_ == {}
