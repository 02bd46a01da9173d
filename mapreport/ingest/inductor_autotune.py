"""Inductor max-autotune choices: what `torch.compile(mode="max-autotune")` measured for every
candidate kernel of each op it autotuned, from the blocks torch writes to stderr
(`torch/_inductor/select_algorithm.py`, `AlgorithmSelectorCache.log_results`; torch 2.1-2.13):

    AUTOTUNE packed_linear(32x256, 1982689x1, 128x256)
    strides: [256, 1], [1, 0], [256, 1]
    dtypes: torch.float32, torch.float32, torch.float32
      cpp_CppMicroGemmFP32Vec_1 0.0279 ms 100.0%
      _mkl_linear 0.0346 ms 80.5%
    SingleProcess AUTOTUNE benchmarking takes 6.7788 seconds and 0.0001 seconds precompiling ...

The header names the op and its inputs' sizes; `strides:` and `dtypes:` (torch 2.5 on) follow;
each choice line is the kernel's name, the median time Inductor measured (ms, 4 decimals), its
speed against the fastest and the kernel's description (a Triton config; empty for the C++
template and ATen); the summary line closes the block. Choices are listed fastest first, the
first being the one Inductor selected; torch lists the fastest 10 unless
`TORCHINDUCTOR_AUTOTUNE_NUM_CHOICES_DISPLAYED` (or `autotune_num_choices_displayed`) says more.
Lines between blocks (warnings, `Autotune Choices Stats:`, a program's own output) are not
records and are passed over; a `[rank0]:` prefix (torchrun) is taken off, and each prefix's
block is read on its own, so interleaved ranks do not mix.

Per workload (the op at its input sizes, strides and dtypes), every distinct choice is one
`tuning_trial` row: a block that autotunes the same workload again (a later graph, a recompile,
a repeat) measures its choices again, and each such time is one repeat of that candidate
(`costs_us`). A choice is known across blocks by its kernel name less the per-process counter
Inductor appends (`cpp_CppMicroGemmFP32Vec_0`, `_1`, ...) and its description. Per workload
also one `compile_plan` row (`predicted_us`: the choice fastest over its repeats, the one the
mapping runs) and one `compile_event` (`compile_ms`: the blocks' benchmarking and precompiling
time).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mapreport.core.errors import ErrorPolicy
from mapreport.ingest.base import Head
from mapreport.ingest.jsondoc import json_text
from mapreport.ingest.records import LONG_LINE, bounded_lines, open_bytes
from mapreport.ingest.spec import MAX_MAGNITUDE, Field, FieldError, convert_value

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

_PREFIX = r"(?:\[[^\]\n]{0,64}\]:)?"
_HEAD = re.compile(
    rb"(?m)^" + _PREFIX.encode() + rb"AUTOTUNE [A-Za-z_][\w.]*\([^()\n]*\)\r?\n"
    rb"" + _PREFIX.encode() + rb"(?:strides: |  \S+ (?:\d+\.\d+|inf) ms )"
)
_LINE_PREFIX = re.compile(_PREFIX)
_HEADER = re.compile(r"AUTOTUNE (?P<op>[A-Za-z_][\w.]{0,199})\((?P<sizes>[^()]*)\)\s*")
_STRIDES = re.compile(r"strides: (?P<value>.*?)\s*")
_DTYPES = re.compile(r"dtypes: (?P<value>.*?)\s*")
_CHOICE = re.compile(
    r"  (?P<name>\S+) (?P<ms>\S+) ms (?:\S+%|<DIVIDED BY ZERO ERROR>)(?: (?P<desc>.*?))?\s*"
)
_SUMMARY = re.compile(
    r"(?:SubProcess|SingleProcess) AUTOTUNE (?:benchmarking )?takes (?P<secs>[\d.]+) seconds"
    r"(?: and (?P<pre>[\d.]+) seconds precompiling)?(?: for (?P<n>\d+) choices)?.*"
)
_COUNTER = re.compile(r"_\d+$")

FIELDS: dict[str, Field] = {
    "op": Field("op", "str", required=True, column="task"),
    "sizes": Field("sizes", "shape", column="shape"),
    "strides": Field("strides", "str", column="task_key"),
    "dtypes": Field("dtypes", "str", column="task_key"),
    "name": Field("name", "str", required=True, column="config"),
    "description": Field("description", "str", column="config"),
    "time_ms": Field(
        "time_ms", "float", required=True, column="costs_us", maximum=MAX_MAGNITUDE / 1e3
    ),
    "benchmark_s": Field("benchmark_s", "float", column="compile_event.compile_ms"),
}
"""What each part of a block is and the canonical column it lands in (`costs_us` = the time x
1000; `task_key` = the op with its dtypes and strides, the workload's identity across runs)."""

MAX_CHOICES = 100_000
"""Distinct choices one file may hold: they are kept until its end to gather their repeats (a
model autotunes hundreds of GEMMs of ~20 choices each)."""
FAILED = {"inf": "inf", "zero": "zero_time"}
"""A choice's time that is no measurement: `inf` (the choice failed to compile or run, or timed
out) and 0 (torch prints `<DIVIDED BY ZERO ERROR>`)."""


class _Choice(msgspec.Struct):
    """One candidate of a workload over every block that listed it."""

    line: int
    kernel: str
    description: str
    names: list[str] = msgspec.field(default_factory=list)
    times_ms: list[float] = msgspec.field(default_factory=list)
    failures: list[str] = msgspec.field(default_factory=list)
    selected: int = 0
    """Blocks that listed it first: Inductor's pick there."""


class _Workload(msgspec.Struct):
    """One op at its input sizes, strides and dtypes."""

    op: str
    shape: str | None
    key: str
    line: int
    choices: dict[str, _Choice] = msgspec.field(default_factory=dict)
    blocks: int = 0
    autotune_s: float = 0.0
    unlisted: int = 0
    """Choices benchmarked but not listed (torch lists the fastest 10 by default)."""


class _Block(msgspec.Struct):
    """An open AUTOTUNE block: its header, and its choices once the first is read."""

    op: str
    shape: str | None
    line: int
    strides: str | None = None
    dtypes: str | None = None
    workload: _Workload | None = None
    keys: list[str] = msgspec.field(default_factory=list)


def _shape(sizes: str) -> str | None:
    """`64x256, 1982689x1` -> `64x256;1982689x1` (a 0-d input is `()`); None for no inputs."""
    if not sizes.strip():
        return None
    dims: list[list[int]] = []
    for part in sizes.split(","):
        text = part.strip()
        values = text.split("x") if text else []
        if not all(v.isascii() and v.isdigit() for v in values):
            raise FieldError("sizes", f"must be sizes like 64x256, got {part.strip()!r}"[:200])
        dims.append([int(v) for v in values])
    try:
        return str(convert_value(FIELDS["sizes"], dims))
    except FieldError as e:
        raise FieldError("sizes", e.reason) from None


def _time_ms(token: str) -> float | None:
    """The choice's time in ms; None where it is no measurement (`FAILED`)."""
    if token == "inf":
        return None
    if not re.fullmatch(r"\d+(?:\.\d+)?", token):
        raise FieldError("time_ms", f"must be milliseconds or inf, got {token!r}"[:200])
    try:
        value = float(convert_value(FIELDS["time_ms"], token, text=True))
    except FieldError as e:
        raise FieldError("time_ms", e.reason) from None
    return value if value > 0 else None


def _key(op: str, dtypes: str | None, strides: str | None) -> str:
    """The workload's identity across runs: the op with its inputs' dtypes and strides."""
    parts = [op]
    if dtypes:
        parts.append(f"dtypes {dtypes.replace('torch.', '')}")
    if strides:
        parts.append(f"strides {strides}")
    return " | ".join(parts)


def _config(c: _Choice) -> str:
    """The choice as recorded: its kernel and description (a Triton config), JSON."""
    return msgspec.json.encode({"kernel": c.kernel, "description": c.description}).decode()


class _Reading:
    """The state of one file's read: its workloads and each prefix's open block."""

    def __init__(self) -> None:
        self.workloads: dict[tuple[str, str | None], _Workload] = {}
        self.open: dict[str, _Block] = {}
        self.choices = 0

    def line(self, line_no: int, text: str) -> None:
        """Take one line of the log."""
        prefix_match = _LINE_PREFIX.match(text)
        prefix = prefix_match.group(0) if prefix_match else ""
        body = text[len(prefix) :]
        block = self.open.get(prefix)
        if (m := _HEADER.fullmatch(body)) is not None:
            self.open.pop(prefix, None)
            self.open[prefix] = _Block(m["op"], _shape(m["sizes"]), line_no)
            return
        if block is None:
            return  # not in a block: a warning, a program's output
        if block.workload is None and (m := _STRIDES.fullmatch(body)) is not None:
            block.strides = m["value"]
        elif block.workload is None and (m := _DTYPES.fullmatch(body)) is not None:
            block.dtypes = m["value"]
        elif (m := _CHOICE.fullmatch(body)) is not None:
            self._choice(block, line_no, m)
        elif (m := _SUMMARY.fullmatch(body)) is not None:
            self._summary(block, m)
            del self.open[prefix]
        elif body.startswith("  "):
            del self.open[prefix]
            shape = "`  <name> <time> ms <percent>% <description>`"
            raise FieldError("name", f"a choice line is {shape}")
        else:
            del self.open[prefix]  # the block ended without its summary (a cut log)

    def long_line(self) -> None:
        """A line past the limit: an error inside a block, passed over outside one."""
        if self.open:
            self.open.clear()
            raise FieldError(None, LONG_LINE)

    def _workload(self, block: _Block) -> _Workload:
        key = _key(block.op, block.dtypes, block.strides)
        w = self.workloads.setdefault(
            (key, block.shape), _Workload(block.op, block.shape, key, block.line)
        )
        w.blocks += 1
        return w

    def _choice(self, block: _Block, line_no: int, m: re.Match[str]) -> None:
        if block.workload is None:
            block.workload = self._workload(block)
        w = block.workload
        ms = _time_ms(m["ms"])
        name, desc = m["name"], m["desc"] or ""
        kernel = _COUNTER.sub("", name)
        key = f"{kernel}\x1f{desc}"
        n = block.keys.count(key)  # the same kernel twice in one block: two candidates
        block.keys.append(key)
        key = f"{key}\x1f{n}" if n else key
        c = w.choices.get(key)
        if c is None:
            if self.choices >= MAX_CHOICES:
                raise FieldError("name", f"more than {MAX_CHOICES:,} distinct choices in one file")
            self.choices += 1
            c = w.choices[key] = _Choice(line_no, kernel + (f"#{n + 1}" if n else ""), desc)
        c.names.append(name)
        if ms is None:
            c.failures.append(FAILED["inf"] if m["ms"] == "inf" else FAILED["zero"])
        else:
            c.times_ms.append(ms)
        if len(block.keys) == 1:
            c.selected += 1

    def _summary(self, block: _Block, m: re.Match[str]) -> None:
        w = block.workload
        if w is None:
            return  # a block that listed no choice
        seconds = float(m["secs"]) + float(m["pre"] or 0.0)
        if seconds <= MAX_MAGNITUDE / 1e6:
            w.autotune_s += seconds
        if m["n"] is not None:
            w.unlisted += max(int(m["n"]) - len(block.keys), 0)


class InductorAutotuneReader:
    """Inductor max-autotune's AUTOTUNE blocks (torch.compile's stderr)."""

    name = "inductor-autotune"
    summary = (
        "torch.compile max-autotune's AUTOTUNE blocks (stderr): every candidate kernel's "
        "measured time per op and input shapes, the one Inductor selected"
    )
    tables = ("compile_plan", "compile_event", "tuning_trial")
    default_policy: ErrorPolicy = "quarantine"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """The head holds an AUTOTUNE header line followed by its strides or first choice."""
        return _HEAD.search(head.data) is not None

    def read(self, path: Path, sink: Sink) -> None:
        """Read every block; then a `tuning_trial` row per distinct choice of each workload,
        with its repeats, and the workload's plan and event."""
        reading = _Reading()
        with open_bytes(path) as fh:
            for line_no, raw in bounded_lines(fh):
                try:
                    if raw is None:
                        reading.long_line()
                        continue
                    reading.line(line_no, raw.decode("utf-8", "replace").rstrip("\r\n"))
                except FieldError as e:
                    sink.reject(line_no, e.field, e.reason, (raw or b"")[:2000])
        workload = sink.hints.get("workload") or path.name.split(".")[0]
        plan_id = path.name.removesuffix(".gz").rsplit(".", 1)[0]
        listed = sum(len(w.choices) for w in reading.workloads.values())
        unlisted = sum(w.unlisted for w in reading.workloads.values())
        if unlisted:
            sink.note(
                f"{unlisted} benchmarked choices were not listed (torch lists the fastest 10 "
                "unless TORCHINDUCTOR_AUTOTUNE_NUM_CHOICES_DISPLAYED=all): only the "
                f"{listed} listed are candidates"
            )
        for w in reading.workloads.values():
            _emit(sink, w, workload, sink.hints.get("slice", ""), plan_id)


def _trial(c: _Choice, trial: int, base: dict[str, Any]) -> dict[str, Any]:
    config = _config(c)
    us = [t * 1e3 for t in c.times_ms] or None
    extra = {
        "names": sorted(set(c.names)),
        "selected": c.selected,
        "failed_repeats": len(c.failures) if us and c.failures else None,
    }
    return {
        **base,
        "trial": trial,
        "config_id": hashlib.sha256(config.encode()).hexdigest()[:16],
        "config": config,
        "costs_us": us,
        "mean_us": sum(us) / len(us) if us else None,
        "error": None if us else c.failures[0],
        "predicted_us": None,
        "predicted_score": None,
        "cost_model": None,
        "tuning_ms": None,
        "ts_us": None,
        "extra": json_text({k: v for k, v in extra.items() if v is not None}),
    }


def _emit(sink: Sink, w: _Workload, workload: str, slice_: str, plan_id: str) -> None:
    """A workload's trials (in the order first listed), its plan row and its event."""
    base = {
        "workload": workload,
        "slice": slice_,
        "plan_id": plan_id,
        "task": w.op,
        "task_key": w.key,
        "target": None,
        "shape": w.shape,
    }
    measured: list[tuple[float, int, _Choice]] = []
    for trial, c in enumerate(w.choices.values(), 1):
        row = _trial(c, trial, base)
        sink.add("tuning_trial", c.line, row)
        if row["mean_us"] is not None:
            measured.append((row["mean_us"], trial, c))
    failed = len(w.choices) - len(measured)
    counts = {"blocks": w.blocks, "choices": len(w.choices), "failed_choices": failed}
    key = hashlib.sha256(f"{w.key}\x1f{w.shape}".encode()).hexdigest()[:12]
    sink.add(
        "compile_event",
        w.line,
        {
            "workload": workload,
            "slice": slice_,
            "compile_id": f"autotune:{key}",
            "plan_id": plan_id,
            "frame": w.op,
            "shape": w.shape,
            "ts_us": None,
            "compile_ms": w.autotune_s * 1e3 if w.autotune_s else None,
            "recompile_reason": None,
            "cache_hit": None,
            "op_count": None,
            "extra": json_text({**counts, "unlisted": w.unlisted or None}),
        },
    )
    if not measured:
        return  # every choice failed: the event counts them
    mean_us, _, chosen = min(measured, key=lambda x: (x[0], x[1]))
    sink.add(
        "compile_plan",
        chosen.line,
        {
            "workload": workload,
            "slice": slice_,
            "plan_id": plan_id,
            "shape_bucket": w.shape or "()",
            "op": w.op,
            "predicted_us": mean_us,
            "prediction_source": "inductor max-autotune: fastest measured choice",
            "kernel": chosen.kernel,
            "tile": None,
            "fusion_group": None,
            "core": None,
            "precision": None,
            "predicted_peak_mem_bytes": None,
            "mem_budget_bytes": None,
            "compile_ms": w.autotune_s * 1e3 if w.autotune_s else None,
            "extra": json_text({"task_key": w.key, **counts}),
        },
    )
