"""Tests of the HTML report and the disparity chart helper."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from counterfair.audit import disparity_figure, group_metrics, write_report
from counterfair.audit._validation import BAD_CHOICE, NO_PREDICTORS

Data = tuple[np.ndarray, dict[str, np.ndarray], pd.DataFrame]


@pytest.fixture
def data() -> Data:
    rng = np.random.default_rng(21)
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
    assert "<style>" in text and "<link" not in text and "<script" not in text
    assert text.count('<table class="dataframe audit">') >= 2 * 6
    assert "Predictor: full model" in text
    assert "Predictor: coin&lt;flip&gt;" in text
    assert "race x sex" in text
    assert "Parity verdicts" in text and "Bootstrap intervals" in text
    assert "<p id='cf'>cf here</p>" in text
    images = _images(text)
    assert len(images) == 2
    assert all(img.startswith(b"\x89PNG\r\n\x1a\n") for img in images)
    summary = group_metrics(y, preds["full model"], protected).summary()
    assert html.escape(summary) in text


def test_regression_report(tmp_path: Path, data: Data) -> None:
    _, _, protected = data
    rng = np.random.default_rng(2)
    y = rng.normal(size=len(protected))
    path = write_report(tmp_path / "reg.html", y_true=y, y_pred=y + rng.normal(size=y.size),
                        protected=protected, task="regression")
    text = path.read_text(encoding="utf-8")
    assert "mean_residual" in text and "rmse" in text
    assert "Predictor: prediction" in text
    assert len(_images(text)) == 1


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
