"""PyTorch profiler (Kineto) traces, generated: host-side operators on one thread, each
launching its kernel on one device stream, in the Chrome-trace JSON torch.profiler writes.
`op_event`, `launch_events` and `trace_doc` make the events and the document, for the demo's
trace (`served_trace`, tests/test_demo_trace.py) and the tests' own (tests/test_roofline.py's
`op_trace`).

The demo's served LLM (`serving`) is profiled for a few engine steps at the start of each
night's AIPerf run: Qwen2.5-32B in bf16 on one H200 (hidden 5120, 64 layers, 40 query and 8
key-value heads of 128, MLP 27648, vocabulary 152064), the eager operators of each step with
their input shapes. The steps are the prefills of the night's first PREFILLS requests (their
input lengths as AIPerf's export states them), then DECODES decode steps of those requests
together, their contexts growing a token a step. Each kernel takes its op's roofline time on
the H200 (the larger of its FLOPs at the bf16 matrix peak and its bytes at the memory
bandwidth) over the share of the roofline its kind of op reaches (`EFFICIENCY`), with 3% noise:
a decode step takes about 15 ms, under the 19 ms inter-token latency AIPerf measures on the
first night, and each prefill less than its request's time to first token. The host launches
ahead of the device, so the device idles only between steps.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np

from mapreport.core.devices import DeviceLimits, Dtype, recognise

HOST = {"pid": 1, "tid": 1}
"""The serving thread's process and thread."""
DEVICE = {"pid": 0, "tid": 7}
"""The device and stream the kernels ran on."""
BF16 = "c10::BFloat16"
DEVICE_NAME = "NVIDIA H200"
PREFILLS, DECODES = 2, 2
"""Engine steps profiled: the first requests' prefills, then decode steps of them together."""
LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, MLP, VOCAB = 64, 5120, 40, 8, 128, 27648, 152064
"""Qwen2.5-32B."""
EFFICIENCY = {"gemm": 0.93, "attention": 0.85, "pointwise": 0.8}
"""Share of its roofline each kind of op's kernel reaches (decode GEMMs stream their weights
near the memory bandwidth; the headroom of each op x shape stays under the report's 5%
materiality, so the trace plants no finding)."""
SEED = 20261201
"""The kernels' timing noise (its own stream: the requests' generator is left as it was)."""
BYTES = 2
"""bf16."""


def op_event(
    op: str,
    ts: float,
    dur: float,
    ext: int,
    dims: Sequence[Sequence[int]],
    types: Sequence[str],
    concrete: Sequence[str] = (),
) -> dict[str, Any]:
    """One host-side operator call (`cpu_op`) with its record_shapes arguments."""
    args: dict[str, Any] = {"External id": ext, "Input Dims": dims, "Input type": types}
    if concrete:
        args["Concrete Inputs"] = concrete
    return {"ph": "X", "cat": "cpu_op", "name": op, "ts": ts, "dur": dur, "args": args, **HOST}


def launch_events(
    launch_ts: float,
    kernel_ts: float,
    dur: float,
    ids: tuple[int, int],
    name: str,
    launch_us: float = 5.0,
) -> list[dict[str, Any]]:
    """A kernel's launch on the host thread and the kernel on the device, both naming `ids`:
    the launching operator's external id and the launch's correlation."""
    ext, corr = ids
    launch = {"External id": ext, "correlation": corr}
    return [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "ts": launch_ts,
            "dur": launch_us,
            "args": launch,
            **HOST,
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "ts": kernel_ts,
            "dur": dur,
            "args": {**launch, "device": 0},
            **DEVICE,
        },
    ]


def trace_doc(
    events: list[dict[str, Any]], device: str | None = None, base_ns: int | None = None
) -> dict[str, Any]:
    """The trace document: the events, the device's properties where named, and the time
    their `ts` count from (`baseTimeNanoseconds`, as PyTorch 2 writes it) where given."""
    doc: dict[str, Any] = {"schemaVersion": 1}
    if device:
        doc["deviceProperties"] = [{"id": 0, "name": device}]
    if base_ns is not None:
        doc["baseTimeNanoseconds"] = base_ns
    doc["traceEvents"] = events
    return doc


class Op(msgspec.Struct, frozen=True):
    """One operator of an engine step: its inputs, kernel and roofline time (us)."""

    op: str
    dims: list[list[int]]
    types: list[str]
    kernel: str
    roof_us: float
    kind: str
    concrete: tuple[str, ...] = ()


def _roof(flops: float, nbytes: float, gpu: DeviceLimits) -> float:
    """The roofline time of a call: FLOPs at the bf16 matrix peak or bytes at the bandwidth."""
    return max(flops / (gpu.matrix_tflops[Dtype.BF16] * 1e6), nbytes / (gpu.memory_gbps * 1e3))


def _gemm(m: int, k: int, n: int, kernel: str, gpu: DeviceLimits) -> Op:
    roof = _roof(2.0 * m * k * n, BYTES * (m * k + k * n + m * n), gpu)
    return Op("aten::mm", [[m, k], [k, n]], [BF16] * 2, kernel, roof, "gemm")


def _pointwise(op: str, dims: list[list[int]], kernel: str, gpu: DeviceLimits) -> Op:
    elements = [math.prod(d) for d in dims]
    roof = _roof(float(max(elements)), BYTES * (sum(elements) + max(elements)), gpu)
    return Op(op, dims, [BF16] * len(dims), kernel, roof, "pointwise")


def _attention(batch: int, q: int, kv: int, causal: bool, gpu: DeviceLimits) -> Op:
    """Attention with the key-value heads expanded to the query heads, as SDPA is called."""
    flops = 4.0 * batch * HEADS * q * kv * HEAD_DIM / (2 if causal else 1)
    qs, kvs = [batch, HEADS, q, HEAD_DIM], [batch, HEADS, kv, HEAD_DIM]
    nbytes = BYTES * batch * HEADS * HEAD_DIM * (2 * q + 2 * kv)
    concrete: tuple[str, ...] = ()
    op = "aten::_scaled_dot_product_efficient_attention"
    if causal:  # prefill: flash attention, is_causal its fifth argument
        op, concrete = "aten::_scaled_dot_product_flash_attention", ("", "", "", "0.0", "True")
    kernel = "flash_fwd_kernel" if causal else "fmha_cutlassF_bf16_aligned_64x128"
    roof = _roof(flops, nbytes, gpu)
    return Op(op, [qs, kvs, kvs], [BF16] * 3, kernel, roof, "attention", concrete)


def step_ops(tokens: int, batch: int, context: int, gpu: DeviceLimits) -> list[Op]:
    """The operators of one engine step over `tokens` new tokens of `batch` sequences (a
    prefill: one sequence, its prompt; a decode: a token each) reading `context` keys."""
    prefill = tokens > batch
    norm = _pointwise("aten::rms_norm", [[tokens, HIDDEN], [HIDDEN]], "rms_norm_kernel", gpu)
    qkv = HIDDEN + 2 * KV_HEADS * HEAD_DIM
    layer = [
        norm,
        _gemm(tokens, HIDDEN, qkv, "sm90_xmma_gemm_bf16_qkv", gpu),
        _attention(batch, tokens // batch, context, prefill, gpu),
        _gemm(tokens, HIDDEN, HIDDEN, "sm90_xmma_gemm_bf16_o", gpu),
        norm,
        _gemm(tokens, HIDDEN, 2 * MLP, "sm90_xmma_gemm_bf16_gate_up", gpu),
        _pointwise("aten::silu", [[tokens, MLP]], "silu_kernel", gpu),
        _pointwise("aten::mul", [[tokens, MLP], [tokens, MLP]], "mul_kernel", gpu),
        _gemm(tokens, MLP, HIDDEN, "sm90_xmma_gemm_bf16_down", gpu),
    ]
    # a lookup moves the rows it gathers (read and written), not the table
    gathered = _roof(0.0, 2.0 * BYTES * tokens * HIDDEN, gpu)
    embed = Op(
        "aten::embedding",
        [[VOCAB, HIDDEN], [tokens]],
        [BF16, "long int"],
        "embedding_kernel",
        gathered,
        "pointwise",
    )
    head = _gemm(batch, HIDDEN, VOCAB, "sm90_xmma_gemm_bf16_lm_head", gpu)
    return [embed, *layer * LAYERS, norm, head]


def _step(
    ops: list[Op], start: float, ids: list[int], noise: np.ndarray
) -> tuple[list[dict[str, Any]], float]:
    """One engine step from `start`: its ProfilerStep, operators, launches and kernels, the
    host launching ahead of the device, and when its last kernel ends; `ids` holds the next
    external id, correlation and step number (advanced)."""
    events: list[dict[str, Any]] = []
    host, device = start + 20.0, start + 40.0
    for o, z in zip(ops, noise, strict=True):
        ext, corr = ids[0], ids[1]
        events.append(op_event(o.op, round(host, 3), 6.0, ext, o.dims, o.types, o.concrete))
        dur = round(o.roof_us / EFFICIENCY[o.kind] * float(z), 3)
        device = max(device, host + 6.0)
        events += launch_events(
            round(host + 1.0, 3), round(device, 3), dur, (ext, corr), o.kernel, 3.0
        )
        ids[0], ids[1] = ext + 1, corr + 1
        host += 8.0
        device += dur + 1.0
    name = f"ProfilerStep#{ids[2]}"
    ids[2] += 1
    span = {
        "ph": "X",
        "cat": "user_annotation",
        "name": name,
        "ts": round(start, 3),
        "dur": round(device - start, 3),
        **HOST,
    }
    return [span, *events], device


def served_trace(requests: Sequence[Mapping[str, float]]) -> bytes:
    """The profiler trace of the night's first engine steps over its `requests` (arrival
    order: `start_us`, `queue_us`, `isl`), as JSON bytes with `ts` from the first step."""
    gpu = recognise({"name": DEVICE_NAME})
    if gpu is None:
        raise LookupError(f"{DEVICE_NAME} is not in the device table (core/devices.py)")
    first = requests[:PREFILLS]
    start = first[0]["start_us"] + first[0]["queue_us"]
    plan = [step_ops(int(r["isl"]), 1, int(r["isl"]), gpu) for r in first]
    contexts = [int(r["isl"]) for r in first]
    plan += [step_ops(len(first), len(first), max(contexts) + k + 1, gpu) for k in range(DECODES)]
    rng = np.random.default_rng(SEED)
    ids = [1, 10_000, 1]  # external id, correlation, profiler step
    events: list[dict[str, Any]] = []
    t = start
    for ops in plan:
        step, end = _step(ops, t, ids, rng.lognormal(0.0, 0.03, len(ops)))
        events += step
        t = end + 50.0  # the scheduler between steps
    base_us = int(start)
    for e in events:
        e["ts"] = round(e["ts"] - base_us, 3)
    doc = trace_doc(events, DEVICE_NAME, base_us * 1000)
    return json.dumps(doc, separators=(",", ":")).encode()
