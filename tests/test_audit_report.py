"""Tests of the HTML report and the disparity chart helper."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from counterfair.audit import (
    EXPLANATION_MEASURES,
    ExplanationAudit,
    consistency,
    disparity_figure,
    find_subpopulations,
    flip_counterfactual,
    generalized_entropy_index,
    group_metrics,
    shap_disparity,
    write_report,
)
from counterfair.audit._validation import BAD_CHOICE, NO_PREDICTORS

Data = tuple[np.ndarray, dict[str, np.ndarray], pd.DataFrame]


@pytest.fixture
def data() -> Data:
    rng = np.random.default_rng(shifted(21))
    n = 400
    protected = pd.DataFrame({"race": rng.choice(["White", "Black"], n),
                              "sex": rng.choice(["Female", "Male"], n)})
    y = rng.integers(0, 2, n)
    preds = {"full model": 0.4 * y + 0.6 * rng.random(n), "coin<flip>": rng.integers(0, 2, n)}
    return y, preds, protected


def _images(text: str) -> list[bytes]:
    return [base64.b64decode(b) for b in re.findall(r'src="data:image/png;base64,([^"]+)"', text)]


def test_classification_report_is_self_contained(tmp_path: Path, data: Data) -> None:
    y, preds, protected = data
    path = write_report(tmp_path / "sub" / "audit.html", y_true=y, y_pred=preds,
                        protected=protected, n_bootstrap=20,
                        extra_sections=[("Counterfactual audit", "<p id='cf'>cf here</p>")])
    assert path.exists()
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert "<style>" in text and "<link" not in text and "@import" not in text
    assert "url(" not in text
    # two scripts: the data (JSON) and the page's own code; no src= except data: URIs
    assert text.count("<script") == 2 and "<script src" not in text
    assert all(src.startswith("data:") for src in re.findall(r'src="([^"]*)"', text))
    assert text.count('<table class="audit sortable">') >= 2 * 6
    assert "Predictor: full model" in text
    assert "Predictor: coin&lt;flip&gt;" in text
    assert "race x sex" in text
    assert "Parity verdicts" in text and "Bootstrap intervals" in text
    assert "<p id='cf'>cf here</p>" in text
    assert _images(text) == []  # charts are inline SVG now
    assert text.count('<svg class="ratio-chart"') == 2 * 3  # per predictor and attribute
    # the summary is a table: one row per criterion with its plain-language meaning
    table = group_metrics(y, preds["full model"], protected).summary_table()
    assert 'class="audit summary sortable"' in text
    for meaning in table["meaning"]:
        assert html.escape(meaning, quote=False) in text
    assert 'class="verdict verdict-' in text
    assert '<pre class="summary">' not in text  # no wall of text any more


def test_regression_report(tmp_path: Path, data: Data) -> None:
    _, _, protected = data
    rng = np.random.default_rng(shifted(2))
    y = rng.normal(size=len(protected))
    path = write_report(tmp_path / "reg.html", y_true=y, y_pred=y + rng.normal(size=y.size),
                        protected=protected, task="regression")
    text = path.read_text(encoding="utf-8")
    assert "mean_residual" in text and "rmse" in text
    assert "Predictor: prediction" in text
    assert text.count('<svg class="difference-chart"') == 3
    assert 'id="tau-slider"' not in text  # no parity verdicts to move


def test_report_errors(tmp_path: Path, data: Data) -> None:
    y, preds, protected = data
    with pytest.raises(ValueError, match=re.escape(BAD_CHOICE.format(
            name="task", choices=["classification", "regression"], value="ranking"))):
        write_report(tmp_path / "x.html", y_true=y, y_pred=preds, protected=protected,
                     task="ranking")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape(NO_PREDICTORS)):
        write_report(tmp_path / "x.html", y_true=y, y_pred={}, protected=protected)
    assert not (tmp_path / "x.html").exists()


def test_disparity_figure_draws_tau_band(data: Data) -> None:
    y, preds, protected = data
    report = group_metrics(y, preds["full model"], protected, tau=0.75)
    fig = disparity_figure(report.ratios, measures=["fpr", "fnr"], tau=report.tau,
                           reference=report.reference)
    assert isinstance(fig, Figure)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2
    band = axes[0].patches[0]
    assert isinstance(band, Rectangle)
    x0, x1 = band.get_x(), band.get_x() + band.get_width()
    assert (x0, x1) == pytest.approx((0.75, 1 / 0.75))
    labels = [t.get_text() for t in axes[0].get_yticklabels()]
    assert any(label.endswith("(ref)") for label in labels)


def test_summary_table_colours_failures(tmp_path: Path) -> None:
    group = pd.Series(["a"] * 20 + ["b"] * 10, name="g")
    pred = np.array([1] * 10 + [0] * 10 + [1] * 4 + [0] * 6)
    y = np.array([1, 0] * 15)
    text = write_report(tmp_path / "r.html", y_true=y, y_pred=pred, protected=group,
                        tau=0.9).read_text(encoding="utf-8")
    assert '<td class="verdict verdict-fail" data-v="FAIL">FAIL</td>' in text
    assert "g = 'b' (predicted_prevalence 0.8)" in text


def test_explanation_and_subpopulation_sections(tmp_path: Path) -> None:
    rng = np.random.default_rng(shifted(4))
    n = 2000
    X = pd.DataFrame({"x": rng.normal(size=n), "a": rng.integers(0, 2, n),
                      "region": rng.choice(["n", "s"], n)})
    y = (rng.random(n) < 0.5).astype(int)
    pred = ((X["x"] + 0.5 * X["a"]) > 0.2).astype(int).to_numpy()

    def model(frame: pd.DataFrame) -> np.ndarray:
        return ((frame["x"] + 0.5 * frame["a"]) > 0.2).astype(float).to_numpy()

    shap_like = pd.DataFrame({"x": X["x"], "a": 0.5 * (X["a"] - X["a"].mean())})
    audit = ExplanationAudit(
        shap=shap_disparity(shap_like, X["a"], sensitive="a", privileged=1, n_bootstrap=20),
        flip=flip_counterfactual(model, X[["x", "a"]], sensitive="a", privileged=1,
                                 unprivileged=0),
        consistency=consistency(X[["x", "a"]], pred, exclude=["a"]),
        entropy=generalized_entropy_index(y, pred, protected=X["a"], n_bootstrap=20),
        shap_method="exact (additive)")
    subs = find_subpopulations(X[["region"]], X["a"], pred, protected_group=1, max_depth=1,
                               n_bootstrap=20)
    text = write_report(tmp_path / "x.html", y_true=y, y_pred={"rule": pred},
                        protected=X[["a"]], explanations={"rule": audit},
                        subpopulations=subs).read_text(encoding="utf-8")
    assert "<h2>Explanation-based measures</h2>" in text
    for meaning in EXPLANATION_MEASURES.values():
        assert html.escape(meaning, quote=False) in text
    assert "exact (additive)" in text
    assert "<h2>Affected subpopulations</h2>" in text
    assert "Strongest significant subpopulations" in text
    assert "region == 'n'" in text and "[0] all: n = 1000" in text
