"""TVM tuning records: what the tuner measured per workload and argument shapes, the compile
side's offline benchmark of each shape.

Three layouts, one record per line (`#` lines are comments):

- auto_scheduler (Ansor) measure records, v0.2..v0.6:
  `{"i": [[workload_key, target, ...], state], "r": [[costs_s], error_no, all_cost_s, ts], "v"}`;
  the workload key is a JSON list `[name or hash, args...]`.
- AutoTVM logs: `{"input": [target, task, args, kwargs], "config": {...}, "result": [[costs_s],
  error_no, all_cost_s, ts], "version": 0.2}`; `["TENSOR", shape, dtype]` arguments.
- MetaSchedule `database_tuning_record.json`: `[workload_index, [trace, run_secs, target,
  args_info]]`; the workload file that names the index is separate, so the op is
  `workload#<index>` and the shape comes from `args_info`.

Per (workload, target) the reader writes one `compile_plan` row whose `predicted_us` is the best
(lowest) mean time of the successful trials, and one `compile_event` whose `compile_ms` is the
summed tuning cost (`all_cost`) of every trial. A failed trial (non-zero error code, or a time of
1e9 s or more, TVM's marker for a failed run) is counted, never used as a time.
"""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mapreport.core.errors import ErrorPolicy
from mapreport.core.records import replace
from mapreport.core.shapes import ShapeError, canonical_shape
from mapreport.ingest.base import Head
from mapreport.ingest.jsondoc import json_text
from mapreport.ingest.records import LONG_LINE, JsonDecoder, bounded_lines, open_bytes
from mapreport.ingest.spec import FieldError, as_float
from mapreport.ingest.tvm_trials import (
    companion,
    failed,
    read_scores,
    trial_row,
    workload_keys,
    workloads_beside,
)

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

_DECODE: JsonDecoder[Any] = JsonDecoder()
_ANSOR = re.compile(rb'^\{\s*"i"\s*:\s*\[\s*\[')
_AUTOTVM = re.compile(rb'^\{\s*"input"\s*:\s*\[')
_META = re.compile(rb"^\[\s*\d+\s*,\s*\[\s*\[")


class _Workload(msgspec.Struct):
    """Every trial of one (workload, target) so far: kept as counts and the best trial only."""

    op: str
    target: str
    shape: str | None
    layout: str
    first_line: int
    trials: int = 0
    failed: int = 0
    errors: dict[str, int] = msgspec.field(default_factory=dict)
    tuning_s: float = 0.0
    best_s: float | None = None
    best_line: int | None = None
    first_ts: float | None = None
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


def _first_data_line(data: bytes) -> bytes:
    for line in data.split(b"\n"):
        s = line.strip()
        if s and not s.startswith(b"#"):
            return s
    return b""


def _shape(args: list[Any]) -> str | None:
    """Positional shape from workload arguments: each list of ints is a tensor, the scalar ints
    together are one more; strings (dtypes, layouts) are not dimensions."""
    tensors: list[list[int]] = []
    scalars: list[int] = []
    if any(isinstance(a, list) and a and a[0] == "TENSOR" for a in args):
        # AutoTVM marks its tensors; its other list arguments are strides, padding, dilation
        args = [a for a in args if isinstance(a, list) and a and a[0] == "TENSOR"]
    for a in args:
        if isinstance(a, bool):
            continue
        if isinstance(a, int):
            scalars.append(a)
        elif isinstance(a, list) and a and all(isinstance(d, int) for d in a):
            tensors.append(a)
        elif isinstance(a, list) and len(a) >= 2 and a[0] == "TENSOR":
            dims = next((x for x in a[1:] if isinstance(x, list)), None)
            if dims is not None and all(isinstance(d, int) for d in dims):
                tensors.append(dims)
    if scalars:
        tensors.insert(0, scalars)
    if not tensors:
        return None
    try:
        return canonical_shape(tensors)
    except ShapeError:
        return None


def _seconds(values: Any) -> bool:
    """A list of finite, non-negative seconds (TVM marks a failed run with 1e10, never with
    infinity or a negative time: those are damage, refused by field)."""
    return isinstance(values, list) and all(
        (x := as_float(v)) is not None and math.isfinite(x) and x >= 0 for v in values
    )


def _costs(result: Any, what: str) -> tuple[list[float], int, float, float | None]:
    """(costs in s, error code, tuning cost in s, timestamp) of an Ansor/AutoTVM result."""
    if not isinstance(result, list) or len(result) < 2:
        raise FieldError(what, "must be [costs, error_no, all_cost, timestamp]")
    costs, err = result[0], result[1]
    if not _seconds(costs):
        raise FieldError(what, f"costs must be a list of finite seconds, got {costs!r}"[:200])
    if not isinstance(err, int) or isinstance(err, bool):
        raise FieldError(what, f"error_no must be an integer, got {err!r}")
    all_cost = (as_float(result[2]) if len(result) > 2 else None) or 0.0
    ts = as_float(result[3]) if len(result) > 3 else None
    return [float(c) for c in costs], err, all_cost, ts


class _Trial(msgspec.Struct, frozen=True):
    """One record: a measured candidate."""

    op: str
    target: str
    shape: str | None
    layout: str
    costs: list[float]
    err: int
    all_cost: float
    ts: float | None
    config: Any
    index: int | None = None
    """MetaSchedule's workload index (its companion files key by it)."""


def _parse(rec: Any) -> _Trial:
    """The trial one record holds."""
    if isinstance(rec, dict) and "i" in rec:
        inp = rec["i"]
        if not (isinstance(inp, list) and inp and isinstance(inp[0], list) and len(inp[0]) >= 2):
            raise FieldError("i", "must be [[workload_key, target, ...], state]")
        key, target = inp[0][0], inp[0][1]
        if not isinstance(key, str):
            raise FieldError("i", "workload key must be a JSON string")
        try:
            wk = _DECODE.decode(key)
        except msgspec.DecodeError:
            wk = [key]
        if not isinstance(wk, list) or not wk:
            wk = [key]
        costs, err, all_cost, ts = _costs(rec.get("r"), "r")
        state = inp[1] if len(inp) > 1 else None
        return _Trial(
            str(wk[0]), str(target), _shape(wk[1:]), "auto_scheduler", costs, err, all_cost, ts,
            state,
        )  # fmt: skip
    if isinstance(rec, dict) and "input" in rec:
        inp = rec["input"]
        if not (isinstance(inp, list) and len(inp) >= 3):
            raise FieldError("input", "must be [target, task_name, args, kwargs]")
        args = inp[2] if isinstance(inp[2], list) else []
        costs, err, all_cost, ts = _costs(rec.get("result"), "result")
        return _Trial(
            str(inp[1]), str(inp[0]), _shape(args), "autotvm", costs, err, all_cost, ts,
            rec.get("config"),
        )  # fmt: skip
    if isinstance(rec, list) and len(rec) == 2 and isinstance(rec[0], int):
        body = rec[1]
        if not (isinstance(body, list) and len(body) >= 2):
            raise FieldError("[1]", "must be [trace, run_secs, target, args_info]")
        run_secs = body[1]
        if run_secs is None:
            run_secs = []
        if not _seconds(run_secs):
            got = f"must be a list of finite seconds, got {run_secs!r}"[:200]
            raise FieldError("run_secs", got)
        target = body[2] if len(body) > 2 else None
        kind = target.get("kind") if isinstance(target, dict) else target
        args = body[3] if len(body) > 3 and isinstance(body[3], list) else []
        err = 0 if run_secs else 1  # a candidate that never ran has no times
        return _Trial(
            f"workload#{rec[0]}", str(kind), _shape(args), "meta_schedule",
            [float(c) for c in run_secs], err, 0.0, None, body[0], rec[0],
        )  # fmt: skip
    raise FieldError("", "not a TVM tuning record (auto_scheduler, AutoTVM or MetaSchedule)")


class TvmReader:
    """TVM tuning records (auto_scheduler / AutoTVM logs, MetaSchedule tuning databases)."""

    name = "tvm"
    summary = (
        "TVM tuning records (auto_scheduler, AutoTVM, MetaSchedule): best measured time per "
        "workload and argument shapes, tuning cost, failed trials"
    )
    tables = ("compile_plan", "compile_event", "tuning_trial")
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """The first non-comment line is one of the three record layouts."""
        first = _first_data_line(head.data)
        return any(p.match(first) for p in (_ANSOR, _AUTOTVM, _META))

    def read(self, path: Path, sink: Sink) -> None:
        """Stream the records: a `tuning_trial` row each, per-workload counts and the best."""
        workload = sink.hints.get("workload") or path.name.split(".")[0]
        slice_ = sink.hints.get("slice", "")
        plan_id = path.name.rsplit(".", 1)[0]
        if path.name.startswith("database_tuning_record") and path.parent.name:
            plan_id = path.parent.name  # a MetaSchedule database is named by its folder
        side = companion(path)
        scores = read_scores(side) if side is not None else {}
        if side is not None:
            sink.note(f"cost-model scores from {side.name}")
        known = workloads_beside(path)
        keys = workload_keys(known) if known is not None else {}
        seen: dict[tuple[str, str, str | None], _Workload] = {}
        # MetaSchedule records each candidate's arguments after its layout rewrite (a conv's
        # weight tiled per candidate): a workload's shape is its first record's
        first_shape: dict[tuple[str, str], str | None] = {}
        with open_bytes(path) as fh:
            for line_no, raw in bounded_lines(fh):
                if raw is None:
                    sink.reject(line_no, None, LONG_LINE, b"")
                    continue
                text = raw.strip()
                if not text or text.startswith(b"#"):
                    continue
                try:
                    rec = _DECODE.decode(text)
                except msgspec.DecodeError as e:
                    sink.reject(line_no, None, f"invalid JSON: {e}", text[:2000])
                    continue
                try:
                    t = _parse(rec)
                except FieldError as e:
                    sink.reject(line_no, e.field or None, e.reason, text[:2000])
                    continue
                ran = t.shape
                if t.index is not None:  # MetaSchedule: its workload is the index
                    t = replace(t, shape=first_shape.setdefault((t.op, t.target), t.shape))
                w = seen.setdefault(
                    (t.op, t.target, t.shape),
                    _Workload(t.op, t.target, t.shape, t.layout, line_no),
                )
                w.trials += 1
                w.tuning_s += t.all_cost
                if t.ts is not None and (w.first_ts is None or t.ts < w.first_ts):
                    w.first_ts = t.ts
                if isinstance(rec, dict) and "v" in rec:
                    w.extra["version"] = rec["v"]
                error = failed(t.err, t.costs)
                score = scores.get((t.index, w.trials)) if t.index is not None else None
                sink.add(
                    "tuning_trial",
                    line_no,
                    trial_row(
                        workload=workload, slice_=slice_, plan_id=plan_id, task=t.op,
                        task_key=keys.get(t.index, t.op) if t.index is not None else t.op,
                        target=t.target, shape=t.shape, trial=w.trials, config=t.config,
                        costs=t.costs, error=error, all_cost=t.all_cost, ts=t.ts, score=score,
                        ran=ran,
                    ),
                )  # fmt: skip
                if error is not None:
                    w.failed += 1
                    w.errors[error] = w.errors.get(error, 0) + 1
                    continue
                mean = sum(t.costs) / len(t.costs)
                if w.best_s is None or mean < w.best_s:
                    w.best_s, w.best_line = mean, line_no
        for w in seen.values():
            self._emit(sink, w, workload, slice_, plan_id)

    @staticmethod
    def _emit(sink: Sink, w: _Workload, workload: str, slice_: str, plan_id: str) -> None:
        counts = {
            "trials": w.trials,
            "failed_trials": w.failed,
            "error_codes": w.errors or None,
            "layout": w.layout,
            **w.extra,
        }
        key = hashlib.sha256(f"{w.op}\x1f{w.target}\x1f{w.shape}".encode()).hexdigest()[:12]
        sink.add(
            "compile_event",
            w.first_line,
            {
                "workload": workload,
                "slice": slice_,
                "compile_id": f"tune:{key}",
                "plan_id": plan_id,
                "frame": w.op,
                "shape": w.shape,
                "ts_us": w.first_ts * 1e6 if w.first_ts is not None else None,
                "compile_ms": w.tuning_s * 1e3 if w.tuning_s else None,
                "recompile_reason": None,
                "cache_hit": None,
                "op_count": None,
                "extra": json_text({k: v for k, v in counts.items() if v is not None}),
            },
        )
        if w.best_s is None:
            return  # every trial failed: no time to predict with, the event above counts them
        sink.add(
            "compile_plan",
            w.best_line,
            {
                "workload": workload,
                "slice": slice_,
                "plan_id": plan_id,
                "shape_bucket": w.shape or "()",
                "op": w.op,
                "predicted_us": w.best_s * 1e6,
                "prediction_source": f"tvm {w.layout}: best measured trial",
                "kernel": w.target.split(" ")[0],
                "tile": None,
                "fusion_group": None,
                "core": None,
                "precision": None,
                "predicted_peak_mem_bytes": None,
                "mem_budget_bytes": None,
                "compile_ms": w.tuning_s * 1e3 if w.tuning_s else None,
                "extra": json_text(
                    {"target": w.target, **{k: v for k, v in counts.items() if v is not None}}
                ),
            },
        )
