"""Self-contained HTML audit report: tables, summaries and embedded PNG charts.

The HTML file has inline CSS and its images embedded as base64 ``data:`` URIs, so it can
be mailed or archived as one file.  Every predictor section opens with a summary table
(one row per criterion: a one-line plain-language meaning, the verdict and the failing
groups).  Optional sections show explanation-based measures (SHAP disparity and
importance, the attribute-flip measure, consistency, generalized entropy;
:class:`ExplanationAudit`) and the subpopulations found by
:func:`counterfair.audit.find_subpopulations`.  Further sections (e.g. a counterfactual
audit) are appended through ``extra_sections`` as ``(title, html_fragment)`` pairs;
fragments are inserted verbatim and must come from a trusted source.
"""

from __future__ import annotations

import html
import os
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ._groups import Intersections, Protected, build_layout, protected_frame
from ._validation import NO_PREDICTORS, check_choice
from .classification import PARITY_CRITERIA, GroupReport, binary_decisions, group_metrics
from .dependence import g_test, mutual_information, normalized_mutual_information
from .explanations import ExplanationAudit
from .plotting import disparity_figure, figure_to_base64
from .regression import RegressionReport, regression_metrics
from .subpopulations import SubpopulationReport

Task = Literal["classification", "regression"]

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 1200px; color: #222; line-height: 1.4; padding: 0 1em; }
h1 { border-bottom: 2px solid #4c72b0; padding-bottom: .2em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { margin-top: 1.4em; }
table.audit { border-collapse: collapse; font-size: 0.82em; margin: .5em 0 1em; }
table.audit th, table.audit td { border: 1px solid #ddd; padding: 3px 7px; text-align: right; }
table.audit thead th { background: #f0f3f8; }
table.audit tbody th { text-align: left; background: #fafafa; }
td.pass { color: #2d7a3e; } td.fail { color: #fff; background: #c44e52; font-weight: bold; }
td.na { color: #999; }
td.verdict-pass { color: #2d7a3e; font-weight: bold; text-align: center; }
td.verdict-fail { color: #fff; background: #c44e52; font-weight: bold; text-align: center; }
td.verdict-na { color: #999; text-align: center; }
table.summary td { text-align: left; } table.summary td.num { text-align: right; }
p.explain { color: #444; font-size: 0.9em; margin: .2em 0 .6em; }
pre.summary { background: #f7f7f7; border-left: 4px solid #4c72b0; padding: .6em 1em;
              white-space: pre-wrap; font-size: 0.85em; }
img.chart { max-width: 100%; height: auto; display: block; margin: .5em 0; }
.meta { color: #555; font-size: 0.9em; }
"""


def table_html(frame: pd.DataFrame, *, digits: int = 3) -> str:
    """Render a DataFrame as an HTML table (escaped text, ``n/a`` for missing values)."""
    return str(frame.to_html(classes="audit", border=0, na_rep="n/a", escape=True,
                             float_format=lambda x: f"{x:.{digits}g}"))


def _verdict_html(verdicts: pd.DataFrame) -> str:
    words = pd.DataFrame(
        [["n/a" if v is pd.NA else ("pass" if v else "FAIL") for v in row]
         for row in verdicts.itertuples(index=False)],
        index=verdicts.index, columns=verdicts.columns,
    )
    text = table_html(words)
    for word, css in (("pass", "pass"), ("FAIL", "fail"), ("n/a", "na")):
        text = text.replace(f"<td>{word}</td>", f'<td class="{css}">{word}</td>')
    return text


def _image(fig_b64: str, alt: str) -> str:
    return (f'<img class="chart" alt="{html.escape(alt)}" '
            f'src="data:image/png;base64,{fig_b64}"/>')


_VERDICT_CSS = {"pass": "verdict-pass", "FAIL": "verdict-fail", "n/a": "verdict-na"}

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


def summary_html(report: GroupReport) -> str:
    """The criterion summary of a :class:`GroupReport` as a colour-coded HTML table."""
    table = report.summary_table().set_index("criterion")
    table["worst ratio"] = [f"{v:.3g}" if np.isfinite(v) else "n/a"
                            for v in table["worst ratio"]]
    text = str(table.to_html(classes="audit summary", border=0, na_rep="n/a", escape=True))
    for word, css in _VERDICT_CSS.items():
        text = text.replace(f"<td>{word}</td>", f'<td class="{css}">{word}</td>')
    reference = "; ".join(f"{a} = {g}" for a, g in report.reference.items())
    head = (f'<p class="explain">A group passes when its rate divided by the reference '
            f"group's lies between {report.tau:g} and {1 / report.tau:.4g}. Reference "
            f"groups: {html.escape(reference)}.</p>")
    return head + text


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
             f"{html.escape(str(report.protected_group))!s} vs the rest) and the outcome "
             f"{html.escape(str(report.outcome_value))!s}. Difference: outcome rate of the "
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
            + f'<pre class="summary">{html.escape(report.tree_text())}</pre>')


def _ci_html(ci: pd.DataFrame | None, heading: str) -> str:
    if ci is None:
        return ""
    return f"<h4>{html.escape(heading)}</h4>" + table_html(ci)


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
    return (f'<p class="explain">{html.escape(DEPENDENCE_EXPLANATION)}</p>'
            + table_html(pd.DataFrame(rows).set_index("attribute")))


def _classification_section(name: str, report: GroupReport, decisions: np.ndarray,
                            frame: pd.DataFrame, intersections: Intersections) -> str:
    metrics = list(PARITY_CRITERIA.values())
    fig = disparity_figure(report.ratios, measures=metrics, tau=report.tau,
                           reference=report.reference,
                           title=f"{name}: parity ratios (band: tau <= ratio <= 1/tau)")
    parts = [
        f"<h2>Predictor: {html.escape(name)}</h2>",
        "<h3>Summary</h3>",
        summary_html(report),
        "<h3>Parity verdicts</h3>",
        _verdict_html(report.verdicts),
        "<h3>Disparity chart</h3>",
        _image(figure_to_base64(fig), f"parity ratios of {name}"),
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
    ]
    return "\n".join(parts)


def _regression_section(name: str, report: RegressionReport) -> str:
    fig = disparity_figure(report.differences,
                           measures=["mean_prediction", "mean_residual", "rmse"], tau=None,
                           baseline=0.0, xlabel="difference to reference group",
                           reference=report.reference,
                           title=f"{name}: differences to the reference group")
    reference = "; ".join(f"{a} = {g}" for a, g in report.reference.items())
    parts = [
        f"<h2>Predictor: {html.escape(name)}</h2>",
        f'<p class="meta">Reference groups: {html.escape(reference)}. '
        "Residual = y_true - y_pred (positive: under-predicted).</p>",
        "<h3>Disparity chart</h3>",
        _image(figure_to_base64(fig), f"differences of {name}"),
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
    return "\n".join(parts)


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
) -> str:
    """Build the HTML text of the audit report (see :func:`write_report`)."""
    task = check_choice(task, "task", ("classification", "regression"))  # type: ignore[assignment]
    predictors = dict(y_pred) if isinstance(y_pred, Mapping) else {"prediction": y_pred}
    if not predictors:
        raise ValueError(NO_PREDICTORS)
    frame = protected_frame(protected)
    sections = []
    for name, predictions in predictors.items():
        if task == "classification":
            report = group_metrics(y_true, predictions, frame, threshold=threshold,
                                   intersections=intersections, reference=reference, tau=tau,
                                   n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)
            decisions = binary_decisions(predictions, threshold)
            sections.append(_classification_section(str(name), report, decisions, frame,
                                                    intersections))
        else:
            reg = regression_metrics(y_true, predictions, frame, intersections=intersections,
                                     reference=reference, n_bootstrap=n_bootstrap,
                                     confidence=confidence, seed=seed)
            sections.append(_regression_section(str(name), reg))
    if explanations:
        sections.append("<h2>Explanation-based measures</h2>\n" + explanations_html(explanations))
    if subpopulations is not None:
        sections.append("<h2>Affected subpopulations</h2>\n"
                        + subpopulations_html(subpopulations))
    for heading, fragment in extra_sections:
        sections.append(f"<h2>{html.escape(heading)}</h2>\n{fragment}")
    settings = (f"{len(frame)} individuals; task: {task}; protected attributes: "
                f"{', '.join(frame.columns)}; predictors: {', '.join(map(str, predictors))}")
    if task == "classification":
        settings += f"; score threshold: {threshold:g}; tau: {tau:g}"
    body = "\n".join(sections)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f"<h1>{html.escape(title)}</h1>\n<p class=\"meta\">{html.escape(settings)}</p>\n"
        f"{body}\n</body>\n</html>\n"
    )


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
) -> Path:
    """Audit one or more predictors and write a self-contained HTML report.

    Parameters
    ----------
    path
        Output file (parent directories are created).
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
        Parity threshold (band ``[tau, 1 / tau]``).
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
        ``(title, html_fragment)`` pairs appended verbatim after the predictor sections.

    Returns
    -------
    pathlib.Path
        The written file.
    """
    text = render_report(
        y_true=y_true, y_pred=y_pred, protected=protected, task=task, threshold=threshold,
        tau=tau, intersections=intersections, reference=reference, n_bootstrap=n_bootstrap,
        confidence=confidence, seed=seed, title=title, explanations=explanations,
        subpopulations=subpopulations, extra_sections=extra_sections,
    )
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
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
