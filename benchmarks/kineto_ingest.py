"""Kineto trace ingest: mapreport versus HolisticTraceAnalysis's own parser, side by side.

Builds a large Kineto-shaped trace from HTA's real `trace_diff/control` trace (its events
repeated with shifted timestamps and ids), then times each parser several times in fresh
processes and reports the medians and the ratios of wall time and peak RSS. mapreport's time
includes writing the Parquet dataset; HTA's builds its DataFrame.

    .venv/bin/pip install holistictraceanalysis==0.5.0   # benchmark only, not a dependency
    .venv/bin/python benchmarks/kineto_ingest.py --copies 10 --runs 3
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet import TreePeak, compile_package  # the sibling script's process-tree RSS sampler

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO.parent / "shared" / "realdata" / "hta" / "trace_diff" / "control" / "control.json.gz"

MAPREPORT = """
import sys
from pathlib import Path
from mapreport.run.ingesting import ingest
ingest(Path(sys.argv[2]), [Path(sys.argv[1])])
"""
HTA = """
import sys
from hta.common.trace_parser import ParserConfig, parse_trace_dataframe
meta, df, symbols = parse_trace_dataframe(sys.argv[1], ParserConfig())
print(len(df), file=sys.stderr)
"""


def build(out: Path, copies: int) -> Path:
    """The control trace's events `copies` times, each copy shifted past the previous one."""
    with gzip.open(SOURCE) as fh:
        doc = json.load(fh)
    events = doc["traceEvents"]
    span = max(e.get("ts", 0) + e.get("dur", 0) for e in events) - min(
        e.get("ts", 0) for e in events if "ts" in e
    )
    big = []
    for c in range(copies):
        for e in events:
            e2 = dict(e)
            if "ts" in e2:
                e2["ts"] = e2["ts"] + c * (span + 1000)
            if isinstance(e2.get("args"), dict):
                a = dict(e2["args"])
                for key in ("External id", "correlation"):
                    if isinstance(a.get(key), int):
                        a[key] = a[key] + c * 10_000_000
                e2["args"] = a
            if e2.get("ph") in ("s", "f") and isinstance(e2.get("id"), int):
                e2["id"] = e2["id"] + c * 10_000_000
            big.append(e2)
    doc["traceEvents"] = big
    path = out / f"control_x{copies}.json"
    path.write_text(json.dumps(doc))
    return path


def zcat(path: Path) -> float:
    """Wall seconds of `zcat PATH > /dev/null`: the gzip stream's decompression alone."""
    t0 = time.perf_counter()
    subprocess.run(["zcat", str(path)], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def measure(code: str, *args: str) -> tuple[float, float]:
    """Wall seconds and peak memory (MiB) of one fresh Python process running `code`: the
    larger of its own peak RSS and the summed RSS of its process tree sampled every 20 ms
    (mapreport forks a helper for a large trace; pages the two share count twice)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    with TreePeak(proc.pid) as tree:
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        err = proc.stderr.read().decode()[-2000:] if proc.stderr else ""
        raise SystemExit(f"benchmark process failed: {err}")
    return wall, max(usage.ru_maxrss * 1024, tree.peak) / 2**20


def main() -> None:
    """Build the trace, run both parsers `--runs` times each, print medians and ratios."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--copies", type=int, default=10)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    compile_package()
    if args.build:
        trace = build(args.build, args.copies)
        print(trace, len(json.loads(trace.read_text())["traceEvents"]))
        return
    work = Path(tempfile.mkdtemp(prefix="mapreport-bench-"))
    try:
        # built in a child process: this one stays small, because a child's peak RSS
        # (ru_maxrss) includes the copy of its parent it starts as, before exec
        out = subprocess.run(
            [sys.executable, __file__, "--build", str(work), "--copies", str(args.copies)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        trace, events = Path(out[0]), int(out[1])
        size = trace.stat().st_size / 2**20
        packed = trace.with_name(trace.name + ".gz")
        subprocess.run(["gzip", "-k", "-6", str(trace)], check=True)
        print(
            f"trace: {trace.name}, {size:.0f} MiB, {events:,} events; "
            f"gzip -6: {packed.stat().st_size / 2**20:.0f} MiB"
        )
        ours, theirs, gz, unzip = [], [], [], []
        for i in range(args.runs):  # interleaved, so machine noise hits both alike
            ds = work / f"ds{i}"
            ours.append(measure(MAPREPORT, str(trace), str(ds)))
            shutil.rmtree(ds)
            theirs.append(measure(HTA, str(trace)))
            gz.append(measure(MAPREPORT, str(packed), str(ds)))
            shutil.rmtree(ds)
            unzip.append(zcat(packed))
            print(
                f"run {i + 1}: mapreport {ours[-1][0]:.2f} s {ours[-1][1]:.0f} MiB | "
                f"HTA {theirs[-1][0]:.2f} s {theirs[-1][1]:.0f} MiB | "
                f"mapreport .json.gz {gz[-1][0]:.2f} s | zcat {unzip[-1]:.2f} s"
            )
        t_ours = statistics.median(t for t, _ in ours)
        m_ours = statistics.median(m for _, m in ours)
        t_hta = statistics.median(t for t, _ in theirs)
        m_hta = statistics.median(m for _, m in theirs)
        print(
            f"median wall: mapreport {t_ours:.2f} s, HTA {t_hta:.2f} s -> "
            f"{t_hta / t_ours:.1f}x faster (target >= 8x)"
        )
        print(
            f"median peak RSS: mapreport {m_ours:.0f} MiB, HTA {m_hta:.0f} MiB -> "
            f"{m_ours / m_hta:.2f} of HTA's (target <= 0.3)"
        )
        t_gz = statistics.median(t for t, _ in gz)
        t_zcat = statistics.median(unzip)
        print(
            f"median .json.gz: mapreport {t_gz:.2f} s, zcat > /dev/null {t_zcat:.2f} s -> "
            f"{t_gz / t_zcat:.2f}x the decompression alone; {t_gz / t_ours:.2f}x the plain file"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
