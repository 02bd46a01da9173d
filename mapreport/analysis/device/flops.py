"""The work an operator asks of the device, from its input dims, types and concrete inputs as
the profiler recorded them: floating-point operations and bytes moved (docs/metrics.md,
"Roofline", gives each formula and its hand count).

Bytes are the compulsory traffic: each input tensor read once and the output written once, at
the element size of its type; a kernel that re-reads data moves more, which is part of what
the roofline headroom shows. Ops the table does not know have no work (their time still
counts, without a roofline).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import msgspec

from mapreport.core.devices import ELEMENT_BYTES, Dtype, dtype_of
from mapreport.core.kinds import OpKind


class Work(msgspec.Struct, frozen=True):
    """What one execution of an op asks of the device."""

    kind: OpKind
    flops: float
    bytes: float
    dtype: Dtype | None
    gemm: tuple[int, int, int] | None = None
    """(M, N, K) of a GEMM (of each of its `batch` GEMMs)."""
    batch: int = 1
    """GEMMs per call (bmm, batched matmul); a linear layer's leading dims are its M."""


Dims = Sequence[Sequence[int]]

_GEMM = {
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::matmul",
    "aten::linear",
    "aten::_scaled_mm",
    "aten::addbmm",
}
# attention ops: (layout of q, k, v: "bhsd" or "bshd", position of is_causal in the args)
_ATTENTION: dict[str, tuple[str, int | None]] = {
    "aten::scaled_dot_product_attention": ("bhsd", 5),
    "aten::_scaled_dot_product_flash_attention": ("bhsd", 4),
    "aten::_scaled_dot_product_efficient_attention": ("bhsd", 5),
    "aten::_scaled_dot_product_cudnn_attention": ("bhsd", 6),
    "aten::_flash_attention_forward": ("bshd", 8),
    "aten::_efficient_attention_forward": ("bshd", None),
}
# convolutions: positions of (stride, padding, dilation, groups) in the args
_CONV: dict[str, tuple[int, int, int, int]] = {
    "aten::convolution": (3, 4, 5, 8),
    "aten::_convolution": (3, 4, 5, 8),
    "aten::conv1d": (3, 4, 5, 6),
    "aten::conv2d": (3, 4, 5, 6),
    "aten::conv3d": (3, 4, 5, 6),
    "aten::cudnn_convolution": (3, 2, 4, 5),
    "aten::miopen_convolution": (4, 3, 5, 6),
}
_ELEMENTWISE = {
    "add",
    "sub",
    "mul",
    "div",
    "gelu",
    "relu",
    "silu",
    "sigmoid",
    "tanh",
    "exp",
    "log",
    "neg",
    "abs",
    "sqrt",
    "rsqrt",
    "pow",
    "where",
    "clamp",
    "maximum",
    "minimum",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "fill",
    "masked_fill",
    "threshold",
    "hardtanh",
    "erf",
    "sin",
    "cos",
    "reciprocal",
    "addcmul",
    "addcdiv",
    "lerp",
    "mish",
    "softplus",
    "leaky_relu",
    "elu",
    "gelu_backward",
    "silu_backward",
    "threshold_backward",
    "sigmoid_backward",
    "tanh_backward",
    "bitwise_and",
    "bitwise_or",
    "logical_and",
    "logical_not",
    "floor",
    "ceil",
    "round",
    "sign",
    "square",
    "native_dropout",
    "dropout",
}
_REDUCTION = {
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "all",
    "any",
    "argmax",
    "argmin",
    "prod",
    "norm",
    "linalg_vector_norm",
    "var",
    "std",
    "cumsum",
    "topk",
    "sort",
}
_NORM = {
    "softmax",
    "_softmax",
    "log_softmax",
    "_log_softmax",
    "layer_norm",
    "native_layer_norm",
    "rms_norm",
    "_fused_rms_norm",
    "group_norm",
    "native_group_norm",
    "batch_norm",
    "native_batch_norm",
    "_batch_norm_impl_index",
    "cudnn_batch_norm",
    "miopen_batch_norm",
    "_softmax_backward_data",
    "native_layer_norm_backward",
}
_COPY = {
    "copy_",
    "_to_copy",
    "to",
    "clone",
    "contiguous",
    "cat",
    "stack",
    "index_select",
    "embedding",
    "index",
    "gather",
    "scatter",
    "index_put_",
    "_unsafe_view",
    "repeat",
    "expand_as",
    "flip",
    "roll",
    "constant_pad_nd",
    "pad",
    "narrow_copy",
}
_OUT_AT = {
    **dict.fromkeys(
        (
            "mul",
            "div",
            "eq",
            "ne",
            "lt",
            "le",
            "gt",
            "ge",
            "maximum",
            "minimum",
            "pow",
            "bitwise_and",
            "bitwise_or",
            "logical_and",
            "gelu",
        ),
        2,
    ),
    **dict.fromkeys(("add", "sub", "where", "addcmul", "addcdiv", "lerp"), 3),
    **dict.fromkeys(
        (
            "relu",
            "sigmoid",
            "tanh",
            "exp",
            "log",
            "silu",
            "neg",
            "abs",
            "sqrt",
            "rsqrt",
            "erf",
            "sin",
            "cos",
            "reciprocal",
            "logical_not",
            "square",
        ),
        1,
    ),
}
"""Where an elementwise op's `out=` tensor sits when the profiler records the out variant (one
argument more than the functional form): it is written, not read."""
_WRITE_ONLY = {"fill", "zero"}
_LOOKUPS = {"embedding": 1, "index_select": 2, "gather": 2, "index": 1}
"""Lookups: where the index tensor sits (the table is the first input)."""
NORM_FLOPS_PER_ELEMENT = 5
"""Normalisations and softmax: max, subtract, exp, sum, divide (or mean, variance, scale,
shift) per element, as TraceLens and fvcore count them."""


def parse_dims(shape: str | None) -> list[list[int]]:
    """The positional dims of a canonical op shape (`512;141x512;()` -> [[512], [141, 512],
    []]); [] when the shape is named or absent."""
    if not shape or "=" in shape:
        return []
    out: list[list[int]] = []
    for part in shape.split(";"):
        if part in ("()", ""):
            out.append([])
        elif re.fullmatch(r"\d+(x\d+)*", part):
            out.append([int(d) for d in part.split("x")])
        else:
            return []
    return out


def _numel(d: Sequence[int]) -> int:
    return math.prod(d) if d else 0


def _float(count: int | float) -> float:
    """A count as a float: infinite beyond float range (dims of 2**400 elements), never an
    OverflowError; the roofline flags an infinite count as suspect (`roofline.suspect`)."""
    try:
        return float(count)
    except OverflowError:
        return math.inf


def _tensors(dims: Dims, types: Sequence[Any]) -> list[tuple[Sequence[int], Dtype]]:
    """The tensor inputs: (dims, dtype) where the type is an element type and dims are set."""
    out = []
    for i, d in enumerate(dims):
        t = dtype_of(types[i]) if i < len(types) else None
        if t is not None and d:
            out.append((d, t))
    return out


def _bytes(tensors: Sequence[tuple[Sequence[int], Dtype]]) -> int:
    return sum(_numel(d) * ELEMENT_BYTES[t] for d, t in tensors)


def _base(op: str) -> str:
    """`aten::add_` -> `add` (in-place and out variants count as the op)."""
    name = op.split("::", 1)[-1]
    name = name.removesuffix(".out")
    return name[:-1] if name.endswith("_") and name not in _COPY else name


def _int_list(value: Any, rank: int) -> list[int] | None:
    """A concrete int-list argument (`"[1, 1]"` or `"1"`), widened to `rank` entries."""
    if not isinstance(value, str) or not value.strip():
        return None
    found = [int(x) for x in re.findall(r"-?\d+", value)]
    if not found or len(found) not in (1, rank):
        return None
    return found * rank if len(found) == 1 else found


def _gemm(op: str, dims: Dims, types: Sequence[Any]) -> Work | None:
    tensors = _tensors(dims, types)
    if op in ("aten::addmm", "aten::baddbmm", "aten::addbmm"):
        a, b = (dims[1], dims[2]) if len(dims) > 2 else ((), ())
    elif op == "aten::linear":  # one GEMM: the input's leading dims are its rows
        x = dims[0] if dims else ()
        a = (_numel(x[:-1]) or 1, x[-1]) if x else ()
        w = dims[1] if len(dims) > 1 else ()
        b = (w[1], w[0]) if len(w) == 2 else ()
    else:
        a, b = (dims[0], dims[1]) if len(dims) > 1 else ((), ())
    if not a or not b:
        return None
    a2 = [1, a[0]] if len(a) == 1 else list(a)
    b2 = [b[0], 1] if len(b) == 1 else list(b)
    k = a2[-1]
    if b2[-2] != k:
        return None
    batch = max(_numel(a2[:-2]) or 1, _numel(b2[:-2]) or 1)
    if op == "aten::addbmm":
        batch = a2[0] if len(a2) == 3 else batch
    m, n = a2[-2], b2[-1]
    dtype = tensors[0][1] if tensors else None
    if dtype is None:
        return None
    outputs = 1 if op == "aten::addbmm" else batch  # addbmm sums its products into one
    written = outputs * m * n * ELEMENT_BYTES[Dtype.BF16 if dtype == Dtype.FP8 else dtype]
    flops = 2 * batch * m * n * k
    return Work(
        OpKind.GEMM, _float(flops), _float(_bytes(tensors) + written), dtype, (m, n, k), batch
    )


def _attention(op: str, dims: Dims, types: Sequence[Any], concrete: Sequence[Any]) -> Work | None:
    layout, causal_at = _ATTENTION[op]
    if len(dims) < 3 or any(len(d) != 4 for d in dims[:3]):
        return None
    q, k, v = dims[0], dims[1], dims[2]
    if layout == "bhsd":
        b, h, sq, d = q
        sk, dv = k[2], v[3]
    else:
        b, sq, h, d = q
        sk, dv = k[1], v[3]
    causal = (
        causal_at is not None
        and causal_at < len(concrete)
        and str(concrete[causal_at]).strip().lower() == "true"
    )
    flops = 2 * b * h * sq * sk * d + 2 * b * h * sq * sk * dv
    if causal:
        flops //= 2  # even: both terms carry the factor 2
    tensors = _tensors(dims[:3], types)
    if not tensors:
        return None
    dtype = tensors[0][1]
    out = b * h * sq * dv * ELEMENT_BYTES[dtype]
    return Work(OpKind.ATTENTION, _float(flops), _float(_bytes(tensors) + out), dtype)


def _conv(op: str, dims: Dims, types: Sequence[Any], concrete: Sequence[Any]) -> Work | None:
    if len(dims) < 2 or len(dims[0]) < 3 or len(dims[1]) != len(dims[0]):
        return None
    x, w = dims[0], dims[1]
    rank = len(x) - 2
    at_stride, at_pad, at_dil, at_groups = _CONV[op]

    def arg(i: int) -> Any:
        return concrete[i] if i < len(concrete) else None

    stride = _int_list(arg(at_stride), rank)
    padding = _int_list(arg(at_pad), rank)
    dilation = _int_list(arg(at_dil), rank) or [1] * rank
    groups = _int_list(arg(at_groups), 1)
    transposed = op in ("aten::convolution", "aten::_convolution") and str(arg(6)).strip() == "True"
    if transposed:  # a transposed convolution's output size is not counted here
        return None
    if stride is None or padding is None:
        return None
    g = groups[0] if groups else 1
    # a record no convolution can have (stride or groups 0, input channels that are not
    # groups x the weight's): no count, rather than a ZeroDivisionError or a made-up one
    if min(stride) <= 0 or min(dilation) <= 0 or min(padding) < 0 or g <= 0:
        return None
    if x[1] != w[1] * g:
        return None
    out_spatial = [
        (x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1
        for i in range(rank)
    ]
    if any(o <= 0 for o in out_spatial):
        return None
    n, cout, cin_g = x[0], w[0], w[1]
    flops = 2 * n * cout * _numel(out_spatial) * cin_g * _numel(w[2:])
    tensors = _tensors(dims, types)
    if not tensors:
        return None
    dtype = tensors[0][1]
    out = n * cout * _numel(out_spatial) * ELEMENT_BYTES[dtype]
    return Work(OpKind.CONV, _float(flops), _float(_bytes(tensors) + out), dtype)


def _lookup(base: str, dims: Dims, types: Sequence[Any], concrete: Sequence[Any]) -> Work | None:
    """A lookup reads what it writes: the elements it gathers (twice), not the whole table."""
    table, at = (dims[0] if dims else []), _LOOKUPS[base]
    dtype = dtype_of(types[0]) if types else None
    if not table or dtype is None or at >= len(dims) or not dims[at]:
        return None
    picked = _numel(dims[at])
    if base == "gather":
        gathered = picked  # one element per index
    else:  # whole slices along `dim` (index_select's argument; the first dim otherwise)
        arg = _int_list(concrete[1], 1) if base == "index_select" and len(concrete) > 1 else None
        along = table[arg[0] % len(table)] if arg else table[0]
        gathered = picked * (_numel(table) // along) if along else 0
    return Work(OpKind.COPY, 0.0, _float(2 * gathered * ELEMENT_BYTES[dtype]), dtype)


def _pointwise(
    kind: OpKind, base: str, dims: Dims, types: Sequence[Any], concrete: Sequence[Any]
) -> Work | None:
    if kind == OpKind.COPY and base in _LOOKUPS:
        return _lookup(base, dims, types, concrete)
    out_at = _OUT_AT.get(base) if kind == OpKind.ELEMENTWISE else None
    if out_at is not None and len(dims) > out_at and dims[out_at]:
        dims, types = dims[:out_at], types[:out_at]
    tensors = _tensors(dims, types)
    if not tensors:
        return None
    largest, dtype = max(tensors, key=lambda t: _numel(t[0]))
    n = _numel(largest)
    read = _bytes(tensors)
    written = n * ELEMENT_BYTES[dtype]
    if kind == OpKind.REDUCTION:
        return Work(kind, _float(n), _float(read), dtype)  # the reduced output is negligible
    if kind == OpKind.NORM:
        return Work(kind, _float(NORM_FLOPS_PER_ELEMENT * n), _float(read + written), dtype)
    if kind == OpKind.COPY:
        if base == "copy_" and len(tensors) >= 2:
            return Work(kind, 0.0, _float(read), dtype)  # dst written, src read: both inputs
        return Work(kind, 0.0, _float(2 * read), dtype)
    if base in _WRITE_ONLY:
        return Work(kind, 0.0, _float(written), dtype)
    return Work(kind, _float(n), _float(read + written), dtype)


def work(op: str, dims: Dims, types: Sequence[Any], concrete: Sequence[Any]) -> Work | None:
    """The FLOPs and bytes one execution of `op` asks for; None when the table does not know
    the op or its inputs do not say enough (no dims, no dtype, missing or degenerate conv
    arguments: stride or groups 0). A count beyond float range is infinite, not an error."""
    kind = op_kind(op)
    try:
        if kind == OpKind.GEMM:
            return _gemm(op, dims, types)
        if kind == OpKind.ATTENTION:
            return _attention(op, dims, types, concrete)
        if kind == OpKind.CONV:
            return _conv(op, dims, types, concrete)
        if kind is not None:
            name = op.split("::", 1)[-1] if kind == OpKind.COPY else _base(op)
            return _pointwise(kind, name, dims, types, concrete)
    except (IndexError, ValueError, TypeError, ZeroDivisionError, OverflowError):
        # dims or arguments that do not fit the op's signature, or degenerate ones (a zero
        # that divides, a number beyond float range): no count, so no roofline for this op
        return None
    return None


def op_kind(op: str) -> OpKind | None:
    """The kind of op `op` is by its name alone (None: the table does not know it)."""
    if op in _GEMM:
        return OpKind.GEMM
    if op in _ATTENTION:
        return OpKind.ATTENTION
    if op in _CONV:
        return OpKind.CONV
    if not op.startswith("aten::"):
        return None
    base = _base(op)
    for kind, names in (
        (OpKind.ELEMENTWISE, _ELEMENTWISE),
        (OpKind.REDUCTION, _REDUCTION),
        (OpKind.NORM, _NORM),
        (OpKind.COPY, _COPY),
    ):
        if base in names or op.split("::", 1)[-1] in names:
            return kind
    return None
