"""The documentation site: links, anchors, navigation, figures and (opt-in) the strict build.

The fast tests read ``docs/*.md``, ``README.md`` and ``mkdocs.yml`` without building
anything: every relative link must name an existing file, every ``#anchor`` a heading
of the page it points to, every page must be in the navigation, and the figures the
pages quote must be those of the committed results. The build itself
(``mkdocs build --strict``, which runs every ``python exec="on"`` block) takes minutes
and is marked ``slow`` and ``docs``: ``python -m pytest -m docs``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.DOTALL | re.MULTILINE)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.MULTILINE)
EXEC_BLOCK = re.compile(r'^```python [^\n]*exec="on"[^\n]*\n(.*?)^```', re.DOTALL | re.MULTILINE)


def pages() -> list[Path]:
    """Every markdown page of the site."""
    return sorted(DOCS.rglob("*.md"))


def prose(text: str) -> str:
    """Markdown without fenced blocks and inline code (links there are not links)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension gives a heading (its default slugify)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").replace("*", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    """Anchors of a page's headings (a repeated heading gets ``_1``, ``_2``... as in toc)."""
    seen: dict[str, int] = {}
    found = set()
    for match in HEADING.finditer(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}_{count}")
    return found


def broken_links(path: Path, site: Path = DOCS) -> list[str]:
    """Relative links of a markdown file whose file or anchor does not exist.

    A page of the site (a file under ``site``) may only link to files of the site:
    mkdocs does not publish the rest of the repository.
    """
    problems = []
    in_site = path.resolve().is_relative_to(site.resolve())
    for match in LINK.finditer(prose(path.read_text(encoding="utf-8"))):
        target = match.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:, data:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            problems.append(f"{path.name}: {target} (no file {linked})")
        elif in_site and not linked.is_relative_to(site.resolve()):
            problems.append(f"{path.name}: {target} (outside {site.name}/, not on the site)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"{path.name}: {target} (no heading with anchor #{anchor})")
    return problems


def test_the_link_checker_finds_a_broken_file_and_a_broken_anchor(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "other.md").write_text("# Other page\n\n## A `code` heading?\n")
    (tmp_path / "outside.md").write_text("# Outside the site\n")
    page = site / "page.md"
    page.write_text(
        "# Page\n\n## Two words\n\n"
        "[fine](other.md#a-code-heading) [fine](#two-words) [web](https://example.org)\n"
        "`[in code](missing.md)`\n\n```\n[in a block](missing.md)\n```\n"
        "[no file](missing.md) [no anchor](other.md#nowhere) [no anchor](#three-words)\n"
        "[outside](../outside.md)\n"
    )
    assert broken_links(page, site=site) == [
        f"page.md: missing.md (no file {site / 'missing.md'})",
        "page.md: other.md#nowhere (no heading with anchor #nowhere)",
        "page.md: #three-words (no heading with anchor #three-words)",
        "page.md: ../outside.md (outside site/, not on the site)",
    ]


@pytest.mark.parametrize("path", [README, *pages()], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_internal_link_and_anchor_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_readme_links_into_the_docs() -> None:
    linked = {
        (README.parent / m.group(1).partition("#")[0]).resolve()
        for m in LINK.finditer(prose(README.read_text(encoding="utf-8")))
    }
    assert {DOCS / "index.md", DOCS / "getting-started.md"} <= linked


def nav_pages(entries: object) -> list[str]:
    """The page files named in mkdocs.yml's nav, in order."""
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        return [page for entry in entries for page in nav_pages(entry)]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in nav_pages(value)]
    return []


def test_every_page_is_in_the_navigation_and_every_entry_exists() -> None:
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = nav_pages(config["nav"])
    assert len(listed) == len(set(listed)), listed
    on_disk = {str(p.relative_to(DOCS)) for p in pages()}
    assert set(listed) == on_disk


def test_the_strict_build_cannot_reach_the_network() -> None:
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["strict"] is True
    assert config["theme"]["font"] is False  # no fonts fetched at build time
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in config["plugins"]]
    assert not {"social", "privacy", "material/social", "material/privacy"} & set(plugins)


@pytest.mark.parametrize("path", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_executed_blocks_are_valid_python(path: Path) -> None:
    for number, block in enumerate(EXEC_BLOCK.findall(path.read_text(encoding="utf-8")), 1):
        compile(block, f"{path.name} executed block {number}", "exec")


# ------------------------------------------------------------------ figures
AUTHORS_FAIR_K = "Fair K (authors' code)"


def table_row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def test_law_school_figures_are_those_of_the_committed_run() -> None:
    results = json.loads((ROOT / "results/law_school/results.json").read_text())
    rmse, paper = results["rmse"], results["paper_rmse"]
    rows = {
        "Full": (rmse["Full"], paper["Full"]),
        "Unaware": (rmse["Unaware"], paper["Unaware"]),
        "Fair K": (rmse["Fair K (Algorithm 1)"], paper["Fair K"]),
        "Fair Add": (rmse["Fair Add"], paper["Fair Add"]),
    }
    study = (DOCS / "studies/law-school.md").read_text(encoding="utf-8")
    for page in (README, DOCS / "index.md"):
        text = page.read_text(encoding="utf-8")
        for name, (ours, theirs) in rows.items():
            assert table_row(name, f"{ours:.3f}", f"{theirs:.3f}") in text, (page.name, name)
    assert table_row(
        "Fair K (Algorithm 1: K ~ P(K \\| UGPA, LSAT, race, sex); headline)",
        f"{rmse['Fair K (Algorithm 1)']:.3f}", f"{paper['Fair K']:.3f}",
    ) in study
    assert table_row(
        "Fair K (authors' code: training K conditioned on ZFYA, posterior mean)",
        f"{rmse[AUTHORS_FAIR_K]:.3f}", f"{paper['Fair K']:.3f}",
    ) in study
    for name in ("Full", "Unaware", "Fair Add"):
        assert table_row(name, *(f"{v:.3f}" for v in rows[name])) in study
    diagnostics = results["diagnostics"]["level2"]
    assert (
        f"max R-hat {diagnostics['max_rhat']:.4f}, min bulk ESS "
        f"{diagnostics['min_ess_bulk']:.0f}, {diagnostics['divergences']} divergences"
    ) in study
    assert f"**{results['total_seconds']:.0f} s for the whole study**" in study


def test_law_school_counterfactual_changes_are_those_of_the_committed_run() -> None:
    change = {
        (row["predictor"], row["swap"]): row["mean |change|"]
        for row in json.loads((ROOT / "results/law_school/results.json").read_text())[
            "counterfactual_change"
        ]
    }
    swaps = ("Black <-> White", "Asian <-> White", "Mexican <-> White", "Female <-> Male")
    study = (DOCS / "studies/law-school.md").read_text(encoding="utf-8")
    for predictor in ("Full", "Unaware", "Fair Add"):
        cells = [f"{change[(predictor, swap)]:.3f}" for swap in swaps]
        assert table_row(predictor, *cells) in study, predictor
    race = [swap for swap in swaps if swap != "Female <-> Male"]
    largest = {p: max(change[(p, swap)] for swap in race) for p in ("Full", "Fair Add")}
    fair_k = max(change[("Fair K (Algorithm 1)", swap)] for swap in race)
    assert (
        f"Fair K's prediction does not\nmove ({fair_k:.3f}), Fair Add's moves by at most "
        f"{largest['Fair Add']:.3f} on average and Full's by up to {largest['Full']:.3f}"
    ) in README.read_text(encoding="utf-8")


def test_compas_tables_are_those_of_the_committed_run() -> None:
    committed = (ROOT / "results/compas/results.md").read_text(encoding="utf-8")
    study = (DOCS / "studies/compas.md").read_text(encoding="utf-8")
    rows = [line for line in committed.splitlines() if line.startswith("| Full")]
    rows += [line for line in committed.splitlines() if line.startswith("| Fair (U, age)")]
    assert len(rows) == 6  # accuracy table and group audit, two rows each for Full and Fair
    for line in rows:
        assert line in study, line


def test_explanations_agreement_is_that_of_the_committed_run() -> None:
    committed = (ROOT / "results/explanations/tables.md").read_text(encoding="utf-8")
    study = (DOCS / "studies/explanations.md").read_text(encoding="utf-8")
    for measure, label in (
        ("statistical_parity_difference", "statistical parity difference"),
        ("counterfactual", "counterfactual (flip)"),
    ):
        cells = next(
            line.split(" | ")[1:3] for line in committed.splitlines()
            if line.startswith(f"| {measure} |")
        )
        assert re.search(
            rf"\| {re.escape(label)} \| \**{cells[0]}\** \| {cells[1]} \|", study
        ), (label, cells)


# ------------------------------------------------------------------ the build
@pytest.mark.slow
@pytest.mark.docs
@pytest.mark.skipif(
    not os.environ.get("COUNTERFAIR_DATA"), reason="COUNTERFAIR_DATA names no data folder"
)
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    pytest.importorskip("markdown_exec")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    assert (tmp_path / "index.html").exists()
    api = (tmp_path / "api/counterfair/index.html").read_text(encoding="utf-8")
    assert "counterfair.FairLearner" in api


def test_sphinx_roles_in_docstrings_become_code_on_the_site() -> None:
    pytest.importorskip("griffe")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from griffe_sphinx_roles import plain_roles
    finally:
        sys.path.remove(str(ROOT / "tools"))
    text = (
        "See :class:`~counterfair.Fit`, :class:`GroupAudit`, :meth:`Fit.abduct`, "
        ":data:`counterfair.audit.REFERENCE_RULE`, :mod:`the module <counterfair.inference.ppc>` "
        "and ``literal``."
    )
    assert plain_roles(text) == (
        "See `Fit`, `GroupAudit`, `Fit.abduct`, `counterfair.audit.REFERENCE_RULE`, "
        "`the module` and ``literal``."
    )


def test_decomposition_tables_are_those_of_the_committed_run() -> None:
    committed = (ROOT / "results/decomposition/results.md").read_text(encoding="utf-8")
    page = (DOCS / "decomposition.md").read_text(encoding="utf-8")
    rows = [line for line in committed.splitlines()
            if line.startswith("| ") and not line.startswith(("| outcome", "| y |", "|---"))]
    assert len(rows) >= 9  # COMPAS: 2 outcomes x (ours, faircause); Adult: income + 4
    for line in rows:
        assert line in page, line


def test_census_sfm_figures_are_those_of_the_committed_run() -> None:
    """The SFM page's and the README's Census figures are benchmarks/sfm_census.py's."""
    committed = json.loads((ROOT / "benchmarks/results/sfm_census_20000.json").read_text())
    page = (DOCS / "sfm-decomposition.md").read_text(encoding="utf-8")
    readme = README.read_text(encoding="utf-8")
    rows = {(t["term"], t["form"]): t for t in committed["table"]}
    for term in ("TV", "Ctf-DE", "Ctf-IE", "Ctf-SE"):
        t = rows[(term, "x-specific")]
        quoted = f"{t['mean']:,.0f} [{t['lower']:,.0f}, {t['upper']:,.0f}]"
        assert quoted in page, (term, quoted)
        assert f"{abs(t['mean']):,.0f}" in readme, (term, t["mean"])
        if t["gbm"] is not None:
            assert f"| {t['gbm']:,.0f} |" in page, (term, t["gbm"])
    assert f"{committed['seconds']:.1f} s for 20,000 rows" in page
    whole = json.loads((ROOT / "benchmarks/results/sfm_census_204309.json").read_text())
    assert f"{whole['seconds']:.1f} s" in page
    for t in whole["table"]:
        if t["form"] == "x-specific":
            flat = " ".join(page.split())
            assert f"{t['term']} {t['mean']:,.0f} [{t['lower']:,.0f}, {t['upper']:,.0f}]" in flat


def test_census_predictor_figures_are_those_of_the_committed_run() -> None:
    """The SFM page's business-necessity figures are benchmarks/sfm_predictor_census.py's."""
    committed = json.loads((ROOT / "benchmarks/results/sfm_predictor_census.json").read_text())
    page = " ".join((DOCS / "sfm-decomposition.md").read_text(encoding="utf-8").split())
    for name in ("unconstrained", "business necessity"):
        entry = committed[name]
        assert f"{entry['rmse_fitted']:,.0f} | {entry['rmse_held_out']:,.0f} |" in page, name
        for term in ("Ctf-IE", "Ctf-SE"):
            t = entry["decomposition"][term]
            assert f"{t['mean']:,.0f} [{t['lower']:,.0f}, {t['upper']:,.0f}]" in page, (name, term)
    cost = f"{100 * (committed['rmse_ratio_held_out'] - 1):.0f} % of held-out RMSE"
    assert cost in page


def test_census_split_figures_are_those_of_the_committed_run() -> None:
    """The SFM page's table of the Census parts is benchmarks/sfm_split_census.py's."""
    committed = json.loads((ROOT / "benchmarks/results/sfm_split_census_20000.json").read_text())
    page = (DOCS / "sfm-decomposition.md").read_text(encoding="utf-8")
    for part in committed["parts"]:
        quoted = (f"| {part['part'].replace('+', ' + ')} | {part['mean']:,.0f} | "
                  f"[{part['lower']:,.0f}, {part['upper']:,.0f}] | {100 * part['share']:.0f} % |")
        assert quoted in page, quoted
    assert f"The split took {committed['split_seconds']:.1f} s" in page
