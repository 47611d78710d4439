"""Griffe extension for the documentation site: Sphinx roles in docstrings as code.

counterfair's numpy-style docstrings name other objects with Sphinx roles
(``:class:`~counterfair.Fit```, ``:class:`GroupAudit```). mkdocstrings renders
Markdown, where such a role would show as literal text; this extension rewrites each
role to an inline code span of the name Sphinx would display (the last component after
``~``, the title of ``title <target>``). Only the text handed to the site changes, not
the source. Used by ``mkdocs.yml`` (``extensions:`` of the Python handler).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|data|mod|exc|obj|const):`([^`]+)`")


def displayed(target: str) -> str:
    """The text Sphinx shows for a role's target."""
    titled = re.fullmatch(r"(.+?)\s*<[^>]+>", target)
    if titled:
        return titled.group(1)
    if target.startswith("~"):
        return target[1:].rsplit(".", 1)[-1]
    return target


def plain_roles(text: str) -> str:
    """``text`` with every Sphinx cross-reference role replaced by an inline code span."""
    return ROLE.sub(lambda match: f"`{displayed(match.group(1))}`", text)


class SphinxRolesAsCode(griffe.Extension):
    """Rewrite Sphinx roles in every docstring to inline code."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain_roles(obj.docstring.value)
