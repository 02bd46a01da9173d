"""A real serving case with torch.compile recompiles (issue 16): one FIFO worker, Poisson
arrivals, mixed input shapes, a small model compiled with `torch.compile(dynamic=False)`, so
the first request of each new shape recompiles on the serving path while the requests behind
it wait.

Run with a separate venv holding PyTorch (never a dependency of mapreport):

    python3 -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch==2.13.0 numpy
    /tmp/torchenv/bin/python benchmarks/torch_serving.py OUT [--requests 300] [--seed 1]

Writes into OUT (gzip):
- `requests.csv.gz`: the per-request log a server keeps (request id, shape, arrival, start and
  end of compute in epoch microseconds, whether the request triggered a compile);
- `serving.runtime.jsonl.gz`: the native runtime export a team would write (requests, and one
  `recompile` adaptation event per serving-time compile with its duration);
- `torch_trace/*.log.gz`: TORCH_TRACE (the compile events with their start and duration);
- `profiler.json.gz`: a PyTorch profiler trace with one `record_function` span per request.

Warm-up compiles the first `--warm` shapes before serving starts (as a team would), so the
serving-time recompiles are the shapes warm-up missed.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

BATCHES = (1, 4, 8)
SEQS = (32, 64, 128, 256)
HIDDEN = 256


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--rate", type=float, default=8.0, help="mean arrivals per second")
    ap.add_argument("--warm", type=int, default=8, help="shapes compiled before serving")
    ap.add_argument("--blocks", type=int, default=4, help="residual MLP blocks of the model")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    trace_dir = Path(tempfile.mkdtemp(prefix="torch_trace_"))
    os.environ["TORCH_TRACE"] = str(trace_dir)  # read when torch is imported
    # a compile warm from an earlier run's on-disk caches would not stall like a fresh server's
    os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(a.seed)

    class Block(torch.nn.Module):  # type: ignore[misc]  # torch is untyped here
        def __init__(self) -> None:
            super().__init__()
            self.up = torch.nn.Linear(HIDDEN, 4 * HIDDEN)
            self.down = torch.nn.Linear(4 * HIDDEN, HIDDEN)
            self.norm = torch.nn.LayerNorm(HIDDEN)

        def forward(self, x: Any) -> Any:
            return self.norm(x + self.down(torch.nn.functional.gelu(self.up(x))))

    model = torch.nn.Sequential(*(Block() for _ in range(a.blocks))).eval()
    # every shape compiles (the default limit of 8 would send later shapes to eager)
    torch._dynamo.config.recompile_limit = 64
    compiled = torch.compile(model, dynamic=False)
    shapes = [(b, s) for b in BATCHES for s in SEQS]
    # a few hot shapes carry most traffic, the rest are rare (they are the recompiles)
    weights = np.array([8.0 if i < a.warm else 1.0 for i in range(len(shapes))])
    weights /= weights.sum()
    picks = rng.choice(len(shapes), size=a.requests, p=weights)
    gaps = rng.exponential(1.0 / a.rate, a.requests)
    compiled_shapes: set[tuple[int, int]] = set()
    with torch.no_grad():
        for b, s in shapes[: a.warm]:  # warm-up, off the serving clock
            compiled(torch.randn(b, s, HIDDEN))
            compiled_shapes.add((b, s))
    rows: list[dict[str, Any]] = []
    events: list[Event] = []
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.time() + 0.05
        arrivals = t0 + np.cumsum(gaps)
        for i, (pick, arrival) in enumerate(zip(picks, arrivals, strict=True)):
            b, s = shapes[pick]
            now = time.time()
            if now < arrival:
                time.sleep(arrival - now)
            x = torch.randn(b, s, HIDDEN)
            first = (b, s) not in compiled_shapes
            start = time.time()
            with record_function(f"request r{i:04d} batch={b},seq={s}"):
                compiled(x)
            end = time.time()
            compiled_shapes.add((b, s))
            rows.append(
                {
                    "request_id": f"r{i:04d}",
                    "batch": b,
                    "seq": s,
                    "arrival_us": round(arrival * 1e6, 1),
                    "compute_start_us": round(start * 1e6, 1),
                    "compute_end_us": round(end * 1e6, 1),
                    "compiled": first,
                }
            )
            if first:
                events.append((b, s, start, end))
    a.out.mkdir(parents=True, exist_ok=True)
    _write(a.out, rows, events, trace_dir, prof)
    shutil.rmtree(trace_dir, ignore_errors=True)
    stalls = [round(e - s, 2) for _, _, s, e in events]
    print(f"{len(rows)} requests, {len(events)} serving-time compiles, stalls {stalls} s")


Event = tuple[int, int, float, float]
"""A serving-time compile: batch, seq, start and end (epoch seconds)."""


def _write(
    out: Path, rows: list[dict[str, Any]], events: list[Event], trace_dir: Path, prof: Any
) -> None:
    """The four exports, gzip compressed, with fixed gzip headers (reproducible bytes)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    _gz(out / "requests.csv.gz", buf.getvalue().encode())
    native = [
        json.dumps(
            {
                "workload": "torch-serving",
                "request_id": r["request_id"],
                "shape": {"batch": r["batch"], "seq": r["seq"]},
                "arrival_us": r["arrival_us"],
                "compute_start_us": r["compute_start_us"],
                "compute_end_us": r["compute_end_us"],
                "plan_id": "torch-compile-static",
                "plan_variant": "adapted" if r["compiled"] else "static",
                "core": 0,
                "stream": "fifo",
                "status": "ok",
            }
        )
        for r in rows
    ]
    native += [
        json.dumps(
            {
                "workload": "torch-serving",
                "event": "recompile",
                "ts_us": round(s * 1e6, 1),
                "dur_us": round((e - s) * 1e6, 1),
                "shape": {"batch": b, "seq": q},
                "plan_id": "torch-compile-static",
                "detail": "first request of a shape warm-up did not compile (dynamic=False)",
            }
        )
        for b, q, s, e in events
    ]
    _gz(out / "serving.runtime.jsonl.gz", ("\n".join(native) + "\n").encode())
    (out / "torch_trace").mkdir(exist_ok=True)
    for f in sorted(trace_dir.rglob("*.log")):
        _gz(out / "torch_trace" / (f.name + ".gz"), f.read_bytes())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        _gz(out / "profiler.json.gz", path.read_bytes())


def _gz(path: Path, data: bytes) -> None:
    with gzip.GzipFile(path, "wb", mtime=0) as fh:
        fh.write(data)


if __name__ == "__main__":
    main()
