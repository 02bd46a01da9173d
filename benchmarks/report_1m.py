"""`report --no-pdf` of every slice of the 1M benchmark against its one-pass limit (issue 53:
at most 7x).

The report is `mapreport report --dataset DS --out OUT --no-pdf --force` in a fresh process
(start, analysis, evidence packs, charts, pages and findings.json of the six slices). The limit
is `analysis.py`'s: three grouped DuckDB scans of the request table in a fresh process (per
shape and plan the latency, queue and compute p50/p95/p99; per shape and core the compute
median; per shape a 101-point latency grid), shown as the scans' own time and as the process's
wall time (its start and DuckDB's import included, as the report's is). Medians of `--runs`,
every command interleaved so the machine's drift hits them alike; the first round warms the
page cache and is not counted. `--baseline REV` (repeated) runs REV's mapreport beside this
tree's (`--without-tree`: only the revisions) and says whether each slice's findings.json is
the first one's (run ids and time stamps masked). `--profile` instead profiles one report of
this tree (or of the first `--baseline`) and prints where its time goes.

    .venv/bin/python benchmarks/report_1m.py --runs 5 --baseline 3d2f9b4
    .venv/bin/python benchmarks/report_1m.py --runs 5 --without-tree --baseline 3d2f9b4 \
        --baseline HEAD
    .venv/bin/python benchmarks/report_1m.py --profile
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analysis import LIMIT  # scripts beside this one
from fleet import PY, REPO, compile_package
from spark import dataset


def checkout(rev: str, work: Path) -> Path:
    """REV's mapreport and templates, extracted once into `work` and compiled to bytecode (a
    folder that holds them: that folder)."""
    if (Path(rev) / "mapreport").is_dir():
        return Path(rev).resolve()
    sha = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    tree = work / f"tree-{sha}"
    if not (tree / "mapreport").is_dir():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", sha, "mapreport", "templates"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    import compileall

    compileall.compile_dir(tree / "mapreport", quiet=1)
    return tree


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    """Wall seconds and stdout of one fresh process."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall, done.stdout


STAMP = re.compile(
    r"\d{8}T\d{6}Z-[0-9a-f]+-\d+|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?"
)
"""A run id or a time stamp: what two runs of the same report differ in."""


def findings(out: Path) -> dict[str, Any]:
    """Each slice's findings.json under `out`, its run ids and time stamps masked."""
    docs: dict[str, Any] = {}
    for path in sorted(out.rglob("findings.json")):
        docs[str(path.relative_to(out))] = json.loads(STAMP.sub("T", path.read_text()))
    return docs


def loadavg() -> str:
    """The machine's load averages (1, 5, 15 minutes)."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    """Print the report's and the limit's medians and their ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/mapreport-bench"))
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--baseline",
        action="append",
        default=[],
        help="a git revision (or a folder holding mapreport/ and templates/) run beside",
    )
    ap.add_argument(
        "--without-tree",
        action="store_true",
        help="only the --baseline revisions (this working tree holds others' edits in flux)",
    )
    ap.add_argument("--profile", action="store_true", help="instead: one report under cProfile")
    args = ap.parse_args()
    compile_package()
    ds = dataset(args.work, args.requests)
    scratch = args.work / "report-bench"
    scratch.mkdir(parents=True, exist_ok=True)
    trees: dict[str, dict[str, str]] = {} if args.without_tree else {"this tree": {**os.environ}}
    for rev in args.baseline:
        trees[f"at {rev}"] = {**os.environ, "PYTHONPATH": str(checkout(rev, args.work))}
    if args.profile:
        profile(ds, scratch, next(iter(trees.values())))
        return
    times: dict[str, list[float]] = {name: [] for name in trees}
    scans: list[float] = []
    limit_wall: list[float] = []
    print(f"load before: {loadavg()}")
    for i in range(args.runs + 1):
        for n, (name, env) in enumerate(trees.items()):
            out = scratch / f"out{n}"
            cmd = [PY, "-m", "mapreport", "report", "--dataset", str(ds), "--out", str(out)]
            wall, _ = timed([*cmd, "--no-pdf", "--force", "-q"], env, scratch)
            if i:
                times[name].append(wall)
        wall, text = timed([PY, "-c", LIMIT, str(ds)], dict(os.environ), scratch)
        if i:
            scans.append(json.loads(text.strip().splitlines()[-1])["s"])
            limit_wall.append(wall)
    print(f"load after: {loadavg()}")
    table(times, scans, limit_wall, args.runs)
    if len(trees) > 1:
        first, *others = trees
        ours = findings(scratch / "out0")
        for n, name in enumerate(others, start=1):
            theirs = findings(scratch / f"out{n}")
            same = [k for k in ours if theirs.get(k) == ours[k]]
            print(f"findings.json of {name} as {first}'s: {len(same)} of {len(ours)} slices")


def table(times: dict[str, list[float]], scans: list[float], limit: list[float], runs: int) -> None:
    """The medians as a Markdown table, each report against both forms of the limit."""
    med_scans, med_limit = statistics.median(scans), statistics.median(limit)
    print(f"| `report --no-pdf` | median of {runs} | range | / 3 scans | / their process |")
    print("|---|---:|---:|---:|---:|")
    for name, t in times.items():
        med = statistics.median(t)
        print(
            f"| {name} | {med:.2f} s | {min(t):.2f}-{max(t):.2f} s | "
            f"{med / med_scans:.1f}x | {med / med_limit:.1f}x |"
        )
    print(
        f"| limit: 3 grouped scans | {med_scans:.2f} s | {min(scans):.2f}-{max(scans):.2f} s | "
        f"| process {med_limit:.2f} s |"
    )


def profile(ds: Path, scratch: Path, env: dict[str, str]) -> None:
    """One report under cProfile: the functions with the most cumulative and own time."""
    stats = scratch / "report.prof"
    out = scratch / "out-profile"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [PY, "-m", "cProfile", "-o", str(stats), "-m", "mapreport", "report"]
    timed([*cmd, "--dataset", str(ds), "--out", str(out), "--no-pdf", "-q"], env, scratch)
    import pstats

    p = pstats.Stats(str(stats))
    p.sort_stats("cumulative").print_stats(r"mapreport", 40)
    p.sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
