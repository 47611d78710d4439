"""The HTML audit report in a real browser: headless Chromium driven by selenium.

Checks what only a browser can: the page's script runs without a console error, loads
nothing but the file itself, rewrites the findings and the verdicts when tau moves (and
agrees with the Python verdicts at every tau tried), filters rows by attribute, sorts on
a header click, keeps injected names as text, and prints to PDF without cutting tables.
Skipped, with a one-line reason, when Chromium, chromedriver or selenium is missing
(CI installs them; see ``.ci/run``).
"""

from __future__ import annotations

import base64
import html
import re
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _seeds import shifted

from counterfair.audit import GroupAudit, write_report
from counterfair.audit._findings import (
    SIZE_DEPENDENT_CRITERIA,
    parity_findings,
    predictor_data,
)
from counterfair.audit.causal_report import CounterfactualReport
from counterfair.audit.group_audit import Classification, Regression
from counterfair.audit.report import render_report

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
SCREENSHOT = REPO / "results" / "report" / "report.png"


def _find(candidates: list[str]) -> str | None:
    for name in candidates:
        found = shutil.which(name) or (name if Path(name).is_file() else None)
        if found:
            return found
    return None


CHROMIUM = _find(["/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"])
CHROMEDRIVER = _find(["/usr/bin/chromedriver", "chromedriver"])


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("no Chromium or chromedriver found (apt-get install chromium "
                    "chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1300,1000", "--hide-scrollbars"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    browser.set_page_load_timeout(60)
    try:
        yield browser
    finally:
        browser.quit()


def _boundary_data() -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """Race B's selection rate is 0.85 times race A's: passes at tau 0.8, fails at 0.9."""
    rng = np.random.default_rng(shifted(31))
    race = np.array(["A"] * 40 + ["B"] * 40)
    sex = np.array(["F", "M"] * 40)
    decisions = np.array([1] * 20 + [0] * 20 + [1] * 17 + [0] * 23)
    y = rng.integers(0, 2, race.size)
    return y, decisions, pd.DataFrame({"race": race, "sex": sex})


def _open(browser: Any, path: Path) -> None:
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get_log("performance")
    browser.get(path.as_uri())
    assert browser.execute_script(
        "return document.documentElement.getAttribute('data-ready')") == "1"


def _severe(browser: Any) -> list[dict[str, Any]]:
    return [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def _requested(browser: Any) -> list[str]:
    """Every URL the page asked for (DevTools network events and resource timing)."""
    import json

    urls = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    urls += browser.execute_script(
        "return performance.getEntriesByType('resource').map(function (e) { return e.name; })")
    return urls


def _static_findings(text: str) -> list[str]:
    """The findings written by Python into the HTML (before the script runs)."""
    block = re.search(r'<ul class="findings" id="findings-list">(.*?)</ul>', text, re.S)
    assert block is not None
    return [html.unescape(item) for item in re.findall(r"<li[^>]*>(.*?)</li>", block.group(1))]


def _dom_findings(browser: Any) -> list[str]:
    return [li.text for li in browser.find_elements("css selector", "#findings-list li")]


def _dom_verdicts(browser: Any, section: str) -> dict[tuple[int, str], str]:
    cells = browser.find_elements("css selector", f"#{section} td[data-g]")
    return {(int(c.get_attribute("data-g")), c.get_attribute("data-c")):
            c.get_attribute("data-v") for c in cells}


def _python_verdicts(report: Any) -> dict[tuple[int, str], str]:
    """The verdicts of the criteria the report judges (not share-of-positives parity,
    which follows group sizes)."""
    out = {}
    for position, (_, row) in enumerate(report.verdicts.iterrows()):
        for criterion, value in row.items():
            if criterion in SIZE_DEPENDENT_CRITERIA:
                continue
            out[(position, str(criterion))] = ("n/a" if value is pd.NA
                                               else "pass" if value else "FAIL")
    return out


def _set_tau(browser: Any, value: str) -> None:
    box = browser.find_element("id", "tau-input")
    box.clear()
    box.send_keys(value)


@pytest.fixture(scope="module")
def boundary_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    y, decisions, protected = _boundary_data()
    path = tmp_path_factory.mktemp("report") / "boundary.html"
    # race x sex groups have 20 rows each: judged here (the default minimum is 30)
    return write_report(
        path,
        GroupAudit(
            y, {"rule": decisions}, protected, task=Classification(min_group_rows=20),
            n_bootstrap=20, seed=shifted(1),
        ),
    )


def test_loads_offline_without_console_errors(driver: Any, boundary_report: Path) -> None:
    _open(driver, boundary_report)
    assert _severe(driver) == []
    requested = _requested(driver)
    assert requested, "the DevTools log recorded no request at all"
    assert all(url.startswith(("file://", "data:")) for url in requested), requested
    # the findings are visible, and the script rewrote them exactly as Python wrote them
    items = driver.find_elements("css selector", "#findings-list li")
    assert items and all(item.is_displayed() for item in items)
    assert _dom_findings(driver) == _static_findings(boundary_report.read_text("utf-8"))
    y, decisions, protected = _boundary_data()
    report = GroupAudit(y, decisions, protected).metrics()
    assert _dom_verdicts(driver, "predictor-0") == _python_verdicts(report)


def test_the_request_check_can_fail(driver: Any, tmp_path: Path) -> None:
    page = tmp_path / "leaky.html"
    page.write_text('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
                    "<script>document.documentElement.setAttribute('data-ready', '1')"
                    "</script></body></html>")
    _open(driver, page)
    assert any(url.startswith("http://127.0.0.1:9/") for url in _requested(driver))


def test_tau_flips_a_verdict_across_its_boundary(driver: Any, boundary_report: Path) -> None:
    y, decisions, protected = _boundary_data()
    at = {tau: GroupAudit(
        y, decisions, protected, task=Classification(tau=tau),
    ).metrics() for tau in (0.8, 0.85, 0.9)}
    assert at[0.8].ratios.loc[("race", "B"), "predicted_prevalence"] == 0.85
    position = list(at[0.8].verdicts.index).index(("race", "B"))
    cell = f"#predictor-0 td[data-g='{position}'][data-c='selection_rate_parity']"
    summary = "#predictor-0 tr[data-criterion='selection_rate_parity'] td.verdict"
    _open(driver, boundary_report)
    assert driver.find_element("css selector", cell).text == "pass"

    _set_tau(driver, "0.9")
    assert driver.find_element("css selector", cell).text == "FAIL"
    assert driver.find_element("css selector", summary).text == "FAIL"
    assert _dom_verdicts(driver, "predictor-0") == _python_verdicts(at[0.9])
    with_intervals = GroupAudit(
        y, decisions, protected, task=Classification(tau=0.9), n_bootstrap=20, seed=shifted(1),
    ).metrics()  # the report's intervals
    entry = predictor_data("rule", with_intervals, "predictor-0", min_group_rows=20)
    assert _dom_findings(driver) == [text for text, _ in parity_findings(entry, 0.9)]
    assert any("(95% interval " in text for text in _dom_findings(driver))
    assert any(text.startswith("rule fails selection rate parity at tau = 0.9: ")
               for text in _dom_findings(driver))
    # the chart's point of race B (selection rate panel) is red now
    point = driver.find_elements("css selector", ".chart-block[data-attribute='race'] "
                                 "circle.pt")[1]
    assert point.get_attribute("class") == "pt fail"

    # the slider, moved with the keyboard, walks back to the boundary itself: 0.85 passes
    slider = driver.find_element("id", "tau-slider")
    slider.send_keys(*(["\ue012"] * 5))  # arrow left: 0.9 -> 0.85 in steps of 0.01
    assert driver.find_element("id", "tau-input").get_attribute("value") == "0.85"
    assert driver.find_element("css selector", cell).text == "pass"
    assert _dom_verdicts(driver, "predictor-0") == _python_verdicts(at[0.85])

    # an impossible tau (0; every keystroke is read) is refused and changes nothing
    _set_tau(driver, "0")
    assert "tau must be" in driver.find_element("id", "tau-message").text
    assert driver.find_element("css selector", cell).text == "pass"
    assert _severe(driver) == []


def test_group_selector_filters_the_tables(driver: Any, boundary_report: Path) -> None:
    from selenium.webdriver.support.ui import Select

    _open(driver, boundary_report)
    rows = "#predictor-0 table.sortable:not(.summary):not(.verdicts) tbody tr"
    everything = [r for r in driver.find_elements("css selector", rows) if r.is_displayed()]
    Select(driver.find_element("id", "group-filter")).select_by_value("race x sex")
    shown = [r for r in driver.find_elements("css selector", rows) if r.is_displayed()]
    assert 0 < len(shown) < len(everything)
    assert {r.get_attribute("data-attribute") for r in shown} == {"race x sex"}
    verdict_rows = [r for r in driver.find_elements("css selector", "table.verdicts tbody tr")
                    if r.is_displayed()]
    assert len(verdict_rows) == 4  # A x F, A x M, B x F, B x M
    charts = [c.get_attribute("data-attribute") for c in
              driver.find_elements("css selector", "#predictor-0 .chart-block")
              if c.is_displayed()]
    assert charts == ["race x sex"]
    Select(driver.find_element("id", "group-filter")).select_by_value("")
    assert len([r for r in driver.find_elements("css selector", rows)
                if r.is_displayed()]) == len(everything)


def test_header_click_sorts(driver: Any, boundary_report: Path) -> None:
    _open(driver, boundary_report)
    table = driver.find_elements("css selector", "#predictor-0 table.sortable")[3]  # by group
    headers = table.find_elements("css selector", "thead th")
    column = [h.text for h in headers].index("predicted_prevalence")

    def values() -> list[float]:
        return [float(r.find_elements("css selector", "th, td")[column].get_attribute("data-v"))
                for r in table.find_elements("css selector", "tbody tr")]

    before = values()
    assert before != sorted(before)
    headers[column].click()
    assert values() == sorted(before)
    assert headers[column].get_attribute("aria-sort") == "ascending"
    headers[column].click()
    assert values() == sorted(before, reverse=True)
    headers[0].click()  # a text column
    labels = [r.find_element("css selector", "th").text
              for r in table.find_elements("css selector", "tbody tr")]
    assert labels == sorted(labels)


def test_injected_names_stay_text(driver: Any, tmp_path: Path) -> None:
    evil = "</script><script>window.pwned = 1</script><b>x"
    y, decisions, protected = _boundary_data()
    protected = protected.assign(race=protected["race"].map({"A": "A", "B": evil}))
    path = write_report(
        tmp_path / "evil.html",
        GroupAudit(y, {f"<i>{evil}": decisions}, protected.rename(columns={"race": "race<hr>"})),
    )
    _open(driver, path)
    assert driver.execute_script("return window.pwned === undefined")
    assert driver.find_elements("css selector", "hr, b, i") == []
    assert _severe(driver) == []
    assert evil in driver.find_element("id", "findings").text


def test_counterfactual_densities_render(driver: Any, tmp_path: Path) -> None:
    rng = np.random.default_rng(shifted(5))
    rows = 60
    changes = pd.DataFrame({
        "attribute": "race", "from_level": "A", "to_level": "B",
        "row": np.repeat(np.arange(rows), 10), "sample": np.tile(np.arange(10), rows),
        "factual": rng.normal(size=rows * 10),
    })
    changes["change"] = rng.normal(0.2, 0.1, rows * 10)
    changes["counterfactual"] = changes["factual"] + changes["change"]
    changes["flip_change"] = 0.0
    overall = pd.DataFrame([{
        "attribute": "race", "from_level": "all", "to_level": "all", "rows": rows,
        "mean_abs_change": float(changes["change"].abs().mean()), "ci_lower": 0.18,
        "ci_upper": 0.22, "max_abs_change": float(changes["change"].abs().max()),
        "share_above_tolerance": 0.9, "wasserstein": 0.2, "flip_mean_abs_change": 0.0,
        "flip_share_above_tolerance": 0.0}])
    per_row = changes.groupby("row").agg(mean_change=("change", "mean"),
                                         flip_change=("flip_change", "first")).reset_index()
    cf = CounterfactualReport(by_group=overall, overall=overall, rows=per_row, changes=changes,
                              tolerance=0.05, interval=0.9)
    y, decisions, protected = _boundary_data()
    path = write_report(
        tmp_path / "cf.html", GroupAudit(y, {"rule": decisions}, protected),
        counterfactual={"rule": cf},
    )
    _open(driver, path)
    assert _severe(driver) == []
    charts = driver.find_elements("css selector", "svg.density-chart")
    assert len(charts) == 1 and charts[0].is_displayed()
    assert len(charts[0].find_elements("css selector", "polyline.series")) == 2
    assert any(text.startswith("Under do(race = another level), the output of rule changes")
               for text in _dom_findings(driver))


def test_decomposition_waterfalls_render_with_their_numbers(driver: Any, tmp_path: Path) -> None:
    """A waterfall per decomposition (the outcome and a predictor of a fixed-parameter
    fit, no Stan): visible, four bars each (DE, -IE, -SE, TV) whose widths follow the
    numbers, the value texts equal Python's, one finding each, the numbers in the table."""
    from test_decomposition import NOTES_TRUTH, given_fit, notes_rows, notes_scm

    import counterfair as cf
    from counterfair.audit._sections import waterfall_steps

    data = notes_rows(300, shifted(71))
    fit = given_fit(notes_scm(), data, NOTES_TRUTH, n_sets=10, jitter=0.02, seed=shifted(4))
    settings = {"attribute": "X", "x0": "0", "x1": "1",
                "settings": cf.audit.DecompositionSettings(n_samples=30, seed=shifted(1))}
    results = {
        "outcome Y": cf.audit.decompose(fit, data, outcome="Y", **settings),
        "M + Z": cf.audit.decompose(
            fit, data, predictor=lambda f: f["M"].to_numpy() + f["Z"].to_numpy(), **settings),
    }
    y, decisions, protected = _boundary_data()
    path = write_report(
        tmp_path / "dec.html", GroupAudit(y, {"rule": decisions}, protected),
        decompositions=results,
    )
    _open(driver, path)
    assert _severe(driver) == []
    charts = driver.find_elements("css selector", "svg.waterfall-chart")
    assert len(charts) == 2 and all(chart.is_displayed() for chart in charts)
    for chart, (name, result) in zip(charts, results.items(), strict=True):
        steps = waterfall_steps(result)
        bars = chart.find_elements("css selector", "rect.bar")
        assert [b.get_attribute("data-step") for b in bars] == [s[0] for s in steps]
        shown = [t.text for t in chart.find_elements("css selector", "text.value")]
        assert shown == [f"{end - start:+.3f}" for _, start, end, _, _ in steps]
        widths = np.array([bar.rect["width"] for bar in bars])
        values = np.abs([end - start for _, start, end, _, _ in steps])
        np.testing.assert_allclose(widths / widths.max(), values / values.max(), atol=0.02)
        assert len(chart.find_elements("css selector", "line.whisker")) == 4
        tv = result.mean("TV")
        assert any(text.startswith(f"The gap in {name} between X = 1 and 0 is {tv:+.4f}")
                   for text in _dom_findings(driver))
    table = driver.find_element("css selector", "#decomposition table").text
    shown_de = re.search(r"outcome Y direct \(DE\) (\S+)", table)
    assert shown_de is not None
    assert float(shown_de.group(1)) == pytest.approx(results["outcome Y"].mean("Ctf-DE"),
                                                     abs=5e-4)


def test_screenshot_and_print(driver: Any, boundary_report: Path, tmp_path: Path) -> None:
    _open(driver, boundary_report)
    shot = tmp_path / "report.png"
    assert driver.save_screenshot(str(shot))
    png = shot.read_bytes()
    width, height = struct.unpack(">II", png[16:24])
    assert png.startswith(b"\x89PNG") and width >= 1000 and height >= 600

    pdf = base64.b64decode(driver.execute_cdp_cmd(
        "Page.printToPDF", {"printBackground": True, "preferCSSPageSize": True})["data"])
    assert pdf.startswith(b"%PDF") and len(pdf) > 20_000
    pages = re.search(rb"/Count (\d+)", pdf)
    assert pages is not None and int(pages.group(1)) >= 2

    # print media at the printable width of A4 landscape (277 mm): no control, no table
    # wider than the page
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": 1047, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    try:
        assert not driver.find_element("css selector", ".controls").is_displayed()
        overflow = driver.execute_script("""
            var page = document.documentElement.clientWidth;
            return Array.prototype.slice.call(document.querySelectorAll('table'))
              .filter(function (t) { return t.getBoundingClientRect().right > page + 1; })
              .map(function (t) { return t.getBoundingClientRect().right; });""")
        assert overflow == []
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


@pytest.mark.parametrize(("tau", "inverse"), [(0.9, "1.111"), (0.333, "3.003"),
                                             (0.00015, "6667"), (1e-05, "1e+05")])
def test_same_text_as_python_at_the_report_tau(driver: Any, tmp_path: Path, tau: float,
                                               inverse: str) -> None:
    """A report opened at another tau: the script's findings are Python's, character for
    character (the page's %g formatting of tau and 1 / tau agrees with Python's)."""
    y, decisions, protected = _boundary_data()
    path = tmp_path / "tau.html"
    path.write_text(render_report(
        GroupAudit(y, {"rule": decisions}, protected, task=Classification(tau=tau)),
    ), encoding="utf-8")
    _open(driver, path)
    assert _severe(driver) == []
    assert _dom_findings(driver) == _static_findings(path.read_text("utf-8"))
    assert driver.find_element("css selector", ".tau-value").text == f"{tau:g}"
    assert driver.find_element("css selector", ".tau-inverse").text == inverse


def test_regression_report_has_no_tau_control(driver: Any, tmp_path: Path) -> None:
    from selenium.webdriver.support.ui import Select

    rng = np.random.default_rng(shifted(6))
    _, _, protected = _boundary_data()
    y = rng.normal(size=len(protected))
    path = write_report(
        tmp_path / "reg.html",
        GroupAudit(y, {"m": y + rng.normal(size=y.size)}, protected, task=Regression()),
    )
    _open(driver, path)
    assert _severe(driver) == []
    assert driver.find_elements("id", "tau-slider") == []
    assert _dom_findings(driver) == _static_findings(path.read_text("utf-8"))
    Select(driver.find_element("id", "group-filter")).select_by_value("sex")
    shown = [c.get_attribute("data-attribute") for c in
             driver.find_elements("css selector", ".chart-block") if c.is_displayed()]
    assert shown == ["sex"]


@pytest.mark.stan
def test_real_counterfactual_audit_in_the_page(driver: Any, tmp_path: Path,
                                               stan_backend: str) -> None:
    """The level 3 law school fit as the world: an unaware predictor of 2 UGPA moves under
    do(race) but not under the flip test; a constant is one spike at 0."""
    from _models import law_level3_fit, law_train

    from counterfair.audit import AuditSettings, counterfactual_fairness
    from counterfair.audit._svg import histogram
    from counterfair.audit.causal_report import counterfactual_html

    fit = law_level3_fit().fit
    rows = law_train().drop(columns=["K", "ZFYA"]).iloc[:60]
    reports = {
        "unaware": counterfactual_fairness(
            fit, rows, lambda f: 2.0 * f["UGPA"].to_numpy(),
            settings=AuditSettings(attributes=["race"], n_samples=20),
        ),
        "constant": counterfactual_fairness(
            fit, rows, lambda f: np.zeros(len(f)),
            settings=AuditSettings(attributes=["race"], n_samples=10, keep_samples=True),
        ),
    }
    constant = reports["constant"].changes
    _, densities = histogram({"causal": constant["change"].to_numpy(dtype=float)})
    assert np.count_nonzero(densities["causal"]) == 1
    fragment = counterfactual_html(reports)
    assert fragment.count('<svg class="density-chart"') == 2

    ugpa = rows["UGPA"].to_numpy()
    path = write_report(
        tmp_path / "cf.html",
        GroupAudit(
            (ugpa > np.median(ugpa)).astype(int), {"unaware": 2.0 * ugpa}, rows[["race", "sex"]],
            task=Classification(threshold=float(2 * np.median(ugpa))),
        ),
        counterfactual=reports,
    )
    _open(driver, path)
    assert _severe(driver) == []
    assert len(driver.find_elements("css selector", "svg.density-chart")) == 2
    overall = reports["unaware"].overall.iloc[0]
    assert overall["mean_abs_change"] > 0 and overall["flip_mean_abs_change"] == 0
    expected = (f"Under do(race = another level), the output of unaware changes by "
                f"{overall['mean_abs_change']:.3g} on average")
    assert any(text.startswith(expected) and "against 0 by the flip test" in text
               for text in _dom_findings(driver))


def _constant_label_data() -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """5,226 arrest-like records: colour x sex cells of 3,567 White men down to 72 Black
    women; the classifier says yes to everyone (every probability above 0.5), its
    probabilities higher for White and for male rows; the actual outcomes differ by group."""
    rng = np.random.default_rng(shifted(49))
    cells = {("White", "Male"): 3567, ("White", "Female"): 900, ("Black", "Male"): 687,
             ("Black", "Female"): 72}
    colour = np.concatenate([[c] * k for (c, _), k in cells.items()])
    sex = np.concatenate([[s] * k for (_, s), k in cells.items()])
    base = 0.6 + 0.12 * (colour == "White") + 0.06 * (sex == "Male")
    probability = np.clip(base + rng.uniform(-0.08, 0.08, colour.size), 0.51, 0.99)
    y = (rng.random(colour.size) < base - 0.1).astype(int)
    return y, probability, pd.DataFrame({"colour": colour, "sex": sex})


def _text_height(browser: Any, element: Any) -> float:
    return float(browser.execute_script(
        "var r = document.createRange(); r.selectNodeContents(arguments[0]);"
        "return r.getBoundingClientRect().height;", element))


def test_a_classifier_whose_labels_are_constant(driver: Any, tmp_path: Path) -> None:
    """Issue 49 item 7: no FAIL from group sizes, 'not informative' for a constant
    decision, 'too few rows' for the 72-row group (minimum 100 here), each group's mean
    probability with its interval, the largest group as the reference, intervals on one
    line even in a narrow window."""
    from counterfair.audit._groups import build_layout
    from counterfair.audit.report import score_means

    y, probability, protected = _constant_label_data()
    path = write_report(
        tmp_path / "constant.html",
        GroupAudit(
            y, {"learner": probability}, protected, task=Classification(min_group_rows=100),
            n_bootstrap=40, seed=shifted(2),
        ),
    )
    _open(driver, path)
    assert _severe(driver) == []
    findings = _dom_findings(driver)
    assert findings == _static_findings(path.read_text("utf-8"))
    assert driver.find_elements("css selector", "#findings-list li.fail") == []
    assert not any("FAIL" in t or " fails " in t for t in findings), findings
    assert findings[0].startswith("learner gives every row the same decision (1, positive")
    assert any("colour x sex = Black x Female (72 rows)" in t and "too few rows" in t
               for t in findings)
    warning = driver.find_element("css selector", "p.warning").text
    assert "every decision is 1" in warning and "not informative" in warning

    verdicts = _dom_verdicts(driver, "predictor-0")
    assert "FAIL" not in verdicts.values()
    assert set(verdicts.values()) == {"not informative", "too few rows"}
    summary = [c.text for c in driver.find_elements("css selector", "#predictor-0 td.verdict")]
    assert summary and set(summary) == {"not informative"}

    # the reference of each attribute is its largest group, and the page says so
    references = driver.find_element("css selector", "#predictor-0 p.references").text
    for attribute, group, rows in (("colour", "White", 4467), ("sex", "Male", 4254),
                                   ("colour x sex", "White x Male", 3567)):
        assert f"{attribute} = {group} (the largest group, {rows} rows)" in references

    # each group's mean probability with its interval, as Python computes it
    glance = driver.find_element("css selector", "#predictor-0 table.glance")
    headers = [h.text for h in glance.find_elements("css selector", "thead th")]
    column = headers.index("mean probability")
    means = score_means(probability, build_layout(protected), 0.95)
    rows = glance.find_elements("css selector", "tbody tr")
    assert len(rows) == len(means) == 8
    for row, (key, expected) in zip(rows, means.iterrows(), strict=True):
        cell = row.find_elements("css selector", "th, td")[column]
        assert cell.text == (f"{expected['mean']:.3g} [{expected['lower']:.3g}, "
                             f"{expected['upper']:.3g}]"), key
        assert float(cell.get_attribute("data-v")) == expected["mean"]
    shown = [r.find_elements("css selector", "th")[1].text for r in rows]
    assert "White x Male (reference)" in shown and "Black x Female (too few rows)" in shown

    # intervals stay on one line, even when the window is narrow
    driver.set_window_size(640, 900)
    try:
        one_line = _text_height(driver, rows[0].find_elements("css selector", "td")[0])
        cells = driver.find_elements("css selector", "#predictor-0 td.ci")
        assert len(cells) > 30
        heights = [_text_height(driver, c) for c in cells]
        assert max(heights) <= 1.3 * one_line, (max(heights), one_line)
    finally:
        driver.set_window_size(1300, 1000)
    shot = tmp_path / "report_constant.png"
    assert driver.save_screenshot(str(shot))
    assert shot.read_bytes().startswith(b"\x89PNG")
