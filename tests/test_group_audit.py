"""``counterfair.audit.GroupAudit``: the data and the settings once, the measures as methods."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted

from counterfair.audit import GroupAudit, write_report
from counterfair.audit.group_audit import (
    CLASSIFICATION_ONLY,
    NO_OUTCOMES,
    NO_PRIVILEGED,
    NOT_A_TASK,
    ONLY_EXACT_BOOTSTRAP,
    SEVERAL_PREDICTORS,
    WHICH_ATTRIBUTE,
    Classification,
    Regression,
)
from counterfair.audit.report import render_report
from counterfair.dask.group_audits import dask_group_metrics, dask_regression_metrics


@pytest.fixture
def rows() -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    rng = np.random.default_rng(shifted(81))
    n = 400
    attributes = pd.DataFrame({"race": rng.choice(["W", "B"], n), "sex": rng.choice(["F", "M"], n)})
    y = rng.integers(0, 2, n)
    score = np.clip(0.4 * y + 0.5 * rng.random(n), 0, 1)
    return y, score, attributes


def test_entry_points_take_few_parameters() -> None:
    for entry, most in ((GroupAudit, 11), (write_report, 11), (render_report, 11),
                        (dask_group_metrics, 11), (dask_regression_metrics, 11)):
        assert len(inspect.signature(entry).parameters) <= most, entry


def test_several_predictors_are_asked_one_at_a_time(rows) -> None:
    y, score, attributes = rows
    both = GroupAudit(y, {"a": score, "b": 1 - score}, attributes)
    assert list(both.predictors) == ["a", "b"]
    with pytest.raises(ValueError, match=re.escape(SEVERAL_PREDICTORS.format(names=["a", "b"]))):
        both.metrics()
    one = both.predictor("b").metrics()
    alone = GroupAudit(y, 1 - score, attributes).metrics()
    pd.testing.assert_frame_equal(one.by_group, alone.by_group)
    with pytest.raises(KeyError, match="no predictor 'c'"):
        both.predictor("c")


def test_the_task_is_an_object_checked_when_made(rows) -> None:
    y, score, attributes = rows
    with pytest.raises(TypeError, match=re.escape(NOT_A_TASK.format(value="regression"))):
        GroupAudit(y, score, attributes, task="regression")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tau must satisfy"):
        Classification(tau=1.5)
    with pytest.raises(ValueError, match="min_group_rows"):
        Classification(min_group_rows=-1)
    regression = GroupAudit(y + 0.5, score, attributes, task=Regression())
    for measure in ("class_balance", "two_group"):
        with pytest.raises(ValueError, match=re.escape(CLASSIFICATION_ONLY.format(
                measure=f"{measure}()"))):
            getattr(regression, measure)()


def test_the_inputs_are_checked_when_the_audit_is_made(rows) -> None:
    y, score, attributes = rows
    with pytest.raises(ValueError, match="y_true must contain binary labels"):
        GroupAudit(y + 0.5, score, attributes)
    with pytest.raises(ValueError, match="reference group 'Z' not found"):
        GroupAudit(y, score, attributes, reference={"race": "Z"})
    with pytest.raises(ValueError, match="n_bootstrap=5 would be ignored"):
        GroupAudit(y, score, attributes, n_bootstrap=5, ci_method="analytic")


def test_two_group_and_disparate_impact_take_the_reference_of_the_audit(rows) -> None:
    y, score, attributes = rows
    audit = GroupAudit(y, score, attributes, reference={"race": "W"})
    with pytest.raises(ValueError, match=re.escape(WHICH_ATTRIBUTE.format(
            available=["race", "sex"]))):
        audit.two_group()
    pd.testing.assert_frame_equal(audit.two_group(attribute="race"),
                                  audit.two_group(attribute="race", reference="W"))
    with pytest.raises(ValueError, match=re.escape(NO_PRIVILEGED.format(attribute="sex"))):
        audit.two_group(attribute="sex")
    impact = audit.disparate_impact("B", attribute="race")
    assert impact.reference == "W" and impact.threshold_percent == 80.0
    report = audit.metrics()
    ratio = report.ratios.loc[("race", "B"), "predicted_prevalence"]
    assert impact.ratio_percent == pytest.approx(100 * ratio, rel=1e-12)


def test_decisions_alone_answer_disparate_impact_only(rows) -> None:
    _, score, attributes = rows
    audit = GroupAudit(None, score, attributes[["race"]])
    assert audit.disparate_impact("B").protected_group == "B"
    with pytest.raises(ValueError, match=re.escape(NO_OUTCOMES)):
        audit.metrics()


def test_class_balance_has_only_the_exact_bootstrap(rows) -> None:
    y, score, attributes = rows
    audit = GroupAudit(y, score, attributes, ci_method="analytic")
    with pytest.raises(ValueError, match=re.escape(ONLY_EXACT_BOOTSTRAP.format(
            method="analytic"))):
        audit.class_balance()


def test_the_report_takes_an_audit(rows, tmp_path) -> None:
    y = rows[0]
    with pytest.raises(TypeError, match="the report takes a GroupAudit"):
        write_report(tmp_path / "r.html", {"y_true": y})  # type: ignore[arg-type]
    assert not (tmp_path / "r.html").exists()
