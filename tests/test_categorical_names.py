"""Parameters named by level: a categorical node's coefficients, level effects, cutpoints.

``counterfair.stan.data.coords_and_dims`` gives every coefficient of a categorical node a
last axis ``<node>_level`` (its non-reference levels), a categorical protected parent's
rows ``<parent>_effect``, a level-valued observed parent's ``<parent>_level``, the extra
loadings of a ``loading_by`` parent ``<by>_level``, and an ordinal node's cutpoints
``<node>_cutpoint`` (``"low|mid"``); so the diagnostics table, ``fit.summary()`` and
``fit.idata.posterior`` say ``beta_K_A[b, q]``, not ``beta_K_A[0, 0]`` (issue 49).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import arviz as az
import numpy as np
import pandas as pd
import pytest
from _models import dag, families_scm, fit_recording
from _seeds import shifted

import counterfair as cf
from counterfair.rows.validated import Rows
from counterfair.stan.data import coords_and_dims

LEVELS_A = ("a", "b", "c")
LEVELS_O = ("low", "mid", "high")
LEVELS_K = ("p", "q", "r", "s")  # 3 non-reference levels: no axis of K is as long as
# another axis of the same parameter, so swapped axes cannot pass


def names_scm(coding: str = "reference") -> cf.SCM:
    """K categorical on a categorical protected A, a numeric M, the ordinal O and the
    latent U, its loadings differing by A; W Normal on K; U measured by X, Y, O and K."""
    return cf.SCM(
        dag(
            {
                "A": cf.Protected(levels=LEVELS_A),
                "U": cf.Latent(),
                "X": cf.Normal(),
                "Y": cf.Normal(),
                "M": cf.Normal(),
                "O": cf.Ordinal(levels=LEVELS_O),
                "K": cf.Categorical(levels=LEVELS_K, loading_by="A"),
                "W": cf.Normal(),
            },
            [
                ("U", "X"),
                ("A", "X"),
                ("U", "Y"),
                ("U", "O"),
                ("A", "M"),
                ("A", "K"),
                ("M", "K"),
                ("O", "K"),
                ("U", "K"),
                ("K", "W"),
            ],
        ),
        coding=coding,
    )


NAMES_TRUTH: dict[str, Any] = {
    "alpha_X": 0.0, "beta_X_A": [0.5, -0.5], "lambda_X_U": 1.0, "sigma_X": 0.5,
    "alpha_Y": 0.0, "lambda_Y_U": 0.8, "sigma_Y": 0.5,
    "alpha_M": 0.0, "beta_M_A": [0.3, 0.6], "sigma_M": 1.0,
    "lambda_O_U": 1.0, "cutpoints_O": [-0.5, 0.5],
    "alpha_K": [0.2, -0.2, 0.0], "beta_K_A": [[0.5, 0.0, 0.2], [0.0, 0.5, -0.2]],
    "beta_K_M": [0.3, -0.3, 0.1],
    "beta_K_O": [[0.4, 0.1, 0.0], [0.2, 0.6, 0.3]], "lambda_K_U": [0.5, -0.5, 0.3],
    "dlambda_K_U": [[0.2, 0.0, 0.1], [0.0, 0.2, 0.1]],
    "alpha_W": 0.0, "beta_W_K": [0.5, -0.5, 0.2], "sigma_W": 0.5,
}  # fmt: skip


def names_data(n: int = 200) -> pd.DataFrame:
    return names_scm().sample(n, params=NAMES_TRUTH, seed=shifted(3)).drop(columns="U")


def _coords_and_dims(scm: cf.SCM, data: pd.DataFrame) -> tuple[dict[str, Any], dict[str, Any]]:
    rows = Rows.check(data, scm, None)
    assert rows.encoding is not None
    return coords_and_dims(scm, rows.encoding, rows.frame, ["row"])


EXPECTED_DIMS = {
    "beta_X_A": ["A_effect"],
    "beta_M_A": ["A_effect"],
    "cutpoints_O": ["O_cutpoint"],
    "alpha_K": ["K_level"],
    "beta_K_A": ["A_effect", "K_level"],
    "beta_K_M": ["K_level"],
    "beta_K_O": ["O_level", "K_level"],
    "lambda_K_U": ["K_level"],
    "dlambda_K_U": ["A_level", "K_level"],
    "beta_W_K": ["K_level"],
}


def test_every_categorical_parameter_has_level_dims() -> None:
    coords, dims = _coords_and_dims(names_scm(), names_data(60))
    assert {k: v for k, v in dims.items() if k not in ("U", "z_U")} == EXPECTED_DIMS
    assert coords["K_level"] == ["q", "r", "s"]
    assert coords["A_effect"] == ["b", "c"]
    assert coords["A_level"] == ["b", "c"]
    assert coords["O_level"] == ["mid", "high"]
    assert coords["O_cutpoint"] == ["low|mid", "mid|high"]


def test_one_hot_coding_names_every_level_of_a_protected_parent() -> None:
    scm = names_scm("onehot")
    data = names_data(60)
    coords, dims = _coords_and_dims(scm, data)
    assert coords["A_effect"] == list(LEVELS_A)  # one-hot: every level has an effect
    assert dims["beta_K_A"] == ["A_effect", "K_level"]
    assert coords["A_level"] == ["b", "c"]  # extra loadings: non-reference levels still


def test_the_reference_level_is_left_out_wherever_it_is() -> None:
    scm = cf.SCM(
        dag(
            {
                "A": cf.Protected(levels=("a", "b")),
                "K": cf.Categorical(levels=("drug", "theft", "violent"), reference="theft"),
            },
            [("A", "K")],
        )
    )
    frame = pd.DataFrame({"A": ["a", "b"] * 3, "K": ["drug", "theft", "violent"] * 2})
    coords, dims = _coords_and_dims(scm, frame)
    assert coords["K_level"] == ["drug", "violent"]
    assert dims["beta_K_A"] == ["A_effect", "K_level"]


def test_integer_coded_levels_are_named_by_code() -> None:
    scm = cf.SCM(
        dag({"A": cf.Protected(levels=("a", "b")), "K": cf.Categorical(levels=3)}, [("A", "K")])
    )
    frame = pd.DataFrame({"A": ["a", "b", "a"], "K": [0, 1, 2]})
    coords, dims = _coords_and_dims(scm, frame)
    assert coords["K_level"] == [1, 2]
    assert dims["alpha_K"] == ["K_level"]


def test_the_families_scm_agrees_with_numpy_shapes() -> None:
    """Every named parameter's axes have the lengths of the numpy layout's shapes."""
    scm = families_scm()
    frame = pd.DataFrame(
        {
            "A": ["a", "b"] * 3,
            "age": np.linspace(-1, 1, 6),
            "O": ["low", "mid", "high"] * 2,
            "C": [0, 1, 2, 3, 4, 5],
            "X": np.linspace(0, 1, 6),
            "K": ["theft", "drug", "violent"] * 2,
        }
    )
    coords, dims = _coords_and_dims(scm, frame)
    assert dims["beta_K_A"] == ["A_effect", "K_level"]
    assert dims["beta_K_age"] == ["K_level"]  # a continuous protected parent: one column
    assert dims["beta_K_O"] == ["O_level", "K_level"]
    assert dims["beta_C_K"] == ["K_level"]  # a categorical parent of a NegativeBinomial node
    widths = {"A": 1, "age": 1}
    for eq in scm.equations.values():
        for name, shape in eq.family.parameter_shapes(eq, widths).items():
            if name in dims:
                assert tuple(len(coords[d]) for d in dims[name]) == shape, name


# ---------------------------------------------------------------------- a real fit
@pytest.fixture(scope="module")
def fit(stan_backend: str) -> cf.Fit:
    """Two chains of 150 + 150 on 200 rows: enough to name things, not to converge."""
    return fit_recording(
        names_scm(), names_data(), chains=2, warmup=150, draws=150, seed=shifted(4)
    ).fit


def _categorical_names(fit: cf.Fit) -> list[str]:
    eq = fit.scm.equations["K"]
    return [name for name in eq.parameter_names() if name in fit.idata.posterior]


@pytest.mark.stan
def test_a_fit_names_categorical_parameters_by_level(fit: cf.Fit) -> None:
    posterior = fit.idata.posterior
    for name, expected in EXPECTED_DIMS.items():
        assert list(posterior[name].dims[2:]) == expected, name
    for name in _categorical_names(fit):  # no arviz default dims left on K's parameters
        assert not any("_dim_" in str(d) for d in posterior[name].dims), name
    # every axis as long as the parameter the Stan program declares
    coords, dims = coords_and_dims(fit.scm, fit.encoding, fit.data, ["row"])
    for name, named in dims.items():
        if name in posterior:
            assert posterior[name].shape[2:] == tuple(len(coords[d]) for d in named), name
    assert list(posterior["beta_K_A"].coords["A_effect"].values) == ["b", "c"]
    assert list(posterior["beta_K_A"].coords["K_level"].values) == ["q", "r", "s"]
    assert list(posterior["beta_K_O"].coords["O_level"].values) == ["mid", "high"]
    index = list(fit.diagnostics.table.index)
    expected = [
        "alpha_K[q]", "alpha_K[r]",
        "beta_K_A[b, q]", "beta_K_A[b, r]", "beta_K_A[c, q]", "beta_K_A[c, r]",
        "beta_K_M[q]", "beta_K_M[r]",
        "beta_K_O[mid, q]", "beta_K_O[high, r]",
        "lambda_K_U[q]", "dlambda_K_U[c, s]",
        "beta_W_K[q]", "cutpoints_O[low|mid]", "cutpoints_O[mid|high]",
    ]  # fmt: skip
    assert set(expected) <= set(index)
    assert not [row for row in index if row.startswith(("alpha_K[", "beta_K_")) and "0" in row]
    assert set(expected) <= set(fit.summary().index)


@pytest.mark.stan
def test_names_survive_save_and_load(fit: cf.Fit, tmp_path: Path) -> None:
    fit.save(tmp_path / "fit")
    loaded = cf.load(tmp_path / "fit")
    assert list(loaded.diagnostics.table.index) == list(fit.diagnostics.table.index)
    assert list(loaded.idata.posterior["dlambda_K_U"].coords["A_level"].values) == ["b", "c"]
    assert "beta_K_O[mid, q]" in loaded.summary().index


@pytest.mark.stan
def test_a_fit_saved_with_arviz_default_dims_still_loads(fit: cf.Fit, tmp_path: Path) -> None:
    """Fits saved before parameters were named by level have ``beta_K_A_dim_0`` axes."""
    folder = tmp_path / "old"
    posterior = {name: fit.idata.posterior[name].values for name in fit.idata.posterior}
    row_dims = {name: ["row"] for name in posterior if "row" in fit.idata.posterior[name].dims}
    old = dataclasses.replace(
        fit,
        idata=az.InferenceData(
            posterior=az.from_dict(
                posterior=posterior, coords={"row": list(fit.data.index)}, dims=row_dims
            ).posterior,
            sample_stats=fit.idata.sample_stats,
        ),
    )
    assert "beta_K_A_dim_0" in old.idata.posterior["beta_K_A"].dims
    old.save(folder)
    loaded = cf.load(folder)
    assert "beta_K_A[0, 0]" in loaded.diagnostics.table.index
    np.testing.assert_array_equal(
        loaded.idata.posterior["beta_K_A"].values, fit.idata.posterior["beta_K_A"].values
    )
