"""Triton's autotune cache: what `@triton.autotune(..., cache_results=True)` (or
TRITON_CACHE_AUTOTUNING=1; Triton 3.4 on) measured for every config it benchmarked at one
tuning key, as `Autotuner.check_disk_cache` writes it under TRITON_CACHE_DIR
(`<hash>/<kernel>.autotune.json`, python/triton/runtime/autotuner.py):

    {"key": [4096, 4096, 4096, "torch.float16", "torch.float16", "torch.float16"],
     "configs_timings": [[{"kwargs": {"BLOCK_M": 128, ...}, "num_warps": 8, "num_ctas": 1,
                           "num_stages": 3, "maxnreg": null, "pre_hook": null,
                           "ir_override": null}, [0.1878, 0.1862, 0.1903]], ...]}

`key` is the tuning key: the values of the arguments the kernel is keyed on, then the dtype of
each tensor argument (Triton 3.4-3.8 write the values as they are; later versions write each
as its `str`). `configs_timings` lists every config benchmarked, in the order benchmarked (the
configs as written, or, where a `perf_model` pruned them to its `top_k`, in the model's
predicted order; the pruned ones are not in the file), each with `Config.__dict__` and what
`Autotuner._bench` returned: do_bench's 50th, 20th and 80th percentiles of the config's runs in
milliseconds, `[inf, inf, inf]` (JSON `Infinity`) for a config that failed to compile or ran out
of resources. Triton deploys the config whose list is least (its median first).

One file is one tuning run of one workload: a `tuning_trial` row per config, one
`compile_plan` row (the config Triton deploys) and one `compile_event`. The file holds each
config's percentiles, not its runs: a trial's one measured cost is its median (`costs_us`, the
figure Triton ranks by), the percentiles stay in `extra`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import reprlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.ingest.base import Head
from mapreport.ingest.jsondoc import json_text
from mapreport.ingest.records import open_bytes
from mapreport.ingest.spec import MAX_MAGNITUDE, Field, FieldError, as_float, convert_value

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

FIELDS: dict[str, Field] = {
    "key": Field("key", "str", required=True, column="task_key"),
    "key_dims": Field("key", "shape", column="shape"),
    "configs_timings": Field("configs_timings", "str", required=True, column="trial"),
    "config": Field("config", "str", required=True, column="config"),
    "kwargs": Field("kwargs", "str", required=True, column="compile_plan.tile"),
    "timings": Field(
        "timings", "float", required=True, column="costs_us", maximum=MAX_MAGNITUDE / 1e3
    ),
}
"""What each part of the file is and the canonical column it lands in: the key's non-negative
integers are the workload's shape (one positional tensor: `4096x4096x4096`), its other values
(the dtypes) the task key with the kernel; an entry's place in `configs_timings` is its trial;
the config (`Config.__dict__`) is the trial's config, its meta-parameters the deployed one's
tile; a timing's first value (ms) x 1000 is the trial's cost."""

MAX_BYTES = 8 << 20
"""A cache file decompressing to more than this is refused while it is read: it lists the
configs of one kernel at one key (tens, a few hundred at most: ~200 bytes each)."""
MAX_CONFIGS = 20_000
"""Configs one file may list."""
MAX_KEY = 64
"""Values one tuning key may hold (the keyed arguments and each tensor argument's dtype)."""
MAX_TIMINGS = 64
"""Values one config's timing may hold (Triton's do_bench returns 3)."""
MAX_TEXT = 255
"""The longest key value kept as text (a dtype's name is ~16 characters)."""
MAX_CONFIG_BYTES = 64 << 10
"""The longest config (its JSON text): Triton's hold a few meta-parameters."""
FAILED = {"inf": "inf", "zero": "zero_time"}
"""A config's time that is no measurement: infinity (Triton's mark of a config that failed to
compile or ran out of resources) and 0 (no time at all)."""

_HEAD = re.compile(rb'^\s*\{\s*"(?:key|configs_timings)"\s*:')
_TIMINGS = re.compile(rb'"configs_timings"\s*:\s*\[')
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"?|[\[\]{},\n]|[^\s\[\]{},"]+')
"""What the entry scanner steps over: a string, a bracket, a comma, a line break, or any other
run of a value."""


class _Huge(str):
    """A JSON number beyond float range (`1e400`): Python's parser would make it infinity,
    which in this format means a failed config; kept as its text to be refused by field."""


_SHOW = reprlib.Repr()
"""Values in messages: bounded in depth and length, whatever the file nests."""
_SHOW.maxlevel, _SHOW.maxlist, _SHOW.maxdict = 3, 6, 6
_SHOW.maxstring = _SHOW.maxother = 60


def _number(text: str) -> float | _Huge:
    value = float(text)
    return value if math.isfinite(value) else _Huge(text)


_CONSTANTS = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def _document(path: Path) -> tuple[Any, bytes]:
    """The decoded document and its bytes (at most MAX_BYTES, checked while read). Python's
    parser, not msgspec: Triton writes a failed config's time as `Infinity`, which strict JSON
    parsers refuse."""
    with open_bytes(path) as fh:
        raw = fh.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise InputError(path, None, None, f"document larger than {MAX_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise InputError(path, line, None, f"not UTF-8 text: {e.reason}") from None
    try:
        doc = json.loads(text, parse_float=_number, parse_constant=_CONSTANTS.__getitem__)
    except json.JSONDecodeError as e:
        raise InputError(path, e.lineno, None, f"invalid JSON: {e.msg}") from None
    except RecursionError:
        raise InputError(path, None, None, "invalid JSON: nested too deeply") from None
    except ValueError as e:  # an integer of more digits than Python converts
        raise InputError(path, None, None, f"invalid JSON: {e}"[:200]) from None
    return doc, raw


def entry_lines(raw: bytes) -> list[int]:
    """1-based line on which each element of `configs_timings` starts, however the file is
    laid out (json.dumps writes one line; `jq .` one value a line)."""
    out: list[int] = []
    line, depth, array, expect = 1, 0, 0, False
    last: bytes | None = None  # the last string at the top level: the key being read
    for m in _TOKEN.finditer(raw):
        tok = m.group()
        if tok == b"\n":
            line += 1
            continue
        if expect and tok != b"]":
            out.append(line)
        expect = False
        if tok in (b"[", b"{"):
            depth += 1
            if tok == b"[" and depth == 2 and last == b'"configs_timings"' and not array:
                array, expect = depth, True
        elif tok in (b"]", b"}"):
            array = 0 if depth == array else array
            depth -= 1
        elif tok == b"," and array and depth == array:
            expect = True
        elif depth == 1 and tok.startswith(b'"'):
            last = tok
    return out


class _Key(msgspec.Struct, frozen=True):
    """The tuning key as a workload: its shape and its task key."""

    shape: str | None
    labels: tuple[str, ...]
    values: tuple[Any, ...]


def _key(value: Any) -> _Key:
    """The key's non-negative integers (written as numbers or as their text) are dimensions,
    in order; every other value is a label, as Python's `str` writes it, so Triton 3.4-3.8's
    `[512, "torch.float16", true]` and a later `["512", "torch.float16", "True"]` agree."""
    if not isinstance(value, list):
        raise FieldError(
            "key", f"must be a list of the tuning key's values, got {_SHOW.repr(value)}"
        )
    if len(value) > MAX_KEY:
        raise FieldError("key", f"more than {MAX_KEY} values")
    dims: list[int] = []
    labels: list[str] = []
    for v in value:
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            dims.append(v)
        elif isinstance(v, str) and v.isascii() and v.isdigit() and len(v) <= 20:
            dims.append(int(v))
        elif isinstance(v, list | dict | _Huge):
            raise FieldError("key", f"a key value is a number or a string, got {_SHOW.repr(v)}")
        else:
            text = str(v)
            if len(text) > MAX_TEXT or not text.isprintable():
                raise FieldError("key", f"a key value is short printable text, got {text[:60]!r}")
            labels.append(text.removeprefix("torch."))
    shape = None
    if dims:
        try:
            shape = str(convert_value(FIELDS["key_dims"], [dims]))
        except FieldError as e:
            raise FieldError("key", e.reason) from None
    return _Key(shape, tuple(labels), tuple(value))


class _Entry(msgspec.Struct, frozen=True):
    """One config and its timing, as the file lists them."""

    trial: int
    """Its place in the list: the order benchmarked (1-based)."""
    line: int | None
    config: str
    kwargs: dict[str, Any]
    timings: tuple[float, ...]
    error: str | None


def _config(value: Any) -> tuple[str, dict[str, Any]]:
    """`Config.__dict__` as JSON text, keys sorted and unset (null) fields left out, as
    Triton's own Config equality ignores them; and its meta-parameters."""
    if not isinstance(value, dict):
        raise FieldError(
            "config", f"must be a Config's fields (an object), got {_SHOW.repr(value)}"
        )
    kwargs = value.get("kwargs")
    if not isinstance(kwargs, dict):
        raise FieldError(
            "kwargs", f"must be the config's meta-parameters, got {_SHOW.repr(kwargs)}"
        )
    kept = {k: v for k, v in value.items() if v is not None}
    text = msgspec.json.encode(kept, order="sorted").decode()
    if len(text) > MAX_CONFIG_BYTES:
        raise FieldError("config", f"longer than {MAX_CONFIG_BYTES:,} bytes")
    return text, kwargs


def _timings(value: Any) -> tuple[tuple[float, ...], str | None]:
    """The timing's values (ms) and, where it is no measurement, why (FAILED)."""
    values = value if isinstance(value, list) else [value]
    if not values or len(values) > MAX_TIMINGS:
        raise FieldError(
            "timings", f"must be 1 to {MAX_TIMINGS} milliseconds, got {_SHOW.repr(value)}"
        )
    out: list[float] = []
    for v in values:
        x = as_float(v)
        if x is None or math.isnan(x) or x < 0 or x == -math.inf:
            raise FieldError("timings", f"must be milliseconds or Infinity, got {_SHOW.repr(v)}")
        if math.isfinite(x):
            try:
                x = float(convert_value(FIELDS["timings"], x))
            except FieldError as e:
                raise FieldError("timings", e.reason) from None
        out.append(x)
    if all(math.isinf(x) for x in out):
        return tuple(out), FAILED["inf"]
    if any(math.isinf(x) for x in out):
        raise FieldError(
            "timings", f"mixes Infinity (a failed config) with times: {_SHOW.repr(value)}"
        )
    return tuple(out), FAILED["zero"] if out[0] == 0 else None


def _entry(value: Any, trial: int, line: int | None) -> _Entry:
    if not isinstance(value, list) or len(value) != 2:
        got = _SHOW.repr(value)
        raise FieldError("configs_timings", f"an entry is [config, timings], got {got}")
    config, kwargs = _config(value[0])
    timings, error = _timings(value[1])
    return _Entry(trial, line, config, kwargs, timings, error)


class TritonAutotuneReader:
    """Triton's autotune cache files (`<kernel>.autotune.json`)."""

    name = "triton-autotune"
    summary = (
        "Triton's autotune cache (<kernel>.autotune.json, cache_results=True): every config "
        "benchmarked at one tuning key, its timings, the one Triton deploys"
    )
    tables = ("compile_plan", "compile_event", "tuning_trial")
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """A JSON object opening with `key` or `configs_timings`, holding the latter's list."""
        return _HEAD.match(head.data) is not None and _TIMINGS.search(head.data) is not None

    def read(self, path: Path, sink: Sink) -> None:
        """One `tuning_trial` row per config, in the order benchmarked; the config Triton
        deploys as the `compile_plan` row; the tuning as one `compile_event`."""
        doc, raw = _document(path)
        if not isinstance(doc, dict):
            raise InputError(path, 1, None, "an autotune cache file is a JSON object")
        entries = doc.get("configs_timings")
        if not isinstance(entries, list):
            raise InputError(path, 1, "configs_timings", "required: a list of [config, timings]")
        if len(entries) > MAX_CONFIGS:
            raise InputError(path, 1, "configs_timings", f"more than {MAX_CONFIGS:,} configs")
        if "key" not in doc:
            raise InputError(path, 1, "key", "required field is missing")
        try:
            key = _key(doc["key"])
        except FieldError as e:
            raise InputError(path, 1, e.field, e.reason) from None
        lines = entry_lines(raw)
        read: list[_Entry] = []
        for i, value in enumerate(entries):
            line = lines[i] if len(lines) == len(entries) else None
            try:
                read.append(_entry(value, i + 1, line))
            except FieldError as e:
                sink.reject(line, e.field, f"config {i + 1}: {e.reason}", _SHOW.repr(value))
        kernel = path.name.removesuffix(".gz").removesuffix(".json").removesuffix(".autotune")
        digest = hashlib.sha256(raw).hexdigest()
        # Triton names the cache folder by the tuning problem (its version, target, source,
        # key, configs): one problem tuned on two machines of a kind has one folder name, so
        # the run is the cache root with the file's content
        run = f"{path.parent.parent.name or 'triton'}:{digest[:8]}"
        _emit(sink, path, kernel, key, read, run)


def _emit(sink: Sink, path: Path, kernel: str, key: _Key, read: list[_Entry], run: str) -> None:
    """The file's trials, the config Triton deploys and the tuning event."""
    workload = sink.hints.get("workload") or path.name.split(".")[0]
    slice_ = sink.hints.get("slice", "")
    task_key = " | ".join([kernel, *([f"key {', '.join(key.labels)}"] if key.labels else [])])
    measured = [e for e in read if e.error is None]
    # Triton deploys min(timings) comparing each config's list (or bare number): its median,
    # then its 20th and 80th percentiles; the first listed wins a tie
    deployed = min(measured, key=lambda e: e.timings) if measured else None
    base = {
        "workload": workload,
        "slice": slice_,
        "plan_id": run,
        "task": kernel,
        "task_key": task_key,
        "target": None,
        "shape": key.shape,
    }
    for e in read:
        us = [e.timings[0] * 1e3] if e.error is None else None
        extra: dict[str, Any] = {
            "timings_ms": list(e.timings) if e.error is None else None,
            "selected": True if e is deployed else None,
        }
        row = {
            **base,
            "trial": e.trial,
            "config_id": hashlib.sha256(e.config.encode()).hexdigest()[:16],
            "config": e.config,
            "costs_us": us,
            "mean_us": us[0] if us else None,
            "error": e.error,
            "predicted_us": None,
            "predicted_score": None,
            "cost_model": None,
            "tuning_ms": None,
            "ts_us": None,
            "extra": json_text({k: v for k, v in extra.items() if v is not None}),
        }
        sink.add("tuning_trial", e.line, row)
    counts = {
        "configs": len(read),
        "failed_configs": len(read) - len(measured),
        "key": list(key.values),
        "cache_entry": path.parent.name,
    }
    sink.add(
        "compile_event",
        1,
        {
            "workload": workload,
            "slice": slice_,
            "compile_id": f"autotune:{run}",
            "plan_id": run,
            "frame": kernel,
            "shape": key.shape,
            "ts_us": None,
            "compile_ms": None,  # Triton keeps its benchmarking time in memory only
            "recompile_reason": None,
            "cache_hit": None,
            "op_count": None,
            "extra": json_text(counts),
        },
    )
    if deployed is None:
        return  # every config failed: the event counts them
    sink.add(
        "compile_plan",
        deployed.line,
        {
            "workload": workload,
            "slice": slice_,
            "plan_id": run,
            "shape_bucket": key.shape or "()",
            "op": kernel,
            "predicted_us": deployed.timings[0] * 1e3,
            "prediction_source": "triton autotune: fastest measured config",
            "kernel": kernel,
            "tile": ", ".join(f"{k}={v}" for k, v in deployed.kwargs.items())[:MAX_TEXT],
            "fusion_group": None,
            "core": None,
            "precision": None,
            "predicted_peak_mem_bytes": None,
            "mem_budget_bytes": None,
            "compile_ms": None,
            "extra": json_text({"task_key": task_key, **counts}),
        },
    )
