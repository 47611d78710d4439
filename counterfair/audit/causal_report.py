"""The result of a counterfactual audit (:class:`CounterfactualReport`) and its HTML.

:func:`counterfair.audit.counterfactual_fairness` (:mod:`counterfair.audit.causal`)
computes the report; :func:`counterfactual_html` renders reports for the HTML report
(macro ``counterfactual`` of ``templates/sections.html.j2``).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._html import frame_table, macro, safe
from ._svg import density_chart

__all__ = ["CounterfactualReport", "counterfactual_html"]


@dataclass(frozen=True, kw_only=True)
class CounterfactualReport:
    """Counterfactual and flip-test changes of a predictor's output.

    Attributes
    ----------
    by_group : pandas.DataFrame
        One row per (attribute, factual level, counterfactual level) with the
        columns of :data:`SUMMARY_COLUMNS`: number of rows, posterior mean of
        the mean |change| with a posterior interval, the largest |change|, the
        share of rows whose posterior mean |change| exceeds the tolerance, the
        Wasserstein distance between factual and counterfactual predictions
        (NaN for labels of more than two classes, where a change is 0 or 1: the
        label differs or not), and the flip test's mean |change| and share
        above tolerance.
    overall : pandas.DataFrame
        The same per attribute, pooled over levels.
    rows : pandas.DataFrame
        Per audited row and intervention (columns :data:`ROW_COLUMNS`): the
        posterior mean change of the row, its posterior interval of mass
        ``interval`` (quantiles of the row's samples), the posterior probability
        that |change| exceeds ``tolerance``, and the flip test's change.
    changes : pandas.DataFrame or None
        Per row and sample: attribute, from_level, to_level, row, sample,
        factual, counterfactual, change, flip_change. Only with
        ``keep_samples=True`` (it holds rows x samples x levels values, the
        memory a streamed audit avoids); ``None`` otherwise.
    tolerance : float
        The tolerance on |change|.
    interval : float
        Mass of the posterior intervals.
    unfair_paths : tuple of tuple, optional
        The unfair paths of a path-specific audit; then ``by_group`` and
        ``overall`` have the columns of :data:`PATH_COLUMNS` too and
        ``changes`` a ``path_specific_change`` column.
    response : {"prediction", "probability"}
        What was compared: the predictions (a classifier's labels) or the
        probability of the positive class.
    compared : str
        The same in words (``"the probability of class 'Yes'"``), as the summary
        and the HTML report say it.
    """

    by_group: pd.DataFrame
    overall: pd.DataFrame
    rows: pd.DataFrame
    changes: pd.DataFrame | None
    tolerance: float
    interval: float
    unfair_paths: tuple[tuple[str, ...], ...] | None = None
    response: str = "prediction"
    compared: str = "the predictions"

    def summary(self) -> str:
        """A few lines saying which attributes move the prediction, causally and by flip."""
        lines = [f"audited on {self.compared} (response={self.response!r})"]
        for row in self.overall.itertuples(index=False):
            lines.append(
                f"{row.attribute}: mean |change| {row.mean_abs_change:.4f} "
                f"[{row.ci_lower:.4f}, {row.ci_upper:.4f}] causal vs "
                f"{row.flip_mean_abs_change:.4f} by flip test; "
                f"{row.share_above_tolerance:.1%} of rows above tolerance {self.tolerance}"
                + (
                    f"; path-specific mean |change| {row.path_specific_mean_abs_change:.4f}"
                    if self.unfair_paths is not None
                    else ""
                )
            )
        return "\n".join(lines)


def counterfactual_model(
    reports: dict[str, CounterfactualReport],
    figure: Path | None = None,
    *,
    densities: bool = True,
    bins: int = 40,
) -> dict[str, Any]:
    """What :func:`counterfactual_html` shows: the texts, the table, the density charts
    and the figure (base64)."""
    if bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins}")
    records = []
    for name, report in reports.items():
        for r in report.overall.itertuples(index=False):
            record: dict[str, Any] = {
                "predictor": name,
                "attribute": str(r.attribute),
                "audited on": report.compared,
                "mean |change|": r.mean_abs_change,
                "interval": f"[{r.ci_lower:.4f}, {r.ci_upper:.4f}]",
                "max |change|": r.max_abs_change,
                "share of rows above tolerance": r.share_above_tolerance,
                "Wasserstein": r.wasserstein,
                "flip test mean |change|": r.flip_mean_abs_change,
                "flip test share above tolerance": r.flip_share_above_tolerance,
            }
            if report.unfair_paths is not None:
                record["path-specific mean |change|"] = r.path_specific_mean_abs_change
            records.append(record)
    tolerance = next(iter(reports.values())).tolerance if reports else 0.0
    said = sorted({f"{name}: {report.compared}" for name, report in reports.items()})
    charts = []
    if densities:
        for name, report in reports.items():
            # every row and sample with keep_samples=True, else each row's posterior mean
            changes = report.changes if report.changes is not None else report.rows.rename(
                columns={"mean_change": "change"}
            )
            for attribute, block in changes.groupby("attribute", sort=False):
                samples = {
                    "causal change": block["change"].to_numpy(dtype=np.float64),
                    "flip test change": block["flip_change"].to_numpy(dtype=np.float64),
                }
                if "path_specific_change" in block.columns:
                    samples["path-specific change"] = block["path_specific_change"].to_numpy(
                        dtype=np.float64
                    )
                svg = density_chart(samples, title=f"{name}: {attribute}", bins=bins)
                charts.append({"attribute": str(attribute), "svg": safe(svg)})  # built with esc
    encoded = ""
    if figure is not None and Path(figure).exists():
        encoded = base64.b64encode(Path(figure).read_bytes()).decode()
    return {
        "compared": "; ".join(said) or "the predictions",
        "tolerance": f"{tolerance:g}",
        "table": (frame_table(pd.DataFrame(records).set_index(["predictor", "attribute"]),
                              digits=4) if records else None),
        "densities": charts,
        "figure": encoded,
    }


def counterfactual_html(
    reports: dict[str, CounterfactualReport],
    figure: Path | None = None,
    *,
    densities: bool = True,
    bins: int = 40,
) -> str:
    """HTML fragment: per predictor and attribute, causal vs flip-test change.

    A sortable table (rows carry ``data-attribute`` for the report's group selector) and,
    with ``densities``, inline SVG histogram densities of the change of the output under
    ``do(A = a')`` beside the flip test's change (and the path-specific change of a
    path-specific audit), over every row and sample of a report with samples
    (``keep_samples=True``), else over the rows' posterior mean changes, on ``bins``
    common bins. ``figure``
    embeds an existing PNG file as well.
    """
    return macro("sections.html.j2", "counterfactual",
                 counterfactual_model(reports, figure, densities=densities, bins=bins))
