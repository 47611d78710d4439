"""``counterfair falsify SCM_FILE --data CSV``: does the data contradict the graph?

Reads a user's SCM file and a CSV, runs :func:`counterfair.falsify`, prints its verdict,
reasons and table, and writes the table as CSV (``--out``). The options and ``--out`` are
checked before anything is read; nothing is written unless the tests are done, and an
existing ``--out`` is kept unless ``--force``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from counterfair import atomic

from .run import CommandError, read_csv

__all__ = ["add_falsify_parser", "run_falsify"]


def add_falsify_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "falsify",
        help="test the conditional independences and tetrads an SCM file's graph implies "
        "on a CSV, with a verdict (falsified, not falsified, not falsifiable)",
        description="Derive what the SCM's graph implies over the data's columns (latents "
        "included), test each implication and say whether the data contradict the graph.",
    )
    p.add_argument("scm", metavar="SCM_FILE", help="the SCM file (YAML or JSON)")
    p.add_argument("--data", required=True, metavar="CSV",
                   help="a CSV with a column per protected attribute and observed node")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise error rate of the verdict (default 0.05)")
    p.add_argument("--permutations", type=int, default=20,
                   help="random relabellings of the graph for DoWhy's baseline (default 20)")
    p.add_argument("--seed", type=int, default=0, help="seed of the relabellings")
    p.add_argument("--out", default=None, metavar="CSV",
                   help="write the table of implications and tests here")
    p.add_argument("--force", action="store_true", help="replace an existing --out")


def run_falsify(args: argparse.Namespace) -> int:
    if not 0 < args.alpha < 1:
        raise CommandError(f"--alpha {args.alpha}: give a number between 0 and 1")
    if args.permutations < 0:
        raise CommandError(f"--permutations {args.permutations}: give 0 or more")
    out = Path(args.out) if args.out else None
    if out is not None:
        if out.exists() and not args.force:
            raise CommandError(f"{out} already exists; pass --force to replace it")
        if not out.parent.is_dir():
            raise CommandError(f"--out {out}: folder {out.parent} does not exist")
        if out.exists() and out.resolve() == Path(args.data).resolve():
            raise CommandError(f"--out {out} is the --data file: write the table elsewhere")
    from counterfair.audit.falsification import falsify
    from counterfair.io.scm_file import read_scm

    scm = read_scm(args.scm)
    data = read_csv(args.data, "data")
    result = falsify(scm, data, alpha=args.alpha, n_permutations=args.permutations,
                     seed=args.seed)
    print(result.summary())
    if out is not None:
        atomic.write(out, lambda tmp: result.table.to_csv(tmp, index=False))
        print(f"wrote {out}")
    return 0
