"""Write the example audit report on COMPAS and its screenshot (results/report/).

Two scikit-learn logistic regressions of two-year recidivism (with and without race and
sex among the inputs), trained on half of ProPublica's COMPAS rows and audited on the
other half, and COMPAS's own decile score (high risk: decile >= 5), with race x sex as
the intersection. The report (``report.html``) is opened in headless Chromium and
photographed (``report.png``, 1300 x 1400 CSS pixels) and printed (``report.pdf`` is
not kept; its size is printed).

Usage: ``python tools/report_screenshot.py --data-dir ../shared/data --out results/report``
(needs Chromium, chromedriver and selenium, as the browser tests).
"""

from __future__ import annotations

import argparse
import base64
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression

from counterfair.audit import GroupAudit, write_report
from counterfair.datasets import load_compas

RACES = ["Caucasian", "African-American", "Hispanic"]


def build(data_dir: str | None, out: Path) -> Path:
    """Fit the two models and write ``out / "report.html"`` (replacing it)."""
    frame = load_compas(data_dir)
    frame = frame[frame["race"].isin(RACES)].reset_index(drop=True)
    frame["race"] = pd.Categorical(frame["race"], categories=RACES)
    frame["felony"] = (frame["c_charge_degree"] == "F").astype(int)
    numeric = ["age", "priors_count", "juv_fel_count", "juv_misd_count", "felony"]
    inputs = {
        "with race and sex": pd.get_dummies(frame[[*numeric, "race", "sex"]],
                                            drop_first=True, dtype=float),
        "unaware": frame[numeric].astype(float),
    }
    rng = np.random.default_rng(0)
    train = rng.random(len(frame)) < 0.5
    y = frame["two_year_recid"].to_numpy()
    scores = {}
    for name, features in inputs.items():
        model = LogisticRegression(max_iter=2000).fit(features[train], y[train])
        scores[name] = model.predict_proba(features[~train])[:, 1]
    scores["COMPAS decile >= 5"] = (frame.loc[~train, "decile_score"] >= 5).to_numpy(int)
    test = frame[~train].reset_index(drop=True)
    out.mkdir(parents=True, exist_ok=True)
    return write_report(
        out / "report.html",
        GroupAudit(y[~train], scores, test[["race", "sex"]], n_bootstrap=200, seed=0),
        title="COMPAS: audit of two logistic regressions and the COMPAS score", overwrite=True,
    )


def photograph(page: Path, png: Path) -> int:
    """Screenshot of the top of ``page`` into ``png``; returns the size of its PDF print."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1300,1400", "--hide-scrollbars"):
        options.add_argument(argument)
    browser = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        browser.get(page.resolve().as_uri())
        browser.save_screenshot(str(png))
        pdf = browser.execute_cdp_cmd("Page.printToPDF", {"printBackground": True,
                                                          "preferCSSPageSize": True})
        return len(base64.b64decode(pdf["data"]))
    finally:
        browser.quit()


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="folder holding the COMPAS CSV")
    parser.add_argument("--out", default="results/report", help="output folder")
    args = parser.parse_args()
    start = time.perf_counter()
    page = build(args.data_dir, Path(args.out))
    built = time.perf_counter() - start
    size = photograph(page, Path(args.out) / "report.png")
    print(f"wrote {page} ({page.stat().st_size} bytes, {built:.1f} s) and report.png; "
          f"PDF print: {size} bytes; total {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
