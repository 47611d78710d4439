"""The audit report for a decision maker (issue 49 item 7): the largest group as the
default reference, groups with too few rows not judged, share-of-positives parity not
judged (it follows group sizes), a constant decision not informative, ratio intervals in
the findings, each group's mean score with its interval, and the command line's
``--reference``, ``--min-group-rows`` and ``--name``."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted

from counterfair.audit import GroupAudit
from counterfair.audit._findings import (
    CRITERIA,
    NOT_INFORMATIVE,
    TOO_FEW,
    evaluate,
    parity_findings,
    predictor_data,
)
from counterfair.audit._groups import build_layout, protected_frame
from counterfair.audit.group_audit import Classification
from counterfair.audit.report import render_report, report_references, score_means
from counterfair.cli import main


def _data_json(text: str) -> dict:
    found = re.search(r'<script type="application/json" id="counterfair-data">(.*?)</script>',
                      text, re.S)
    assert found is not None
    return json.loads(found.group(1))


def _findings(text: str) -> list[str]:
    block = re.search(r'<ul class="findings" id="findings-list">(.*?)</ul>', text, re.S)
    assert block is not None
    return [html.unescape(item) for item in re.findall(r"<li[^>]*>(.*?)</li>", block.group(1))]


def _cells(sizes: dict[tuple[str, str], int]) -> pd.DataFrame:
    return pd.DataFrame([(c, s) for (c, s), k in sizes.items() for _ in range(k)],
                        columns=["colour", "sex"])


def test_the_default_reference_is_the_largest_group_and_reference_wins() -> None:
    frame = protected_frame(_cells({("Black", "Female"): 72, ("Black", "Male"): 300,
                                    ("White", "Female"): 300, ("White", "Male"): 900}))
    layout = build_layout(frame)
    chosen, why = report_references(layout, None)
    assert chosen == {"colour": "White", "sex": "Male", "colour x sex": "White x Male"}
    assert set(why.values()) == {"largest group"}
    chosen, why = report_references(layout, {"colour": "Black"})
    assert chosen["colour"] == "Black" and why["colour"] == "given"
    assert chosen["sex"] == "Male" and why["sex"] == "largest group"
    # ties: the first in order
    tied = build_layout(protected_frame(pd.DataFrame({"g": ["b", "a", "a", "b"]})))
    assert report_references(tied, None)[0] == {"g": "a"}
    with pytest.raises(ValueError, match="colour"):
        report_references(layout, {"color": "White"})
    with pytest.raises(ValueError, match="Purple"):
        report_references(layout, {"colour": "Purple"})


def test_the_report_says_which_reference_and_why(tmp_path: Path) -> None:
    protected = _cells({("Black", "Female"): 40, ("Black", "Male"): 300,
                        ("White", "Female"): 300, ("White", "Male"): 900})
    rng = np.random.default_rng(shifted(3))
    y = rng.integers(0, 2, len(protected))
    pred = rng.integers(0, 2, len(protected))
    text = render_report(GroupAudit(y, {"m": pred}, protected, reference={"sex": "Female"}))
    assert ("Reference groups: colour = White (the largest group, 1200 rows); sex = Female "
            "(given, 340 rows); colour x sex = White x Male (the largest group, 900 rows).") \
        in html.unescape(text)
    data = _data_json(text)
    assert ["colour", "White"] in data["predictors"][0]["reference"]
    with pytest.raises(ValueError, match="Purple"):
        render_report(GroupAudit(y, {"m": pred}, protected, reference={"colour": "Purple"}))


def _small_group_data() -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """Group c (12 rows) gets no positive decision: its ratio would fail any band."""
    g = np.array(["a"] * 200 + ["b"] * 200 + ["c"] * 12)
    pred = np.r_[np.tile([1, 0], 100), np.tile([1, 0], 100), np.zeros(12, int)]
    y = np.tile([1, 1, 0, 0], 103)
    return y, pred, pd.DataFrame({"g": g})


def test_a_group_with_too_few_rows_is_not_judged() -> None:
    y, pred, protected = _small_group_data()
    report = GroupAudit(y, pred, protected).metrics()
    assert bool(report.verdicts.loc[("g", "c"), "selection_rate_parity"]) is False
    entry = predictor_data("m", report, "p", min_group_rows=30)
    assert [g["small"] for g in entry["groups"]] == [False, False, True]
    results = {r["criterion"]: r for r in evaluate(entry, 0.8)}
    assert results["selection_rate_parity"]["verdicts"] == ["pass", "pass", TOO_FEW]
    assert results["selection_rate_parity"]["word"] == "pass"
    assert all(r["failing"] == [] or all(p != 2 for p, *_ in r["failing"])
               for r in results.values())
    # judged when the minimum is 0 (or lower than the group)
    judged = {r["criterion"]: r for r in evaluate(predictor_data("m", report, "p"), 0.8)}
    assert judged["selection_rate_parity"]["verdicts"][2] == "FAIL"
    text = render_report(GroupAudit(y, {"m": pred}, protected))
    findings = _findings(text)
    assert not any(" fails selection rate parity" in f for f in findings)
    assert ("m: 1 group not judged, too few rows (fewer than 30, or a reference group with "
            "fewer): g = c (12 rows).") in findings
    assert "m fails selection rate parity" in "".join(_findings(render_report(
        GroupAudit(y, {"m": pred}, protected, task=Classification(min_group_rows=0)),
    )))
    with pytest.raises(ValueError, match="min_group_rows"):
        render_report(GroupAudit(y, {"m": pred}, protected, task=Classification(min_group_rows=-1)))


def test_a_small_reference_group_makes_its_attribute_unjudged() -> None:
    y, pred, protected = _small_group_data()
    report = GroupAudit(y, pred, protected, reference={"g": "c"}).metrics()
    entry = predictor_data("m", report, "p", min_group_rows=30)
    assert all(g["small"] for g in entry["groups"])
    result = evaluate(entry, 0.8)[0]
    assert result["word"] == TOO_FEW and set(result["verdicts"]) == {TOO_FEW}
    assert [s for s, failed in parity_findings(entry, 0.8) if failed] == []


def test_share_of_positives_is_not_judged_so_group_sizes_make_no_failure() -> None:
    """Every group selected at the same rate, groups of 3,567 and 200 rows: the larger
    holds 18 times the positives, which is no unfairness."""
    g = np.array(["big"] * 3567 + ["small"] * 200)
    pred = np.r_[np.tile([1, 0], 3567)[:3567], np.tile([1, 0], 100)]
    y = np.tile([1, 0, 0], 1256)[: g.size]
    report = GroupAudit(y, pred, pd.Series(g, name="g")).metrics()
    assert bool(report.verdicts.loc[("g", "small"), "share_of_positives_parity"]) is False
    assert "share_of_positives_parity" not in {c for c, _ in CRITERIA}
    text = render_report(GroupAudit(y, {"m": pred}, pd.Series(g, name="g")))
    findings = _findings(text)
    assert not any("share of" in f for f in findings)
    assert any(f.startswith("m passes selection rate parity") for f in findings)
    assert "share_of_positives_parity" not in text.split('id="counterfair-data"')[0].replace(
        "share of positive decisions", "")
    # shown, though, beside the share of rows
    assert "share of positive decisions</th>" in text and "share of rows</th>" in text


def test_a_constant_decision_is_not_informative_on_every_criterion() -> None:
    rng = np.random.default_rng(shifted(7))
    protected = _cells({("Black", "Female"): 72, ("Black", "Male"): 700,
                        ("White", "Female"): 900, ("White", "Male"): 3567})
    white = (protected["colour"] == "White").to_numpy()
    y = (rng.random(len(protected)) < np.where(white, 0.8, 0.5)).astype(int)  # base rates differ
    probability = 0.6 + 0.2 * white + rng.uniform(0, 0.1, len(protected))
    for predictions in (probability, np.ones(len(protected), int)):
        text = render_report(GroupAudit(y, {"learner": predictions}, protected, n_bootstrap=20))
        findings = _findings(text)
        assert 'class="fail"' not in text.split('<section id="findings">')[1].split("</ul>")[0]
        assert findings[0].startswith("learner gives every row the same decision (1, positive")
        assert not any(" fails " in f or " passes " in f for f in findings)
        data = _data_json(text)["predictors"][0]
        for result in evaluate(data, 0.8):
            assert result["word"] == NOT_INFORMATIVE
            assert set(result["verdicts"]) == {NOT_INFORMATIVE}
        top = text[: text.index('<section id="findings">')]
        if predictions is probability:
            assert "every score is at or above the threshold 0.5" in findings[0]
            assert "learner: every decision is 1 (every score is at or above the threshold " \
                   "0.5); the parity tests of its decisions are not informative" in top
        else:  # constant as given: the older warning
            assert "a constant predictor" in top


def test_each_group_mean_score_with_its_interval() -> None:
    rng = np.random.default_rng(shifted(9))
    protected = _cells({("Black", "Female"): 80, ("Black", "Male"): 300,
                        ("White", "Female"): 300, ("White", "Male"): 600})
    scores = rng.random(len(protected))
    means = score_means(scores, build_layout(protected_frame(protected)), 0.95)
    by_colour = pd.Series(scores).groupby(protected["colour"])
    np.testing.assert_allclose(means.loc["colour"]["mean"], by_colour.mean())
    half = 1.959963984540054 * by_colour.std() / np.sqrt(by_colour.size())
    np.testing.assert_allclose(means.loc["colour"]["upper"] - means.loc["colour"]["mean"], half)
    assert list(means.loc["colour x sex"]["rows"]) == [80, 300, 300, 600]
    y = rng.integers(0, 2, len(protected))
    text = html.unescape(render_report(GroupAudit(y, {"m": scores}, protected)))
    assert "mean probability</th>" in text
    white = means.loc[("colour", "White")]
    black = means.loc[("colour", "Black"), "mean"]
    assert f"m: mean probability by colour (95% interval): Black {black:.3g}" in text
    assert f"White (reference) {white['mean']:.3g} ({white['lower']:.3g} to " \
           f"{white['upper']:.3g})" in text
    # scores beyond [0, 1] are scores; decisions have no mean-score column
    assert "mean score</th>" in render_report(GroupAudit(y, {"m": 3 * scores}, protected))
    decisions = render_report(GroupAudit(y, {"m": (scores > 0.5).astype(int)}, protected))
    assert "mean probability" not in decisions and "mean score" not in decisions


def test_a_failing_finding_carries_the_ratio_interval() -> None:
    rng = np.random.default_rng(shifted(11))
    g = np.array(["a"] * 600 + ["b"] * 600)
    pred = np.r_[rng.random(600) < 0.6, rng.random(600) < 0.3].astype(int)
    y = rng.integers(0, 2, g.size)
    protected = pd.Series(g, name="g")
    report = GroupAudit(y, pred, protected, n_bootstrap=50, seed=shifted(1)).metrics()
    entry = predictor_data("m", report, "p", min_group_rows=30)
    _, upper, lower_s, upper_s = entry["groups"][1]["intervals"]["predicted_prevalence"]
    assert upper < 0.8  # clearly outside the band
    sentence = next(s for s, failed in parity_findings(entry, 0.8)
                    if failed and "selection rate parity" in s)
    assert sentence.endswith(f"(95% interval {lower_s} to {upper_s}, outside the band).")
    # at a tau whose band the interval reaches, the sentence says so
    loose = next(s for s, failed in parity_findings(entry, float(upper) - 1e-3)
                 if failed and "selection rate parity" in s and "interval" in s)
    assert loose.endswith("reaching into the band).")
    # without intervals the sentence has none
    plain = predictor_data("m", GroupAudit(y, pred, protected).metrics(), "p")
    assert all("interval" not in s for s, _ in parity_findings(plain, 0.8))


# ---------------------------------------------------------------------- command line
@pytest.fixture
def csv(tmp_path: Path) -> Path:
    rng = np.random.default_rng(shifted(13))
    protected = _cells({("Black", "Female"): 20, ("Black", "Male"): 200,
                        ("White", "Female"): 200, ("White", "Male"): 500})
    frame = protected.assign(y=rng.integers(0, 2, len(protected)),
                             probability=rng.uniform(0.55, 0.95, len(protected)))
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(("option", "message"), [
    (["--reference", "color=White"],
     "--reference color=White: 'color' is not a protected attribute; protected: "
     "['colour', 'sex', 'colour x sex']"),
    (["--reference", "colour=Purple"],
     "--reference colour=Purple: 'Purple' is not a level of colour; levels: "
     "['Black', 'White']"),
    (["--reference", "colour"], "--reference colour: give ATTRIBUTE=LEVEL"),
    (["--reference", "sex=Male,sex=Female"], "sex is given two reference levels"),
    (["--name", "a,b"], "--name: 2 names for 1 audited prediction column (probability)"),
    (["--min-group-rows", "-1"], "--min-group-rows -1: give 0 or a positive number of rows"),
])
def test_cli_refusals_are_one_line_and_write_nothing(csv: Path, capsys: pytest.CaptureFixture,
                                                     option: list[str], message: str) -> None:
    out = csv.parent / "r.html"
    code = main(["audit", str(csv), "--label", "y", "--predictions", "probability",
                 "--protected", "colour,sex", "--bootstrap", "0", "--out", str(out), *option])
    error = capsys.readouterr().err
    assert code == 2 and message in error and error.count("\n") == 1, error
    assert not out.exists()


def test_cli_reference_name_and_minimum(csv: Path) -> None:
    out = csv.parent / "r.html"
    code = main(["audit", str(csv), "--label", "y", "--predictions", "probability",
                 "--protected", "colour,sex", "--bootstrap", "0", "--out", str(out),
                 "--reference", "colour=Black", "--reference", "colour x sex=Black x Male",
                 "--name", "fair model", "--min-group-rows", "25"])
    assert code == 0
    text = html.unescape(out.read_text(encoding="utf-8"))
    assert "Predictor: fair model" in text and "Predictor: probability" not in text
    assert ("Reference groups: colour = Black (given, 220 rows); sex = Male (the largest "
            "group, 700 rows); colour x sex = Black x Male (given, 200 rows).") in text
    assert "colour x sex = Black x Female (20 rows)" in text  # fewer than 25: not judged
    assert "groups judged from 25 rows" in text


def test_the_run_learner_is_called_learner() -> None:
    from counterfair.cli.run import LEARNER_NAME, predictor_names

    assert LEARNER_NAME == "learner"
    assert predictor_names(None, ["probability"], [LEARNER_NAME]) == ["learner"]
    assert predictor_names(["fair"], ["probability"], [LEARNER_NAME]) == ["fair"]
    assert predictor_names(None, ["m1", "m2"]) == ["m1", "m2"]
    assert predictor_names(["a", "b"], ["m1", "m2"]) == ["a", "b"]
