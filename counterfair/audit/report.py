"""Self-contained, interactive HTML audit report: one file, no network.

The page holds its stylesheet, its script, its charts (inline SVG) and its data (JSON in a
``<script type="application/json">`` element); a Content-Security-Policy forbids any
request, so it opens offline, can be mailed or archived as one file and prints to PDF.

At the top, one plain sentence per finding (:mod:`._findings`). A control sets the
parity threshold tau (slider and number): the page recomputes every verdict with the
rule of :meth:`~counterfair.audit.GroupAudit.metrics` (a group passes when
``tau <= ratio <= 1 / tau``), so at the report's ``tau`` it shows exactly the Python
verdicts. A group selector shows one attribute or intersection (``"race x sex"``) in
the group tables and charts; table headers sort on click. Each predictor section has a
summary table (one row per criterion with a one-line meaning), the verdicts per group,
SVG charts of the ratios with the tau band, group measures, ratios, differences,
bootstrap intervals and dependence tests. Optional sections show explanation-based
measures (:class:`ExplanationAudit`), subpopulations
(:func:`counterfair.audit.find_subpopulations`), a counterfactual audit
(``counterfactual=``, with the densities of the changes) and causal decompositions of
gaps (``decompositions=``, a waterfall chart each). Further sections are appended
through ``extra_sections`` as ``(title, html_fragment)`` pairs; fragments are inserted
verbatim and must come from a trusted source (the page's policy blocks their scripts
and any external resource).

The page is the Jinja2 template ``templates/report.html.j2`` (sections and tables are
macros of ``sections.html.j2`` and ``tables.html.j2``), rendered with autoescape on;
its stylesheet and script are the package files ``templates/report.css`` and
``templates/report.js``, inlined (:mod:`._report_assets`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
from markupsafe import Markup
from numpy.typing import ArrayLike

from counterfair import atomic

from ._findings import (
    CRITERIA,
    METRIC_NAMES,
    MIN_GROUP_ROWS,
    counterfactual_findings,
    parity_findings,
    predictor_data,
    regression_findings,
    tau_text,
    too_few_note,
)
from ._groups import GroupLayout
from ._html import json_text, render, safe
from ._report_assets import content_security_policy, script, stylesheet
from ._sections import (
    DEPENDENCE_EXPLANATION,
    EXPLANATION_MEASURES,
    Model,
    classification_model,
    decomposition_findings,
    decomposition_model,
    explanations_html,
    explanations_model,
    regression_model,
    regression_section,
    subpopulations_html,
    subpopulations_model,
    summary_html,
    table_html,
)
from ._validation import (
    as_numeric,
    is_binary,
)
from .causal_report import CounterfactualReport, counterfactual_model
from .classification import GroupReport, binary_decisions
from .decomposition_result import Decomposition
from .explanations import ExplanationAudit
from .group_audit import Classification, GroupAudit
from .regression import RegressionReport
from .subpopulations import SubpopulationReport

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEPENDENCE_EXPLANATION",
    "EXPLANATION_MEASURES",
    "MIN_GROUP_ROWS",
    "REPORT_REFERENCE_RULE",
    "explanations_html",
    "regression_html",
    "render_report",
    "report_references",
    "subpopulations_html",
    "summary_html",
    "table_html",
    "write_report",
]

Task = Literal["classification", "regression"]

REPORT_EXISTS = (
    "{path} already exists; pass overwrite=True to replace it (the report is written to a "
    "temporary file beside it and moved into place)"
)
NOT_AN_AUDIT = (
    "the report takes a GroupAudit (counterfair.audit.GroupAudit(y_true, y_pred, "
    "attributes, ...)), not a {kind}"
)
REPORT_IS_DIRECTORY = "{path} is a directory; give the path of the HTML file to write"
TAU_SLIDER_MIN = 0.5
"""Lower end of the tau slider (the number box takes any tau in (0, 1])."""

REPORT_REFERENCE_RULE = (
    "the largest group of each attribute and intersection (ties: the first in order), "
    "unless reference= names it"
)
"""The report's default reference group. :meth:`~counterfair.audit.GroupAudit.metrics` keeps
:data:`~counterfair.audit.REFERENCE_RULE` (the first group in order); the report
compares every group with the one most rows speak for, so a ratio's uncertainty comes
from the smaller group, and passes that choice down with ``reference=``."""


def report_references(
    layout: GroupLayout, reference: Mapping[str, Hashable] | None
) -> tuple[dict[str, Hashable], dict[str, str]]:
    """The reference group of every attribute of ``layout`` and why it is the reference.

    Returns ``({attribute: group}, {attribute: "given" | "largest group"})``: the group
    given in ``reference``, else the largest group (ties: the first in order).

    Raises
    ------
    ValueError
        If ``reference`` names an attribute or a group the layout does not have.
    """
    given = dict(reference or {})
    layout.reference_rows(given)  # refuses an unknown attribute or group, naming it
    chosen: dict[str, Hashable] = {}
    why: dict[str, str] = {}
    for attribute, codes, labels in zip(layout.attributes, layout.codes, layout.labels,
                                        strict=True):
        if attribute in given:
            chosen[attribute], why[attribute] = given[attribute], "given"
        else:
            sizes = np.bincount(codes, minlength=len(labels))
            chosen[attribute] = labels[int(np.argmax(sizes))]  # argmax: the first of ties
            why[attribute] = "largest group"
    return chosen, why


def _references_text(report_reference: Mapping[str, Hashable], why: Mapping[str, str],
                     sizes: pd.Series) -> str:
    """``Reference groups: colour = White (the largest group, 3567 rows); ...``."""
    parts = []
    for attribute, group in report_reference.items():
        rows = int(sizes.loc[(attribute, group)])
        reason = "given" if why.get(attribute) == "given" else "the largest group"
        parts.append(f"{attribute} = {group} ({reason}, {rows} rows)")
    return "Reference groups: " + "; ".join(parts) + "."


def score_means(scores: np.ndarray, layout: GroupLayout, interval: float) -> pd.DataFrame:
    """Per group: rows, mean score and its normal-approximation interval.

    The interval is ``mean +/- z * sd / sqrt(rows)`` with the sample standard deviation
    and ``z`` the normal quantile of ``interval`` (NaN bounds for a group of one row).
    """
    from statistics import NormalDist

    values = np.asarray(scores, dtype=np.float64)
    sums = layout.group_sums(np.column_stack([np.ones_like(values), values, values**2]))
    n, total, squares = sums.T
    mean = total / n
    with np.errstate(invalid="ignore", divide="ignore"):
        variance = np.maximum(squares - n * mean**2, 0.0) / (n - 1)
        half = NormalDist().inv_cdf(0.5 + interval / 2) * np.sqrt(variance / n)
    return pd.DataFrame({"rows": n.astype(np.int64), "mean": mean, "lower": mean - half,
                         "upper": mean + half}, index=layout.index)


def _score_word(scores: np.ndarray) -> str:
    return "probability" if bool(np.all((scores >= 0) & (scores <= 1))) else "score"


def _score_notes(name: str, means: pd.DataFrame, word: str, level: str,
                 reference: Mapping[str, Hashable], small: Mapping[tuple[str, str], bool]
                 ) -> list[str]:
    """One sentence per attribute: each group's mean score with its interval."""
    out = []
    for attribute in dict.fromkeys(means.index.get_level_values(0)):
        parts = []
        for group, row in means.loc[attribute].iterrows():
            marks = " (reference)" if reference[str(attribute)] == group else ""
            if small.get((str(attribute), str(group))):
                marks += " (too few rows)"
            parts.append(f"{group}{marks} {row['mean']:.3g} ({row['lower']:.3g} to "
                         f"{row['upper']:.3g})")
        out.append(f"{name}: mean {word} by {attribute} ({level} interval): "
                   + "; ".join(parts) + ".")
    return out


def _constant_decision(scores: np.ndarray, decisions: np.ndarray,
                       threshold: float) -> str | None:
    """The decision every row gets, as the findings print it, or None if they differ."""
    values = np.unique(decisions)
    if values.size != 1:
        return None
    positive = bool(values[0] == 1.0)
    text = "1, positive" if positive else "0, negative"
    if not is_binary(scores):
        text += (f": every score is {'at or above' if positive else 'below'} the "
                 f"threshold {threshold:g}")
    return text


def _check_counterfactual(counterfactual: Mapping[str, CounterfactualReport] | None) -> None:
    if counterfactual is None:
        return
    for name, report in counterfactual.items():
        if not isinstance(report, CounterfactualReport):
            raise TypeError(
                f"counterfactual[{name!r}] is a {type(report).__name__}, not a "
                "CounterfactualReport (from counterfair.audit.counterfactual_fairness)"
            )


def _check_decompositions(decompositions: Mapping[str, Decomposition] | None) -> None:
    for name, result in (decompositions or {}).items():
        if not isinstance(result, Decomposition):
            raise TypeError(
                f"decompositions[{name!r}] is a {type(result).__name__}, not a "
                "Decomposition (from counterfair.audit.decompose)"
            )


def _page_data(tau: float, attributes: list[str]) -> dict[str, Any]:
    """The page's JSON data before the predictors' entries and the extra findings."""
    return {
        "version": 1,
        "tau": tau,
        "criteria": [{"key": c, "label": c.replace("_", " "), "metrics": list(ms)}
                     for c, ms in CRITERIA],
        "metric_names": METRIC_NAMES,
        "attributes": attributes,
        "predictors": [],
        "extra_findings": [],
    }


def _settings_text(frame: pd.DataFrame, task: Task, predictors: Mapping[str, ArrayLike],
                   threshold: float, tau: float) -> str:
    """The line under the title: individuals, task, attributes, predictors and settings."""
    settings = (f"{len(frame)} individuals; task: {task}; protected attributes: "
                f"{', '.join(frame.columns)}; predictors: {', '.join(map(str, predictors))}")
    if task == "classification":
        settings += f"; score threshold: {threshold:g}; report tau: {tau:g}"
    return settings


def _settings_with_minimum(settings: str, task: Task, min_group_rows: int) -> str:
    if task == "classification" and min_group_rows:
        settings += f"; groups judged from {min_group_rows} rows"
    return settings


def _predictor_part(
    one: GroupAudit, position: int, key: object, why: Mapping[str, str],
) -> tuple[Model, dict[str, Any], list[tuple[str, bool]]]:
    """One predictor's audit (``one``: a single predictor, the report's references): its
    section, its JSON entry and its ``(finding, failed)`` pairs."""
    name, ident = str(key), f"predictor-{position}"
    frame, intersections, interval = one.frame, one.intersections, one.interval
    if isinstance(one.task, Classification):
        threshold, tau, min_group_rows = one.task.threshold, one.task.tau, one.task.min_group_rows
        report = one.metrics()
        assert isinstance(report, GroupReport)
        scores = as_numeric(next(iter(one.predictors.values())), "y_pred")
        decisions = binary_decisions(scores, threshold)
        entry = predictor_data(name, report, ident, min_group_rows=min_group_rows,
                               constant=_constant_decision(scores, decisions, threshold))
        note = too_few_note(name, entry["groups"], min_group_rows)
        means, word = None, "score"
        if not is_binary(scores):  # scores or probabilities: their mean per group
            word = _score_word(scores)
            means = score_means(scores, one.layout, interval)
            small = {(g["attribute"], g["label"]): g["small"] for g in entry["groups"]}
            entry["notes"] += _score_notes(name, means, word, f"{100 * interval:g}%",
                                           report.reference, small)
        if note is not None:
            entry["notes"].insert(0, note)
        references = _references_text(report.reference, why, report.by_group["size"])
        section = classification_model(ident, name, report, decisions, frame, intersections,
                                       entry=entry, scores=means, score_word=word,
                                       references=references)
        return section, entry, parity_findings(entry, tau)
    reg = one.metrics()
    assert isinstance(reg, RegressionReport)
    entry = {"id": ident, "name": name, "task": "regression",
             "findings": regression_findings(name, reg)}
    return regression_model(name, reg, ident), entry, [(t, False) for t in entry["findings"]]


def _titled(kind: str, title: str, part: Model | Markup, ident: str = "") -> Model:
    """A section with a heading around one part (macro ``section``)."""
    return {"kind": kind, "title": title, "part": part, "ident": ident}


def _optional_sections(
    explanations: Mapping[str, ExplanationAudit] | None,
    subpopulations: SubpopulationReport | None,
    counterfactual: Mapping[str, CounterfactualReport] | None,
    extra_sections: Sequence[tuple[str, str]],
) -> list[Model]:
    """The sections after the predictors': explanations, subpopulations, counterfactual
    audit, then the caller's own."""
    sections = []
    if explanations:
        sections.append(_titled("explanations", "Explanation-based measures",
                                explanations_model(explanations)))
    if subpopulations is not None:
        sections.append(_titled("subpopulations", "Affected subpopulations",
                                subpopulations_model(subpopulations)))
    if counterfactual:
        sections.append(_titled("counterfactual", "Counterfactual fairness",
                                counterfactual_model(dict(counterfactual))))
    for heading, fragment in extra_sections:
        # the caller's HTML, inserted verbatim (documented: from a trusted source)
        sections.append(_titled("fragment", heading, safe(fragment)))
    return sections


def _page(
    *,
    title: str,
    settings: str,
    tau: float | None,
    attributes: Sequence[str],
    findings: Sequence[tuple[str, bool]],
    sections: Sequence[Model],
    data: dict[str, Any],
    warnings: Sequence[str] = (),
) -> str:
    """The whole HTML page, with a policy that allows only its own inline script.

    ``tau`` (None for regression) shows the tau control and the note on the findings.
    """
    inline_script = script()
    tau_s, inverse_s = tau_text(tau) if tau is not None else ("", "")
    return render(
        "report.html.j2",
        title=title,
        policy=content_security_policy(inline_script),
        # the package's own stylesheet and script (report.css, report.js): inserted as
        # they are, never escaped
        stylesheet=safe(stylesheet()),
        script=safe(inline_script),
        warnings=warnings,
        settings=settings,
        tau=None if tau is None else tau_s,
        inverse=inverse_s,
        slider_min=f"{min(TAU_SLIDER_MIN, tau):g}" if tau is not None else "",
        attributes=attributes,
        findings=findings,
        sections=sections,
        # JSON whose <, > and & are \u escapes: it cannot close its element
        data=safe(json_text(data)),
    )


def render_report(
    groups: GroupAudit,
    *,
    title: str = "counterfair fairness audit",
    counterfactual: Mapping[str, CounterfactualReport] | None = None,
    decompositions: Mapping[str, Decomposition] | None = None,
    explanations: Mapping[str, ExplanationAudit] | None = None,
    subpopulations: SubpopulationReport | None = None,
    extra_sections: Sequence[tuple[str, str]] = (),
    warnings: Sequence[str] = (),
) -> str:
    """Build the HTML text of the audit report (see :func:`write_report`)."""
    if not isinstance(groups, GroupAudit):
        raise TypeError(NOT_AN_AUDIT.format(kind=type(groups).__name__))
    task: Task = "classification" if groups.classification else "regression"
    # a regression page has no tau control; its data keeps the default tau, as it did
    judged = groups.task if isinstance(groups.task, Classification) else Classification()
    threshold, tau, min_group_rows = judged.threshold, judged.tau, judged.min_group_rows
    predictors = groups.predictors
    _check_counterfactual(counterfactual)
    _check_decompositions(decompositions)
    frame = groups.frame
    layout = groups.layout
    attributes = list(layout.attributes)
    reference, why = report_references(layout, groups.reference)
    chosen = dataclasses.replace(groups, reference=reference)
    sections: list[Model] = []
    data = _page_data(tau, attributes)
    findings: list[tuple[str, bool]] = []
    for position, key in enumerate(predictors):
        section, entry, found = _predictor_part(chosen.predictor(key), position, key, why)
        sections.append(section)
        data["predictors"].append(entry)
        findings += found
    sections += _optional_sections(explanations, subpopulations, counterfactual, extra_sections)
    for name, cf_report in (counterfactual or {}).items():
        data["extra_findings"] += counterfactual_findings(str(name), cf_report)
    if decompositions:
        sections.insert(  # before the caller's own sections, which come last
            len(sections) - len(extra_sections),
            _titled("decomposition", "Where the gap comes from",
                    decomposition_model(dict(decompositions)), ident="decomposition"),
        )
        for name, result in decompositions.items():
            data["extra_findings"] += decomposition_findings(str(name), result)
    findings += [(t, False) for t in data["extra_findings"]]
    notes = [*warnings, *constant_warnings(predictors)]
    if task == "classification":
        notes += constant_decision_warnings(predictors, threshold)
    return _page(
        title=title,
        settings=_settings_with_minimum(_settings_text(frame, task, predictors, threshold, tau),
                                        task, min_group_rows),
        tau=tau if task == "classification" else None, attributes=attributes,
        findings=findings, sections=sections, data=data, warnings=notes,
    )


CONSTANT_PREDICTOR = (
    "{name}: every prediction is {value!r}, a constant predictor; it is trivially fair, "
    "and this audit says nothing of its use"
)
"""Warning at the top of a report whose predictor gives one value to every row."""


CONSTANT_DECISIONS = (
    "{name}: every decision is {decision} (every score is {side} the threshold "
    "{threshold:g}); the parity tests of its decisions are not informative, and the "
    "groups' mean {word} show how its scores differ"
)
"""Warning at the top of a report whose scores vary but whose decisions do not."""


def constant_decision_warnings(predictors: Mapping[str, ArrayLike],
                               threshold: float) -> list[str]:
    """One warning per predictor whose scores vary but all fall on one side of
    ``threshold`` (a predictor constant as given has its own warning)."""
    out = []
    for name, predictions in predictors.items():
        scores = as_numeric(predictions, "y_pred")
        decisions = binary_decisions(scores, threshold)
        if np.unique(scores).size > 1 and np.unique(decisions).size == 1:
            positive = bool(decisions[0] == 1.0)
            out.append(CONSTANT_DECISIONS.format(
                name=name, decision=1 if positive else 0, threshold=threshold,
                side="at or above" if positive else "below",
                word="probabilities" if _score_word(scores) == "probability" else "scores"))
    return out


def constant_warnings(predictors: Mapping[str, ArrayLike]) -> list[str]:
    """One warning per predictor that gives every row the same value."""
    out = []
    for name, predictions in predictors.items():
        values = pd.unique(pd.Series(np.asarray(predictions).ravel()))
        if len(values) == 1:
            value = values[0].item() if hasattr(values[0], "item") else values[0]
            out.append(CONSTANT_PREDICTOR.format(name=name, value=value))
    return out


def write_report(
    path: str | os.PathLike[str],
    groups: GroupAudit,
    *,
    title: str = "counterfair fairness audit",
    counterfactual: Mapping[str, CounterfactualReport] | None = None,
    decompositions: Mapping[str, Decomposition] | None = None,
    explanations: Mapping[str, ExplanationAudit] | None = None,
    subpopulations: SubpopulationReport | None = None,
    extra_sections: Sequence[tuple[str, str]] = (),
    warnings: Sequence[str] = (),
    overwrite: bool = False,
) -> Path:
    """Write the self-contained, interactive HTML report of a group audit.

    The file needs no network: inline CSS, script and SVG charts, data as JSON. Its
    findings, summary tables and charts follow a tau control (verdicts recomputed in the
    page with the rule of :meth:`GroupAudit.metrics`), a group selector
    filters the group tables, headers sort, and it prints to PDF without the controls.

    Parameters
    ----------
    path
        Output file (parent directories are created). It is written to a temporary
        file in the same folder and moved into place, so a failure leaves no partial
        file.
    groups
        The audit to report: its rows, its predictors (a mapping ``y_pred`` gives one
        section per predictor; a single array is reported as ``"prediction"``) and its
        settings. The report takes one :class:`GroupAudit` of several predictors rather
        than one audit per predictor, so that every section is of the same rows, groups
        and settings, which the page's single tau control and group selector need.
        ``task=Classification(...)`` gives group measures, parity verdicts and
        dependence tests, opening at its ``tau``, with its score threshold and marking
        groups under its ``min_group_rows`` ``"too few rows"`` instead of pass or FAIL;
        ``task=Regression()`` gives group means, residuals and RMSE. Attributes
        without a reference in the audit's ``reference=`` are compared with their
        largest group (ties: the first in order; :data:`REPORT_REFERENCE_RULE`), not
        the first group in order that :meth:`GroupAudit.metrics` uses; the report says,
        per attribute, which group is the reference and why. The audit's ``interval``
        is also the level of each group's mean-score interval, which is always shown
        for scores.
    title
        Report title.
    counterfactual
        Optional :class:`CounterfactualReport` per predictor name (from
        :func:`counterfair.audit.counterfactual_fairness`): a section with the causal
        and flip-test changes, their densities, and one finding per attribute.
    decompositions
        Optional :class:`~counterfair.audit.decomposition_result.Decomposition` per name (from
        :func:`counterfair.audit.decompose`: the outcome, each predictor): a section with
        a waterfall chart per entry (the gap split into its direct, indirect and spurious
        parts, with intervals), their table, and one finding each.
    explanations
        Optional explanation-based measures per predictor name (a section with one row
        per measure and a one-line meaning each).
    subpopulations
        Optional result of :func:`counterfair.audit.find_subpopulations` (a section with
        the top subpopulations and the tree).
    extra_sections
        ``(title, html_fragment)`` pairs appended verbatim after the other sections.
    warnings
        Lines shown at the top of the report, before anything else (e.g. that a
        predictor does no better than a baseline on held-out rows). A predictor
        that gives every row the same value adds its own warning: a constant
        predictor is trivially fair. A predictor whose scores vary but whose decisions
        are all the same adds one too: its parity tests are not informative.
    overwrite
        Replace an existing file at ``path``; without it an existing file is an error.

    Returns
    -------
    pathlib.Path
        The written file.

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is false (checked before any work).
    IsADirectoryError
        If ``path`` is a directory.
    """
    out = Path(path)
    if out.is_dir():
        raise IsADirectoryError(REPORT_IS_DIRECTORY.format(path=out))
    if out.exists() and not overwrite:
        raise FileExistsError(REPORT_EXISTS.format(path=out))
    text = render_report(
        groups, title=title, counterfactual=counterfactual, decompositions=decompositions,
        explanations=explanations, subpopulations=subpopulations,
        extra_sections=extra_sections, warnings=warnings,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic.write(out, text, overwrite=overwrite, exists=REPORT_EXISTS.format(path=out))
    return out


def regression_html(groups: GroupAudit) -> str:
    """HTML fragment with the regression audit of the predictors of ``groups`` (a
    :class:`GroupAudit` with ``task=Regression()``).

    Meant for ``extra_sections`` of a classification report, so that one page
    holds both views of the same predictors (e.g. ZFYA as a real outcome and
    pass/fail decisions from thresholded predictions).
    """
    parts = []
    for name in groups.predictors:
        report = groups.predictor(name).metrics()
        if not isinstance(report, RegressionReport):
            raise ValueError("regression_html() needs an audit with task=Regression()")
        parts.append(regression_section(str(name), report))
    return "\n".join(parts)
