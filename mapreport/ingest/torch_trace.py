"""TORCH_TRACE structured logs (`TORCH_TRACE=dir` with torch.compile), as tlparse reads them:
one compilation per `compilation_metrics` record into `compile_event`, with the input shapes
described for that compile, its compile time, recompile reason and FX graph cache hit or miss.

A record is a glog prefix, a JSON envelope on the same line, and optionally payload lines that
start with a tab. The payloads this reader reads (chromium events, Inductor's per-op
estimates) are checked; a corrupted one is rejected by its line number and, under the
reader's default quarantine policy, counted and reported rather than fatal (`--on-error abort`
makes it fatal). Other artifacts are content, as tlparse treats them: `recompile_reasons` is
declared `json` but PyTorch writes a single reason as plain text, and both forms are read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mapreport.core.errors import ErrorPolicy
from mapreport.core.schema import INT32_MAX
from mapreport.core.shapes import UNKNOWN, ShapeError, canonical_shape
from mapreport.ingest.base import Head
from mapreport.ingest.inductor_code import WrapperCode, planned_ops, read_wrapper
from mapreport.ingest.records import LONG_LINE, JsonDecoder, bounded_lines, open_bytes
from mapreport.ingest.spec import as_float

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

PREFIX = re.compile(rb"^[IWEVD]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +(?P<pid>\d+) [^\]\n]+\] ")
"""The glog prefix torch's structured logging writes: level, date, time, the process id, the
source location."""
_DECODE: JsonDecoder[Any] = JsonDecoder()
_ENCODE = msgspec.json.Encoder().encode


class _Compile(msgspec.Struct):
    """What the log says about one compile id before its metrics record arrives."""

    sizes: dict[int, list[int]] = msgspec.field(default_factory=dict)
    sources: dict[int, str] = msgspec.field(default_factory=dict)
    """Tensor id -> dynamo's source of it (`L['x']`, `L['self']._parameters['weight']`)."""
    parameters: set[int] = msgspec.field(default_factory=set)
    symbols: list[dict[str, Any]] = msgspec.field(default_factory=list)
    """The dims the graph treats as symbolic: source, value at compile time, range admitted."""
    cache: str | None = None
    planned: bool = False
    """Inductor logged per-op runtime estimates for this compile (its compile_plan rows)."""
    reasons: str | None = None
    """The `recompile_reasons` artifact's text (used when the metrics record states none)."""
    code: WrapperCode | None = None
    """Inductor's wrapper code of the graph (`inductor_output_code`): its kernel launches."""
    breaks: list[dict[str, str | None]] = msgspec.field(default_factory=list)
    """Where dynamo broke the graph and on what (`dynamo_graph_break_reason`)."""


REASONS = "recompile_reasons"
MAX_PAYLOAD_BYTES = 64 << 20
"""A record's payload (its tab-prefixed lines) larger than this is rejected, not held."""
_LIMIT = re.compile(r"(recompile|cache.size)[ _]limit", re.I)
"""How dynamo's fail_reason names a compile refused at the recompile limit (the frame then
runs eagerly for shapes no compiled graph admits)."""
_MISMATCH = re.compile(
    r"tensor '(?P<tensor>[^']{1,200})' size mismatch at index (?P<dim>\d{1,9})\. "
    r"expected (?P<expected>\d{1,18}), actual (?P<actual>\d{1,18})\b"
)
"""A guard failure dynamo gives as a recompile's reason: one dim of one input changed size."""
_TIMES = ("start_time", "entire_frame_compile_time_s", "dynamo_cumulative_compile_time_us")


GRAPH_BREAK = "dynamo_graph_break_reason"
MAX_BREAKS = 64
"""Graph breaks kept per compile (a frame breaks at a few places; the rest is repetition)."""
_BREAK_AT = re.compile(r"^Graph break (?:in user code )?at (?P<at>.{1,500}:\d{1,9})\s*$")
_USER_FRAME = re.compile(r'^\s*File "(?P<file>[^"]{1,500})", line (?P<line>\d{1,9}), in ')


def graph_break(payload: bytes) -> dict[str, str | None]:
    """Where a graph broke (`file:line`), the kind of break dynamo names (`Failed to trace
    builtin operator`, `Dynamic shape operator`), its explanation, and the user's line of
    code that broke it, from the first lines of a `dynamo_graph_break_reason` payload."""
    lines = payload[:64_000].decode("utf-8", errors="replace").split("\n")[:200]
    out: dict[str, str | None] = {"at": None, "kind": None, "explanation": None, "code": None}
    reason_seen = user = False
    for i, line in enumerate(lines):
        at = _BREAK_AT.match(line)
        if at is not None and out["at"] is None:
            out["at"] = at["at"]
        elif line.startswith(("Graph Break Reason:", "Reason:")):
            reason_seen = True
            rest = line.split(":", 1)[1].strip()
            out["kind"] = rest[:300] or None
        elif reason_seen and line and not line.startswith(" ") and out["explanation"] is None:
            out["kind"] = line.strip()[:300]  # dynamo's own name for the break, after a blank
            reason_seen = False
        elif line.startswith("  Explanation: ") and out["explanation"] is None:
            out["explanation"] = line.removeprefix("  Explanation: ").strip()[:500]
        elif line.startswith("User code traceback:"):
            user = True
        elif user and _USER_FRAME.match(line) and i + 1 < len(lines):
            out["code"] = lines[i + 1].split("#")[0].strip()[:300] or None  # the innermost wins
        elif user and not line.strip():
            user = False
    return out


def _reasons(payload: bytes) -> str | None:
    """The reasons of a `recompile_reasons` payload: a JSON list of strings, a JSON string,
    or (as PyTorch 2.13 writes one reason) the plain text itself."""
    try:
        value = _DECODE.decode(payload)
    except msgspec.DecodeError:
        value = payload.decode("utf-8", errors="replace")
    if isinstance(value, list):
        value = "; ".join(str(v) for v in value)
    return value.strip() or None if isinstance(value, str) else None


def _records(path: Path, sink: Sink) -> Iterator[tuple[int, int, dict[str, Any], bytes]]:
    """(line, process id, envelope, payload bytes) per record; undecodable records are
    rejected."""
    pending: tuple[int, int, dict[str, Any]] | None = None
    payload: list[bytes] = []
    size = 0
    with open_bytes(path) as fh:
        for line_no, raw in bounded_lines(fh):
            if raw is None:
                sink.reject(line_no, None, LONG_LINE, b"")
                continue
            if raw.startswith(b"\t"):
                size += len(raw)
                if pending is not None and size > MAX_PAYLOAD_BYTES:
                    why = f"payload longer than {MAX_PAYLOAD_BYTES} bytes"
                    sink.reject(pending[0], "payload", why, b"")
                    pending, payload = None, []  # the rest of it is skipped, line by line
                elif pending is not None:
                    payload.append(raw[1:])
                continue
            if pending is not None:
                yield pending[0], pending[1], pending[2], b"".join(payload)
            pending, payload, size = None, [], 0
            if not raw.strip():
                continue
            m = PREFIX.match(raw)
            if m is None:
                sink.reject(line_no, None, "not a glog-prefixed TORCH_TRACE record", raw[:2000])
                continue
            try:
                env = _DECODE.decode(raw[m.end() :])
            except msgspec.DecodeError as e:
                sink.reject(line_no, None, f"invalid JSON envelope: {e}", raw[:2000])
                continue
            if not isinstance(env, dict):
                sink.reject(line_no, None, "envelope is not a JSON object", raw[:2000])
                continue
            pending = (line_no, int(m["pid"]), env)
        if pending is not None:
            yield pending[0], pending[1], pending[2], b"".join(payload)


_USER_INPUT = re.compile(r"^L\[['\"](?!self['\"]|fn['\"])[^'\"]+['\"]\]")
"""A source dynamo names a user input by: a local of the compiled frame (`L['x']`,
`L['args'][0]`), not the module itself (`L['self']`, `L['fn']` of a compiled module)."""
_STATE = ("._parameters[", "._buffers[", "._modules[")
_SYMBOL_DIM = re.compile(r"^(?P<input>.+)\.size\(\)\[(?P<dim>\d+)\]$")
"""The source of a symbolic size: `L['x'].size()[1]`."""


def _describe(c: _Compile, env: dict[str, Any], name: object, payload: bytes) -> None:
    """Note what one record says about a compile: a tensor's size, its source, whether it is
    a parameter, a symbolic dim, the cache outcome, the recompile reasons."""
    tensor = env.get("describe_tensor")
    if isinstance(tensor, dict) and isinstance(tensor.get("size"), list):
        tid = tensor.get("id", len(c.sizes))
        if isinstance(tid, int):
            c.sizes[tid] = tensor["size"]
            if tensor.get("is_parameter") is True:
                c.parameters.add(tid)
    source = env.get("describe_source")
    if (
        isinstance(source, dict)
        and isinstance(source.get("id"), int)
        and isinstance(source.get("source"), str)
    ):
        c.sources[source["id"]] = source["source"]
    symbol = env.get("create_symbol")
    if isinstance(symbol, dict) and isinstance(symbol.get("source"), str):
        dim = _SYMBOL_DIM.match(symbol["source"])
        if dim is not None and all(s["symbol"] != symbol.get("symbol") for s in c.symbols):
            c.symbols.append(
                {
                    "symbol": symbol.get("symbol"),
                    "input": dim["input"],
                    "dim": int(dim["dim"]),
                    "value": symbol.get("val"),
                    "range": symbol.get("vr"),
                }
            )
    fixed = env.get("symbolic_shape_specialization")
    if isinstance(fixed, dict) and fixed.get("symbol") is not None:
        # a guard refined it to one value: the dim is static after all
        c.symbols = [s for s in c.symbols if s["symbol"] != fixed["symbol"]]
    if isinstance(name, str) and name.startswith("fx_graph_cache_"):
        c.cache = name.removeprefix("fx_graph_cache_")
    if name == REASONS and payload:
        c.reasons = _reasons(payload)
    if "inductor_output_code" in env and payload:
        c.code = read_wrapper(payload)
    if name == GRAPH_BREAK and payload and len(c.breaks) < MAX_BREAKS:
        c.breaks.append(graph_break(payload))


def _inputs(c: _Compile) -> list[int]:
    """The tensor ids of the graph's user inputs, in the order dynamo described them: those
    whose source is a local of the frame and not a parameter or buffer of a module. A log
    without sources (older PyTorch) gives every tensor that is not a parameter."""
    if c.sources:
        return [
            t
            for t in sorted(c.sizes)
            if t not in c.parameters
            and _USER_INPUT.match(c.sources.get(t, "")) is not None
            and not any(k in c.sources[t] for k in _STATE)
        ]
    return [t for t in sorted(c.sizes) if t not in c.parameters]


def _input_shape(c: _Compile) -> str | None:
    """The shape of the graph's user inputs in our notation (None: none was described)."""
    ids = _inputs(c)
    if not ids:
        return None
    try:
        return canonical_shape([c.sizes[t] for t in ids])
    except ShapeError:
        return None


ESTIMATES = "inductor_runtime_and_tensor_meta"
"""The artifact in which Inductor logs each scheduled op's estimated runtime."""
_PRECISION = {
    "float16": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32",
    "float64": "fp64",
    "int8": "int8",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
}


def _key(env: dict[str, Any]) -> str | None:
    frame, compile_ = env.get("frame_id"), env.get("frame_compile_id")
    if frame is None or compile_ is None:
        return None
    return f"{frame}/{compile_}"


class TorchTraceReader:
    """TORCH_TRACE structured logs of torch.compile and torch.export."""

    name = "torch-trace"
    summary = (
        "TORCH_TRACE structured logs (torch.compile): compiles, recompile reasons, cache hits, "
        "Inductor per-op runtime estimates"
    )
    tables = ("compile_event", "compile_plan")
    default_policy: ErrorPolicy = "quarantine"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """The first line carries a glog prefix followed by a JSON object."""
        first = head.data.split(b"\n", 1)[0]
        m = PREFIX.match(first)
        return m is not None and first[m.end() :].lstrip().startswith(b"{")

    def read(self, path: Path, sink: Sink) -> None:
        """One compile_event row per compilation_metrics record."""
        workload = sink.hints.get("workload") or path.name.split(".")[0]
        slice_ = sink.hints.get("slice", "")
        compiles: dict[tuple[int, str], _Compile] = {}
        for line, pid, env, payload in _records(path, sink):
            art = env.get("artifact")
            name = art.get("name") if isinstance(art, dict) else None
            if payload and ("chromium_event" in env or name == ESTIMATES):
                try:
                    body = _DECODE.decode(payload)
                except msgspec.DecodeError as e:
                    sink.reject(line, "payload", f"corrupted JSON payload: {e}", payload[:2000])
                    continue
            else:
                body = None
            key = _key(env)
            if key is not None and name == ESTIMATES and isinstance(body, dict):
                c = compiles.setdefault((pid, key), _Compile())
                c.planned = self._plan(sink, line, key, body, c, workload, slice_) or c.planned
            if key is not None:
                _describe(compiles.setdefault((pid, key), _Compile()), env, name, payload)
            metrics = env.get("compilation_metrics")
            if isinstance(metrics, dict):
                if not isinstance(metrics.get("compile_id"), str) and key is not None:
                    # newer logs name the compile in the envelope, not in the metrics
                    attempt = env.get("attempt") or 0
                    metrics = {**metrics, "compile_id": key + (f"_{attempt}" if attempt else "")}
                self._add(sink, line, pid, metrics, compiles, workload, slice_)

    @staticmethod
    def _plan(
        sink: Sink,
        line: int,
        key: str,
        body: dict[str, Any],
        c: _Compile,
        workload: str,
        slice_: str,
    ) -> bool:
        """compile_plan rows from Inductor's per-op estimates of one compile; True if any."""
        ops = body.get("ops")
        if not isinstance(ops, list):
            sink.reject(line, "payload.ops", "must be a list of scheduled ops", body)
            return False
        bucket = _input_shape(c)
        valid: list[tuple[dict[str, Any], float]] = []
        for i, op in enumerate(ops):
            est = as_float(op.get("estimated_runtime_ns")) if isinstance(op, dict) else None
            if not isinstance(op, dict) or not isinstance(op.get("name"), str) or est is None:
                sink.reject(
                    line, f"payload.ops[{i}]", "op needs a name and estimated_runtime_ns", op
                )
                continue
            valid.append((op, est))
        # an op listed twice (two calls of one library op) is two ops of the graph
        named = planned_ops([op["name"] for op, _ in valid], c.code)
        for (op, est), planned in zip(valid, named, strict=True):
            outputs = [o for o in op.get("outputs") or [] if isinstance(o, dict)]
            dtype = next((o.get("dtype") for o in outputs if o.get("dtype")), None)
            sink.add(
                "compile_plan",
                line,
                {
                    "workload": workload,
                    "slice": slice_,
                    "plan_id": key,
                    "shape_bucket": bucket or UNKNOWN,
                    "op": planned.op,
                    # Inductor writes 0 where it has no estimate (every op on CPU): not a
                    # prediction that the op takes no time
                    "predicted_us": est / 1e3 if est > 0 else None,
                    "prediction_source": "inductor estimated_runtime_ns",
                    "kernel": planned.kernel,
                    "tile": None,
                    "fusion_group": " + ".join(planned.fused) if planned.fused else None,
                    "core": None,
                    "precision": _PRECISION.get(str(dtype)) if dtype else None,
                    "predicted_peak_mem_bytes": None,
                    "mem_budget_bytes": None,
                    "compile_ms": None,
                    "extra": _ENCODE(
                        {
                            "type": op.get("type") if isinstance(op.get("type"), str) else None,
                            "outputs": [[o.get("shape"), o.get("dtype")] for o in outputs],
                        }
                    ).decode(),
                },
            )
        return bool(valid)

    @staticmethod
    def _add(
        sink: Sink,
        line: int,
        pid: int,
        m: dict[str, Any],
        compiles: dict[tuple[int, str], _Compile],
        workload: str,
        slice_: str,
    ) -> None:
        for key in _TIMES:  # an integer beyond float range is no time: the record is refused
            stated = m.get(key)
            if (
                isinstance(stated, int)
                and not isinstance(stated, bool)
                and as_float(stated) is None
            ):
                why = f"out of range: {str(stated)[:40]}... (not a time)"
                sink.reject(line, f"compilation_metrics.{key}", why, m)
                return
        compile_id = m.get("compile_id")
        if not isinstance(compile_id, str):
            # an ahead-of-time compile (torch.export, AOTInductor) has no dynamo frame id
            compile_id = f"aot@{line}"
        graph = compile_id.split(" ")[0].split("_")[0]
        # a log can hold several processes' runs: each compile's state ends with its metrics
        c = compiles.pop((pid, graph), _Compile())
        seconds = m.get("entire_frame_compile_time_s")
        if not isinstance(seconds, int | float) and isinstance(
            m.get("dynamo_cumulative_compile_time_us"), int | float
        ):
            seconds = m["dynamo_cumulative_compile_time_us"] / 1e6
        start = m.get("start_time")
        reason = m.get("recompile_reason")
        if not isinstance(reason, str):
            reason = c.reasons
        extra: dict[str, Any] = {
            k: m.get(k)
            for k in (
                "co_filename",
                "co_firstlineno",
                "cache_size",
                "backend_compile_time_s",
                "inductor_compile_time_s",
                "fail_type",
                "fail_reason",
                "guard_count",
                "remote_cache_time_saved_s",
            )
            if m.get(k) is not None
        }
        mismatch = [
            {
                "tensor": g["tensor"],
                "dim": int(g["dim"]),
                "expected": int(g["expected"]),
                "actual": int(g["actual"]),
            }
            for g in _MISMATCH.finditer(reason if isinstance(reason, str) else "")
        ]
        if mismatch:
            extra["mismatch"] = mismatch
        inputs = _inputs(c)
        if inputs:
            extra["inputs"] = [c.sources.get(t) for t in inputs]
        if c.symbols:
            extra["dynamic"] = c.symbols
        if c.breaks:
            extra["graph_breaks"] = c.breaks
        failed = m.get("fail_type") is not None or m.get("fail_reason") is not None
        limit = isinstance(m.get("fail_reason"), str) and _LIMIT.search(m["fail_reason"])
        sink.add(
            "compile_event",
            line,
            {
                "workload": workload,
                "slice": slice_,
                "compile_id": compile_id,
                "plan_id": graph if c.planned else None,
                "frame": m.get("co_name"),
                "shape": _input_shape(c),
                "ts_us": None if (t0 := as_float(start)) is None else t0 * 1e6,
                "compile_ms": None if (s := as_float(seconds)) is None else s * 1e3,
                "recompile_reason": reason if isinstance(reason, str) else None,
                "cache_hit": None if c.cache is None else c.cache == "hit",
                "op_count": m.get("graph_op_count")
                if isinstance(m.get("graph_op_count"), int)
                else None,
                "core": pid if pid <= INT32_MAX else None,
                "outcome": "limit_hit" if limit else "failed" if failed else "compiled",
                "extra": _ENCODE(extra).decode() if extra else None,
            },
        )
