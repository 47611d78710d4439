"""One world of rows as arrays and as a long frame (tools/mutation.py, module world).

A :class:`World` is built by hand from an exact abduction of the mediator SCM
(tests/_mutant_models.py), with values chosen so that every cell of its frame and of
its row subsets can be written down: the layout (sample-major, the row labels
tiled), the columns (protected categoricals, latents, observed, noise) and the
``world`` column.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from _mutant_models import mediator_abduction

from counterfair.counterfactual import world as wld


def test_world_column_and_noise_column() -> None:
    column = wld.world_column("counterfactual", 3)
    assert isinstance(column, pd.Categorical)
    assert list(column.categories) == ["factual", "counterfactual"]
    assert list(column) == ["counterfactual"] * 3 and column.codes.dtype == np.int8
    factual = wld.world_column("factual", 2)
    assert list(factual) == ["factual"] * 2 and list(factual.codes) == [0, 0]
    other = wld.world_column("do(A=1)", 2)
    assert isinstance(other, np.ndarray) and other.dtype == object
    assert other.tolist() == ["do(A=1)", "do(A=1)"]
    assert wld.noise_column("Y") == "Y:noise" and wld.WORLDS == ("factual", "counterfactual")


def _world(name: str = "counterfactual") -> tuple[wld.World, Any, Any]:
    fit, ab = mediator_abduction(3)
    s, n = ab.n_samples, len(ab.data)
    grid = np.arange(s * n, dtype=float).reshape(s, n)
    values = {
        "U": ab.latents["U"],
        "M": grid, "L": grid + 100.0, "Z": grid[:1] * 2.0,  # (1, N) broadcasts
        "Y": -grid, "C": np.tile(np.arange(n, dtype=float), (s, 1)),
    }
    noise = {"M": grid / 10.0, "Y": grid / 100.0}
    codes = {"A": np.arange(n) % 2}
    world = wld.World(name=name, abduction=ab, codes=codes, values=values, noise=noise)
    return world, fit, ab


def test_frame_layout_and_columns() -> None:
    world, fit, ab = _world()
    s, n = ab.n_samples, len(ab.data)
    assert world.shape == (s, n) == (3, 12)
    frame = world.frame(fit.scm, fit.encoding)
    assert list(frame.columns) == ["row", "sample", "world", "A", "U", "M", "L", "Z", "Y",
                                   "C", "M:noise", "Y:noise"]
    assert len(frame) == s * n
    assert frame["row"].tolist() == list(ab.data.index) * s
    assert frame["sample"].tolist() == [i for i in range(s) for _ in range(n)]
    assert (frame["world"] == "counterfactual").all()
    assert isinstance(frame["A"].dtype, pd.CategoricalDtype)
    assert list(frame["A"].cat.categories) == ["0", "1"]
    assert frame["A"].astype(str).tolist() == ["0", "1"] * (n // 2) * s
    grid = np.arange(s * n, dtype=float)
    assert frame["M"].tolist() == grid.tolist()
    assert frame["L"].tolist() == (grid + 100).tolist()
    assert frame["Z"].tolist() == (np.arange(n) * 2.0).tolist() * s
    assert frame["Y"].tolist() == (-grid).tolist()
    assert frame["M:noise"].tolist() == (grid / 10).tolist()
    assert frame["Y:noise"].tolist() == (grid / 100).tolist()
    assert frame["U"].tolist() == ab.latents["U"].reshape(-1).tolist()
    assert frame["C"].tolist() == list(range(n)) * s
    bare = world.frame(fit.scm, fit.encoding, latents=False)
    assert list(bare.columns) == ["row", "sample", "world", "A", "M", "L", "Z", "Y", "C"]
    assert bare["Y"].tolist() == frame["Y"].tolist()


def test_frame_of_a_named_world_and_of_the_factual_one() -> None:
    world, fit, _ = _world("factual")
    frame = world.frame(fit.scm, fit.encoding)
    assert isinstance(frame["world"].dtype, pd.CategoricalDtype)
    assert (frame["world"] == "factual").all()
    world, fit, _ = _world("do(A=1)")
    assert (world.frame(fit.scm, fit.encoding)["world"] == "do(A=1)").all()


@pytest.mark.parametrize("cut_here", [True, False])
def test_take_rows_keeps_the_chosen_rows(cut_here: bool) -> None:
    world, fit, ab = _world()
    s, n = world.shape
    mask = np.zeros(n, dtype=bool)
    mask[[1, 4, 5, 10]] = True
    sub = world.take_rows(mask, None if cut_here else ab.take_rows(mask))
    assert sub.name == "counterfactual" and sub.shape == (s, 4)
    assert list(sub.abduction.data.index) == [ab.data.index[i] for i in (1, 4, 5, 10)]
    assert sub.codes["A"].tolist() == [1, 0, 1, 0]
    full = world.frame(fit.scm, fit.encoding)
    part = sub.frame(fit.scm, fit.encoding)
    keep = np.tile(mask, s)
    for column in ["row", "sample", "M", "L", "Z", "Y", "C", "U", "M:noise", "Y:noise"]:
        assert part[column].tolist() == full.loc[keep, column].tolist(), column
    assert sub.values["Z"].shape == (s, 4)  # broadcast to the samples
    assert sub.noise["M"].shape == (s, 4)
    np.testing.assert_array_equal(sub.abduction.latents["U"], ab.latents["U"][:, mask])
