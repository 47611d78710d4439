"""HTML building blocks of the audit report: the Jinja2 environment, escaping, safe JSON
embedding, sortable tables.

The page and its sections are Jinja2 templates (``counterfair/audit/templates``,
package data) rendered with autoescape on and undefined names refused. Every value a
template prints goes through :func:`esc` (text and attribute values), unless it is
already-safe HTML (:class:`markupsafe.Markup`: the output of a template, an SVG chart
built with :func:`esc`, the page's own CSS and JS, its JSON data from :func:`json_text`,
a caller's trusted fragment), so a name such as ``</script><script>alert(1)</script>``
stays text and nothing is escaped twice.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import jinja2
import numpy as np
import pandas as pd
from markupsafe import Markup

from ._report_assets import TEMPLATES

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


def _finalize(value: Any) -> Any:
    """Escape a printed value with :func:`esc` (already-safe HTML passes as it is).

    The environment's ``finalize``: Jinja2 calls it on every value a template prints,
    then autoescape escapes what is not :class:`~markupsafe.Markup`; the result is, so
    each value is escaped once, by the report's rule (``&``, ``<``, ``>``, ``"``; every
    attribute is double-quoted) rather than markupsafe's, which also writes ``'`` as
    ``&#39;``. The page is thus byte for byte what the report wrote before its templates.
    """
    if hasattr(value, "__html__"):
        return value
    return Markup(esc(value))  # escaped just now


@cache
def environment() -> jinja2.Environment:
    """The report's templates: autoescape on, an undefined name is an error."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("counterfair.audit", TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        keep_trailing_newline=True,
        auto_reload=False,  # package data: the templates do not change while running
    )


def render(template: str, **context: Any) -> str:
    """The text of the template ``template`` (a file of ``templates``) with ``context``."""
    return environment().get_template(template).render(**context)


def macro(template: str, name: str, *args: Any) -> str:
    """The HTML of the macro ``name`` of ``template`` called with ``args``."""
    return str(getattr(environment().get_template(template).module, name)(*args))


def safe(fragment: str) -> Markup:
    """``fragment`` as HTML a template prints verbatim, unescaped. Only for text that is
    safe as it is: an SVG chart built with :func:`esc`, the package's own CSS and JS,
    JSON from :func:`json_text`, or a caller's fragment documented as trusted."""
    return Markup(fragment)


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


@dataclass(frozen=True)
class Cell:
    """One cell of a report table: ``<th scope="row">`` (a row header) or ``<td>``, its
    CSS class, its verdict coordinates (``data-g``, ``data-c``), its sort key
    (``data-v``), its text and an interval shown after it (``<span class="iv">``)."""

    text: str
    key: str
    header: bool = False
    css: str = ""
    group: int | None = None
    criterion: str = ""
    interval: str = ""


@dataclass(frozen=True)
class Row:
    """One body row: its cells and the ``data-criterion``, ``data-attribute`` and CSS
    class it carries (none when empty or None)."""

    cells: Sequence[Cell]
    attribute: str | None = None
    criterion: str = ""
    css: str = ""


@dataclass(frozen=True)
class Table:
    """A sortable table (``tables.html.j2``): CSS classes, headers, rows, optional id."""

    headers: Sequence[str]
    rows: Sequence[Row] = field(default_factory=list)
    css: str = "audit"
    ident: str = ""


def header(text: object) -> Cell:
    """A row-header cell whose sort key is its text."""
    return Cell(text=str(text), key=str(text), header=True)


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


def frame_table(
    frame: pd.DataFrame,
    *,
    digits: int = 3,
    css: str = "audit",
    cell_classes: dict[str, str] | None = None,
    table_id: str | None = None,
) -> Table:
    """A DataFrame as a sortable :class:`Table` (see :func:`table_html`)."""
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
    rows = []
    for values in body:
        cells = []
        for position, value in enumerate(values):
            text, key = _cell(value, digits)
            is_header = position < shown_index
            css_class = classes.get(text, "")
            if not css_class and not is_header and text.startswith("[") and text.endswith("]"):
                css_class = "ci"  # an interval: kept on one line
            cells.append(Cell(text=text, key=key, header=is_header, css=css_class))
        attribute = None if attribute_position is None else str(values[attribute_position])
        rows.append(Row(cells=cells, attribute=attribute))
    return Table(headers=headers, rows=rows, css=css, ident=table_id or "")


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
    (e.g. ``{"FAIL": "fail"}``). Every text is escaped (by the template).
    """
    return macro("tables.html.j2", "table", frame_table(
        frame, digits=digits, css=css, cell_classes=cell_classes, table_id=table_id))


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
