"""The printed summary of a fit's diagnostics (no Stan: a Diagnostics built by hand)."""

from __future__ import annotations

import math

import pandas as pd

from counterfair.inference.diagnostics import Diagnostics


def _diagnostics(**changes: object) -> Diagnostics:
    table = pd.DataFrame(
        {"r_hat": [1.002, 1.004], "ess_bulk": [812.0, 455.0]}, index=["sigma_X", "beta_X_A"]
    )
    values: dict[str, object] = {
        "max_rhat": 1.004,
        "min_ess_bulk": 455.0,
        "latent_max_rhat": 1.021,
        "latent_min_ess_bulk": 390.0,
        "divergences": 0,
        "max_treedepth_hits": 0,
        "table": table,
        "chains": 2,
        "draws": 750,
    }
    values.update(changes)
    return Diagnostics(**values)  # type: ignore[arg-type]


def test_summary_names_the_worst_values_and_says_when_nothing_is_wrong() -> None:
    text = str(_diagnostics())
    assert "2 chain(s) x 750 draws" in text
    assert "max R-hat 1.004" in text and "min bulk ESS 455" in text
    assert "latents: max R-hat 1.021" in text
    assert text.splitlines()[-1] == "  problems: none"


def test_summary_lists_the_problems() -> None:
    table = pd.DataFrame({"r_hat": [1.03], "ess_bulk": [40.0]}, index=["sigma_X"])
    text = str(_diagnostics(max_rhat=1.03, min_ess_bulk=40.0, divergences=3, table=table))
    last = text.splitlines()[-1]
    assert "R-hat > 1.01 for ['sigma_X']" in last
    assert "bulk ESS < 100 for ['sigma_X']" in last
    assert "3 divergent transition(s)" in last


def test_summary_without_latents_has_no_latent_line() -> None:
    text = str(_diagnostics(latent_max_rhat=math.nan, latent_min_ess_bulk=math.nan))
    assert "latents" not in text
