"""The limits of the accelerators users run: peak dense throughput per data type and memory
bandwidth, each from its vendor's public datasheet (docs/metrics.md, "Roofline", cites them),
and how a trace's device is recognised from what the profiler recorded of it.

Figures are dense (no structured sparsity) and per device as PyTorch sees it: an MI250X is two
devices (one per die), each with half the package's figures.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import msgspec

from mapreport.core.records import replace


class Dtype(StrEnum):
    """The element types a roofline distinguishes (their peak throughput differs)."""

    FP64 = "fp64"
    FP32 = "fp32"
    TF32 = "tf32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    INT64 = "int64"
    INT32 = "int32"
    INT16 = "int16"
    BOOL = "bool"


MATRIX_DTYPES = (Dtype.FP64, Dtype.FP32, Dtype.TF32, Dtype.BF16, Dtype.FP16, Dtype.FP8, Dtype.INT8)
"""The data types a matrix unit's peak is stated for."""
ELEMENT_BYTES: Mapping[Dtype, int] = {
    Dtype.FP64: 8,
    Dtype.FP32: 4,
    Dtype.TF32: 4,
    Dtype.BF16: 2,
    Dtype.FP16: 2,
    Dtype.FP8: 1,
    Dtype.INT8: 1,
    Dtype.INT64: 8,
    Dtype.INT32: 4,
    Dtype.INT16: 2,
    Dtype.BOOL: 1,
}

_KINETO_TYPES: Mapping[str, Dtype] = {
    "double": Dtype.FP64,
    "float": Dtype.FP32,
    "c10::BFloat16": Dtype.BF16,
    "c10::Half": Dtype.FP16,
    "c10::Float8_e4m3fn": Dtype.FP8,
    "c10::Float8_e5m2": Dtype.FP8,
    "c10::Float8_e4m3fnuz": Dtype.FP8,
    "c10::Float8_e5m2fnuz": Dtype.FP8,
    "c10::Float8_e8m0fnu": Dtype.FP8,
    "signed char": Dtype.INT8,
    "unsigned char": Dtype.INT8,
    "long int": Dtype.INT64,
    "long": Dtype.INT64,
    "int": Dtype.INT32,
    "short int": Dtype.INT16,
    "short": Dtype.INT16,
    "bool": Dtype.BOOL,
}
"""The profiler's `Input type` spellings (C++ type names) of tensor element types."""


FP32_MATMUL_AS = (Dtype.TF32, Dtype.BF16)
"""What PyTorch may run an fp32 matrix op in (`allow_tf32`, `set_float32_matmul_precision`
"high" or "medium"): the trace records fp32 inputs either way."""


def dtype_of(kineto_type: object) -> Dtype | None:
    """The element type a profiler `Input type` names; None for scalars, lists and unknowns."""
    return _KINETO_TYPES.get(kineto_type) if isinstance(kineto_type, str) else None


class DeviceLimits(msgspec.Struct, frozen=True):
    """One accelerator's roofline: peak dense TFLOP/s of its matrix units per data type, the
    TFLOP/s of its vector units (elementwise and reductions), and memory bandwidth."""

    name: str
    memory_gbps: float
    vector_tflops: float
    matrix_tflops: Mapping[Dtype, float] = msgspec.field(default_factory=dict)
    source: str = ""
    """Where the figures come from: a datasheet, the run configuration, or both."""
    recognised_by: str = ""
    """How the trace's device was matched to these figures (its name, or its unit count)."""

    def peak_tflops(self, dtype: Dtype | None, matrix: bool) -> float | None:
        """The peak for an op of this type: the matrix units' for GEMMs, convolutions and
        attention (None when the device lists none for the type), else the vector units'."""
        if not matrix:
            return self.vector_tflops
        if dtype is None:
            return None
        return self.matrix_tflops.get(dtype)

    def fastest_tflops(self, dtype: Dtype | None, matrix: bool) -> float:
        """The most an op of this type could run at: an fp32 matrix op at the fastest of its
        own, TF32 and bf16 peaks (FP32_MATMUL_AS), a type the device lists no peak for at its
        fastest matrix peak; vector ops at the vector peak."""
        if not matrix:
            return self.vector_tflops
        if dtype == Dtype.FP32:
            peaks = [self.matrix_tflops.get(d) for d in (dtype, *FP32_MATMUL_AS)]
            return max(p for p in [*peaks, self.vector_tflops] if p)
        listed = self.matrix_tflops.get(dtype) if dtype else None
        return listed or max([self.vector_tflops, *self.matrix_tflops.values()])

    def as_dict(self) -> dict[str, Any]:
        """findings.json's `device`."""
        return {
            "name": self.name,
            "memory_gbps": self.memory_gbps,
            "vector_tflops": self.vector_tflops,
            "matrix_tflops": {str(k): v for k, v in self.matrix_tflops.items()},
            "source": self.source,
            "recognised_by": self.recognised_by,
        }


_F = Dtype
_NV = "NVIDIA {} datasheet (dense figures), https://www.nvidia.com/en-us/data-center/{}/"
_AMD = "AMD Instinct {} specifications, https://www.amd.com/en/products/accelerators/instinct/{}"


PLAUSIBLE: Mapping[str, tuple[float, float]] = {
    "memory_gbps": (10.0, 100_000.0),
    "vector_tflops": (0.1, 1_000.0),
    "matrix_tflops": (1.0, 100_000.0),
}
"""The range a `[device]` figure must lie in. The table spans 300 (L4) to 8,000 GB/s,
vector 15.7 to 163.4 and matrix 7.8 (V100 fp64) to 5,033 TFLOP/s (MI355X fp8): the upper ends
leave over 10x for parts to come; the lower ones refuse a unit slip (an H100's bandwidth
written in TB/s, 3.35; its vector peak in PFLOP/s, 0.067) and a figure like 1e-300, which
would put every op at 1e300 times its roof."""
UNKNOWN_DEVICE = DeviceLimits(
    "no device (the largest figures PLAUSIBLE allows)",
    PLAUSIBLE["memory_gbps"][1],
    PLAUSIBLE["vector_tflops"][1],
    dict.fromkeys(MATRIX_DTYPES, PLAUSIBLE["matrix_tflops"][1]),
)
"""What a trace without a known device is held to when its op records are judged
(`roofline.suspect`): no plausible device is faster."""


class Known(msgspec.Struct, frozen=True):
    """A device in the declared table: the name pattern that recognises it, and its limits."""

    pattern: str
    limits: DeviceLimits


_A100: Mapping[Dtype, float] = {
    _F.FP64: 19.5,
    _F.FP32: 19.5,
    _F.TF32: 156.0,
    _F.BF16: 312.0,
    _F.FP16: 312.0,
    _F.INT8: 624.0,
}
"""A100's matrix peaks (40 and 80 GB alike)."""
_HOPPER: Mapping[Dtype, float] = {
    _F.FP64: 67.0,
    _F.FP32: 67.0,
    _F.TF32: 494.5,
    _F.BF16: 989.5,
    _F.FP16: 989.5,
    _F.FP8: 1979.0,
    _F.INT8: 1979.0,
}
"""H100 SXM's and H200's matrix peaks (the same chip; H200 has more bandwidth)."""

KNOWN: tuple[Known, ...] = (
    Known(
        r"A100.*(80GB|PCIE-80)|A100-SXM4-80",
        DeviceLimits(
            "NVIDIA A100 80GB",
            2039.0,
            19.5,
            _A100,
            _NV.format("A100", "a100"),
        ),
    ),
    Known(
        r"A100",
        DeviceLimits(
            "NVIDIA A100 40GB",
            1555.0,
            19.5,
            _A100,
            _NV.format("A100", "a100"),
        ),
    ),
    Known(
        r"H100.*PCIe",
        DeviceLimits(
            "NVIDIA H100 PCIe",
            2000.0,
            51.0,
            {
                _F.FP64: 51.0,
                _F.FP32: 51.0,
                _F.TF32: 378.0,
                _F.BF16: 756.0,
                _F.FP16: 756.0,
                _F.FP8: 1513.0,
                _F.INT8: 1513.0,
            },
            _NV.format("H100", "h100"),
        ),
    ),
    Known(
        r"H100",
        DeviceLimits(
            "NVIDIA H100 SXM",
            3350.0,
            67.0,
            _HOPPER,
            _NV.format("H100", "h100"),
        ),
    ),
    Known(
        r"H200",
        DeviceLimits(
            "NVIDIA H200 SXM",
            4800.0,
            67.0,
            _HOPPER,
            _NV.format("H200", "h200"),
        ),
    ),
    Known(
        r"B200",
        DeviceLimits(
            "NVIDIA B200",
            8000.0,
            75.0,
            {
                _F.FP64: 37.0,
                _F.FP32: 75.0,
                _F.TF32: 1125.0,
                _F.BF16: 2250.0,
                _F.FP16: 2250.0,
                _F.FP8: 4500.0,
                _F.INT8: 4500.0,
            },
            _NV.format("HGX B200", "hgx"),
        ),
    ),
    Known(
        r"\bL4\b",
        DeviceLimits(
            "NVIDIA L4",
            300.0,
            30.3,
            {
                _F.FP32: 30.3,
                _F.TF32: 60.0,
                _F.BF16: 121.0,
                _F.FP16: 121.0,
                _F.FP8: 242.5,
                _F.INT8: 242.5,
            },
            _NV.format("L4", "l4"),
        ),
    ),
    Known(
        r"V100",
        DeviceLimits(
            "NVIDIA V100 SXM2",
            900.0,
            15.7,
            {_F.FP64: 7.8, _F.FP32: 15.7, _F.FP16: 125.0},
            _NV.format("V100", "v100"),
        ),
    ),
    Known(
        r"MI250X?",
        DeviceLimits(
            "AMD Instinct MI250X (one die)",
            1638.4,
            23.95,
            {_F.FP64: 47.85, _F.FP32: 47.85, _F.BF16: 191.5, _F.FP16: 191.5, _F.INT8: 191.5},
            _AMD.format("MI250X", "mi200/mi250x.html") + " (package figures halved)",
        ),
    ),
    Known(
        r"MI210",
        DeviceLimits(
            "AMD Instinct MI210",
            1638.4,
            22.6,
            {_F.FP64: 45.3, _F.FP32: 45.3, _F.BF16: 181.0, _F.FP16: 181.0, _F.INT8: 181.0},
            _AMD.format("MI210", "mi200/mi210.html"),
        ),
    ),
    Known(
        r"MI300X",
        DeviceLimits(
            "AMD Instinct MI300X",
            5300.0,
            163.4,
            {
                _F.FP64: 163.4,
                _F.FP32: 163.4,
                _F.TF32: 653.7,
                _F.BF16: 1307.4,
                _F.FP16: 1307.4,
                _F.FP8: 2614.9,
                _F.INT8: 2614.9,
            },
            _AMD.format("MI300X", "mi300/mi300x.html"),
        ),
    ),
    Known(
        r"MI355X",
        DeviceLimits(
            "AMD Instinct MI355X",
            8000.0,
            157.3,
            {
                _F.FP64: 78.6,
                _F.FP32: 157.3,
                _F.BF16: 2516.6,
                _F.FP16: 2516.6,
                _F.FP8: 5033.2,
                _F.INT8: 5033.2,
            },
            _AMD.format("MI355X", "mi350/mi355x.html"),
        ),
    ),
)
"""The declared table, most specific pattern first."""

_MI300X = next(k for k in KNOWN if k.pattern == "MI300X")


def by_name(name: str) -> DeviceLimits | None:
    """The declared limits whose pattern matches a device name (None when none does)."""
    for k in KNOWN:
        if re.search(k.pattern, name, re.IGNORECASE):
            return k.limits
    return None


def recognise(properties: Mapping[str, Any]) -> DeviceLimits | None:
    """The limits of the device a profiler's `deviceProperties` entry describes: by its name,
    or (ROCm traces whose name is empty) an AMD gfx9.4 part with 304 compute units, which is
    an MI300X (an MI325X reads the same but has 6 TB/s: configure `[device]` for one)."""
    name = str(properties.get("name") or "").strip()
    if name:
        found = by_name(name)
        return None if found is None else _named(found, f"its name {name!r}")
    amd = properties.get("warpSize") == 64
    gfx = (properties.get("computeMajor"), properties.get("computeMinor"))
    if amd and gfx == (9, 4) and properties.get("numSms") == 304:
        return _named(_MI300X.limits, "304 compute units of gfx9.4 (its name is empty)")
    return None


def _named(limits: DeviceLimits, how: str) -> DeviceLimits:
    return replace(limits, recognised_by=how)


class DeviceConfig(msgspec.Struct, frozen=True):
    """The run configuration's `[device]`: a named device from the table, or figures of one
    it lacks; a figure set here replaces the table's."""

    name: str | None = None
    memory_gbps: float | None = None
    vector_tflops: float | None = None
    matrix_tflops: Mapping[str, float] = msgspec.field(default_factory=dict)


def _name_of(limits: DeviceLimits | None) -> str:
    return limits.name if limits else "configured device"


def configured(recognised: DeviceLimits | None, cfg: DeviceConfig) -> DeviceLimits | None:
    """The device the roofline uses: the configured one over the recognised one; None when
    neither the trace nor the configuration names a device with a bandwidth and a peak."""
    start = by_name(cfg.name) if cfg.name else recognised
    bandwidth = cfg.memory_gbps or (start.memory_gbps if start else None)
    vector = cfg.vector_tflops or (start.vector_tflops if start else None)
    if bandwidth is None or vector is None:
        return None
    matrix = {**(start.matrix_tflops if start else {})}
    matrix.update({Dtype(k): v for k, v in cfg.matrix_tflops.items()})
    figures = bool(cfg.memory_gbps or cfg.vector_tflops or cfg.matrix_tflops)
    if start is None:
        source = "[device] in the run configuration"
    else:
        source = start.source + ("; figures set in [device] replace the table's" if figures else "")
    return DeviceLimits(
        # a name the table knows reads as the table has it; any other as the user gave it
        name=cfg.name if cfg.name and not by_name(cfg.name) else _name_of(start),
        memory_gbps=bandwidth,
        vector_tflops=vector,
        matrix_tflops=matrix,
        source=source,
        recognised_by="the run configuration's [device]"
        if cfg.name or start is None
        else start.recognised_by,
    )
