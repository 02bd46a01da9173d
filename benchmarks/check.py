"""What verifying a dataset costs (issue 49): `mapreport check` (every data file hashed and every
page read with its checksum verified), `check --quick` (footers only), and the checksum test every
read makes before its first statement (`Dataset.verify`), against the work they guard.

Generates the fleet benchmark's workloads (`fleet.generate`) at one size, ingests them, then
measures, each in a fresh process, medians of `--runs`:

- `check` and `check --quick` of the dataset, against the bytes the dataset holds (MB/s) and
  against a bare `cat` of its files (the page cache warm for both);
- a connection's views over the whole dataset with and without `verify` (a process that hashes
  the files against one that does not), against the analysis of one slice.

    .venv/bin/python benchmarks/check.py --requests 1000000 --runs 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fleet import compile_package, generate

PY = sys.executable
CONNECT = """
import sys, time
from pathlib import Path
from mapreport.dataset import integrity
from mapreport.dataset.store import Dataset
if sys.argv[2] == "off":
    integrity.IntegrityFiles.verify = lambda self, paths: None
ds = Dataset(Path(sys.argv[1]))
t = time.perf_counter()
con = ds.connect()
print(time.perf_counter() - t)
"""
SLICE = """
import sys, time
from pathlib import Path
from mapreport.analysis import Thresholds, analyze_slice, list_slices
from mapreport.dataset.store import Dataset
con = Dataset(Path(sys.argv[1])).connect()
w, s = list_slices(con)[0]
t = time.perf_counter()
analyze_slice(con, w, s, Thresholds())
print(time.perf_counter() - t)
"""


def timed(cmd: list[str]) -> float:
    """Wall seconds of one fresh process."""
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def printed(cmd: list[str]) -> float:
    """The seconds a fresh process printed."""
    return float(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def main() -> None:
    """Generate, ingest, measure, print."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--work", type=Path, default=Path("/tmp/mapreport-bench-check"))
    args = ap.parse_args()
    compile_package()
    dataset = args.work / "dataset"
    if not dataset.is_dir():
        files = generate(args.work / "inputs", args.requests)
        mapreport = [PY, "-m", "mapreport"]
        subprocess.run([*mapreport, "ingest", "--dataset", str(dataset), "-q", *map(str, files)])
    data = [f for f in dataset.rglob("*.parquet") if "history" not in f.parts]
    size = sum(f.stat().st_size for f in data) / 1e6
    check = [PY, "-m", "mapreport", "check", "--dataset", str(dataset)]
    cat = ["cat", *map(str, data)]
    rows = {
        "cat of the data files": [timed(cat) for _ in range(args.runs)],
        "check": [timed(check) for _ in range(args.runs)],
        "check --quick": [timed([*check, "--quick"]) for _ in range(args.runs)],
    }
    connect = [PY, "-c", CONNECT, str(dataset)]
    views = {
        "views with verify": [printed([*connect, "on"]) for _ in range(args.runs)],
        "views without verify": [printed([*connect, "off"]) for _ in range(args.runs)],
        "one slice's analysis": [printed([PY, "-c", SLICE, str(dataset)]) for _ in range(3)],
    }
    print(f"{args.requests:,} requests: {len(data)} data files, {size:.1f} MB")
    for name, runs in rows.items():
        median = statistics.median(runs)
        print(f"  {name:26} {median:7.2f} s  ({size / median:7.1f} MB/s)")
    for name, runs in views.items():
        print(f"  {name:26} {statistics.median(runs):7.3f} s")
    cost = statistics.median(views["views with verify"]) - statistics.median(
        views["views without verify"]
    )
    analysis = statistics.median(views["one slice's analysis"])
    share = cost / analysis
    print(f"  verify costs {cost:.3f} s a connection, {share:.1%} of one slice's analysis")


if __name__ == "__main__":
    main()
