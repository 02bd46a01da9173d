"""Every trial of a TVM tuning log as a `tuning_trial` row, and the cost model's scores that a
MetaSchedule run may keep beside its database.

MetaSchedule's `database_tuning_record.json` holds each measured candidate but not the score
its cost model gave it. A run that records them writes `database_cost_model.json` in the same
folder (`benchmarks/tvm_tuning.py` does, from a measure callback placed before the model's
update, so the score is the one the search ranked by), one JSON list a line:
`[workload_index, trial, score, cost_model]`, `trial` the 1-based order of that workload's
records, `score` higher for a candidate predicted faster. It is read with the record file it
sits beside; a line that breaks this is an error naming that file, its line and the field.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgspec

from mapreport.core.errors import InputError
from mapreport.ingest.jsondoc import json_text
from mapreport.ingest.records import MAX_LINE_BYTES, JsonDecoder, bounded_lines, open_bytes
from mapreport.ingest.spec import as_float

FAILED_SECONDS = 1e9
"""TVM records a failed run as 1e10 s (MAX_FLOAT-like sentinels); anything this large failed."""

_DECODE: JsonDecoder[Any] = JsonDecoder()
_FIELDS = ("workload_index", "trial", "score", "cost_model")


class Score(msgspec.Struct, frozen=True):
    """The cost model's score of one candidate."""

    score: float
    model: str


def companion(path: Path) -> Path | None:
    """The cost-model file beside a MetaSchedule record file, when there is one."""
    if "tuning_record" not in path.name:
        return None
    for name in (path.name.replace("tuning_record", "cost_model"), "database_cost_model.json"):
        for cand in (path.with_name(name), path.with_name(name.removesuffix(".gz"))):
            if cand != path and cand.is_file():
                return cand
    return None


def workloads_beside(path: Path) -> Path | None:
    """MetaSchedule's workload file beside its record file, when there is one."""
    if "tuning_record" not in path.name:
        return None
    name = path.name.replace("tuning_record", "workload")
    for cand in (path.with_name(name), path.with_name(name.removesuffix(".gz"))):
        if cand != path and cand.is_file():
            return cand
    return None


def workload_keys(path: Path) -> dict[int, str]:
    """Workload index (its 0-based line) -> its structural hash, the workload's identity
    across databases; a bad line raises InputError naming it."""
    out: dict[int, str] = {}
    with open_bytes(path) as fh:
        for n, raw in bounded_lines(fh):
            if raw is None:  # a line past the limit is not read into memory
                raise InputError(path, n, None, f"line longer than {MAX_LINE_BYTES:,} bytes")
            try:
                rec = _DECODE.decode(raw)
            except msgspec.DecodeError as e:
                raise InputError(path, n, None, f"invalid JSON: {e}") from None
            if not isinstance(rec, list) or not rec or not isinstance(rec[0], str | int):
                raise InputError(path, n, "shash", "must be [structural_hash, module]")
            out[n - 1] = f"shash:{rec[0]}"
    return out


def read_scores(path: Path) -> dict[tuple[int, int], Score]:
    """(workload index, trial) -> its score; a bad line raises InputError naming it."""
    out: dict[tuple[int, int], Score] = {}
    with open_bytes(path) as fh:
        for n, raw in bounded_lines(fh):
            if raw is None:  # a line past the limit is not read into memory
                raise InputError(path, n, None, f"line longer than {MAX_LINE_BYTES:,} bytes")
            text = raw.strip()
            if not text or text.startswith(b"#"):
                continue
            try:
                rec = _DECODE.decode(text)
            except msgspec.DecodeError as e:
                raise InputError(path, n, None, f"invalid JSON: {e}") from None
            if not isinstance(rec, list) or len(rec) != len(_FIELDS):
                raise InputError(path, n, None, "must be [workload_index, trial, score, model]")
            index, trial, score, model = rec
            for name, value, ok in (
                ("workload_index", index, isinstance(index, int) and not isinstance(index, bool)),
                ("trial", trial, isinstance(trial, int) and not isinstance(trial, bool)),
                ("score", score, as_float(score) is not None),
                ("cost_model", model, isinstance(model, str)),
            ):
                if not ok:
                    raise InputError(path, n, name, f"unexpected value {value!r}"[:200])
            if (index, trial) in out:
                raise InputError(path, n, "trial", f"trial {trial} of workload {index} repeated")
            out[(index, trial)] = Score(float(score), model)
    return out


def failed(err: int, costs: list[float]) -> str | None:
    """The trial's error code: None when it measured, else TVM's code (or `failed_time`: a
    time of 1e9 s or more, TVM's marker for a failed run; `not_run`: no time at all)."""
    if err != 0:
        return str(err)
    if not costs:
        return "not_run"
    if max(costs) >= FAILED_SECONDS:
        return "failed_time"
    return None


def trial_row(
    *,
    workload: str,
    slice_: str,
    plan_id: str,
    task: str,
    task_key: str,
    target: str,
    shape: str | None,
    trial: int,
    config: Any,
    costs: list[float],
    error: str | None,
    all_cost: float,
    ts: float | None,
    score: Score | None,
    ran: str | None = None,
) -> dict[str, Any]:
    """One `tuning_trial` row (times in microseconds); `ran`: the arguments' shape as this
    trial recorded them, kept in `extra` where it is not the workload's."""
    text = json_text(config) if config is not None else None
    cid = hashlib.sha256((text or "").encode()).hexdigest()[:16]
    us = [c * 1e6 for c in costs] if error is None else None
    return {
        "workload": workload,
        "slice": slice_,
        "plan_id": plan_id,
        "task": task,
        "task_key": task_key,
        "target": target,
        "shape": shape,
        "trial": trial,
        "config_id": cid,
        "config": text,
        "costs_us": us,
        "mean_us": sum(us) / len(us) if us else None,
        "error": error,
        "predicted_us": None,
        "predicted_score": score.score if score else None,
        "cost_model": score.model if score else None,
        "tuning_ms": all_cost * 1e3 if all_cost else None,
        "ts_us": ts * 1e6 if ts is not None else None,
        "extra": json_text({"args_shape": ran}) if ran is not None and ran != shape else None,
    }
