"""The command line's start against its limits (issue 18, target 7): `mapreport --help` under
0.25 s and `mapreport formats` under 0.4 s, beside the bare interpreter and `import click`.
With --trace (issue 53, item 1): the fixed cost of one small real trace, `mapreport ingest`
then `report --no-pdf` into a fresh dataset (and both in one process: `ingest --report`),
beside HTA's `TraceAnalysis` load plus `get_temporal_breakdown` of the same trace (`make bench`
installs HTA 0.5), and the import time of each (the sum of `python -X importtime`'s own times,
and the heavy libraries loaded).
--baseline REV runs the same commands on REV's mapreport too, interleaved (before/after).
With --compile-log (issue 53): `mapreport ingest --report` of one TORCH_TRACE log against
tlparse's rendering of it (`make bench` installs tlparse 0.4.3).

Every figure is the median wall time of fresh processes, the commands interleaved so the
machine's drift hits them alike; what each imports is listed by `python -X importtime`.

    .venv/bin/python benchmarks/startup.py --runs 21
    .venv/bin/python benchmarks/startup.py --runs 5 --trace \
        ../shared/realdata/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz
    .venv/bin/python benchmarks/startup.py --runs 7 --compile-log \
        ../shared/realdata/tlparse/inputs/multi_rank_logs/dedicated_log_torch_trace_rank_1.log
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet import REPO, compile_package  # the benchmarks' shared setup

BIN = Path(sys.executable).parent
COMMANDS: dict[str, tuple[list[str], float | None]] = {
    "python -c pass": ([sys.executable, "-c", "pass"], None),
    "python -c 'import click'": ([sys.executable, "-c", "import click"], None),
    "mapreport --help": ([str(BIN / "mapreport"), "--help"], 0.25),
    "mapreport formats": ([str(BIN / "mapreport"), "formats"], 0.40),
}
"""Name -> (command, limit in seconds, None for a floor shown beside)."""


def wall(cmd: list[str]) -> float:
    """Seconds one fresh process of `cmd` takes, start to exit."""
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    """Print each command's median, range and limit."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--trace", type=Path, help="a small Kineto trace: its ingest + report")
    ap.add_argument("--baseline", help="a git revision whose mapreport runs beside this one")
    ap.add_argument(
        "--compile-log", type=Path, help="a TORCH_TRACE log: `ingest --report` against tlparse"
    )
    args = ap.parse_args()
    compile_package()
    if args.trace:
        trace_fixed_cost(args.trace, args.runs, args.baseline)
        return
    if args.compile_log:
        compile_log_cost(args.compile_log, args.runs)
        return
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for cmd, _ in COMMANDS.values():
        wall(cmd)  # the page cache warm for every command alike
    for _ in range(args.runs):
        for name, (cmd, _) in COMMANDS.items():
            times[name].append(wall(cmd))
    print(f"| command | median of {args.runs} | range | limit | |")
    print("|---|---:|---:|---:|---|")
    for name, (_, limit) in COMMANDS.items():
        t = times[name]
        med = statistics.median(t)
        verdict = "" if limit is None else ("met" if med < limit else "**not met**")
        shown = "" if limit is None else f"{limit:.2f} s"
        print(f"| `{name}` | {med:.3f} s | {min(t):.3f}-{max(t):.3f} s | {shown} | {verdict} |")


HTA = """
import sys
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1], trace_files={0: sys.argv[2]})
a.get_temporal_breakdown(visualize=False)
"""
ONE = "mapreport ingest --report"
"""The same ingest and report in one process (`ingest --report OUT`)."""
LOADED = ("scipy", "ruptures", "weasyprint", "kaleido", "pandas", "pyspark", "xprof", "jsonschema")
"""Heavy libraries whose loading `--trace` reports (issue 53: load only what a slice uses)."""


def imports(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, list[str]]:
    """Seconds `cmd` (a Python command line) spends importing, by `-X importtime`'s own
    times summed, and which of LOADED it loads."""
    err = subprocess.run(
        [cmd[0], "-X", "importtime", *cmd[1:]],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,  # not the repo: `-m mapreport` would import the tree it runs in
    ).stderr
    rows = re.findall(r"^import time:\s+(\d+) \|\s+(\d+) \| *(\S+)$", err, re.M)
    # a refused import (the command refuses pandas: `app/entry.py`) is listed too, in
    # microseconds: a library counts as loaded where its import took a millisecond or more
    loaded = sorted({m for _, total, m in rows if m in LOADED and int(total) >= 1000})
    return sum(int(us) for us, _, _ in rows) / 1e6, loaded


def trace_fixed_cost(trace: Path, runs: int, baseline: str | None) -> None:
    """Ingest + `report --no-pdf` of `trace` in fresh processes, beside HTA's load and
    temporal breakdown of it, interleaved; with `baseline`, that revision's too."""
    work = Path(tempfile.mkdtemp(prefix="startup-trace-"))
    shutil.copy(trace, work / trace.name)  # HTA reads a folder; both read the same copy
    trees: dict[str, dict[str, str]] = {"mapreport": dict(os.environ)}
    if baseline:
        tree = work / "baseline"
        tree.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", baseline, "mapreport", "templates"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        import compileall

        compileall.compile_dir(tree / "mapreport", quiet=1)
        trees[f"mapreport at {baseline}"] = {**os.environ, "PYTHONPATH": str(tree)}
    has_hta = subprocess.run([sys.executable, "-c", "import hta"], capture_output=True).returncode
    mr = [sys.executable, "-m", "mapreport"]

    def ours(env: dict[str, str], n: int, one: bool = False) -> list[list[str]]:
        ds, out = work / f"ds{n}", work / f"out{n}"
        if one:  # `ingest --report`: the same report, in the ingest's process
            return [
                [*mr, "ingest", "--dataset", str(ds), "--report", str(out), str(work / trace.name)]
            ]
        return [
            [*mr, "ingest", "--dataset", str(ds), str(work / trace.name)],
            [*mr, "report", "--dataset", str(ds), "--out", str(out), "--no-pdf"],
        ]

    hta = [sys.executable, "-c", HTA, str(work), trace.name]
    times: dict[str, list[float]] = {name: [] for name in trees}
    times |= {f"{name}: {ONE}": [] for name in trees}
    if has_hta == 0:
        times["HTA load + temporal breakdown"] = []
    n = 0
    hta_failed: str | None = None
    for i in range(runs + 1):  # the first round warms the page cache and is not counted
        for name, env in trees.items():
            n += 1
            t0 = time.perf_counter()
            for cmd in ours(env, n):
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env, cwd=work)
            if i:
                times[name].append(time.perf_counter() - t0)
        for name, env in trees.items():
            n += 1
            t0 = time.perf_counter()
            (one,) = ours(env, n, one=True)
            subprocess.run(one, check=True, stdout=subprocess.DEVNULL, env=env, cwd=work)
            if i:
                times[f"{name}: {ONE}"].append(time.perf_counter() - t0)
        if has_hta == 0 and hta_failed is None:
            t0 = time.perf_counter()
            done = subprocess.run(hta, capture_output=True, text=True, cwd=work)
            if done.returncode:  # HTA cannot read every real trace: mapreport's times stand alone
                last = (done.stderr.strip().splitlines() or ["no message"])[-1]
                hta_failed = f"exit {done.returncode}: {last[:200]}"
                del times["HTA load + temporal breakdown"]
            elif i:
                times["HTA load + temporal breakdown"].append(time.perf_counter() - t0)
    print(f"{trace.name}: fresh processes, median of {runs} (`uptime`: {os.getloadavg()})")
    print("| command | median | range | imports | heavy libraries loaded |")
    print("|---|---:|---:|---:|---|")
    for name, t in times.items():
        if name in trees:
            n += 1
            ingest_cmd, report_cmd = ours(trees[name], n)
            ti, li = imports(ingest_cmd, trees[name], work)
            tr, lr = imports(report_cmd, trees[name], work)
            imp, heavy = f"{ti:.2f} + {tr:.2f} s", f"ingest: {li}; report: {lr}"
        elif name.endswith(ONE):
            env = trees[name.removesuffix(f": {ONE}")]
            n += 1
            to, lo = imports(ours(env, n, one=True)[0], env, work)
            imp, heavy = f"{to:.2f} s", str(lo)
        else:
            hta_import = [sys.executable, "-c", "import hta.trace_analysis"]
            tp, lp = imports(hta_import, dict(os.environ), work)
            imp, heavy = f"{tp:.2f} s", str(lp)
        label = f"`{name}` ingest + report --no-pdf" if name in trees else name
        label = f"`{name}` (one process)" if name.endswith(ONE) else label
        spread = f"{min(t):.2f}-{max(t):.2f} s"
        print(f"| {label} | {statistics.median(t):.2f} s | {spread} | {imp} | {heavy} |")
    if has_hta != 0:
        print("HTA is not installed (`make bench` installs holistictraceanalysis==0.5.0)")
    elif hta_failed:
        print(f"HTA could not load this trace ({hta_failed})")
    shutil.rmtree(work)


def compile_log_cost(log: Path, runs: int) -> None:
    """`mapreport ingest --report` of one compile log (TORCH_TRACE) against tlparse's
    rendering of it (`make bench` installs tlparse 0.4.3: issue 53, under 3x), interleaved,
    fresh processes, medians."""
    tlparse = shutil.which("tlparse", path=str(BIN))
    if tlparse is None:
        print("tlparse is not installed (`make bench` installs tlparse==0.4.3)")
        return
    work = Path(tempfile.mkdtemp(prefix="startup-log-"))
    times: dict[str, list[float]] = {"mapreport ingest --report": [], "tlparse": []}
    for i in range(runs + 1):  # the first round warms the page cache and is not counted
        commands = {
            "mapreport ingest --report": [
                sys.executable,
                "-m",
                "mapreport",
                "ingest",
                "-q",
                "--dataset",
                str(work / f"ds{i}"),
                "--report",
                str(work / f"out{i}"),
                str(log),
            ],
            "tlparse": [tlparse, str(log), "-o", str(work / f"tl{i}"), "--no-browser"],
        }
        for name, cmd in commands.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, cwd=work)
            if i:
                times[name].append(time.perf_counter() - t0)
    ours, peer = (statistics.median(t) for t in times.values())
    print(f"{log.name}: fresh processes, median of {runs} (`uptime`: {os.getloadavg()})")
    for name, t in times.items():
        print(f"| {name} | {statistics.median(t):.2f} s | {min(t):.2f}-{max(t):.2f} s |")
    print(f"mapreport / tlparse: {ours / peer:.1f}x (limit 3x)")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
