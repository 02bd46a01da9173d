"""The analysis on DuckDB and on Spark local[2], side by side over the same dataset (issue 17).

Generates the fleet benchmark's inputs (`fleet.py`: six workloads, 40 shapes) at each size,
ingests them once into a canonical dataset, then runs every slice's `analyze_slice` in fresh
processes on each engine (medians of `--runs`; one run at 10M). The Spark run splits its time
from Spark's own stage metrics (its REST API on a local UI port): the session's start, the
dataset's views (reading the files' schemas), scan stages (those reading Parquet), shuffle
stages (aggregations, windows and joins after an exchange), and the driver (Python: transpiling,
the per-shape rows, bootstrap intervals; time with no Spark job running). From the same stages it
estimates the analysis with more cores: each stage takes its fixed overhead (measured here) plus
its task time spread over the cores, but never less than its longest task.

    .venv/bin/python benchmarks/spark.py --sizes 1000000 10000000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet import PY, REPO, compile_package, generate, measure  # a script beside this one

DUCKDB_RUN = """
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
from mapreport.analysis import Thresholds, analyze_slice, list_slices
from mapreport.dataset.store import Dataset
con = Dataset(Path(sys.argv[1])).connect()
slices = list_slices(con)
for w, s in slices:
    analyze_slice(con, w, s, Thresholds())
print(json.dumps({"total_s": time.perf_counter() - t0, "slices": len(slices)}))
"""

SPARK_RUN = """
import json, sys, time, urllib.request
from datetime import datetime
from pathlib import Path
t0 = time.perf_counter()
from mapreport.analysis import Thresholds, analyze_slice, list_slices
from mapreport.engine.engines import open_engine
from mapreport.engine.settings import EngineName, EngineSettings
from mapreport.dataset.store import Dataset
conf = {"spark.ui.enabled": "true", "spark.ui.port": "0", "spark.driver.memory": "4g",
        "spark.ui.retainedJobs": "100000", "spark.ui.retainedStages": "100000",
        "spark.sql.ui.retainedExecutions": "100000"}
engine = open_engine(EngineSettings(EngineName.SPARK, conf=conf))
session = engine.session
t_start = time.perf_counter()
con = engine.connect(Dataset(Path(sys.argv[1])), None)
t_views = time.perf_counter()
slices = list_slices(con)
for w, s in slices:
    analyze_slice(con, w, s, Thresholds())
t_end = time.perf_counter()
sc = session.sparkContext
api = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
def get(path):
    with urllib.request.urlopen(api + path) as r:
        return json.load(r)
def ts(text):
    return datetime.strptime(text.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
stages = {}
for st in get("/stages?status=complete"):
    summary = get(f"/stages/{st['stageId']}/{st['attemptId']}/taskSummary?quantiles=1.0")
    stages[st["stageId"]] = {
        "cpu_s": st["executorRunTime"] / 1000,
        "longest_s": summary["executorRunTime"][0] / 1000,
        "tasks": st["numTasks"],
        "scan": st["inputBytes"] > 0,
        "shuffle_bytes": st["shuffleReadBytes"] + st["shuffleWriteBytes"],
        "input_bytes": st["inputBytes"],
    }
jobs = []
for j in get("/jobs"):
    if not j.get("completionTime"):
        continue
    mine = [stages[i] for i in j["stageIds"] if i in stages]  # skipped stages ran before
    jobs.append({
        "start": ts(j["submissionTime"]),
        "end": ts(j["completionTime"]),
        "cpu_s": sum(x["cpu_s"] for x in mine),
        "longest_s": max((x["longest_s"] for x in mine), default=0.0),
    })
busy, last = 0.0, 0.0
for j in sorted(jobs, key=lambda j: j["start"]):  # the union of the jobs' intervals
    a = max(j["start"], last)
    if j["end"] > a:
        busy += j["end"] - a
        last = j["end"]
engine.close()
print(json.dumps({"total_s": t_end - t0, "start_s": t_start - t0, "views_s": t_views - t_start,
                  "analysis_s": t_end - t_views, "jobs_s": busy, "jobs": len(jobs),
                  "slices": len(slices), "stages": list(stages.values()), "job_list": jobs}))
"""


def dataset(work: Path, requests: int) -> Path:
    """The canonical dataset of the fleet inputs at this size (ingested once)."""
    ds = work / f"spark-ds-{requests}"
    if not (ds / "ingest_log").is_dir():
        inputs = generate(work / f"in-{requests}", requests)
        subprocess.run(
            [
                str(Path(PY).with_name("mapreport")),
                "ingest",
                "-q",
                "--dataset",
                str(ds),
                *map(str, inputs),
            ],
            check=True,
            cwd=REPO,
        )
    return ds


def one(code: str, ds: Path) -> tuple[float, int, dict[str, Any]]:
    """A fresh process's figures, its wall time and peak RSS (process tree)."""
    wall, peak, out = measure([PY, "-c", code, str(ds)])
    return wall, peak, json.loads(out.strip().splitlines()[-1])


def estimate(jobs: list[dict[str, Any]], driver_s: float, busy_s: float, cores: int) -> float:
    """The analysis with `cores` executor cores: the driver's time as measured, and Spark's
    busy time scaled by what each job would take: its fixed cost (its wall time less what its
    tasks explain on 2 cores: their time over 2, or the longest task) plus its task time over
    `cores`, never below its longest task. Jobs overlap (a query's subqueries run at once), so
    the scale is that of their summed walls. At 2 cores this is the measured time."""
    walls = sum(j["end"] - j["start"] for j in jobs)
    if walls <= 0:
        return driver_s + busy_s
    scaled = 0.0
    for j in jobs:
        wall = j["end"] - j["start"]
        fixed = max(wall - max(j["cpu_s"] / 2, j["longest_s"]), 0.0)
        scaled += fixed + max(j["cpu_s"] / cores, j["longest_s"])
    return float(driver_s + busy_s * scaled / walls)


CORES = (2, 8, 32, 128)
"""Executor cores the estimate is made for (2: this machine, as measured)."""


def table(header: list[str], rows: list[list[str]]) -> None:
    """A Markdown table, numbers right-aligned."""
    print("| " + " | ".join(header) + " |")
    print("|" + "---:|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/mapreport-bench"))
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    compile_package()
    args.work.mkdir(parents=True, exist_ok=True)
    figures = []
    for n in args.sizes:
        ds = dataset(args.work, n)
        runs = args.runs if n < 5_000_000 else 1
        duck = sorted((one(DUCKDB_RUN, ds) for _ in range(runs)), key=lambda r: r[0])
        spark = sorted((one(SPARK_RUN, ds) for _ in range(runs)), key=lambda r: r[0])
        d, s = duck[len(duck) // 2], spark[len(spark) // 2]
        st = s[2]["stages"]
        driver = s[2]["analysis_s"] - s[2]["jobs_s"]
        row = {
            "requests": n,
            "duckdb_s": d[0],
            "duckdb_rss_mib": d[1] / 2**20,
            "spark_s": s[0],
            "spark_rss_mib": s[1] / 2**20,
            "ratio": s[0] / d[0],
            "start_s": s[2]["start_s"],
            "views_s": s[2]["views_s"],
            "jobs_s": s[2]["jobs_s"],
            "driver_s": driver,
            "scan_task_s": sum(x["cpu_s"] for x in st if x["scan"]),
            "shuffle_task_s": sum(x["cpu_s"] for x in st if not x["scan"] and x["shuffle_bytes"]),
            "jobs": s[2]["jobs"],
            "stages": len(st),
            "tasks": sum(x["tasks"] for x in st),
            "input_mib": sum(x["input_bytes"] for x in st) / 2**20,
            "shuffle_mib": sum(x["shuffle_bytes"] for x in st) / 2**20,
            "estimate_s": {c: estimate(s[2]["job_list"], driver, s[2]["jobs_s"], c) for c in CORES},
            "duckdb_runs_s": [r[0] for r in duck],
            "spark_runs_s": [r[0] for r in spark],
            "job_list": s[2]["job_list"],
        }
        figures.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "job_list"}), flush=True)
    print()
    table(
        [
            "requests",
            "DuckDB",
            "Spark local[2]",
            "ratio",
            "start",
            "views",
            "Spark jobs",
            "driver",
            "scan task time",
            "shuffle task time",
            "jobs",
            "stages",
            "tasks",
        ],
        [
            [
                f"{r['requests']:,}",
                *(f"{r[k]:.1f} s" for k in ("duckdb_s", "spark_s")),
                f"{r['ratio']:.1f}x",
                *(f"{r[k]:.1f} s" for k in ("start_s", "views_s", "jobs_s", "driver_s")),
                *(f"{r[k]:.1f} s" for k in ("scan_task_s", "shuffle_task_s")),
                *(str(r[k]) for k in ("jobs", "stages", "tasks")),
            ]
            for r in figures
        ],
    )
    print()
    table(
        ["requests", "Spark RSS", "DuckDB RSS", "input read", "shuffled"]
        + [f"estimate: {c} cores" for c in CORES],
        [
            [
                f"{r['requests']:,}",
                *(f"{r[k]:,.0f} MiB" for k in ("spark_rss_mib", "duckdb_rss_mib")),
                *(f"{r[k]:,.0f} MiB" for k in ("input_mib", "shuffle_mib")),
                *(f"{r['estimate_s'][c]:.1f} s" for c in CORES),
            ]
            for r in figures
        ],
    )
    print(
        f"\nmedian of {args.runs} fresh processes per engine (one at 10M); spread: "
        + "; ".join(
            f"{r['requests']:,}: DuckDB {statistics.pstdev(r['duckdb_runs_s']):.2f} s, "
            f"Spark {statistics.pstdev(r['spark_runs_s']):.2f} s"
            for r in figures
        )
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
