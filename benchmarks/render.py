"""Reports at a fleet's count of slices, against the issue's limits (issue 18, targets 2 and 3).

- one slice regenerated: `mapreport report --slice bert-base --force` with its PDF (every
  chart) over the demo dataset, a fresh process each time, beside the same with `--no-pdf`;
  limit 4 s;
- amortised: `mapreport report --force` over a dataset of `--many` slices (the demo's three
  workloads copied, demo-sized), seconds per slice; limit 2 s;
- a night of `--slices` slices of `--per-slice` requests each (the demo's workloads copied and
  scaled, 10M requests at the defaults): `mapreport run --force` with `--jobs 1` and with
  `--jobs 2` over the same ingested dataset, and each one's peak RSS summed over its process
  tree (workers and their Chromium included); limits 0.6x and 4 GiB;
- the same night from nothing (issue 38): `mapreport run --jobs auto` into an empty dataset,
  ingest, reports and index; limits 10 minutes and 4 GiB.

Medians of fresh processes, measured side by side (interleaved) in one run.

    .venv/bin/python benchmarks/render.py --runs 3 --many 50 --slices 200 --per-slice 50000
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet import PY, compile_package, measure  # the benchmarks' shared process measurement

REPO = Path(__file__).resolve().parents[1]
DEMO_NIGHTS = ("2026-11-28", "2026-11-29", "2026-11-30")
DEMO_SIZE = 3_456
"""Requests of one demo slice (bert-base, one night): the size of the amortised run's slices."""

GENERATE = """
import json, sys
from pathlib import Path
from mapreport.core.records import replace
from mapreport.demo import synth
copies, per_slice = int(sys.argv[2]), int(sys.argv[3])
ws = []
for i in range(copies):
    w = synth.WORKLOADS[i % len(synth.WORKLOADS)]
    name = f"{w.workload}-{i:03d}"
    ws.append(replace(w, workload=name, runtime_file=name + ".runtime.jsonl"))
base = sum(s.requests for s in synth.WORKLOADS[0].shapes)
paths = synth.generate(Path(sys.argv[1]), scale=per_slice / base, seed=7, workloads=ws)
print(json.dumps([str(p) for p in paths]))
"""


def mapreport(*args: str) -> list[str]:
    """The command line of `mapreport ARGS` in this interpreter."""
    return [PY, "-m", "mapreport.app.cli", *args]


def dataset_of(work: Path, copies: int, per_slice: int) -> tuple[Path, list[Path]]:
    """A dataset of `copies` slices of about `per_slice` requests, generated and ingested once."""
    folder = work / f"s{copies}x{per_slice}"
    done = folder / "done.json"
    if done.exists():
        return folder / "ds", [Path(p) for p in json.loads(done.read_text())]
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "in").mkdir(parents=True)
    _, _, out = measure([PY, "-c", GENERATE, str(folder / "in"), str(copies), str(per_slice)])
    files = [Path(p) for p in json.loads(out.strip().splitlines()[-1])]
    measure(
        mapreport("ingest", "--jobs", "2", "-q", "--dataset", str(folder / "ds"), *map(str, files))
    )
    done.write_text(json.dumps([str(f) for f in files]))
    return folder / "ds", files


def night_config(folder: Path, dataset: Path, files: list[Path], out: Path) -> Path:
    """A nightly configuration over the ingested files (their rows already in the dataset)."""
    path = folder / f"{out.name}.toml"
    path.write_text(
        f'[run]\ndataset = "{dataset}"\nout = "{out}"\nwindow = "all"\n'
        f"sources = {json.dumps([str(f) for f in files])}\n"
    )
    return path


def median(xs: list[float]) -> float:
    """The median of `xs`."""
    return statistics.median(xs)


def demo_dataset(work: Path) -> Path:
    """The demo's dataset as `make demo` leaves it: its three nights run and recorded."""
    folder = work / "demo"
    dataset = folder / "demo" / "dataset"  # where the demo's config puts it, beside its inputs
    if (folder / "done").exists():
        return dataset
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(REPO / "sample_data", folder / "sample_data")
    cfg = folder / "sample_data" / "mapreport.toml"
    for night in DEMO_NIGHTS:
        measure(mapreport("run", str(cfg), "--date", night, "-q"))
    (folder / "done").write_text("")
    return dataset


def report_s(ds: Path, out: Path, *flags: str) -> float:
    """Seconds of one fresh `mapreport report --force` of `ds` into `out`."""
    cmd = mapreport("report", "--dataset", str(ds), "--out", str(out), "--force", "-q", *flags)
    return measure(cmd)[0]


def one_slice(work: Path, runs: int) -> dict[str, float]:
    """One slice regenerated in a fresh process: with its PDF (the design-review packet, issue
    35), with the full-form PDF, and without a PDF, interleaved."""
    ds, out = demo_dataset(work), work / "one-out"
    pdf: list[float] = []
    full: list[float] = []
    html: list[float] = []
    for _ in range(runs):
        pdf.append(report_s(ds, out, "--slice", "bert-base"))
        full.append(report_s(ds, out, "--slice", "bert-base", "--pdf", "full"))
        html.append(report_s(ds, out, "--slice", "bert-base", "--no-pdf"))
    return {
        "pdf_s": median(pdf),
        "full_pdf_s": median(full),
        "no_pdf_s": median(html),
        "runs": runs,
    }


def amortised(work: Path, runs: int, many: int) -> dict[str, float]:
    """Target 2, second half: seconds per slice over a report of `many` demo-sized slices."""
    ds, out = dataset_of(work, many, DEMO_SIZE)[0], work / "many-out"
    one: list[float] = []
    two: list[float] = []
    for _ in range(runs):
        one.append(report_s(ds, out, "--jobs", "1") / many)
        two.append(report_s(ds, out, "--jobs", "2") / many)
    return {"jobs1_per_slice_s": median(one), "jobs2_per_slice_s": median(two), "slices": many}


def night(work: Path, runs: int, slices: int, per_slice: int) -> dict[str, float]:
    """Target 3: the night's run with one and with two worker processes, side by side."""
    ds, files = dataset_of(work, slices, per_slice)
    folder = ds.parent
    figures: dict[str, list[float]] = {
        "jobs1_s": [],
        "jobs1_rss": [],
        "jobs2_s": [],
        "jobs2_rss": [],
    }
    for _ in range(runs):
        for jobs in ("1", "2"):
            cfg = night_config(folder, ds, files, folder / f"out{jobs}")
            t, rss, _ = measure(mapreport("run", str(cfg), "--force", "-q", "--jobs", jobs))
            figures[f"jobs{jobs}_s"].append(t)
            figures[f"jobs{jobs}_rss"].append(rss / 2**20)
    return {k: median(v) for k, v in figures.items()} | {"slices": slices, "per_slice": per_slice}


def fleet_night(work: Path, runs: int, slices: int, per_slice: int) -> dict[str, float]:
    """Issue 38: a fleet's night from nothing: `mapreport run --jobs auto` over `slices` files
    into an empty dataset (every file ingested, every slice reported with its PDF, the index
    written), with its peak RSS summed over its process tree; limits 600 s and 4 GiB."""
    _, files = dataset_of(work, slices, per_slice)  # the generated files, made once
    folder = work / f"fleet{slices}x{per_slice}"
    times: list[float] = []
    rss: list[float] = []
    for _ in range(runs):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        cfg = night_config(folder, folder / "ds", files, folder / "out")
        t, peak, _ = measure(mapreport("run", str(cfg), "-q", "--jobs", "auto"))
        times.append(t)
        rss.append(peak / 2**20)
    return {"s": median(times), "rss": median(rss), "slices": slices, "per_slice": per_slice}


def main() -> None:
    """Print every figure beside its limit, and write them as JSON (`--json`)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/mapreport-bench/render"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--many", type=int, default=50)
    ap.add_argument("--slices", type=int, default=200)
    ap.add_argument("--per-slice", type=int, default=50_000)
    ap.add_argument("--skip", nargs="*", default=[], choices=["one", "many", "night", "fleet"])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    compile_package()
    args.work.mkdir(parents=True, exist_ok=True)
    got: dict[str, dict[str, float]] = {}
    if "one" not in args.skip:
        got["one"] = r = one_slice(args.work, args.runs)
        print(
            f"one slice, fresh process: {r['pdf_s']:.2f} s with the packet PDF, "
            f"{r['full_pdf_s']:.2f} s with the full PDF, {r['no_pdf_s']:.2f} s without: "
            f"{r['pdf_s'] / r['no_pdf_s']:.2f}x (limit 2.5x; the full form "
            f"{r['full_pdf_s'] / r['no_pdf_s']:.2f}x)"
        )
    if "many" not in args.skip:
        got["many"] = r = amortised(args.work, args.runs, args.many)
        print(
            f"{args.many} slices: {r['jobs1_per_slice_s']:.2f} s per slice with --jobs 1, "
            f"{r['jobs2_per_slice_s']:.2f} s with --jobs 2 (limit 2.5 s)"
        )
    if "night" not in args.skip:
        got["night"] = r = night(args.work, args.runs, args.slices, args.per_slice)
        print(
            f"night of {args.slices} x {args.per_slice}: --jobs 1 {r['jobs1_s']:.1f} s "
            f"({r['jobs1_rss']:,.0f} MiB), --jobs 2 {r['jobs2_s']:.1f} s "
            f"({r['jobs2_rss']:,.0f} MiB): {r['jobs2_s'] / r['jobs1_s']:.2f}x "
            "(limits 0.6x, 4,096 MiB)"
        )
    if "fleet" not in args.skip:
        got["fleet"] = r = fleet_night(args.work, args.runs, args.slices, args.per_slice)
        print(
            f"a fleet's night from nothing, {args.slices} x {args.per_slice} (--jobs auto): "
            f"{r['s']:.1f} s, peak RSS {r['rss']:,.0f} MiB (limits 600 s, 4,096 MiB)"
        )
    if args.json:
        args.json.write_text(json.dumps(got, indent=1))


if __name__ == "__main__":
    main()
