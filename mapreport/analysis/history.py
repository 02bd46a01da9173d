"""Closed loop across nights: the primary metric's trend, each action's state across runs, and
regressions against the previous run or a named baseline run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mapreport.analysis.results import (
    ActionState,
    History,
    Interval,
    Regression,
    RunPoint,
    ShapeMetrics,
    SliceResult,
)
from mapreport.analysis.stats import CI_LEVEL, seed_for

TERMINAL = ("verified", "rolled_back", "dropped")
IMPROVEMENT = 0.10
"""A target metric verified: it moved at least 10% the right way (lower is better)."""
QUANTILE_POINTS = 101
"""Latency quantiles kept per shape and run (0%, 1%, ..., 100%) for later comparisons."""
MAX_DRAW = 20_000
"""Largest sample redrawn from a stored quantile function (the CI only widens above)."""


def shape_metric(m: ShapeMetrics, metric: str) -> float | None:
    """The current value of a named per-shape metric (the names actions use)."""
    values: dict[str, float | None] = {
        "latency_p50_us": m.latency.p50,
        "latency_p95_us": m.latency.p95,
        "latency_p99_us": m.latency.p99,
        "queue_p95_us": m.queue.p95,
        "compute_p50_us": m.compute.p50,
        "ape": m.ape,
        "fallback_share": m.n_fallback / m.n if m.n else None,
        "error_rate": m.n_failed / m.n_total if m.n_total else None,
    }
    return values.get(metric)


def _redraw_p95(q: Sequence[float], n: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """p95 of `resamples` samples of size n drawn from a stored quantile function."""
    grid = np.linspace(0, 1, len(q))
    qs = np.asarray(q, dtype=np.float64)
    n = min(n, MAX_DRAW)
    out = np.empty(resamples)
    chunk = max(1, 2_000_000 // n)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        u = rng.random((stop - start, n))
        out[start:stop] = np.quantile(np.interp(u, grid, qs), 0.95, axis=1)
    return out


def quantile_of(quantiles: Sequence[float], q: float) -> float:
    """The q-quantile read off a stored, evenly spaced quantile function."""
    return float(np.interp(q, np.linspace(0, 1, len(quantiles)), quantiles))


def p95_change(
    before: Sequence[float],
    n_before: int,
    now: Sequence[float],
    n_now: int,
    resamples: int,
    seed: int,
) -> tuple[float, Interval]:
    """Relative p95 change (now / before - 1) and its 95% CI, resampling both runs from their
    stored latency quantile functions with their real sample counts."""
    rng = np.random.default_rng(seed)
    b = _redraw_p95(before, n_before, resamples, rng)
    a = _redraw_p95(now, n_now, resamples, rng)
    ratio = a / b - 1
    alpha = (1 - CI_LEVEL) / 2
    lo, hi = np.quantile(ratio, [alpha, 1 - alpha])
    point = quantile_of(now, 0.95) / quantile_of(before, 0.95) - 1
    return point, Interval(float(lo), float(hi))


def history_view(
    r: SliceResult,
    prev_runs: Sequence[dict[str, Any]],
    prev_shapes: Sequence[dict[str, Any]],
    prev_actions: Sequence[dict[str, Any]],
    run_id: str,
    run_date: str,
    baseline_run: str | None = None,
) -> History:
    """Trend, action states and regressions of this run against the stored earlier runs."""
    quantiles = r.latency_quantiles
    prev_runs = [p for p in prev_runs if p["run_date"] < run_date]
    earlier = {p["run_id"] for p in prev_runs}
    prev_shapes = [s for s in prev_shapes if s["run_id"] in earlier]
    prev_actions = [a for a in prev_actions if a["run_id"] in earlier]
    lat = r.latency
    runs = [
        RunPoint(
            p["run_id"],
            p["run_date"],
            p["requests"],
            p["latency_p50_us"],
            p["latency_p95_us"],
            p["latency_p99_us"],
            p["covered_traffic_share"],
            p["mape_weighted"],
            p["actions"],
            False,
        )
        for p in prev_runs
    ] + [
        RunPoint(
            run_id,
            run_date,
            r.requests,
            lat.p50,
            lat.p95,
            lat.p99,
            r.coverage.covered_traffic_share,
            r.accuracy.mape_weighted,
            len(r.actions),
            True,
        )
    ]
    shapes_now = {m.shape: m for m in r.shapes}
    last = prev_runs[-1]["run_id"] if prev_runs else None
    last_shapes = {s["shape"]: s for s in prev_shapes if s["run_id"] == last}
    actions = _action_states(r, shapes_now, last_shapes, prev_actions)
    against = baseline_run if baseline_run in earlier else last
    note = ""
    if baseline_run and baseline_run not in earlier:
        note = f"baseline run {baseline_run!r} is not in the history; compared with the last run"
    if not prev_runs:
        note = "first recorded run: no earlier night to compare with"
    regressions = []
    if against is not None:
        ref = {s["shape"]: s for s in prev_shapes if s["run_id"] == against}
        ref_date = next(p["run_date"] for p in prev_runs if p["run_id"] == against)
        th = r.thresholds
        for shape, m in shapes_now.items():
            old = ref.get(shape)
            q = quantiles.get(shape)
            if (
                old is None
                or not old["latency_quantiles_us"]
                or not q
                or old["n"] < th.min_samples_p95
                or m.n < th.min_samples_p95
            ):
                continue
            change, ci = p95_change(
                old["latency_quantiles_us"],
                old["n"],
                q,
                m.n,
                th.bootstrap_resamples,
                seed_for(th.seed, r.workload, r.slice, shape, "history"),
            )
            kind = "regression" if ci.low > 0 else "improvement" if ci.high < 0 else "no_change"
            regressions.append(
                Regression(
                    shape,
                    against,
                    ref_date,
                    quantile_of(old["latency_quantiles_us"], 0.95),
                    float(m.latency.p95 or 0.0),
                    change,
                    ci,
                    kind,
                )
            )
    return History(tuple(runs), tuple(actions), tuple(regressions), against, note)


def _action_states(
    r: SliceResult,
    shapes_now: dict[str, ShapeMetrics],
    last_shapes: dict[str, dict[str, Any]],
    prev_actions: Sequence[dict[str, Any]],
) -> list[ActionState]:
    by_id: dict[str, list[dict[str, Any]]] = {}
    for a in prev_actions:
        by_id.setdefault(a["action_id"], []).append(a)
    current = {a.id: a for a in r.actions}
    out = []
    for aid in sorted(set(by_id) | set(current)):
        rows = by_id.get(aid, [])
        if rows and rows[-1]["state"] in TERMINAL and aid not in current:
            continue  # reported on the night it ended
        now = current.get(aid)
        first = rows[0] if rows else None
        if now is not None:
            target = now.validation_matrix[0] if now.validation_matrix else None
            t_metric = target.metric if target else None
            t_base = first["target_baseline"] if first else (target.baseline if target else None)
            rb_metric = first["rollback_metric"] if first else now.rollback_trigger.metric
            rb_threshold = first["rollback_threshold"] if first else now.rollback_trigger.threshold
            cls, shape, title, role = now.cls, now.shape, now.title, now.owner_role
        else:
            assert first is not None
            t_metric, t_base = first["target_metric"], first["target_baseline"]
            rb_metric, rb_threshold = first["rollback_metric"], first["rollback_threshold"]
            cls, shape, title, role = (
                first["class"],
                first["shape"],
                first["title"],
                (first["owner_role"]),
            )
        m = shapes_now.get(shape)
        t_now = shape_metric(m, t_metric) if m is not None and t_metric else None
        rb_now = shape_metric(m, rb_metric) if m is not None and rb_metric else None
        rb_prev = last_shapes.get(shape, {}).get(rb_metric or "") if rb_metric else None
        fired = (
            first is not None
            and rb_threshold is not None
            and rb_now is not None
            and rb_prev is not None
            and rb_now > rb_threshold
            and rb_prev > rb_threshold
        )
        if fired:
            state = "rolled_back"
        elif now is not None:
            state = "open" if rows else "new"
        elif shape == "*" or (
            t_now is not None and t_base is not None and t_now <= t_base * (1 - IMPROVEMENT)
        ):
            state = "verified"
        else:
            state = "dropped"
        out.append(
            ActionState(
                action_id=aid,
                cls=cls,
                shape=shape,
                title=title,
                owner_role=role,
                state=state,
                first_run_id=first["first_run_id"] if first else "",
                first_run_date=first["run_date"] if first else "",
                runs_seen=len({x["run_id"] for x in rows}) + (1 if now is not None else 0),
                target_metric=t_metric,
                target_baseline=t_base,
                target_now=t_now,
                rollback_metric=rb_metric,
                rollback_threshold=rb_threshold,
                rollback_now=rb_now,
            )
        )
    order = {"rolled_back": 0, "new": 1, "open": 2, "verified": 3, "dropped": 4}
    return sorted(out, key=lambda a: (order[a.state], a.shape, a.cls))


def history_rows(
    r: SliceResult, h: History, run_id: str, run_date: str
) -> dict[str, list[dict[str, Any]]]:
    """The rows this run adds to the history tables."""
    quantiles = r.latency_quantiles
    key = {"run_id": run_id, "run_date": run_date, "workload": r.workload, "slice": r.slice}
    lat = r.latency
    first_seen = {a.action_id: a.first_run_id for a in h.actions}
    return {
        "history_run": [
            {
                **key,
                "requests": r.requests,
                "latency_p50_us": lat.p50,
                "latency_p95_us": lat.p95,
                "latency_p99_us": lat.p99,
                "covered_traffic_share": r.coverage.covered_traffic_share,
                "mape_weighted": r.accuracy.mape_weighted,
                "actions": len(r.actions),
            }
        ],
        "history_shape": [
            {
                **key,
                "shape": m.shape,
                "n": m.n,
                "latency_p50_us": m.latency.p50,
                "latency_p95_us": m.latency.p95,
                "latency_p99_us": m.latency.p99,
                "queue_p95_us": m.queue.p95,
                "compute_p50_us": m.compute.p50,
                "ape": m.ape,
                "net_gain_p50": m.net_gain_p50,
                "fallback_share": shape_metric(m, "fallback_share"),
                "error_rate": shape_metric(m, "error_rate"),
                "decision": m.decision,
                "bottleneck_class": m.bottleneck_class,
                "latency_quantiles_us": list(quantiles.get(m.shape, ())),
            }
            for m in r.shapes
        ],
        "history_action": [
            {
                **key,
                "action_id": a.action_id,
                "class": a.cls,
                "shape": a.shape,
                "title": a.title,
                "owner_role": a.owner_role,
                "state": a.state,
                "proposed": a.state in ("new", "open"),
                "first_run_id": first_seen.get(a.action_id) or run_id,
                "target_metric": a.target_metric,
                "target_baseline": a.target_baseline,
                "rollback_metric": a.rollback_metric,
                "rollback_threshold": a.rollback_threshold,
            }
            for a in h.actions
        ],
    }
