"""Many small files: `mapreport ingest` of N small runtime files, and its unchanged rerun,
against the linear limit of issue 13 (2,000 files within 5x the 500-file time).

Each measurement is a fresh `mapreport ingest` process into a fresh dataset (the rerun: the
same dataset again); the figure is the median of `--runs`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LIMIT = 5.0
"""The most the 4x larger ingest may take, as a multiple of the smaller one (linear: 4x)."""
RECORD = {
    "shape": {"batch": 4, "seq": 96},
    "arrival_us": 10.0,
    "compute_start_us": 12.5,
    "compute_end_us": 20.0,
    "plan_id": "p",
    "plan_variant": "static",
}


def generate(folder: Path, files: int, lines: int) -> None:
    """`files` runtime files of `lines` requests each, over five workloads."""
    folder.mkdir(parents=True)
    for k in range(files):
        with open(folder / f"r{k}.jsonl", "w") as fh:
            for i in range(lines):
                rec = {**RECORD, "workload": f"w{k % 5}", "request_id": f"{k}-{i}"}
                fh.write(json.dumps(rec) + "\n")


def timed(args: list[str]) -> float:
    """Seconds one fresh process takes."""
    t0 = time.perf_counter()
    subprocess.run(args, check=True)
    return time.perf_counter() - t0


def main() -> None:
    """Print the medians and the ratio against the limit."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs=2, default=[500, 2000])
    ap.add_argument("--lines", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    opts = ap.parse_args()
    cmd = [sys.executable, "-m", "mapreport.app.cli", "ingest", "-q", "--dataset"]
    work = Path(tempfile.mkdtemp(prefix="many-files-"))
    try:
        rows = []
        for n in opts.sizes:
            generate(work / f"f{n}", n, opts.lines)
            first, rerun = [], []
            for r in range(opts.runs):
                ds = work / f"ds{n}-{r}"
                first.append(timed([*cmd, str(ds), str(work / f"f{n}")]))
                rerun.append(timed([*cmd, str(ds), str(work / f"f{n}")]))
            rows.append((n, statistics.median(first), statistics.median(rerun)))
        print(f"{'files':>6} {'ingest':>9} {'rerun':>9}")
        for n, a, b in rows:
            print(f"{n:>6} {a:>8.2f}s {b:>8.2f}s")
        (n0, a0, b0), (n1, a1, b1) = rows
        print(
            f"{n1} vs {n0} files: ingest {a1 / a0:.2f}x, rerun {b1 / b0:.2f}x "
            f"(limit {LIMIT:.0f}x; linear is {n1 / n0:.0f}x): "
            + ("met" if a1 / a0 <= LIMIT and b1 / b0 <= LIMIT else "NOT met")
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
