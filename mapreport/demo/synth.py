"""Deterministic generator of the demo dataset in the native formats, with planted effects.

Every shape of every workload is declared below with the truth the analysis must recover:
its static compute time, how wrong the compile-time prediction is, how much the adapted
mapping gains and what adaptation costs, and which accuracy-versus-gain decision follows.
Tests read these declarations; `scale` multiplies request counts for benchmarks.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mapreport.demo import blocking as synth_blocking
from mapreport.demo.truth import MEM_PER_US, ShapeTruth, WorkloadTruth, request_row

SEED = 20261129
WINDOW_START_US = 1_795_831_200_000_000.0
"""2026-11-28 02:00 UTC, when the demo telemetry was "captured"."""


_ENV = {
    "compiler": "xla",
    "compiler_version": "2.18.1",
    "runtime": "npu-rt",
    "runtime_version": "4.2.0",
    "driver": "550.54",
    "firmware": "fw-7.1",
    "hardware": "npu-v5",
    "container_digest": "sha256:4f1c9a",
    "git_sha": "9b1e2c7",
    "captured_at": "2026-11-28T02:00:00Z",
}


def _shape(
    dims: dict[str, int],
    requests: int,
    static_us: float,
    ratio: float,
    mix: tuple[float, float, float] = (1.0, 0.0, 0.0),
    gain: float = 0.0,
    cost_us: float = 0.0,
    slowdown: float = 1.8,
    expect: str = "insufficient_evidence",
    cls: str = "none",
    actions: tuple[str, ...] = (),
    blocking: str = "",
    **planted: float,
) -> ShapeTruth:
    """Shorthand: `mix` is the (static, adapted, fallback) share of the shape's requests;
    `cls` and `actions` are what the diagnosis must find; `planted` adds tail causes."""
    return ShapeTruth(
        dims,
        requests,
        static_us,
        ratio,
        *mix,
        adapted_gain=gain,
        fallback_slowdown=slowdown,
        adaptation_cost_us=cost_us,
        expect=expect,
        expect_class=cls,
        actions=actions,
        blocking=blocking,
        **planted,
    )


# fmt: off
ADAPT = (0.6, 0.4, 0.0)
UNCOVERED = (0.0, 0.6, 0.4)
OVERHEAD = ("adaptation_overhead",)

WORKLOADS: tuple[WorkloadTruth, ...] = (
    WorkloadTruth(
        workload="bert-base",
        slice="",
        plan_id="bert-v3",
        precision="bf16",
        buckets=(
            {"batch": [1, 8], "seq": [1, 64]},
            {"batch": [1, 4], "seq": [65, 128]},
            {"batch": [5, 8], "seq": [65, 128]},
            {"batch": [1, 8], "seq": [129, 256]},
            {"batch": [9, 32], "seq": [1, 128]},
            {"batch": [1, 32], "seq": [1, 512]},
        ),
        synthetic_only=({"batch": [33, 64], "seq": [257, 512]},),
        shapes=(
            _shape({"batch": 1, "seq": 32}, 900, 820.0, 1.05, (0.7, 0.3, 0.0), 0.0, 14_000.0,
                   expect="static_sufficient", cls="adaptation_overhead", actions=OVERHEAD),
            # 15% of this shape's requests run the unfused build (fusion-effect comparison)
            _shape({"batch": 4, "seq": 96}, 800, 2_150.0, 0.97, ADAPT, 0.25, 9_000.0,
                   expect="specialise", actions=("specialise",), unfused_share=0.15),
            _shape({"batch": 8, "seq": 128}, 700, 4_400.0, 0.6, ADAPT, 0.3, 12_000.0,
                   expect="close_the_loop", actions=("close_the_loop",)),
            _shape({"batch": 16, "seq": 64}, 500, 3_900.0, 1.6, (0.7, 0.3, 0.0), 0.0, 6_000.0,
                   expect="find_bottleneck", cls="mapping_inaccuracy",
                   actions=("mapping_inaccuracy",)),
            # queueing bursts: 12% of requests wait 8-20 ms in the scheduler queue
            _shape({"batch": 8, "seq": 200}, 400, 6_300.0, 1.08, cls="queueing",
                   actions=("queueing",), queue_burst=0.12),
            # a slow core: on core 3 this shape computes 1.7x slower
            _shape({"batch": 4, "seq": 384}, 300, 5_200.0, 0.9, cls="core_imbalance",
                   actions=("core_imbalance",), slow_core=1.7),
            _shape({"batch": 2, "seq": 640}, 300, 4_000.0, 1.0, UNCOVERED, 0.45, 20_000.0,
                   slowdown=1.8, expect="close_the_loop", cls="mapping_fallback",
                   actions=("mapping_fallback",)),
            # too few samples for any finding
            _shape({"batch": 3, "seq": 50}, 8, 900.0, 1.0, (0.5, 0.5, 0.0), 0.2, 500.0,
                   cls="insufficient_evidence"),
            # head-of-line blocking (synth_blocking): batch=1,seq=1024 is not compiled in
            # warm-up and recompiles on the serving path (1.2-1.7 s, three workers a night);
            # batch=2,seq=64 requests queue behind it
            _shape({"batch": 1, "seq": 1024}, 16, 6_000.0, 1.0, (0.0, 1.0, 0.0),
                   cls="insufficient_evidence", blocking=synth_blocking.TRIGGER),
            _shape({"batch": 2, "seq": 64}, 300, 815.0, 1.0, cls="blocked_behind_adaptation",
                   blocking=synth_blocking.VICTIM),
        ),
        compile_env=dict(_ENV),
        runtime_env=dict(_ENV, host="node-a17"),
        runtime_file="bert-base.runtime.jsonl.gz",
        ops=(("embedding", 0.06), ("attention", 0.46), ("ffn", 0.38), ("layernorm", 0.10)),
        totals=False,
        unfused_plan="bert-v3-nofuse",
        slice_actions=("adaptation_blocking",),
    ),
    WorkloadTruth(
        workload="resnet50-int8",
        slice="prod",
        plan_id="rn50-int8-v2",
        precision="int8",
        buckets=(
            {"batch": 1, "hw": 224},
            {"batch": [2, 8], "hw": 224},
            {"batch": [9, 16], "hw": 224},
            {"batch": [17, 32], "hw": 224},
            {"batch": [1, 8], "hw": [225, 384]},
        ),
        synthetic_only=({"batch": [64, 128], "hw": 224},),
        shapes=(
            # fallback traffic on a covered shape: 8% of requests take the generic path
            _shape({"batch": 1, "hw": 224}, 1500, 610.0, 1.02, (0.92, 0.0, 0.08), slowdown=2.2,
                   cls="mapping_fallback", actions=("mapping_fallback",)),
            _shape({"batch": 4, "hw": 224}, 800, 1_350.0, 0.95, ADAPT, 0.2, 8_000.0,
                   expect="specialise", actions=("specialise",)),
            _shape({"batch": 16, "hw": 224}, 600, 4_100.0, 1.1, ADAPT, 0.0, 60_000.0,
                   expect="static_sufficient", cls="adaptation_overhead", actions=OVERHEAD),
            _shape({"batch": 8, "hw": 320}, 500, 4_800.0, 0.55, (0.5, 0.5, 0.0), 0.35, 10_000.0,
                   expect="close_the_loop", actions=("close_the_loop",)),
            _shape({"batch": 32, "hw": 224}, 60, 7_900.0, 1.04),
            _shape({"batch": 2, "hw": 512}, 300, 2_900.0, 1.0, UNCOVERED, 0.375, 9_000.0,
                   slowdown=1.6, expect="close_the_loop", cls="mapping_fallback",
                   actions=("mapping_fallback",)),
        ),
        compile_env=dict(_ENV, driver="535.104"),
        runtime_env=dict(_ENV, host="node-b03"),
        runtime_file="resnet50-int8.runtime.jsonl",
        ops=(("stem", 0.08), ("stage1-3", 0.62), ("stage4", 0.24), ("head", 0.06)),
        slice_actions=("environment_mismatch",),
    ),
    WorkloadTruth(
        workload="llama-decode",
        slice="chat",
        plan_id="llama-int8-v1",
        precision="int8",
        buckets=(
            {"batch": [1, 2], "ctx": [1, 2048]},
            {"batch": [3, 4], "ctx": [1, 2048]},
            {"batch": [5, 8], "ctx": [1, 2048]},
            {"batch": [9, 16], "ctx": [1, 2048]},
            {"batch": [1, 16], "ctx": [2049, 8192]},
        ),
        synthetic_only=(),
        shapes=(
            _shape({"batch": 1, "ctx": 512}, 700, 9_500.0, 0.98, (0.7, 0.3, 0.0), 0.0, 120_000.0,
                   expect="static_sufficient", cls="adaptation_overhead", actions=OVERHEAD),
            _shape({"batch": 4, "ctx": 1024}, 600, 12_800.0, 1.03, ADAPT, 0.18, 30_000.0,
                   expect="specialise", actions=("specialise",)),
            _shape({"batch": 8, "ctx": 2048}, 500, 21_000.0, 0.7, ADAPT, 0.22, 40_000.0,
                   expect="close_the_loop", actions=("close_the_loop",)),
            _shape({"batch": 16, "ctx": 1024}, 400, 24_000.0, 1.35, (0.7, 0.3, 0.0), 0.0,
                   25_000.0, expect="find_bottleneck", cls="mapping_inaccuracy",
                   actions=("mapping_inaccuracy",)),
            # memory bursts: 10% of requests peak over the bucket's budget and run 1.9x slower
            _shape({"batch": 2, "ctx": 4096}, 300, 19_000.0, 1.12, cls="memory_burst",
                   actions=("memory_burst",), mem_burst=0.10),
            _shape({"batch": 1, "ctx": 12000}, 200, 26_000.0, 1.0, UNCOVERED, 0.45, 50_000.0,
                   slowdown=1.8, expect="close_the_loop", cls="mapping_fallback",
                   actions=("mapping_fallback",)),
            # its bucket's prediction (batch=4,ctx=1024's) is 12% above its compute; from the
            # demo's third night it computes 23% slower (synth_nights.DRIFTED): cost-model drift
            _shape({"batch": 3, "ctx": 1024}, 60, 11_771.0, 1.0),
        ),
        compile_env=dict(_ENV, compiler="tvm-unity", compiler_version="0.19.0"),
        runtime_env=dict(_ENV, compiler="tvm-unity", compiler_version="0.19.0", host="node-c11"),
        runtime_file="llama-decode.runtime.csv",
        ops=(("prefill_attn", 0.3), ("decode_attn", 0.35), ("mlp", 0.35)),
        # the CSV runtime trace carries no environment line; the int8 plan has no quality record
        slice_actions=("observability", "precision_without_quality"),
    ),
)
# fmt: on

QUALITY = (
    {
        "workload": "bert-base",
        "precision": "bf16",
        "metric": "f1",
        "baseline": 0.884,
        "value": 0.882,
        "max_drop": 0.004,
    },
    {
        "workload": "resnet50-int8",
        "slice": "prod",
        "precision": "int8",
        "metric": "top1",
        "baseline": 0.761,
        "value": 0.758,
        "max_drop": 0.005,
    },
)
"""Quality evidence for the bf16 and the resnet int8 plans; the llama int8 plan has none."""


def shape_key(dims: dict[str, int]) -> str:
    """The canonical string of a named shape (same rule as mapreport.core.shapes)."""
    return ",".join(f"{k}={dims[k]}" for k in sorted(dims))


def _bucket_contains(bucket: dict[str, Any], dims: dict[str, int]) -> bool:
    if set(bucket) != set(dims):
        return False
    for k, r in bucket.items():
        lo, hi = (r, r) if isinstance(r, int) else r
        if not lo <= dims[k] <= hi:
            return False
    return True


def _points(bucket: dict[str, Any]) -> int:
    n = 1
    for r in bucket.values():
        lo, hi = (r, r) if isinstance(r, int) else r
        n *= hi - lo + 1
    return n


def true_bucket(w: WorkloadTruth, s: ShapeTruth) -> dict[str, Any] | None:
    """The tightest declared bucket holding a shape (the generator's own containment rule)."""
    holding = [b for b in w.buckets if _bucket_contains(b, s.dims)]
    return min(holding, key=_points) if holding else None


def bucket_prediction(w: WorkloadTruth, bucket: dict[str, Any]) -> float:
    """The cost model's whole-model prediction for a bucket: right for its busiest shape's
    planted ratio; the other shapes in the bucket inherit it (one prediction per bucket)."""
    inside = [s for s in w.shapes if true_bucket(w, s) == bucket]
    if not inside:
        return 15_000.0
    top = max(inside, key=lambda s: s.requests)
    return round(top.static_us * top.predicted_ratio, 3)


def bucket_budget(w: WorkloadTruth, bucket: dict[str, Any]) -> int:
    """The bucket's memory budget: 1.5x the peak memory of its largest shape."""
    inside = [s for s in w.shapes if true_bucket(w, s) == bucket]
    return int(max((s.static_us for s in inside), default=15_000.0) * MEM_PER_US * 1.5)


def compile_records(w: WorkloadTruth) -> Iterator[dict[str, Any]]:
    """Compile profile lines: per bucket, its ops (and a __total__ unless `totals` is off)."""
    yield {"environment": w.compile_env}
    for bucket in (*w.buckets, *w.synthetic_only):
        base = bucket_prediction(w, bucket)
        budget = bucket_budget(w, bucket)
        for core, (op, frac) in enumerate(w.ops):
            yield {
                "workload": w.workload,
                **({"slice": w.slice} if w.slice else {}),
                "plan_id": w.plan_id,
                "shape_bucket": bucket,
                "op": op,
                "predicted_us": base * frac,
                "prediction_source": "cost_model",
                "kernel": f"{op}_k{len(op) % 4}",
                "tile": "128x64",
                "core": core % 4,
                "fusion_group": "attn_block" if op in ("attention", "layernorm") else None,
                "precision": w.precision,
                "predicted_peak_mem_bytes": int(base * frac * MEM_PER_US),
                "mem_budget_bytes": budget,
                "compile_ms": 120.0 + 40 * core,
                "compiler_pass": "auto-mapper-v2",
            }
        if w.unfused_plan and any(
            s.unfused_share and true_bucket(w, s) == bucket for s in w.shapes
        ):
            for op, frac in w.ops:
                yield {
                    "workload": w.workload,
                    **({"slice": w.slice} if w.slice else {}),
                    "plan_id": w.unfused_plan,
                    "shape_bucket": bucket,
                    "op": op,
                    "predicted_us": base * frac * 1.1,
                    "prediction_source": "cost_model",
                    "precision": w.precision,
                    "mem_budget_bytes": budget,
                }
        if w.totals:
            yield {
                "workload": w.workload,
                **({"slice": w.slice} if w.slice else {}),
                "plan_id": w.plan_id,
                "shape_bucket": bucket,
                "op": "__total__",
                "predicted_us": round(base, 3),
                "prediction_source": "cost_model",
                "precision": w.precision,
            }


def runtime_records(
    w: WorkloadTruth, scale: float, rng: np.random.Generator, start_us: float = WINDOW_START_US
) -> Iterator[dict[str, Any]]:
    """Runtime telemetry: requests (time-ordered) and adaptation events."""
    yield {"environment": w.runtime_env}
    rows: list[dict[str, Any]] = []
    for si, s in enumerate(w.shapes):
        if s.blocking:
            continue
        n = max(1, round(s.requests * scale)) if s.requests >= 20 else s.requests
        covered = true_bucket(w, s) is not None
        variants = rng.choice(
            ["static", "adapted", "fallback"],
            size=n,
            p=np.array([s.static_share, s.adapted_share, s.fallback_share])
            / (s.static_share + s.adapted_share + s.fallback_share),
        )
        baseline = s.static_us if covered else s.static_us * s.fallback_slowdown
        medians = {
            "static": s.static_us,
            "fallback": s.static_us * s.fallback_slowdown,
            "adapted": baseline * (1 - s.adapted_gain),
        }
        compute = np.array([medians[v] for v in variants]) * rng.lognormal(0.0, 0.08, n)
        queue = rng.lognormal(np.log(180.0), 0.5, n)
        admission = rng.lognormal(np.log(15.0), 0.3, n)
        arrival = np.sort(rng.uniform(0, 3.6e9, n)) + start_us
        cores = rng.integers(0, 4, n)
        errors = rng.random(n) < 0.004
        mem = s.static_us * MEM_PER_US * rng.lognormal(0.0, 0.05, n)
        # planted tail causes (each off unless the shape declares it)
        queue = queue + (rng.random(n) < s.queue_burst) * rng.uniform(8_000, 20_000, n)
        compute = compute * np.where(cores == 3, s.slow_core, 1.0)
        bucket = true_bucket(w, s)
        burst = rng.random(n) < s.mem_burst
        if bucket is not None:
            mem = np.where(burst, bucket_budget(w, bucket) * rng.uniform(1.2, 1.5, n), mem)
        compute = compute * np.where(burst, 1.9, 1.0)
        unfused = np.zeros(n, dtype=bool)
        if s.unfused_share:
            unfused = rng.random(n) < s.unfused_share
            variants = np.where(unfused, "static", variants)
            compute = np.where(unfused, s.static_us * 1.12 * rng.lognormal(0.0, 0.08, n), compute)
            mem = np.where(unfused, mem * 0.9, mem)
        mem = mem.astype(np.int64)
        for i in range(n):
            start = arrival[i] + admission[i] + queue[i]
            rows.append(
                request_row(
                    w,
                    f"{w.workload[:4]}-{si:02d}-{i:06d}",
                    s,
                    (arrival[i], arrival[i] + admission[i], start, start + compute[i]),
                    w.unfused_plan if unfused[i] else w.plan_id,
                    str(variants[i]),
                    int(cores[i]),
                    "interactive" if i % 3 else "batch",
                    int(mem[i]),
                    "timeout" if errors[i] else "ok",
                )
            )
        if s.adaptation_cost_us:
            kinds = ["recompile"] if not covered else ["retune", "remap"]
            parts = 4
            for k in range(parts):
                rows.append(
                    {
                        "event": kinds[k % len(kinds)],
                        "workload": w.workload,
                        **({"slice": w.slice} if w.slice else {}),
                        "ts_us": round(float(arrival[min(k * n // parts, n - 1)]), 1),
                        "dur_us": s.adaptation_cost_us / parts,
                        "shape": s.dims,
                        "plan_id": w.plan_id,
                        "detail": f"tactic search round {k + 1}",
                    }
                )
    planted = [(si, s) for si, s in enumerate(w.shapes) if s.blocking]
    if planted:
        rows += synth_blocking.planted_rows(w, planted, rows, start_us)
    rows.sort(key=lambda r: r.get("arrival_us", r.get("ts_us", 0.0)))
    yield from rows


def csv_rows(records: Iterator[dict[str, Any]]) -> str:
    """Runtime records as CSV (shape as its canonical string); the environment line is dropped."""
    cols = [
        "workload",
        "slice",
        "request_id",
        "shape",
        "arrival_us",
        "queue_start_us",
        "compute_start_us",
        "compute_end_us",
        "plan_id",
        "plan_variant",
        "core",
        "stream",
        "batch_size",
        "mem_peak_bytes",
        "precision",
        "status",
        "event",
        "ts_us",
        "dur_us",
        "detail",
    ]
    buf = io.StringIO()
    out = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    out.writeheader()
    for r in records:
        if "environment" in r:
            continue
        row = dict(r)
        if isinstance(row.get("shape"), dict):
            row["shape"] = shape_key(row["shape"])
        out.writerow(row)
    return buf.getvalue()


def jsonl(records: Iterator[dict[str, Any]]) -> bytes:
    """Records as JSON Lines (null fields left out)."""
    return "".join(
        json.dumps({k: v for k, v in r.items() if v is not None}, separators=(",", ":")) + "\n"
        for r in records
    ).encode()


def generate(
    out: Path,
    scale: float = 1.0,
    seed: int = SEED,
    workloads: Sequence[WorkloadTruth] = WORKLOADS,
    start_us: float = WINDOW_START_US,
) -> list[Path]:
    """Write the demo inputs (compile profiles, runtime traces, quality) into `out`; the
    runtime traces span the hour from `start_us`."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    written = []
    for w in workloads:
        cpath = out / f"{w.workload}.compile.jsonl"
        cpath.write_bytes(jsonl(compile_records(w)))
        rpath = out / w.runtime_file
        records = runtime_records(w, scale, rng, start_us)
        if rpath.suffix == ".csv":
            rpath.write_text(csv_rows(records))
        elif rpath.suffix == ".gz":
            with gzip.GzipFile(rpath, "wb", mtime=0) as fh:
                fh.write(jsonl(records))
        else:
            rpath.write_bytes(jsonl(records))
        written += [cpath, rpath]
    qpath = out / "quality.jsonl"
    qpath.write_bytes(jsonl(iter(QUALITY)))
    written.append(qpath)
    return written
