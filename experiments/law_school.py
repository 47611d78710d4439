"""Reproduce the law school study of Kusner et al. (2017): Table 1 and the counterfactual figure.

Four linear regressions of ZFYA are fitted on an 80/20 split stratified on
``first_pf`` and scored by test RMSE:

* **Full** -- race, sex (one-hot), UGPA, LSAT;
* **Unaware** -- UGPA, LSAT;
* **Fair K** -- the latent knowledge K of the level 2 SCM, twice: training K
  conditioned on the outcome with its posterior mean per row (the authors'
  code), and K drawn from ``P(K | UGPA, LSAT, race, sex)`` with ``m`` draws per
  row (Algorithm 1 of the paper);
* **Fair Add** -- the abducted additive noise of UGPA and LSAT in the level 3 SCM.

Beside them, not in the paper, the non-causal baseline of Rosenblatt and Witter
(2023): **Order-preserving (Full)** -- Full's predictions ranked within each
race x sex group and mapped to the pooled distribution
(:class:`~counterfair.OrderPreservingPredictor`). fairlearn's demographic-parity
threshold rule does not apply to a regression outcome and is not run here.

Then, with the fitted level 2 SCM as the true world, every test row's
counterfactual UGPA and LSAT under a swap of race or sex are fed to each
predictor and the densities of predicted ZFYA are compared across worlds.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from counterfair.counterfactual.frames import counterfactual_frame
from counterfair.counterfactual.prediction import frame_predictions
from counterfair.datasets.law_school import law_school_split, law_school_subsample, load_law_school
from counterfair.datasets.law_school_models import law_school_level2, law_school_level3
from counterfair.errors import ConvergenceWarning, ScaleWarning
from counterfair.inference.latent_problem import supports_exact
from counterfair.inference.starts import default_warmup
from counterfair.learn import inputs
from counterfair.learn.baselines import full_predictor, unaware_predictor
from counterfair.learn.fair import FairLearner
from counterfair.learn.noncausal import OrderPreservingPredictor

PAPER_RMSE = {"Full": 0.873, "Unaware": 0.894, "Fair K": 0.929, "Fair Add": 0.918}
"""Test RMSE reported in Kusner et al. (2017), Table 1."""

HEADLINE_FAIR_K = "Fair K (Algorithm 1)"
"""The Fair K variant compared with the paper's number in the headline table."""

SWAPS: tuple[tuple[str, str, str], ...] = (
    ("race", "Black", "White"),
    ("race", "Asian", "White"),
    ("race", "Mexican", "White"),
    ("sex", "Female", "Male"),
)
"""Counterfactual swaps of the paper's figure: rows at either level get the other one."""

COLUMNS_LEVEL2 = ["race", "sex", "UGPA", "LSAT", "ZFYA"]

logger = logging.getLogger(f"counterfair.experiments.{Path(__file__).stem}")

ORDER_PRESERVING = "Order-preserving (Full)"
"""The non-causal baseline: Full ranked within race x sex, mapped to the pooled distribution."""


@dataclass
class LawSchoolConfig:
    """Settings of one run of the experiment.

    Attributes
    ----------
    data_dir : str or None
        Folder holding ``law_data.csv`` (else ``COUNTERFAIR_DATA`` or the cache).
    out : pathlib.Path
        Folder for the results.
    quick : bool
        Smoke-test mode: a subset of rows and short chains.
    seed : int
        Seed of the split, the fits and the draws.
    chains, warmup, draws : int
        MCMC settings of the SCM fits (chains run in parallel). ``warmup=None`` (the
        default) leaves it to each fit: 50 iterations where it starts from its Laplace
        approximation (both fits of the full study), else 500 (:meth:`counterfair.SCM.fit`).
    n_samples : int
        ``m``, draws of K (or noise) per training row for FairLearning.
    cf_samples : int
        Joint samples per test row for the counterfactual figure.
    train_rows, test_rows : int or None
        Subset sizes (None: all rows).
    latents : {"auto", "integrated", "joint"}
        How the level 2 fit treats K (:meth:`counterfair.SCM.fit`). The default
        ``"auto"`` integrates it out of the likelihood: NUTS samples the structural
        parameters only, each row's K is drawn exactly per draw, and the quadrature's
        nodes are checked on the training rows
        (:mod:`counterfair.inference.quadrature_nodes`). ``"joint"`` samples every
        row's K with the parameters. Both ways, one run each at the default draws:
        ``benchmarks/law_school_study.py`` (figures in ``docs/studies/law-school.md``).
    audit, audit_rows :
        Whether to write the audit report, and on how many test rows.
    """

    data_dir: str | None = None
    out: Path = field(default_factory=lambda: Path("results/law_school"))
    quick: bool = False
    seed: int = 0
    chains: int = 2
    warmup: int | None = None
    draws: int = 700
    n_samples: int = 50
    cf_samples: int = 20
    train_rows: int | None = None
    test_rows: int | None = None
    audit: bool = True
    audit_rows: int = 1000
    latents: str = "auto"

    def __post_init__(self) -> None:
        if self.latents not in ("auto", "integrated", "joint"):
            raise ValueError(
                f"latents must be 'auto', 'integrated' or 'joint', got {self.latents!r}"
            )

    @classmethod
    def quick_mode(cls, **overrides: Any) -> LawSchoolConfig:
        """Settings for a smoke test (minutes, not a reproduction)."""
        settings: dict[str, Any] = {
            "quick": True,
            "chains": 2,
            "warmup": 200,
            "draws": 150,
            "n_samples": 10,
            "cf_samples": 5,
            "train_rows": 500,
            "test_rows": 200,
            "audit_rows": 100,
        }
        settings.update(overrides)
        return cls(**settings)


def _log(message: str) -> None:
    logger.info("law-school: %s", message)


def _rmse(y: np.ndarray, y_hat: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.asarray(y) - np.asarray(y_hat)) ** 2)))


def _timed(label: str, step: Callable[[], Any], timings: dict[str, float]) -> Any:
    logger.debug("law-school: %s ...", label)
    start = time.perf_counter()
    result = step()
    timings[label] = time.perf_counter() - start
    # stages of a second or more on the console; the quick ones at DEBUG
    level = logging.INFO if timings[label] >= 1.0 else logging.DEBUG
    logger.log(level, "law-school: %s: %.1f s", label, timings[label])
    return result


def _fit_with_warnings(
    step: Callable[[], Any], log: list[str], scale_log: list[str] | None = None
) -> Any:
    """Run ``step``, recording convergence warnings in ``log`` (and scale warnings in
    ``scale_log`` when given: the level 3 SCM keeps LSAT on its raw scale, with priors
    on that scale, so none is expected); other warnings are re-emitted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        if scale_log is not None:
            warnings.simplefilter("always", ScaleWarning)
        result = step()
    for warning in caught:
        if issubclass(warning.category, ConvergenceWarning):
            log.append(str(warning.message))
            logger.warning("law-school: %s", warning.message)
        elif scale_log is not None and issubclass(warning.category, ScaleWarning):
            scale_log.append(str(warning.message))
            logger.warning("law-school: %s", warning.message)
        else:
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    return result


def _predict_step(predictor: Any, rows: pd.DataFrame, log: list[str]) -> Callable[[], np.ndarray]:
    def step() -> np.ndarray:
        return np.asarray(_fit_with_warnings(lambda: predictor.predict(rows), log))

    return step


@dataclass
class _Records:
    """What the stages record as they run: wall times, convergence and scale warnings."""

    timings: dict[str, float] = field(default_factory=dict)
    convergence: list[str] = field(default_factory=list)
    scale_warnings: list[str] = field(default_factory=list)


def run(config: LawSchoolConfig) -> dict[str, Any]:
    """Run the experiment and write its results; return them as a dict."""
    records = _Records()
    start = time.perf_counter()
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)

    train, test = _load_split(config)
    scm2 = law_school_level2()
    scm3 = law_school_level3()
    predictors = _train_baselines(scm2, train, records)
    fit2 = _fit_level2_and_fair_k(scm2, train, predictors, config, records)
    fit3 = _fit_level3_and_fair_add(scm3, train, predictors, config, records)
    predictions, rmse = _score(predictors, test, records)
    fairness, densities = _counterfactuals(fit2, test, predictors, config, records)
    if config.audit:
        _audit_report(out, fit2, train, test, predictors, predictions, config, records)
    table = rmse_table(rmse)
    baselines = baseline_table(rmse, fairness, group_gaps(test, predictions))
    results = _results(
        config, train, test, rmse, scm2, fit2, fit3, fairness, baselines, records
    )
    _draw_and_write(out, densities, table, fairness, results, baselines, start, records)
    return results


def _with_every_group(subset: pd.DataFrame, whole: pd.DataFrame, *, seed: int) -> pd.DataFrame:
    """``subset`` plus one random row of ``whole`` for each race x sex group it lacks.

    A small subsample can miss a rare group (Puerto Rican men are 0.2% of the rows), and
    the group-wise baseline (order-preserving) cannot map the scores of a group it never
    saw; every group of the data gets at least one training row.
    """
    groups = ["race", "sex"]
    have = set(map(tuple, subset[groups].astype(str).to_numpy()))
    keys = whole[groups].astype(str).apply(tuple, axis=1)
    missing = [key for key in dict.fromkeys(keys) if key not in have]
    if not missing:
        return subset
    rng = np.random.default_rng(seed)
    extra = [int(rng.choice(np.flatnonzero((keys == key).to_numpy()))) for key in missing]
    _log(f"added one training row for each of {len(missing)} race x sex group(s) the "
         f"subsample missed: {[' & '.join(key) for key in missing]}")
    return pd.concat([subset, whole.iloc[extra]], ignore_index=True)


def _load_split(config: LawSchoolConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Load the data, split it 80/20 and take the configured subsets of either part."""
    data = load_law_school(config.data_dir)
    train, test = law_school_split(data, seed=config.seed)
    if config.train_rows is not None:
        train = _with_every_group(
            law_school_subsample(train, config.train_rows, seed=config.seed), train,
            seed=config.seed,
        )
    if config.test_rows is not None:
        test = law_school_subsample(test, config.test_rows, seed=config.seed)
    _log(f"{len(train)} training rows, {len(test)} test rows")
    return train, test


def _fit_args(config: LawSchoolConfig) -> dict[str, Any]:
    """The MCMC settings of both SCM fits."""
    return {
        "chains": config.chains,
        "warmup": config.warmup,
        "draws": config.draws,
        "seed": config.seed,
    }


def _train_baselines(scm2: Any, train: pd.DataFrame, records: _Records) -> dict[str, Any]:
    """Train Full, Unaware and the order-preserving baseline (on Full's predictions)."""
    timings = records.timings
    predictors: dict[str, Any] = {}
    predictors["Full"] = _timed("Full", lambda: full_predictor(scm2, "ZFYA").fit(train), timings)
    predictors["Unaware"] = _timed(
        "Unaware", lambda: unaware_predictor(scm2, "ZFYA").fit(train), timings
    )
    predictors[ORDER_PRESERVING] = _timed(
        ORDER_PRESERVING,
        lambda: OrderPreservingPredictor(
            predictors["Full"], attribute=["race", "sex"], prefit=True
        ).fit(train),
        timings,
    )
    return predictors


def _fit_level2_and_fair_k(
    scm2: Any,
    train: pd.DataFrame,
    predictors: dict[str, Any],
    config: LawSchoolConfig,
    records: _Records,
) -> Any:
    """Fit the level 2 SCM and train both Fair K predictors (added to ``predictors``).

    Returns the level 2 fit.
    """
    fit2 = _timed(
        "level 2 SCM fit (MCMC)",
        lambda: _fit_with_warnings(
            lambda: scm2.fit(
                train[COLUMNS_LEVEL2], **_fit_args(config), latents=config.latents
            ),
            records.convergence,
        ),
        records.timings,
    )
    predictors["Fair K (authors' code)"] = _timed(
        "Fair K, training K conditioned on ZFYA (posterior mean)",
        lambda: FairLearner(
            fit2,
            target="ZFYA",
            features=inputs.Latent(training="mean", condition_on_target=True),
            n_samples=config.n_samples,
            seed=config.seed,
        ).fit(train[COLUMNS_LEVEL2]),
        records.timings,
    )
    predictors[HEADLINE_FAIR_K] = _timed(
        "Fair K, Algorithm 1 (K ~ P(K | UGPA, LSAT, race, sex))",
        lambda: _fit_with_warnings(
            lambda: FairLearner(
                fit2,
                target="ZFYA",
                features=inputs.Latent(condition_on_target=False),
                n_samples=config.n_samples,
                seed=config.seed,
            ).fit(train[COLUMNS_LEVEL2]),
            records.convergence,
        ),
        records.timings,
    )
    return fit2


def _fit_level3_and_fair_add(
    scm3: Any,
    train: pd.DataFrame,
    predictors: dict[str, Any],
    config: LawSchoolConfig,
    records: _Records,
) -> Any:
    """Fit the level 3 SCM and train Fair Add (added to ``predictors``); return the fit."""
    fit3 = _timed(
        "level 3 SCM fit (MCMC)",
        lambda: _fit_with_warnings(
            lambda: scm3.fit(train[["race", "sex", "UGPA", "LSAT"]], **_fit_args(config)),
            records.convergence,
            records.scale_warnings,
        ),
        records.timings,
    )
    predictors["Fair Add"] = _timed(
        "Fair Add",
        lambda: FairLearner(
            fit3,
            target="ZFYA",
            features=inputs.AdditiveNoise(),
            n_samples=config.n_samples,
            seed=config.seed,
        ).fit(train[COLUMNS_LEVEL2]),
        records.timings,
    )
    return fit3


def _score(
    predictors: dict[str, Any], test: pd.DataFrame, records: _Records
) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Each predictor's ZFYA predictions on the test rows, and its test RMSE."""
    test_inputs = test[["race", "sex", "UGPA", "LSAT"]]
    rmse: dict[str, float] = {}
    predictions: dict[str, np.ndarray] = {}
    for name, predictor in predictors.items():
        predictions[name] = _timed(
            f"predict {name}",
            _predict_step(predictor, test_inputs, records.convergence),
            records.timings,
        )
        rmse[name] = _rmse(test["ZFYA"].to_numpy(), predictions[name])
    return predictions, rmse


def _counterfactuals(
    fit2: Any,
    test: pd.DataFrame,
    predictors: dict[str, Any],
    config: LawSchoolConfig,
    records: _Records,
) -> tuple[pd.DataFrame, dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]]:
    """Every predictor's change under the swaps, the level 2 fit as the world
    (:func:`counterfactual_study`)."""
    return _timed(
        "counterfactual predictions",
        lambda: _fit_with_warnings(
            lambda: counterfactual_study(fit2, test[COLUMNS_LEVEL2], predictors, config),
            records.convergence,
        ),
        records.timings,
    )


def _audit_report(
    out: Path,
    fit2: Any,
    train: pd.DataFrame,
    test: pd.DataFrame,
    predictors: dict[str, Any],
    predictions: dict[str, np.ndarray],
    config: LawSchoolConfig,
    records: _Records,
) -> None:
    """Write the fairness audit report (:func:`write_audit`)."""
    _timed(
        "fairness audit report",
        lambda: _fit_with_warnings(
            lambda: write_audit(out, fit2, train, test, predictors, predictions, config),
            records.convergence,
        ),
        records.timings,
    )


def _results(
    config: LawSchoolConfig,
    train: pd.DataFrame,
    test: pd.DataFrame,
    rmse: dict[str, float],
    scm2: Any,
    fit2: Any,
    fit3: Any,
    fairness: pd.DataFrame,
    baselines: pd.DataFrame,
    records: _Records,
) -> dict[str, Any]:
    """The results, JSON-ready; ``total_seconds`` is None until the figure is drawn."""
    return {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()},
        "rows": {"train": len(train), "test": len(test)},
        "rmse": rmse,
        "paper_rmse": PAPER_RMSE,
        "headline_fair_k": HEADLINE_FAIR_K,
        "diagnostics": {
            "level2": fit2.diagnostics.as_dict(),
            "level3": fit3.diagnostics.as_dict(),
        },
        "convergence_warnings": records.convergence,
        "scale_warnings": records.scale_warnings,
        "counterfactual_change": fairness.to_dict(orient="records"),
        "baselines": baselines.to_dict(orient="records"),
        "abduction": {
            "engine_algorithm_1": "exact"
            if supports_exact(scm2, ("UGPA", "LSAT"))
            else "mcmc",  # what engine="auto" picks for FairLearner's abductions
            "counterfactual_test_rows": fairness.attrs.get("abduction"),
        },
        "sampler": {
            name: {
                "backend": fit.backend,
                "seconds": fit.seconds,
                "warm_start": fit.warm_start.kind if fit.warm_start else None,
                "warmup": config.warmup if config.warmup is not None
                else default_warmup(fit.warm_start),
                "warm_start_pilot_rows": fit.warm_start.pilot_rows if fit.warm_start else None,
                "warm_start_seconds": fit.warm_start.seconds if fit.warm_start else None,
                "integrated": list(fit.integrated),
                "quadrature": fit.quadrature.as_dict() if fit.quadrature else None,
            }
            for name, fit in (("level2", fit2), ("level3", fit3))
        },
        "timings_seconds": records.timings,
        "total_seconds": None,  # set by run, once the figure is drawn
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
    }


def _draw_and_write(
    out: Path,
    densities: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]],
    table: pd.DataFrame,
    fairness: pd.DataFrame,
    results: dict[str, Any],
    baselines: pd.DataFrame,
    start: float,
    records: _Records,
) -> None:
    """Draw the figure, set the total run time, write the outputs and log the headline."""
    _timed(
        "figure",
        lambda: plot_densities(densities, out / "counterfactual_densities.png"),
        records.timings,
    )
    total = time.perf_counter() - start
    results["total_seconds"] = total  # every stage, the figure included
    write_outputs(out, table, fairness, results, baselines)
    _log(f"total run time {total:.0f} s; results in {out}")
    headline = (out / "results.md").read_text().split("\n## ")[0].rstrip()
    logger.info("%s\n(the counterfactual changes and the audit: %s)", headline, out / "results.md")


def group_gaps(test: pd.DataFrame, predictions: dict[str, np.ndarray]) -> pd.DataFrame:
    """Group disparity of each predictor on the test rows, per protected attribute.

    ``gap`` is the largest minus the smallest group mean of predicted ZFYA over the
    levels of the attribute (demographic parity of a regression: 0 when every
    group has the same mean prediction).
    """
    rows = []
    for name, values in predictions.items():
        for attribute in ("race", "sex"):
            means = pd.Series(values, index=test.index).groupby(test[attribute].astype(str)).mean()
            rows.append(
                {"predictor": name, "attribute": attribute, "gap": float(means.max() - means.min())}
            )
    return pd.DataFrame(rows)


def baseline_table(
    rmse: dict[str, float], fairness: pd.DataFrame, gaps: pd.DataFrame
) -> pd.DataFrame:
    """Per predictor: test RMSE, mean |counterfactual change| over the race swaps and the sex
    swap, and the race and sex group gaps of the mean prediction."""
    rows = []
    for name, value in rmse.items():
        change = fairness[fairness["predictor"] == name]
        race = change[~change["swap"].str.startswith("Female")]
        sex = change[change["swap"].str.startswith("Female")]
        gap = gaps[gaps["predictor"] == name].set_index("attribute")["gap"]

        def weighted(part: pd.DataFrame) -> float:
            if part.empty:
                return float("nan")
            return float(np.average(part["mean |change|"], weights=part["rows"]))

        rows.append(
            {
                "predictor": name,
                "test RMSE": value,
                "cf change race": weighted(race),
                "cf change sex": weighted(sex),
                "race gap": float(gap["race"]),
                "sex gap": float(gap["sex"]),
            }
        )
    return pd.DataFrame(rows)


def rmse_table(rmse: dict[str, float]) -> pd.DataFrame:
    """Our RMSE beside the paper's (the headline rows first)."""
    rows = []
    for name, value in rmse.items():
        paper_key = "Fair K" if name.startswith("Fair K") else name
        paper = PAPER_RMSE.get(paper_key)
        headline = name in ("Full", "Unaware", "Fair Add", HEADLINE_FAIR_K)
        rows.append(
            {
                "predictor": name,
                "test RMSE (ours)": value,
                "test RMSE (paper)": paper,
                "difference": None if paper is None else value - paper,
                "headline": headline,
            }
        )
    return pd.DataFrame(rows)


def counterfactual_study(
    fit: Any,
    test: pd.DataFrame,
    predictors: dict[str, Any],
    config: LawSchoolConfig,
    swaps: Sequence[tuple[str, str, str]] = SWAPS,
) -> tuple[pd.DataFrame, dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]]:
    """Prediction changes under each swap, with the level 2 fit as the true world.

    Returns
    -------
    summary : pandas.DataFrame
        Per predictor and swap: rows, mean and 95th percentile of |change|.
        ``summary.attrs["abduction"]`` records the engine, rows and wall
        seconds of the test rows' abduction.
    densities : dict
        (predictor, swap label) -> (factual, counterfactual) predictions.
    """
    start = time.perf_counter()
    abduction = fit.abduct(
        test,
        condition_on=["UGPA", "LSAT"],
        n_samples=config.cf_samples,
        seed=config.seed,
    )
    abduction_record = {
        "engine": abduction.engine,
        "rows": len(test),
        "seconds": time.perf_counter() - start,
    }
    _log(
        f"abduction of {len(test)} test rows for counterfactuals: engine "
        f"{abduction.engine}, {abduction_record['seconds']:.1f} s"
    )
    summary = []
    densities: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    for attribute, first, second in swaps:
        label = f"{first} <-> {second}"
        values = test[attribute].astype(str).to_numpy()
        mask = np.isin(values, [first, second])
        if not mask.any():
            continue
        swapped = np.where(values[mask] == first, second, first)
        frame = counterfactual_frame(
            fit, abduction.take_rows(mask), {attribute: swapped}, seed=config.seed
        )
        for name, predictor in predictors.items():
            result = frame_predictions(fit, frame, predictor)
            change = result["change"].abs().to_numpy()
            summary.append(
                {
                    "predictor": name,
                    "swap": label,
                    "rows": int(mask.sum()),
                    "mean |change|": float(change.mean()),
                    "p95 |change|": float(np.quantile(change, 0.95)),
                }
            )
            densities[(name, label)] = (
                result["factual"].to_numpy(),
                result["counterfactual"].to_numpy(),
            )
    table = pd.DataFrame(summary)
    table.attrs["abduction"] = abduction_record
    return table, densities


def write_audit(
    out: Path,
    fit: Any,
    train: pd.DataFrame,
    test: pd.DataFrame,
    predictors: dict[str, Any],
    predictions: dict[str, np.ndarray],
    config: LawSchoolConfig,
) -> Path:
    """Audit every predictor on the test rows and write ``audit.html``.

    Classification view: pass/fail decisions from each predictor's ZFYA
    prediction, thresholded so that its predicted pass rate on the test rows
    equals the pass rate (``first_pf``) of the training rows, against the actual
    ``first_pf``. Regression view: ZFYA. Counterfactual view: the causal change
    of each prediction under do(race), do(sex) with the level 2 SCM as the world,
    beside the naive flip test, on a subset of ``audit_rows`` test rows.
    """
    from counterfair.audit import AuditSettings, GroupAudit, counterfactual_fairness, write_report
    from counterfair.audit.causal_report import counterfactual_html
    from counterfair.audit.group_audit import Regression
    from counterfair.audit.report import regression_html

    pass_rate = float(train["first_pf"].mean())
    decisions = {
        name: (values >= np.quantile(values, 1.0 - pass_rate)).astype(int)
        for name, values in predictions.items()
    }
    protected = test[["race", "sex"]].astype(str)
    rows = law_school_subsample(test, min(config.audit_rows, len(test)), seed=config.seed)
    abduction = fit.abduct(
        rows[COLUMNS_LEVEL2],
        condition_on=["UGPA", "LSAT"],
        n_samples=config.cf_samples,
        seed=config.seed,
    )
    reports = {
        name: counterfactual_fairness(
            fit, rows[COLUMNS_LEVEL2], predictor, abduction=abduction,
            settings=AuditSettings(seed=config.seed),
        )
        for name, predictor in predictors.items()
    }
    pd.concat(
        [r.overall.assign(predictor=name) for name, r in reports.items()], ignore_index=True
    ).to_csv(out / "audit_counterfactual.csv", index=False)
    return write_report(
        out / "audit.html",
        GroupAudit(
            test["first_pf"].to_numpy(), decisions, protected,
            n_bootstrap=100 if not config.quick else 0, seed=config.seed,
        ),
        title="Law school: fairness audit of Full, Unaware, Fair K, Fair Add and an "
        "order-preserving baseline",
        overwrite=True,
        extra_sections=[
            (
                "Regression outcome: ZFYA",
                regression_html(
                    GroupAudit(test["ZFYA"].to_numpy(), predictions, protected,
                               task=Regression())
                ),
            ),
            (
                "Counterfactual fairness (level 2 SCM as the world)",
                counterfactual_html(reports, out / "counterfactual_densities.png"),
            ),
        ],
    )


def plot_densities(
    densities: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]], path: Path
) -> Path:
    """Grid of predicted-ZFYA densities, factual vs counterfactual (rows: predictors)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from counterfair.audit.plotting import kde_on_grid

    names = list(dict.fromkeys(k[0] for k in densities))
    swaps = list(dict.fromkeys(k[1] for k in densities))
    fig, axes = plt.subplots(
        len(names), len(swaps), figsize=(3.2 * len(swaps), 2.4 * len(names)), squeeze=False
    )
    for i, name in enumerate(names):
        for j, swap in enumerate(swaps):
            ax = axes[i][j]
            factual, counter = densities[(name, swap)]
            low = min(factual.min(), counter.min())
            high = max(factual.max(), counter.max())
            pad = 0.1 * (high - low) + 1e-3
            grid = np.linspace(low - pad, high + pad, 200)
            for values, colour, label in (
                (factual, "tab:blue", "factual"),
                (counter, "tab:red", "counterfactual"),
            ):
                if np.ptp(values) > 0:
                    ax.plot(grid, kde_on_grid(values, grid), color=colour, label=label)
                else:
                    ax.axvline(values[0], color=colour, label=label)
            if i == 0:
                ax.set_title(swap)
            if j == 0:
                ax.set_ylabel(name, fontsize=8)
            ax.tick_params(labelsize=7)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Predicted ZFYA: factual vs counterfactual (level 2 SCM as the world)")
    # fixed margins: tight_layout drew the 24 panels once more only to measure them
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.04, top=0.94, wspace=0.25, hspace=0.3)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_outputs(
    out: Path,
    table: pd.DataFrame,
    fairness: pd.DataFrame,
    results: dict[str, Any],
    baselines: pd.DataFrame | None = None,
) -> None:
    """Write the tables (CSV, markdown) and everything (JSON); the figure is drawn before."""
    table.to_csv(out / "rmse.csv", index=False)
    if baselines is not None:
        baselines.to_csv(out / "baselines.csv", index=False)
    fairness.to_csv(out / "counterfactual_change.csv", index=False)
    diag = results["diagnostics"]["level2"]
    lines = [
        "# Law school experiment (Kusner et al. 2017, Table 1)",
        "",
        f"Rows: {results['rows']['train']} training, {results['rows']['test']} test. "
        f"Run time: {results['total_seconds']:.0f} s. Headline Fair K: {HEADLINE_FAIR_K}.",
        "",
        "| predictor | test RMSE (ours) | test RMSE (paper) |",
        "|---|---|---|",
    ]
    for row in table.itertuples(index=False):
        paper = "" if pd.isna(row[2]) else f"{row[2]:.3f}"
        lines.append(f"| {row[0]} | {row[1]:.3f} | {paper} |")
    lines += [
        "",
        "Level 2 SCM fit: "
        f"max R-hat {diag['max_rhat']:.4f}, min bulk ESS {diag['min_ess_bulk']:.0f}, "
        f"divergences {diag['divergences']}, latent max R-hat {diag['latent_max_rhat']:.4f}.",
        "",
        "## Counterfactual change of the prediction (|counterfactual - factual|)",
        "",
        "| predictor | swap | rows | mean | 95th percentile |",
        "|---|---|---|---|---|",
    ]
    for r in fairness.itertuples(index=False):
        lines.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.4f} | {r[4]:.4f} |")
    if baselines is not None:
        lines += [
            "",
            "## Causal learners beside the non-causal baseline",
            "",
            "Counterfactual change: mean |change| over the race swaps (weighted by rows) and "
            "the sex swap; gap: largest minus smallest group mean of predicted ZFYA.",
            "",
            "| predictor | test RMSE | cf change race | cf change sex | race gap | sex gap |",
            "|---|---|---|---|---|---|",
        ]
        for b in baselines.itertuples(index=False):
            lines.append(
                f"| {b[0]} | {b[1]:.3f} | {b[2]:.4f} | {b[3]:.4f} | {b[4]:.3f} | {b[5]:.3f} |"
            )
    lines += ["", "![counterfactual densities](counterfactual_densities.png)", ""]
    (out / "results.md").write_text("\n".join(lines))
    (out / "results.json").write_text(json.dumps(results, indent=2, default=float))


def build_parser() -> argparse.ArgumentParser:
    """The study's options."""
    p = argparse.ArgumentParser(
        prog="python experiments/law_school.py",
        description="Fit the level 2 and level 3 SCMs, train Full / Unaware / Fair K / "
        "Fair Add, report test RMSE beside the paper's and plot counterfactual densities.",
    )
    p.add_argument("--data-dir", default=None, help="folder holding law_data.csv")
    p.add_argument(
        "--out",
        default=None,
        help="output folder (default: results/law_school for a full run; a fresh temporary "
        "folder for --quick, so that a smoke test never overwrites the tracked results)",
    )
    p.add_argument("--quick", action="store_true", help="smoke test: subset, short chains")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--chains", type=int, default=None)
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--draws", type=int, default=None)
    p.add_argument("--n-samples", type=int, default=None, help="m, draws of K per row")
    p.add_argument("--cf-samples", type=int, default=None, help="samples per test row")
    p.add_argument("--train-rows", type=int, default=None)
    p.add_argument("--test-rows", type=int, default=None)
    p.add_argument(
        "--no-audit", dest="audit", action="store_false", help="skip the audit report"
    )
    p.add_argument(
        "--latents", choices=("auto", "integrated", "joint"), default=None,
        help="integrate K out of the level 2 fit's likelihood (auto, the default) or "
        "sample it with the parameters (joint)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study from command-line options (:func:`build_parser`)."""
    from experiments.arguments import check_data_dir, output_folder

    args = build_parser().parse_args(argv)
    keys = ("chains", "warmup", "draws", "n_samples", "cf_samples", "train_rows",
            "test_rows", "latents")
    overrides = {key: getattr(args, key) for key in keys if getattr(args, key) is not None}
    check_data_dir(args.data_dir)
    common = {
        "data_dir": args.data_dir,
        "out": output_folder(args.out, quick=args.quick, study="law-school"),
        "seed": args.seed,
        "audit": args.audit,
    }
    if args.quick:
        config = LawSchoolConfig.quick_mode(**common, **overrides)
    else:
        config = LawSchoolConfig(**common, **overrides)
    run(config)
    return 0


if __name__ == "__main__":  # python experiments/law_school.py [options]
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from experiments.arguments import run_script

    raise SystemExit(run_script(main))
