"""Disparity bar charts (matplotlib, no pyplot state) and PNG/base64 encoding."""

from __future__ import annotations

import base64
import io
from collections.abc import Hashable, Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

PASS_COLOUR = "#4c72b0"
FAIL_COLOUR = "#c44e52"
BAND_COLOUR = "#55a868"


def _label(key: object, reference: Mapping[str, Hashable]) -> str:
    if isinstance(key, tuple):
        text = ": ".join(str(k) for k in key)
        if len(key) == 2 and key[0] in reference and reference[key[0]] == key[1]:
            text += " (ref)"
        return text
    return str(key)


def disparity_figure(
    values: pd.DataFrame,
    *,
    measures: Sequence[str] | None = None,
    tau: float | None = 0.8,
    baseline: float = 1.0,
    xlabel: str = "ratio to reference group",
    title: str | None = None,
    reference: Mapping[str, Hashable] | None = None,
    ncols: int = 3,
) -> Figure:
    """Horizontal bar charts of disparities, one panel per measure.

    Parameters
    ----------
    values
        Disparity table (rows ``(attribute, group)``, one column per measure), e.g.
        :attr:`GroupReport.ratios`.
    measures
        Columns to draw (default: all).
    tau
        When given, the band ``[tau, 1 / tau]`` is shaded and bars outside it are drawn
        in the failure colour; ``None`` draws no band (e.g. for differences).
    baseline
        Position of the "no disparity" line (1 for ratios, 0 for differences).
    xlabel
        Axis label.
    title
        Figure title.
    reference
        Reference group per attribute; its rows are labelled "(ref)".
    ncols
        Panels per row.

    Returns
    -------
    matplotlib.figure.Figure
        A figure attached to an Agg canvas (no global pyplot state is touched).
    """
    measures = list(values.columns) if measures is None else list(measures)
    labels = [_label(k, reference or {}) for k in values.index]
    ncols = max(1, min(ncols, len(measures)))
    nrows = max(1, -(-len(measures) // ncols))
    height = max(2.0, 0.28 * len(labels) + 1.2)
    fig = Figure(figsize=(3.6 * ncols, height * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.subplots(nrows, ncols, sharey=True, squeeze=False)
    axes = list(grid.ravel())
    for ax in axes[len(measures):]:
        ax.set_visible(False)
    positions = np.arange(len(labels))
    for ax, measure in zip(axes, measures, strict=False):
        data = values[measure].to_numpy(dtype=np.float64)
        shown = np.where(np.isfinite(data), data, baseline)
        if tau is not None:
            low, high = tau, 1.0 / tau
            ax.axvspan(low, high, color=BAND_COLOUR, alpha=0.15, lw=0,
                       label=f"[{low:g}, {high:.3g}]")
            inside = (data >= low) & (data <= high)
            colours = [PASS_COLOUR if ok else FAIL_COLOUR for ok in inside]
        else:
            colours = [PASS_COLOUR] * len(labels)
        ax.barh(positions, shown - baseline, left=baseline, color=colours, height=0.7)
        for pos in positions[~np.isfinite(data)]:
            ax.text(baseline, pos, " n/a", va="center", fontsize=7, color="0.4")
        ax.axvline(baseline, color="0.2", lw=0.8)
        ax.set_title(measure, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0].set_yticks(positions, labels)
    axes[0].invert_yaxis()
    for row in grid:
        row[0].tick_params(labelleft=True)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def figure_to_base64(fig: Figure, *, dpi: int = 110) -> str:
    """Encode a figure as a base64 PNG string (for ``data:image/png;base64,...``)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return base64.b64encode(buffer.getvalue()).decode("ascii")
