"""Every slice's analysis against its one-pass limit (issue 18, target 1: at most 2x).

The limit is the three grouped scans any per-shape report needs, run bare by DuckDB over the
same canonical dataset in one process: per (slice, shape, variant) the count and p50/p95/p99
of latency, queue wait and compute of ok requests; per (slice, shape, core) the median compute;
a 101-point latency grid per (slice, shape). The analysis is `analyze_slice` of every slice
(all its CIs). Each side runs in a fresh process on the same connection setup (the dataset's
views); the figure is the time from the connection to the last result, the process's start
and imports shown beside. Medians of `--runs`, the two sides interleaved.

    .venv/bin/python benchmarks/analysis.py --sizes 1000000 10000000 --runs 3
    .venv/bin/python benchmarks/analysis.py --sizes 1000000 --statements   # where it goes
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
from mapreport.engine.engines import DUCKDB
from mapreport.dataset.store import Dataset
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


STATEMENTS = (
    COMMON
    + """
import sys
from collections import defaultdict
spent = defaultdict(lambda: [0, 0.0])  # "module.function" that ran it -> [statements, seconds]

def charge(t0):
    caller = sys._getframe(2)
    key = caller.f_globals["__name__"].rsplit(".", 1)[-1] + "." + caller.f_code.co_name
    spent[key][0] += 1
    spent[key][1] += time.perf_counter() - t0

class Rows:  # a result fetched while timed, read afterwards as the caller reads it
    def __init__(self, cur):
        self.description, self.rows = cur.description, cur.fetchall()
    def fetchall(self):
        return self.rows
    def fetchone(self):
        return self.rows[0] if self.rows else None

class Table:
    def __init__(self, rel):
        self.table = rel.to_arrow_table()
    def to_arrow_table(self):
        return self.table

class Timed:  # the connection, each statement timed with its result fetched
    def __getattr__(self, name):
        return getattr(con, name)
    def execute(self, query, parameters=None):
        t0 = time.perf_counter()
        cur = con.execute(query, parameters)
        rows = Rows(cur) if cur.description else cur
        charge(t0)
        return rows
    def sql(self, query, *, params=None):
        t0 = time.perf_counter()
        table = Table(con.sql(query, params=params))
        charge(t0)
        return table

timed = Timed()
for w, s in slices:
    analyze_slice(timed, w, s, Thresholds())
total = time.perf_counter() - t1
by = sorted(spent.items(), key=lambda kv: -kv[1][1])
print(json.dumps({"s": total, "slices": len(slices), "statements": by}))
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
    ap.add_argument(
        "--statements",
        action="store_true",
        help="instead: one analysis per size, its SQL time per calling function",
    )
    args = ap.parse_args()
    compile_package()
    if args.statements:
        for n in args.sizes:
            by_statement(dataset(args.work, n), n)
        return
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


def by_statement(ds: Path, n: int) -> None:
    """Print where one analysis of every slice spends its SQL time, by the function that ran
    each statement (results fetched inside the timing)."""
    _, _, out = measure([PY, "-c", STATEMENTS, str(ds)])
    got = json.loads(out.strip().splitlines()[-1])
    rows = got["statements"]
    sql = sum(s for _, (_, s) in rows)
    count = sum(c for _, (c, _) in rows)
    print(
        f"{n:,} requests, {got['slices']} slices: analysis {got['s']:.2f} s, "
        f"SQL {sql:.2f} s in {count} statements"
    )
    print("| function | statements | seconds |")
    print("|---|---:|---:|")
    for name, (c, s) in rows:
        print(f"| `{name}` | {c} | {s:.3f} |")


if __name__ == "__main__":
    main()
