"""Plain-language findings of the audit report, one sentence each.

The parity findings are computed from the same per-predictor data the page embeds as
JSON (:func:`predictor_data`), by the same rule as the page's script, which rewrites
them when tau changes: a group passes a criterion when ``tau <= ratio <= 1 / tau`` for
each of its rates (the rule of :meth:`counterfair.audit.GroupAudit.metrics`), fails when
one of them is outside, and cannot be judged when none fails but a ratio is undefined.
Two verdicts come before that rule: a group with fewer rows than the report's
``min_group_rows`` (or whose reference group has fewer) is ``"too few rows"``, and every
group of a predictor whose decisions are all the same is ``"not informative"``; neither
counts as a pass or a failure. Numbers in the sentences are the texts embedded in the
data (``%.3g`` of the ratio and of its interval's ends), and tau is printed with ``%g``
(its inverse ``%.4g``), so the page's sentences at the report's tau are the ones written
here, character for character.

The report judges the criteria of :data:`CRITERIA`: every criterion of
:data:`~counterfair.audit.classification.PARITY_CRITERIA` but
``share_of_positives_parity``, whose rate (a group's share of all positive decisions)
follows the group's size: a large group holds most positives under any decision. Its
size-free form, the share of positives over the share of rows, is the selection rate
divided by the overall selection rate, so its ratio to the reference group's is the
selection rate ratio, which selection rate parity already judges.
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

SIZE_DEPENDENT_CRITERIA: tuple[str, ...] = ("share_of_positives_parity",)
"""Criteria of :data:`PARITY_CRITERIA` the report does not judge: their rate depends on
the groups' sizes (see the module's docstring)."""

CRITERIA: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    [(c, (m,)) for c, m in PARITY_CRITERIA.items() if c not in SIZE_DEPENDENT_CRITERIA]
    + list(JOINT_CRITERIA.items())
)
"""Every criterion the report judges, with the rates it judges, in report order."""

TOO_FEW = "too few rows"
"""Verdict of a group with fewer rows than ``min_group_rows`` (or a reference that has)."""

NOT_INFORMATIVE = "not informative"
"""Verdict of every group of a predictor whose decisions are all the same."""

MIN_GROUP_ROWS = 30
"""Default ``min_group_rows`` of the report: below 30 rows a rate near 0.5 has a standard
error above 0.09, as large as the whole distance from a rate to four fifths of it, so a
ratio cannot tell a pass from a failure."""

CHART_METRICS: tuple[str, ...] = tuple(dict.fromkeys(m for _, ms in CRITERIA for m in ms))
"""Rates drawn in the disparity charts (every rate a criterion judges)."""


def _shown(group: Hashable) -> str:
    return repr(group) if isinstance(group, str) else str(group)


def _ratio_interval(report: GroupReport, key: tuple[Any, Any],
                    metric: str) -> list[Any] | None:
    """``[lower, upper, "lower", "upper"]`` of one ratio, or None without an interval."""
    if report.ratio_ci is None or (metric, "lower") not in report.ratio_ci.columns:
        return None
    lower = finite(report.ratio_ci.at[key, (metric, "lower")])
    upper = finite(report.ratio_ci.at[key, (metric, "upper")])
    if lower is None or upper is None:
        return None
    return [lower, upper, f"{lower:.3g}", f"{upper:.3g}"]


def predictor_data(
    name: str,
    report: GroupReport,
    ident: str,
    *,
    min_group_rows: int = 0,
    constant: str | None = None,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """The JSON-ready data of one classification predictor (ratios with their texts).

    ``min_group_rows``: a group with fewer rows, or whose reference group has fewer, is
    marked ``small`` (verdict ``"too few rows"``). ``constant``: the decision every row
    gets, as the findings print it, when the decisions are all the same (every verdict
    ``"not informative"``). ``notes``: sentences that follow the parity findings.
    """
    sizes = report.by_group["size"]
    groups = []
    for key, row in report.ratios.iterrows():
        attribute, group = key
        ratios: dict[str, Any] = {}
        intervals: dict[str, Any] = {}
        for metric in CHART_METRICS:
            value = finite(row[metric])
            ratios[metric] = None if value is None else [value, f"{value:.3g}"]
            intervals[metric] = _ratio_interval(report, key, metric)
        rows = int(sizes.loc[key])
        reference_rows = int(sizes.loc[(attribute, report.reference[str(attribute)])])
        groups.append({
            "attribute": str(attribute),
            "label": str(group),
            "shown": _shown(group),
            "reference": bool(report.reference.get(str(attribute)) == group),
            "rows": rows,
            "small": bool(min(rows, reference_rows) < min_group_rows),
            "ratios": ratios,
            "intervals": intervals,
        })
    level = f"{100 * report.interval:g}%" if report.ratio_ci is not None else None
    return {"id": ident, "name": name, "task": "classification", "groups": groups,
            "reference": [[str(a), str(g)] for a, g in report.reference.items()],
            "min_group_rows": int(min_group_rows), "constant": constant, "level": level,
            "constant_finding": (None if constant is None else
                                 CONSTANT_DECISION.format(name=name, decision=constant)),
            "notes": list(notes)}


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
    constant = data.get("constant") is not None
    for criterion, metrics in CRITERIA:
        failing: list[tuple[int, str, float, str]] = []
        verdicts: list[str] = []
        judged = False  # whether a group other than a reference was judged
        for group in data["groups"]:
            if group.get("small"):
                verdicts.append(TOO_FEW)
                continue
            if constant:
                verdicts.append(NOT_INFORMATIVE)
                continue
            fails = undefined = False
            for metric in metrics:
                cell = group["ratios"][metric]
                if cell is None:
                    undefined = True
                elif not (tau <= cell[0] <= 1.0 / tau):
                    fails = True
            verdicts.append("FAIL" if fails else ("n/a" if undefined else "pass"))
            judged = judged or not group["reference"]
        for metric in metrics:  # metric-major, as GroupReport.failures
            for position, group in enumerate(data["groups"]):
                cell = group["ratios"][metric]
                if verdicts[position] == "FAIL" and cell is not None and not (
                        tau <= cell[0] <= 1.0 / tau):
                    failing.append((position, metric, cell[0], cell[1]))
        if constant:
            word = NOT_INFORMATIVE
        elif failing:
            word = "FAIL"
        elif "n/a" in verdicts:
            word = "n/a"
        else:
            word = "pass" if judged else TOO_FEW
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
    if data.get("constant_finding"):
        sentences.append((data["constant_finding"], False))
    for result in evaluate(data, tau):
        label = result["criterion"].replace("_", " ")
        if result["word"] == "pass":
            passed.append(label)
            continue
        if result["word"] == "n/a":
            undecided.append(label)
            continue
        if result["word"] != "FAIL":  # not informative, or too few rows everywhere
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
            f"{METRIC_NAMES[worst[1]]} is {worst[3]} times its reference group's"
            f"{_interval_clause(data, group, worst[1], tau)}.",
            True,
        ))
    if passed:
        sentences.append((f"{name} passes {join_words(passed)} at tau = {tau_s}: every "
                          f"group's ratio lies within {tau_s} to {inverse_s}.", False))
    if undecided:
        sentences.append((f"{name} cannot be judged on {join_words(undecided)}: no group "
                          "fails, but a ratio is undefined (reference rate 0 or no cases).",
                          False))
    sentences += [(note, False) for note in data.get("notes", ())]
    return sentences


CONSTANT_DECISION = (
    "{name} gives every row the same decision ({decision}): no parity test of its "
    "decisions is informative (every group gets that decision, and its error rates differ "
    "between groups only as the groups' base rates do)."
)
"""The finding of a predictor whose decisions are all the same."""


def _interval_clause(data: dict[str, Any], group: dict[str, Any], metric: str,
                     tau: float) -> str:
    """``" (95% interval 0.51 to 0.93, reaching into the band)"`` or ``""``."""
    interval = group.get("intervals", {}).get(metric)
    if interval is None or data.get("level") is None:
        return ""
    lower, upper, lower_s, upper_s = interval
    where = ("reaching into the band" if lower <= 1.0 / tau and upper >= tau
             else "outside the band")
    return f" ({data['level']} interval {lower_s} to {upper_s}, {where})"


def too_few_note(name: str, data_groups: Sequence[dict[str, Any]], minimum: int) -> str | None:
    """The sentence naming the groups not judged for want of rows (None if there are none)."""
    small = [g for g in data_groups if g["small"]]
    if not small:
        return None
    listed = ", ".join(f"{g['attribute']} = {g['label']} ({g['rows']} rows)" for g in small)
    count = len(small)
    return (f"{name}: {count} group{'s' if count > 1 else ''} not judged, too few rows "
            f"(fewer than {minimum}, or a reference group with fewer): {listed}.")


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
