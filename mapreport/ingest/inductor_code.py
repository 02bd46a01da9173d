"""Inductor's generated wrapper code (TORCH_TRACE `inductor_output_code`): which kernel each
scheduled op of a graph launched.

Inductor logs its per-op runtime estimates under scheduler names (`op1`, `op3_op4_op5`,
`extern_kernels.mm`), while a profiler records the kernels those ops launched
(`triton_poi_fused_relu_1`, `cpp_fused_gelu_view_0`, `aten::mm`). The wrapper's `call`
function launches them in the same schedule order, so the two line up: this module reads the
launches and names each estimated op's kernel. Nothing in the code is executed; it is read as
text, line by line.
"""

from __future__ import annotations

import re
from collections import Counter

import msgspec

_CALL_DEF = re.compile(r"^(?P<indent>\s*)def call\(")
_LAUNCH = re.compile(r"^(?P<callee>[A-Za-z_][\w.]{0,300}?)(?:\.run)?\(.*\)\s*(?:#.*)?$")
"""A statement that is a call: `triton_poi_fused_relu_1.run(buf7, ...)`, `cpp_fused_x_0(buf1)`,
`extern_kernels.mm(a, b, out=buf0)`, `torch.ops._c10d_functional.all_reduce_.default(buf1, ..)`."""
_SCHEDULED = re.compile(r"^op\d{1,9}(?:_op\d{1,9})*$")
"""A scheduler node's name, fused nodes joined by `_`: `op3_op4_op5_op6`."""
_DEFINED = re.compile(r"^(?P<name>[A-Za-z_]\w{0,300}) = async_compile\.\w+\(")
"""A generated kernel's definition: `cpp_fused_gelu_view_0 = async_compile.cpp_pybinding(`."""
_PROFILED = re.compile(r'RecordFunctionHandle \w{1,400}\("(?P<name>[\w.:]{1,400})"')
"""The name a CPU kernel built with `cpp.enable_kernel_profile` records itself under in the
profiler (`graph_0_cpp_fused_gelu_view_0`)."""
_NOT_KERNELS = ("assert_size_stride", "assert_alignment", "args.clear", "get_raw_stream")
MAX_CODE_LINES = 200_000
"""Lines of one graph's wrapper code read for launches; the rest is not looked at."""


class Launch(msgspec.Struct, frozen=True):
    """One kernel launch of the wrapper's `call` function."""

    callee: str


class WrapperCode(msgspec.Struct, frozen=True):
    """What the wrapper code of one graph says: its launches, in order, and its device."""

    launches: tuple[Launch, ...]
    cpu: bool
    """The graph allocates its buffers on the CPU (`empty_strided_cpu`)."""
    profiled: dict[str, str]
    """Kernel -> the name it records in the profiler, where that is not its own name."""


def read_wrapper(code: bytes) -> WrapperCode:
    """The launches of the `call` function of Inductor's wrapper code, in order."""
    launches: list[Launch] = []
    profiled: dict[str, str] = {}
    indent: int | None = None
    cpu = False
    defined = None
    for n, raw in enumerate(code.split(b"\n")):
        if n >= MAX_CODE_LINES:
            break
        line = raw.decode("utf-8", errors="replace").rstrip()
        if indent is None:
            kernel = _DEFINED.match(line)
            defined = kernel["name"] if kernel is not None else defined
            named = _PROFILED.search(line) if defined and "RecordFunctionHandle" in line else None
            if named is not None and named["name"].endswith(defined or ""):
                profiled[defined or ""] = named["name"]
            start = _CALL_DEF.match(line)
            if start is not None:
                indent = len(start["indent"])
            continue
        body = line.lstrip()
        if not body:
            continue
        if len(line) - len(body) <= indent:
            break  # the end of `call`
        cpu = cpu or "empty_strided_cpu(" in body
        m = _LAUNCH.match(body)
        if m is None or m["callee"] in _NOT_KERNELS:
            continue
        launches.append(Launch(m["callee"]))
    return WrapperCode(tuple(launches), cpu, profiled)


class PlannedOp(msgspec.Struct, frozen=True):
    """An estimated op with a name unique in its graph and the kernel it launched."""

    op: str
    kernel: str | None
    fused: tuple[str, ...]
    """The scheduler nodes fused into it (more than one: a fusion)."""


def planned_ops(names: list[str], code: WrapperCode | None) -> list[PlannedOp]:
    """Each estimated op of a graph, in order, named uniquely (`extern_kernels.mm#2` for a
    second call of the same library op) with the kernel the profiler records for it.

    Both lists are in schedule order: a library op takes the next launch of that op; a
    scheduler node takes the launch right after the previous match when it is a generated
    kernel (when it is a library call, the node launched nothing: a view or a no-op). A
    library op's kernel is its aten name on a CPU graph; on a GPU graph the library's own
    kernel is not in the code, so it has none."""
    seen = Counter(names)
    counts: Counter[str] = Counter()
    launches = code.launches if code else ()
    cursor = 0
    out = []
    for name in names:
        counts[name] += 1
        op = f"{name}#{counts[name]}" if seen[name] > 1 else name
        fused = tuple(name.split("_")) if _SCHEDULED.match(name) else ()
        if fused:
            generated = cursor < len(launches) and "." not in launches[cursor].callee
            hit = cursor if generated else None
        else:
            hit = next(
                (i for i in range(cursor, len(launches)) if launches[i].callee == name), None
            )
        kernel = None
        if hit is not None:
            cursor = hit + 1
            callee = launches[hit].callee
            kernel = code.profiled.get(callee) if code else None
            kernel = kernel or _kernel(callee, code.cpu if code else False)
        out.append(PlannedOp(op, kernel, fused if len(fused) > 1 else ()))
    return out


def _kernel(callee: str, cpu: bool) -> str | None:
    """The name a profiler records for a launch: a generated kernel's own name; a library
    op's aten name (`extern_kernels.mm` -> `aten::mm`, `torch.ops.ns.op.default` ->
    `ns::op`) on a CPU graph, where that op's own time is its compute."""
    if "." not in callee:
        return callee
    if not cpu:
        return None
    parts = callee.split(".")
    if parts[0] == "extern_kernels" and len(parts) == 2:
        return f"aten::{parts[1]}"
    if parts[:2] == ["torch", "ops"] and len(parts) >= 4:
        return f"{parts[2]}::{parts[3]}"
    return None
