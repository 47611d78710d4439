"""Law school: one ZFYA predictor fair with respect to race in three causal worlds at once.

Russell, Kusner, Loftus and Silva (NeurIPS 2017, section 3) penalise a predictor's
counterfactual change in every candidate SCM (:mod:`counterfair.learn.multiworld`). The
worlds here, each fitted by NUTS on the same training rows:

* **level 2** -- Kusner et al.'s latent knowledge K -> UGPA, LSAT (Poisson), ZFYA;
* **level 3** -- additive noise: UGPA and LSAT regressed on race and sex;
* **level 2 + UGPA -> LSAT** -- level 2 where grades also drive the test score, so
  race reaches LSAT directly and through UGPA.

The predictor is a linear regression of ZFYA on race, sex, UGPA and LSAT (the
Full predictor at ``lam = 0``); its change under ``do(race = a')`` for every level
``a'`` is penalised in every world. A sweep of ``lam`` gives test RMSE against
the worst world's mean counterfactual change on the test rows.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from counterfair import atomic
from counterfair.datasets.law_school import law_school_split, law_school_subsample, load_law_school
from counterfair.datasets.law_school_models import law_school_level2, law_school_level3
from counterfair.inference.fit import Fit
from counterfair.learn.multiworld import trade_off
from counterfair.model.scm import SCM
from experiments.arguments import check_data_dir, output_folder

logger = logging.getLogger(f"counterfair.experiments.{Path(__file__).stem}")

FEATURES = ["race", "sex", "UGPA", "LSAT"]
LAMS: tuple[float, ...] = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 100.0)
CHOSEN_LAM = 1.0
"""The lam the study recommends (see :func:`choose_lam`)."""


def level2_with_ugpa_lsat() -> SCM:
    """Level 2 plus an edge UGPA -> LSAT (race reaches LSAT directly and via UGPA)."""
    g = law_school_level2().graph  # a copy
    g.add_edge("UGPA", "LSAT")
    return SCM(g)


WORLDS = {
    "level 2": (law_school_level2, ["race", "sex", "UGPA", "LSAT", "ZFYA"]),
    "level 3": (law_school_level3, ["race", "sex", "UGPA", "LSAT"]),
    "level 2 + UGPA->LSAT": (level2_with_ugpa_lsat, ["race", "sex", "UGPA", "LSAT", "ZFYA"]),
}


@dataclass
class WorldsConfig:
    """Settings of one run (``quick``: 400 training and 100 test rows, short chains)."""

    data_dir: str | None = None
    out: Path = field(default_factory=lambda: Path("results/law_school_worlds"))
    quick: bool = False
    force: bool = False
    seed: int = 0
    chains: int = 2
    warmup: int = 250
    draws: int = 750
    n_samples: int = 20
    train_rows: int | None = None
    test_rows: int | None = None
    lams: Sequence[float] = LAMS

    @classmethod
    def quick_mode(cls, **overrides: Any) -> WorldsConfig:
        """Settings for a smoke test (a minute, not a result)."""
        settings: dict[str, Any] = {
            "quick": True,
            "warmup": 150,
            "draws": 150,
            "n_samples": 5,
            "train_rows": 400,
            "test_rows": 100,
        }
        settings.update(overrides)
        return cls(**settings)


def choose_lam(table: pd.DataFrame, *, rmse_budget: float = 0.01) -> float:
    """The ``lam`` with the smallest worst-world change whose RMSE is within budget of lam=0."""
    base = float(table["rmse"].iloc[0])
    ok = table[table["rmse"] <= base + rmse_budget]
    return float(ok.sort_values("worst_change")["lam"].iloc[0])


def _check_out(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise SystemExit(f"counterfair: --out {out} is a file")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise SystemExit(f"counterfair: --out {out} is not empty (use --force to overwrite)")


def _write(path: Path, text: str | None = None, figure: Any = None) -> None:
    """Write atomically (a temporary file in the same folder, then a rename)."""
    if figure is not None:
        atomic.write(path, lambda tmp: figure.savefig(tmp, dpi=120, bbox_inches="tight",
                                                      format="png"))
    else:
        atomic.write(path, text or "")


def plot(table: pd.DataFrame, names: Sequence[str], chosen: float) -> Any:
    """RMSE against each world's counterfactual change, points labelled by lam."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for j, name in enumerate(names):
        ax.plot(table[f"change_world_{j}"], table["rmse"], "o-", ms=3, lw=1, label=name)
    ax.plot(table["worst_change"], table["rmse"], "k--", lw=1.5, label="worst world")
    for row in table.itertuples(index=False):
        ax.annotate(
            f"{row.lam:g}",
            (row.worst_change, row.rmse),
            fontsize=7,
            xytext=(3, 3),
            textcoords="offset points",
        )
    pick = table[table["lam"] == chosen].iloc[0]
    ax.plot([pick["worst_change"]], [pick["rmse"]], "r*", ms=12, label=f"chosen lam={chosen:g}")
    ax.set_xlabel("mean |counterfactual change of the prediction| under do(race)")
    ax.set_ylabel("test RMSE of ZFYA")
    ax.set_title("Fair in every world: accuracy against counterfactual change")
    ax.legend(fontsize=8)
    return fig


def run(config: WorldsConfig) -> pd.DataFrame:
    """Fit the worlds, sweep lam, write table.csv, table.md, trade_off.png, run.json."""
    out = Path(config.out)
    _check_out(out, config.force)
    start = time.perf_counter()
    train, test = law_school_split(load_law_school(config.data_dir), seed=config.seed)
    if config.train_rows is not None:
        train = law_school_subsample(train, config.train_rows, seed=config.seed)
    if config.test_rows is not None:
        test = law_school_subsample(test, config.test_rows, seed=config.seed)
    logger.info("law-school-worlds: %d training rows, %d test rows", len(train), len(test))
    fits: list[Fit] = []
    diagnostics: dict[str, Any] = {}
    for name, (build, columns) in WORLDS.items():
        t0 = time.perf_counter()
        fit = build().fit(
            train[columns],
            chains=config.chains,
            warmup=config.warmup,
            draws=config.draws,
            seed=config.seed,
        )
        fits.append(fit)
        summary = fit.summary()
        diagnostics[name] = {
            "seconds": round(time.perf_counter() - t0, 1),
            "max_rhat": float(summary["r_hat"].max()),
            "min_ess_bulk": float(summary["ess_bulk"].min()),
        }
        logger.info("law-school-worlds: %s fitted in %s s", name, diagnostics[name]["seconds"])
    table = trade_off(
        fits,
        target="ZFYA",
        features=FEATURES,
        attribute="race",
        lams=list(config.lams),
        test=test,
        n_samples=config.n_samples,
        seed=config.seed,
    )
    names = list(WORLDS)
    chosen = CHOSEN_LAM if CHOSEN_LAM in list(config.lams) else choose_lam(table)
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "table.csv", table.to_csv(index=False))
    _write(out / "table.md", markdown(table, names, chosen, len(train), len(test)))
    import matplotlib.pyplot as plt

    fig = plot(table, names, chosen)
    _write(out / "trade_off.png", figure=fig)
    plt.close(fig)
    run_info = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()},
        "worlds": names,
        "diagnostics": diagnostics,
        "chosen_lam": chosen,
        "seconds": round(time.perf_counter() - start, 1),
    }
    _write(out / "run.json", json.dumps(run_info, indent=2, default=float))
    logger.info("law-school-worlds:\n%s", table.to_string(index=False))
    return table


def markdown(
    table: pd.DataFrame, names: Sequence[str], chosen: float, n_train: int, n_test: int
) -> str:
    """The trade-off table as markdown."""
    head = ["lam", "test RMSE", *[f"change: {n}" for n in names], "worst world"]
    lines = [
        "# Law school: fair under every candidate world (Russell et al. 2017)",
        "",
        f"{n_train} training rows, {n_test} test rows. Linear regression of ZFYA on race, "
        "sex, UGPA, LSAT; mean |change of the prediction| under do(race = each other level), "
        f"over test rows and posterior samples. Chosen lam = {chosen:g}.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for _, row in table.iterrows():
        cells = [f"{row['lam']:g}", f"{row['rmse']:.4f}"]
        cells += [f"{row[f'change_world_{j}']:.4f}" for j in range(len(names))]
        cells.append(f"{row['worst_change']:.4f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The study's options (shared by ``python -m experiments.law_school_worlds`` and ``main``)."""
    p.add_argument("--data-dir", default=None, help="folder holding law_data.csv")
    p.add_argument("--out", default=None, help="output folder (default results/law_school_worlds)")
    p.add_argument("--quick", action="store_true", help="smoke test: subset, short chains")
    p.add_argument("--force", action="store_true", help="overwrite a non-empty --out")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lams", type=float, nargs="+", default=None, help="values of lam")


def run_from_arguments(args: argparse.Namespace) -> int:
    """Run the study from parsed options."""
    check_data_dir(args.data_dir)
    if args.lams is not None and any(v < 0 for v in args.lams):
        raise SystemExit("counterfair: --lams must be >= 0")
    common: dict[str, Any] = {
        "data_dir": args.data_dir,
        "out": output_folder(args.out, quick=args.quick, study="law-school-worlds"),
        "seed": args.seed,
        "force": args.force,
    }
    if args.lams is not None:
        common["lams"] = tuple(args.lams)
    config = WorldsConfig.quick_mode(**common) if args.quick else WorldsConfig(**common)
    run(config)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m experiments.law_school_worlds [options]``."""
    parser = argparse.ArgumentParser(prog="python -m experiments.law_school_worlds",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    add_arguments(parser)
    return run_from_arguments(parser.parse_args(argv))


if __name__ == "__main__":
    from experiments.arguments import run_script

    raise SystemExit(run_script(main))
