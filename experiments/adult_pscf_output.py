"""Outputs of the Adult path-specific study: Markdown tables, CSV / JSON files and a plot.

Every file is written through a temporary file in the output folder and moved into
place with :func:`os.replace`, so that an interrupted run leaves no half-written file.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from counterfair import atomic

logger = logging.getLogger(f"counterfair.experiments.{Path(__file__).stem}")


def results_markdown(results: dict[str, Any]) -> str:
    """The results tables in Markdown."""
    info = results["info"]
    lines = [
        "| predictor | accuracy | AUC | total change do(sex) | path-specific change "
        "| Chiappa 2019 accuracy |",
        "|---|---|---|---|---|---|",
    ]
    for r in results["metrics"].itertuples(index=False):
        chiappa = "not found" if r.chiappa_2019_accuracy is None or pd.isna(
            r.chiappa_2019_accuracy) else f"{r.chiappa_2019_accuracy:.3f}"
        lines.append(
            f"| {r.predictor} | {r.accuracy:.3f} | {r.auc:.3f} | {r.total_change:.4f} "
            f"| {r.path_specific_change:.2e} | {chiappa} |"
        )
    lines += [
        "",
        "| predictor | selection rate F | selection rate M | ratio F/M | FPR ratio "
        "| FNR ratio |",
        "|---|---|---|---|---|---|",
    ]
    for g in results["groups"].itertuples(index=False):
        lines.append(
            f"| {g.predictor} | {g.selection_rate_female:.3f} | {g.selection_rate_male:.3f} "
            f"| {g.selection_rate_ratio:.2f} | {g.fpr_ratio:.2f} | {g.fnr_ratio:.2f} |"
        )
    rows, fit = info["rows"], info["fit"]
    lines += [
        "",
        "Changes: posterior mean of |P(income) under do(sex = other) - factual P(income)| "
        f"over {rows['audited']} unlabelled test rows; the path-specific change moves sex "
        "along the unfair paths sex -> income and sex -> marital only.",
        "",
        f"Rows: NUTS fit on {rows['scm_fit']} of {rows['train']} training rows "
        f"({fit['chains']} chains x {fit['warmup']} warmup + {fit['draws']} draws, "
        f"{fit['backend']}: max R-hat {fit['max_rhat']}, latent max R-hat "
        f"{fit['latent_max_rhat']}, min bulk ESS {fit['min_ess_bulk']}, "
        f"{fit['divergences']} divergences); Full and Unaware trained on all "
        f"{rows['train']} training rows, Kusner L2 and PSCF on {rows['fair_learners']}; "
        f"scored on {rows['test_scored']} of {rows['test_file']} rows of adult.test.",
        "",
        info["chiappa_note"],
        "",
        f"Total wall time {info['total_seconds']:.0f} s on {info['machine']['platform']} "
        f"({info['machine']['cpus']} CPUs visible); per stage: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in info["timings_seconds"].items())
        + ".",
        "",
    ]
    return "\n".join(lines)


def plot_changes(results: dict[str, Any], path: Path) -> None:
    """Bar chart of total and path-specific change per predictor, saved to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = results["metrics"]
    x = np.arange(len(metrics))
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    ax.bar(x - 0.2, metrics["total_change"], 0.4, label="total change, do(sex)")
    ax.bar(x + 0.2, metrics["path_specific_change"], 0.4,
           label="path-specific change (sex -> income, sex -> marital)")
    ax.set_xticks(x, list(metrics["predictor"]))
    ax.set_ylabel("mean |change of P(income > 50K)|")
    ax.set_title("Adult: counterfactual change of the predicted probability")
    ax.legend(fontsize=8)
    fig.tight_layout()
    atomic.write(path, lambda name: fig.savefig(name, format="png", dpi=120))
    plt.close(fig)


def write_results(results: dict[str, Any], out: Path) -> None:
    """Write the tables, the JSON summary and the plot under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    text = results_markdown(results)
    info = dict(results["info"])
    info["metrics"] = results["metrics"].to_dict(orient="records")
    info["group_audit"] = results["groups"].to_dict(orient="records")
    for name, content in (
        ("results.md", text),
        ("results.csv", results["metrics"].to_csv(index=False)),
        ("group_audit.csv", results["groups"].to_csv(index=False)),
        ("results.json", json.dumps(info, indent=2, default=float)),
    ):
        atomic.write(out / name, content)
    plot_changes(results, out / "changes.png")
    logger.info("%s", text)
