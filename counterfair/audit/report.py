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
(:func:`counterfair.audit.find_subpopulations`), a counterfactual audit
(``counterfactual=``, with the densities of the changes) and causal decompositions of
gaps (``decompositions=``, a waterfall chart each). Further sections are appended
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
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ._findings import (
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
from ._sections import (
    DEPENDENCE_EXPLANATION,
    EXPLANATION_MEASURES,
    classification_section,
    decomposition_findings,
    decomposition_html,
    explanations_html,
    regression_section,
    subpopulations_html,
    summary_html,
    table_html,
)
from ._validation import NO_PREDICTORS, check_choice, check_tau
from .causal_report import CounterfactualReport, counterfactual_html
from .classification import binary_decisions, group_metrics
from .decomposition_result import Decomposition
from .explanations import ExplanationAudit
from .regression import regression_metrics
from .subpopulations import SubpopulationReport

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEPENDENCE_EXPLANATION",
    "EXPLANATION_MEASURES",
    "explanations_html",
    "regression_html",
    "render_report",
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
REPORT_IS_DIRECTORY = "{path} is a directory; give the path of the HTML file to write"
TAU_SLIDER_MIN = 0.5
"""Lower end of the tau slider (the number box takes any tau in (0, 1])."""


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


def _predictor_part(
    task: Task,
    position: int,
    key: object,
    predictions: ArrayLike,
    *,
    y_true: ArrayLike,
    frame: pd.DataFrame,
    threshold: float,
    tau: float,
    intersections: Intersections,
    reference: Mapping[str, Hashable] | None,
    n_bootstrap: int,
    confidence: float,
    seed: int,
    ci_method: str,
) -> tuple[str, dict[str, Any], list[tuple[str, bool]]]:
    """One predictor's audit: its section, its JSON entry and its ``(finding, failed)`` pairs."""
    name, ident = str(key), f"predictor-{position}"
    if task == "classification":
        report = group_metrics(y_true, predictions, frame, threshold=threshold,
                               intersections=intersections, reference=reference, tau=tau,
                               n_bootstrap=n_bootstrap, confidence=confidence, seed=seed,
                               ci_method=ci_method)
        decisions = binary_decisions(predictions, threshold)
        section = classification_section(ident, name, report, decisions, frame, intersections)
        entry = predictor_data(name, report, ident)
        return section, entry, parity_findings(entry, tau)
    reg = regression_metrics(y_true, predictions, frame, intersections=intersections,
                             reference=reference, n_bootstrap=n_bootstrap,
                             confidence=confidence, seed=seed, ci_method=ci_method)
    entry = {"id": ident, "name": name, "task": "regression",
             "findings": regression_findings(name, reg)}
    return regression_section(name, reg, ident), entry, [(t, False) for t in entry["findings"]]


def _optional_sections(
    explanations: Mapping[str, ExplanationAudit] | None,
    subpopulations: SubpopulationReport | None,
    counterfactual: Mapping[str, CounterfactualReport] | None,
    extra_sections: Sequence[tuple[str, str]],
) -> list[str]:
    """The sections after the predictors': explanations, subpopulations, counterfactual
    audit, then the caller's own."""
    sections = []
    if explanations:
        sections.append("<section><h2>Explanation-based measures</h2>\n"
                        + explanations_html(explanations) + "</section>")
    if subpopulations is not None:
        sections.append("<section><h2>Affected subpopulations</h2>\n"
                        + subpopulations_html(subpopulations) + "</section>")
    if counterfactual:
        sections.append("<section><h2>Counterfactual fairness</h2>\n"
                        + counterfactual_html(dict(counterfactual)) + "</section>")
    for heading, fragment in extra_sections:
        sections.append(f"<section><h2>{esc(heading)}</h2>\n{fragment}</section>")
    return sections


def _page(
    *,
    title: str,
    settings: str,
    controls: str,
    findings: Sequence[tuple[str, bool]],
    tau_note: str,
    sections: Sequence[str],
    data: dict[str, Any],
    warnings: Sequence[str] = (),
) -> str:
    """The whole HTML page, with a policy that allows only its own inline script."""
    alerts = "".join(
        '<p class="warning" role="alert" style="border:2px solid #b00020;padding:0.5em;'
        f'background:#fff4f4"><strong>Warning:</strong> {esc(text)}</p>\n'
        for text in warnings
    )
    items = "".join(('<li class="fail">' if failed else "<li>") + f"{esc(text)}</li>"
                    for text, failed in findings)
    script_hash = base64.b64encode(hashlib.sha256(JS.encode("utf-8")).digest()).decode()
    policy = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
              f"script-src 'sha256-{script_hash}'; base-uri 'none'; form-action 'none'")
    body = "\n".join(sections)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
        f'<meta http-equiv="Content-Security-Policy" content="{esc(policy)}"/>\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1"/>\n'
        f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        f"<h1>{esc(title)}</h1>\n{alerts}<p class=\"meta\">{esc(settings)}</p>\n"
        + controls
        + '\n<p class="print-only meta">Printed with groups: <span class="filter-state">'
        "all attributes</span>.</p>\n"
        f'<section id="findings"><h2>Findings</h2><p class="explain">One sentence per '
        f"finding.{tau_note}</p>"
        f'<ul class="findings" id="findings-list">{items}</ul></section>\n'
        f"{body}\n{json_script(data, 'counterfair-data')}\n<script>{JS}</script>\n"
        "</body>\n</html>\n"
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
    ci_method: str = "auto",
    explanations: Mapping[str, ExplanationAudit] | None = None,
    subpopulations: SubpopulationReport | None = None,
    extra_sections: Sequence[tuple[str, str]] = (),
    counterfactual: Mapping[str, CounterfactualReport] | None = None,
    warnings: Sequence[str] = (),
    decompositions: Mapping[str, Decomposition] | None = None,
) -> str:
    """Build the HTML text of the audit report (see :func:`write_report`)."""
    task = check_choice(task, "task", ("classification", "regression"))  # type: ignore[assignment]
    tau = check_tau(tau)
    predictors = dict(y_pred) if isinstance(y_pred, Mapping) else {"prediction": y_pred}
    if not predictors:
        raise ValueError(NO_PREDICTORS)
    _check_counterfactual(counterfactual)
    _check_decompositions(decompositions)
    frame = protected_frame(protected)
    attributes = list(build_layout(frame, intersections).attributes)
    sections = []
    data = _page_data(tau, attributes)
    findings: list[tuple[str, bool]] = []
    for position, (key, predictions) in enumerate(predictors.items()):
        section, entry, found = _predictor_part(
            task, position, key, predictions, y_true=y_true, frame=frame,
            threshold=threshold, tau=tau, intersections=intersections, reference=reference,
            n_bootstrap=n_bootstrap, confidence=confidence, seed=seed, ci_method=ci_method,
        )
        sections.append(section)
        data["predictors"].append(entry)
        findings += found
    sections += _optional_sections(explanations, subpopulations, counterfactual, extra_sections)
    for name, cf_report in (counterfactual or {}).items():
        data["extra_findings"] += counterfactual_findings(str(name), cf_report)
    if decompositions:
        sections.insert(  # before the caller's own sections, which come last
            len(sections) - len(extra_sections),
            "<section id=\"decomposition\"><h2>Where the gap comes from</h2>\n"
            + decomposition_html(dict(decompositions)) + "</section>",
        )
        for name, result in decompositions.items():
            data["extra_findings"] += decomposition_findings(str(name), result)
    findings += [(t, False) for t in data["extra_findings"]]
    tau_s, _ = tau_text(tau)
    tau_note = (f' Parity verdicts at tau = <span class="tau-value">{tau_s}</span>.'
                if task == "classification" else "")
    notes = [*warnings, *constant_warnings(predictors)]
    return _page(
        title=title, settings=_settings_text(frame, task, predictors, threshold, tau),
        controls=_controls(tau if task == "classification" else None, attributes),
        findings=findings, tau_note=tau_note, sections=sections, data=data,
        warnings=notes,
    )


CONSTANT_PREDICTOR = (
    "{name}: every prediction is {value!r}, a constant predictor; it is trivially fair, "
    "and this audit says nothing of its use"
)
"""Warning at the top of a report whose predictor gives one value to every row."""


def constant_warnings(predictors: Mapping[str, ArrayLike]) -> list[str]:
    """One warning per predictor that gives every row the same value."""
    out = []
    for name, predictions in predictors.items():
        values = pd.unique(pd.Series(np.asarray(predictions).ravel()))
        if len(values) == 1:
            value = values[0].item() if hasattr(values[0], "item") else values[0]
            out.append(CONSTANT_PREDICTOR.format(name=name, value=value))
    return out


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
    ci_method: str = "auto",
    explanations: Mapping[str, ExplanationAudit] | None = None,
    subpopulations: SubpopulationReport | None = None,
    extra_sections: Sequence[tuple[str, str]] = (),
    counterfactual: Mapping[str, CounterfactualReport] | None = None,
    decompositions: Mapping[str, Decomposition] | None = None,
    overwrite: bool = False,
    warnings: Sequence[str] = (),
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
    ci_method
        Interval method, as in :func:`counterfair.audit.group_metrics` (``"analytic"``
        gives intervals without ``n_bootstrap``).
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
    decompositions
        Optional :class:`~counterfair.audit.Decomposition` per name (from
        :func:`counterfair.audit.decompose`: the outcome, each predictor): a section with
        a waterfall chart per entry (the gap split into its direct, indirect and spurious
        parts, with intervals), their table, and one finding each.
    overwrite
        Replace an existing file at ``path``; without it an existing file is an error.
    warnings
        Lines shown at the top of the report, before anything else (e.g. that a
        predictor does no better than a baseline on held-out rows). A predictor
        that gives every row the same value adds its own warning: a constant
        predictor is trivially fair.

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
        confidence=confidence, seed=seed, title=title, ci_method=ci_method,
        explanations=explanations,
        subpopulations=subpopulations, extra_sections=extra_sections,
        counterfactual=counterfactual, warnings=warnings, decompositions=decompositions,
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
    ci_method: str = "auto",
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
                                    confidence=confidence, seed=seed, ci_method=ci_method)
        parts.append(regression_section(str(name), report))
    return "\n".join(parts)
