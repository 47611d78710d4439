"""The sections of the HTML audit report: summary, verdicts, charts, tables.

Each function returns an HTML fragment with every user-given text escaped; the page's
script (:mod:`._report_assets`) finds the cells it rewrites through ``data-*``
attributes (``data-criterion`` rows of the summary, ``data-g`` / ``data-c`` verdict
cells, ``data-attribute`` rows and chart blocks for the group selector).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from . import _html
from ._findings import (
    CHART_METRICS,
    METRIC_NAMES,
    NOT_INFORMATIVE,
    TOO_FEW,
    evaluate,
    failing_text,
    join_words,
    predictor_data,
    tau_text,
)
from ._groups import Intersections, build_layout
from ._html import esc
from ._svg import difference_chart, ratio_chart, waterfall_chart
from .classification import CRITERION_EXPLANATIONS, GroupReport
from .decomposition_result import Decomposition
from .dependence import g_test, mutual_information, normalized_mutual_information
from .explanations import ExplanationAudit
from .regression import RegressionReport
from .subpopulations import SubpopulationReport


def table_html(frame: pd.DataFrame, *, digits: int = 3) -> str:
    """Render a DataFrame as a sortable HTML table (escaped text, ``n/a`` when missing).

    Index levels become row-header columns; rows indexed by ``attribute`` can be
    filtered by the page's group selector.
    """
    return _html.table_html(frame, digits=digits)


_VERDICT_CSS = {"pass": "verdict-pass", "FAIL": "verdict-fail", "n/a": "verdict-na",
                TOO_FEW: "verdict-na", NOT_INFORMATIVE: "verdict-na"}
_WORD_CSS = {"pass": "pass", "FAIL": "fail", "n/a": "na", TOO_FEW: "na",
             NOT_INFORMATIVE: "na"}

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
    level = f"{100 * report.interval:g}%"
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




def summary_html(report: GroupReport, entry: dict[str, Any] | None = None) -> str:
    """The criterion summary of a :class:`GroupReport` as a colour-coded, sortable table.

    ``entry`` is the predictor's page data (:func:`~._findings.predictor_data`; by default
    built from ``report`` with no minimum group size). Rows carry ``data-criterion`` so
    that the page's script can rewrite the verdict and the failing groups when tau
    changes; the worst ratio is over the groups that are judged.
    """
    entry = entry if entry is not None else predictor_data("", report, "")
    results = evaluate(entry, report.tau)
    rows = []
    for result in results:
        criterion, metrics = result["criterion"], result["metrics"]
        judged = [p for p, v in enumerate(result["verdicts"])
                  if v not in (TOO_FEW, NOT_INFORMATIVE)]
        values = np.asarray([entry["groups"][p]["ratios"][m][0] for p in judged for m in metrics
                             if entry["groups"][p]["ratios"][m] is not None], dtype=np.float64)
        finite = values[np.isfinite(values) & (values > 0)]
        worst = float(finite[np.argmax(np.abs(np.log(finite)))]) if finite.size else np.nan
        worst_text = f"{worst:.3g}" if np.isfinite(worst) else "n/a"
        worst_key = repr(float(worst)) if np.isfinite(worst) else ""
        label = criterion.replace("_", " ")
        meaning = CRITERION_EXPLANATIONS[criterion]
        measure = " and ".join(metrics) + " ratio"
        word = result["word"]
        failing = failing_text(entry, result)
        rows.append(
            f'<tr data-criterion="{esc(criterion)}"><th scope="row" data-v="{esc(label)}">'
            f"{esc(label)}</th>"
            f'<td data-v="{esc(meaning)}">{esc(meaning)}</td>'
            f'<td data-v="{esc(measure)}">{esc(measure)}</td>'
            f'<td class="verdict {_VERDICT_CSS[word]}" data-v="{esc(word)}">'
            f"{esc(word)}</td>"
            f'<td class="failing" data-v="{esc(failing)}">{esc(failing)}</td>'
            f'<td class="num" data-v="{worst_key}">{esc(worst_text)}</td></tr>'
        )
    columns = ["criterion", "meaning", "measure", "verdict", "failing groups", "worst ratio"]
    head = "".join(f'<th scope="col" tabindex="0">{esc(c)}</th>' for c in columns)
    tau_s, inverse_s = tau_text(report.tau)
    minimum = entry.get("min_group_rows", 0)
    small = (f" A group with fewer than {minimum} rows, or whose reference group has "
             "fewer, is not judged (too few rows)." if minimum else "")
    intro = (f'<p class="explain">A group passes when its rate divided by the reference '
             f'group\'s lies between <span class="tau-value">{tau_s}</span> and '
             f'<span class="tau-inverse">{inverse_s}</span>.{esc(small)} '
             f"{esc(SIZE_NOTE)}</p>")
    return (intro + '<div class="table-wrap"><table class="audit summary sortable">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


SIZE_NOTE = (
    "Each group's share of all positive decisions is shown beside its share of rows but "
    "not judged: it follows the group's size (a large group holds most positives under "
    "any decision), and over the share of rows it is the selection rate, which selection "
    "rate parity judges."
)
"""Why the report does not judge share-of-positives parity."""


def _verdict_table(report: GroupReport, entry: dict[str, Any]) -> str:
    """Verdict per group and criterion (pass, FAIL, n/a, too few rows, not informative);
    cells carry their group and criterion."""
    results = evaluate(entry, report.tau)
    head = "".join(f'<th scope="col" tabindex="0">{esc(h)}</th>'
                   for h in ["attribute", "group", "rows",
                             *(r["criterion"].replace("_", " ") for r in results)])
    rows = []
    for position, group in enumerate(entry["groups"]):
        attribute, label = group["attribute"], group["label"]
        cells = [f'<th scope="row" data-v="{esc(attribute)}">{esc(attribute)}</th>',
                 f'<th scope="row" data-v="{esc(label)}">{esc(label)}</th>',
                 f'<td data-v="{group["rows"]}">{group["rows"]}</td>']
        for result in results:
            word = result["verdicts"][position]
            cells.append(f'<td class="{_WORD_CSS[word]}" data-g="{position}" '
                         f'data-c="{esc(result["criterion"])}" data-v="{esc(word)}">'
                         f"{esc(word)}</td>")
        rows.append(f'<tr data-attribute="{esc(attribute)}">{"".join(cells)}</tr>')
    return ('<div class="table-wrap"><table class="audit verdicts sortable">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def _ratio_charts(report: GroupReport, entry: dict[str, Any]) -> str:
    parts = []
    constant = entry.get("constant") is not None  # no group is judged
    small = {(g["attribute"], g["label"]): g["small"] or constant for g in entry["groups"]}
    for attribute in dict.fromkeys(report.ratios.index.get_level_values(0)):
        block = report.ratios.loc[attribute]
        groups = [str(g) for g in block.index]
        svg = ratio_chart(
            attribute=str(attribute), groups=groups,
            reference=str(report.reference[attribute]), metrics=CHART_METRICS,
            titles=METRIC_NAMES, ratios=block[list(CHART_METRICS)].to_numpy(dtype=np.float64),
            tau=report.tau, small=[small[(str(attribute), g)] for g in groups])
        parts.append(f'<div class="chart-block" data-attribute="{esc(attribute)}">'
                     f"<h4>{esc(attribute)}</h4>{svg}</div>")
    return "".join(parts)


GLANCE_RATES: tuple[tuple[str, str], ...] = (
    ("predicted_prevalence", "selection rate"),
    ("tpr", "true positive rate"),
    ("fpr", "false positive rate"),
    ("precision", "precision"),
)
"""Rates of the groups-at-a-glance table, beside each group's mean score."""


def _value_cell(value: float, lower: float | None = None, upper: float | None = None) -> str:
    """A number with its interval on one line (``0.512 [0.47, 0.553]``), sortable."""
    if not np.isfinite(value):
        return '<td data-v="">n/a</td>'
    text = esc(f"{value:.3g}")
    if lower is None or upper is None or not (np.isfinite(lower) and np.isfinite(upper)):
        return f'<td class="ci" data-v="{value!r}">{text}</td>'
    return (f'<td class="ci" data-v="{value!r}">{text} '
            f'<span class="iv">[{lower:.3g}, {upper:.3g}]</span></td>')


def glance_html(report: GroupReport, entry: dict[str, Any],
                scores: pd.DataFrame | None, score_word: str) -> str:
    """One row per group: rows, share of rows and of positive decisions, the rates a
    decision maker reads first and the mean score, each with its interval when there is
    one; the reference group of each attribute is marked."""
    ci = report.ci
    level = f"{100 * report.interval:g}%"
    headers = ["attribute", "group", "rows", "share of rows", "share of positive decisions",
               "selection rate"]
    if scores is not None:
        headers.append(f"mean {score_word}")
    headers += [label for metric, label in GLANCE_RATES[1:]]
    head = "".join(f'<th scope="col" tabindex="0">{esc(h)}</th>' for h in headers)
    totals = report.by_group.groupby(level="attribute", sort=False)["size"].transform("sum")
    small = {(g["attribute"], g["label"]): g["small"] for g in entry["groups"]}
    body = []
    for key, row in report.by_group.iterrows():
        attribute, group = key
        is_reference = report.reference[str(attribute)] == group
        shown = str(group) + (" (reference)" if is_reference else "")
        if small[(str(attribute), str(group))]:
            shown += " (too few rows)"

        def bounds(metric: str, row_key: Any = key) -> tuple[float | None, float | None]:
            if ci is None or (metric, "lower") not in ci.columns:
                return None, None
            return (float(ci.at[row_key, (metric, "lower")]),
                    float(ci.at[row_key, (metric, "upper")]))

        cells = [f'<th scope="row" data-v="{esc(attribute)}">{esc(attribute)}</th>',
                 f'<th scope="row" data-v="{esc(group)}">{esc(shown)}</th>',
                 f'<td data-v="{int(row["size"])}">{int(row["size"])}</td>',
                 _value_cell(float(row["size"]) / float(totals.loc[key])),
                 _value_cell(float(row["predicted_positive_rate"]), *bounds(
                     "predicted_positive_rate")),
                 _value_cell(float(row["predicted_prevalence"]), *bounds(
                     "predicted_prevalence"))]
        if scores is not None:
            mean = scores.loc[key]
            cells.append(_value_cell(float(mean["mean"]), float(mean["lower"]),
                                     float(mean["upper"])))
        for metric, _ in GLANCE_RATES[1:]:
            cells.append(_value_cell(float(row[metric]), *bounds(metric)))
        css = ' class="reference-row"' if is_reference else ""
        body.append(f'<tr data-attribute="{esc(attribute)}"{css}>{"".join(cells)}</tr>')
    intervals = []
    if ci is not None:
        intervals.append(f"rates with their {level} intervals in brackets")
    if scores is not None:
        intervals.append(f"the mean {score_word} with its {level} normal-approximation "
                         "interval (mean +/- z sd / sqrt(rows))")
    explain = (f"One row per group; {join_words(intervals)}. " if intervals else
               "One row per group (no intervals: pass n_bootstrap or ci_method='analytic'). ")
    explain += ("Ratios and verdicts compare each group with its attribute's reference "
                "group, marked here.")
    return (f'<p class="explain">{esc(explain)}</p>'
            '<div class="table-wrap"><table class="audit glance sortable">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>")


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


def classification_section(ident: str, name: str, report: GroupReport,
                            decisions: np.ndarray, frame: pd.DataFrame,
                            intersections: Intersections, *,
                            entry: dict[str, Any] | None = None,
                            scores: pd.DataFrame | None = None,
                            score_word: str = "score",
                            references: str = "") -> str:
    entry = entry if entry is not None else predictor_data(name, report, ident)
    parts = [
        f'<section class="predictor" id="{ident}">',
        f"<h2>Predictor: {esc(name)}</h2>",
        f'<p class="references">{esc(references)}</p>' if references else "",
        "<h3>Groups at a glance</h3>",
        glance_html(report, entry, scores, score_word),
        "<h3>Summary</h3>",
        summary_html(report, entry),
        "<h3>Parity verdicts</h3>",
        _verdict_table(report, entry),
        "<h3>Disparity charts</h3>",
        '<p class="explain">Ratio of each group\'s rate to its reference group\'s (log '
        "scale); the shaded band is <span class=\"tau-value\">"
        f"{tau_text(report.tau)[0]}</span> to <span class=\"tau-inverse\">"
        f"{tau_text(report.tau)[1]}</span>, red points are outside it; hollow grey points "
        "are not judged (too few rows, or a constant decision).</p>",
        _ratio_charts(report, entry),
        "<h3>Group measures</h3>",
        table_html(report.by_group),
        "<h3>Ratios to the reference group</h3>",
        table_html(report.ratios),
        "<h3>Differences to the reference group</h3>",
        table_html(report.differences),
    ]
    if report.ci is not None:
        level = f"{100 * report.interval:g}%"
        parts += [
            f"<h3>{esc(interval_heading(report.ci_method, level, report.n_bootstrap))}</h3>",
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


def interval_heading(method: str | None, level: str, n_bootstrap: int) -> str:
    """Heading of the interval tables, naming how they were computed."""
    if method == "analytic":
        return f"Analytic intervals ({level}; Wilson score and delta method)"
    if method == "poisson":
        return f"Poisson bootstrap intervals ({level}, {n_bootstrap} replicates)"
    return f"Bootstrap intervals ({level}, {n_bootstrap} resamples)"


def regression_section(name: str, report: RegressionReport, ident: str = "") -> str:
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
        level = f"{100 * report.interval:g}%"
        parts += [
            f"<h3>{esc(interval_heading(report.ci_method, level, report.n_bootstrap))}</h3>",
            _ci_html(report.ci, "Group measures"),
            _ci_html(report.difference_ci, "Differences"),
            _ci_html(report.ratio_ci, "Ratios"),
        ]
    parts.append("</section>")
    return "\n".join(parts)


DECOMPOSITION_EXPLANATION = (
    "Where each gap comes from (Causal Fairness Analysis, Plečko and Bareinboim 2024): "
    "TV = E[y | x1] - E[y | x0] splits into the direct effect (Ctf-DE: the attribute "
    "itself), the part through the mediators (-Ctf-IE) and the spurious part through the "
    "confounders (-Ctf-SE). Each bar starts where the previous one ended and the last is "
    "the gap; whiskers are posterior intervals."
)


def waterfall_steps(result: Decomposition) -> list[tuple[str, float, float, float, float]]:
    """The steps of a decomposition's waterfall: DE, IE and SE as contributions to TV
    (``Ctf-DE``, ``-Ctf-IE``, ``-Ctf-SE``), then TV, each with its interval."""
    block = result.table[result.table["form"] == "x-specific"].set_index("term")
    steps = []
    start = 0.0
    for label, term, sign in (("direct (DE)", "Ctf-DE", 1.0), ("indirect (-IE)", "Ctf-IE", -1.0),
                              ("spurious (-SE)", "Ctf-SE", -1.0)):
        row = block.loc[term]
        value = sign * float(row["mean"])
        bounds = sorted((sign * float(row["lower"]), sign * float(row["upper"])))
        steps.append((label, start, start + value, start + bounds[0], start + bounds[1]))
        start += value
    tv = block.loc["TV"]
    steps.append(("gap (TV)", 0.0, float(tv["mean"]), float(tv["lower"]), float(tv["upper"])))
    return steps


def decomposition_html(decompositions: Mapping[str, Decomposition]) -> str:
    """A waterfall and a table per decomposition (the outcome, each predictor)."""
    charts = []
    rows = []
    for name, result in decompositions.items():
        title = f"{name}: {result.attribute} {result.x1} vs {result.x0}"
        charts.append(f'<div class="waterfall" data-name="{esc(name)}">'
                      + waterfall_chart(title=title, steps=waterfall_steps(result)) + "</div>")
        for label, start, end, lower, upper in waterfall_steps(result):
            rows.append({"decomposition": name, "step": label, "contribution": end - start,
                         "lower": lower - start, "upper": upper - start})
    table = pd.DataFrame(rows).set_index(["decomposition", "step"])
    return (f'<p class="explain">{esc(DECOMPOSITION_EXPLANATION)}</p>'
            f'<div class="waterfalls">{"".join(charts)}</div>\n'
            + table_html(table, digits=4))


def decomposition_findings(name: str, result: Decomposition) -> list[str]:
    """One sentence per decomposition: the gap and its three parts."""
    steps = waterfall_steps(result)
    de, ie, se = (end - start for _, start, end, _, _ in steps[:3])
    return [
        f"The gap in {name} between {result.attribute} = {result.x1} and {result.x0} is "
        f"{steps[3][2]:+.4f}: {de:+.4f} direct, {ie:+.4f} through the mediators, "
        f"{se:+.4f} spurious."
    ]
