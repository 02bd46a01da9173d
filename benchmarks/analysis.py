"""Every slice's analysis against its one-pass limit (issue 18, target 1: at most 2x).

The limit is the three grouped scans any per-shape report needs, run bare by DuckDB over the
same canonical dataset in one process: per (slice, shape, variant) the count and p50/p95/p99
of latency, queue wait and compute of ok requests; per (slice, shape, core) the median compute;
a 101-point latency grid per (slice, shape). The analysis is `analyze_slice` of every slice
(all its CIs). Each side runs in a fresh process on the same connection setup (the dataset's
views); the figure is the time from the connection to the last result, the process's start
and imports shown beside. Medians of `--runs`, the two sides interleaved.

    .venv/bin/python benchmarks/analysis.py --sizes 1000000 10000000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet import PY, compile_package, measure  # scripts beside this one
from spark import dataset

COMMON = """
import json, sys, time
t0 = time.perf_counter()
from pathlib import Path
from mapreport.analysis import Thresholds, analyze_slice, list_slices
from mapreport.engine import DUCKDB
from mapreport.store import Dataset
con = DUCKDB.connect(Dataset(Path(sys.argv[1])), None)
slices = list_slices(con)
t1 = time.perf_counter()
"""

ANALYSIS = (
    COMMON
    + """
for w, s in slices:
    analyze_slice(con, w, s, Thresholds())
print(json.dumps({"start_s": t1 - t0, "s": time.perf_counter() - t1, "slices": len(slices)}))
"""
)

LIMIT = (
    COMMON
    + """
OK = "status = 'ok'"
LAT = "CASE WHEN arrival_known IS NOT FALSE THEN compute_end_us - arrival_us END"
QUEUE = "CASE WHEN arrival_known IS NOT FALSE THEN compute_start_us - queue_start_us END"
COMPUTE = "compute_end_us - compute_start_us"
Q3 = "[0.5, 0.95, 0.99]"
scans = [
    f'''SELECT workload, slice, shape, coalesce(plan_variant, 'static') AS variant, count(*),
        quantile_cont({LAT}, {Q3}), quantile_cont({QUEUE}, {Q3}), quantile_cont({COMPUTE}, {Q3})
        FROM request WHERE {OK} GROUP BY ALL''',
    f'''SELECT workload, slice, shape, core, median({COMPUTE})
        FROM request WHERE {OK} GROUP BY ALL''',
    f'''SELECT workload, slice, shape,
        quantile_cont({LAT}, [x / 100 FOR x IN range(101)])
        FROM request WHERE {OK} GROUP BY ALL''',
]
rows = [len(con.execute(q).fetchall()) for q in scans]
print(json.dumps({"start_s": t1 - t0, "s": time.perf_counter() - t1, "rows": rows}))
"""
)


def run(code: str, ds: Path) -> dict[str, float]:
    """One fresh process of `code` over `ds`: its figures, with wall time and peak RSS."""
    wall, rss, out = measure([PY, "-c", code, str(ds)])
    got: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return got | {"wall_s": wall, "rss_mib": rss / 2**20}


def main() -> None:
    """Print the analysis, the limit and their ratio per size."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/mapreport-bench"))
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    compile_package()
    print("| requests | analysis | limit (3 scans) | ratio | limit 2x | analysis RSS | start |")
    print("|---:|---:|---:|---:|---|---:|---:|")
    figures = []
    for n in args.sizes:
        ds = dataset(args.work, n)
        a, lim = [], []
        for _ in range(args.runs):
            a.append(run(ANALYSIS, ds))
            lim.append(run(LIMIT, ds))
        med_a = statistics.median(x["s"] for x in a)
        med_l = statistics.median(x["s"] for x in lim)
        ratio = med_a / med_l
        rss = statistics.median(x["rss_mib"] for x in a)
        start = statistics.median(x["start_s"] for x in a)
        verdict = "met" if ratio <= 2 else "**not met**"
        print(
            f"| {n:,} | {med_a:.2f} s | {med_l:.2f} s | {ratio:.1f}x | {verdict} | "
            f"{rss:,.0f} MiB | {start:.2f} s |"
        )
        figures.append({"requests": n, "analysis": a, "limit": lim})
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
