"""The audit report's stylesheet and script, read as package data, and the page's policy.

``templates/report.css`` (screen and print) and ``templates/report.js`` (vanilla
JavaScript) ship with the package and are inlined into the page, which stays one
self-contained file. The script reads the data embedded by :mod:`counterfair.audit.report`
and, when tau changes, recomputes every parity verdict with the rule of
``_findings.evaluate`` (``tau <= ratio <= 1 / tau`` for each rate; undefined ratios give
``n/a``; groups marked small give ``too few rows`` and a constant decision ``not
informative``), the summary cells, the chart bands and the findings; it also filters rows
by attribute and sorts tables. It never writes data as HTML (``textContent`` only) and
loads nothing.

The page's Content-Security-Policy (:func:`content_security_policy`) allows no request
and only this one inline script, named by the SHA-256 hash of its text as inlined.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from importlib import resources

TEMPLATES = "templates"
"""The folder of :mod:`counterfair.audit` that holds the templates, the CSS and the JS."""


@cache
def _read(name: str) -> str:
    return (resources.files("counterfair.audit") / TEMPLATES / name).read_text(encoding="utf-8")


def stylesheet() -> str:
    """The text of the page's ``<style>`` element: a newline, then ``report.css``."""
    return "\n" + _read("report.css")


def script() -> str:
    """The text of the page's inline ``<script>`` element: a newline, then ``report.js``
    (its hash in :func:`content_security_policy` is over exactly this text)."""
    return "\n" + _read("report.js")


def content_security_policy(inline_script: str) -> str:
    """The page's policy: no request of any kind, inline styles, ``data:`` images, and
    only the inline script whose text is ``inline_script``."""
    digest = base64.b64encode(hashlib.sha256(inline_script.encode("utf-8")).digest()).decode()
    return ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
            f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'")
