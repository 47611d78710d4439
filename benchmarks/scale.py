"""How counterfair's cost grows with rows: 10k, 100k and 1M rows in memory, 10M through Dask.

Data are simulated from the law school level 2 SCM fitted on the real law school data
(posterior means of the parameters, counterfair's own forward simulator), so the rows
look like the study's. For each size, every stage is timed and its peak resident memory
is sampled (every 20 ms, this process and every child process, i.e. the Dask workers):

* ``fit``: NUTS on a stratified subsample of the rows (``SCM.fit(max_rows=...)``);
* ``fit_integrated_all_rows`` (sizes up to ``--integrated-up-to``, default 100,000):
  NUTS on every row with K integrated out (``latents="integrated"``, 2 chains of
  300 draws after the fit's default warm-up: a Laplace start and 50 iterations), issue
  32's column; not summed into the end-to-end totals;
* ``abduction``: posterior means of the latent K for every row (exact abduction);
* ``learn``: Fair K (Algorithm 1) on a subsample of the rows;
* ``predict``: Fair K's predictions for every row;
* ``cf_audit``: the counterfactual audit of the Full predictor under ``do(sex)``
  (each row's other sex: one counterfactual world per row), 50 samples per row,
  summaries only -- the configuration of issue 19's audit target;
* ``cf_audit_race``: the same under ``do(race)`` for each of the seven other race
  levels (seven counterfactual worlds per row, so about seven times the work);
* ``group_audit``: group measures of Fair K's predictions by race and sex, analytic
  intervals;
* ``report``: the HTML report.

The 10M-row run writes the rows to parquet, reads them back with ``dask.dataframe``
and runs ``predict``, ``cf_audit`` and ``group_audit`` on a
``distributed.LocalCluster(n_workers=2, processes=True)``.

The slope of time against rows is given for the row-wise stages (every stage but
``fit``, whose NUTS run sees the same 20,000-row subsample at every size) and for
each stage; the end-to-end total, fit included, grows more slowly still.

Run (minutes to an hour on 2 cores)::

    python benchmarks/scale.py --data-dir ../shared/data            # 10k, 100k, 1M, 10M
    python benchmarks/scale.py --sizes 10000 100000 --no-dask        # a quick look

It prints a table per stage and writes ``benchmarks/results/scale.json`` and
``benchmarks/results/scale.png`` (time and peak memory against rows, log-log).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psutil

RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {
    "end_to_end_1m_seconds": 600.0,
    "end_to_end_1m_peak_gb": 4.0,
    "cf_audit_1m_seconds": 180.0,
    "cf_audit_1m_peak_gb": 2.0,
    "dask_10m_over_1m": 12.0,
    "dask_worker_peak_gb": 3.0,
    "slope_100k_1m": 1.05,
    "integrated_fit_100k_seconds": 300.0,
}
"""Issue 19's targets on 2 cores, and issue 32's: 100,000 rows fitted with K integrated
out in 5 minutes, no subsample."""

GB = 2.0**30


class PeakMemory:
    """Sample the resident memory of this process and of its children while a block runs."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.peak_self = 0
        self.peak_children: dict[int, int] = {}
        self._stop = threading.Event()

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            try:
                self.peak_self = max(self.peak_self, me.memory_info().rss)
                for child in me.children(recursive=True):
                    try:
                        rss = child.memory_info().rss
                    except psutil.Error:
                        continue
                    self.peak_children[child.pid] = max(self.peak_children.get(child.pid, 0), rss)
            except psutil.Error:
                pass
            self._stop.wait(self.interval)

    @contextmanager
    def watch(self) -> Iterator[PeakMemory]:
        thread = threading.Thread(target=self._sample, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()


def stage(records: list[dict[str, Any]], size: int, name: str, mode: str,
          work: Callable[[], Any]) -> Any:
    """Run ``work`` once, record its wall time and peak memory, print one line."""
    monitor = PeakMemory()
    start = time.perf_counter()
    with monitor.watch():
        result = work()
    seconds = time.perf_counter() - start
    worker_peak = max(monitor.peak_children.values(), default=0)
    record = {
        "rows": size,
        "mode": mode,
        "stage": name,
        "seconds": round(seconds, 2),
        "peak_rss_gb": round(monitor.peak_self / GB, 3),
        "worker_peak_rss_gb": round(worker_peak / GB, 3),
    }
    records.append(record)
    print(
        f"{mode:>6} {size:>10,} rows  {name:<12} {seconds:8.1f} s  "
        f"peak {monitor.peak_self / GB:6.2f} GB"
        + (f"  workers {worker_peak / GB:5.2f} GB" if worker_peak else ""),
        flush=True,
    )
    return result


def slope(sizes: list[int], seconds: list[float]) -> float:
    """Least-squares slope of log(time) against log(rows)."""
    return float(np.polyfit(np.log(sizes), np.log(seconds), 1)[0])


def parameters(fit: Any) -> dict[str, Any]:
    """Posterior means of every parameter, in the form ``SCM.sample`` takes."""
    posterior = fit.idata.posterior
    return {
        name: np.asarray(posterior[name].mean(("chain", "draw")).values)
        for name in fit.scm.parameter_names()
    }


def simulated_rows(scm: Any, params: dict[str, Any], n: int, *, levels: dict[str, Any],
                   probs: dict[str, Any], seed: int) -> pd.DataFrame:
    """``n`` rows from the SCM (no latent column), drawn in blocks of 1M rows."""
    block = 1_000_000
    parts = []
    for start in range(0, n, block):
        part = scm.sample(
            min(block, n - start),
            params=params,
            seed=seed + start // block,
            levels=levels,
            protected_probs=probs,
            return_latents=False,
        )
        parts.append(part)
    frame = pd.concat(parts, ignore_index=True)
    for column, column_levels in levels.items():
        frame[column] = pd.Categorical(frame[column], categories=list(column_levels))
    return frame


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("COUNTERFAIR_DATA"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--dask-rows", type=int, default=10_000_000)
    parser.add_argument("--no-dask", action="store_true")
    parser.add_argument("--reuse-memory", action="store_true",
                        help="keep the in-memory records of --out and run only the Dask stage")
    parser.add_argument("--fit-rows", type=int, default=20_000,
                        help="rows NUTS sees (stratified subsample); default 20,000")
    parser.add_argument("--samples", type=int, default=50, help="samples per row in audits")
    parser.add_argument("--integrated-up-to", type=int, default=100_000,
                        help="sizes up to this also fit every row with K integrated out "
                        "(no subsample; issue 32's column); 0: never")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS / "scale.json")
    args = parser.parse_args(argv)

    from sklearn.linear_model import LinearRegression

    import counterfair as cf
    from counterfair.datasets.law_school_models import law_school_level2

    scm = law_school_level2()
    data = cf.datasets.load_law_school(args.data_dir)
    columns = ["race", "sex", "UGPA", "LSAT", "ZFYA"]
    print("fitting the generating SCM on the law school data ...", flush=True)
    source_fit = scm.fit(cf.datasets.law_school_subsample(data, 4000, seed=args.seed)[columns],
                         chains=2, warmup=500, draws=500, seed=args.seed)
    params = parameters(source_fit)
    levels = {n: source_fit.encoding.levels[n] for n in scm.protected}
    probs = {  # the data's shares of the levels the generating fit saw
        n: {k: v for k, v in data[n].value_counts(normalize=True).items() if k in levels[n]}
        for n in scm.protected
    }

    records: list[dict[str, Any]] = []
    done: list[int] = []
    if args.reuse_memory:
        kept = json.loads(args.out.read_text())["records"]
        records = [r for r in kept if r["mode"] == "memory"]
        done = sorted({int(r["rows"]) for r in records})
    for size in [] if args.reuse_memory else args.sizes:
        rows = simulated_rows(scm, params, size, levels=levels, probs=probs, seed=args.seed)
        run_in_memory(records, size, rows, scm, args, LinearRegression, cf)
        del rows
        done.append(size)
        save(args, records, done, None)  # a run cut short keeps the sizes it finished
    if not args.no_dask:
        run_dask(records, args.dask_rows, scm, params, levels, probs, args, LinearRegression, cf)
    summary = save(args, records, done, None if args.no_dask else args.dask_rows)
    print(json.dumps(summary, indent=2))
    return 0


def save(args: argparse.Namespace, records: list[dict[str, Any]], sizes: list[int],
         dask_rows: int | None) -> dict[str, Any]:
    """Write the records and their summary (JSON, then the plot), atomically; the summary."""
    summary = summarise(records, sizes, dask_rows)
    payload = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "python": sys.version.split()[0]},
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "records": records,
        "summary": summary,
        "targets": TARGETS,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=2))
    os.replace(tmp, args.out)
    plot(records, args.out.with_suffix(".png"))
    return summary


def fit_subsample(scm: Any, rows: pd.DataFrame, args: argparse.Namespace) -> Any:
    """NUTS on a stratified subsample of ``args.fit_rows`` rows (``SCM.fit(subsample=...)``)."""
    return scm.fit(rows, subsample=min(args.fit_rows, len(rows)), chains=2, warmup=500,
                   draws=500, seed=args.seed)


INTEGRATED_STAGE = "fit_integrated_all_rows"
"""The column of issue 32: NUTS on every row, K integrated out (not summed into the
end-to-end totals, which fit a subsample)."""


def fit_integrated(scm: Any, rows: pd.DataFrame, args: argparse.Namespace) -> Any:
    """NUTS on every row with K integrated out of the likelihood (no subsample)."""
    return scm.fit(rows, max_rows=None, latents="integrated", chains=2, draws=300,
                   seed=args.seed)  # warm-up: the fit's default (50 after a Laplace start)


def integrated_record(fit: Any) -> dict[str, Any]:
    """The integrated fit's convergence and quadrature, beside its time."""
    d = fit.diagnostics
    return {"max_rhat": float(d.max_rhat), "min_ess_bulk": float(d.min_ess_bulk),
            "divergences": int(d.divergences),
            "nodes": None if fit.quadrature is None else fit.quadrature.nodes}


def run_in_memory(records: list[dict[str, Any]], size: int, rows: pd.DataFrame, scm: Any,
                  args: argparse.Namespace, estimator: Any, cf: Any) -> None:
    """Every stage on ``size`` rows held in memory."""
    mode = "memory"
    features = rows.drop(columns="ZFYA")
    fit = stage(records, size, "fit", mode, lambda: fit_subsample(scm, rows, args))
    if size <= args.integrated_up_to:
        integrated = stage(records, size, INTEGRATED_STAGE, mode,
                           lambda: fit_integrated(scm, rows, args))
        records[-1].update(integrated_record(integrated))
        del integrated
    stage(records, size, "abduction", mode,
          lambda: fit.latents(features, n_samples=20)["K"].mean(axis=0))
    learn_rows = rows.sample(n=min(size, args.fit_rows), random_state=args.seed)
    fair = stage(records, size, "learn", mode, lambda: cf.FairLearner(
        fit,
        target="ZFYA",
        features=cf.inputs.Latent(),
        estimator=estimator(),
        n_samples=args.samples,
        seed=args.seed,
    ).fit(learn_rows))
    predictions = stage(records, size, "predict", mode, lambda: fair.predict(features))
    full = cf.full_predictor(scm, target="ZFYA", estimator=estimator()).fit(learn_rows)
    audit = stage(records, size, "cf_audit", mode, lambda: cf.audit.counterfactual_fairness(
        fit, features, full,
        settings=cf.audit.AuditSettings(
            attributes=["sex"], n_samples=args.samples, seed=args.seed,
        ),
    ))
    audit_race = stage(
        records, size, "cf_audit_race", mode, lambda: cf.audit.counterfactual_fairness(
            fit, features, full,
            settings=cf.audit.AuditSettings(
                attributes=["race"], n_samples=args.samples, seed=args.seed,
            ),
        ))
    protected = rows[["race", "sex"]]
    regression = cf.audit.group_audit.Regression()
    stage(records, size, "group_audit", mode, lambda: cf.audit.GroupAudit(
        rows["ZFYA"].to_numpy(), predictions, protected, task=regression, ci_method="analytic",
    ).metrics())
    with tempfile.TemporaryDirectory() as tmp:
        stage(records, size, "report", mode, lambda: cf.audit.write_report(
            Path(tmp) / "report.html",
            cf.audit.GroupAudit(
                rows["ZFYA"].to_numpy(), {"Fair K": predictions}, protected, task=regression,
                ci_method="analytic",
            ),
            counterfactual={"Full, do(sex)": audit, "Full, do(race)": audit_race},
        ))


def run_dask(records: list[dict[str, Any]], size: int, scm: Any, params: dict[str, Any],
             levels: dict[str, Any], probs: dict[str, Any], args: argparse.Namespace,
             estimator: Any, cf: Any) -> None:
    """predict, cf_audit and group_audit on ``size`` rows read from parquet by 2 workers."""
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    mode = "dask"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "rows"
        folder.mkdir()
        block = 1_000_000
        for i, start in enumerate(range(0, size, block)):
            part = simulated_rows(scm, params, min(block, size - start), levels=levels,
                                  probs=probs, seed=args.seed + 1000 + i)
            part.to_parquet(folder / f"part-{i:04d}.parquet", index=False)
        first = pd.read_parquet(folder / "part-0000.parquet")
        fit = fit_subsample(scm, first, args)
        learn_rows = first.sample(n=min(len(first), args.fit_rows), random_state=args.seed)
        fair = cf.FairLearner(
            fit,
            target="ZFYA",
            features=cf.inputs.Latent(),
            estimator=estimator(),
            n_samples=args.samples,
            seed=args.seed,
        ).fit(learn_rows)
        full = cf.full_predictor(scm, target="ZFYA", estimator=estimator()).fit(learn_rows)
        del first, learn_rows
        import dask

        from counterfair.dask import WORKER_CONFIG

        with dask.config.set(WORKER_CONFIG), LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, memory_limit="3.5GiB"
        ) as cluster, Client(cluster):
            rows = dd.read_parquet(str(folder))
            features = rows.drop(columns="ZFYA")
            predictions = stage(records, size, "predict", mode, lambda: fair.predict(features))
            stage(records, size, "cf_audit", mode, lambda: cf.audit.counterfactual_fairness(
                fit, features, full,
                settings=cf.audit.AuditSettings(
                    attributes=["sex"], n_samples=args.samples, seed=args.seed,
                ),
            ))
            # the group audit reads its columns on the workers and merges per-stratum
            # sums there (counterfair.dask.group_audits); only the predictions, NumPy on the
            # client, are cut at the partition boundaries and sent
            stage(records, size, "group_audit", mode, lambda: cf.audit.GroupAudit(
                rows["ZFYA"], predictions, rows[["race", "sex"]],
                task=cf.audit.group_audit.Regression(), ci_method="analytic",
            ).metrics())


def summarise(records: list[dict[str, Any]], sizes: list[int], dask_rows: int | None
              ) -> dict[str, Any]:
    """End-to-end figures, the slope from 100k to 1M and each figure's ratio to its target."""
    frame = pd.DataFrame(records)
    integrated = frame[frame["stage"] == INTEGRATED_STAGE]
    frame = frame[frame["stage"] != INTEGRATED_STAGE]
    memory = frame[frame["mode"] == "memory"]
    totals = memory.groupby("rows")["seconds"].sum()
    peaks = memory.groupby("rows")["peak_rss_gb"].max()
    out: dict[str, Any] = {
        "end_to_end_seconds": {int(k): float(v) for k, v in totals.items()},
        "end_to_end_peak_gb": {int(k): float(v) for k, v in peaks.items()},
    }
    if len(integrated):
        out["integrated_fit_all_rows"] = integrated[
            ["rows", "seconds", "peak_rss_gb", "max_rhat", "min_ess_bulk", "nodes"]
        ].to_dict(orient="records")
        at_100k = integrated[integrated["rows"] == 100_000]
        if len(at_100k):
            out.setdefault("ratios_to_target", {})["integrated_fit_100k_seconds"] = (
                float(at_100k["seconds"].iloc[0]) / TARGETS["integrated_fit_100k_seconds"]
            )
    big = [s for s in sizes if s >= 100_000]
    if len(big) >= 2:
        row_wise = memory[memory["stage"] != "fit"].groupby("rows")["seconds"].sum()
        out["slope_rows_100k_up"] = round(slope(big, [float(row_wise[s]) for s in big]), 3)
        out["slope_end_to_end_100k_up"] = round(
            slope(big, [float(totals[s]) for s in big]), 3
        )
        out["slope_by_stage_100k_up"] = {
            name: round(slope(big, [float(part.set_index("rows").loc[s, "seconds"])
                                    for s in big]), 3)
            for name, part in memory.groupby("stage")
            if name != "fit" and set(big) <= set(part["rows"])
            and (part.set_index("rows").loc[big, "seconds"] > 0.5).all()
        }
    if 1_000_000 in totals.index:
        audit = memory[(memory["rows"] == 1_000_000) & (memory["stage"] == "cf_audit")].iloc[0]
        out.setdefault("ratios_to_target", {}).update({
            "end_to_end_1m_seconds": float(totals[1_000_000]) / TARGETS["end_to_end_1m_seconds"],
            "end_to_end_1m_peak_gb": float(peaks[1_000_000]) / TARGETS["end_to_end_1m_peak_gb"],
            "cf_audit_1m_seconds": float(audit["seconds"]) / TARGETS["cf_audit_1m_seconds"],
            "cf_audit_1m_peak_gb": float(audit["peak_rss_gb"]) / TARGETS["cf_audit_1m_peak_gb"],
        })
        if "slope_rows_100k_up" in out:
            out["ratios_to_target"]["slope_100k_1m"] = (
                out["slope_rows_100k_up"] / TARGETS["slope_100k_1m"]
            )
        if dask_rows is not None:
            dask = frame[frame["mode"] == "dask"]
            stages = list(dask["stage"])
            same = memory[(memory["rows"] == 1_000_000) & memory["stage"].isin(stages)]
            ratio = float(dask["seconds"].sum()) / float(same["seconds"].sum())
            out["dask_over_1m_same_stages"] = round(ratio, 2)
            out["ratios_to_target"]["dask_10m_over_1m"] = ratio / TARGETS["dask_10m_over_1m"]
            out["ratios_to_target"]["dask_worker_peak_gb"] = (
                float(dask["worker_peak_rss_gb"].max()) / TARGETS["dask_worker_peak_gb"]
            )
    return out


def plot(records: list[dict[str, Any]], path: Path) -> None:
    """Time and peak memory per stage against rows, log-log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = pd.DataFrame(records)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for (name, mode), part in frame.groupby(["stage", "mode"]):
        style = "o-" if mode == "memory" else "s--"
        left.plot(part["rows"], part["seconds"], style, label=f"{name} ({mode})")
        right.plot(part["rows"], part[["peak_rss_gb", "worker_peak_rss_gb"]].max(axis=1),
                   style, label=f"{name} ({mode})")
    for axis, label in ((left, "wall time (s)"), (right, "peak resident memory (GB)")):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("rows")
        axis.set_ylabel(label)
        axis.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=120)
    os.replace(tmp, path)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
