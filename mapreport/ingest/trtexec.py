"""TensorRT `trtexec` exports, one reader for the four files trtexec writes per engine:

- `--exportLayerInfo` (`<engine>.graph.json`): the build-time mapping, one `compile_plan` row per
  engine layer: tactic (kernel), output precision, the layer's fused ops (`A + B` names make a
  fusion group) and the engine's input shape as its bucket. TensorRT exports no per-layer cost
  estimate, so `predicted_us` is null: the per-op view compares the mapping with measured times.
- `--exportProfile` (`<engine>.profile.json`): `op_exec`, the median time per layer (joined to
  the graph by layer name).
- `--exportTimes` (`<engine>.timing.json`): `request`, one row per timed inference.
- metadata (`.build.metadata.json`, `.profile.metadata.json`, `.metadata.json`): `environment`.

trtexec writes an engine's exports side by side, so each file finds the engine's input shape and
environment in its siblings. Defaults: workload = the engine file's stem (`resnet`), slice = the
two folders above the file (`A100/fp16`), plan_id = the engine file name; `--workload` and
`--slice` override the first two.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mapreport.core.errors import ErrorPolicy, InputError
from mapreport.core.schema import ENVIRONMENT_KEYS
from mapreport.core.shapes import MAX_DIMS
from mapreport.ingest.base import Head
from mapreport.ingest.jsondoc import element_lines, json_text, read_document
from mapreport.ingest.spec import as_float

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink

SUFFIXES = (
    ".graph.json",
    ".profile.json",
    ".timing.json",
    ".build.metadata.json",
    ".profile.metadata.json",
    ".metadata.json",
)
_NOT_NAME = re.compile(r"[^A-Za-z0-9_.\-]")
_PRECISIONS = (
    ("int8", "int8"),
    ("fp16", "fp16"),
    ("half", "fp16"),
    ("fp32", "fp32"),
    ("float", "fp32"),
    ("int32", "int32"),
    ("bool", "bool"),
    ("fp8", "fp8"),
)


def engine_name(path: Path) -> str:
    """The engine file name an export belongs to: `resnet.onnx.engine.graph.json` ->
    `resnet.onnx.engine`."""
    for suffix in SUFFIXES:
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)]
    return path.name.rsplit(".", 1)[0]


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(engine_name(path) + suffix)


def _dim_name(binding: str, i: int) -> str:
    name = _NOT_NAME.sub("_", binding)[:56] or "input"
    if not (name[0].isalpha() or name[0] == "_"):
        name = "_" + name
    return f"{name}_d{i}"


def input_shape(layers: list[Any], bindings: list[Any]) -> str | None:
    """The engine's input shape as named dimensions, `<binding>_d<i>=<size>`, from the layers
    that read a binding (a binding read by a layer is an input; one written is an output)."""
    names = {b for b in bindings if isinstance(b, str)}
    dims: dict[str, int] = {}
    for layer in layers:
        if not isinstance(layer, dict):
            continue
        for tensor in layer.get("Inputs") or []:
            if not isinstance(tensor, dict) or tensor.get("Name") not in names:
                continue
            size = tensor.get("Dimensions")
            if not isinstance(size, list) or len(dims) + len(size) > MAX_DIMS:
                continue
            if all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in size):
                for i, d in enumerate(size):
                    dims[_dim_name(str(tensor["Name"]), i)] = d
    return ",".join(f"{k}={v}" for k, v in sorted(dims.items())) or None


def _shape_from_metadata(meta: Any) -> str | None:
    """`input_1=32x224x224x3` (trtexec's "Input inference shape") as named dimensions."""
    text = ((meta or {}).get("inference_options") or {}).get("Input inference shape")
    if not isinstance(text, str) or "=" not in text:
        return None
    dims: dict[str, int] = {}
    for part in text.split(","):
        name, _, size = part.strip().rpartition("=")
        values = size.split("x")
        if not name or not all(v.isascii() and v.isdigit() for v in values):
            return None
        for i, v in enumerate(values):
            dims[_dim_name(name, i)] = int(v)
    return ",".join(f"{k}={v}" for k, v in sorted(dims.items())) or None


def precision_of(fmt: Any) -> str | None:
    """`Channel major FP16 format ...` -> `fp16`; None when the text names no type."""
    if not isinstance(fmt, str):
        return None
    low = fmt.lower()
    for needle, name in _PRECISIONS:
        if needle in low:
            return name
    return None


def _load_optional(path: Path) -> Any:
    """A sibling export when it is there and decodes, else None (it is only context)."""
    if not path.is_file():
        return None
    try:
        return read_document(path)[0]
    except InputError:
        return None


def _engine_shape(path: Path, profile_meta: Any) -> str | None:
    """The engine's input shape from its graph.json, else from its profile metadata."""
    graph = _load_optional(_sibling(path, ".graph.json"))
    if isinstance(graph, dict) and isinstance(graph.get("Layers"), list):
        shape = input_shape(graph["Layers"], graph.get("Bindings") or [])
        if shape:
            return shape
    return _shape_from_metadata(profile_meta)


def _kind(data: bytes) -> str | None:
    """Which trtexec export a document is, from its first bytes."""
    text = data.lstrip()
    if text.startswith(b"{"):
        head = text[:4096]
        if b'"Layers"' in head[:64]:
            return "graph"
        if b'"build_options"' in head or b'"model_options"' in head:
            return "build"
        if b'"performance_summary"' in head or b'"inference_options"' in head:
            return "profile_meta"
        return None
    if text.startswith(b"["):
        head = text[:4096]
        if b'"startComputeMs"' in head or b'"startEnqMs"' in head:
            return "timing"
        if b'"count"' in head[:64] and (b'"averageMs"' in head or b'"timeMs"' in head):
            return "profile"
        if b'"ComputeCapability"' in head and b'"TotalMemory"' in head:
            return "device"
    return None


class TrtexecReader:
    """trtexec layer info, layer profile, per-inference times and metadata of one engine."""

    name = "trtexec"
    summary = (
        "TensorRT trtexec exports: layer->tactic mapping (graph.json), per-layer times "
        "(profile.json), per-inference times (timing.json), build/device metadata"
    )
    tables = ("compile_plan", "op_exec", "request", "environment")
    default_policy: ErrorPolicy = "abort"
    deprecated: str | None = None

    def sniff(self, head: Head) -> bool:
        """A JSON document whose first keys are those of one of trtexec's exports."""
        return _kind(head.data) is not None

    def read(self, path: Path, sink: Sink) -> None:
        """Read whichever export the file is into its canonical table."""
        doc, raw = read_document(path)
        kind = _kind(raw)
        engine = engine_name(path)
        ctx = {
            "workload": sink.hints.get("workload") or engine.split(".")[0],
            "slice": sink.hints.get("slice") or "/".join(path.resolve().parent.parts[-2:]),
            "plan_id": engine,
        }
        if kind == "graph":
            self._graph(path, sink, doc, ctx)
        elif kind == "profile":
            self._profile(path, sink, doc, raw, ctx)
        elif kind == "timing":
            self._timing(path, sink, doc, raw, ctx)
        elif kind in ("build", "profile_meta", "device"):
            sink.add("environment", 1, _environment(kind, doc))
        else:
            raise InputError(path, None, None, "not a trtexec export")

    @staticmethod
    def _graph(path: Path, sink: Sink, doc: Any, ctx: dict[str, str]) -> None:
        layers = doc.get("Layers")
        if not isinstance(layers, list):
            raise InputError(path, None, "Layers", "must be a list of layers")
        bucket = input_shape(layers, doc.get("Bindings") or [])
        if bucket is None:
            raise InputError(
                path, None, "Bindings", "no layer reads an engine input binding: no input shape"
            )
        build = _load_optional(_sibling(path, ".build.metadata.json"))
        if isinstance(build, dict):
            sink.add("environment", None, _environment("build", build))
        for i, layer in enumerate(layers):
            if isinstance(layer, str):  # exported without --profilingVerbosity=detailed
                layer = {"Name": layer}
            name = layer.get("Name") if isinstance(layer, dict) else None
            if not isinstance(name, str) or not name:
                sink.reject(None, f"Layers[{i}].Name", "layer has no name", layer)
                continue
            outputs = [t for t in layer.get("Outputs") or [] if isinstance(t, dict)]
            inputs = [t for t in layer.get("Inputs") or [] if isinstance(t, dict)]
            tactic = layer.get("TacticName")
            # a reformat layer's name quotes the layer it feeds ("... to A + B"): not a fusion
            reformat = layer.get("LayerType") == "Reformat" or name.startswith("Reformatting ")
            fused = " + " in name and not reformat
            extra = {
                "layer_type": layer.get("LayerType"),
                "tactic_value": layer.get("TacticValue"),
                "origin": layer.get("Origin"),
                "fused_ops": name.split(" + ") if fused else None,
                "inputs": [t.get("Dimensions") for t in inputs] or None,
                "outputs": [t.get("Dimensions") for t in outputs] or None,
            }
            sink.add(
                "compile_plan",
                None,
                {
                    **ctx,
                    "shape_bucket": bucket,
                    "op": name,
                    "predicted_us": None,
                    "prediction_source": None,
                    "kernel": tactic if isinstance(tactic, str) else layer.get("LayerType"),
                    "fusion_group": name if fused else None,
                    "precision": precision_of(outputs[0].get("Format/Datatype"))
                    if outputs
                    else None,
                    "extra": json_text({k: v for k, v in extra.items() if v is not None}),
                },
            )

    @staticmethod
    def _profile(path: Path, sink: Sink, doc: Any, raw: bytes, ctx: dict[str, str]) -> None:
        lines = element_lines(raw, len(doc))
        runs = doc[0].get("count") if doc and isinstance(doc[0], dict) else None
        for i, (line, rec) in enumerate(zip(lines, doc, strict=True)):
            if i == 0 and isinstance(rec, dict) and "count" in rec and "name" not in rec:
                continue
            if not isinstance(rec, dict) or not isinstance(rec.get("name"), str):
                sink.reject(line, "name", "layer record has no name", rec)
                continue
            stated = rec.get("medianMs", rec.get("averageMs"))
            ms = as_float(stated)
            if ms is None or ms < 0:
                sink.reject(line, "medianMs", f"must be a non-negative number, got {stated!r}", rec)
                continue
            extra = {k: rec.get(k) for k in ("timeMs", "averageMs", "percentage")}
            sink.add(
                "op_exec",
                line,
                {
                    "workload": ctx["workload"],
                    "slice": ctx["slice"],
                    "name": rec["name"],
                    "category": "trt_layer",
                    "dur_us": ms * 1e3,
                    "plan_id": ctx["plan_id"],
                    "extra": json_text({**extra, "runs": runs}),
                },
            )

    @staticmethod
    def _timing(path: Path, sink: Sink, doc: Any, raw: bytes, ctx: dict[str, str]) -> None:
        profile_meta = _load_optional(_sibling(path, ".profile.metadata.json"))
        shape = _engine_shape(path, profile_meta)
        if shape is None:
            raise InputError(
                path,
                None,
                None,
                "per-inference times carry no input shape: keep the engine's .graph.json or "
                ".profile.metadata.json beside this file",
            )
        if isinstance(profile_meta, dict):
            sink.add("environment", None, _environment("profile_meta", profile_meta))
        device = _load_optional(_sibling(path, ".metadata.json"))
        if isinstance(device, list) and device:
            sink.add("environment", None, _environment("device", device))
        if not isinstance(doc, list):
            raise InputError(path, None, None, "per-inference times must be a JSON array")
        for i, (line, rec) in enumerate(zip(element_lines(raw, len(doc)), doc, strict=True)):
            try:
                start, end = _ms(rec, "startComputeMs"), _ms(rec, "endComputeMs")
                h2d = _ms(rec, "startH2dMs", start)
            except _Bad as e:
                sink.reject(line, e.field, e.reason, rec)
                continue
            if end < start:
                sink.reject(line, "endComputeMs", "is before startComputeMs", rec)
                continue
            extra = {k: rec.get(k) for k in ("startEnqMs", "endEnqMs", "d2hMs", "latencyMs")}
            sink.add(
                "request",
                line,
                {
                    **ctx,
                    "request_id": str(i),
                    "shape": shape,
                    "arrival_us": min(h2d, start) * 1e3,
                    "queue_start_us": min(h2d, start) * 1e3,
                    "compute_start_us": start * 1e3,
                    "compute_end_us": end * 1e3,
                    "plan_variant": "static",
                    "status": "ok",
                    "extra": json_text(extra),
                },
            )


class _Bad(Exception):
    def __init__(self, field: str, reason: str):
        super().__init__(reason)
        self.field, self.reason = field, reason


def _ms(rec: Any, key: str, default: float | None = None) -> float:
    if not isinstance(rec, dict):
        raise _Bad(key, "record is not a JSON object")
    v = rec.get(key, default)
    out = as_float(v)
    if out is None:
        raise _Bad(key, f"must be a number of milliseconds, got {v!r}"[:200])
    return out


def _environment(kind: str | None, doc: Any) -> dict[str, Any]:
    """One environment row from a metadata document (build: compile side; else runtime)."""
    row: dict[str, Any] = dict.fromkeys(ENVIRONMENT_KEYS)
    if kind == "build":
        row.update(side="compile", compiler="TensorRT", extra=json_text(doc))
    elif kind == "profile_meta":
        info = (doc or {}).get("device_information") or {}
        row.update(
            side="runtime",
            runtime="TensorRT",
            hardware=info.get("Selected Device") if isinstance(info, dict) else None,
            extra=json_text({k: v for k, v in (doc or {}).items() if k != "device_information"}),
        )
    else:
        dev = doc[0] if isinstance(doc, list) and doc and isinstance(doc[0], dict) else {}
        cuda = dev.get("CUDA_VERSION")
        row.update(
            side="runtime",
            runtime="TensorRT",
            hardware=dev.get("Name") if isinstance(dev.get("Name"), str) else None,
            extra=json_text(
                {
                    "cuda_version": ".".join(map(str, cuda)) if isinstance(cuda, list) else None,
                    "compute_capability": dev.get("ComputeCapability"),
                    "total_memory_bytes": dev.get("TotalMemory"),
                }
            ),
        )
    return row
