"""Adult: path-specific counterfactual fairness (Chiappa, 2019) beside Full, Unaware and Kusner.

One command runs it::

    python experiments/adult_pscf.py --data-dir /path/to/data --out results/adult_pscf

**Graph** (Chiappa 2019, Adult experiment): ``A`` = ``sex``; ``C`` = ``age_z``
(standardised age) and ``us`` (native country United States, 1, or not, 0), observed
roots; ``M`` = ``marital`` (married / never married / other); ``L`` = ``edu_z``
(standardised education-num); ``R`` = ``occupation``, ``hours_z`` (standardised hours
per week) and ``workclass``; ``Y`` = ``income`` (``>50K``). Edges: ``A, C -> M``;
``A, C, M -> L``; ``A, C, M, L -> R``; ``A, C, M, L, R -> Y``; the latent ``U_R`` drives
the three ``R`` nodes. The unfair paths are those starting ``sex -> income`` and
``sex -> marital``; ``sex -> edu_z`` and ``sex -> R`` are fair.

**Latents.** Chiappa gives ``M``, ``L`` and ``R`` a latent each. Here only the ``R``
group has one (``U_R``, shared by its three nodes, which identifies its loadings): a
latent with a single Normal child is not identified apart from that child's noise
(only ``w**2 + sigma**2`` is), nor a single categorical child's apart from its own
Gumbel noise, and such fits do not mix. The abducted noise of ``marital`` and
``edu_z`` (monotone coupling) plays the role of Chiappa's ``H_m`` and ``H_l``.

**Predictors** (logistic regression, trained on the full UCI training file and
evaluated on ``adult.test``): *Full* (every column, sex included), *Unaware* (all but
sex), *Kusner L2* (:class:`~counterfair.FairLearner` with ``inputs.Latent()``: ``U_R``
and the non-descendants age and native country; every path from sex unfair) and
*PSCF* (``inputs.PathSpecific``, unfair paths ``(sex, income)`` and
``(sex, marital)``, baseline Male).

**Sizes.** NUTS fits the SCM on a seeded random subsample of the training rows
(``scm_rows``); the fair learners are trained on another seeded subsample
(``learner_rows``) whose latents are abducted; every predictor is evaluated on a seeded
subsample of the test file (``test_rows``), and the counterfactual audit runs on
``audit_rows`` of those.

**Outputs** (under ``out``, written by
:func:`experiments.adult_pscf_output.write_results`): ``results.md``,
``results.csv`` (one row per predictor), ``group_audit.csv``, ``results.json``
(settings, sizes, diagnostics, timings) and ``changes.png``.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, roc_auc_score

logger = logging.getLogger(f"counterfair.experiments.{Path(__file__).stem}")

PROTECTED = "sex"
SEXES = ("Male", "Female")
OUTCOME = "income"
UNFAIR_PATHS: tuple[tuple[str, ...], ...] = (("sex", "income"), ("sex", "marital"))
BASELINE = "Male"
MARITAL = ("Married", "Never-married", "Other")
OCCUPATION = ("Blue-collar", "White-collar", "Clerical-sales", "Service")
WORKCLASS = ("Private", "Self-employed", "Government")
OCCUPATION_GROUPS = {
    "Exec-managerial": "White-collar",
    "Prof-specialty": "White-collar",
    "Tech-support": "White-collar",
    "Adm-clerical": "Clerical-sales",
    "Sales": "Clerical-sales",
    "Craft-repair": "Blue-collar",
    "Machine-op-inspct": "Blue-collar",
    "Transport-moving": "Blue-collar",
    "Handlers-cleaners": "Blue-collar",
    "Farming-fishing": "Blue-collar",
    "Other-service": "Service",
    "Protective-serv": "Service",
    "Priv-house-serv": "Service",
    "Armed-Forces": "Service",
}
WORKCLASS_GROUPS = {
    "Private": "Private",
    "Without-pay": "Private",
    "Self-emp-not-inc": "Self-employed",
    "Self-emp-inc": "Self-employed",
    "Local-gov": "Government",
    "State-gov": "Government",
    "Federal-gov": "Government",
}
MARITAL_GROUPS = {
    "Married-civ-spouse": "Married",
    "Married-AF-spouse": "Married",
    "Never-married": "Never-married",
    "Divorced": "Other",
    "Separated": "Other",
    "Widowed": "Other",
    "Married-spouse-absent": "Other",
}
PREDICTORS = ("Full", "Unaware", "Kusner L2", "PSCF")
# Chiappa (2019), AAAI, Section "Experiments", UCI Adult: see docs/adult-pscf.md.
CHIAPPA_2019: dict[str, float | None] = {
    "Full": None,
    "Unaware": None,
    "Kusner L2": None,
    "PSCF": None,
}
CHIAPPA_NOTE = (
    "Chiappa 2019: no accuracy figure for these predictors was found in the sources "
    "searched (see docs/adult-pscf.md); the column is left empty rather than guessed."
)


@dataclass(frozen=True, kw_only=True)
class AdultPSCFConfig:
    """Settings of the Adult path-specific study.

    Attributes
    ----------
    data_dir : str or None
        Folder holding ``adult.data`` and ``adult.test`` (else ``$COUNTERFAIR_DATA``).
    out : pathlib.Path
        Output folder.
    seed : int
        Seed of every subsample, the fit, the abductions and the audit.
    scm_rows : int
        Training rows the SCM is fitted on by NUTS.
    chains, warmup, draws : int
        NUTS settings.
    latents : {"auto", "integrated", "joint"}
        How the fit treats ``U_R`` (:meth:`counterfair.SCM.fit`). The default ``"auto"``
        integrates it out: its categorical children keep the joint program from anchoring
        it on ``hours_z``, and sampled directly beside the parameters it mixed slowly
        (max R-hat 1.030 and min bulk ESS 128 at 2 x 1,000 draws; integrated: 1.006 and
        997; ``docs/integrated-latents.md``).
    learner_rows : int
        Training rows of the fair learners (their latents are abducted).
    n_samples : int
        Joint samples per row of the fair learners.
    test_rows : int
        Rows of ``adult.test`` every predictor is scored on (0: all).
    audit_rows : int
        Of those, rows of the counterfactual audit.
    cf_samples : int
        Joint samples per audited row.
    quick : bool
        Smoke test (set by :meth:`quick_mode`).
    """

    data_dir: str | None = None
    out: Path = field(default_factory=lambda: Path("results/adult_pscf"))
    seed: int = 0
    scm_rows: int = 3000
    chains: int = 2
    warmup: int = 1000
    draws: int = 1000
    latents: str = "auto"
    learner_rows: int = 3000
    n_samples: int = 10
    test_rows: int = 0
    audit_rows: int = 1000
    cf_samples: int = 20
    quick: bool = False

    def __post_init__(self) -> None:
        for name in ("scm_rows", "chains", "warmup", "draws", "learner_rows", "n_samples",
                     "audit_rows", "cf_samples"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.test_rows < 0:
            raise ValueError(f"test_rows must be 0 (all) or positive, got {self.test_rows}")
        if self.latents not in ("auto", "integrated", "joint"):
            raise ValueError(
                f"latents must be 'auto', 'integrated' or 'joint', got {self.latents!r}"
            )

    @classmethod
    def quick_mode(cls, **overrides: Any) -> AdultPSCFConfig:
        """A smoke test: 300 SCM rows, 2 chains of 150 + 150, 300 test rows, 60 audited."""
        settings: dict[str, Any] = {
            "scm_rows": 300,
            "warmup": 150,
            "draws": 150,
            "learner_rows": 300,
            "n_samples": 5,
            "test_rows": 300,
            "audit_rows": 60,
            "cf_samples": 10,
            "quick": True,
        }
        settings.update(overrides)
        return cls(**settings)


def _log(message: str) -> None:
    logger.info("adult-pscf: %s", message)


def adult_pscf_scm() -> Any:
    """The study's SCM (Chiappa's Adult graph; see the module docstring)."""
    import counterfair as cf

    g = nx.DiGraph()
    g.add_node("sex", spec=cf.Protected(levels=SEXES))
    g.add_node("age_z", spec=cf.Normal())
    g.add_node("us", spec=cf.Bernoulli())
    g.add_node("U_R", spec=cf.Latent())
    g.add_node("marital", spec=cf.Categorical(levels=MARITAL))
    g.add_node("edu_z", spec=cf.Normal())
    g.add_node("occupation", spec=cf.Categorical(levels=OCCUPATION))
    g.add_node("hours_z", spec=cf.Normal())
    g.add_node("workclass", spec=cf.Categorical(levels=WORKCLASS))
    g.add_node(OUTCOME, spec=cf.Bernoulli())
    base = ("sex", "age_z", "us")
    r_group = ("occupation", "hours_z", "workclass")
    for parent in base:
        g.add_edge(parent, "marital")
    for parent in (*base, "marital"):
        g.add_edge(parent, "edu_z")
    for child in r_group:
        for parent in (*base, "marital", "edu_z", "U_R"):
            g.add_edge(parent, child)
    for parent in (*base, "marital", "edu_z", *r_group):
        g.add_edge(parent, OUTCOME)
    return cf.SCM(g)


def prepare(raw: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, float]]:
    """The study's columns from :func:`~counterfair.load_adult` rows, and the scalings.

    Standardisation uses the training rows' means and standard deviations.
    """
    train = raw["split"] == "train"
    scaling: dict[str, float] = {}
    frame = pd.DataFrame(
        {
            "sex": pd.Categorical(raw["sex"], categories=list(SEXES)),
            "us": (raw["native-country"] == "United-States").astype(int),
            "marital": pd.Categorical(
                raw["marital-status"].map(MARITAL_GROUPS), categories=list(MARITAL)
            ),
            "occupation": pd.Categorical(
                raw["occupation"].map(OCCUPATION_GROUPS), categories=list(OCCUPATION)
            ),
            "workclass": pd.Categorical(
                raw["workclass"].map(WORKCLASS_GROUPS), categories=list(WORKCLASS)
            ),
            OUTCOME: raw["income"].astype(int),
            "split": raw["split"],
        }
    )
    for name, column in (("age_z", "age"), ("edu_z", "education-num"),
                         ("hours_z", "hours-per-week")):
        mean = float(raw.loc[train, column].mean())
        sd = float(raw.loc[train, column].std())
        frame[name] = (raw[column] - mean) / sd
        scaling[f"{column} mean"] = mean
        scaling[f"{column} sd"] = sd
    for column in ("sex", "marital", "occupation", "workclass"):
        unknown = frame[column].isna() & raw.notna().all(axis=1)
        if unknown.any():
            source = {"marital": "marital-status"}.get(column, column)
            value = raw.loc[unknown.idxmax(), source]
            raise ValueError(
                f"column {source!r} of the Adult files has the unknown level {value!r}"
            )
    return frame.reset_index(drop=True), scaling


def _fit_scm(scm: Any, rows: pd.DataFrame, config: AdultPSCFConfig) -> tuple[Any, list[str]]:
    import counterfair as cf

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", cf.errors.ConvergenceWarning)
        fit = scm.fit(
            rows, chains=config.chains, warmup=config.warmup, draws=config.draws,
            seed=config.seed, progress=False, latents=config.latents,
        )
    return fit, [str(w.message) for w in caught]


@dataclass(frozen=True)
class _Rows:
    """The study's rows: the training file, its two subsamples, the test file, the
    scored test rows and the audited ones (without the outcome)."""

    train: pd.DataFrame
    scm_train: pd.DataFrame
    learner_train: pd.DataFrame
    test_all: pd.DataFrame
    test: pd.DataFrame
    audit_rows: pd.DataFrame


def _timed(label: str, step: Callable[[], Any], timings: dict[str, float]) -> Any:
    """Run ``step``, recording and logging its wall time under ``label``."""
    t0 = time.perf_counter()
    value = step()
    timings[label] = round(time.perf_counter() - t0, 2)
    _log(f"{label}: {timings[label]:.1f} s")
    return value


def run_study(config: AdultPSCFConfig) -> dict[str, Any]:
    """Run the study and return its result frames (nothing is written).

    Returns
    -------
    dict
        ``"metrics"`` (one row per predictor: accuracy, AUC, total and path-specific
        counterfactual change of the probability under ``do(sex)``, Chiappa's figure),
        ``"groups"`` (group audit by sex), ``"changes"`` (per audited row and sample),
        ``"info"`` (sizes, settings, diagnostics, timings, JSON-ready).
    """
    import counterfair as cf

    start = time.perf_counter()
    timings: dict[str, float] = {}
    raw = cf.datasets.load_adult(config.data_dir)
    frame, scaling = prepare(raw)
    rows = _subsample(frame, config)
    scm = adult_pscf_scm()
    fit, fit_warnings = _timed("scm fit", lambda: _fit_scm(scm, rows.scm_train, config), timings)
    for message in fit_warnings:
        _log(f"warning: {message}")
    predictors = _predictors(scm, fit, config)
    _train(predictors, rows, timings)
    abduction = _timed(
        "abduction of audited rows",
        lambda: fit.abduct(rows.audit_rows, method="draws", n_samples=config.cf_samples,
                           seed=config.seed),
        timings,
    )
    metric_rows, change_frames, group_rows = _evaluate(
        predictors, fit, abduction, rows, config, timings
    )
    info = _info(config, rows, scaling, fit, fit_warnings, timings, start)
    return {
        "metrics": pd.DataFrame(metric_rows),
        "groups": pd.DataFrame(group_rows),
        "changes": pd.concat(change_frames, ignore_index=True),
        "info": info,
    }


def _subsample(frame: pd.DataFrame, config: AdultPSCFConfig) -> _Rows:
    """Split the prepared rows by file and draw the seeded subsamples of the study."""
    train = frame[frame["split"] == "train"].drop(columns="split").reset_index(drop=True)
    test_all = frame[frame["split"] == "test"].drop(columns="split").reset_index(drop=True)
    rng_seed = config.seed
    scm_train = train.sample(min(config.scm_rows, len(train)), random_state=rng_seed)
    learner_train = train.sample(
        min(config.learner_rows, len(train)), random_state=rng_seed + 1
    )
    test = (
        test_all
        if config.test_rows == 0 or config.test_rows >= len(test_all)
        else test_all.sample(config.test_rows, random_state=rng_seed + 2).sort_index()
    )
    audit_rows = test.sample(min(config.audit_rows, len(test)), random_state=rng_seed + 3)
    audit_rows = audit_rows.sort_index().drop(columns=OUTCOME)
    _log(
        f"{len(train)} training rows ({len(scm_train)} for the NUTS fit, "
        f"{len(learner_train)} for the fair learners), {len(test)} of {len(test_all)} test "
        f"rows scored, {len(audit_rows)} audited"
    )
    return _Rows(
        train=train, scm_train=scm_train, learner_train=learner_train, test_all=test_all,
        test=test, audit_rows=audit_rows,
    )


def _predictors(scm: Any, fit: Any, config: AdultPSCFConfig) -> dict[str, Any]:
    """The four (untrained) predictors: Full, Unaware, Kusner L2 and PSCF."""
    import counterfair as cf

    logistic = {"estimator": LogisticRegression(max_iter=2000)}
    return {
        "Full": cf.full_predictor(scm, OUTCOME, **logistic),
        "Unaware": cf.unaware_predictor(scm, OUTCOME, **logistic),
        "Kusner L2": cf.FairLearner(
            fit,
            target=OUTCOME,
            features=cf.inputs.Latent(),
            estimator=LogisticRegression(max_iter=2000),
            n_samples=config.n_samples,
            seed=config.seed,
        ),
        "PSCF": cf.FairLearner(
            fit,
            target=OUTCOME,
            features=cf.inputs.PathSpecific(unfair_paths=UNFAIR_PATHS, baseline=BASELINE),
            estimator=LogisticRegression(max_iter=2000),
            n_samples=config.n_samples,
            seed=config.seed,
        ),
    }


def _train(predictors: dict[str, Any], rows: _Rows, timings: dict[str, float]) -> None:
    """Train Full and Unaware on every training row, the fair learners on their subsample."""
    for name, predictor in predictors.items():
        train = rows.train if name in ("Full", "Unaware") else rows.learner_train
        _timed(f"train {name}", partial(predictor.fit, train), timings)


def _evaluate(
    predictors: dict[str, Any],
    fit: Any,
    abduction: Any,
    rows: _Rows,
    config: AdultPSCFConfig,
    timings: dict[str, float],
) -> tuple[list[dict[str, Any]], list[pd.DataFrame], list[dict[str, Any]]]:
    """Score, audit counterfactually and audit by group each predictor in turn.

    Returns the metric rows, the per-sample change frames and the group-audit rows.
    """
    from counterfair.audit import AuditSettings, counterfactual_fairness

    unlabelled = rows.test.drop(columns=OUTCOME)
    y_test = rows.test[OUTCOME].to_numpy()
    metric_rows = []
    change_frames = []
    group_rows = []
    sexes = rows.test[[PROTECTED]].astype(str)
    for name, predictor in predictors.items():
        proba = np.asarray(
            _timed(f"predict {name}", partial(predictor.predict_proba, unlabelled), timings)
        )[:, 1]
        labels = (proba >= 0.5).astype(int)
        report = _timed(
            f"counterfactual audit {name}",
            partial(
                counterfactual_fairness, fit, rows.audit_rows, predictor, abduction=abduction,
                settings=AuditSettings(
                    seed=config.seed, response="probability", unfair_paths=UNFAIR_PATHS,
                    keep_samples=True,
                ),
            ),
            timings,
        )
        changes = report.changes.copy()
        changes.insert(0, "predictor", name)
        change_frames.append(changes)
        metric_rows.append(_metric_row(name, y_test, proba, labels, report, changes))
        group_rows.append(_group_row(name, y_test, labels, sexes))
    return metric_rows, change_frames, group_rows


def _metric_row(
    name: str,
    y_test: np.ndarray,
    proba: np.ndarray,
    labels: np.ndarray,
    report: Any,
    changes: pd.DataFrame,
) -> dict[str, Any]:
    """Accuracy, AUC and the total and path-specific counterfactual changes of a predictor."""
    overall = report.overall.set_index("attribute").loc[PROTECTED]
    return {
        "predictor": name,
        "accuracy": float(accuracy_score(y_test, labels)),
        "auc": float(roc_auc_score(y_test, proba)),
        "total_change": float(overall["mean_abs_change"]),
        "path_specific_change": float(overall["path_specific_mean_abs_change"]),
        "max_path_specific_change": float(changes["path_specific_change"].abs().max()),
        "chiappa_2019_accuracy": CHIAPPA_2019[name],
    }


def _group_row(
    name: str, y_test: np.ndarray, labels: np.ndarray, sexes: pd.DataFrame
) -> dict[str, Any]:
    """Selection rates by sex and the Female / Male selection-rate, FPR and FNR ratios."""

    from counterfair.audit import GroupAudit

    group = GroupAudit(
        y_test, labels, sexes, intersections=False, reference={PROTECTED: BASELINE},
    ).metrics()
    ratios = group.ratios.loc[(PROTECTED, "Female")]
    return {
        "predictor": name,
        "group": "Female",
        "reference": BASELINE,
        "selection_rate_female": float(
            group.by_group.loc[(PROTECTED, "Female"), "predicted_prevalence"]
        ),
        "selection_rate_male": float(
            group.by_group.loc[(PROTECTED, BASELINE), "predicted_prevalence"]
        ),
        "selection_rate_ratio": float(ratios["predicted_prevalence"]),
        "fpr_ratio": float(ratios["fpr"]),
        "fnr_ratio": float(ratios["fnr"]),
    }


def _info(
    config: AdultPSCFConfig,
    rows: _Rows,
    scaling: dict[str, float],
    fit: Any,
    fit_warnings: list[str],
    timings: dict[str, float],
    start: float,
) -> dict[str, Any]:
    """Sizes, settings, scalings, fit diagnostics and timings, JSON-ready."""
    diagnostics = fit.diagnostics
    return {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()},
        "rows": {
            "train": len(rows.train),
            "scm_fit": len(rows.scm_train),
            "fair_learners": len(rows.learner_train),
            "test_file": len(rows.test_all),
            "test_scored": len(rows.test),
            "audited": len(rows.audit_rows),
        },
        "unfair_paths": [list(p) for p in UNFAIR_PATHS],
        "baseline": BASELINE,
        "scaling": scaling,
        "fit": {
            "backend": fit.backend,
            "chains": config.chains,
            "warmup": config.warmup,
            "draws": config.draws,
            "integrated": list(fit.integrated),
            "max_rhat": round(float(diagnostics.max_rhat), 4),
            "min_ess_bulk": round(float(diagnostics.min_ess_bulk), 1),
            "latent_max_rhat": round(float(diagnostics.latent_max_rhat), 4),
            "divergences": int(diagnostics.divergences),
            "warnings": fit_warnings,
        },
        "chiappa_note": CHIAPPA_NOTE,
        "timings_seconds": timings,
        "total_seconds": round(time.perf_counter() - start, 1),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
    }


def check_output_folder(out: Path, *, force: bool) -> None:
    """Refuse a non-empty output folder without ``force`` (or a file in its place)."""
    if out.exists() and not out.is_dir():
        raise SystemExit(f"experiments/adult_pscf.py: --out {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise SystemExit(
            f"experiments/adult_pscf.py: --out {out} is not empty; pass --force to overwrite "
            "the study's files in it"
        )


def build_parser(prog: str = "python experiments/adult_pscf.py") -> argparse.ArgumentParser:
    """Options of the Adult path-specific study."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="Adult: path-specific counterfactual fairness (Chiappa 2019) beside "
        "Full, Unaware and Kusner's level 2, with accuracy, AUC, total and path-specific "
        "counterfactual change under do(sex) and a group audit by sex.",
    )
    p.add_argument("--data-dir", default=None, help="folder holding adult.data and adult.test")
    p.add_argument(
        "--out", default=None,
        help="output folder (default: results/adult_pscf; --quick: a fresh temporary folder)",
    )
    p.add_argument("--quick", action="store_true", help="smoke test: small fit, few rows")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scm-rows", type=int, default=None, help="training rows of the NUTS fit")
    p.add_argument("--test-rows", type=int, default=None, help="test rows scored (0: all)")
    p.add_argument(
        "--latents", choices=("auto", "integrated", "joint"), default="auto",
        help="integrate U_R out of the fit (auto, the default) or sample it with the "
        "parameters (joint)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study from command-line options."""
    from experiments.adult_pscf_output import write_results
    from experiments.arguments import check_data_dir, output_folder

    args = build_parser().parse_args(argv)
    check_data_dir(args.data_dir)
    out = output_folder(args.out, quick=args.quick, study="adult-pscf")
    check_output_folder(out, force=args.force)
    overrides: dict[str, Any] = {
        "data_dir": args.data_dir, "out": out, "seed": args.seed, "latents": args.latents,
    }
    if args.scm_rows is not None:
        overrides["scm_rows"] = args.scm_rows
    if args.test_rows is not None:
        overrides["test_rows"] = args.test_rows
    config = (
        AdultPSCFConfig.quick_mode(**overrides) if args.quick else AdultPSCFConfig(**overrides)
    )
    try:
        results = run_study(config)
    except FileNotFoundError as exc:
        raise SystemExit(f"experiments/adult_pscf.py: {exc}") from exc
    write_results(results, out)
    return 0


if __name__ == "__main__":  # python experiments/adult_pscf.py [options]
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from experiments.arguments import run_script

    raise SystemExit(run_script(main))
