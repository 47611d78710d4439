"""Where the gaps come from on real data: COMPAS by race and Adult by sex (issue 29).

One command runs both::

    python -m experiments.decomposition --data-dir DATA --out results/decomposition

**COMPAS** (the set-up of faircause's COMPAS vignette, Plečko and Bareinboim 2024):
``X`` = race, Majority (Caucasian, ``x0``) against Minority (every other race, ``x1``);
``Z`` = sex (protected) and standardised age (an observed root); ``W`` = the juvenile
counts (felony + misdemeanour + other, one Poisson node), the prior count (negative
binomial) and the charge degree (``felony``, Bernoulli); two outcomes, two-year
recidivism and the COMPAS high-risk label (``decile_score > 4``, faircause's
``northpointe``), Bernoulli nodes with parents X, Z and W. Edges: ``X, Z -> W``
(``juv_count -> priors_count -> felony`` within W, and ``juv_count -> felony``) and
``X, Z, W -> Y``. No latent: like faircause's standard fairness model, the SCM makes no
claim about what U is; the rows are :func:`counterfair.load_compas` (ProPublica's
filters, 6,172 rows), all of them in the NUTS fit and in the decomposition.

**Adult** (Chiappa's graph, :mod:`experiments.adult_pscf`): ``X`` = sex, Male
(``x0``) against Female (``x1``); the income gap in the SCM, and the probability of
``income > 50K`` of Full, Unaware, Kusner L2 and PSCF (unfair paths ``sex -> income``
and ``sex -> marital``), each decomposed with ``W = {marital}``: Ctf-IE is then the
effect along the paths through marital status, the unfair paths a PSCF learner removes,
and Ctf-DE the rest of the causal effect (``sex -> income`` and the fair paths through
education and work).

Writes ``compas.csv``, ``adult.csv`` (one row per outcome or predictor, term and form),
``results.md`` and ``results.json`` (settings, timings, diagnostics) under ``--out``.
``--quick`` shortens the chains and the rows (the settings are in ``results.json``).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from experiments import adult_pscf

logger = logging.getLogger(f"counterfair.experiments.{Path(__file__).stem}")

COMPAS_LEVELS = ("Majority", "Minority")
SEXES = ("Male", "Female")
MEDIATORS = ("juv_count", "priors_count", "felony")
COMPAS_OUTCOMES = {"two_year_recid": "two-year recidivism",
                   "northpointe": "COMPAS high-risk label (decile > 4)"}

FAIRCAUSE: dict[str, dict[str, tuple[float, float | None]]] = {
    "two-year recidivism": {"TV": (8.5, None), "DE": (1.5, 1.8), "IE": (4.0, 0.8),
                            "SE": (3.0, 1.4)},
    "COMPAS high-risk label (decile > 4)": {"TV": (17.0, None), "DE": (5.5, None),
                                            "IE": (7.5, None), "SE": (3.0, None)},
}
"""faircause's figures as issue 29 quotes them (percentage points, contribution to the
gap, +- their interval half-width where given)."""


def _log(message: str) -> None:
    logger.info(message)
    print(message, flush=True)


def compas_decomposition_scm() -> Any:
    """The COMPAS SCM of the decomposition (see the module docstring)."""
    import counterfair as cf

    g = nx.DiGraph()
    g.add_node("race", spec=cf.Protected(levels=COMPAS_LEVELS))
    g.add_node("sex", spec=cf.Protected(levels=SEXES))
    g.add_node("age_z", spec=cf.Normal())
    g.add_node("juv_count", spec=cf.Poisson())
    g.add_node("priors_count", spec=cf.NegativeBinomial())
    g.add_node("felony", spec=cf.Bernoulli())
    for outcome in COMPAS_OUTCOMES:
        g.add_node(outcome, spec=cf.Bernoulli())
    for child in (*MEDIATORS, *COMPAS_OUTCOMES):
        for parent in ("race", "sex", "age_z"):
            g.add_edge(parent, child)
    g.add_edges_from([("juv_count", "priors_count"), ("juv_count", "felony"),
                      ("priors_count", "felony")])
    for outcome in COMPAS_OUTCOMES:
        for mediator in MEDIATORS:
            g.add_edge(mediator, outcome)
    return cf.SCM(g)


def compas_rows(data_dir: str | None) -> pd.DataFrame:
    """The rows: ProPublica's filters (:func:`counterfair.load_compas`), race binarised as
    faircause does, standardised age, summed juvenile counts, the high-risk label."""
    import counterfair as cf

    raw = cf.datasets.load_compas(data_dir)
    age = raw["age"].astype(float)
    race = np.where(raw["race"] == "Caucasian", COMPAS_LEVELS[0], COMPAS_LEVELS[1])
    return pd.DataFrame({
        "race": pd.Categorical(race, categories=list(COMPAS_LEVELS)),
        "sex": pd.Categorical(raw["sex"], categories=list(SEXES)),
        "age_z": (age - age.mean()) / age.std(),
        "juv_count": (raw["juv_fel_count"] + raw["juv_misd_count"]
                      + raw["juv_other_count"]).astype(int),
        "priors_count": raw["priors_count"].astype(int),
        "felony": (raw["c_charge_degree"] == "F").astype(int),
        "two_year_recid": raw["two_year_recid"].astype(int),
        "northpointe": (raw["decile_score"] > 4).astype(int),
    }).reset_index(drop=True)


def _fit(scm: Any, rows: pd.DataFrame, settings: dict[str, Any]) -> tuple[Any, list[str]]:
    import counterfair as cf

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", cf.errors.ConvergenceWarning)
        fit = scm.fit(rows, progress=False, **settings)
    return fit, [str(w.message) for w in caught]


def _tidy(result: Any, name: str) -> pd.DataFrame:
    table = result.table.copy()
    table.insert(0, "target", name)
    return table


def run_compas(data_dir: str | None, *, chains: int, warmup: int, draws: int,
               n_samples: int, seed: int, timings: dict[str, float]) -> tuple[pd.DataFrame, Any]:
    """Fit the COMPAS SCM and decompose both outcomes."""
    import counterfair as cf

    rows = compas_rows(data_dir)
    t0 = time.perf_counter()
    fit, caught = _fit(compas_decomposition_scm(), rows,
                       {"chains": chains, "warmup": warmup, "draws": draws, "seed": seed})
    timings["compas fit"] = round(time.perf_counter() - t0, 1)
    _log(f"COMPAS: {len(rows)} rows, NUTS {timings['compas fit']} s, warnings: {caught}")
    tables = []
    t0 = time.perf_counter()
    for outcome, label in COMPAS_OUTCOMES.items():
        result = cf.audit.decompose(
            fit, rows, attribute="race", x0=COMPAS_LEVELS[0], x1=COMPAS_LEVELS[1], outcome=outcome,
            mediators=list(MEDIATORS),
            settings=cf.audit.DecompositionSettings(n_samples=n_samples, seed=seed),
        )
        _log(str(result))
        tables.append(_tidy(result, label))
    timings["compas decompositions"] = round(time.perf_counter() - t0, 1)
    return pd.concat(tables, ignore_index=True), fit


def run_adult(config: adult_pscf.AdultPSCFConfig, *, n_samples: int, decompose_rows: int,
              timings: dict[str, float]) -> tuple[pd.DataFrame, Any]:
    """Fit the Adult SCM, train the four predictors and decompose their probabilities."""
    import counterfair as cf

    raw = cf.datasets.load_adult(config.data_dir)
    frame, _ = adult_pscf.prepare(raw)
    rows = adult_pscf._subsample(frame, config)
    scm = adult_pscf.adult_pscf_scm()
    t0 = time.perf_counter()
    fit, caught = adult_pscf._fit_scm(scm, rows.scm_train, config)
    timings["adult fit"] = round(time.perf_counter() - t0, 1)
    _log(f"Adult: NUTS {timings['adult fit']} s, warnings: {caught}")
    predictors = adult_pscf._predictors(scm, fit, config)
    t0 = time.perf_counter()
    for name, predictor in predictors.items():
        predictor.fit(rows.train if name in ("Full", "Unaware") else rows.learner_train)
    timings["adult training"] = round(time.perf_counter() - t0, 1)
    data = rows.test.sample(min(decompose_rows, len(rows.test)), random_state=config.seed)
    data = data.sort_index()
    settings: dict[str, Any] = {
        "attribute": "sex", "x0": SEXES[0], "x1": SEXES[1], "mediators": ["marital"],
        "settings": cf.audit.DecompositionSettings(n_samples=n_samples, seed=config.seed),
    }
    t0 = time.perf_counter()
    tables = []
    outcome = cf.audit.decompose(fit, data, outcome=adult_pscf.OUTCOME, **settings)
    _log(str(outcome))
    tables.append(_tidy(outcome, "income (the SCM)"))
    for name, predictor in predictors.items():
        result = cf.audit.decompose(fit, data, predictor=predictor, response="probability",
                                    **settings)
        _log(f"{name}: {result!r}")
        tables.append(_tidy(result, name))
    timings["adult decompositions"] = round(time.perf_counter() - t0, 1)
    return pd.concat(tables, ignore_index=True), fit


def _points(table: pd.DataFrame, target: str, term: str, sign: float) -> str:
    row = table[(table["target"] == target) & (table["term"] == term)
                & (table["form"] == "x-specific")].iloc[0]
    low, high = sorted((sign * 100 * row["lower"] + 0.0, sign * 100 * row["upper"] + 0.0))
    mean = sign * 100 * row["mean"] + 0.0  # + 0.0: an exact 0 prints as 0.0, not -0.0
    if high - low < 1e-9 and abs(mean - low) < 1e-9 and term == "TV":
        return f"{mean:.1f}"  # the rows' own gap: no posterior spread
    return f"{mean:.1f} [{low:.1f}, {high:.1f}]"


def markdown(compas: pd.DataFrame, adult: pd.DataFrame, info: dict[str, Any]) -> str:
    """The two tables of docs/decomposition.md (percentage points, contributions to TV)."""
    terms = (("TV", "TV", 1.0), ("DE", "Ctf-DE", 1.0), ("IE", "Ctf-IE", -1.0),
             ("SE", "Ctf-SE", -1.0))
    lines = ["## COMPAS by race (Minority - Majority), percentage points", "",
             "| outcome | | TV | direct (DE) | indirect (-IE) | spurious (-SE) |",
             "|---|---|---|---|---|---|"]
    for label in COMPAS_OUTCOMES.values():
        ours = [_points(compas, label, term, sign) for _, term, sign in terms]
        lines.append(f"| {label} | counterfair | " + " | ".join(ours) + " |")
        theirs = []
        for short, *_ in terms:
            mean, half = FAIRCAUSE[label][short]
            theirs.append(f"{mean:.1f}" + (f" ± {half:.1f}" if half is not None else ""))
        lines.append("| | faircause (as issue 29 quotes it) | " + " | ".join(theirs) + " |")
    lines += ["", "## Adult by sex (Female - Male), W = {marital}, percentage points", "",
              "| y | TV | direct (DE) | through marital (-IE) | spurious (-SE) |",
              "|---|---|---|---|---|"]
    for target in adult["target"].unique():
        cells = [_points(adult, target, term, sign) for _, term, sign in terms]
        lines.append(f"| {target} | " + " | ".join(cells) + " |")
    lines += ["", "Posterior means and 90% equal-tailed intervals. Settings: "
              + json.dumps(info["settings"]) + "."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", type=Path, default=Path("results/decomposition"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=("compas", "adult"), default=None)
    args = parser.parse_args(argv)
    quick = args.quick
    settings: dict[str, dict[str, Any]] = {
        "compas": {"chains": 2, "warmup": 300 if quick else 500,
                   "draws": 300 if quick else 500, "n_samples": 100 if quick else 200},
        "adult": {"scm_rows": 1000 if quick else 3000, "warmup": 300 if quick else 1000,
                  "draws": 300 if quick else 1000, "learner_rows": 1500 if quick else 3000,
                  "n_samples": 10, "decompose_rows": 500 if quick else 1000,
                  "decompose_samples": 50 if quick else 100},
    }
    timings: dict[str, float] = {}
    start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    compas = adult = None
    if args.only in (None, "compas"):
        c = settings["compas"]
        compas, _ = run_compas(args.data_dir, chains=c["chains"], warmup=c["warmup"],
                               draws=c["draws"], n_samples=c["n_samples"], seed=args.seed,
                               timings=timings)
        compas.to_csv(args.out / "compas.csv", index=False)
    if args.only in (None, "adult"):
        a = settings["adult"]
        config = adult_pscf.AdultPSCFConfig(
            data_dir=args.data_dir, seed=args.seed, scm_rows=a["scm_rows"],
            warmup=a["warmup"], draws=a["draws"], learner_rows=a["learner_rows"],
            n_samples=a["n_samples"],
        )
        adult, _ = run_adult(config, n_samples=a["decompose_samples"],
                             decompose_rows=a["decompose_rows"], timings=timings)
        adult.to_csv(args.out / "adult.csv", index=False)
    timings["total"] = round(time.perf_counter() - start, 1)
    info = {"settings": {"quick": quick, "seed": args.seed, **settings}, "timings": timings,
            "machine": {"platform": platform.platform(), "python": platform.python_version()}}
    (args.out / "results.json").write_text(json.dumps(info, indent=2))
    if compas is not None and adult is not None:
        (args.out / "results.md").write_text(markdown(compas, adult, info))
    return _done(timings)


def rewrite_markdown(out: Path) -> None:
    """``results.md`` again from the CSV and JSON files of a finished run in ``out``."""
    compas = pd.read_csv(out / "compas.csv")
    adult = pd.read_csv(out / "adult.csv")
    info = json.loads((out / "results.json").read_text())
    (out / "results.md").write_text(markdown(compas, adult, info))


def _done(timings: dict[str, float]) -> int:
    _log(json.dumps(timings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
