"""Plain-language findings of the audit report, one sentence each.

The parity findings are computed from the same per-predictor data the page embeds as
JSON (:func:`predictor_data`), by the same rule as the page's script, which rewrites
them when tau changes: a group passes a criterion when ``tau <= ratio <= 1 / tau`` for
each of its rates (the rule of :func:`counterfair.audit.group_metrics`), fails when
one of them is outside, and cannot be judged when none fails but a ratio is undefined.
Numbers in the sentences are the texts embedded in the data (``%.3g`` of the ratio), and
tau is printed with ``%g`` (its inverse ``%.4g``), so the page's sentences at the
report's tau are the ones written here, character for character.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from ._html import finite
from .causal_report import CounterfactualReport
from .classification import JOINT_CRITERIA, PARITY_CRITERIA, GroupReport
from .regression import RegressionReport

METRIC_NAMES: dict[str, str] = {
    "predicted_prevalence": "selection rate",
    "predicted_positive_rate": "share of all positive decisions",
    "fpr": "false positive rate",
    "fnr": "false negative rate",
    "fdr": "false discovery rate",
    "for": "false omission rate",
    "npv": "negative predictive value",
    "tpr": "true positive rate",
}
"""Plain names of the rates the parity criteria compare."""

CRITERIA: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    [(c, (m,)) for c, m in PARITY_CRITERIA.items()] + list(JOINT_CRITERIA.items())
)
"""Every criterion with the rates it judges, in report order."""

CHART_METRICS: tuple[str, ...] = tuple(dict.fromkeys(m for _, ms in CRITERIA for m in ms))
"""Rates drawn in the disparity charts (every rate a criterion judges)."""


def _shown(group: Hashable) -> str:
    return repr(group) if isinstance(group, str) else str(group)


def predictor_data(name: str, report: GroupReport, ident: str) -> dict[str, Any]:
    """The JSON-ready data of one classification predictor (ratios with their texts)."""
    groups = []
    for (attribute, group), row in report.ratios.iterrows():
        ratios: dict[str, Any] = {}
        for metric in CHART_METRICS:
            value = finite(row[metric])
            ratios[metric] = None if value is None else [value, f"{value:.3g}"]
        groups.append({
            "attribute": str(attribute),
            "label": str(group),
            "shown": _shown(group),
            "reference": bool(report.reference.get(str(attribute)) == group),
            "ratios": ratios,
        })
    return {"id": ident, "name": name, "task": "classification", "groups": groups,
            "reference": [[str(a), str(g)] for a, g in report.reference.items()]}


def tau_text(tau: float) -> tuple[str, str]:
    """``tau`` and ``1 / tau`` as the report prints them."""
    return f"{tau:g}", f"{1.0 / tau:.4g}"


def join_words(words: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(words) < 2:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def evaluate(data: dict[str, Any], tau: float) -> list[dict[str, Any]]:
    """Per criterion: the verdict word, the failing (group, rate) pairs and group verdicts."""
    out = []
    for criterion, metrics in CRITERIA:
        failing: list[tuple[int, str, float, str]] = []
        verdicts: list[str] = []
        for group in data["groups"]:
            fails = undefined = False
            for metric in metrics:
                cell = group["ratios"][metric]
                if cell is None:
                    undefined = True
                elif not (tau <= cell[0] <= 1.0 / tau):
                    fails = True
            verdicts.append("FAIL" if fails else ("n/a" if undefined else "pass"))
        for metric in metrics:  # metric-major, as GroupReport.failures
            for position, group in enumerate(data["groups"]):
                cell = group["ratios"][metric]
                if cell is not None and not (tau <= cell[0] <= 1.0 / tau):
                    failing.append((position, metric, cell[0], cell[1]))
        word = "FAIL" if failing else ("n/a" if "n/a" in verdicts else "pass")
        out.append({"criterion": criterion, "metrics": metrics, "word": word,
                    "failing": failing, "verdicts": verdicts})
    return out


def failing_text(data: dict[str, Any], result: dict[str, Any]) -> str:
    """The summary table's ``failing groups`` cell (as :meth:`GroupReport.summary_table`)."""
    groups = data["groups"]
    return ", ".join(
        f"{groups[p]['attribute']} = {groups[p]['shown']} ({m} {text})"
        for p, m, _, text in result["failing"]
    ) or "none"


def _distance(ratio: float) -> float:
    if ratio <= 0:
        return float("inf")
    return 1.0 / ratio if ratio < 1 else ratio


def parity_findings(data: dict[str, Any], tau: float) -> list[tuple[str, bool]]:
    """One sentence per failing criterion, then one for the passing and the undecided.

    Returns ``(sentence, failed)`` pairs.
    """
    name = data["name"]
    tau_s, inverse_s = tau_text(tau)
    sentences: list[tuple[str, bool]] = []
    passed, undecided = [], []
    for result in evaluate(data, tau):
        label = result["criterion"].replace("_", " ")
        if result["word"] == "pass":
            passed.append(label)
            continue
        if result["word"] == "n/a":
            undecided.append(label)
            continue
        worst = result["failing"][0]
        for item in result["failing"][1:]:
            if _distance(item[2]) > _distance(worst[2]):
                worst = item
        count = len({p for p, *_ in result["failing"]})
        group = data["groups"][worst[0]]
        sentences.append((
            f"{name} fails {label} at tau = {tau_s}: {count} "
            f"group{'s' if count > 1 else ''} outside the band {tau_s} to {inverse_s}; "
            f"the farthest is {group['attribute']} = {group['label']}, whose "
            f"{METRIC_NAMES[worst[1]]} is {worst[3]} times its reference group's.",
            True,
        ))
    if passed:
        sentences.append((f"{name} passes {join_words(passed)} at tau = {tau_s}: every "
                          f"group's ratio lies within {tau_s} to {inverse_s}.", False))
    if undecided:
        sentences.append((f"{name} cannot be judged on {join_words(undecided)}: no group "
                          "fails, but a ratio is undefined (reference rate 0 or no cases).",
                          False))
    return sentences


def regression_findings(name: str, report: RegressionReport) -> list[str]:
    """One sentence: the group whose mean residual differs most from its reference's."""
    differences = report.differences["mean_residual"].to_numpy(dtype=np.float64)
    if not np.isfinite(differences).any():
        return [f"{name}: no group's mean residual can be compared with its reference."]
    position = int(np.nanargmax(np.abs(differences)))
    attribute, group = report.differences.index[position]
    value = float(differences[position])
    side = "above" if value >= 0 else "below"
    return [f"{name} (regression): the mean residual of {attribute} = {group} is "
            f"{abs(value):.3g} {side} that of its reference group "
            f"{report.reference[attribute]} (largest difference of all groups)."]


def counterfactual_findings(name: str, report: CounterfactualReport) -> list[str]:
    """One sentence per attribute: causal mean |change| beside the flip test's."""
    level = f"{100 * report.interval:g}%"
    out = []
    for row in report.overall.itertuples(index=False):
        action = (row.attribute if str(row.attribute).startswith("do(")
                  else f"do({row.attribute} = another level)")
        out.append(
            f"Under {action}, the output of {name} changes by "
            f"{row.mean_abs_change:.3g} on average ({level} interval {row.ci_lower:.3g} to "
            f"{row.ci_upper:.3g}) against {row.flip_mean_abs_change:.3g} by the flip test; "
            f"{row.share_above_tolerance:.0%} of rows change by more than "
            f"{report.tolerance:g}."
        )
    return out
