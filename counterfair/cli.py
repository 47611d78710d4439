"""Command line entry point: ``counterfair law-school ...`` and ``counterfair audit ...``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path


def _law_school_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "law-school",
        help="reproduce the law school study of Kusner et al. (2017)",
        description="Fit the level 2 and level 3 SCMs, train Full / Unaware / Fair K / "
        "Fair Add, report test RMSE beside the paper's and plot counterfactual densities.",
    )
    p.add_argument("--data-dir", default=None, help="folder holding law_data.csv")
    p.add_argument("--out", default="results/law_school", help="output folder")
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


def _run_law_school(args: argparse.Namespace) -> int:
    from counterfair.experiments.law_school import LawSchoolConfig, run

    overrides = {
        key: getattr(args, key)
        for key in (
            "chains",
            "warmup",
            "draws",
            "n_samples",
            "cf_samples",
            "train_rows",
            "test_rows",
        )
        if getattr(args, key) is not None
    }
    common = {
        "data_dir": args.data_dir,
        "out": Path(args.out),
        "seed": args.seed,
        "audit": args.audit,
    }
    if args.quick:
        config = LawSchoolConfig.quick_mode(**common, **overrides)
    else:
        config = LawSchoolConfig(**common, **overrides)
    run(config)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``counterfair`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="counterfair", description="Bayesian counterfactual fairness on Stan."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _law_school_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args = build_parser().parse_args(argv)
    if args.command == "law-school":
        return _run_law_school(args)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
