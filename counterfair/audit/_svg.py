"""Inline SVG charts of the audit report (no plotting library, no external resource).

* :func:`ratio_chart` -- parity ratios of one attribute's groups, one panel per rate, on a
  log scale, with the band ``[tau, 1 / tau]`` shaded; the page's script moves the band
  and recolours the points when tau changes (``data-*`` attributes carry the scale).
* :func:`difference_chart` -- differences to the reference group (regression).
* :func:`density_chart` -- histogram densities of counterfactual changes, computed here.

The charts are built here rather than in the report's templates: they are mostly
coordinates computed in Python. Every text in them goes through :func:`~._html.esc`, so
the templates insert them as already-safe HTML.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from ._html import esc

ROW = 18
TOP = 34
BOTTOM = 26
PANEL = 150
GAP = 14


def _label_width(labels: Sequence[str]) -> int:
    longest = max((len(_short(s)) for s in labels), default=4)
    return int(max(70, 6.5 * longest + 12))


LABEL_CHARS = 32


def _short(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "\u2026"


def _group_label(x: float, y: float, label: str) -> str:
    """A row label, shortened to :data:`LABEL_CHARS` (the full text as its tooltip)."""
    return (f'<text class="glabel" x="{x}" y="{y + 4:.1f}" text-anchor="end">'
            f"{esc(_short(label))}<title>{esc(label)}</title></text>")


def _tick(value: float) -> str:
    return f"{value:g}"


def ratio_chart(
    *,
    attribute: str,
    groups: Sequence[str],
    reference: str,
    metrics: Sequence[str],
    titles: Mapping[str, str],
    ratios: NDArray[np.float64],
    tau: float,
    small: Sequence[bool] | None = None,
) -> str:
    """SVG of the ratios ``ratios[g, m]`` of ``groups`` for ``metrics`` with the tau band.

    Groups flagged in ``small`` (not judged: too few rows, or a constant decision) are
    hollow grey points that stay grey whatever tau.
    """
    labels = [f"{g} (ref)" if g == reference else g for g in groups]
    left = _label_width(labels)
    positive = ratios[np.isfinite(ratios) & (ratios > 0)]
    lo = min(0.5, float(positive.min()) / 1.15) if positive.size else 0.5
    hi = max(2.0, float(positive.max()) * 1.15) if positive.size else 2.0
    log_lo, log_hi = math.log(lo), math.log(hi)

    def x_of(value: float, x0: float) -> float:
        value = min(max(value, lo), hi)
        return x0 + PANEL * (math.log(value) - log_lo) / (log_hi - log_lo)

    width = left + len(metrics) * (PANEL + GAP)
    height = TOP + ROW * len(groups) + BOTTOM
    parts = [
        f'<svg class="ratio-chart" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" data-lo="{lo!r}" data-hi="{hi!r}" '
        f'data-panel="{PANEL}">',
        f"<title>{esc(attribute)}: ratios to the reference group {esc(reference)}</title>",
    ]
    for row, label in enumerate(labels):
        y = TOP + ROW * row + ROW / 2
        parts.append(_group_label(left - 6, y, label))
    for column, metric in enumerate(metrics):
        x0 = left + column * (PANEL + GAP)
        band_lo, band_hi = x_of(tau, x0), x_of(1.0 / tau, x0)
        bottom = TOP + ROW * len(groups)
        parts.append(f'<text class="ptitle" x="{x0 + PANEL / 2:.1f}" y="{TOP - 12}" '
                     f'text-anchor="middle">{esc(titles.get(metric, metric))}</text>')
        parts.append(f'<rect class="frame" x="{x0}" y="{TOP}" width="{PANEL}" '
                     f'height="{ROW * len(groups)}"/>')
        parts.append(f'<rect class="band" data-x0="{x0}" x="{band_lo:.2f}" y="{TOP}" '
                     f'width="{band_hi - band_lo:.2f}" height="{ROW * len(groups)}"/>')
        one = x_of(1.0, x0)
        parts.append(f'<line class="one" x1="{one:.2f}" x2="{one:.2f}" y1="{TOP}" '
                     f'y2="{bottom}"/>')
        for tick in (0.25, 0.5, 1.0, 2.0, 4.0):
            if lo <= tick <= hi:
                tx = x_of(tick, x0)
                parts.append(f'<text class="tick" x="{tx:.2f}" y="{bottom + 14}" '
                             f'text-anchor="middle">{_tick(tick)}</text>')
        for row, group in enumerate(groups):
            y = TOP + ROW * row + ROW / 2
            value = float(ratios[row, column])
            tip = f"{attribute} = {group}: {titles.get(metric, metric)} ratio"
            if not math.isfinite(value):
                parts.append(f'<text class="na-text" x="{x0 + PANEL / 2:.1f}" y="{y + 4:.1f}" '
                             f'text-anchor="middle">n/a<title>{esc(tip)} undefined</title>'
                             "</text>")
                continue
            px = x_of(value, x0)
            verdict = "pass" if tau <= value <= 1.0 / tau else "fail"
            flag = ""
            if small is not None and small[row]:
                verdict, flag, tip = "small", ' data-small="1"', tip + " (not judged)"
            parts.append(f'<line class="stem" x1="{one:.2f}" x2="{px:.2f}" y1="{y:.1f}" '
                         f'y2="{y:.1f}"/>')
            parts.append(f'<circle class="pt {verdict}" cx="{px:.2f}" cy="{y:.1f}" r="4" '
                         f'data-ratio="{value!r}"{flag}><title>{esc(tip)} {value:.3g}</title>'
                         "</circle>")
    parts.append("</svg>")
    return "".join(parts)


def difference_chart(
    *,
    attribute: str,
    groups: Sequence[str],
    reference: str,
    metrics: Sequence[str],
    differences: NDArray[np.float64],
) -> str:
    """SVG bars of the differences ``differences[g, m]`` to the reference group."""
    labels = [f"{g} (ref)" if g == reference else g for g in groups]
    left = _label_width(labels)
    width = left + len(metrics) * (PANEL + GAP)
    height = TOP + ROW * len(groups) + BOTTOM
    parts = [
        f'<svg class="difference-chart" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}">',
        f"<title>{esc(attribute)}: differences to the reference group {esc(reference)}</title>",
    ]
    for row, label in enumerate(labels):
        y = TOP + ROW * row + ROW / 2
        parts.append(_group_label(left - 6, y, label))
    for column, metric in enumerate(metrics):
        x0 = left + column * (PANEL + GAP)
        values = differences[:, column]
        finite = values[np.isfinite(values)]
        span = float(np.abs(finite).max()) * 1.15 if finite.size else 0.0
        span = span if span > 0 else 1.0
        zero = x0 + PANEL / 2
        bottom = TOP + ROW * len(groups)
        parts.append(f'<text class="ptitle" x="{zero:.1f}" y="{TOP - 12}" '
                     f'text-anchor="middle">{esc(metric)}</text>')
        parts.append(f'<rect class="frame" x="{x0}" y="{TOP}" width="{PANEL}" '
                     f'height="{ROW * len(groups)}"/>')
        parts.append(f'<line class="one" x1="{zero:.1f}" x2="{zero:.1f}" y1="{TOP}" '
                     f'y2="{bottom}"/>')
        for tick in (-span / 1.15, span / 1.15):
            tx = zero + PANEL / 2 * tick / span
            parts.append(f'<text class="tick" x="{tx:.1f}" y="{bottom + 14}" '
                         f'text-anchor="middle">{tick:.2g}</text>')
        for row, group in enumerate(groups):
            y = TOP + ROW * row + ROW / 2
            value = float(values[row])
            if not math.isfinite(value):
                continue
            end = zero + PANEL / 2 * value / span
            parts.append(f'<rect class="bar" x="{min(zero, end):.2f}" y="{y - 5:.1f}" '
                         f'width="{abs(end - zero):.2f}" height="10"><title>'
                         f"{esc(attribute)} = {esc(group)}: {esc(metric)} {value:+.3g}"
                         "</title></rect>")
    parts.append("</svg>")
    return "".join(parts)


def histogram(
    samples: Mapping[str, NDArray[np.float64]], *, bins: int = 40
) -> tuple[NDArray[np.float64], dict[str, NDArray[np.float64]]]:
    """Common bin edges and the density of every sample on them.

    The edges span all finite values; when they are all equal (a predictor that never
    changes) the range is widened by 0.5 on each side, so the density is one spike.
    """
    values = [v[np.isfinite(v)] for v in samples.values()]
    pooled = np.concatenate(values) if values else np.zeros(1)
    lo, hi = (float(pooled.min()), float(pooled.max())) if pooled.size else (0.0, 0.0)
    if hi - lo <= 1e-12 * max(1.0, abs(lo)):
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, bins + 1)
    densities = {}
    for name, data in samples.items():
        data = data[np.isfinite(data)]
        counts, _ = np.histogram(data, bins=edges)
        densities[name] = (counts / (max(data.size, 1) * np.diff(edges))).astype(np.float64)
    return edges, densities


def density_chart(samples: Mapping[str, NDArray[np.float64]], *, title: str,
                  bins: int = 40) -> str:
    """SVG step lines of the histogram densities of ``samples`` (same bins for all)."""
    edges, densities = histogram(samples, bins=bins)
    width, height, left, right, top, bottom = 360, 190, 44, 10, 26, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max((float(d.max()) for d in densities.values() if d.size), default=1.0) or 1.0

    def x_of(value: float) -> float:
        return left + plot_w * (value - edges[0]) / (edges[-1] - edges[0])

    def y_of(value: float) -> float:
        return top + plot_h * (1 - value / peak)

    parts = [
        f'<svg class="density-chart" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}">',
        f"<title>{esc(title)}</title>",
        f'<text class="ptitle" x="{left + plot_w / 2}" y="14" text-anchor="middle">'
        f"{esc(title)}</text>",
        f'<rect class="frame" x="{left}" y="{top}" width="{plot_w}" height="{plot_h}"/>',
    ]
    if edges[0] < 0 < edges[-1]:
        zero = x_of(0.0)
        parts.append(f'<line class="one" x1="{zero:.2f}" x2="{zero:.2f}" y1="{top}" '
                     f'y2="{top + plot_h}"/>')
    for tick in (edges[0], 0.0, edges[-1]):
        if edges[0] <= tick <= edges[-1]:
            parts.append(f'<text class="tick" x="{x_of(tick):.2f}" y="{top + plot_h + 13}" '
                         f'text-anchor="middle">{tick:.3g}</text>')
    parts.append(f'<text class="tick" x="{left + plot_w / 2}" y="{height - 14}" '
                 'text-anchor="middle">change of the prediction</text>')
    for k, (name, density) in enumerate(densities.items()):
        points = [f"{x_of(edges[0]):.2f},{y_of(0.0):.2f}"]
        for i, value in enumerate(density):
            points.append(f"{x_of(edges[i]):.2f},{y_of(value):.2f}")
            points.append(f"{x_of(edges[i + 1]):.2f},{y_of(value):.2f}")
        points.append(f"{x_of(edges[-1]):.2f},{y_of(0.0):.2f}")
        parts.append(f'<polyline class="series s{k}" points="{" ".join(points)}"/>')
        parts.append(f'<rect class="key s{k}" x="{left + 6}" y="{top + 6 + 14 * k}" '
                     'width="10" height="3"/>')
        parts.append(f'<text class="legend" x="{left + 20}" y="{top + 10 + 14 * k}">'
                     f"{esc(name)}</text>")
    parts.append("</svg>")
    return "".join(parts)


def waterfall_chart(
    *,
    title: str,
    steps: Sequence[tuple[str, float, float, float, float]],
) -> str:
    """SVG waterfall of a gap: one horizontal bar per step, each starting where the
    previous one ended, the last (the total) from 0.

    ``steps`` holds ``(label, start, end, lower, upper)``: the bar runs from ``start``
    to ``end``; the whisker from ``lower`` to ``upper`` is the step's interval, drawn
    on the same axis (already shifted by ``start``). Each bar carries its value as text
    and as a tooltip.
    """
    labels = [label for label, *_ in steps]
    left = _label_width(labels)
    width = left + 2 * PANEL + 70
    height = TOP + ROW * len(steps) + BOTTOM
    values = [v for _, *rest in steps for v in rest if math.isfinite(v)] + [0.0]
    low, high = min(values), max(values)
    pad = 0.08 * (high - low) if high > low else 1.0
    low, high = low - pad, high + pad

    def x_of(value: float) -> float:
        return left + 2 * PANEL * (value - low) / (high - low)

    bottom = TOP + ROW * len(steps)
    parts = [
        f'<svg class="waterfall-chart" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}">',
        f"<title>{esc(title)}</title>",
        f'<rect class="frame" x="{left}" y="{TOP}" width="{2 * PANEL}" '
        f'height="{ROW * len(steps)}"/>',
        f'<line class="one" x1="{x_of(0.0):.1f}" x2="{x_of(0.0):.1f}" y1="{TOP}" '
        f'y2="{bottom}"/>',
        f'<text class="ptitle" x="{left + PANEL}" y="{TOP - 12}" text-anchor="middle">'
        f"{esc(title)}</text>",
    ]
    for tick in sorted({round(low + pad, 12), 0.0, round(high - pad, 12)}):
        parts.append(f'<text class="tick" x="{x_of(tick):.1f}" y="{bottom + 14}" '
                     f'text-anchor="middle">{tick:.3g}</text>')
    for row, (label, start, end, lower, upper) in enumerate(steps):
        y = TOP + ROW * row + ROW / 2
        value = end - start
        parts.append(_group_label(left - 6, y, label))
        kind = "total" if row == len(steps) - 1 else ("up" if value >= 0 else "down")
        parts.append(
            f'<rect class="bar step-{kind}" data-step="{esc(label)}" '
            f'x="{min(x_of(start), x_of(end)):.2f}" y="{y - 5:.1f}" '
            f'width="{abs(x_of(end) - x_of(start)):.2f}" height="10"><title>{esc(label)}: '
            f"{value:+.4f} [{lower - start:+.4f}, {upper - start:+.4f}]</title></rect>"
        )
        if math.isfinite(lower) and math.isfinite(upper):
            parts.append(f'<line class="whisker" x1="{x_of(lower):.2f}" x2="{x_of(upper):.2f}" '
                         f'y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(f'<text class="value" x="{left + 2 * PANEL + 6}" y="{y + 4:.1f}">'
                     f"{value:+.3f}</text>")
    parts.append("</svg>")
    return "".join(parts)
