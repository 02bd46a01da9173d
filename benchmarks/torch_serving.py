"""Real torch.compile serving runs (issues 16 and 34): FIFO workers (one process each, a queue
per worker), Poisson arrivals, mixed input shapes, a small model compiled with `torch.compile`,
so the first request of a shape warm-up missed compiles on the serving path (or, past the
recompile limit, runs eagerly) while the requests behind it wait.

Run with a separate venv holding PyTorch (never a dependency of mapreport):

    python3 -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch==2.13.0 numpy
    /tmp/torchenv/bin/python benchmarks/torch_serving.py OUT [--workers 2] [--dynamic none]
        [--recompile-limit 4] [--annotation hash] [--load] [--requests 300] [--seed 1]
        [--cache shared] [--load-period 5]

Writes into OUT (gzip):
- `requests.csv.gz`: the per-request log the server keeps (request id, worker and its pid,
  shape, arrival, start and end of compute in epoch microseconds; whether the request compiled
  a graph, whether that compile was served from the FX graph cache, whether it ran eagerly, and
  which of its worker's graphs ran it). The server knows
  this on its own: its torch.compile backend wraps every graph it compiles, so the server sees
  which compiled graph (if any) ran each call, without any profiler;
- `server.json`: the run's settings and warm-up shapes;
- `serving.runtime.jsonl.gz`: the native runtime export a team would write (requests with
  their worker as `core` and their plan variant, and one `recompile` adaptation event per
  serving-time compile, on its worker);
- `torch_trace/*.log.gz`: TORCH_TRACE of each worker (compiles, failed attempts);
- `profiler.w<k>.json.gz`: each worker's PyTorch profiler trace with one `record_function`
  span per request, in the chosen annotation style.

Warm-up compiles the first `--warm` shapes before serving starts (as a team would), so the
serving-time compiles are the shapes warm-up missed.

`--cache shared` gives the workers one Inductor cache folder (as pods sharing a volume do), so
a shape one worker compiled is served to the other from the FX graph cache: a shorter stall,
logged as a cache hit. The default (`off`) disables Inductor's caches: a compile warm from an
earlier run's caches would not stall like a fresh server's.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import multiprocessing as mp
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

BATCHES = (1, 4, 8)
SEQS = (32, 64, 128, 256)
HIDDEN = 256
DYNAMIC = {"false": False, "none": None, "true": True}
ANNOTATIONS = {
    # our documented form, and the ways other servers write a request's span
    "ours": "request r{i:04d} batch={b},seq={s}",
    "hash": "request#{i} shape=({b}, {s})",
    "named": "request:r{i:04d} batch={b} seq={s}",
    "dims": "request r{i:04d} {b}x{s}",
}


def _shapes(small_last: bool) -> list[tuple[int, int]]:
    """Every (batch, seq) in warm-up order: smallest first, or (`small_last`) largest first."""
    shapes = [(b, s) for b in BATCHES for s in SEQS]
    return shapes[::-1] if small_last else shapes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--rate", type=float, default=8.0, help="mean arrivals per second, in all")
    ap.add_argument("--warm", type=int, default=8, help="shapes compiled before serving")
    ap.add_argument("--blocks", type=int, default=4, help="residual MLP blocks of the model")
    ap.add_argument("--workers", type=int, default=1, help="worker processes, a queue each")
    ap.add_argument("--dynamic", choices=sorted(DYNAMIC), default="false")
    ap.add_argument("--recompile-limit", type=int, default=64, help="dynamo's recompile_limit")
    ap.add_argument("--annotation", choices=sorted(ANNOTATIONS), default="ours")
    ap.add_argument("--load", action="store_true", help="another process keeps a core busy")
    ap.add_argument(
        "--load-period",
        type=float,
        default=0.0,
        help="with --load: the busy process works and rests in turns of this many seconds "
        "(a load that changes during the run)",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cache", choices=("off", "shared"), default="off")
    ap.add_argument(
        "--small-last",
        action="store_true",
        help="warm up and weight the largest shapes first, so the shapes past --warm or the "
        "recompile limit are the smallest (where eager dispatch costs most)",
    )
    a = ap.parse_args()
    import numpy as np

    rng = np.random.default_rng(a.seed)
    shapes = _shapes(a.small_last)
    # a few hot shapes carry most traffic, the rest are rare (they are the recompiles)
    weights = np.array([8.0 if i < a.warm else 1.0 for i in range(len(shapes))])
    picks = rng.choice(len(shapes), size=a.requests, p=weights / weights.sum())
    offsets = np.cumsum(rng.exponential(1.0 / a.rate, a.requests))
    ctx = mp.get_context("spawn")
    ready, start = ctx.Barrier(a.workers + 1), ctx.Queue()
    results = ctx.Queue()
    traces = [Path(tempfile.mkdtemp(prefix="torch_trace_")) for _ in range(a.workers)]
    a.cache_dir = tempfile.mkdtemp(prefix="inductor_cache_") if a.cache == "shared" else None
    procs = []
    for w in range(a.workers):
        # a queue per worker: requests are dispatched round-robin as they arrive
        mine = [
            (i, *shapes[p], float(o))
            for i, (p, o) in enumerate(zip(picks, offsets, strict=True))
            if i % a.workers == w
        ]
        job = (w, mine, a, traces[w], ready, start, results)
        procs.append(ctx.Process(target=_worker, args=job))
    for p in procs:
        p.start()
    ready.wait()  # every worker has warmed up
    busy = ctx.Process(target=_spin, args=(a.load_period,)) if a.load else None
    if busy is not None:
        busy.start()
    t0 = time.time() + 0.2
    for _ in procs:
        start.put(t0)
    outs = [results.get() for _ in procs]
    for p in procs:
        p.join()
    if busy is not None:
        busy.terminate()
        busy.join()
    rows = sorted((r for o in outs for r in o["rows"]), key=lambda r: r["request_id"])
    a.out.mkdir(parents=True, exist_ok=True)
    settings = {
        "workers": a.workers,
        "dynamic": a.dynamic,
        "recompile_limit": a.recompile_limit,
        "annotation": ANNOTATIONS[a.annotation],
        "load": a.load,
        "load_period": a.load_period,
        "warm_shapes": [list(s) for s in shapes[: a.warm]],
        "requests": a.requests,
        "seed": a.seed,
        "cache": a.cache,
        "small_last": a.small_last,
    }
    (a.out / "server.json").write_text(json.dumps(settings, indent=1) + "\n")
    _write(a.out, rows, traces, [o["trace"] for o in sorted(outs, key=lambda o: o["worker"])])
    for t in traces:
        shutil.rmtree(t, ignore_errors=True)
    if a.cache_dir is not None:
        shutil.rmtree(a.cache_dir, ignore_errors=True)
    compiled = sum(r["compiled"] for r in rows)
    eager = sum(r["eager"] for r in rows)
    print(f"{len(rows)} requests, {compiled} serving-time compiles, {eager} eager")


def _spin(period: float = 0.0) -> None:
    """Keep one core busy (a loaded machine); with a period, busy and idle in turns of that
    many seconds (a load that comes and goes)."""
    x = 0
    start = time.time()
    while True:
        if period and int((time.time() - start) / period) % 2:
            time.sleep(0.01)
            continue
        x = (x * 31 + 7) % 1_000_003


def _worker(
    w: int,
    mine: list[tuple[int, int, int, float]],
    a: argparse.Namespace,
    trace_dir: Path,
    ready: Any,
    start: Any,
    results: Any,
) -> None:
    """One worker process: warm up, then serve its queue in arrival order."""
    os.environ["TORCH_TRACE"] = str(trace_dir)  # read when torch is imported
    if a.cache_dir is None:
        # a compile warm from an earlier run's on-disk caches would not stall like a fresh server's
        os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    else:  # one folder for every worker: a shape another worker compiled is a cache hit
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = a.cache_dir
    import torch
    from torch._dynamo.utils import counters
    from torch._inductor.compile_fx import compile_fx
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    torch._dynamo.config.recompile_limit = a.recompile_limit
    torch._inductor.config.log_tlparse = True  # Inductor's per-op estimates into TORCH_TRACE
    # each generated CPU kernel records its own profiler span, named as in Inductor's code
    torch._inductor.config.cpp.enable_kernel_profile = True

    class Block(torch.nn.Module):  # type: ignore[misc]  # torch is untyped here
        def __init__(self) -> None:
            super().__init__()
            self.up = torch.nn.Linear(HIDDEN, 4 * HIDDEN)
            self.down = torch.nn.Linear(4 * HIDDEN, HIDDEN)
            self.norm = torch.nn.LayerNorm(HIDDEN)

        def forward(self, x: Any) -> Any:
            return self.norm(x + self.down(torch.nn.functional.gelu(self.up(x))))

    state: dict[str, Any] = {"ran": None, "graphs": 0}

    def backend(gm: Any, example_inputs: Any) -> Any:
        """Inductor, with each compiled graph wrapped so the server sees which one ran."""
        index = state["graphs"]
        state["graphs"] += 1
        fn = compile_fx(gm, example_inputs)

        def run(*args: Any) -> Any:
            state["ran"] = index
            return fn(*args)

        run._boxed_call = getattr(fn, "_boxed_call", False)  # type: ignore[attr-defined]
        return run

    model = torch.nn.Sequential(*(Block() for _ in range(a.blocks))).eval()
    compiled = torch.compile(model, dynamic=DYNAMIC[a.dynamic], backend=backend)
    warm = _shapes(a.small_last)[: a.warm]
    with torch.no_grad():
        for b, s in warm:  # warm-up, off the serving clock
            compiled(torch.randn(b, s, HIDDEN))
    warm_graphs = state["graphs"]
    ready.wait()
    t0 = start.get()
    rows: list[dict[str, Any]] = []
    pid = os.getpid()
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        for i, b, s, offset in mine:
            arrival = t0 + offset
            now = time.time()
            if now < arrival:
                time.sleep(arrival - now)
            x = torch.randn(b, s, HIDDEN)
            graphs, state["ran"] = state["graphs"], None
            hits = counters["inductor"]["fxgraph_cache_hit"]
            begin = time.time()
            with record_function(ANNOTATIONS[a.annotation].format(i=i, b=b, s=s)):
                compiled(x)
            end = time.time()
            rows.append(
                {
                    "request_id": f"r{i:04d}",
                    "worker": w,
                    "pid": pid,
                    "batch": b,
                    "seq": s,
                    "arrival_us": round(arrival * 1e6, 1),
                    "compute_start_us": round(begin * 1e6, 1),
                    "compute_end_us": round(end * 1e6, 1),
                    "compiled": state["graphs"] > graphs,
                    "cache_hit": counters["inductor"]["fxgraph_cache_hit"] > hits,
                    "eager": state["ran"] is None,
                    "graph": state["ran"],
                    "warm_graph": state["ran"] is not None and state["ran"] < warm_graphs,
                }
            )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = path.read_bytes()
    results.put({"worker": w, "rows": rows, "trace": trace})


def _write(out: Path, rows: list[dict[str, Any]], traces: list[Path], profs: list[bytes]) -> None:
    """The exports, gzip compressed, with fixed gzip headers (reproducible bytes)."""
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
                "plan_id": "torch-compile",
                "plan_variant": "fallback"
                if r["eager"]
                else ("static" if r["warm_graph"] else "adapted"),
                "core": r["worker"],
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
                "ts_us": r["compute_start_us"],
                "dur_us": round(r["compute_end_us"] - r["compute_start_us"], 1),
                "shape": {"batch": r["batch"], "seq": r["seq"]},
                "plan_id": "torch-compile",
                "core": r["worker"],
                "detail": "first request of a shape no compiled graph admits",
            }
        )
        for r in rows
        if r["compiled"]
    ]
    _gz(out / "serving.runtime.jsonl.gz", ("\n".join(native) + "\n").encode())
    (out / "torch_trace").mkdir(exist_ok=True)
    for k, trace_dir in enumerate(traces):
        for f in sorted(trace_dir.rglob("*.log")):
            _gz(out / "torch_trace" / f"w{k}.{f.name}.gz", f.read_bytes())
    for k, data in enumerate(profs):
        _gz(out / f"profiler.w{k}.json.gz", data)


def _gz(path: Path, data: bytes) -> None:
    with gzip.GzipFile(path, "wb", mtime=0) as fh:
        fh.write(data)


if __name__ == "__main__":
    main()
