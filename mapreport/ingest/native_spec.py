"""The records of the native formats (FORMATS.md) declared once, as data.

The per-record reader converts with these declarations (`spec.convert_record`), the fast path
decodes requests with a Struct made from `REQUEST` (`spec.struct_of`), and the fleet benchmark's
bare-decode peer uses the same declaration.
"""

from __future__ import annotations

from mapreport.core.schema import ADAPTATION_KINDS, INT32_MAX, PLAN_VARIANTS
from mapreport.ingest.spec import Field, RecordSpec

COMPILE = RecordSpec(
    "compile profile",
    (
        Field("workload", "str", required=True),
        Field("slice", "str"),
        Field("plan_id", "str", required=True),
        Field("shape_bucket", "bucket", required=True),
        Field("op", "str", required=True),
        Field("predicted_us", "float", required=True, minimum=0),
        Field("prediction_source", "str"),
        Field("kernel", "str"),
        Field("tile", "str"),
        Field("fusion_group", "str"),
        Field("core", "int", minimum=0, maximum=INT32_MAX),
        Field("precision", "str"),
        Field("predicted_peak_mem_bytes", "int", minimum=0),
        Field("mem_budget_bytes", "int", minimum=0),
        Field("compile_ms", "float", minimum=0),
    ),
)

REQUEST = RecordSpec(
    "request",
    (
        Field("workload", "str", required=True),
        Field("slice", "str"),
        Field("request_id", "str", required=True),
        Field("shape", "shape", required=True),
        Field("arrival_us", "float", required=True),
        Field("queue_start_us", "float"),
        Field("compute_start_us", "float", required=True),
        Field("compute_end_us", "float", required=True),
        Field("plan_id", "str"),
        Field("plan_variant", "str", choices=PLAN_VARIANTS),
        Field("core", "int", minimum=0, maximum=INT32_MAX),
        Field("stream", "str"),
        Field("batch_size", "int", minimum=1, maximum=INT32_MAX),
        Field("mem_peak_bytes", "int", minimum=0),
        Field("precision", "str"),
        Field("status", "str"),
    ),
)

EVENT = RecordSpec(
    "adaptation event",
    (
        Field("event", "str", required=True, choices=ADAPTATION_KINDS),
        Field("workload", "str", required=True),
        Field("slice", "str"),
        Field("ts_us", "float", required=True),
        Field("dur_us", "float", minimum=0),
        Field("shape", "shape"),
        Field("plan_id", "str"),
        Field("core", "int", minimum=0, maximum=INT32_MAX),
        Field("detail", "str"),
    ),
)

QUALITY = RecordSpec(
    "quality",
    (
        Field("workload", "str", required=True),
        Field("slice", "str"),
        Field("precision", "str", required=True),
        Field("metric", "str", required=True),
        Field("baseline", "float", required=True),
        Field("value", "float", required=True),
        Field("max_drop", "float", minimum=0),
    ),
)
