"""Command line entry point.

* ``counterfair audit data.csv --label y --predictions p --protected race sex`` --
  group-fairness HTML report of any predictions;
* ``counterfair compile`` -- compile the shipped Stan programs ahead of time;
* ``counterfair fit | learn | counterfactual | decompose`` and ``counterfair audit RUN/
  ...`` -- your own SCM file and CSV data (:mod:`counterfair.cli.run`); ``counterfair
  decompose --data CSV ...`` -- a gap decomposed from the Standard Fairness Model's roles,
  with no SCM file.

The studies (law school, COMPAS, Adult, the explanations) are scripts of the
repository's ``experiments/`` folder, not commands: the wheel does not carry them.

At the top, this module imports the standard library and counterfair modules that import
no more (:mod:`counterfair.cli.run`, :mod:`counterfair.logs`): ``counterfair --help`` and a
mistyped command answer without loading pandas, arviz or the pipeline. Each command
imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from counterfair.cli import falsify as cli_falsify
from counterfair.cli import run as cli_run
from counterfair.logs import console, speaking_scm_file, warnings_as_lines

logger = logging.getLogger(__name__)


class Parser(argparse.ArgumentParser):
    """An argument parser whose refusals are one line on standard error, exit code 2.

    argparse prints the whole usage before its error; a refused command line here says
    what is wrong and where the usage is, on one line.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {cli_run.one_line(message)} (see '{self.prog} --help')\n")


def _audit_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "audit",
        help="group-fairness audit of predictions in a CSV file (HTML report)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Read labels, predictions and protected attributes from a CSV file and "
        "write a self-contained HTML report of group fairness measures. Given a run folder "
        "(from 'counterfair fit') instead of a CSV file, --predictions is a CSV with one "
        "column per model and one row per row of the run's data, the labels and protected "
        "columns come from the run's data, and the report adds the counterfactual audit of "
        "the run's learner (from 'counterfair learn') when there is one.",
        epilog="examples:\n  counterfair audit data.csv --label y --predictions p1 p2 "
        "--protected race sex\n  counterfair audit run/ --predictions preds.csv "
        "--protected race,sex --label ZFYA",
    )
    p.add_argument("csv", help="CSV file with one row per individual, or a run folder")
    p.add_argument(
        "--label", default=None,
        help="column of actual outcomes (with a run folder: default the learner's target)",
    )
    p.add_argument(
        "--predictions", nargs="+", required=True,
        help="prediction column(s), one per model; with a run folder: a predictions CSV",
    )
    p.add_argument(
        "--protected", nargs="+", required=True,
        help="protected attribute columns (space- or comma-separated)",
    )
    p.add_argument(
        "--task", choices=("classification", "regression"), default=None,
        help="default classification (with a run folder: from the label's values)",
    )
    p.add_argument("--threshold", type=float, default=0.5, help="score threshold")
    p.add_argument("--tau", type=float, default=0.8, help="parity band [tau, 1/tau]")
    p.add_argument(
        "--reference", action="append", metavar="ATTRIBUTE=LEVEL",
        help="reference group of an attribute, e.g. --reference colour=White (repeat it or "
        "separate with commas; an intersection as 'colour x sex=White x Male'); default: "
        "each attribute's largest group",
    )
    p.add_argument(
        "--min-group-rows", type=int, default=30, metavar="N",
        help="groups with fewer rows (or a reference group with fewer) are marked 'too few "
        "rows' instead of pass or FAIL (default 30; 0 judges every group)",
    )
    p.add_argument(
        "--name", action="append", metavar="NAME",
        help="the predictors' names in the report, one per audited prediction column in "
        "order (repeat it or separate with commas); default: the column names, and "
        "'learner' for the predictions 'counterfair learn' wrote",
    )
    p.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples (0: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="audit.html", help="output HTML file")
    p.add_argument(
        "--overwrite", "--force", action="store_true",
        help="replace the output file if it exists",
    )
    p.add_argument(
        "--cf-samples", type=int, default=None,
        help="with a run folder: posterior samples per row of the counterfactual audit",
    )
    p.add_argument(
        "--response", choices=("probability", "prediction"), default=None,
        help="with a run folder: what the counterfactual audit of the learner compares "
        "(default: a classifier's probability of the positive class, a regressor's "
        "prediction; 'prediction': a classifier's labels)",
    )


def _run_audit(args: argparse.Namespace) -> int:
    if cli_run.is_run_folder(args.csv):
        args.force = args.overwrite
        return cli_run.guarded(cli_run.run_audit, args)
    return cli_run.guarded(_audit_csv, args)


def _audit_csv(args: argparse.Namespace) -> int:
    """``counterfair audit data.csv ...``: everything in one CSV file."""
    from counterfair.audit import GroupAudit, write_report

    if args.label is None:
        raise cli_run.CommandError("--label is required with a CSV file")
    args.protected = [p for item in args.protected for p in item.split(",") if p]
    args.task = args.task or "classification"
    frame = cli_run.read_csv(args.csv, "audit")
    wanted = [args.label, *args.predictions, *args.protected]
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise cli_run.CommandError(
            f"column {missing[0]!r} is not in {args.csv}; columns: {list(frame.columns)}"
        )
    if Path(args.out).exists() and not args.overwrite:
        raise cli_run.CommandError(f"{args.out} already exists; pass --overwrite to replace it")
    protected = frame[args.protected].astype(str)
    reference = cli_run.audit_reference(args.reference, protected, args.protected)
    names = cli_run.predictor_names(args.name, list(args.predictions))
    try:
        task = cli_run.audit_task(args.task, args.threshold, args.tau,
                                  cli_run.check_min_group_rows(args.min_group_rows))
        predictions = {name: frame[column].to_numpy()
                       for name, column in zip(names, args.predictions, strict=True)}
        path = write_report(
            args.out,
            GroupAudit(frame[args.label].to_numpy(), predictions, protected, task=task,
                       reference=reference, n_bootstrap=args.bootstrap, seed=args.seed),
            overwrite=args.overwrite,
        )
    except (ValueError, TypeError) as error:  # the audit's own checks of its inputs
        raise cli_run.CommandError(str(error).splitlines()[0]) from error
    logger.info("wrote %s", path)
    return 0


def _compile_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compile",
        help="compile the shipped Stan programs ahead of time (cached per machine)",
        description="Compile the Stan programs of the ready-made models (law school level 2 "
        "fit and abduction, level 3 fit) so that the first fit does not wait for the C++ "
        "compiler. Programs already in the cache are skipped.",
    )
    p.add_argument(
        "--backend",
        choices=("auto", "pystan", "cmdstanpy", "all"),
        default="auto",
        help="back end whose cache to fill ('all': every back end found)",
    )
    p.add_argument("--jobs", type=int, default=2, help="programs compiled at once (CmdStan)")


def _run_compile(args: argparse.Namespace) -> int:
    from counterfair.datasets.law_school_models import shipped_programs
    from counterfair.stan.backend import available_backends
    from counterfair.stan.precompile import compile_programs

    backends = available_backends() if args.backend == "all" else [args.backend]
    programs = shipped_programs()
    for backend in backends:
        compile_programs(programs, backend=backend, jobs=args.jobs, report=print)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``counterfair`` argument parser; its options are defined without importing the
    pipeline, so that ``counterfair --help`` answers at once."""
    parser = Parser(
        prog="counterfair", description="Bayesian counterfactual fairness on Stan."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _audit_parser(sub)
    _compile_parser(sub)
    cli_run.add_fit_parser(sub)
    cli_run.add_learn_parser(sub)
    cli_run.add_counterfactual_parser(sub)
    cli_run.add_decompose_parser(sub)
    cli_falsify.add_falsify_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        console()  # counterfair's messages on standard error, at the level of COUNTERFAIR_LOG
    except ValueError as error:
        print(f"counterfair: {error}", file=sys.stderr)
        return 2
    # every warning once per command, as a [counterfair] line
    with warnings_as_lines():
        return _dispatch(arguments)


def _dispatch(arguments: list[str]) -> int:
    args = build_parser().parse_args(arguments)
    if args.command in RUN_COMMANDS:  # a user's own SCM file: fixes as SCM-file keys
        with speaking_scm_file():
            return cli_run.guarded(RUN_COMMANDS[args.command], args)
    return _run_command(args)


RUN_COMMANDS = {
    "fit": cli_run.run_fit,
    "learn": cli_run.run_learn,
    "counterfactual": cli_run.run_counterfactual,
    "decompose": cli_run.run_decompose,
    "falsify": cli_falsify.run_falsify,
}
"""The commands on a user's own SCM file and data (:mod:`counterfair.cli.run`)."""


def _run_command(args: argparse.Namespace) -> int:
    if args.command == "audit":
        with speaking_scm_file():
            return _run_audit(args)
    if args.command == "compile":
        return _run_compile(args)
    return 2

if __name__ == "__main__":
    raise SystemExit(main())
