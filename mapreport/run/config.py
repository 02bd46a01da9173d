"""The run configuration (TOML): sources, slices with SLA targets, owners, sign-offs, thresholds.

Relative paths are resolved against the config file's folder. Every key is documented in
docs/config.md; an unknown key or a wrong type is a ConfigError naming the file and the key.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import tomllib
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Literal

import msgspec

from mapreport.analysis.base.common import Thresholds
from mapreport.core.devices import KNOWN, MATRIX_DTYPES, PLAUSIBLE, DeviceConfig, by_name
from mapreport.core.errors import ConfigError, ErrorPolicy, UsageError
from mapreport.core.records import field_names, replace
from mapreport.core.window import parse_duration_us, zone
from mapreport.engine.settings import EngineName, EngineSettings


class _Run(msgspec.Struct, forbid_unknown_fields=True):
    dataset: str = "dataset"
    out: str = "reports"
    sources: list[str] = []
    on_error: ErrorPolicy | None = None
    jobs: int | Literal["auto"] = 1
    window: str = "day"
    timezone: str = "UTC"
    retain_days: int | None = None
    workload: str | None = None
    slice: str | None = None
    sequence_buckets: list[int] | None = None
    request_span: str | None = None
    pdf: Literal["packet", "full"] = "packet"


MAX_JOBS = 64
"""The most reader processes a run may start."""
WORKER_BYTES = 2 * 2**30
"""Memory a report worker is given room for: one worker reporting slices of 50,000 requests
peaked at 1.75 GiB (benchmarks/README.md, a night of 40 slices)."""


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the system has one)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, cores or 1)


def auto_jobs() -> int:
    """`--jobs auto`: a worker per core this process may run on, as many as memory holds at
    `WORKER_BYTES` each (at least one, at most `MAX_JOBS`)."""
    cores = usable_cores()
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # no such sysconf here: cores alone decide
        memory = WORKER_BYTES * MAX_JOBS
    return max(1, min(cores, memory // WORKER_BYTES, MAX_JOBS))


class SliceConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """SLA targets of one workload slice (latency in microseconds, end to end)."""

    workload: str
    slice: str = ""
    sla_p95_us: float | None = None
    sla_p99_us: float | None = None
    description: str = ""


class _Owners(msgspec.Struct, forbid_unknown_fields=True):
    compiler_lead: str | None = None
    runtime_lead: str | None = None
    observability_engineer: str | None = None
    model_serving_architect: str | None = None


class _History(msgspec.Struct, forbid_unknown_fields=True):
    record: bool = True
    baseline_run: str | None = None


class _Engine(msgspec.Struct, forbid_unknown_fields=True):
    name: EngineName = EngineName.DUCKDB
    master: str = "local[2]"
    conf: dict[str, str] = {}
    dataset_uri: str | None = None


class _Device(msgspec.Struct, forbid_unknown_fields=True):
    name: str | None = None
    memory_gbps: float | None = None
    vector_tflops: float | None = None
    matrix_tflops: dict[str, float] = {}


class _File(msgspec.Struct, forbid_unknown_fields=True):
    run: _Run = msgspec.field(default_factory=_Run)
    engine: _Engine = msgspec.field(default_factory=_Engine)
    history: _History = msgspec.field(default_factory=_History)
    thresholds: dict[str, Any] = {}
    slices: list[SliceConfig] = []
    owners: _Owners = msgspec.field(default_factory=_Owners)
    signoffs: _Owners = msgspec.field(default_factory=_Owners)
    device: _Device | None = None


@dataclass(frozen=True)
class Config:
    """A loaded, validated configuration with absolute paths."""

    path: Path | None
    dataset: Path
    out: Path
    sources: tuple[str, ...]
    on_error: ErrorPolicy | None
    thresholds: Thresholds
    slices: tuple[SliceConfig, ...]
    owners: dict[str, str]
    signoffs: dict[str, str]
    record_history: bool = True
    baseline_run: str | None = None
    jobs: int = dataclasses.field(default=1, repr=False)
    """Source files read at once, each in its own process. Left out of the repr, which is
    part of a report's fingerprint: how files were read does not change a report."""
    window: str = "day"
    """`day`, a duration ending at the night's end (`6h`, `7d`), or `all`."""
    timezone: str = "UTC"
    """The time zone whose calendar days are the nights."""
    retain_days: int | None = dataclasses.field(default=None, repr=False)
    """Day partitions older than this many nights are removed (None: keep everything)."""
    hints: dict[str, str] = dataclasses.field(default_factory=dict)
    """run.workload and run.slice: the slice of every source whose format names none (a
    profiler trace, a TORCH_TRACE log), as `ingest --workload/--slice` gives it."""
    pdf_form: str = "packet"
    """`packet`: the PDF is the design review, five pages and an appendix; `full`: every
    section, as the HTML report has them."""
    device: DeviceConfig | None = None
    """`[device]`: the accelerator the roofline holds traces to, where the trace does not
    name one the table knows, or figures that replace the table's."""
    engine: EngineSettings = dataclasses.field(default_factory=EngineSettings, repr=False)
    """Where the analysis SQL runs. Not in the repr (a report's fingerprint): both engines
    give the same findings."""

    def slice_config(self, workload: str, slice_: str) -> SliceConfig | None:
        """The configured SLA block of a slice (an exact match, else the workload's generic)."""
        exact = [s for s in self.slices if s.workload == workload and s.slice == slice_]
        generic = [s for s in self.slices if s.workload == workload and s.slice == ""]
        found = exact or generic
        return found[0] if found else None

    def source_files(self, night: date | None = None) -> list[Path]:
        """The configured source globs expanded (`{date}`, `{yyyy}`, `{mm}`, `{dd}` with the
        night being run first), sorted; a glob matching nothing is an error."""
        base = self.path.parent if self.path else Path.cwd()
        files: list[Path] = []
        for template in self.sources:
            pattern = expand_date(template, night, f"{self.path}: run.sources")
            full = pattern if Path(pattern).is_absolute() else str(base / pattern)
            matched = sorted(Path(p) for p in glob.glob(full, recursive=True) if Path(p).is_file())
            if not matched:
                raise ConfigError(f"{self.path}: run.sources: {pattern!r} matches no file")
            for m in matched:
                for key, folder in (("run.dataset", self.dataset), ("run.out", self.out)):
                    if m.resolve().is_relative_to(folder.resolve()):
                        raise ConfigError(
                            f"{self.path}: run.sources: {pattern!r} matches {m}, inside {key}"
                        )
            files += [m for m in matched if m not in files]
        return files


DATE_FIELDS = ("date", "yyyy", "mm", "dd")
"""The placeholders a source pattern may hold, filled in with the night being run."""
_FIELD = re.compile(r"\{([^{}]*)\}")


def expand_date(pattern: str, night: date | None, where: str) -> str:
    """`pattern` with `{date}` (YYYY-MM-DD), `{yyyy}`, `{mm}` and `{dd}` of `night` filled in;
    another `{...}`, or a placeholder without a night, is a ConfigError naming `where`."""
    names = _FIELD.findall(pattern)
    unknown = [n for n in names if n not in DATE_FIELDS]
    if unknown:
        raise ConfigError(
            f"{where}: {pattern!r}: unknown placeholder {{{unknown[0]}}} "
            f"(known: {', '.join('{' + f + '}' for f in DATE_FIELDS)})"
        )
    if not names:
        return pattern
    if night is None:
        raise ConfigError(f"{where}: {pattern!r} needs a night (--date) to fill in its date")
    values = {
        "date": night.isoformat(),
        "yyyy": f"{night.year:04d}",
        "mm": f"{night.month:02d}",
        "dd": f"{night.day:02d}",
    }
    return _FIELD.sub(lambda m: values[m.group(1)], pattern)


def default_config() -> Config:
    """The configuration used when no file is given: defaults, no SLA, no owners."""
    return _build(_File(), None)


def _build(raw: _File, path: Path | None) -> Config:
    base = path.parent if path else Path.cwd()
    known = set(field_names(Thresholds))
    unknown = sorted(set(raw.thresholds) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) in [thresholds]: {', '.join(unknown)}")
    try:
        # replace() runs __init__: msgspec sets only the given fields on the instance
        th = replace(msgspec.convert(raw.thresholds, Thresholds))
    except msgspec.ValidationError as e:
        raise ConfigError(f"{path}: {str(e).replace('$.', 'thresholds.')}") from None
    if not 0 < th.tolerance < 10:
        raise ConfigError(f"{path}: thresholds.tolerance must be in (0, 10), got {th.tolerance}")
    if th.bootstrap_resamples < 1000:
        raise ConfigError(f"{path}: thresholds.bootstrap_resamples must be >= 1000 (METRICS.md)")
    if min(th.min_samples, th.min_samples_p95, th.min_samples_p99) < 1:
        raise ConfigError(f"{path}: thresholds.min_samples* must be >= 1")
    jobs = auto_jobs() if raw.run.jobs == "auto" else raw.run.jobs
    if not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS:
        raise ConfigError(
            f'{path}: run.jobs must be in 1..{MAX_JOBS} or "auto", got {raw.run.jobs!r}'
        )
    if raw.run.retain_days is not None and raw.run.retain_days < 1:
        raise ConfigError(f"{path}: run.retain_days must be >= 1, got {raw.run.retain_days}")
    try:
        zone(raw.run.timezone)
    except UsageError as e:
        raise ConfigError(f"{path}: run.timezone: {e}") from None
    if raw.run.window not in ("day", "all"):
        try:
            parse_duration_us(raw.run.window)
        except UsageError as e:
            raise ConfigError(f"{path}: run.window: {e}") from None
    return Config(
        path=path,
        dataset=(base / raw.run.dataset).resolve(),
        out=(base / raw.run.out).resolve(),
        sources=tuple(raw.run.sources),
        on_error=raw.run.on_error,
        thresholds=th,
        slices=tuple(raw.slices),
        owners={k: v for k, v in msgspec.structs.asdict(raw.owners).items() if v},
        signoffs={k: v for k, v in msgspec.structs.asdict(raw.signoffs).items() if v},
        record_history=raw.history.record,
        baseline_run=raw.history.baseline_run,
        jobs=jobs,
        window=raw.run.window,
        timezone=raw.run.timezone,
        retain_days=raw.run.retain_days,
        hints=_hints(path, raw.run),
        pdf_form=raw.run.pdf,
        device=_device(raw.device, path),
        engine=EngineSettings(
            raw.engine.name, raw.engine.master, dict(raw.engine.conf), raw.engine.dataset_uri
        ),
    )


def _device(raw: _Device | None, path: Path | None) -> DeviceConfig | None:
    """`[device]` checked: a name the table knows, or bandwidth and a vector peak; figures
    within PLAUSIBLE; matrix peaks keyed by a known data type."""
    if raw is None:
        return None
    known = [str(d) for d in MATRIX_DTYPES]
    figures = [(f"matrix_tflops.{k}", "matrix_tflops", v) for k, v in raw.matrix_tflops.items()]
    figures += [(k, k, getattr(raw, k)) for k in ("memory_gbps", "vector_tflops")]
    for key in raw.matrix_tflops:
        if key not in known:
            raise ConfigError(
                f"{path}: device.matrix_tflops: unknown data type {key!r} "
                f"(known: {', '.join(known)})"
            )
    for key, kind, value in figures:
        low, high = PLAUSIBLE[kind]
        if value is not None and not low <= value <= high:  # NaN fails both
            unit = "GB/s" if kind == "memory_gbps" else "TFLOP/s"
            raise ConfigError(
                f"{path}: device.{key} must be within [{low:,g}, {high:,g}] {unit}, got {value:g}"
            )
    if raw.name and by_name(raw.name) is None and (not raw.memory_gbps or not raw.vector_tflops):
        names = ", ".join(k.limits.name for k in KNOWN)
        raise ConfigError(
            f"{path}: device.name {raw.name!r} is not in the table ({names}): "
            "set device.memory_gbps and device.vector_tflops (and matrix_tflops) for it"
        )
    return DeviceConfig(raw.name, raw.memory_gbps, raw.vector_tflops, dict(raw.matrix_tflops))


def _hints(path: Path | None, run: _Run) -> dict[str, str]:
    """What the readers take from the config: workload, slice, sequence-length bucket edges,
    the pattern of a request's profiler span."""
    from mapreport.core.shapes import ShapeError, parse_edges

    edges = None
    if run.sequence_buckets is not None:
        text = ",".join(map(str, run.sequence_buckets))
        try:
            edges = ",".join(map(str, parse_edges(text)))
        except ShapeError as e:
            raise ConfigError(f"{path}: run.sequence_buckets: {e}") from None
    if run.request_span is not None:
        from mapreport.ingest.kineto_requests import span_pattern

        try:
            span_pattern(run.request_span)
        except ValueError as e:
            raise ConfigError(f"{path}: run.request_span: {e}") from None
    named = (
        ("workload", run.workload),
        ("slice", run.slice),
        ("sequence_buckets", edges),
        ("request_span", run.request_span),
    )
    return {k: v for k, v in named if v}


def load_config(path: Path) -> Config:
    """Read and validate a TOML configuration file."""
    path = path.resolve()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    try:
        raw = msgspec.convert(data, _File)
    except msgspec.ValidationError as e:
        raise ConfigError(f"{path}: {e}") from None
    return _build(raw, path)
