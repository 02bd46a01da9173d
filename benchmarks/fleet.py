"""The nightly job at fleet size, measured against the engines it stands on (issue 6).

Generates the demo workloads scaled up (six workloads: the three demo slices and a renamed
copy of each, 40 shapes; runtime telemetry as JSON Lines and as Parquet), then measures, each
in a fresh process with its peak RSS (the process and its children, sampled every 20 ms):

- ingest: `mapreport ingest` of the JSON Lines against a bare typed decode of the same files
  (msgspec Struct per line, no checks, no writing); and of the Parquet inputs;
- analysis: every slice's `analyze_slice` against DuckDB's bare grouped `quantile_cont` over
  the same canonical Parquet (per workload, slice and shape: p50, p95, p99 of latency);
- end to end: `mapreport run` (ingest, analyse, render every slice with PDF);
- memory against input: ingesting one file, and 20 files of the same size in one command;
- rendering: one slice's report with PDF, and the export time of each chart (one warm Chromium);
- incremental: `mapreport run` again after one source file changed;
- scaling: the above at several sizes, as a table and `benchmarks/scaling.svg`.

    .venv/bin/python benchmarks/fleet.py --sizes 100000 1000000 10000000 --runs 3
    .venv/bin/python benchmarks/fleet.py --sizes 1000000 --runs 5 --ingest-only   # target 6
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
BASE_REQUESTS = 10_368
"""Requests of the demo at scale 1 (three slices); the benchmark doubles the workloads."""


def compile_package() -> None:
    """Compile mapreport's modules to bytecode once, as installing a package does: this
    machine sets PYTHONDONTWRITEBYTECODE, so every fresh process would otherwise compile them
    again (0.14 s of an ingest's start, measured), which installed peers never pay."""
    import compileall

    compileall.compile_dir(REPO / "mapreport", quiet=1)


def tree_rss(pid: int) -> int:
    """Summed RSS in bytes of a process and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += children.get(p, [])
    return total


class TreePeak:
    """The peak summed RSS (bytes) of a process tree, sampled every 20 ms while in the block."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss(self.pid))
            self._stop.wait(0.02)

    def __enter__(self) -> TreePeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def measure(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """(wall seconds, peak tree RSS bytes, stdout) of a command."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    with TreePeak(proc.pid) as tree:
        out, err = proc.communicate()
    peak = tree.peak
    wall = time.perf_counter() - t0
    if proc.returncode not in (0,):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-3000:]}")
    return wall, peak, out


def generate(folder: Path, requests: int) -> list[Path]:
    """The scaled inputs (JSON Lines runtime files) in `folder`, generated once per size."""
    done = folder.with_name(folder.name + ".done.json")  # beside, not in, the input folder
    if done.exists():
        return [folder / n for n in json.loads(done.read_text())]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    code = f"""
import json, sys
from pathlib import Path
from mapreport.core.records import replace
from mapreport.demo import synth
ws = []
for w in synth.WORKLOADS:
    for suffix in ("", "-b"):
        name = w.workload + suffix
        ws.append(replace(w, workload=name, runtime_file=name + ".runtime.jsonl"))
scale = {requests} / (2 * {BASE_REQUESTS})
paths = synth.generate(Path(sys.argv[1]), scale=scale, seed=7, workloads=ws)
print(json.dumps([p.name for p in paths]))
"""
    _, _, out = measure([PY, "-c", code, str(folder)])
    names = json.loads(out.strip().splitlines()[-1])
    done.write_text(json.dumps(names))
    return [folder / n for n in names]


def to_parquet(files: list[Path], folder: Path) -> list[Path]:
    """The runtime JSON Lines as Parquet (shape as its canonical string), compile and quality
    files as they are."""
    code = """
import sys
from pathlib import Path
import msgspec, pyarrow as pa, pyarrow.parquet as pq
from mapreport.core.shapes import canonical_shape
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
rows, writer, shapes = [], None, {}
decode = msgspec.json.decode
def flush():
    global rows, writer
    if not rows:
        return
    t = pa.Table.from_pylist(rows)
    if writer is None:
        writer = pq.ParquetWriter(dst, t.schema)
    writer.write_table(t.cast(writer.schema))
    rows = []
for line in open(src, "rb"):
    rec = decode(line)
    if "request_id" not in rec:
        continue  # environment line and adaptation events stay in the JSON Lines world
    key = tuple(rec["shape"].items())
    if key not in shapes:
        shapes[key] = canonical_shape(rec["shape"])
    rec["shape"] = shapes[key]
    rows.append(rec)
    if len(rows) >= 200_000:
        flush()
flush()
writer.close()
"""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for f in files:
        if f.name.endswith(".runtime.jsonl"):
            target = folder / f.name.replace(".jsonl", ".parquet")
            if not target.exists():
                measure([PY, "-c", code, str(f), str(target)])
            out.append(target)
        else:
            out.append(f)
    return out


BARE = """
import sys, time, msgspec
from mapreport.ingest.native_spec import REQUEST
from mapreport.ingest.spec import struct_of
# the native request record as declared, every field typed, unknown fields ignored
Request = struct_of(REQUEST, "Request", {}, "bare", forbid_unknown=False)
dec = msgspec.json.Decoder(Request)
t0 = time.perf_counter()
n = 0
for path in sys.argv[1:]:
    with open(path, "rb") as fh:
        for line in fh:
            try:
                dec.decode(line)
                n += 1
            except msgspec.ValidationError:
                pass
print(time.perf_counter() - t0, n)
"""

DUCKDB = """
import sys, time, duckdb
con = duckdb.connect()
t0 = time.perf_counter()
rows = con.execute(
    "SELECT workload, slice, shape, quantile_cont(compute_end_us - arrival_us, [0.5, 0.95, 0.99])"
    " FROM read_parquet($p, union_by_name = true) GROUP BY ALL",
    {"p": sys.argv[1] + "/request/**/*.parquet"},
).fetchall()
print(time.perf_counter() - t0, len(rows))
"""

ANALYSIS = """
import sys, time
from pathlib import Path
from mapreport.analysis import Review, Thresholds, analyze_slice, list_slices
from mapreport.dataset.store import Dataset
t0 = time.perf_counter()
con = Dataset(Path(sys.argv[1])).connect()
slices = list_slices(con)
for w, s in slices:
    analyze_slice(con, w, s, Thresholds(), Review())
print(time.perf_counter() - t0, len(slices))
"""

RENDER = """
import json, sys, time
from pathlib import Path
from mapreport.analysis import Review, Thresholds, analyze_slice
from mapreport.report import write_slice_report
from mapreport.report.export import SvgExporter
from mapreport.dataset.store import Dataset
con = Dataset(Path(sys.argv[1])).connect()
r = analyze_slice(con, sys.argv[2], "", Thresholds(), Review())
exporter = SvgExporter()
t0 = time.perf_counter()
write_slice_report(r, Path(sys.argv[3]), exporter, pdf=True)
total = time.perf_counter() - t0
exporter.close()
print(json.dumps({"total_s": total, "chromium_start_s": exporter.start_s,
                  "charts": exporter.timings_s}))
"""


def median_of(runs: int, fn: Any) -> Any:
    """Median by the first element of `runs` results of fn() (each a tuple)."""
    results = sorted((fn() for _ in range(runs)), key=lambda r: r[0])
    return results[len(results) // 2]


def config(folder: Path, sources: list[Path], dataset: Path, out: Path) -> Path:
    """A run configuration over the given sources, every report over all their data: the
    generated requests lie on 2026-11-28, and with the default window (`day`) a run reports
    the last complete day, which holds none of them."""
    path = folder / "bench.toml"
    path.write_text(
        "[run]\n"
        f'dataset = "{dataset}"\nout = "{out}"\nwindow = "all"\n'
        f"sources = {json.dumps([str(s) for s in sources])}\n"
    )
    return path


@dataclasses.dataclass
class Size:
    """The figures measured at one size."""

    requests: int
    bare_decode_s: float = 0.0
    ingest_s: float = 0.0
    ingest_rss: int = 0
    parquet_ingest_s: float = 0.0
    parquet_ingest_rss: int = 0
    analysis_s: float = 0.0
    duckdb_s: float = 0.0
    run_s: float = 0.0
    run_rss: int = 0
    rerun_s: float = 0.0


def bench_size(work: Path, requests: int, runs: int, full: bool) -> Size:
    """Every per-size figure; `full` adds `mapreport run` and its incremental rerun."""
    folder = work / f"n{requests}"
    files = generate(folder / "jsonl", requests)
    jsonl = [f for f in files if f.name.endswith(".runtime.jsonl")]
    s = Size(requests)
    ds = folder / "ds"

    def bare() -> tuple[float]:
        _, _, out = measure([PY, "-c", BARE, *map(str, jsonl)])
        return (float(out.split()[0]),)

    def ingest(inputs: list[Path], target: Path) -> tuple[float, int]:
        shutil.rmtree(target, ignore_errors=True)
        wall, rss, _ = measure(
            [
                PY,
                "-m",
                "mapreport.app.cli",
                "ingest",
                "-q",
                "--dataset",
                str(target),
                *map(str, inputs),
            ]
        )
        return wall, rss

    s.bare_decode_s = median_of(runs, bare)[0]
    s.ingest_s, s.ingest_rss = median_of(runs, lambda: ingest(jsonl, ds))
    parquet = [f for f in to_parquet(files, folder / "parquet") if f.suffix == ".parquet"]
    s.parquet_ingest_s, s.parquet_ingest_rss = median_of(
        runs, lambda: ingest(parquet, folder / "ds-parquet")
    )
    shutil.rmtree(folder / "ds-parquet", ignore_errors=True)
    ingest(files, ds)  # the full dataset (compile, quality too) for the analysis

    def analysis() -> tuple[float]:
        _, _, out = measure([PY, "-c", ANALYSIS, str(ds)])
        return (float(out.split()[0]),)

    def duck() -> tuple[float]:
        _, _, out = measure([PY, "-c", DUCKDB, str(ds)])
        return (float(out.split()[0]),)

    s.analysis_s = median_of(runs, analysis)[0]
    s.duckdb_s = median_of(runs, duck)[0]
    if full:
        changed = next(f for f in files if f.name.endswith(".runtime.jsonl"))
        s.run_s, s.run_rss, s.rerun_s = run_and_rerun(folder, files, changed)
    return s


def bench_ingest(work: Path, requests: int, runs: int) -> None:
    """Target 6 alone: `mapreport ingest` of the runtime JSON Lines (a fresh process, its
    start included) and the bare typed decode of the same files, interleaved run by run;
    prints each pair and the medians' ratio."""
    jsonl = [
        f
        for f in generate(work / f"n{requests}" / "jsonl", requests)
        if f.name.endswith(".runtime.jsonl")
    ]
    ds = work / f"n{requests}" / "ds-ingest"
    bare, ours = [], []
    for i in range(runs):
        bare.append(float(measure([PY, "-c", BARE, *map(str, jsonl)])[2].split()[0]))
        shutil.rmtree(ds, ignore_errors=True)
        cli = [PY, "-m", "mapreport.app.cli", "ingest", "-q", "--dataset", str(ds)]
        wall, rss, _ = measure([*cli, *map(str, jsonl)])
        ours.append(wall)
        print(f"run {i + 1}: bare decode {bare[-1]:.2f} s | ingest {wall:.2f} s, {rss >> 20} MiB")
    shutil.rmtree(ds, ignore_errors=True)
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"median: ingest {o:.2f} s, bare decode {b:.2f} s -> {o / b:.2f}x (target <= 3x)")


def run_and_rerun(folder: Path, files: list[Path], changed: Path) -> tuple[float, int, float]:
    """`mapreport run` over `files` into a fresh dataset, then again after one request was
    appended to `changed`: (first run s, its peak RSS, rerun s). `changed` is restored."""
    run_ds, out = folder / "run-ds", folder / "run-out"
    shutil.rmtree(run_ds, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    cfg = config(folder, files, run_ds, out)
    run_s, run_rss, _ = measure([PY, "-m", "mapreport.app.cli", "run", "-q", str(cfg)])
    size = changed.stat().st_size
    with open(changed, "rb") as fh:
        fh.seek(max(0, size - 65536))
        last = json.loads(fh.read().rstrip().rsplit(b"\n", 1)[-1])
    try:
        with open(changed, "ab") as late:  # one more request: the file's content changed
            last["request_id"] = str(last.get("request_id", "x")) + "-late"
            late.write(json.dumps(last).encode() + b"\n")
        rerun_s, _, _ = measure([PY, "-m", "mapreport.app.cli", "run", "-q", str(cfg)])
    finally:
        os.truncate(changed, size)  # the original file again
    shutil.rmtree(run_ds, ignore_errors=True)
    return run_s, run_rss, rerun_s


def bench_parts(work: Path, requests: int, parts: int) -> tuple[float, float, str]:
    """The incremental rerun when every runtime file of a size is `parts` files (a fleet
    writes many files per workload): one part of the largest workload changes.
    Returns (first run s, rerun s, the changed file's name)."""
    src = work / f"n{requests}" / "jsonl"
    folder = work / f"n{requests}" / f"parts{parts}"
    done = folder / "jsonl.done"
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        (folder / "jsonl").mkdir(parents=True)
        for f in sorted(src.iterdir()):
            if not f.name.endswith(".runtime.jsonl"):
                shutil.copy(f, folder / "jsonl" / f.name)
                continue
            stem = f.name.removesuffix(".runtime.jsonl")
            subprocess.run(
                [
                    "split",
                    "-n",
                    f"l/{parts}",
                    "-d",
                    "-a",
                    "3",
                    "--additional-suffix",
                    ".runtime.jsonl",
                    str(f),
                    str(folder / "jsonl" / f"{stem}.part"),
                ],
                check=True,
            )
        done.write_text("ok")
    files = sorted((folder / "jsonl").iterdir())
    runtime = [f for f in files if f.name.endswith(".runtime.jsonl")]
    largest = max(runtime, key=lambda f: f.stat().st_size).name.split(".part")[0]
    mine = [f for f in runtime if f.name.startswith(largest + ".part")]
    changed = mine[len(mine) // 2]
    run_s, _, rerun_s = run_and_rerun(folder, files, changed)
    return run_s, rerun_s, changed.name


def bench_files(work: Path, per_file: int) -> tuple[int, int]:
    """Peak RSS of ingesting one runtime file, and 20 files of the same size at once."""
    folder = work / "files"
    src = generate(work / f"n{per_file * 6}" / "jsonl", per_file * 6)
    one = next(f for f in src if f.name.endswith(".runtime.jsonl"))
    copies = []
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(20):
        target = folder / f"copy{i:02d}.runtime.jsonl"
        if not target.exists():
            with open(one, "rb") as fh, open(target, "wb") as out:
                for line in fh:  # distinct request ids per copy
                    out.write(line.replace(b'"request_id":"', f'"request_id":"c{i}-'.encode()))
        copies.append(target)
    shutil.rmtree(folder / "ds1", ignore_errors=True)
    shutil.rmtree(folder / "ds20", ignore_errors=True)
    cli = [PY, "-m", "mapreport.app.cli", "ingest", "-q", "--dataset"]
    _, rss1, _ = measure([*cli, str(folder / "ds1"), str(copies[0])])
    _, rss20, _ = measure([*cli, str(folder / "ds20"), *map(str, copies)])
    return rss1, rss20


def bench_render(work: Path, requests: int) -> dict[str, Any]:
    """One slice's report with PDF (bert-base), its charts' export times."""
    ds = work / f"n{requests}" / "ds"
    _, _, out = measure([PY, "-c", RENDER, str(ds), "bert-base", str(work / "render")])
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def plot(sizes: list[Size], path: Path) -> None:
    """Time and peak memory against requests (log-log), as SVG."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    x = [s.requests for s in sizes]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("wall time, s", "peak RSS, MiB"))
    for name, ys, col in (
        ("mapreport ingest (JSONL)", [s.ingest_s for s in sizes], 1),
        ("bare msgspec decode", [s.bare_decode_s for s in sizes], 1),
        ("analysis (all slices)", [s.analysis_s for s in sizes], 1),
        ("DuckDB grouped quantile_cont", [s.duckdb_s for s in sizes], 1),
        ("ingest RSS", [s.ingest_rss / 2**20 for s in sizes], 2),
    ):
        fig.add_trace(go.Scatter(x=x, y=ys, mode="lines+markers", name=name), row=1, col=col)
    if any(s.run_s for s in sizes):
        full = [s for s in sizes if s.run_s]
        fig.add_trace(
            go.Scatter(
                x=[s.requests for s in full],
                y=[s.run_s for s in full],
                mode="lines+markers",
                name="mapreport run",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=[s.requests for s in full],
                y=[s.run_rss / 2**20 for s in full],
                mode="lines+markers",
                name="run RSS",
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(type="log", title="requests")
    fig.update_yaxes(type="log")
    fig.update_layout(
        width=1000,
        height=420,
        template="plotly_white",
        title="Cost against input size (log-log: slope 1 is linear)",
    )
    path.write_bytes(fig.to_image(format="svg"))


def main() -> None:
    """Run the benchmark and print the figures as Markdown."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--full-from", type=int, default=0, help="run `mapreport run` at sizes >= this")
    ap.add_argument("--files-per", type=int, default=50_000, help="requests per file, 20-file test")
    ap.add_argument("--work", type=Path, default=Path("/tmp/mapreport-bench"))
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument(
        "--parts",
        type=int,
        default=0,
        help="also time the rerun at the largest size with each runtime file split in N files",
    )
    ap.add_argument(
        "--ingest-only",
        action="store_true",
        help="only JSONL ingest against the bare decode, interleaved (target 6)",
    )
    args = ap.parse_args()
    compile_package()
    if args.ingest_only:
        for n in args.sizes:
            bench_ingest(args.work, n, args.runs)
        return
    args.work.mkdir(parents=True, exist_ok=True)
    sizes = []
    for n in args.sizes:
        s = bench_size(args.work, n, args.runs if n < 5_000_000 else 1, n >= args.full_from)
        sizes.append(s)
        print(json.dumps(dataclasses.asdict(s)), flush=True)
    parts = bench_parts(args.work, args.sizes[-1], args.parts) if args.parts else None
    rss1, rss20 = bench_files(args.work, args.files_per)
    render = bench_render(args.work, args.sizes[0])
    mib = 2**20
    head = (
        "requests",
        "bare decode",
        "ingest JSONL",
        "ratio",
        "ingest RSS",
        "ingest Parquet",
        "analysis",
        "DuckDB quantile",
        "ratio",
        "run",
        "run RSS",
        "rerun",
        "speed-up",
    )
    print("\n| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    for s in sizes:
        cells = [
            f"{s.requests:,}",
            f"{s.bare_decode_s:.2f} s",
            f"{s.ingest_s:.2f} s",
            f"{s.ingest_s / s.bare_decode_s:.2f}x",
            f"{s.ingest_rss / mib:,.0f} MiB",
            f"{s.parquet_ingest_s:.2f} s",
            f"{s.analysis_s:.2f} s",
            f"{s.duckdb_s:.2f} s",
            f"{s.analysis_s / s.duckdb_s:.2f}x",
        ]
        if s.run_s:
            cells += [
                f"{s.run_s:.1f} s",
                f"{s.run_rss / mib:,.0f} MiB",
                f"{s.rerun_s:.1f} s",
                f"{s.run_s / s.rerun_s:.1f}x",
            ]
        else:
            cells += ["–"] * 4
        print("| " + " | ".join(cells) + " |")
    print(
        f"\n20 files vs 1 file of {args.files_per:,} requests: {rss20 / mib:,.0f} MiB vs "
        f"{rss1 / mib:,.0f} MiB, ratio {rss20 / rss1:.2f}"
    )
    print(
        f"\nRender (bert-base at {args.sizes[0]:,}): {render['total_s']:.2f} s with PDF; "
        f"Chromium start {render['chromium_start_s'] or 0:.2f} s"
    )
    for name, secs in render["charts"]:
        print(f"- {name}: {secs:.2f} s")
    if parts:
        first, again, name = parts
        print(
            f"\nRerun with every runtime file in {args.parts} parts ({args.sizes[-1]:,} requests, "
            f"{name} changed): first run {first:.1f} s, rerun {again:.1f} s, {first / again:.1f}x"
        )
    plot(sizes, REPO / "benchmarks" / "scaling.svg")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "sizes": [dataclasses.asdict(s) for s in sizes],
                    "rss_1": rss1,
                    "rss_20": rss20,
                    "render": render,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
