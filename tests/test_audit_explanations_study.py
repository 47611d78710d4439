"""Tests of the explanation study: its classification rules, tables and a --quick run."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _data import DATA_DIR
from _seeds import shifted

from counterfair.datasets import find_data_file, load_adult, load_compas
from experiments import explanations as study

HAVE_DATA = all((DATA_DIR / f).exists()
                for f in ("adult.data", "adult.test", "compas-scores-two-years.csv"))
needs_data = pytest.mark.skipif(not HAVE_DATA, reason=f"Adult / COMPAS not found in {DATA_DIR}")


def test_classification_rules() -> None:
    assert study.classify("statistical_parity_difference", -0.2) == study.FAVOURS_PRIVILEGED
    assert study.classify("statistical_parity_difference", 0.0005) == study.EQUAL
    assert study.classify("shap_disparity", 0.01) == study.FAVOURS_UNPRIVILEGED
    assert study.classify("disparate_impact", 0.7) == study.FAVOURS_PRIVILEGED
    assert study.classify("disparate_impact", 1.0009) == study.EQUAL
    assert study.classify("consistency", 0.95) == study.UNEQUAL
    assert study.classify("consistency", 0.9995) == study.EQUAL
    assert study.classify("importance", 0.0) == study.EQUAL
    assert study.agrees(study.FAVOURS_PRIVILEGED, study.FAVOURS_PRIVILEGED)
    assert not study.agrees(study.FAVOURS_PRIVILEGED, study.FAVOURS_UNPRIVILEGED)
    # against an undirected measure only equal / unequal counts
    assert study.agrees(study.FAVOURS_UNPRIVILEGED, study.UNEQUAL)
    assert not study.agrees(study.EQUAL, study.UNEQUAL)
    assert study.distance_from_fair("disparate_impact", 0.7) == pytest.approx(0.3)
    assert study.distance_from_fair("consistency", 0.9) == pytest.approx(0.1)


def _cases() -> pd.DataFrame:
    rows = []
    rng = np.random.default_rng(shifted(0))
    for model in ("m1", "m2"):
        for scenario in ("original", "reweighing"):
            for method in ("kernel", "tree"):
                sign = -1 if scenario == "original" else 1
                rows.append({"setting": "s", "model": model, "scenario": scenario,
                             "shap_method": method,
                             "statistical_parity_difference": sign * 0.1,
                             "equal_opportunity_difference": -0.1,
                             "disparate_impact": 0.8, "counterfactual": sign * 0.05,
                             "consistency": 0.9, "generalized_entropy_index": 0.1,
                             "shap_disparity": -0.02 if method == "kernel" else sign * 0.02,
                             "importance": 0.01 + rng.random() / 100})
    return pd.DataFrame(rows)


def test_agreement_tables_count_matching_classes() -> None:
    overall, by_method = study.agreement_tables(_cases())
    # SHAP disparity favours the privileged in 6 of 8 cases (all kernel, tree/original)
    assert overall.loc["equal_opportunity_difference", "vs_shap_disparity"] == 0.75
    # counterfactual follows the scenario's sign: agrees with tree always, kernel half
    assert overall.loc["counterfactual", "vs_shap_disparity"] == 0.75
    assert by_method.loc["counterfactual", ("vs_shap_disparity", "tree")] == 1.0
    assert by_method.loc["counterfactual", ("vs_shap_disparity", "kernel")] == 0.5
    # every case is unequal by importance, and every fairness measure is unequal too
    assert (overall["vs_importance"] == 1.0).all()
    assert (overall["cases"] == 8).all()


def test_variations_and_correlation() -> None:
    cases = _cases()
    variation = study.variations(cases)
    assert len(variation) == 4  # 2 models x 2 methods, one mitigation
    assert (variation["mitigation"] == "reweighing").all()
    assert (variation["statistical_parity_difference"] == 0.0).all()  # |−0.1| − |0.1|
    corr = study.correlation_table(variation)
    assert corr.shape == (8, 8)
    assert np.isnan(corr.loc["statistical_parity_difference", "importance"])  # constant


def test_missing_data_folder_names_where_it_looked(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COUNTERFAIR_DATA", raising=False)
    expected = re.escape("adult.data not found. Folders searched: ")
    with pytest.raises(FileNotFoundError, match=expected):
        find_data_file("adult.data", tmp_path)
    monkeypatch.setenv("COUNTERFAIR_DATA", str(tmp_path / "env"))
    with pytest.raises(FileNotFoundError, match=r"\$COUNTERFAIR_DATA"):
        find_data_file("adult.data")


@needs_data
def test_loaders_apply_the_published_filters() -> None:
    adult = load_adult(DATA_DIR)
    assert len(adult) == 45222
    assert adult["split"].value_counts().to_dict() == {"train": 30162, "test": 15060}
    assert set(adult["income"]) == {0, 1}
    compas = load_compas(DATA_DIR)
    assert len(compas) == 6172
    assert compas["days_b_screening_arrest"].between(-30, 30).all()
    assert (compas["c_charge_degree"] != "O").all()


@needs_data
def test_quick_run_writes_every_output(tmp_path: Path) -> None:
    out = tmp_path / "study"
    assert study.main(["--data-dir", str(DATA_DIR), "--out", str(out), "--quick"]) == 0
    for name in ("cases.csv", "agreement.csv", "agreement_by_method.csv", "variations.csv",
                 "correlation.csv", "tables.md", "correlation.png", "run.json",
                 "audit_compas_race.html"):
        assert (out / name).stat().st_size > 0, name
    cases = pd.read_csv(out / "cases.csv")
    # 2 settings x 4 scenarios x 4 models, with 2 SHAP methods for LR, RF and GB
    assert len(cases) == 2 * 4 * (2 + 2 + 2 + 1)
    assert set(cases["shap_method"]) == {"kernel", "tree", "linear"}
    agreement = pd.read_csv(out / "agreement.csv", index_col=0)
    assert agreement[["vs_shap_disparity", "vs_importance"]].stack().between(0, 1).all()
    assert (out / "correlation.png").read_bytes().startswith(b"\x89PNG")
    assert "| counterfactual |" in (out / "tables.md").read_text(encoding="utf-8")
    report = (out / "audit_compas_race.html").read_text(encoding="utf-8")
    for section in ("Summary", "Explanation-based measures", "Affected subpopulations"):
        assert section in report
