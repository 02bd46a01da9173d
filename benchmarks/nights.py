"""The nightly cost is O(that night), not O(the history) (issue 15).

One night of the demo's three workloads scaled to `--requests` (default 1M) is generated once
and copied to `--nights` + 1 consecutive dates (arrival and compute times shifted by whole
days; Parquet, as a fleet's exporter writes it). Two datasets then meet the same last night:

- history: the first `--nights` nights ingested, each reported and recorded in the history
  (`mapreport report --date D --record-history --no-pdf`), as a month of nightly runs leaves it;
- alone: only the compile profiles.

On each, in fresh processes, `mapreport run CONFIG --date LAST` (ingest of the last night's
files, every slice reported with its PDF, the night recorded) is timed with its peak RSS (the
process tree), alternating the two, on a hard-linked copy of the dataset so that each run
meets the same state. The target: history <= 1.3x alone, peak RSS flat.

    .venv/bin/python benchmarks/nights.py --requests 1000000 --nights 30 --runs 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path

from fleet import PY, REPO, compile_package, measure  # the sibling script's fresh-process timer

FIRST = date(2026, 11, 28)
"""The generator's night (`synth.WINDOW_START_US`); night i is its telemetry shifted i days."""
DAY_US = 86_400_000_000
BASE_REQUESTS = 10_368
"""Requests of the demo at scale 1 (three slices)."""

GENERATE = """
import json, sys
from pathlib import Path
from mapreport.demo import synth
paths = synth.generate(Path(sys.argv[1]), scale=float(sys.argv[2]), seed=7)
print(json.dumps([p.name for p in paths]))
"""

TO_PARQUET = """
import gzip, sys
from pathlib import Path
import msgspec, pyarrow as pa, pyarrow.parquet as pq
from mapreport.core.shapes import canonical_shape
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
opener = gzip.open if src.suffix == ".gz" else open
rows, shapes = [], {}
decode = msgspec.json.decode
if src.name.endswith(".csv"):
    import pyarrow.compute as pc
    import pyarrow.csv as csv
    t = csv.read_csv(src)
    t = t.filter(pc.fill_null(pc.not_equal(t["request_id"], ""), False))
    keep = [c for c in t.column_names if c not in ("event", "ts_us", "dur_us", "detail")]
    pq.write_table(t.select(keep), dst)
    raise SystemExit(0)
for line in opener(src, "rb"):
    rec = decode(line)
    if "request_id" not in rec:
        continue  # the environment line and adaptation events
    key = tuple(rec["shape"].items())
    if key not in shapes:
        shapes[key] = canonical_shape(rec["shape"])
    rec["shape"] = shapes[key]
    rows.append(rec)
pq.write_table(pa.Table.from_pylist(rows), dst)
"""

SHIFT = (
    f"DAY_US = {DAY_US}\n"
    """
import sys
from pathlib import Path
import pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
src, out, days = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
t = pq.read_table(src)
times = ("arrival_us", "queue_start_us", "compute_start_us", "compute_end_us")
for i in range(days):
    shifted = t
    for c in times:
        j = shifted.schema.get_field_index(c)
        shifted = shifted.set_column(j, c, pc.add(shifted[c], float(i * DAY_US)))
    folder = out / sys.argv[4 + i]
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(shifted, folder / src.name)
"""
)


def night(i: int) -> str:
    """The i-th night's date (0-based)."""
    return (FIRST + timedelta(days=i)).isoformat()


def prepare(work: Path, requests: int, nights: int) -> tuple[Path, Path]:
    """The nights' files under work/telemetry/<date>/ and the compile profiles under
    work/plans/ (generated once per size and night count)."""
    done = work / "prepared.json"
    if done.exists():
        return work / "telemetry", work / "plans"
    shutil.rmtree(work, ignore_errors=True)
    one = work / "one"
    one.mkdir(parents=True)
    t0 = time.perf_counter()
    _, _, out = measure([PY, "-c", GENERATE, str(one), str(requests / BASE_REQUESTS)])
    names = json.loads(out.strip().splitlines()[-1])
    plans = work / "plans"
    plans.mkdir()
    dates = [night(i) for i in range(nights + 1)]
    for name in names:
        f = one / name
        if ".runtime." in name:
            stem = name.split(".runtime.")[0]
            pq_file = one / f"{stem}.runtime.parquet"
            measure([PY, "-c", TO_PARQUET, str(f), str(pq_file)])
            measure(
                [PY, "-c", SHIFT, str(pq_file), str(work / "telemetry"), str(len(dates)), *dates]
            )
        else:
            shutil.copy(f, plans / name)
    shutil.rmtree(one)
    done.write_text(json.dumps({"requests": requests, "nights": nights}))
    print(
        f"prepared {nights + 1} nights of {requests:,} requests in {time.perf_counter() - t0:.0f} s"
    )
    return work / "telemetry", plans


def config(folder: Path, telemetry: Path, plans: Path) -> Path:
    """A nightly configuration reading each night's folder (`{date}`) and the plans."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "nights.toml"
    path.write_text(
        "[run]\n"
        'dataset = "dataset"\nout = "reports"\n'
        f'sources = ["{plans}/*.compile.jsonl", "{plans}/quality.jsonl", '
        f'"{telemetry}/{{date}}/*"]\n'
    )
    return path


def build_history(folder: Path, telemetry: Path, plans: Path, nights: int) -> Path:
    """A dataset holding `nights` nights, each ingested and recorded in the history."""
    cfg = config(folder, telemetry, plans)
    ds = folder / "dataset"
    if (folder / "built").exists():
        return cfg
    mr = str(REPO / ".venv" / "bin" / "mapreport")
    t0 = time.perf_counter()
    subprocess.run(
        [mr, "ingest", "--dataset", str(ds), "-q", *map(str, sorted(plans.iterdir()))], check=True
    )
    for i in range(nights):
        d = night(i)
        files = sorted((telemetry / d).iterdir())
        subprocess.run(
            [mr, "ingest", "--dataset", str(ds), "--date", d, "-q", *map(str, files)], check=True
        )
        subprocess.run(
            [
                mr,
                "report",
                "--dataset",
                str(ds),
                "--out",
                str(folder / "reports"),
                "--date",
                d,
                "--record-history",
                "--no-pdf",
                "-q",
            ],
            check=True,
        )
    (folder / "built").write_text("")
    print(
        f"history dataset: {nights} nights ingested and recorded "
        f"in {time.perf_counter() - t0:.0f} s"
    )
    return cfg


def build_alone(folder: Path, telemetry: Path, plans: Path) -> Path:
    """A dataset holding only the compile profiles."""
    cfg = config(folder, telemetry, plans)
    if not (folder / "built").exists():
        mr = str(REPO / ".venv" / "bin" / "mapreport")
        subprocess.run(
            [
                mr,
                "ingest",
                "--dataset",
                str(folder / "dataset"),
                "-q",
                *map(str, sorted(plans.iterdir())),
            ],
            check=True,
        )
        (folder / "built").write_text("")
    return cfg


def one_run(folder: Path, cfg: Path, last: str) -> tuple[float, int]:
    """`mapreport run --date last` on a hard-linked copy of the folder's dataset."""
    scratch = folder.with_name(folder.name + ".run")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    subprocess.run(["cp", "-al", str(folder / "dataset"), str(scratch / "dataset")], check=True)
    (scratch / "dataset" / ".lock").unlink(missing_ok=True)  # hard-linked: written by the run
    shutil.copy(cfg, scratch / cfg.name)
    wall, peak, _ = measure(
        [
            str(REPO / ".venv" / "bin" / "mapreport"),
            "run",
            str(scratch / cfg.name),
            "--date",
            last,
            "-q",
        ]
    )
    shutil.rmtree(scratch)
    return wall, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1_000_000, help="requests per night")
    ap.add_argument("--nights", type=int, default=30, help="nights of history before the last")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/mapreport-nights"))
    a = ap.parse_args()
    compile_package()
    work = a.work / f"{a.requests}x{a.nights}"
    telemetry, plans = prepare(work, a.requests, a.nights)
    hist = build_history(work / "history", telemetry, plans, a.nights)
    alone = build_alone(work / "alone", telemetry, plans)
    last = night(a.nights)
    results: dict[str, list[tuple[float, int]]] = {"history": [], "alone": []}
    for _ in range(a.runs):
        results["history"].append(one_run(work / "history", hist, last))
        results["alone"].append(one_run(work / "alone", alone, last))
    h = statistics.median(w for w, _ in results["history"])
    s = statistics.median(w for w, _ in results["alone"])
    hr = max(p for _, p in results["history"]) / 2**20
    sr = max(p for _, p in results["alone"]) / 2**20
    print(f"night {last}: {a.requests:,} requests, {a.nights} nights of history before it")
    print(f"{'dataset':10} {'run (median)':>13} {'runs':>28} {'peak RSS':>10}")
    for name, med, peak in (("history", h, hr), ("alone", s, sr)):
        runs = ", ".join(f"{w:.1f}" for w, _ in results[name])
        print(f"{name:10} {med:12.1f}s {runs:>28} {peak:8.0f} MiB")
    print(f"ratio history / alone: {h / s:.2f}x (target <= 1.3x); peak RSS {hr / sr:.2f}x")
    sys.exit(0 if h / s <= 1.3 else 1)


if __name__ == "__main__":
    main()
