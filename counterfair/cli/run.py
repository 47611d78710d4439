"""Command line for a user's own data: fit, learn, audit and counterfactual on a run folder.

* ``counterfair fit model.yaml --data my.csv --out run/`` -- validate the SCM file
  and the data, fit by NUTS, print the diagnostics and the posterior predictive
  check, save everything in ``run/`` (``run/fit/`` is a saved fit);
* ``counterfair learn run/ --target y --features latent --estimator logistic`` --
  train a counterfactually fair predictor on the run's data, save it in
  ``run/learner/`` and its predictions for the data in ``run/predictions.csv``;
* ``counterfair audit run/ --predictions preds.csv --protected race,sex`` -- HTML
  report of the predictions' group fairness on the run's rows, with the
  counterfactual audit of the saved learner when there is one;
* ``counterfair counterfactual run/ --rows new.csv --do race=White`` -- both worlds
  of every row as CSV;
* ``counterfair decompose run/ --attribute race --x0 White --x1 Black --outcome ZFYA
  --out table.csv`` -- the causal decomposition of a gap (the outcome's, or with
  ``--learner`` the saved learner's predictions) into direct, indirect and spurious
  effects, as a CSV table;
* ``counterfair decompose --data census.csv --attribute sex --x0 male --x1 female
  --outcome salary --confounders age,race --mediators marital,occupation --out
  table.csv`` -- the same terms from the Standard Fairness Model's roles alone, with no
  SCM file and no run folder (:func:`counterfair.audit.fit_sfm`).

Exit codes: 0 success; 2 bad input (a missing or invalid file, an unknown node or
column, an output that exists without ``--force``), with a one-line message on
standard error; 1 anything unexpected.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from counterfair import atomic, errors
from counterfair.errors import (
    BAD_ALLOW,
    CONTINUOUS_ATTRIBUTE,
    NOT_AN_OUTCOME,
    NOT_PROTECTED,
    SAME_LEVELS,
    UNKNOWN_LEVEL,
    UNKNOWN_ROLE_NODE,
)

if TYPE_CHECKING:
    import pandas as pd

    from counterfair.inference.fit import Fit

# The parsers below (``add_*_parser``) build ``counterfair --help``, which must not wait
# for pandas, arviz and the pipeline: the commands import them when they run.

BAD_INPUT = 2
"""Exit code of a refused command (bad input, existing output)."""

ESTIMATORS = ("auto", "linear", "ridge", "logistic")
FEATURES = ("non_descendants", "latent", "additive_noise", "path_specific")


class CommandError(Exception):
    """A refused command: its message is printed and the exit code is :data:`BAD_INPUT`."""


def _formatter(prog: str) -> argparse.RawDescriptionHelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def read_csv(path: str, what: str, *, nrows: int | None = None) -> pd.DataFrame:
    """A CSV file (compressed as its extension says: ``.gz``, ``.bz2``, ``.zip``, ``.xz``,
    ``.zst``), its first ``nrows`` rows when given, or a :class:`CommandError` naming it
    (missing, unreadable)."""
    import pandas as pd

    if not Path(path).is_file():
        raise CommandError(f"{what} file {path} does not exist")
    try:
        return pd.read_csv(path, nrows=nrows)
    except (ValueError, OSError, EOFError, UnicodeDecodeError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise CommandError(f"cannot read {what} file {path}: {reason}") from error


def _output_file(path: Path, force: bool) -> None:
    if path.exists() and not force:
        raise CommandError(f"{path} already exists; pass --force to replace it")


def _fit_folder(run: str) -> Path:
    """The saved fit of a run folder, or a :class:`CommandError` saying it is none."""
    folder = Path(run) / "fit"
    if not folder.is_dir():
        raise CommandError(
            f"{run} is not a run folder (no fit/ inside); make one with "
            "'counterfair fit model.yaml --data my.csv --out RUN'"
        )
    return folder


def _load_fit(run: str) -> Fit:
    from counterfair.inference.fit import Fit
    from counterfair.io.load import load

    fit = load(_fit_folder(run))
    assert isinstance(fit, Fit)
    _say_if_not_converged(fit, run)
    return fit


def _say_if_not_converged(fit: Fit, run: str) -> None:
    note = not_converged_note(fit, run)
    if note:
        logging.getLogger(__name__).warning("%s", note)


def not_converged_note(fit: Fit, run: str) -> str:
    """One line saying that the run's fit did not converge ('' when it did, or when its
    draws are Pathfinder's, which have no convergence diagnostics)."""
    if fit.method != "nuts" or not fit.diagnostics.problems():
        return ""
    from counterfair.inference.diagnostics import ESS_MIN, LATENT_RHAT_MAX, RHAT_MAX

    d = fit.diagnostics
    said = []
    if d.max_rhat > RHAT_MAX:
        said.append(f"max R-hat {d.max_rhat:.3f} > {RHAT_MAX}")
    if d.min_ess_bulk < ESS_MIN:
        said.append(f"min bulk ESS {d.min_ess_bulk:.0f} < {ESS_MIN:.0f}")
    if d.divergences:
        said.append(f"{d.divergences} divergent transition(s)")
    if d.latent_max_rhat > LATENT_RHAT_MAX:
        said.append(f"latents' max R-hat {d.latent_max_rhat:.3f} > {LATENT_RHAT_MAX}")
    return (
        f"the fit in {run} did not converge ({', '.join(said)}): what this command computes "
        "from it may be wrong; refit with 'counterfair fit ... --until-converged' (or more "
        "--warmup and --draws)"
    )


class _SavedRun:
    """A run's saved fit without its posterior draws: the SCM, the levels of its protected
    attributes and, when asked for, the rows it was fitted to.

    Loading the fit (arviz, the draws, their diagnostics) takes seconds; the commands
    check their options against this first, so that a refused command answers at once.
    The folder's manifest is checked as :func:`counterfair.load` checks it (format,
    version, every file's checksum), so a damaged run is refused with the same message.
    """

    def __init__(self, run: str) -> None:
        from counterfair.io.fit_folder import read_fit_parts, read_manifest
        from counterfair.model.scm import SCM

        self.folder = _fit_folder(run)
        read_manifest(self.folder)
        parts = read_fit_parts(self.folder)
        self.scm = SCM.from_dict(parts["scm"])
        info = parts["info"]
        self.levels: dict[str, tuple[str, ...]] = {
            node: tuple(levels) for node, levels in info["levels"].items()
        }
        self.continuous = frozenset(info["continuous"])
        self._data: pd.DataFrame | None = None

    def check_rows(self, rows: pd.DataFrame) -> None:
        """Refuse new rows as their abduction would start by refusing them: the rows' door
        with the fit's encoding (a missing protected column, a level the fit does not
        know), then the parsing of the observed columns they hold (a value outside a
        node's levels, a count that is not one)."""
        from counterfair.model.encoding import Encoding
        from counterfair.rows.validated import Rows

        encoding = Encoding(levels=self.levels, continuous=self.continuous)
        checked = Rows.check(rows, self.scm, encoding)
        checked.values(checked.present())

    @property
    def data(self) -> pd.DataFrame:
        """The rows of the fit (``Fit.data`` of the loaded fit)."""
        if self._data is None:
            from counterfair.io.fit_folder import read_data

            self._data = read_data(self.folder / "data.json")
        return self._data


# ---------------------------------------------------------------------- fit
def add_fit_parser(sub: Any) -> None:
    """The ``fit`` subcommand."""
    p = sub.add_parser(
        "fit",
        help="fit an SCM file to your CSV data and save the run",
        formatter_class=_formatter,
        description="Validate the SCM file (JSON or YAML) and the data, fit the SCM by NUTS, "
        "print the diagnostics and the posterior predictive check, and save the run folder.",
        epilog="example:\n  counterfair fit examples/law_school.yaml --data law_data.csv "
        "--out run/ --chains 4 --draws 500",
    )
    p.add_argument("scm", help="SCM file (.json, .yaml or .yml)")
    p.add_argument("--data", required=True, help="CSV file, one column per node of the SCM")
    p.add_argument("--out", required=True, help="run folder to write (must be new or empty)")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument(
        "--warmup", type=int, default=None,
        help="warm-up iterations per chain (default: 500, or 50 after a Laplace start)",
    )
    p.add_argument("--draws", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", choices=("auto", "pystan", "cmdstanpy"), default="auto")
    p.add_argument(
        "--latents", choices=("auto", "integrated", "joint"), default="auto",
        help="integrate each row's latents out of the likelihood and draw them afterwards "
        "where that applies, with one line for each latent kept joint and why (auto, the "
        "default); integrate all or refuse (integrated); or sample them with the "
        "parameters (joint)",
    )
    p.add_argument(
        "--missing", choices=("error", "drop", "model"), default="error",
        help="rows with missing values in the SCM's columns: refuse them, naming every "
        "column (error); fit on the complete rows, one line per column (drop; assumes "
        "values missing completely at random); or keep every row and treat a missing "
        "value as unknown (model; assumes values missing at random given the rest of the "
        "row)",
    )
    p.add_argument("--force", action="store_true", help="replace a non-empty --out")
    p.add_argument(
        "--until-converged", action="store_true",
        help="refit with doubled warm-up and draws until every parameter's R-hat is at most "
        "1.01 and its bulk ESS at least 400, or until --max-draws would be exceeded",
    )
    p.add_argument(
        "--max-draws", type=_positive_int, default=None, metavar="N",
        help="with --until-converged: the most draws (and warm-up iterations) per chain "
        f"(default {DEFAULT_MAX_DRAWS})",
    )


DEFAULT_MAX_DRAWS = 4000
"""Default budget of ``counterfair fit --until-converged``: draws per chain."""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def _fit_command(args: argparse.Namespace, **changes: object) -> str:
    """The ``counterfair fit`` command of ``args`` with ``changes``, quoted for a shell."""
    import shlex

    options = {
        "data": args.data, "out": args.out, "chains": args.chains, "warmup": args.warmup,
        "draws": args.draws, "seed": args.seed, **changes,
    }
    if args.backend != "auto":
        options["backend"] = args.backend
    if getattr(args, "latents", "auto") != "auto":
        options["latents"] = args.latents
    if getattr(args, "missing", "error") != "error":
        options["missing"] = args.missing
    words = ["counterfair", "fit", args.scm]
    for key, value in options.items():
        if value is True:
            words.append(f"--{key.replace('_', '-')}")
        elif value is not None and value is not False:
            words += [f"--{key.replace('_', '-')}", str(value)]
    return " ".join(shlex.quote(word) for word in words)


ESS_TARGET = 400.0
"""Bulk ESS every parameter of ``counterfair fit``'s fit should reach (with R-hat at most
``RHAT_MAX``): below it, ``fit`` says so once with the command to run next, and
``--until-converged`` refits. Four chains of 100 effective draws each: the Monte Carlo
error of a posterior mean is then a twentieth of its sd. (The fit's own
``ConvergenceWarning`` is raised below ``ESS_MIN``, 100.)"""


def _not_mixed(fit: Fit) -> list[str]:
    """Parameters whose R-hat is above the limit (sorted, worst first)."""
    from counterfair.inference.diagnostics import RHAT_MAX

    table = fit.diagnostics.table
    bad = table[table["r_hat"] > RHAT_MAX].sort_values("r_hat", ascending=False)
    return [str(name) for name in bad.index]


def _too_few(fit: Fit) -> list[str]:
    """Parameters whose bulk ESS is below :data:`ESS_TARGET` (sorted, fewest first)."""
    table = fit.diagnostics.table
    bad = table[table["ess_bulk"] < ESS_TARGET].sort_values("ess_bulk")
    return [str(name) for name in bad.index]


def _unconverged(fit: Fit) -> bool:
    """Whether a parameter's R-hat is above 1.01 or its bulk ESS below :data:`ESS_TARGET`."""
    return bool(_not_mixed(fit) or _too_few(fit))


def _first_eight(names: list[str]) -> str:
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def _not_converged_message(fit: Fit, args: argparse.Namespace, warmup: int, draws: int,
                           budget: int) -> str:
    """The one message of ``fit`` on draws that did not reach R-hat <= 1.01 and bulk ESS
    >= :data:`ESS_TARGET` ('' when they did), with the command to run next."""
    from counterfair.inference.diagnostics import RHAT_MAX

    said = []
    if _not_mixed(fit):
        said.append(f"R-hat > {RHAT_MAX} for {_first_eight(_not_mixed(fit))}")
    few = _too_few(fit)
    if few:
        least = float(fit.diagnostics.table["ess_bulk"].min())
        said.append(f"bulk ESS < {ESS_TARGET:.0f} for {_first_eight(few)} (least {least:.0f})")
    if not said:
        return ""
    longer = _fit_command(args, warmup=2 * warmup, draws=2 * draws, force=True)
    return (
        f"not converged: {'; '.join(said)}. The run is saved, but its results are not to be "
        f"trusted yet. Next, run:\n  {longer}\nor let counterfair double them until it "
        "converges:\n  "
        + _fit_command(args, force=True, until_converged=True, max_draws=max(budget, 4 * draws))
    )


def _fit_once(scm: Any, data: pd.DataFrame, args: argparse.Namespace, warmup: int | None,
              draws: int) -> Fit:
    import logging

    fitting = logging.getLogger("counterfair.inference.sampling")
    level = fitting.level
    fitting.setLevel(logging.WARNING)  # its diagnostics line is printed once, below
    try:
        with warnings.catch_warnings():  # the diagnostics printed below say the same
            warnings.simplefilter("ignore", errors.ConvergenceWarning)
            return scm.fit(
                data,
                chains=args.chains,
                warmup=warmup,
                draws=draws,
                seed=args.seed,
                backend=args.backend,
                progress=False,
                latents=getattr(args, "latents", "auto"),
                missing=getattr(args, "missing", "error"),
            )
    finally:
        fitting.setLevel(level)


def run_fit(args: argparse.Namespace) -> int:
    """Fit, print diagnostics and the posterior predictive check, save the run folder.

    With ``--until-converged``, refit with doubled warm-up and draws while a parameter's
    R-hat is above 1.01 or its bulk ESS below :data:`ESS_TARGET`, and the doubled draws
    stay within ``--max-draws``. Otherwise, draws that do not reach both are said once,
    with the command to run next.
    """
    if args.max_draws is not None and not args.until_converged:
        raise CommandError("--max-draws is the budget of --until-converged; add "
                           "--until-converged, or drop --max-draws")
    for name in ("chains", "warmup", "draws"):
        if getattr(args, name) is not None and getattr(args, name) < (name != "warmup"):
            raise CommandError(f"--{name} {getattr(args, name)}: give a positive number")
    budget = args.max_draws or DEFAULT_MAX_DRAWS
    if args.until_converged and args.draws > budget:
        raise CommandError(f"--draws {args.draws} is above --max-draws {budget}")
    out = Path(args.out)
    if out.is_dir() and any(out.iterdir()) and not args.force:
        raise CommandError(f"{out} exists and is not empty; pass --force to replace it")
    # the refusals above need no import; the SCM file and the data are checked before
    # the inference stage (arviz) is imported
    from counterfair.io.fit_folder import check_target, write_folder
    from counterfair.io.scm_file import check_data_columns, read_scm

    check_target(out, overwrite=args.force)
    with _stage("read the SCM file and the data"):
        scm = read_scm(args.scm)
        data = read_csv(args.data, "data")
        check_data_columns(scm, data.columns, source=f"data file {args.data}")
    from counterfair.inference.diagnostics import RHAT_MAX

    columns = [c for c in data.columns if c in scm.specs]
    warmup, draws = args.warmup, args.draws
    with _stage(f"fit ({len(data):,} rows given, {args.chains} chain(s))"):
        fit = _fit_once(scm, data[columns], args, warmup, draws)
    if warmup is None:  # the fit's own default, doubled below if need be
        from counterfair.inference.starts import default_warmup

        warmup = default_warmup(fit.warm_start)
    print(fit.diagnostics)
    while args.until_converged and _unconverged(fit):
        if 2 * draws > budget or 2 * warmup > budget:
            print(f"--until-converged: stopped at {warmup} warm-up + {draws} draws per chain: "
                  f"doubling them would exceed --max-draws {budget}; R-hat is still above "
                  f"{RHAT_MAX} or bulk ESS below {ESS_TARGET:.0f} (see below)")
            break
        warmup, draws = 2 * warmup, 2 * draws
        print(f"--until-converged: R-hat above {RHAT_MAX} or bulk ESS below "
              f"{ESS_TARGET:.0f}; refitting with {warmup} warm-up + {draws} draws per chain")
        with _stage("refit"):
            fit = _fit_once(scm, data[columns], args, warmup, draws)
        print(fit.diagnostics)
    else:
        if args.until_converged:
            print(f"--until-converged: converged (every parameter's R-hat <= {RHAT_MAX}, bulk "
                  f"ESS >= {ESS_TARGET:.0f}) with {warmup} warm-up + {draws} draws per chain")
    message = _not_converged_message(fit, args, warmup, draws, budget)
    if message:
        print(message)
    check = None
    if fit.holes:  # its replications would need every row's missing values drawn
        print("posterior predictive check: not run (the rows have missing values, "
              "modelled by --missing model; the check takes complete rows)")
    else:
        with _stage("posterior predictive check"):
            check = fit.ppc(seed=args.seed)
        print(check)

    def fill(folder: Path) -> None:
        fit.save(folder / "fit")
        if check is not None:
            check.table.to_csv(folder / "ppc.csv", index=False)
        shown = "" if check is None else f"\n\n{check}"
        (folder / "diagnostics.txt").write_text(f"{fit.diagnostics}{shown}\n")

    with _stage("save the run"):
        write_folder(out, "run", fill, overwrite=args.force)
    print(f"saved the run in {out}")
    return 0


@contextlib.contextmanager
def _stage(name: str) -> Iterator[None]:
    """One ``[counterfair]`` line when a stage of a command ends: its name and time."""
    started = time.perf_counter()
    yield
    logging.getLogger(__name__).info("%s: %.1f s", name, time.perf_counter() - started)


# ---------------------------------------------------------------------- learn
def add_learn_parser(sub: Any) -> None:
    """The ``learn`` subcommand."""
    p = sub.add_parser(
        "learn",
        help="train a counterfactually fair predictor on a run's data",
        formatter_class=_formatter,
        description="Train a FairLearner on the rows of a run (the saved fit is reused; no "
        "new MCMC) and save it in RUN/learner/, with its predictions for the rows in "
        "RUN/predictions.csv.",
        epilog="example:\n  counterfair learn run/ --target ZFYA --features latent "
        "--estimator linear",
    )
    p.add_argument("run", help="run folder written by 'counterfair fit'")
    p.add_argument("--target", required=True, help="column to predict")
    p.add_argument("--features", choices=FEATURES, default="latent", help="fair inputs")
    p.add_argument("--estimator", choices=ESTIMATORS, default="auto",
                   help="auto: linear regression, or logistic for a binary target")
    p.add_argument("--n-samples", type=int, default=50, help="draws of the latents per row")
    p.add_argument("--unfair-path", action="append", default=None, metavar="A>M",
                   help="with --features path_specific: an unfair path, nodes joined by '>'")
    p.add_argument("--baseline", default=None,
                   help="with --features path_specific: the level the unfair paths see")
    p.add_argument("--folds", type=int, default=5,
                   help="k of the k-fold cross-fitting that gives held-out scores (0: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--force", action="store_true", help="replace an existing learner")


def _estimator(name: str) -> Any:
    from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge

    return {"auto": None, "linear": LinearRegression(), "ridge": Ridge(),
            "logistic": LogisticRegression()}[name]


def run_learn(args: argparse.Namespace) -> int:
    """Train and save a FairLearner on the run's rows.

    The options are checked against the run's saved SCM and rows before the fit (its
    draws) is loaded.
    """
    _fit_folder(args.run)
    run = Path(args.run)
    for path in (run / "learner", run / "predictions.csv"):
        if path.exists() and not args.force:
            raise CommandError(f"{path} already exists; pass --force to replace it")
    saved = _SavedRun(args.run)
    if args.target not in saved.data.columns:
        raise CommandError(
            f"target {args.target!r} is not a column of the run's data; columns: "
            f"{list(saved.data.columns)}"
        )
    path_specific = args.features == "path_specific"
    if path_specific != (args.unfair_path is not None) or path_specific != (
        args.baseline is not None
    ):
        raise CommandError(
            "--unfair-path and --baseline go together with --features path_specific, and only "
            "with it"
        )
    if args.folds != 0 and not 2 <= args.folds <= len(saved.data):
        raise CommandError(f"--folds {args.folds}: give 0 (no held-out scores) or a number "
                           f"from 2 to the number of rows ({len(saved.data)})")
    if args.n_samples < 1:
        raise CommandError(f"--n-samples {args.n_samples}: give a positive number")
    spec = saved.scm.specs.get(args.target)
    task = getattr(spec, "family", None)
    classifier = task in ("bernoulli", "ordinal", "categorical")
    if classifier and args.estimator in ("linear", "ridge"):
        raise CommandError(f"--estimator {args.estimator} is a regression; target "
                           f"{args.target!r} is a {task} node: use --estimator logistic "
                           "(or auto)")
    if not classifier and args.estimator == "logistic" and task is not None:
        raise CommandError(f"--estimator logistic is a classifier; target {args.target!r} is "
                           f"a {task} node: use --estimator linear or ridge (or auto)")
    from counterfair.learn import inputs
    from counterfair.learn.fair import FairLearner
    from counterfair.learn.held_out import held_out_scores, usefulness_warning

    strategy: inputs.FairInputs
    if path_specific:
        strategy = inputs.PathSpecific(
            unfair_paths=[tuple(p.split(">")) for p in args.unfair_path], baseline=args.baseline
        )
    else:
        strategy = {
            "non_descendants": inputs.NonDescendants,
            "latent": inputs.Latent,
            "additive_noise": inputs.AdditiveNoise,
        }[args.features]()
    fit = _load_fit(args.run)
    learner = FairLearner(
        fit,
        target=args.target,
        features=strategy,
        estimator=_estimator(args.estimator),
        n_samples=args.n_samples,
        seed=args.seed,
    ).fit(fit.data)
    predictions, positive = _predictions(learner, fit)
    scores = None
    if args.folds:
        scores = held_out_scores(learner, fit.data, folds=args.folds, seed=args.seed,
                                 positive=positive)
    print(f"trained on {len(fit.data)} rows with inputs {learner.feature_names_}")
    if positive is not None:
        print(f"predictions.csv: the predicted label of {args.target} and the probability "
              f"that it is {positive!r}")
    warning = None
    if scores is not None:
        print(scores)
        warning = usefulness_warning(
            scores, predictions["prediction"],
            predictions.get("probability"),
        )
        if warning:
            print(warning)
    # all or nothing: the two files are written beside their places first, then the
    # learner is saved, then the files move in; a failure before that leaves the run as
    # it was (no new learner beside old predictions)
    staged: dict[Path, Path] = {}
    try:
        staged[run / "predictions.csv"] = _stage_csv(predictions, run / "predictions.csv")
        staged[run / LEARN_SUMMARY] = atomic.stage(
            run / LEARN_SUMMARY,
            json.dumps({"target": args.target, "positive": positive,
                        "scores": None if scores is None else str(scores),
                        "warning": warning}, indent=2, default=str) + "\n",
        )
        learner.save(run / "learner", overwrite=args.force)
    except BaseException:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
        raise
    _move_into_place(staged)
    print(f"saved {run / 'learner'} and {run / 'predictions.csv'}")
    return 0


LEARN_SUMMARY = "learn.json"
"""What ``counterfair learn`` found (held-out scores, warning), read by ``audit``."""


def _positive(fit: Fit, target: str, classes: list[Any]) -> Any:
    """The positive class of a binary target: the Bernoulli node's, else the last class."""
    spec = fit.scm.specs.get(target)
    label = getattr(spec, "positive", None)
    if getattr(spec, "levels", None) is not None and label is not None:
        for value in classes:
            if str(value) == label:
                return value
    return classes[-1]


def _predictions(learner: Any, fit: Fit) -> tuple[pd.DataFrame, Any]:
    """The learner's predictions for the run's rows: the label and, for a classifier,
    the probability of the positive class (of every class when there are more than two),
    in the target's own labels; and the positive class (None for a regression)."""
    import pandas as pd

    labels = learner.predict(fit.data)
    frame = pd.DataFrame({"prediction": labels})
    if not learner._is_classifier():
        return frame, None
    proba = learner.predict_proba(fit.data)
    classes = list(learner.classes_)
    if len(classes) == 2:
        positive = _positive(fit, str(learner.target), classes)
        frame["probability"] = proba[:, classes.index(positive)]
        return frame, positive
    for j, label in enumerate(classes):
        frame[f"probability_{label}"] = proba[:, j]
    return frame, None


def _stage_csv(frame: pd.DataFrame, path: Path) -> Path:
    return atomic.stage(path, lambda tmp: frame.to_csv(tmp, index=False))


def _move_into_place(staged: dict[Path, Path]) -> None:
    for path, tmp in staged.items():
        atomic.publish(tmp, path)


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    _move_into_place({path: _stage_csv(frame, path)})


# ---------------------------------------------------------------------- audit
def is_run_folder(path: str) -> bool:
    """Whether ``path`` is a run folder (the new form of ``counterfair audit``)."""
    return Path(path).is_dir() and (Path(path) / "fit").is_dir()


def run_audit(args: argparse.Namespace) -> int:
    """HTML report of a predictions CSV on a run's rows (and of the saved learner).

    The predictions and the protected columns are checked against the run's saved rows
    before the fit (its draws) is loaded.
    """
    saved = _SavedRun(args.csv)
    run = Path(args.csv)
    predictions = read_csv(args.predictions[0], "predictions")
    if len(args.predictions) > 1:
        raise CommandError("give one predictions CSV (one column per model) with a run folder")
    if len(predictions) != len(saved.data):
        raise CommandError(
            f"{args.predictions[0]} has {len(predictions)} rows but the run's data has "
            f"{len(saved.data)}; give one prediction per row of the data, in the same order"
        )
    protected = [p for item in args.protected for p in item.split(",") if p]
    unknown = [p for p in protected if p not in saved.data.columns]
    if unknown:
        raise CommandError(
            f"protected column {unknown[0]!r} is not in the run's data; columns: "
            f"{list(saved.data.columns)}"
        )
    reference = audit_reference(getattr(args, "reference", None),
                                saved.data[protected].astype(str), protected)
    min_group_rows = check_min_group_rows(getattr(args, "min_group_rows", 30))
    from counterfair.audit import AuditSettings, GroupAudit, counterfactual_fairness, write_report
    from counterfair.io.load import load
    from counterfair.learn.fair import FairLearner

    learner = load(run / "learner") if (run / "learner").is_dir() else None
    if isinstance(learner, FairLearner):
        # the learner's own copy of the run's fit is the audit's world, so that the learner
        # reads its inputs from the audit's shared abduction (a separately loaded copy of
        # the same fit is another object: the learner would abduct again, and Fair K would
        # seem to move under do())
        fit = learner.scm_fit_
        _say_if_not_converged(fit, args.csv)
    else:
        fit = _load_fit(args.csv)
    label = args.label or (learner.target if isinstance(learner, FairLearner) else None)
    if label is None or label not in fit.data.columns:
        raise CommandError(
            f"--label {label!r}: give the column of actual outcomes; columns: "
            f"{list(fit.data.columns)}"
        )
    y_true = fit.data[label].to_numpy()
    task: Literal["classification", "regression"] = args.task or (
        "classification" if len(set(y_true.tolist())) <= 2 else "regression"
    )
    spec = fit.scm.specs.get(label)
    levels = getattr(spec, "levels", None)
    positive = getattr(spec, "positive", None) if spec is not None else None
    labelled = getattr(spec, "family", None) == "bernoulli" and levels is not None
    if task == "classification" and labelled and positive is not None:
        # a labelled outcome (no/yes): 1 for its positive label
        y_true = (fit.data[label].astype(str) == str(positive)).to_numpy(dtype=int)
    scored = _audited_columns(predictions, positive if levels is not None else None)
    # the learner's own columns (from 'counterfair learn') are the learner, not 'probability'
    learners = all(str(c) in LEARNER_COLUMNS or str(c).startswith("probability_")
                   for c in predictions.columns)
    names = predictor_names(getattr(args, "name", None), list(scored),
                            [LEARNER_NAME] if learners and len(scored) == 1 else None)
    scored = dict(zip(names, scored.values(), strict=True))
    learner_name = names[0] if learners and len(scored) == 1 else LEARNER_NAME
    out = Path(args.out) if args.out != "audit.html" else run / "audit.html"
    _output_file(out, args.force or args.overwrite)
    notes = []
    summary = run / LEARN_SUMMARY
    own = Path(args.predictions[0]).resolve() == (run / "predictions.csv").resolve()
    if own and summary.is_file():
        try:
            learned = json.loads(summary.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            learned = {}
        if isinstance(learned, dict) and learned.get("warning"):
            notes.append(str(learned["warning"]).removeprefix("warning: "))
    for note in notes:
        print(f"warning: {note}")
    counterfactual = None
    if isinstance(learner, FairLearner):
        counterfactual = {
            learner_name: counterfactual_fairness(
                fit, fit.data, learner, settings=AuditSettings(
                    attributes=protected, seed=args.seed, n_samples=args.cf_samples,
                    response=getattr(args, "response", None),
                ),
            )
        }
    path = write_report(
        out,
        GroupAudit(
            y_true, scored, fit.data[protected].astype(str),
            task=audit_task(task, args.threshold, args.tau, min_group_rows),
            reference=reference, n_bootstrap=args.bootstrap, seed=args.seed,
        ),
        counterfactual=counterfactual,
        warnings=notes,
        overwrite=True,
    )
    print(f"wrote {path}")
    return 0


LEARNER_NAME = "learner"
"""The name of the run's learner in its audit report (``--name`` gives another)."""

LEARNER_COLUMNS = ("prediction", "probability")
"""The columns ``counterfair learn`` writes for a binary or a regression target (with
``probability_<class>`` columns for more classes)."""


def _split(items: list[str] | None) -> list[str]:
    """Values given as repeated options and / or comma-separated lists."""
    return [part.strip() for item in items or [] for part in item.split(",") if part.strip()]


def audit_reference(items: list[str] | None, frame: pd.DataFrame,
                    protected: list[str]) -> dict[str, str]:
    """``--reference colour=White`` (repeatable or comma-separated) as ``{attribute: level}``,
    checked against the protected columns (``frame`` holds them as text) and their
    intersection (``"colour x sex=White x Male"``)."""
    from counterfair.audit._groups import INTERSECTION_SEPARATOR

    levels = {name: sorted(set(frame[name])) for name in protected}
    if len(protected) >= 2:
        crossed = frame[protected].agg(INTERSECTION_SEPARATOR.join, axis=1)
        levels[INTERSECTION_SEPARATOR.join(protected)] = sorted(set(crossed))
    out: dict[str, str] = {}
    for part in _split(items):
        attribute, equals, level = (text.strip() for text in part.partition("="))
        if not equals or not attribute or not level:
            raise CommandError(f"--reference {part}: give ATTRIBUTE=LEVEL, such as "
                               f"--reference {protected[0]}={levels[protected[0]][0]}")
        if attribute not in levels:
            raise CommandError(f"--reference {part}: {attribute!r} is not a protected "
                               f"attribute; protected: {list(levels)}")
        if level not in levels[attribute]:
            raise CommandError(f"--reference {part}: {level!r} is not a level of "
                               f"{attribute}; levels: {levels[attribute]}")
        if attribute in out and out[attribute] != level:
            raise CommandError(f"--reference {part}: {attribute} is given two reference "
                               f"levels ({out[attribute]!r} and {level!r})")
        out[attribute] = level
    return out


def audit_task(task: str, threshold: float, tau: float, min_group_rows: int) -> Any:
    """The group audit's task object of the ``--task``, ``--threshold``, ``--tau`` and
    ``--min-group-rows`` options (a classification's; a regression has none)."""
    from counterfair.audit.group_audit import Classification, Regression

    if task == "regression":
        return Regression()
    return Classification(threshold=threshold, tau=tau, min_group_rows=min_group_rows)


def check_min_group_rows(value: int) -> int:
    """``--min-group-rows``: a count of rows (0 judges every group)."""
    if value < 0:
        raise CommandError(f"--min-group-rows {value}: give 0 or a positive number of rows")
    return value


def predictor_names(items: list[str] | None, columns: list[str],
                    default: list[str] | None = None) -> list[str]:
    """The report's names of the audited predictions: ``--name`` (one per column, in
    order), else ``default``, else the columns' names."""
    names = _split(items)
    if not names:
        return list(default or columns)
    if len(names) != len(columns):
        raise CommandError(
            f"--name: {len(names)} name{'s' if len(names) != 1 else ''} for "
            f"{len(columns)} audited prediction column{'s' if len(columns) != 1 else ''} "
            f"({', '.join(columns)}); give one name per column, in order"
        )
    if len(set(names)) != len(names):
        raise CommandError(f"--name: every predictor needs its own name; given {names}")
    return names


def _audited_columns(predictions: pd.DataFrame, positive: str | None) -> dict[str, Any]:
    """The predictions to audit, by name: probabilities where they exist.

    ``counterfair learn`` writes ``prediction`` (a label) and ``probability`` (of the
    positive class): the probability is audited (scores, thresholded at
    ``--threshold``) and the label left out; ``probability_<class>`` columns of a
    multi-class target are left out. Labels of a labelled outcome (no/yes) become 1
    for the positive label.
    """
    import numpy as np

    columns = [str(c) for c in predictions.columns]
    if "probability" in columns:
        columns = [c for c in columns if c != "prediction"]
    columns = [c for c in columns if not c.startswith("probability_")] or columns
    out: dict[str, Any] = {}
    for column in columns:
        values = predictions[column]
        if positive is not None and not pd_numeric(values):
            out[column] = (values.astype(str) == positive).to_numpy(dtype=int)
        else:
            out[column] = np.asarray(values)
    return out


def pd_numeric(values: Any) -> bool:
    """Whether a column holds numbers (or booleans)."""
    import pandas as pd

    return bool(pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values))


# ---------------------------------------------------------------------- counterfactual
def add_counterfactual_parser(sub: Any) -> None:
    """The ``counterfactual`` subcommand."""
    p = sub.add_parser(
        "counterfactual",
        help="counterfactual values of new rows under do(...), both worlds as CSV",
        formatter_class=_formatter,
        description="Abduct the latents of the rows with the run's fit (exactly, without "
        "Stan, wherever that applies), set the nodes of --do, and write the factual and "
        "counterfactual values of every node, per row and posterior sample, as CSV "
        "(columns row, sample, world, then the nodes, then NODE:noise for each normal node: "
        "its abducted noise, the part of its value that its parents and latents do not "
        "explain, the same in both worlds). Counts, two-valued and level columns are "
        "written as the data hold them; a normal node's values are real numbers in every "
        "world, so a column of whole numbers declared normal is written with decimals.",
        epilog="example:\n  counterfair counterfactual run/ --rows new.csv --do race=White "
        "--out counterfactuals.csv",
    )
    p.add_argument("run", help="run folder written by 'counterfair fit'")
    p.add_argument("--rows", required=True, help="CSV of rows (protected and observed columns)")
    p.add_argument("--do", action="append", required=True, metavar="NODE=VALUE",
                   help="intervention, e.g. race=White (repeat for several nodes)")
    p.add_argument("--n-samples", type=int, default=20, help="posterior samples per row")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="CSV to write (default RUN/counterfactuals.csv)")
    p.add_argument("--force", action="store_true", help="replace an existing --out")


def _parse_do(items: list[str], saved: _SavedRun) -> dict[str, Any]:
    do: dict[str, Any] = {}
    for item in items:
        node, sep, value = item.partition("=")
        if not sep or not node:
            raise CommandError(f"--do {item!r}: write NODE=VALUE, e.g. race=White")
        if node not in saved.scm.specs:
            raise CommandError(
                f"--do {item!r}: {node!r} is not a node of the SCM; nodes: "
                f"{list(saved.scm.nodes)}"
            )
        levels = saved.levels.get(node)
        if levels is not None:
            if value not in levels:
                raise CommandError(f"--do {item!r}: {value!r} is not a level of {node}; "
                                   f"levels: {list(levels)}")
            do[node] = value
        else:
            try:
                do[node] = float(value)
            except ValueError as error:
                raise CommandError(f"--do {item!r}: {node} takes a number") from error
    return do


def run_counterfactual(args: argparse.Namespace) -> int:
    """Write both worlds of the rows under ``--do`` as CSV (``--do``, ``--out`` and the
    rows are checked before the fit, with its draws, is loaded)."""
    saved = _SavedRun(args.run)
    do = _parse_do(args.do, saved)
    out = Path(args.out) if args.out else Path(args.run) / "counterfactuals.csv"
    _output_file(out, args.force)
    rows = read_csv(args.rows, "rows")
    saved.check_rows(rows)
    fit = _load_fit(args.run)
    frame = fit.counterfactual(rows, do=do, n_samples=args.n_samples, seed=args.seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    _write_csv(frame, out)
    print(f"wrote {out}: {len(rows)} rows x {args.n_samples} samples x 2 worlds")
    return 0


# ---------------------------------------------------------------------- decompose
# The Standard Fairness Model's decomposition (``--data``, counterfair.audit.sfm), copied
# here so that ``counterfair --help`` does not import it (and with it pandas);
# tests/test_cli_sfm.py checks that they are the library's.
SFM_FAMILIES = ("normal", "negative_binomial", "poisson", "bernoulli")
"""``--family`` with ``--data`` (:data:`counterfair.audit.sfm_roles.OUTCOME_FAMILIES`)."""
SFM_ROW_WEIGHTS = ("bayesian_bootstrap", "fixed")
"""``--rows`` with ``--data`` (:data:`counterfair.audit.sfm.ROW_WEIGHTS`)."""
SFM_GROUPINGS = ("encoded", "pooled")
"""``--groups`` with ``--data`` (:data:`counterfair.audit.sfm_models.GROUPINGS`)."""
SFM_METHODS = ("nuts", "pathfinder")
"""``--method`` with ``--data`` (:data:`counterfair.audit.sfm_fit.METHODS`)."""
SFM_DEFAULTS = {"chains": 2, "warmup": 300, "draws": 300}
"""The nuisance fits' NUTS settings with ``--data`` (the defaults of
:class:`~counterfair.audit.SFMSettings`)."""


def add_decompose_parser(sub: Any) -> None:
    """The ``decompose`` subcommand."""
    p = sub.add_parser(
        "decompose",
        help="split a gap between two groups into direct, indirect and spurious effects",
        formatter_class=_formatter,
        description="The causal decomposition of the gap E[y | x1] - E[y | x0] (Plecko and "
        "Bareinboim's Causal Fairness Analysis) with the run's fit as the world: TV = Ctf-DE "
        "- Ctf-IE - Ctf-SE and TV = NDE - NIE + Exp-SE_x1 - Exp-SE_x0, posterior means and "
        "equal-tailed intervals, written as CSV (columns term, form, mean, sd, lower, upper; "
        "with --allow, the rows of the unfair part too). y is an observed node (--outcome) "
        "or the run's saved learner's prediction (--learner, from 'counterfair learn'). A "
        "CSV of predictions cannot be decomposed: the effects need the model's output in "
        "counterfactual worlds.\n\n"
        "Without a run folder, --data CSV decomposes the gap from the Standard Fairness "
        "Model's roles alone (no SCM file, no fit beforehand): name the outcome, the "
        "confounders Z and the mediators W (comma-separated; '' for none); the outcome's "
        "regression on X, Z and W (X interacting with the rest) and X's regression on Z "
        "are fitted by NUTS "
        "(--chains, --warmup, --draws), the rows weighted by a Bayesian bootstrap (--rows "
        "bayesian_bootstrap, the default) or all 1 (--rows fixed), and the table is "
        "written to --out.",
        epilog="examples:\n  counterfair decompose run/ --attribute race --x0 White --x1 Black "
        "--outcome ZFYA --out table.csv\n  counterfair decompose run/ --attribute race --x0 "
        "White --x1 Black --learner --allow IE --out learner.csv\n  counterfair decompose "
        "--data census.csv --attribute sex --x0 male --x1 female --outcome salary "
        "--confounders age,race --mediators marital,occupation --out table.csv",
    )
    p.add_argument("run", nargs="?", default=None, metavar="RUN",
                   help="run folder written by 'counterfair fit' (or give --data instead)")
    p.add_argument("--data", default=None, metavar="CSV",
                   help="instead of RUN: a CSV file (.csv, or compressed: .csv.gz, ...) "
                   "decomposed from the Standard Fairness Model's roles alone")
    p.add_argument("--attribute", required=True, help="the protected attribute X")
    p.add_argument("--x0", required=True, help="the reference level of X")
    p.add_argument("--x1", required=True, help="the other level (TV = E[y | x1] - E[y | x0])")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--outcome", default=None,
                        help="an observed node of the SCM (with --data: a column)")
    target.add_argument("--learner", action="store_true",
                        help="the run's saved learner (RUN/learner/)")
    p.add_argument("--rows", default=None,
                   help="with RUN: a CSV of rows (default: the run's data); with --data: the "
                   f"rows' weights, {' or '.join(SFM_ROW_WEIGHTS)} (default "
                   f"{SFM_ROW_WEIGHTS[0]})")
    p.add_argument("--mediators", default=None,
                   help="comma-separated mediators W (default: the descendants of X; with "
                   "--data required, '' for none)")
    p.add_argument("--confounders", default=None,
                   help="comma-separated confounders Z (default: the non-descendants of X; "
                   "with --data required, '' for none)")
    p.add_argument("--allow", default=None,
                   help="comma-separated effects that are a business necessity (DE, IE, SE)")
    p.add_argument("--n-samples", type=int, default=200, help="posterior samples per row")
    p.add_argument("--response", choices=("probability", "prediction"), default=None,
                   help="with --learner: what is decomposed (default: a classifier's "
                   "probability of the positive class, a regressor's prediction; "
                   "'prediction': a classifier's labels)")
    p.add_argument("--interval", type=float, default=0.9, help="mass of the intervals")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--categorical", default=None,
                   help="with --data: comma-separated numeric covariates to treat as "
                   "categories (codes)")
    p.add_argument("--family", choices=SFM_FAMILIES, default=None,
                   help="with --data: the outcome's family (default: chosen from the column, "
                   "and the reason printed)")
    p.add_argument("--chains", type=int, default=None,
                   help=f"with --data: chains of each fit (default {SFM_DEFAULTS['chains']})")
    p.add_argument("--warmup", type=int, default=None,
                   help="with --data: warm-up iterations per chain (default "
                   f"{SFM_DEFAULTS['warmup']})")
    p.add_argument("--draws", type=int, default=None,
                   help=f"with --data: draws per chain (default {SFM_DEFAULTS['draws']})")
    p.add_argument("--groups", choices=SFM_GROUPINGS, default=None,
                   help="with --data: how a many-level category enters (default encoded: "
                   "its cross-fitted empirical-Bayes means; pooled: group effects in Stan)")
    p.add_argument("--method", choices=SFM_METHODS, default=None,
                   help="with --data: how the nuisance models are fitted (default nuts)")
    p.add_argument("--nrows", type=_positive_int, default=None, metavar="N",
                   help="with --data: read the first N rows only")
    p.add_argument("--split-confounders", default=None, metavar="GROUPS",
                   help="with --data: split Ctf-SE by these ordered groups of the confounders, "
                   "groups separated by ';' and a group's columns by ',' (every confounder "
                   "once, the earliest in causal order first), e.g. 'race,hispanic_origin;age'")
    p.add_argument("--split-mediators", default=None, metavar="GROUPS",
                   help="with --data: split Ctf-IE by these ordered groups of the mediators, "
                   "as --split-confounders")
    p.add_argument("--parts-out", default=None, metavar="CSV",
                   help="with a split: the CSV of the parts (default: --out with .parts.csv "
                   "for .csv)")
    p.add_argument("--out", default=None,
                   help="CSV to write (default RUN/decomposition.csv; with --data required)")
    p.add_argument("--force", action="store_true", help="replace an existing --out")


def _names(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [name for name in value.split(",") if name]


# ``counterfair decompose`` checks the options the SCM and the levels decide with the
# library's texts (counterfair.errors) before it loads the fit (the draws), which takes
# seconds; tests/test_cli_run.py checks that these effects are the library's.
DECOMPOSE_EFFECTS = ("DE", "IE", "SE")


def _check_decompose(args: argparse.Namespace, saved: _SavedRun) -> None:
    """The refusals of :func:`counterfair.audit.decompose` that the SCM and the levels
    decide, in its order and words, before the fit is loaded; the rest are its own."""
    scm, attribute = saved.scm, args.attribute
    specs = scm.specs
    if attribute not in scm.protected:
        role = (
            f" (it is a {type(specs[attribute]).__name__} node)"
            if attribute in specs
            else " (it is not a node of the SCM)"
        )
        raise CommandError(
            NOT_PROTECTED.format(attribute=attribute, role=role, protected=list(scm.protected))
        )
    if attribute in saved.continuous:
        raise CommandError(CONTINUOUS_ATTRIBUTE.format(attribute=attribute))
    if args.x0 == args.x1:
        raise CommandError(SAME_LEVELS.format(level=args.x0, attribute=attribute))
    levels = list(saved.levels[attribute])
    for name, value in (("x0", args.x0), ("x1", args.x1)):
        if value not in levels:
            raise CommandError(
                UNKNOWN_LEVEL.format(name=name, value=value, attribute=attribute, levels=levels)
            )
    outcome = args.outcome
    if outcome is not None and outcome not in scm.observed:
        what = (
            f"a {type(specs[outcome]).__name__} node" if outcome in specs
            else "not a node of the SCM"
        )
        raise CommandError(
            NOT_AN_OUTCOME.format(outcome=outcome, what=what, observed=list(scm.observed))
        )
    for effect in _names(args.allow) or []:
        if effect not in DECOMPOSE_EFFECTS:
            raise CommandError(BAD_ALLOW.format(effect=effect, effects=list(DECOMPOSE_EFFECTS)))
    for option in ("mediators", "confounders"):
        for node in _names(getattr(args, option)) or []:
            if node not in specs:
                raise CommandError(
                    UNKNOWN_ROLE_NODE.format(option=option, node=node, nodes=list(scm.nodes))
                )


# The options of one mode of ``counterfair decompose`` only: refused in the other, each with
# what it is for there.
RUN_ONLY = {
    "learner": "the run's saved learner; with --data, give --outcome",
    "allow": "the business necessity of the run's decomposition",
    "response": "what the run's saved learner's output is",
}
DATA_ONLY = ("categorical", "family", "groups", "method", "chains", "warmup", "draws", "nrows",
             "split_confounders", "split_mediators", "parts_out")


def _usage(message: str) -> CommandError:
    """A refused combination of options, said as the parser says its refusals."""
    return CommandError(f"{message} (see 'counterfair decompose --help')")


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _check_decompose_mode(args: argparse.Namespace) -> None:
    """Exactly one of RUN and ``--data``, and no option of the other mode (nothing is
    read before this)."""
    run, data = getattr(args, "run", None), getattr(args, "data", None)
    if run is not None and data is not None:
        raise _usage(f"give a run folder (RUN, here {run}) or --data, not both")
    if run is None and data is None:
        raise _usage("give a run folder (RUN, from 'counterfair fit') or --data CSV")
    rows = getattr(args, "rows", None)
    if data is not None:
        given = [name for name in RUN_ONLY if getattr(args, name, None) not in (None, False)]
        if given:
            raise _usage(
                "; ".join(f"{_option(name)} applies to a run folder ({RUN_ONLY[name]})"
                          for name in given)
                + ", not to --data: drop " + ", ".join(map(_option, given))
            )
        if rows is not None and rows not in SFM_ROW_WEIGHTS:
            raise _usage(
                f"--rows {rows}: with --data, --rows is the rows' weights, "
                f"{' or '.join(SFM_ROW_WEIGHTS)}; a CSV of rows applies to a run folder (the "
                "rows decomposed are those of --data)"
            )
        for name in ("outcome", "confounders", "mediators", "out"):
            if getattr(args, name, None) is None:
                why = {
                    "outcome": "the column whose gap is decomposed",
                    "confounders": "comma-separated columns Z, or '' for none",
                    "mediators": "comma-separated columns W, or '' for none",
                    "out": "the CSV to write: there is no run folder to write it into",
                }[name]
                raise _usage(f"--{name} is required with --data ({why})")
        return
    given = [name for name in DATA_ONLY if getattr(args, name, None) is not None]
    if given:
        raise _usage(
            ", ".join(map(_option, given))
            + f" {'applies' if len(given) == 1 else 'apply'} to --data (the Standard Fairness "
            "Model's decomposition, whose models are fitted by the command); the run "
            f"folder {run} has its fit: drop {'it' if len(given) == 1 else 'them'}"
        )
    if rows in SFM_ROW_WEIGHTS and not Path(rows).is_file():
        raise _usage(
            f"--rows {rows}: the rows' weights apply to --data; with a run folder, --rows "
            "is a CSV of rows"
        )
    if args.outcome is None and not args.learner:
        raise _usage("one of the arguments --outcome --learner is required")


def run_decompose(args: argparse.Namespace) -> int:
    """Write the decomposition table of a gap and print its summary.

    With a run folder, ``--out`` and the options the SCM decides are checked before the
    fit (its draws) is loaded; with ``--learner``, only the learner's copy of the fit is
    loaded. With ``--data``, see :func:`run_decompose_sfm`.
    """
    _check_decompose_mode(args)
    if args.data is not None:
        return run_decompose_sfm(args)
    _fit_folder(args.run)
    out = Path(args.out) if args.out else Path(args.run) / "decomposition.csv"
    _output_file(out, args.force)
    if not out.parent.is_dir():
        raise CommandError(f"--out {out}: folder {out.parent} does not exist")
    saved = _SavedRun(args.run)
    _check_decompose(args, saved)
    rows = saved.data if args.rows is None else read_csv(args.rows, "rows")
    import pandas as pd

    from counterfair.audit.decomposition import DecompositionSettings, decompose
    from counterfair.audit.decomposition_result import allowed_effects
    from counterfair.io.load import load
    from counterfair.learn.fair import FairLearner

    fit: Fit | None = None
    predictor: Any = None
    response: Literal["prediction", "probability"] | None = getattr(args, "response", None)
    if response is not None and not args.learner:
        raise CommandError(
            f"--response {response} applies to --learner; the outcome "
            f"{args.outcome!r} is decomposed as its column holds it: drop --response"
        )
    if args.learner:
        folder = Path(args.run) / "learner"
        if not folder.is_dir():
            raise CommandError(
                f"{args.run} has no saved learner (no learner/ inside); make one with "
                "'counterfair learn RUN --target y', or give --outcome"
            )
        predictor = load(folder)
        if isinstance(predictor, FairLearner):
            # the learner's own copy of the run's fit is the world: the learner then reads
            # its inputs (latents, noise) from the worlds' shared abduction, as the
            # counterfactual audit does
            fit = predictor.scm_fit_
            _say_if_not_converged(fit, args.run)
            # response None: a classifier's gap in the probability of its positive class
    if fit is None:
        fit = _load_fit(args.run)
    if args.rows is None and fit.holes:  # the fit's own rows, missing values and all
        rows = fit.data
    try:
        allow = _names(args.allow)
        allowed = None if allow is None else allowed_effects(allow)  # before the work
        result = decompose(
            fit, rows, attribute=args.attribute, x0=args.x0, x1=args.x1,
            outcome=args.outcome, predictor=predictor, response=response,
            mediators=_names(args.mediators), confounders=_names(args.confounders),
            settings=DecompositionSettings(
                n_samples=args.n_samples, seed=args.seed, interval=args.interval
            ),
        )
        if allowed is not None:
            result = result.allow(allowed)
    except (ValueError, TypeError) as error:
        raise CommandError(str(error)) from error
    table = result.table
    if result.allowed is not None:
        unfair = result.unfair().drop(columns="term")
        unfair = unfair.rename(columns={"effect": "term", "contribution": "mean"})
        unfair = unfair.assign(form="unfair", sd=float("nan"))[list(table.columns)]
        table = pd.concat([table, unfair], ignore_index=True)
    _write_csv(table, out)
    print(result.summary())
    print(f"wrote {out}")
    return 0


def _sfm_numbers(args: argparse.Namespace) -> dict[str, int]:
    """The nuisance fits' NUTS settings, checked against ``--n-samples`` with the options'
    names (the library would name its arguments)."""
    settings = {name: SFM_DEFAULTS[name] if getattr(args, name) is None else getattr(args, name)
                for name in SFM_DEFAULTS}
    for name, value in settings.items():
        if value < (name != "warmup"):
            what = "0 or a positive number" if name == "warmup" else "a positive number"
            raise CommandError(f"--{name} {value}: give {what}")
    if args.n_samples < 2:
        raise CommandError(f"--n-samples {args.n_samples}: give at least 2")
    if not 0 < args.interval < 1:
        raise CommandError(f"--interval {args.interval}: give a number between 0 and 1")
    total = settings["chains"] * settings["draws"]
    if total < args.n_samples:
        raise CommandError(
            f"--chains {settings['chains']} x --draws {settings['draws']} = {total} posterior "
            f"draws per model, fewer than --n-samples {args.n_samples}: give more --draws or "
            "fewer --n-samples"
        )
    return settings


def _columns(value: str) -> list[str]:
    """Comma-separated column names ('' for none), each stripped of spaces."""
    return [name.strip() for name in value.split(",") if name.strip()]


def run_decompose_sfm(args: argparse.Namespace) -> int:
    """``counterfair decompose --data CSV ...``: the decomposition from the Standard
    Fairness Model's roles (:func:`counterfair.audit.fit_sfm`), written as CSV, its
    summary and notes printed.

    The options and ``--out`` are checked before the data are read; the roles are checked
    against the data (:func:`~counterfair.audit.sfm_roles.check_sfm_roles`, a
    :class:`~counterfair.errors.DataError` naming the column) before anything is fitted.
    Nothing is written unless the decomposition is done.
    """
    settings = _sfm_numbers(args)
    covariates = {*_columns(args.confounders), *_columns(args.mediators)}
    for name in _columns(args.categorical or ""):
        if name not in covariates:
            raise CommandError(
                f"--categorical names {name!r}, which is neither a confounder nor a mediator"
            )
    out = Path(args.out)
    split = {
        role: _split_groups(getattr(args, f"split_{role}"), f"--split-{role}")
        for role in ("confounders", "mediators")
        if getattr(args, f"split_{role}") is not None
    }
    if split:
        from counterfair.audit.sfm_split import check_groups

        for role, groups in split.items():
            try:
                check_groups(groups, tuple(_columns(getattr(args, role))), role,
                             option=f"--split-{role}")
            except (ValueError, TypeError) as error:
                raise CommandError(str(error)) from error
    if args.parts_out is not None and not split:
        raise _usage("--parts-out names the parts' CSV of a split: give --split-confounders "
                     "or --split-mediators, or drop it")
    targets = {"--out": out}
    if split:
        targets["--parts-out"] = Path(args.parts_out) if args.parts_out else _parts_path(out)
    if len({t.resolve() for t in targets.values()}) < len(targets):
        raise CommandError(f"--parts-out {targets['--parts-out']} is --out: name another file")
    for option, target in targets.items():
        _output_file(target, args.force)
        if not target.parent.is_dir():
            raise CommandError(f"{option} {target}: folder {target.parent} does not exist")
        if target.exists() and target.resolve() == Path(args.data).resolve():
            raise CommandError(f"{option} {target} is the --data file: write it elsewhere")
    with _stage("read the data"):
        data = read_csv(args.data, "data", nrows=args.nrows)
    from counterfair.audit.sfm_fit import SFMSettings, fit_sfm

    rows = args.rows or SFM_ROW_WEIGHTS[0]
    roles = {
        "attribute": args.attribute, "x0": args.x0, "x1": args.x1, "outcome": args.outcome,
        "confounders": _columns(args.confounders), "mediators": _columns(args.mediators),
        "categorical": _columns(args.categorical or ""), "family": args.family,
        "seed": args.seed,
    }
    measure = {"n_samples": args.n_samples, "interval": args.interval, "rows": rows}
    try:
        fit_settings = SFMSettings(
            groups=args.groups or SFM_GROUPINGS[0], method=args.method or SFM_METHODS[0],
            chains=settings["chains"], warmup=settings["warmup"], draws=settings["draws"],
            progress=False,
        )
        with _stage(f"decompose ({len(data):,} rows, {settings['chains']} chain(s) per fit)"):
            fitted = fit_sfm(data, **roles, settings=fit_settings)
            if split:
                parts = fitted.split(confounders=split.get("confounders"),
                                     mediators=split.get("mediators"), **measure)
                result = parts.decomposition
            else:
                result = fitted.decompose(**measure)
    except errors.DataError:
        raise  # naming the column: printed by guarded
    except (ValueError, TypeError) as error:
        raise CommandError(str(error)) from error
    staged = {out: _stage_csv(result.table, out)}
    if split:
        staged[targets["--parts-out"]] = _stage_csv(parts.table, targets["--parts-out"])
    _move_into_place(staged)
    print(parts.summary() if split else result.summary())
    for target in staged:
        print(f"wrote {target}")
    return 0


def _split_groups(value: str, option: str) -> list[list[str]]:
    """``'a,b;c'`` as ``[["a", "b"], ["c"]]``; an empty group is refused."""
    groups = [_columns(group) for group in value.split(";")]
    if any(not group for group in groups):
        raise CommandError(f"{option} {value!r}: a group is empty (groups are separated by "
                           "';', a group's columns by ',')")
    return groups


def _parts_path(out: Path) -> Path:
    """The parts' CSV beside ``out``: ``table.csv`` gives ``table.parts.csv``."""
    if out.suffix == ".csv":
        return out.with_suffix(".parts.csv")
    return out.with_name(out.name + ".parts.csv")


def guarded(function: Any, args: argparse.Namespace) -> int:
    """Run a command; a refused one prints its reason and returns :data:`BAD_INPUT`."""
    try:
        return int(function(args))
    except (CommandError, errors.SCMError, errors.DataError, errors.FairnessError,
            FileExistsError) as error:
        print(f"counterfair {args.command}: {one_line(str(error))}", file=sys.stderr)
        return BAD_INPUT


def one_line(message: str) -> str:
    """A message on one line: its lines joined by '; ' (an SCM file's list of problems, a
    parser's report, a file name holding a line break), or by a space after a line that
    ends with a colon (``invalid SCM document: nodes...``, not ``document:; nodes``)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    out = lines[0] if lines else ""
    for before, line in itertools.pairwise(lines):
        out += (" " if before.endswith(":") else "; ") + line
    return out


__all__ = [
    "CommandError", "add_counterfactual_parser", "add_decompose_parser", "add_fit_parser",
    "add_learn_parser", "audit_reference", "audit_task", "check_min_group_rows", "guarded",
    "is_run_folder", "one_line", "predictor_names", "read_csv", "run_audit",
    "run_counterfactual", "run_decompose", "run_decompose_sfm", "run_fit", "run_learn",
]
