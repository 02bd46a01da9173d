"""The canonical tables as pyarrow schemas: the one place their columns and units are declared.

Conventions: times end in `_us` (microseconds), sizes in `_bytes`, compile times in `_ms`.
`slice` is the empty string when a record names none, so joins on (workload, slice) need no
NULL handling. `extra` holds a record's unknown fields as a JSON object (FORMATS.md: kept, not
dropped). Every data row carries `source_id`, the ingest_log key of the file it came from, and
`line`, its 1-based line (or row) in that file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pyarrow as pa

from mapreport.core.errors import DatasetError

SCHEMA_VERSION: Final = "1"
"""Written into every Parquet file's metadata (key `mapreport.schema_version`)."""

PLAN_VARIANTS: Final[tuple[str, ...]] = ("static", "adapted", "fallback")
ADAPTATION_KINDS: Final[tuple[str, ...]] = (
    "retune",
    "recompile",
    "remap",
    "fallback_enter",
    "fallback_exit",
)

_S, _F, _I32, _I64, _B = pa.string(), pa.float64(), pa.int32(), pa.int64(), pa.bool_()
INT32_MAX: Final[int] = 2**31 - 1
"""The largest value an int32 column (core, batch_size) holds: a record stating more is refused."""

_PROVENANCE = [pa.field("source_id", _S, nullable=False), pa.field("line", _I64)]
_RUN_KEY = [
    pa.field("run_id", _S, nullable=False),
    pa.field("run_date", _S, nullable=False),
    pa.field("workload", _S, nullable=False),
    pa.field("slice", _S, nullable=False),
]
"""The columns every history table starts with: the recorded run and its slice."""

TABLES: Final[dict[str, pa.Schema]] = {
    "compile_plan": pa.schema(
        [
            pa.field("workload", _S, nullable=False),
            pa.field("slice", _S, nullable=False),
            pa.field("plan_id", _S, nullable=False),
            pa.field("shape_bucket", _S, nullable=False),
            pa.field("op", _S, nullable=False),
            pa.field("predicted_us", _F),  # null: the compiler exported no estimate
            pa.field("prediction_source", _S),
            pa.field("kernel", _S),
            pa.field("tile", _S),
            pa.field("fusion_group", _S),
            pa.field("core", _I32),
            pa.field("precision", _S),
            pa.field("predicted_peak_mem_bytes", _I64),
            pa.field("mem_budget_bytes", _I64),
            pa.field("compile_ms", _F),
            pa.field("extra", _S),
            *_PROVENANCE,
        ]
    ),
    "compile_event": pa.schema(
        [
            pa.field("workload", _S, nullable=False),
            pa.field("slice", _S, nullable=False),
            pa.field("compile_id", _S, nullable=False),
            pa.field("plan_id", _S),
            pa.field("frame", _S),
            pa.field("shape", _S),
            pa.field("ts_us", _F),
            pa.field("compile_ms", _F),
            pa.field("recompile_reason", _S),
            pa.field("cache_hit", _B),
            pa.field("op_count", _I32),
            # the worker (process) that compiled: compile ids are per process
            pa.field("core", _I32),
            # compiled, failed (an error), limit_hit (refused at the recompile limit); null:
            # the log does not say
            pa.field("outcome", _S),
            pa.field("extra", _S),
            *_PROVENANCE,
        ]
    ),
    "request": pa.schema(
        [
            pa.field("workload", _S, nullable=False),
            pa.field("slice", _S, nullable=False),
            pa.field("request_id", _S, nullable=False),
            pa.field("shape", _S, nullable=False),
            pa.field("arrival_us", _F, nullable=False),
            pa.field("queue_start_us", _F, nullable=False),
            pa.field("compute_start_us", _F, nullable=False),
            pa.field("compute_end_us", _F, nullable=False),
            # false: the source records no arrival (a profiler span gives compute only), so
            # arrival and queue start are the compute start and latency and queue wait are
            # not measured; null or true: recorded
            pa.field("arrival_known", _B),
            pa.field("plan_id", _S),
            pa.field("plan_variant", _S),
            pa.field("core", _I32),
            pa.field("stream", _S),
            pa.field("batch_size", _I32),
            pa.field("mem_peak_bytes", _I64),
            pa.field("precision", _S),
            pa.field("status", _S, nullable=False),
            # false: measured by the client end to end (AIPerf), so queue start and compute
            # start are the arrival and queue wait and compute are not measured; null or
            # true: the server's split
            pa.field("queue_known", _B),
            # token timing of generative requests: time to first token, mean inter-token
            # latency, and the sequence lengths the shape buckets
            pa.field("ttft_us", _F),
            pa.field("itl_us", _F),
            pa.field("input_tokens", _I64),
            pa.field("output_tokens", _I64),
            pa.field("extra", _S),
            *_PROVENANCE,
        ]
    ),
    "op_exec": pa.schema(
        [
            pa.field("workload", _S, nullable=False),
            pa.field("slice", _S, nullable=False),
            pa.field("name", _S, nullable=False),
            pa.field("category", _S),
            pa.field("shape", _S),
            pa.field("ts_us", _F),
            pa.field("dur_us", _F, nullable=False),
            pa.field("device", _I32),
            pa.field("core", _I32),
            pa.field("stream", _S),
            pa.field("correlation", _I64),
            pa.field("plan_id", _S),
            pa.field("extra", _S),
            *_PROVENANCE,
        ]
    ),
    "adaptation_event": pa.schema(
        [
            pa.field("workload", _S, nullable=False),
            pa.field("slice", _S, nullable=False),
            pa.field("event", _S, nullable=False),
            pa.field("ts_us", _F, nullable=False),
            pa.field("dur_us", _F),
            pa.field("shape", _S),
            pa.field("plan_id", _S),
            pa.field("detail", _S),
            # the worker the event held (null: it names none, so it holds every worker)
            pa.field("core", _I32),
            pa.field("extra", _S),
            *_PROVENANCE,
        ]
    ),
    "environment": pa.schema(
        [
            pa.field("side", _S, nullable=False),
            pa.field("compiler", _S),
            pa.field("compiler_version", _S),
            pa.field("runtime", _S),
            pa.field("runtime_version", _S),
            pa.field("driver", _S),
            pa.field("firmware", _S),
            pa.field("hardware", _S),
            pa.field("host", _S),
            pa.field("container_digest", _S),
            pa.field("git_sha", _S),
            pa.field("captured_at", _S),
            # the workload it describes, when a file of its own states an environment (an
            # MLPerf system description, GPU telemetry, read with --workload); null: the
            # workloads of the file it came with
            pa.field("workload", _S),
            pa.field("extra", _S),
            *_PROVENANCE,
        ]
    ),
    "quality": pa.schema(
        [
            pa.field("workload", _S, nullable=False),
            pa.field("slice", _S, nullable=False),
            pa.field("precision", _S, nullable=False),
            pa.field("metric", _S, nullable=False),
            pa.field("baseline", _F, nullable=False),
            pa.field("value", _F, nullable=False),
            pa.field("max_drop", _F),
            pa.field("extra", _S),
            *_PROVENANCE,
        ]
    ),
    "load_sweep": pa.schema(
        [
            pa.field("workload", _S, nullable=False),
            pa.field("slice", _S, nullable=False),
            pa.field("model", _S, nullable=False),
            pa.field("config", _S, nullable=False),
            pa.field("max_batch_size", _I32),
            pa.field("instance_count", _I32),
            pa.field("instance_kind", _S),
            pa.field("dynamic_batching", _B),
            pa.field("batch_size", _I32),
            pa.field("concurrency", _I32),
            pa.field("request_rate", _F),
            pa.field("throughput_per_s", _F),
            pa.field("latency_avg_us", _F),
            pa.field("latency_p50_us", _F),
            pa.field("latency_p90_us", _F),
            pa.field("latency_p95_us", _F),
            pa.field("latency_p99_us", _F),
            pa.field("client_send_recv_us", _F),
            pa.field("client_response_wait_us", _F),
            pa.field("server_queue_us", _F),
            pa.field("server_compute_input_us", _F),
            pa.field("server_compute_infer_us", _F),
            pa.field("server_compute_output_us", _F),
            pa.field("gpu_used_memory_bytes", _I64),
            pa.field("gpu_utilization", _F),
            pa.field("extra", _S),
            *_PROVENANCE,
        ]
    ),
    "metric_sample": pa.schema(
        [
            # the model a sample is labelled with (`model`, `model_name`), or the --workload
            # hint; "" for a server-wide sample (GPU, process)
            pa.field("workload", _S, nullable=False),
            pa.field("slice", _S, nullable=False),
            pa.field("scrape", _I32, nullable=False),  # 0-based ordinal of its scrape in the file
            pa.field("scrape_us", _F),  # when it was scraped (null: the file does not say)
            pa.field("metric", _S, nullable=False),  # the metric family
            pa.field("sample", _S, nullable=False),  # the series name (`_bucket`, `_sum`, ...)
            pa.field("type", _S, nullable=False),  # counter, gauge, histogram, summary, ...
            pa.field("labels", _S),  # the other labels, a JSON object with sorted keys
            pa.field("le", _F),  # a bucket's upper bound; null on a `_bucket` row: +Inf
            pa.field("quantile", _F),  # a summary's quantile
            pa.field("value", _F),  # as exported, in the metric's own unit; null: NaN
            pa.field("extra", _S),
            *_PROVENANCE,
        ]
    ),
    "loadgen_run": pa.schema(
        [
            # one MLPerf loadgen run (its summary or detail log): the settings it ran under,
            # the SLA targets it was held to and the percentiles it achieved
            pa.field("workload", _S, nullable=False),
            pa.field("slice", _S, nullable=False),
            pa.field("scenario", _S, nullable=False),  # SingleStream, Server, Offline, ...
            pa.field("mode", _S),  # PerformanceOnly, AccuracyOnly
            pa.field("valid", _B),  # the run met every constraint loadgen checks
            pa.field("loadgen_version", _S),
            pa.field("run_at", _S),  # test_datetime (detail log only)
            pa.field("errors", _I64),
            pa.field("target_qps", _F),
            pa.field("target_latency_us", _F),
            pa.field("target_latency_percentile", _F),
            pa.field("target_ttft_us", _F),
            pa.field("target_tpot_us", _F),
            pa.field("samples_per_s", _F),
            pa.field("tokens_per_s", _F),
            pa.field("latency_mean_us", _F),
            pa.field("latency_p50_us", _F),
            pa.field("latency_p90_us", _F),
            pa.field("latency_p95_us", _F),
            pa.field("latency_p99_us", _F),
            pa.field("latency_p999_us", _F),
            pa.field("ttft_p50_us", _F),
            pa.field("ttft_p90_us", _F),
            pa.field("ttft_p95_us", _F),
            pa.field("ttft_p99_us", _F),
            pa.field("ttft_p999_us", _F),
            pa.field("tpot_p50_us", _F),
            pa.field("tpot_p90_us", _F),
            pa.field("tpot_p95_us", _F),
            pa.field("tpot_p99_us", _F),
            pa.field("tpot_p999_us", _F),
            pa.field("extra", _S),
            *_PROVENANCE,
        ]
    ),
    "tuning_trial": pa.schema(
        [
            # one measured candidate of an autotuning search (a TVM MetaSchedule, Ansor or
            # AutoTVM trial): every trial, not only the best, in the order the search measured
            pa.field("workload", _S, nullable=False),
            pa.field("slice", _S, nullable=False),
            pa.field("plan_id", _S, nullable=False),  # the tuning run (its record file)
            pa.field("task", _S, nullable=False),  # the tuner's task name or workload key
            # the workload's identity across runs: MetaSchedule's structural hash of the tuned
            # module where its workload file is beside the records, else the task
            pa.field("task_key", _S, nullable=False),
            pa.field("target", _S),
            pa.field("shape", _S),  # the task's argument shapes, canonical
            pa.field("trial", _I64, nullable=False),  # 1-based order within (task, target, shape)
            pa.field("config_id", _S, nullable=False),  # sha256 of `config`, 16 hex digits
            pa.field("config", _S),  # the schedule as recorded (JSON text)
            pa.field("costs_us", pa.list_(_F)),  # every repeat's time as measured
            pa.field("mean_us", _F),  # their mean; null: the trial failed
            pa.field("error", _S),  # null: measured; else the tuner's error code
            pa.field("predicted_us", _F),  # the cost model's predicted time, when recorded
            pa.field("predicted_score", _F),  # its score, higher is predicted faster
            pa.field("cost_model", _S),  # the model that scored it (xgb, random, ...)
            pa.field("tuning_ms", _F),  # build and measure time of this trial
            pa.field("ts_us", _F),  # when it was measured (Unix epoch)
            pa.field("extra", _S),
            *_PROVENANCE,
        ]
    ),
    "graph_capture": pa.schema(
        [
            # one CUDA/HIP graph a serving engine captured, as its capture harness recorded it
            # (vLLM's and SGLang's execution_details.json): the capture trace it names, the
            # batch size captured and the graph mode (FULL, PIECEWISE)
            pa.field("workload", _S, nullable=False),
            pa.field("slice", _S, nullable=False),
            pa.field("trace_file", _S, nullable=False),
            pa.field("batch_size", _I32, nullable=False),
            pa.field("graph_mode", _S, nullable=False),
            pa.field("extra", _S),
            *_PROVENANCE,
        ]
    ),
    "quarantine": pa.schema(
        [
            pa.field("field", _S),
            pa.field("reason", _S, nullable=False),
            pa.field("raw", _S),
            *_PROVENANCE,
        ]
    ),
    "ingest_log": pa.schema(
        [
            pa.field("source_id", _S, nullable=False),
            pa.field("path", _S, nullable=False),
            pa.field("format", _S, nullable=False),
            pa.field("sha256", _S, nullable=False),
            pa.field("size_bytes", _I64, nullable=False),
            pa.field("ingested_at", _S, nullable=False),
            pa.field("rows", _S, nullable=False),
            pa.field("rejected", _I64, nullable=False),
            pa.field("rejections", _S, nullable=False),
            pa.field("supersedes", _S),
            pa.field("schema_version", _S, nullable=False),
            pa.field("mtime_ns", _I64),  # the file's modification time when it was read
            pa.field("night", _S),  # the night it was ingested for (rows without a date)
            # JSON: each data file's path in the dataset -> the SHA-256 of its bytes (null in
            # records written before files were hashed)
            pa.field("files", _S),
        ]
    ),
}
"""Table name -> schema. The names are a public contract (DESIGN.md)."""

HISTORY_TABLES: Final[dict[str, pa.Schema]] = {
    "history_run": pa.schema(
        [
            *_RUN_KEY,
            pa.field("requests", _I64, nullable=False),
            pa.field("latency_p50_us", _F),
            pa.field("latency_p95_us", _F),
            pa.field("latency_p99_us", _F),
            pa.field("covered_traffic_share", _F),
            pa.field("mape_weighted", _F),
            pa.field("actions", _I64, nullable=False),
            # the window the night covered, what it read, and how often it was re-run
            pa.field("window", _S),
            pa.field("timezone", _S),
            pa.field("window_start_us", _F),
            pa.field("window_end_us", _F),
            pa.field("inputs", _S),
            pa.field("revision", _I64),
            pa.field("recorded_at", _S),
            # the slice met every SLA target it had the evidence to judge that night (null: no
            # target judged, or a night recorded before it was kept): a regression's reference
            pa.field("sla_met", _B),
        ]
    ),
    "history_shape": pa.schema(
        [
            *_RUN_KEY,
            pa.field("shape", _S, nullable=False),
            pa.field("n", _I64, nullable=False),
            pa.field("latency_p50_us", _F),
            pa.field("latency_p95_us", _F),
            pa.field("latency_p99_us", _F),
            pa.field("queue_p95_us", _F),
            pa.field("compute_p50_us", _F),
            pa.field("ape", _F),
            pa.field("net_gain_p50", _F),
            pa.field("fallback_share", _F),
            pa.field("error_rate", _F),
            pa.field("decision", _S),
            pa.field("bottleneck_class", _S),
            pa.field("latency_quantiles_us", pa.list_(_F)),
            # the cost model's signed error tonight and the plan version it measures
            pa.field("plan_id", _S),
            pa.field("plan_version", _S),
            pa.field("signed_error", _F),
            pa.field("signed_error_lo", _F),
            pa.field("signed_error_hi", _F),
        ]
    ),
    "history_action": pa.schema(
        [
            *_RUN_KEY,
            pa.field("action_id", _S, nullable=False),
            pa.field("class", _S, nullable=False),
            pa.field("shape", _S, nullable=False),
            # the words of nights recorded before `params`; null since (the report words the
            # params when it prints)
            pa.field("title", _S),
            pa.field("owner_role", _S, nullable=False),
            pa.field("state", _S, nullable=False),
            pa.field("proposed", _B, nullable=False),
            pa.field("first_run_id", _S, nullable=False),
            pa.field("target_metric", _S),
            pa.field("target_baseline", _F),
            pa.field("rollback_metric", _S),
            pa.field("rollback_threshold", _F),
            # the figures the action stated, typed (`action_params.encode`)
            pa.field("params", _S),
            # what the threshold was fixed from on the proposal night (null on older nights)
            pa.field("rollback_pre_change", _F),
            pa.field("rollback_sla_us", _F),
            # tonight's values of the target and rollback metrics: the next night's "before"
            # for metrics no shape or run row holds (an op x shape's, the device's)
            pa.field("target_now", _F),
            pa.field("rollback_now", _F),
            # the target as proposed (its criterion and the figures that bound it): what a
            # later night verifies it against (null on nights recorded before they were kept)
            pa.field("target_criterion", _S),
            pa.field("target_limit", _F),
            pa.field("target_reference", _F),
        ]
    ),
    "history_op": pa.schema(
        [
            *_RUN_KEY,
            pa.field("plan_id", _S, nullable=False),
            pa.field("plan_version", _S),
            pa.field("op", _S, nullable=False),
            pa.field("runs", _I64, nullable=False),
            pa.field("measured_p50_us", _F),
            pa.field("predicted_us", _F),
            pa.field("signed_error", _F),
        ]
    ),
}
"""The closed-loop history: one row set per nightly run, under `history/<table>/run_date=`."""

DATA_TABLES: Final[tuple[str, ...]] = tuple(t for t in TABLES if t != "ingest_log")
PARTITIONED: Final[frozenset[str]] = frozenset(
    {
        "compile_plan",
        "compile_event",
        "request",
        "op_exec",
        "adaptation_event",
        "quality",
        "load_sweep",
        "metric_sample",
        "loadgen_run",
        "tuning_trial",
        "graph_capture",
    }
)
"""Tables written under `workload=<name>/` folders, so one slice's report reads one folder."""
DAY_PARTITIONED: Final[dict[str, str]] = {
    "request": "arrival_us",
    "op_exec": "ts_us",
    "adaptation_event": "ts_us",
    "metric_sample": "scrape_us",
}
"""Runtime tables written under `workload=<name>/day=<date>/`, by the column that dates a row,
so a night's report reads only that night's files (`window.py`: what a row's day is)."""


ENVIRONMENT_COMPARED: Final[tuple[str, ...]] = (
    "compiler",
    "compiler_version",
    "runtime",
    "runtime_version",
    "driver",
    "firmware",
    "hardware",
    "container_digest",
    "git_sha",
)
"""Environment keys that define the environment (compared between compile and runtime).
`host` and `captured_at` identify a capture and are shown, not compared: a compile farm and a
serving node are different machines by design."""
ENVIRONMENT_SHOWN: Final[tuple[str, ...]] = (*ENVIRONMENT_COMPARED, "host", "captured_at")
ENVIRONMENT_KEYS: Final[tuple[str, ...]] = tuple(
    f.name for f in TABLES["environment"] if f.name in ENVIRONMENT_SHOWN
)
"""The environment record's keys in column order (readers map them; the rest is `extra`)."""


def empty_table(name: str) -> pa.Table:
    """An empty table with the canonical schema of `name`."""
    return TABLES[name].empty_table()


def check_schema_version(version: object, where: Path) -> None:
    """Refuse (DatasetError) what a newer mapreport wrote: a schema version above this one's
    (its columns may be retyped or mean something else), or none that can be read."""
    try:
        newer = int(str(version)) > int(SCHEMA_VERSION)
    except ValueError:
        raise DatasetError(f"{where}: unknown dataset schema version {version!r}") from None
    if newer:
        raise DatasetError(
            f"{where}: written by a newer mapreport (dataset schema {version}; this mapreport "
            f"reads schema {SCHEMA_VERSION} and older): upgrade mapreport to read this dataset"
        )


COMPILED_IN_PROCESS: Final[frozenset[str]] = frozenset({"torch-trace", "xla-trace", "xplane"})
"""Compile-side formats of a just-in-time compiler that compiles in the serving process itself
(torch.compile's TORCH_TRACE, XLA's traces): they hold no environment record, and need none
apart from the runtime's: the compile ran in the same process and environment. A compile side
read only from them is not asked for a record of its own (every other side is: a native line,
a trtexec export, AIPerf's GPU telemetry or an MLPerf system file can give one)."""
