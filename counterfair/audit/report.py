"""Self-contained, interactive HTML audit report: one file, no network.

The page holds its stylesheet, its script, its charts (inline SVG) and its data (JSON in a
``<script type="application/json">`` element); a Content-Security-Policy forbids any
request, so it opens offline, can be mailed or archived as one file and prints to PDF.

At the top, one plain sentence per finding (:mod:`._findings`). A control sets the
parity threshold tau (slider and number): the page recomputes every verdict with the
rule of :func:`~counterfair.audit.group_metrics` (a group passes when
``tau <= ratio <= 1 / tau``), so at the report's ``tau`` it shows exactly the Python
verdicts. A group selector shows one attribute or intersection (``"race x sex"``) in
the group tables and charts; table headers sort on click. Each predictor section has a
summary table (one row per criterion with a one-line meaning), the verdicts per group,
SVG charts of the ratios with the tau band, group measures, ratios, differences,
bootstrap intervals and dependence tests. Optional sections show explanation-based
measures (:class:`ExplanationAudit`), subpopulations
(:func:`counterfair.audit.find_subpopulations`) and a counterfactual audit
(``counterfactual=``, with the densities of the changes). Further sections are appended
through ``extra_sections`` as ``(title, html_fragment)`` pairs; fragments are inserted
verbatim and must come from a trusted source (the page's policy blocks their scripts
and any external resource).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import tempfile
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from . import _html
from ._findings import (
    CHART_METRICS,
    CRITERIA,
    METRIC_NAMES,
    counterfactual_findings,
    parity_findings,
    predictor_data,
    regression_findings,
    tau_text,
)
from ._groups import Intersections, Protected, build_layout, protected_frame
from ._html import esc, json_script
from ._report_assets import CSS, JS
from ._svg import difference_chart, ratio_chart
from ._validation import NO_PREDICTORS, check_choice, check_tau
from .classification import GroupReport, binary_decisions, group_metrics
from .counterfactual import CounterfactualReport, counterfactual_html
from .dependence import g_test, mutual_information, normalized_mutual_information
from .explanations import ExplanationAudit
from .regression import RegressionReport, regression_metrics
from .subpopulations import SubpopulationReport

Task = Literal["classification", "regression"]

REPORT_EXISTS = (
    "{path} already exists; pass overwrite=True to replace it (the report is written to a "
    "temporary file beside it and moved into place)"
)
REPORT_IS_DIRECTORY = "{path} is a directory; give the path of the HTML file to write"
TAU_SLIDER_MIN = 0.5
"""Lower end of the tau slider (the number box takes any tau in (0, 1])."""


def table_html(frame: pd.DataFrame, *, digits: int = 3) -> str:
    """Render a DataFrame as a sortable HTML table (escaped text, ``n/a`` when missing).

    Index levels become row-header columns; rows indexed by ``attribute`` can be
    filtered by the page's group selector.
    """
    return _html.table_html(frame, digits=digits)


_VERDICT_CSS = {"pass": "verdict-pass", "FAIL": "verdict-fail", "n/a": "verdict-na"}
_WORD_CSS = {"pass": "pass", "FAIL": "fail", "n/a": "na"}

DEPENDENCE_EXPLANATION = (
    "How much knowing a person's group tells about the decision: mutual information "
    "(0 = nothing), normalised to [0, 1], and the G-test of independence (a small p-value "
    "means the association is unlikely to be chance)."
)

EXPLANATION_MEASURES: dict[str, str] = {
    "shap disparity": "Mean SHAP value of the sensitive attribute in the unprivileged group "
                      "minus the privileged group; negative: the attribute itself pushes "
                      "the privileged group's scores up.",
    "importance": "Mean |SHAP| of the sensitive attribute: how much the model's output "
                  "moves with it, in either direction.",
    "importance rank": "Position of the sensitive attribute among all features by "
                       "importance (1 = most important).",
    "counterfactual (flip)": "Average change of a privileged person's output when only "
                             "the sensitive attribute in the model input is switched to "
                             "the unprivileged value (no causal model; negative favours "
                             "the privileged).",
    "consistency": "Similar people (nearest neighbours, ignoring the sensitive attribute) "
                   "get similar decisions; 1 = always.",
    "generalized entropy index": "Inequality of the benefit y_pred - y_true + 1 across "
                                 "individuals; 0 = everyone treated alike.",
    "GEI between groups": "The part of that inequality due to differences between the "
                          "groups' average benefits.",
}
"""One plain-language line per explanation-based measure (shown in the report)."""



def _interval(lower: float, upper: float) -> str:
    if not (np.isfinite(lower) and np.isfinite(upper)):
        return "n/a"
    return f"[{lower:.3g}, {upper:.3g}]"


def explanations_html(audits: Mapping[str, ExplanationAudit]) -> str:
    """Table of explanation-based measures, one column block per predictor.

    Rows are the measures of :data:`EXPLANATION_MEASURES` that were given, each with a
    one-line meaning, its value and (where computed) its bootstrap interval.
    """
    rows = []
    for name, audit in audits.items():
        values: dict[str, tuple[float, str]] = {}
        if audit.shap is not None:
            shap = audit.shap
            values["shap disparity"] = (shap.disparity,
                                        _interval(shap.disparity_lower, shap.disparity_upper))
            values["importance"] = (shap.importance,
                                    _interval(shap.importance_lower, shap.importance_upper))
            values["importance rank"] = (float(shap.rank), f"of {len(shap.importances)}")
        if audit.flip is not None:
            values["counterfactual (flip)"] = (audit.flip.mean,
                                               _interval(audit.flip.lower, audit.flip.upper))
        if audit.consistency is not None:
            values["consistency"] = (audit.consistency, "")
        if audit.entropy is not None:
            note = f"alpha = {audit.entropy.alpha:g}"
            if audit.entropy.ci is not None:
                ci = audit.entropy.ci
                note = (_interval(float(ci.loc["total", "lower"]),
                                  float(ci.loc["total", "upper"])) + "; " + note)
            values["generalized entropy index"] = (audit.entropy.total, note)
            values["GEI between groups"] = (audit.entropy.between,
                                            f"within: {audit.entropy.within:.3g}")
        for measure, (value, note) in values.items():
            from_shap = measure in ("shap disparity", "importance", "importance rank")
            rows.append({"predictor": name, "measure": measure,
                         "meaning": EXPLANATION_MEASURES[measure], "value": value,
                         "interval / note": note,
                         "SHAP method": audit.shap_method if from_shap else ""})
    if not rows:
        return '<p class="meta">No explanation-based measures were given.</p>'
    frame = pd.DataFrame(rows).set_index(["predictor", "measure"])
    return table_html(frame)


def subpopulations_html(report: SubpopulationReport, *, top: int = 10) -> str:
    """The subpopulation tree and its strongest significant subpopulations."""
    level = f"{100 * report.confidence:g}%"
    intro = (f'<p class="explain">Subgroups of users described by their attributes, each '
             f"tested for an association between the protected attribute (group "
             f"{esc(str(report.protected_group))!s} vs the rest) and the outcome "
             f"{esc(str(report.outcome_value))!s}. Difference: outcome rate of the "
             f"protected group minus the others, with its {level} interval; p-values are "
             f"G-tests on held-out rows, adjusted (Holm) for the number of subgroups tested; "
             f"significant at {report.alpha:g}.</p>")
    found = report.top(top)
    columns = ["description", "size", "share", "difference", "lower", "upper", "p_value",
               "p_adjusted"]
    if found.empty:
        table = '<p class="meta">No subpopulation has a significant association.</p>'
    else:
        table = table_html(found[columns].set_index("description"))
    return (intro + "<h3>Strongest significant subpopulations</h3>" + table
            + "<h3>Tree (* = significant)</h3>"
            + f'<pre class="summary">{esc(report.tree_text())}</pre>')




def summary_html(report: GroupReport) -> str:
    """The criterion summary of a :class:`GroupReport` as a colour-coded, sortable table.

    Rows carry ``data-criterion`` so that the page's script can rewrite the verdict and
    the failing groups when tau changes.
    """
    table = report.summary_table()
    keys = [c for c, _ in CRITERIA]
    rows = []
    for key, row in zip(keys, table.itertuples(index=False), strict=True):
        worst = row[5]
        worst_text = f"{worst:.3g}" if np.isfinite(worst) else "n/a"
        worst_key = repr(float(worst)) if np.isfinite(worst) else ""
        rows.append(
            f'<tr data-criterion="{esc(key)}"><th scope="row" data-v="{esc(row[0])}">'
            f"{esc(row[0])}</th>"
            f'<td data-v="{esc(row[1])}">{esc(row[1])}</td>'
            f'<td data-v="{esc(row[2])}">{esc(row[2])}</td>'
            f'<td class="verdict {_VERDICT_CSS[row[3]]}" data-v="{esc(row[3])}">'
            f"{esc(row[3])}</td>"
            f'<td class="failing" data-v="{esc(row[4])}">{esc(row[4])}</td>'
            f'<td class="num" data-v="{worst_key}">{esc(worst_text)}</td></tr>'
        )
    head = "".join(f'<th scope="col" tabindex="0">{esc(c)}</th>' for c in table.columns)
    reference = "; ".join(f"{a} = {g}" for a, g in report.reference.items())
    tau_s, inverse_s = tau_text(report.tau)
    intro = (f'<p class="explain">A group passes when its rate divided by the reference '
             f'group\'s lies between <span class="tau-value">{tau_s}</span> and '
             f'<span class="tau-inverse">{inverse_s}</span>. Reference groups: '
             f"{esc(reference)}.</p>")
    return (intro + '<div class="table-wrap"><table class="audit summary sortable">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def _verdict_table(report: GroupReport) -> str:
    """Pass / FAIL / n/a per group and criterion; cells carry their group and criterion."""
    head = "".join(f'<th scope="col" tabindex="0">{esc(h)}</th>'
                   for h in ["attribute", "group",
                             *(c.replace("_", " ") for c in report.verdicts.columns)])
    rows = []
    for position, ((attribute, group), verdicts) in enumerate(report.verdicts.iterrows()):
        cells = [f'<th scope="row" data-v="{esc(attribute)}">{esc(attribute)}</th>',
                 f'<th scope="row" data-v="{esc(group)}">{esc(group)}</th>']
        for criterion, value in verdicts.items():
            word = "n/a" if value is pd.NA else ("pass" if value else "FAIL")
            cells.append(f'<td class="{_WORD_CSS[word]}" data-g="{position}" '
                         f'data-c="{esc(criterion)}" data-v="{word}">{word}</td>')
        rows.append(f'<tr data-attribute="{esc(attribute)}">{"".join(cells)}</tr>')
    return ('<div class="table-wrap"><table class="audit verdicts sortable">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def _ratio_charts(report: GroupReport) -> str:
    parts = []
    for attribute in dict.fromkeys(report.ratios.index.get_level_values(0)):
        block = report.ratios.loc[attribute]
        groups = [str(g) for g in block.index]
        svg = ratio_chart(
            attribute=str(attribute), groups=groups,
            reference=str(report.reference[attribute]), metrics=CHART_METRICS,
            titles=METRIC_NAMES, ratios=block[list(CHART_METRICS)].to_numpy(dtype=np.float64),
            tau=report.tau)
        parts.append(f'<div class="chart-block" data-attribute="{esc(attribute)}">'
                     f"<h4>{esc(attribute)}</h4>{svg}</div>")
    return "".join(parts)


def _difference_charts(report: RegressionReport, metrics: Sequence[str]) -> str:
    parts = []
    for attribute in dict.fromkeys(report.differences.index.get_level_values(0)):
        block = report.differences.loc[attribute]
        svg = difference_chart(
            attribute=str(attribute), groups=[str(g) for g in block.index],
            reference=str(report.reference[attribute]), metrics=metrics,
            differences=block[list(metrics)].to_numpy(dtype=np.float64))
        parts.append(f'<div class="chart-block" data-attribute="{esc(attribute)}">'
                     f"<h4>{esc(attribute)}</h4>{svg}</div>")
    return "".join(parts)


def _ci_html(ci: pd.DataFrame | None, heading: str) -> str:
    if ci is None:
        return ""
    return f"<h4>{esc(heading)}</h4>" + table_html(_html.interval_frame(ci))


def _dependence_html(decisions: np.ndarray, frame: pd.DataFrame,
                     intersections: Intersections) -> str:
    layout = build_layout(frame, intersections)
    rows = []
    for attribute, codes in zip(layout.attributes, layout.codes, strict=True):
        test = g_test(codes, decisions)
        rows.append({
            "attribute": attribute,
            "mi (nats)": mutual_information(codes, decisions),
            "nmi": normalized_mutual_information(codes, decisions),
            "G": test.statistic,
            "dof": test.dof,
            "p_value": test.p_value,
        })
    return (f'<p class="explain">{esc(DEPENDENCE_EXPLANATION)}</p>'
            + table_html(pd.DataFrame(rows).set_index("attribute")))


def _classification_section(ident: str, name: str, report: GroupReport,
                            decisions: np.ndarray, frame: pd.DataFrame,
                            intersections: Intersections) -> str:
    parts = [
        f'<section class="predictor" id="{ident}">',
        f"<h2>Predictor: {esc(name)}</h2>",
        "<h3>Summary</h3>",
        summary_html(report),
        "<h3>Parity verdicts</h3>",
        _verdict_table(report),
        "<h3>Disparity charts</h3>",
        '<p class="explain">Ratio of each group\'s rate to its reference group\'s (log '
        "scale); the shaded band is <span class=\"tau-value\">"
        f"{tau_text(report.tau)[0]}</span> to <span class=\"tau-inverse\">"
        f"{tau_text(report.tau)[1]}</span>, red points are outside it.</p>",
        _ratio_charts(report),
        "<h3>Group measures</h3>",
        table_html(report.by_group),
        "<h3>Ratios to the reference group</h3>",
        table_html(report.ratios),
        "<h3>Differences to the reference group</h3>",
        table_html(report.differences),
    ]
    if report.ci is not None:
        level = f"{100 * report.confidence:g}%"
        parts += [
            f"<h3>Bootstrap intervals ({level}, {report.n_bootstrap} resamples)</h3>",
            _ci_html(report.ci, "Group measures"),
            _ci_html(report.ratio_ci, "Ratios"),
            _ci_html(report.difference_ci, "Differences"),
        ]
    parts += [
        "<h3>Dependence between each attribute and the decisions</h3>",
        _dependence_html(decisions, frame, intersections),
        "</section>",
    ]
    return "\n".join(parts)


def _regression_section(name: str, report: RegressionReport, ident: str = "") -> str:
    reference = "; ".join(f"{a} = {g}" for a, g in report.reference.items())
    opening = f'<section class="predictor" id="{ident}">' if ident else "<section>"
    parts = [
        opening,
        f"<h2>Predictor: {esc(name)}</h2>",
        f'<p class="meta">Reference groups: {esc(reference)}. '
        "Residual = y_true - y_pred (positive: under-predicted).</p>",
        "<h3>Disparity charts</h3>",
        _difference_charts(report, ["mean_prediction", "mean_residual", "rmse"]),
        "<h3>Group measures</h3>",
        table_html(report.by_group),
        "<h3>Differences to the reference group</h3>",
        table_html(report.differences),
        "<h3>Ratios to the reference group</h3>",
        table_html(report.ratios),
    ]
    if report.ci is not None:
        level = f"{100 * report.confidence:g}%"
        parts += [
            f"<h3>Bootstrap intervals ({level}, {report.n_bootstrap} resamples)</h3>",
            _ci_html(report.ci, "Group measures"),
            _ci_html(report.difference_ci, "Differences"),
            _ci_html(report.ratio_ci, "Ratios"),
        ]
    parts.append("</section>")
    return "\n".join(parts)


def _controls(tau: float | None, attributes: Sequence[str]) -> str:
    parts = ['<div class="controls" role="region" aria-label="report controls">']
    if tau is not None:
        tau_s, inverse_s = tau_text(tau)
        parts.append(
            '<div><label for="tau-slider">Parity threshold tau</label>'
            f'<input type="range" id="tau-slider" min="{min(TAU_SLIDER_MIN, tau):g}" max="1" '
            f'step="0.01" value="{tau_s}" aria-label="tau slider"/> '
            f'<input type="number" id="tau-input" min="0" max="1" step="any" '
            f'value="{tau_s}" aria-label="tau"/> '
            f'<span class="note">band <span class="tau-value">{tau_s}</span> to '
            f'<span class="tau-inverse">{inverse_s}</span></span> '
            '<span id="tau-message" role="status"></span></div>'
        )
    options = "".join(f'<option value="{esc(a)}">{esc(a)}</option>' for a in attributes)
    parts.append(
        '<div><label for="group-filter">Groups</label><select id="group-filter">'
        f'<option value="">all attributes</option>{options}</select> '
        '<span class="note">filters the group tables and charts; the findings and '
        "summaries cover every group</span></div></div>"
    )
    return "".join(parts)


def _check_counterfactual(counterfactual: Mapping[str, CounterfactualReport] | None) -> None:
    if counterfactual is None:
        return
    for name, report in counterfactual.items():
        if not isinstance(report, CounterfactualReport):
            raise TypeError(
                f"counterfactual[{name!r}] is a {type(report).__name__}, not a "
                "CounterfactualReport (from counterfair.audit.counterfactual_fairness)"
            )


def render_report(
    *,
    y_true: ArrayLike,
    y_pred: Mapping[str, ArrayLike] | ArrayLike,
    protected: Protected,
    task: Task = "classification",
    threshold: float = 0.5,
    tau: float = 0.8,
    intersections: Intersections = True,
    reference: Mapping[str, Hashable] | None = None,
    n_bootstrap: int = 0,
    confidence: float = 0.95,
    seed: int = 0,
    title: str = "counterfair fairness audit",
    explanations: Mapping[str, ExplanationAudit] | None = None,
    subpopulations: SubpopulationReport | None = None,
    extra_sections: Sequence[tuple[str, str]] = (),
    counterfactual: Mapping[str, CounterfactualReport] | None = None,
) -> str:
    """Build the HTML text of the audit report (see :func:`write_report`)."""
    task = check_choice(task, "task", ("classification", "regression"))  # type: ignore[assignment]
    tau = check_tau(tau)
    predictors = dict(y_pred) if isinstance(y_pred, Mapping) else {"prediction": y_pred}
    if not predictors:
        raise ValueError(NO_PREDICTORS)
    _check_counterfactual(counterfactual)
    frame = protected_frame(protected)
    attributes = list(build_layout(frame, intersections).attributes)
    sections = []
    data: dict[str, Any] = {
        "version": 1,
        "tau": tau,
        "criteria": [{"key": c, "label": c.replace("_", " "), "metrics": list(ms)}
                     for c, ms in CRITERIA],
        "metric_names": METRIC_NAMES,
        "attributes": attributes,
        "predictors": [],
        "extra_findings": [],
    }
    findings: list[tuple[str, bool]] = []
    for position, (key, predictions) in enumerate(predictors.items()):
        name, ident = str(key), f"predictor-{position}"
        if task == "classification":
            report = group_metrics(y_true, predictions, frame, threshold=threshold,
                                   intersections=intersections, reference=reference, tau=tau,
                                   n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)
            decisions = binary_decisions(predictions, threshold)
            sections.append(_classification_section(ident, name, report, decisions, frame,
                                                    intersections))
            entry = predictor_data(name, report, ident)
            findings += parity_findings(entry, tau)
        else:
            reg = regression_metrics(y_true, predictions, frame, intersections=intersections,
                                     reference=reference, n_bootstrap=n_bootstrap,
                                     confidence=confidence, seed=seed)
            sections.append(_regression_section(name, reg, ident))
            entry = {"id": ident, "name": name, "task": "regression",
                     "findings": regression_findings(name, reg)}
            findings += [(t, False) for t in entry["findings"]]
        data["predictors"].append(entry)
    if explanations:
        sections.append("<section><h2>Explanation-based measures</h2>\n"
                        + explanations_html(explanations) + "</section>")
    if subpopulations is not None:
        sections.append("<section><h2>Affected subpopulations</h2>\n"
                        + subpopulations_html(subpopulations) + "</section>")
    if counterfactual:
        sections.append("<section><h2>Counterfactual fairness</h2>\n"
                        + counterfactual_html(dict(counterfactual)) + "</section>")
        for name, cf_report in counterfactual.items():
            data["extra_findings"] += counterfactual_findings(str(name), cf_report)
        findings += [(t, False) for t in data["extra_findings"]]
    for heading, fragment in extra_sections:
        sections.append(f"<section><h2>{esc(heading)}</h2>\n{fragment}</section>")
    settings = (f"{len(frame)} individuals; task: {task}; protected attributes: "
                f"{', '.join(frame.columns)}; predictors: {', '.join(map(str, predictors))}")
    if task == "classification":
        settings += f"; score threshold: {threshold:g}; report tau: {tau:g}"
    items = "".join(('<li class="fail">' if failed else "<li>") + f"{esc(text)}</li>"
                    for text, failed in findings)
    tau_s, _ = tau_text(tau)
    tau_note = (f' Parity verdicts at tau = <span class="tau-value">{tau_s}</span>.'
                if task == "classification" else "")
    script_hash = base64.b64encode(hashlib.sha256(JS.encode("utf-8")).digest()).decode()
    policy = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
              f"script-src 'sha256-{script_hash}'; base-uri 'none'; form-action 'none'")
    body = "\n".join(sections)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
        f'<meta http-equiv="Content-Security-Policy" content="{esc(policy)}"/>\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1"/>\n'
        f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        f"<h1>{esc(title)}</h1>\n<p class=\"meta\">{esc(settings)}</p>\n"
        + _controls(tau if task == "classification" else None, attributes)
        + '\n<p class="print-only meta">Printed with groups: <span class="filter-state">'
        "all attributes</span>.</p>\n"
        f'<section id="findings"><h2>Findings</h2><p class="explain">One sentence per '
        f"finding.{tau_note}</p>"
        f'<ul class="findings" id="findings-list">{items}</ul></section>\n'
        f"{body}\n{json_script(data, 'counterfair-data')}\n<script>{JS}</script>\n"
        "</body>\n</html>\n"
    )


def _write_atomic(out: Path, text: str, *, overwrite: bool) -> None:
    """Write ``text`` to a temporary file beside ``out`` and move it into place."""
    fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        if overwrite:
            os.replace(tmp, out)
            return
        try:
            os.link(tmp, out)  # fails if ``out`` appeared meanwhile: never clobbers
        except FileExistsError:
            raise FileExistsError(REPORT_EXISTS.format(path=out)) from None
        except OSError:  # no hard links on this file system
            if out.exists():
                raise FileExistsError(REPORT_EXISTS.format(path=out)) from None
            os.replace(tmp, out)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_report(
    path: str | os.PathLike[str],
    *,
    y_true: ArrayLike,
    y_pred: Mapping[str, ArrayLike] | ArrayLike,
    protected: Protected,
    task: Task = "classification",
    threshold: float = 0.5,
    tau: float = 0.8,
    intersections: Intersections = True,
    reference: Mapping[str, Hashable] | None = None,
    n_bootstrap: int = 0,
    confidence: float = 0.95,
    seed: int = 0,
    title: str = "counterfair fairness audit",
    explanations: Mapping[str, ExplanationAudit] | None = None,
    subpopulations: SubpopulationReport | None = None,
    extra_sections: Sequence[tuple[str, str]] = (),
    counterfactual: Mapping[str, CounterfactualReport] | None = None,
    overwrite: bool = False,
) -> Path:
    """Audit one or more predictors and write a self-contained, interactive HTML report.

    The file needs no network: inline CSS, script and SVG charts, data as JSON. Its
    findings, summary tables and charts follow a tau control (verdicts recomputed in the
    page with the rule of :func:`~counterfair.audit.group_metrics`), a group selector
    filters the group tables, headers sort, and it prints to PDF without the controls.

    Parameters
    ----------
    path
        Output file (parent directories are created). It is written to a temporary
        file in the same folder and moved into place, so a failure leaves no partial
        file.
    y_true
        Actual labels (binary for classification, real for regression).
    y_pred
        Mapping predictor name -> predictions (decisions or scores for classification);
        a single array is reported as ``"prediction"``.
    protected
        Protected attributes (DataFrame, named Series or mapping name -> values).
    task
        ``"classification"`` (group measures, parity verdicts, dependence tests) or
        ``"regression"`` (group means, residuals, RMSE).
    threshold
        Score threshold for classification scores.
    tau
        Parity threshold (band ``[tau, 1 / tau]``) at which the report opens.
    intersections, reference
        As in :func:`counterfair.audit.group_metrics`.
    n_bootstrap, confidence, seed
        Bootstrap intervals (0 resamples: none).
    title
        Report title.
    explanations
        Optional explanation-based measures per predictor name (a section with one row
        per measure and a one-line meaning each).
    subpopulations
        Optional result of :func:`counterfair.audit.find_subpopulations` (a section with
        the top subpopulations and the tree).
    extra_sections
        ``(title, html_fragment)`` pairs appended verbatim after the other sections.
    counterfactual
        Optional :class:`CounterfactualReport` per predictor name (from
        :func:`counterfair.audit.counterfactual_fairness`): a section with the causal
        and flip-test changes, their densities, and one finding per attribute.
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
        y_true=y_true, y_pred=y_pred, protected=protected, task=task, threshold=threshold,
        tau=tau, intersections=intersections, reference=reference, n_bootstrap=n_bootstrap,
        confidence=confidence, seed=seed, title=title, explanations=explanations,
        subpopulations=subpopulations, extra_sections=extra_sections,
        counterfactual=counterfactual,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(out, text, overwrite=overwrite)
    return out


def regression_html(
    *,
    y_true: ArrayLike,
    y_pred: Mapping[str, ArrayLike],
    protected: Protected,
    intersections: Intersections = True,
    reference: Mapping[str, Hashable] | None = None,
    n_bootstrap: int = 0,
    confidence: float = 0.95,
    seed: int = 0,
) -> str:
    """HTML fragment with the regression audit of several predictors.

    Meant for ``extra_sections`` of a classification report, so that one page
    holds both views of the same predictors (e.g. ZFYA as a real outcome and
    pass/fail decisions from thresholded predictions).
    """
    frame = protected_frame(protected)
    parts = []
    for name, predictions in y_pred.items():
        report = regression_metrics(y_true, predictions, frame, intersections=intersections,
                                    reference=reference, n_bootstrap=n_bootstrap,
                                    confidence=confidence, seed=seed)
        parts.append(_regression_section(str(name), report))
    return "\n".join(parts)
