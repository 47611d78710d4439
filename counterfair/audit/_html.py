"""HTML building blocks of the audit report: escaping, safe JSON embedding, sortable tables.

Every user-given string (predictor, attribute, group and column names) goes through
:func:`esc` (text and attribute values) or :func:`json_script` (data for the page's
script), so a name such as ``</script><script>alert(1)</script>`` stays text.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

import numpy as np
import pandas as pd

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                 "\u2028": "\\u2028", "\u2029": "\\u2029"}


def esc(value: object) -> str:
    """``str(value)`` escaped for HTML text and double-quoted attribute values.

    ``&``, ``<``, ``>`` and ``"`` are replaced; every attribute of the report is
    double-quoted, so a single quote may stay as it is.
    """
    return html.escape(str(value), quote=False).replace('"', "&quot;")


def json_text(data: Any) -> str:
    """JSON for a ``<script type="application/json">`` element.

    ``<``, ``>`` and ``&`` become ``\\u003c``... escapes, so no string can close the
    element (``</script>``) or open a comment; ``JSON.parse`` restores them. Non-finite
    numbers are refused (give ``None``).
    """
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for char, escape in _JSON_ESCAPES.items():
        text = text.replace(char, escape)
    return text


def json_script(data: Any, element_id: str) -> str:
    """The ``<script type="application/json">`` element holding ``data``."""
    return (f'<script type="application/json" id="{esc(element_id)}">'
            f"{json_text(data)}</script>")


def finite(value: Any) -> float | None:
    """``float(value)``, or ``None`` when missing or not finite (JSON has no NaN)."""
    if value is None or value is pd.NA:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def number_text(value: Any, digits: int = 3) -> str:
    """``value`` with ``digits`` significant digits (``%g``), ``n/a`` when missing."""
    number = finite(value)
    if number is None:
        return "n/a"
    if float(number).is_integer() and abs(number) < 1e15:
        return str(int(number))
    return f"{number:.{digits}g}"


def _cell(value: Any, digits: int) -> tuple[str, str]:
    """Display text and sort key of one cell."""
    if isinstance(value, bool | np.bool_):
        return ("true" if value else "false"), ("1" if value else "0")
    if isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool):
        number = finite(value)
        return number_text(value, digits), ("" if number is None else repr(number))
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "n/a", ""
    return str(value), str(value)


def table_html(
    frame: pd.DataFrame,
    *,
    digits: int = 3,
    css: str = "audit",
    cell_classes: dict[str, str] | None = None,
    table_id: str | None = None,
) -> str:
    """Render a DataFrame as a sortable HTML table.

    The index levels become the first columns (row headers); MultiIndex columns are
    joined with a space. Numbers show ``digits`` significant digits and carry their
    exact value in ``data-v`` for sorting; missing values show ``n/a``. Rows whose
    index has an ``attribute`` level carry ``data-attribute`` so that the page's group
    selector can filter them. ``cell_classes`` maps a cell's text to a CSS class
    (e.g. ``{"FAIL": "fail"}``). Every text is escaped.
    """
    plain = isinstance(frame.index, pd.RangeIndex) and frame.index.name is None
    index_names = [] if plain else ["" if n is None else str(n) for n in frame.index.names]
    shown_index = len(index_names)
    headers = list(index_names)
    for column in frame.columns:
        if isinstance(column, tuple):
            column = " ".join(str(c) for c in column if str(c))
        headers.append(str(column))
    keys = [] if plain else [k if isinstance(k, tuple) else (k,) for k in frame.index]
    body = [list(keys[i]) + list(values) if not plain else list(values)
            for i, values in enumerate(frame.itertuples(index=False, name=None))]
    attribute_position = index_names.index("attribute") if "attribute" in index_names else None
    classes = cell_classes or {}
    head = "".join(f'<th scope="col" tabindex="0">{esc(h)}</th>' for h in headers)
    rows = []
    for values in body:
        attribute = ("" if attribute_position is None
                     else f' data-attribute="{esc(values[attribute_position])}"')
        cells = []
        for position, value in enumerate(values):
            text, key = _cell(value, digits)
            tag = "th" if position < shown_index else "td"
            scope = ' scope="row"' if tag == "th" else ""
            css_class = f' class="{esc(classes[text])}"' if text in classes else ""
            if not css_class and tag == "td" and text.startswith("[") and text.endswith("]"):
                css_class = ' class="ci"'  # an interval: kept on one line
            cells.append(f'<{tag}{scope}{css_class} data-v="{esc(key)}">{esc(text)}</{tag}>')
        rows.append(f"<tr{attribute}>{''.join(cells)}</tr>")
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return (f'<div class="table-wrap"><table class="{esc(css)} sortable"{ident}>'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def interval_frame(ci: pd.DataFrame, *, digits: int = 3) -> pd.DataFrame:
    """Bootstrap interval table (columns ``(measure, lower|upper)``) as ``[lo, hi]`` text."""
    measures = list(dict.fromkeys(ci.columns.get_level_values(0)))
    out = {}
    for measure in measures:
        lower = ci[(measure, "lower")].to_numpy(dtype=np.float64)
        upper = ci[(measure, "upper")].to_numpy(dtype=np.float64)
        out[measure] = [
            "n/a" if not (np.isfinite(lo) and np.isfinite(hi))
            else f"[{lo:.{digits}g}, {hi:.{digits}g}]"
            for lo, hi in zip(lower, upper, strict=True)
        ]
    return pd.DataFrame(out, index=ci.index)
