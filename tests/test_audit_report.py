"""Tests of the HTML report and the disparity chart helper."""

from __future__ import annotations

import base64
import errno
import html
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from counterfair.audit import (
    GroupAudit,
    SubpopulationSettings,
    consistency,
    find_subpopulations,
    flip_counterfactual,
    generalized_entropy_index,
    shap_disparity,
    write_report,
)
from counterfair.audit._validation import NO_PREDICTORS
from counterfair.audit.explanations import ExplanationAudit
from counterfair.audit.group_audit import NOT_A_TASK, Classification, Regression
from counterfair.audit.plotting import disparity_figure
from counterfair.audit.report import EXPLANATION_MEASURES

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
    path = write_report(
        tmp_path / "sub" / "audit.html", GroupAudit(y, preds, protected, n_bootstrap=20),
        extra_sections=[("Counterfactual audit", "<p id='cf'>cf here</p>")],
    )
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
    # the summary is a table: one row per judged criterion with its plain-language meaning
    table = GroupAudit(y, preds["full model"], protected).metrics().summary_table()
    assert 'class="audit summary sortable"' in text
    for criterion, meaning in zip(table["criterion"], table["meaning"], strict=True):
        judged = criterion != "share of positives parity"  # follows group sizes
        assert (html.escape(meaning, quote=False) in text) is judged
    assert 'class="verdict verdict-' in text
    assert '<pre class="summary">' not in text  # no wall of text any more


def test_stylesheet_and_script_are_the_package_files_and_the_policy_names_the_script(
    data: Data,
) -> None:
    """The page inlines templates/report.css and report.js (package data) as they are,
    and its Content-Security-Policy allows that script by the hash of its text."""
    import hashlib
    from importlib import resources

    from counterfair.audit.report import render_report

    y, preds, protected = data
    text = render_report(GroupAudit(y, preds, protected))
    folder = resources.files("counterfair.audit") / "templates"
    css = (folder / "report.css").read_text(encoding="utf-8")
    js = (folder / "report.js").read_text(encoding="utf-8")
    assert text.count("<style>") == 1 and f"<style>\n{css}</style>" in text
    scripts = re.findall(r"<script>(.*?)</script>", text, re.S)
    assert scripts == ["\n" + js]
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode("utf-8")).digest()).decode()
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)"/>', text)
    assert policy is not None
    assert policy.group(1) == ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                               f"script-src 'sha256-{digest}'; base-uri 'none'; "
                               "form-action 'none'")


def test_regression_report(tmp_path: Path, data: Data) -> None:
    _, _, protected = data
    rng = np.random.default_rng(shifted(2))
    y = rng.normal(size=len(protected))
    path = write_report(
        tmp_path / "reg.html",
        GroupAudit(y, y + rng.normal(size=y.size), protected, task=Regression()),
    )
    text = path.read_text(encoding="utf-8")
    assert "mean_residual" in text and "rmse" in text
    assert "Predictor: prediction" in text
    assert text.count('<svg class="difference-chart"') == 3
    assert 'id="tau-slider"' not in text  # no parity verdicts to move


def test_report_errors(tmp_path: Path, data: Data) -> None:
    y, preds, protected = data
    with pytest.raises(TypeError, match=re.escape(NOT_A_TASK.format(value="ranking"))):
        write_report(tmp_path / "x.html",
                     GroupAudit(y, preds, protected, task="ranking"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape(NO_PREDICTORS)):
        write_report(tmp_path / "x.html", GroupAudit(y, {}, protected))
    assert not (tmp_path / "x.html").exists()


def test_disparity_figure_draws_tau_band(data: Data) -> None:
    y, preds, protected = data
    report = GroupAudit(y, preds["full model"], protected, task=Classification(tau=0.75)).metrics()
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
    text = write_report(
        tmp_path / "r.html",
        GroupAudit(y, pred, group, task=Classification(tau=0.9, min_group_rows=10)),
    ).read_text(encoding="utf-8")
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
        shap=shap_disparity(shap_like, X["a"], attribute="a", privileged=1, n_bootstrap=20),
        flip=flip_counterfactual(model, X[["x", "a"]], attribute="a", privileged=1,
                                 unprivileged=0),
        consistency=consistency(X[["x", "a"]], pred, exclude=["a"]),
        entropy=generalized_entropy_index(y, pred, protected=X["a"], n_bootstrap=20),
        shap_method="exact (additive)")
    subs = find_subpopulations(
        X[["region"]], X["a"], pred, protected_group=1,
        settings=SubpopulationSettings(max_depth=1, n_bootstrap=20),
    )
    text = write_report(
        tmp_path / "x.html", GroupAudit(y, {"rule": pred}, X[["a"]]), explanations={"rule": audit},
        subpopulations=subs,
    ).read_text(encoding="utf-8")
    assert "<h2>Explanation-based measures</h2>" in text
    for meaning in EXPLANATION_MEASURES.values():
        assert html.escape(meaning, quote=False) in text
    assert "exact (additive)" in text
    assert "<h2>Affected subpopulations</h2>" in text
    assert "Strongest significant subpopulations" in text
    assert "region == 'n'" in text and "[0] all: n = 1000" in text


def _data_json(text: str) -> dict:
    import json

    found = re.search(r'<script type="application/json" id="counterfair-data">(.*?)</script>',
                      text, re.S)
    assert found is not None
    return json.loads(found.group(1))


def test_write_refuses_to_overwrite_and_leaves_no_temporary_file(tmp_path: Path,
                                                                 data: Data) -> None:
    y, preds, protected = data
    target = tmp_path / "audit.html"
    target.write_text("a user's file")
    with pytest.raises(FileExistsError, match=re.escape(f"{target} already exists; pass "
                                                        "overwrite=True")):
        write_report(target, GroupAudit(y, preds, protected))
    assert target.read_text() == "a user's file"
    path = write_report(target, GroupAudit(y, preds, protected), overwrite=True)
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        write_report(tmp_path, GroupAudit(y, preds, protected), overwrite=True)
    # a failure while rendering leaves the old file as it was, and no temporary file
    with pytest.raises(ValueError, match=re.escape(NO_PREDICTORS)):
        write_report(target, GroupAudit(y, {}, protected), overwrite=True)
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.html"]


def _fail_mid_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every text write puts the first half of its text on disk, then fails as a full
    disk would."""

    def half_then_full(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
        with open(self, "w", encoding="utf-8") as handle:
            handle.write(text[: len(text) // 2])
        raise OSError(errno.ENOSPC, "No space left on device (injected)")

    monkeypatch.setattr(Path, "write_text", half_then_full)


@pytest.mark.parametrize("overwrite", [True, False])
def test_a_write_that_fails_half_way_leaves_nothing_half_written(
    tmp_path: Path, data: Data, monkeypatch: pytest.MonkeyPatch, overwrite: bool
) -> None:
    """docs/report.md: "an error leaves nothing half written" -- the failure comes while
    the page's bytes are being written, after half of them reached the disk."""
    y, preds, protected = data
    earlier = tmp_path / "earlier.html"
    earlier.write_bytes(b"<p>an earlier report</p>\n")
    before = earlier.read_bytes(), earlier.stat().st_mtime_ns
    fresh = tmp_path / "fresh.html"
    with monkeypatch.context() as patch:
        _fail_mid_write(patch)
        with pytest.raises(OSError, match="injected"):
            write_report(earlier, GroupAudit(y, preds, protected), overwrite=True)
        with pytest.raises(OSError, match="injected"):
            write_report(fresh, GroupAudit(y, preds, protected), overwrite=overwrite)
    assert (earlier.read_bytes(), earlier.stat().st_mtime_ns) == before
    assert not fresh.exists()  # no half-written page where there was none
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier.html"]  # no temporary file
    # the same calls without the failure write the whole page
    write_report(fresh, GroupAudit(y, preds, protected), overwrite=overwrite)
    assert fresh.read_text(encoding="utf-8").rstrip().endswith("</html>")


def test_a_failed_move_into_place_keeps_the_earlier_file(
    tmp_path: Path, data: Data, monkeypatch: pytest.MonkeyPatch
) -> None:
    y, preds, protected = data
    earlier = tmp_path / "audit.html"
    earlier.write_bytes(b"<p>an earlier report</p>\n")
    before = earlier.read_bytes(), earlier.stat().st_mtime_ns

    def failing_replace(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, "Input/output error (injected)")

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", failing_replace)
        with pytest.raises(OSError, match="injected"):
            write_report(earlier, GroupAudit(y, preds, protected), overwrite=True)
    assert (earlier.read_bytes(), earlier.stat().st_mtime_ns) == before
    assert [p.name for p in tmp_path.iterdir()] == ["audit.html"]


def test_bad_tau_and_counterfactual_are_refused(tmp_path: Path, data: Data) -> None:
    y, preds, protected = data
    with pytest.raises(ValueError, match="tau"):
        write_report(
            tmp_path / "x.html", GroupAudit(y, preds, protected, task=Classification(tau=1.5)),
        )
    with pytest.raises(TypeError, match=r"counterfactual\['m'\] is a dict, not a "
                                        "CounterfactualReport"):
        write_report(tmp_path / "x.html", GroupAudit(y, preds, protected),
                     counterfactual={"m": {}})  # type: ignore[dict-item]
    assert not (tmp_path / "x.html").exists()


def test_user_strings_cannot_break_out_of_html_or_json(tmp_path: Path) -> None:
    evil = "</script><script>alert(1)</script><!--\u2028&amp;\"'"
    y = np.array([0, 1] * 20)
    pred = np.array([1, 0, 0, 1] * 10)
    group = pd.Series(["ok"] * 20 + [evil] * 20, name=f"col{evil}")
    text = write_report(
        tmp_path / "r.html", GroupAudit(y, {f"p{evil}": pred}, group), title=evil,
    ).read_text(encoding="utf-8")
    assert text.count("<script") == 2 and text.count("</script>") == 2
    assert "<!--" not in text and evil not in text
    data = _data_json(text)
    assert data["predictors"][0]["name"] == f"p{evil}"
    assert {g["label"] for g in data["predictors"][0]["groups"]} == {"ok", evil}
    assert data["attributes"] == [f"col{evil}"]
    shown = html.escape(evil, quote=False).replace('"', "&quot;")
    assert f'<option value="col{shown}">col{shown}</option>' in text
    assert f"<h2>Predictor: p{shown}</h2>" in text and f"<title>{shown}</title>" in text
    assert html.unescape(shown) == evil


def test_embedded_data_and_findings_follow_the_python_verdicts() -> None:
    """Race B's selection rate is 0.85 of A's: a finding at tau 0.9, none at 0.8."""
    from counterfair.audit._findings import evaluate, failing_text, parity_findings
    from counterfair.audit._findings import predictor_data as to_data
    from counterfair.audit.report import render_report

    race = np.array(["A"] * 40 + ["B"] * 40)
    pred = np.array([1] * 20 + [0] * 20 + [1] * 17 + [0] * 23)
    y = np.array([1, 0] * 40)
    for tau in (0.8, 0.85, 0.9):
        report = GroupAudit(
            y, pred, pd.Series(race, name="race"), task=Classification(tau=tau),
        ).metrics()
        entry = to_data("rule", report, "predictor-0")
        results = {r["criterion"]: r for r in evaluate(entry, tau)}
        table = report.summary_table().set_index("criterion")
        assert "share_of_positives_parity" not in results  # follows group sizes
        for criterion, result in results.items():
            row = table.loc[criterion.replace("_", " ")]
            assert result["word"] == row["verdict"], criterion
            assert failing_text(entry, result) == row["failing groups"], criterion
            expected = ["n/a" if v is pd.NA else ("pass" if v else "FAIL")
                        for v in report.verdicts[criterion]]
            assert result["verdicts"] == expected, criterion
        sentences = [text for text, _ in parity_findings(entry, tau)]
        fails = [s for s in sentences if s.startswith("rule fails selection rate parity")]
        if tau == 0.9:
            assert fails == ["rule fails selection rate parity at tau = 0.9: 1 group outside "
                             "the band 0.9 to 1.111; the farthest is race = B, whose selection "
                             "rate is 0.85 times its reference group's."]
        else:
            assert fails == []
            assert any("selection rate parity" in s and " passes " in s for s in sentences)
        text = render_report(
            GroupAudit(y, {"rule": pred}, {"race": race}, task=Classification(tau=tau)),
        )
        data = _data_json(text)
        assert data["tau"] == tau
        b = next(g for g in data["predictors"][0]["groups"] if g["label"] == "B")
        assert b["ratios"]["predicted_prevalence"] == [0.85, "0.85"]
        for sentence in sentences:
            assert html.escape(sentence, quote=False) in text


def test_histogram_densities() -> None:
    from counterfair.audit._svg import density_chart, histogram

    rng = np.random.default_rng(shifted(8))
    a, b = rng.normal(size=500), rng.normal(1.0, 0.5, size=300)
    edges, densities = histogram({"a": a, "b": b}, bins=25)
    assert edges[0] == min(a.min(), b.min()) and edges[-1] == max(a.max(), b.max())
    for name, sample in (("a", a), ("b", b)):
        expected, _ = np.histogram(sample, bins=edges, density=True)
        np.testing.assert_allclose(densities[name], expected, rtol=1e-12)
        assert float(np.sum(densities[name] * np.diff(edges))) == pytest.approx(1.0, abs=1e-12)
    # a predictor that never changes: one spike holding all the mass
    edges, densities = histogram({"zero": np.zeros(50)}, bins=10)
    assert (edges[0], edges[-1]) == (-0.5, 0.5)
    assert np.count_nonzero(densities["zero"]) == 1
    svg = density_chart({"causal <change>": a}, title="m: race")
    assert svg.startswith("<svg") and "causal &lt;change&gt;" in svg
    assert svg.count("<polyline") == 1


@pytest.mark.parametrize(
    "draw",
    [
        lambda rng: rng.normal(size=20_000),
        lambda rng: np.r_[rng.normal(size=500), rng.normal(5.0, 0.1, size=50)],
        lambda rng: rng.exponential(size=3_000),
        lambda rng: rng.normal(size=5),
    ],
)
def test_binned_kde_matches_scipy(draw) -> None:
    from scipy.stats import gaussian_kde

    from counterfair.audit.plotting import kde_on_grid

    values = draw(np.random.default_rng(shifted(11)))
    grid = np.linspace(values.min() - 0.3, values.max() + 0.3, 200)
    exact = gaussian_kde(values)(grid)
    assert np.abs(kde_on_grid(values, grid) - exact).max() < 1e-4 * exact.max()


def test_binned_kde_refuses_a_single_value() -> None:
    from counterfair.audit.plotting import kde_on_grid

    with pytest.raises(ValueError, match="two distinct values"):
        kde_on_grid(np.ones(10), np.linspace(0, 2, 50))

