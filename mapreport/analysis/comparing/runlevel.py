"""Run-level comparison (docs/compare.md, "Run to run"): a claim about two builds or configs
in general, from the spread of a slice's quantile across each side's runs.

A bootstrap over one run's requests measures request-to-request variation inside that run; two
runs of the same build differ by more (a restart, a noisy neighbour, another compile). With at
least two runs a side, each run's quantile is one observation: the ratio is the geometric mean
of B's runs over A's, and its 95% CI is Welch's t interval on the log quantiles (AIPerf's rule:
run-level claims from repeated runs only). A run is the side's files whose spans overlap in
time: one server's workers write a file each at the same time (one run), repeated runs follow
one another (`group_runs`).
"""

from __future__ import annotations

import math

import msgspec
import numpy as np

from mapreport.analysis.base.common import Thresholds
from mapreport.analysis.base.tdist import t_quantile, welch_df
from mapreport.analysis.comparing.compare import OP_CALLS, SAMPLES, OpKey, side_params
from mapreport.core.connection import Connection

QUANTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
MIN_RUNS = 2
"""Runs a side needs for a run-level interval."""

_SPANS = f"""
    SELECT source_id, min(at_us), max(at_us + latency_us) FROM ({SAMPLES}) GROUP BY source_id
"""
_RUNS = f"""
    SELECT run, count(*) AS n, quantile_cont(latency_us, [0.5, 0.95, 0.99]) AS q
    FROM ({SAMPLES}) JOIN (SELECT unnest($ids) AS source_id, unnest($runs) AS run) USING (source_id)
    GROUP BY run ORDER BY run
"""
_OP_SPANS = """
    SELECT source_id, min(ts_us), max(ts_us + dur_us) FROM op_exec
    WHERE workload = $w AND slice = $s GROUP BY source_id
"""


def group_runs(spans: list[tuple[str, float, float]]) -> dict[str, int]:
    """Each file's run: files whose spans (start, end) overlap, directly or through another
    file, are one run (the workers of one server); runs are numbered in time order."""
    out: dict[str, int] = {}
    run, end = -1, -math.inf
    for source, start, stop in sorted(spans, key=lambda x: (x[1], x[2], x[0])):
        if start > end:
            run += 1
        end = max(end, stop)
        out[source] = run
    return out


class Run(msgspec.Struct, frozen=True):
    """One run of a side: its files, requests and latency quantiles."""

    files: tuple[str, ...]
    n: int
    quantiles: tuple[float, float, float]
    """p50, p95, p99 of end-to-end latency (microseconds)."""


def side_runs(
    con: Connection,
    workload: str,
    slice_: str,
    start_us: float | None = None,
    end_us: float | None = None,
) -> tuple[Run, ...]:
    """A side's runs (its files of the slice's ok requests, those that overlap in time
    together: `group_runs`), with their quantiles."""
    params = side_params(workload, slice_, start_us, end_us)
    spans = con.execute(_SPANS, params).fetchall()
    runs = group_runs([(str(f), float(a), float(b)) for f, a, b in spans if None not in (a, b)])
    files: dict[int, list[str]] = {}
    for source, run in sorted(runs.items()):
        files.setdefault(run, []).append(source)
    rows = con.execute(_RUNS, params | {"ids": list(runs), "runs": list(runs.values())}).fetchall()
    return tuple(
        Run(tuple(files[run]), int(n), (float(q[0]), float(q[1]), float(q[2])))
        for run, n, q in rows
    )


class RunLevel(msgspec.Struct, frozen=True):
    """One quantile of the slice compared across runs: B's runs against A's."""

    quantile: str
    runs_a: int
    runs_b: int
    """Runs with the requests the quantile needs (`min_samples_p95` for p50 and p95,
    `min_samples_p99` for p99)."""
    ratio: float | None
    """Geometric mean of B's run quantiles over A's (None under `MIN_RUNS` runs a side)."""
    ci: tuple[float, float] | None
    """Welch's 95% t interval of `ratio` (on the logs; None under `MIN_RUNS` a side)."""
    moved: bool
    """The CI excludes 1."""


def _need(name: str, th: Thresholds) -> int:
    return th.min_samples_p99 if name == "p99" else th.min_samples_p95


def welch_ratio(a: np.ndarray, b: np.ndarray) -> tuple[float, tuple[float, float]]:
    """exp(mean log B - mean log A) and Welch's 95% t interval of it (both sides >= 2 values,
    all positive)."""
    la, lb = np.log(a), np.log(b)
    diff = float(lb.mean() - la.mean())
    va, vb = float(la.var(ddof=1)) / len(la), float(lb.var(ddof=1)) / len(lb)
    se = math.sqrt(va + vb)
    if se == 0.0:  # identical runs on both sides: no spread to widen the interval
        return math.exp(diff), (math.exp(diff), math.exp(diff))
    df = welch_df(va, len(la), vb, len(lb))
    half = t_quantile(0.975, df) * se
    return math.exp(diff), (math.exp(diff - half), math.exp(diff + half))


def compare_runs(a: tuple[Run, ...], b: tuple[Run, ...], th: Thresholds) -> tuple[RunLevel, ...]:
    """Each quantile across runs: the ratio and its CI where both sides have `MIN_RUNS` runs
    with the requests it needs; else the run counts alone."""
    out = []
    for i, (name, _) in enumerate(QUANTILES):
        need = _need(name, th)
        xa = np.array([r.quantiles[i] for r in a if r.n >= need and r.quantiles[i] > 0])
        xb = np.array([r.quantiles[i] for r in b if r.n >= need and r.quantiles[i] > 0])
        if min(len(xa), len(xb)) < MIN_RUNS:
            out.append(RunLevel(name, len(xa), len(xb), None, None, False))
            continue
        ratio, ci = welch_ratio(xa, xb)
        out.append(RunLevel(name, len(xa), len(xb), ratio, ci, not ci[0] <= 1.0 <= ci[1]))
    return tuple(out)


_OP_RUNS = f"""
    SELECT op, shape, types, run, favg(dur) AS mean_us
    FROM ({OP_CALLS}) JOIN (SELECT unnest($ids) AS source_id, unnest($runs) AS run)
        USING (source_id)
    GROUP BY ALL
    ORDER BY op, shape, types, run
"""


def op_runs(con: Connection, workload: str, slice_: str) -> dict[OpKey, dict[str, float]]:
    """Per op x shape: each run's mean device time per call (a run: the trace files that
    overlap in time, `group_runs`; keyed by its first file)."""
    at = {"w": workload, "s": slice_}
    spans = con.execute(_OP_SPANS, at).fetchall()
    runs = group_runs([(str(f), float(a), float(b)) for f, a, b in spans if None not in (a, b)])
    first: dict[int, str] = {}
    for source, run in sorted(runs.items()):
        first.setdefault(run, source)
    bound = at | {"ids": list(runs), "runs": list(runs.values())}
    out: dict[OpKey, dict[str, float]] = {}
    for op, shape, types, run, mean in con.execute(_OP_RUNS, bound).fetchall():
        out.setdefault((str(op), str(shape), str(types)), {})[first[run]] = float(mean)
    return out


def trace_files(runs: dict[OpKey, dict[str, float]]) -> int:
    """The runs of trace files a side's op x shapes come from."""
    return len({f for per in runs.values() for f in per})


class OpRunLevel(msgspec.Struct, frozen=True):
    """One op x shape across trace files: B's files against A's."""

    op: str
    shape: str
    types: str
    runs_a: int
    runs_b: int
    ratio: float
    """Geometric mean of B's per-file means over A's."""
    ci: tuple[float, float]
    """Welch's 95% t interval of `ratio`."""
    moved: bool


def compare_op_runs(
    a: dict[OpKey, dict[str, float]], b: dict[OpKey, dict[str, float]]
) -> tuple[OpRunLevel, ...]:
    """Every op x shape that `MIN_RUNS` trace files on each side ran, across files."""
    out = []
    for k in sorted(set(a) & set(b)):
        xa = np.array([v for v in a[k].values() if v > 0])
        xb = np.array([v for v in b[k].values() if v > 0])
        if min(len(xa), len(xb)) < MIN_RUNS:
            continue
        ratio, ci = welch_ratio(xa, xb)
        out.append(OpRunLevel(*k, len(xa), len(xb), ratio, ci, not ci[0] <= 1.0 <= ci[1]))
    return tuple(out)


class RunsCompared(msgspec.Struct, frozen=True):
    """How many runs each side holds, and each quantile (and op x shape) across them."""

    runs_a: int
    runs_b: int
    quantiles: tuple[RunLevel, ...]
    traces_a: int = 0
    traces_b: int = 0
    """Trace files a side's op x shapes come from (a trace file is a run of its ops)."""
    ops: tuple[OpRunLevel, ...] = ()

    @property
    def claimed(self) -> bool:
        """At least one quantile has a run-level interval."""
        return any(q.ci is not None for q in self.quantiles) or bool(self.ops)
