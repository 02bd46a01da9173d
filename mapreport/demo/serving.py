"""The demo's served LLM: a chat model behind Triton, benchmarked each night by AIPerf while
Prometheus scrapes the server's /metrics, so the report's serving sections have real-format
inputs (an AIPerf `profile_export.jsonl`, a series of scrapes with their times), and the PyTorch
profiler traces its first engine steps (`kineto.served_trace`: the op x shape table's input).

Per night: REQUESTS requests between 03:00 and 03:20 UTC, input lengths from a log-normal
around 700 tokens (a tail to 6,000), output lengths around 180 (at most 250); TTFT grows with
the input (prefill) and with the server's queue, ITL with the load; 1% cancelled. The scrapes
every 60 s count the same requests on the server side (no network: a few ms less than the
client sees);
the server restarts once during the third night (its counters reset). Seeded: the files are
the same on every run.
"""

from __future__ import annotations

import gzip
import json
from datetime import date
from pathlib import Path

import numpy as np

from mapreport.demo.kineto import served_trace

MODEL = "qwen-chat"
TRACE = f"{MODEL}.pt.trace.json.gz"
"""The PyTorch profiler's trace of the night's first engine steps (`kineto.served_trace`):
its name's first part is the workload it is ingested for."""
REQUESTS = 420
START_HOUR = 3
SPAN_S = 20 * 60
SCRAPE_S = 60
SEED = 20261130
NETWORK_US = 4_000.0
"""Client-side latency the server does not see."""
BASE_COUNTS = (52_000, 61_000, 0)
"""Successful requests the server had counted before each night's window (on the third night
it had just started)."""
RESTART_AT_S = 11 * 60
"""Seconds into the third night's window when the server restarts."""
BATCH_MEAN = 2.6
"""Requests per execution under dynamic batching."""


def _requests(rng: np.random.Generator, night: int, start_s: float) -> list[dict[str, float]]:
    out = []
    arrivals = np.sort(rng.uniform(0, SPAN_S, REQUESTS))
    isl = np.clip(rng.lognormal(np.log(700), 0.7, REQUESTS), 40, 6000).astype(int)
    osl = np.clip(rng.normal(180, 30, REQUESTS), 20, 250).astype(int)
    load = 1.0 + 0.15 * night  # the third night is the busiest
    for i in range(REQUESTS):
        queue_us = float(rng.exponential(30_000 * load))
        if rng.uniform() < 0.04:  # a queueing burst behind a long prefill
            queue_us += float(rng.uniform(400_000, 900_000))
        prefill_us = 2_000.0 + 0.9 * isl[i] * 100
        itl_us = float(rng.normal(19_000 * load, 1_500))
        ttft = queue_us + prefill_us
        latency = ttft + max(osl[i] - 1, 0) * itl_us
        out.append(
            {
                "start_us": (start_s + arrivals[i]) * 1e6,
                "queue_us": queue_us,
                "compute_us": latency - queue_us,
                "ttft_us": ttft + NETWORK_US / 2,
                "latency_us": latency + NETWORK_US,
                "itl_us": itl_us,
                "isl": int(isl[i]),
                "osl": int(osl[i]),
                "cancelled": bool(rng.uniform() < 0.01),
            }
        )
    return out


def aiperf_lines(requests: list[dict[str, float]]) -> str:
    """The requests as AIPerf's newer profile export writes them."""
    lines = []
    for i, r in enumerate(requests):
        start_ns = int(r["start_us"] * 1000)
        meta = {
            "session_num": i,
            "x_request_id": f"{MODEL}-{start_ns:x}-{i}",
            "request_start_ns": start_ns,
            "request_end_ns": start_ns + int(r["latency_us"] * 1000),
            "benchmark_phase": "profiling",
            "was_cancelled": bool(r["cancelled"]),
            "cancellation_time_ns": start_ns + 5_000_000 if r["cancelled"] else None,
        }
        if r["cancelled"]:
            meta["request_end_ns"] = None
            metrics: dict[str, object] = {}
        else:
            metrics = {
                "request_latency": {"value": r["latency_us"] / 1e3, "unit": "ms"},
                "time_to_first_token": {"value": r["ttft_us"] / 1e3, "unit": "ms"},
                "inter_token_latency": {"value": r["itl_us"] / 1e3, "unit": "ms"},
                "input_sequence_length": {"value": r["isl"], "unit": "tokens"},
                "output_sequence_length": {"value": r["osl"], "unit": "tokens"},
            }
        lines.append(json.dumps({"metadata": meta, "metrics": metrics, "error": None}))
    return "\n".join(lines) + "\n"


def scrape_text(
    requests: list[dict[str, float]], night: int, start_s: float, rng: np.random.Generator
) -> str:
    """Triton's /metrics every SCRAPE_S seconds over the window, each after its time mark."""
    base = float(BASE_COUNTS[night])
    totals = {"n": base, "req": base * 1.1e6, "queue": base * 3.2e4, "comp": base * 1.07e6}
    done = 0
    out = []
    for k in range(SPAN_S // SCRAPE_S + 1):
        t = start_s + k * SCRAPE_S
        if night == 2 and k * SCRAPE_S == RESTART_AT_S:
            totals = dict.fromkeys(totals, 0.0)  # restarted: counters from zero
        while done < len(requests) and requests[done]["start_us"] <= t * 1e6:
            r = requests[done]
            done += 1
            if r["cancelled"]:
                continue
            totals["n"] += 1
            totals["req"] += r["queue_us"] + r["compute_us"]
            totals["queue"] += r["queue_us"]
            totals["comp"] += r["compute_us"]
        execs = round(totals["n"] / BATCH_MEAN)
        gpu = min(0.97, 0.55 + 0.1 * night + float(rng.normal(0, 0.04)))
        out += [
            f"# {t:.0f}",
            "# HELP nv_inference_request_success Number of successful inference requests",
            "# TYPE nv_inference_request_success counter",
            f'nv_inference_request_success{{model="{MODEL}",version="1"}} {totals["n"]:.0f}',
            "# TYPE nv_inference_count counter",
            f'nv_inference_count{{model="{MODEL}",version="1"}} {totals["n"]:.0f}',
            "# TYPE nv_inference_exec_count counter",
            f'nv_inference_exec_count{{model="{MODEL}",version="1"}} {execs}',
            "# TYPE nv_inference_request_duration_us counter",
            f'nv_inference_request_duration_us{{model="{MODEL}",version="1"}} {totals["req"]:.0f}',
            "# TYPE nv_inference_queue_duration_us counter",
            f'nv_inference_queue_duration_us{{model="{MODEL}",version="1"}} {totals["queue"]:.0f}',
            "# TYPE nv_inference_compute_infer_duration_us counter",
            f'nv_inference_compute_infer_duration_us{{model="{MODEL}",version="1"}} '
            f"{totals['comp']:.0f}",
            "# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)",
            "# TYPE nv_gpu_utilization gauge",
            f'nv_gpu_utilization{{gpu_uuid="GPU-5d1f0c7e-demo"}} {gpu:.3f}',
        ]
    return "\n".join(out) + "\n"


def generate_serving(folder: Path, night: int, day: date) -> list[Path]:
    """One night's AIPerf export and /metrics scrapes in `folder`/MODEL/."""
    rng = np.random.default_rng(SEED + night)
    start_s = (np.datetime64(day.isoformat(), "s") - np.datetime64(0, "s")).astype(int)
    start_s = float(start_s) + START_HOUR * 3600
    requests = _requests(rng, night, start_s)
    target = folder / MODEL
    target.mkdir(parents=True, exist_ok=True)
    export, scrapes = target / "profile_export.jsonl", target / "metrics.prom"
    export.write_text(aiperf_lines(requests))
    scrapes.write_text(scrape_text(requests, night, start_s, rng))
    trace = target / TRACE
    with gzip.GzipFile(trace, "wb", mtime=0) as fh:
        fh.write(served_trace(requests))
    return [export, scrapes, trace]
