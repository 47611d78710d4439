"""The sections of the HTML audit report: summary, verdicts, charts, tables.

The ``*_model`` functions gather what a section shows (texts, :class:`~._html.Table`
models, SVG charts); the macros of ``templates/sections.html.j2`` lay it out, with every
text escaped by autoescape, and the ``*_html`` functions return the rendered fragment.
The page's script (``templates/report.js``) finds the cells it rewrites through
``data-*`` attributes (``data-criterion`` rows of the summary, ``data-g`` / ``data-c``
verdict cells, ``data-attribute`` rows and chart blocks for the group selector).
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
from ._html import Cell, Row, Table, frame_table, header, macro, safe
from ._svg import difference_chart, ratio_chart, waterfall_chart
from .classification import CRITERION_EXPLANATIONS, GroupReport
from .decomposition_result import Decomposition
from .dependence import g_test, mutual_information, normalized_mutual_information
from .explanations import ExplanationAudit
from .regression import RegressionReport
from .subpopulations import SubpopulationReport

SECTIONS = "sections.html.j2"
"""The template of the report's sections (one macro per section and part)."""

Model = dict[str, Any]
"""What a section's macro lays out (texts, tables, SVG charts), by name."""


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


def explanations_model(audits: Mapping[str, ExplanationAudit]) -> Model:
    """The table of :func:`explanations_html` (``None`` when no measure was given)."""
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
    table = frame_table(pd.DataFrame(rows).set_index(["predictor", "measure"])) if rows else None
    return {"table": table}


def explanations_html(audits: Mapping[str, ExplanationAudit]) -> str:
    """Table of explanation-based measures, one column block per predictor.

    Rows are the measures of :data:`EXPLANATION_MEASURES` that were given, each with a
    one-line meaning, its value and (where computed) its bootstrap interval.
    """
    return macro(SECTIONS, "explanations", explanations_model(audits))


def subpopulations_model(report: SubpopulationReport, *, top: int = 10) -> Model:
    """What :func:`subpopulations_html` shows."""
    found = report.top(top)
    columns = ["description", "size", "share", "difference", "lower", "upper", "p_value",
               "p_adjusted"]
    return {
        "protected_group": str(report.protected_group),
        "outcome_value": str(report.outcome_value),
        "level": f"{100 * report.interval:g}%",
        "alpha": f"{report.alpha:g}",
        "table": None if found.empty else frame_table(found[columns].set_index("description")),
        "tree": report.tree_text(),
    }


def subpopulations_html(report: SubpopulationReport, *, top: int = 10) -> str:
    """The subpopulation tree and its strongest significant subpopulations."""
    return macro(SECTIONS, "subpopulations", subpopulations_model(report, top=top))


def _summary_table(report: GroupReport, entry: dict[str, Any]) -> Table:
    """One row per criterion: meaning, measure, verdict, failing groups, worst ratio."""
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
        meaning = CRITERION_EXPLANATIONS[criterion]
        measure = " and ".join(metrics) + " ratio"
        word = result["word"]
        failing = failing_text(entry, result)
        rows.append(Row(criterion=criterion, cells=[
            header(criterion.replace("_", " ")),
            Cell(text=meaning, key=meaning),
            Cell(text=measure, key=measure),
            Cell(text=word, key=word, css=f"verdict {_VERDICT_CSS[word]}"),
            Cell(text=failing, key=failing, css="failing"),
            Cell(text=worst_text, key=worst_key, css="num"),
        ]))
    return Table(headers=["criterion", "meaning", "measure", "verdict", "failing groups",
                          "worst ratio"], rows=rows, css="audit summary")


def summary_model(report: GroupReport, entry: dict[str, Any]) -> Model:
    """What :func:`summary_html` shows."""
    tau_s, inverse_s = tau_text(report.tau)
    minimum = entry.get("min_group_rows", 0)
    small = (f" A group with fewer than {minimum} rows, or whose reference group has "
             "fewer, is not judged (too few rows)." if minimum else "")
    return {"tau": tau_s, "inverse": inverse_s, "small": small, "size_note": SIZE_NOTE,
            "table": _summary_table(report, entry)}


def summary_html(report: GroupReport, entry: dict[str, Any] | None = None) -> str:
    """The criterion summary of a :class:`GroupReport` as a colour-coded, sortable table.

    ``entry`` is the predictor's page data (:func:`~._findings.predictor_data`; by default
    built from ``report`` with no minimum group size). Rows carry ``data-criterion`` so
    that the page's script can rewrite the verdict and the failing groups when tau
    changes; the worst ratio is over the groups that are judged.
    """
    entry = entry if entry is not None else predictor_data("", report, "")
    return macro(SECTIONS, "summary", summary_model(report, entry))


SIZE_NOTE = (
    "Each group's share of all positive decisions is shown beside its share of rows but "
    "not judged: it follows the group's size (a large group holds most positives under "
    "any decision), and over the share of rows it is the selection rate, which selection "
    "rate parity judges."
)
"""Why the report does not judge share-of-positives parity."""


def _verdict_table(report: GroupReport, entry: dict[str, Any]) -> Table:
    """Verdict per group and criterion (pass, FAIL, n/a, too few rows, not informative);
    cells carry their group and criterion."""
    results = evaluate(entry, report.tau)
    rows = []
    for position, group in enumerate(entry["groups"]):
        attribute = group["attribute"]
        cells = [header(attribute), header(group["label"]),
                 Cell(text=str(group["rows"]), key=str(group["rows"]))]
        for result in results:
            word = result["verdicts"][position]
            cells.append(Cell(text=word, key=word, css=_WORD_CSS[word], group=position,
                              criterion=result["criterion"]))
        rows.append(Row(cells=cells, attribute=attribute))
    headers = ["attribute", "group", "rows",
               *(r["criterion"].replace("_", " ") for r in results)]
    return Table(headers=headers, rows=rows, css="audit verdicts")


def _ratio_charts(report: GroupReport, entry: dict[str, Any]) -> list[Model]:
    blocks = []
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
        blocks.append({"attribute": str(attribute), "svg": safe(svg)})  # SVG built with esc
    return blocks


GLANCE_RATES: tuple[tuple[str, str], ...] = (
    ("predicted_prevalence", "selection rate"),
    ("tpr", "true positive rate"),
    ("fpr", "false positive rate"),
    ("precision", "precision"),
)
"""Rates of the groups-at-a-glance table, beside each group's mean score."""


def _value_cell(value: float, lower: float | None = None, upper: float | None = None) -> Cell:
    """A number with its interval on one line (``0.512 [0.47, 0.553]``), sortable."""
    if not np.isfinite(value):
        return Cell(text="n/a", key="")
    text = f"{value:.3g}"
    if lower is None or upper is None or not (np.isfinite(lower) and np.isfinite(upper)):
        return Cell(text=text, key=repr(value), css="ci")
    return Cell(text=text, key=repr(value), css="ci", interval=f"[{lower:.3g}, {upper:.3g}]")


def glance_model(report: GroupReport, entry: dict[str, Any],
                 scores: pd.DataFrame | None, score_word: str) -> Model:
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

        size = str(int(row["size"]))
        cells = [header(attribute),
                 Cell(text=shown, key=str(group), header=True),
                 Cell(text=size, key=size),
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
        body.append(Row(cells=cells, attribute=str(attribute),
                        css="reference-row" if is_reference else ""))
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
    return {"explain": explain, "table": Table(headers=headers, rows=body, css="audit glance")}


def glance_html(report: GroupReport, entry: dict[str, Any],
                scores: pd.DataFrame | None, score_word: str) -> str:
    """The groups-at-a-glance table with its explanation (see :func:`glance_model`)."""
    return macro(SECTIONS, "explained", glance_model(report, entry, scores, score_word))


def _difference_charts(report: RegressionReport, metrics: Sequence[str]) -> list[Model]:
    blocks = []
    for attribute in dict.fromkeys(report.differences.index.get_level_values(0)):
        block = report.differences.loc[attribute]
        svg = difference_chart(
            attribute=str(attribute), groups=[str(g) for g in block.index],
            reference=str(report.reference[attribute]), metrics=metrics,
            differences=block[list(metrics)].to_numpy(dtype=np.float64))
        blocks.append({"attribute": str(attribute), "svg": safe(svg)})  # SVG built with esc
    return blocks


def _intervals(report: GroupReport | RegressionReport,
               tables: Sequence[tuple[str, pd.DataFrame | None]]) -> Model | None:
    """The interval tables of a report under their heading (``None`` without intervals)."""
    if report.ci is None:
        return None
    level = f"{100 * report.interval:g}%"
    return {"heading": interval_heading(report.ci_method, level, report.n_bootstrap),
            "tables": [(heading, None if ci is None else frame_table(_html.interval_frame(ci)))
                       for heading, ci in tables]}


def _dependence(decisions: np.ndarray, frame: pd.DataFrame,
                intersections: Intersections) -> Model:
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
    return {"explain": DEPENDENCE_EXPLANATION,
            "table": frame_table(pd.DataFrame(rows).set_index("attribute"))}


def classification_model(ident: str, name: str, report: GroupReport,
                         decisions: np.ndarray, frame: pd.DataFrame,
                         intersections: Intersections, *,
                         entry: dict[str, Any] | None = None,
                         scores: pd.DataFrame | None = None,
                         score_word: str = "score",
                         references: str = "") -> Model:
    """A classification predictor's section (macro ``classification``)."""
    entry = entry if entry is not None else predictor_data(name, report, ident)
    tau_s, inverse_s = tau_text(report.tau)
    return {
        "kind": "classification",
        "ident": ident,
        "name": name,
        "references": references,
        "glance": glance_model(report, entry, scores, score_word),
        "summary": summary_model(report, entry),
        "verdicts": _verdict_table(report, entry),
        "tau": tau_s,
        "inverse": inverse_s,
        "charts": _ratio_charts(report, entry),
        "by_group": frame_table(report.by_group),
        "ratios": frame_table(report.ratios),
        "differences": frame_table(report.differences),
        "intervals": _intervals(report, [("Group measures", report.ci),
                                         ("Ratios", report.ratio_ci),
                                         ("Differences", report.difference_ci)]),
        "dependence": _dependence(decisions, frame, intersections),
    }


def classification_section(ident: str, name: str, report: GroupReport,
                           decisions: np.ndarray, frame: pd.DataFrame,
                           intersections: Intersections, *,
                           entry: dict[str, Any] | None = None,
                           scores: pd.DataFrame | None = None,
                           score_word: str = "score",
                           references: str = "") -> str:
    """The HTML of a classification predictor's section (see :func:`classification_model`)."""
    return macro(SECTIONS, "section", classification_model(
        ident, name, report, decisions, frame, intersections, entry=entry, scores=scores,
        score_word=score_word, references=references))


def interval_heading(method: str | None, level: str, n_bootstrap: int) -> str:
    """Heading of the interval tables, naming how they were computed."""
    if method == "analytic":
        return f"Analytic intervals ({level}; Wilson score and delta method)"
    if method == "poisson":
        return f"Poisson bootstrap intervals ({level}, {n_bootstrap} replicates)"
    return f"Bootstrap intervals ({level}, {n_bootstrap} resamples)"


def regression_model(name: str, report: RegressionReport, ident: str = "") -> Model:
    """A regression predictor's section (macro ``regression``)."""
    return {
        "kind": "regression",
        "ident": ident,
        "name": name,
        "reference": "; ".join(f"{a} = {g}" for a, g in report.reference.items()),
        "charts": _difference_charts(report, ["mean_prediction", "mean_residual", "rmse"]),
        "by_group": frame_table(report.by_group),
        "differences": frame_table(report.differences),
        "ratios": frame_table(report.ratios),
        "intervals": _intervals(report, [("Group measures", report.ci),
                                         ("Differences", report.difference_ci),
                                         ("Ratios", report.ratio_ci)]),
    }


def regression_section(name: str, report: RegressionReport, ident: str = "") -> str:
    """The HTML of a regression predictor's section (see :func:`regression_model`)."""
    return macro(SECTIONS, "section", regression_model(name, report, ident))


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


def decomposition_model(decompositions: Mapping[str, Decomposition]) -> Model:
    """What :func:`decomposition_html` shows."""
    charts = []
    rows = []
    for name, result in decompositions.items():
        title = f"{name}: {result.attribute} {result.x1} vs {result.x0}"
        svg = waterfall_chart(title=title, steps=waterfall_steps(result))
        charts.append({"name": name, "svg": safe(svg)})  # SVG built with esc
        for label, start, end, lower, upper in waterfall_steps(result):
            rows.append({"decomposition": name, "step": label, "contribution": end - start,
                         "lower": lower - start, "upper": upper - start})
    table = pd.DataFrame(rows).set_index(["decomposition", "step"])
    return {"explain": DECOMPOSITION_EXPLANATION, "charts": charts,
            "table": frame_table(table, digits=4)}


def decomposition_html(decompositions: Mapping[str, Decomposition]) -> str:
    """A waterfall and a table per decomposition (the outcome, each predictor)."""
    return macro(SECTIONS, "decomposition", decomposition_model(decompositions))


def decomposition_findings(name: str, result: Decomposition) -> list[str]:
    """One sentence per decomposition: the gap and its three parts."""
    steps = waterfall_steps(result)
    de, ie, se = (end - start for _, start, end, _, _ in steps[:3])
    return [
        f"The gap in {name} between {result.attribute} = {result.x1} and {result.x0} is "
        f"{steps[3][2]:+.4f}: {de:+.4f} direct, {ie:+.4f} through the mediators, "
        f"{se:+.4f} spurious."
    ]
