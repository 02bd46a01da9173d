"""Real torch.compile serving runs of benchmarks/torch_serving.py (committed under
tests/golden/torch-workers and tests/golden/torch-limit): what mapreport reads from the profiler
traces and TORCH_TRACE alone, and from the native export, against figures computed here
independently from the server's own per-request log (pandas, not mapreport).

The server knows on its own which compiled graph ran each request: its torch.compile backend
wraps every graph it compiles, so `eager` (no compiled graph ran), `compiled` (the request
compiled a graph) and `warm_graph` (the graph was compiled in warm-up) are not read from any
file mapreport reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mapreport.core.records import replace
from mapreport.dataset.store import Dataset
from mapreport.run.config import load_config
from mapreport.run.ingesting import ingest
from mapreport.run.reporting import report

pytestmark = pytest.mark.slow  # each reads real traces end to end (0.4-1.6 s)

GOLDEN = Path(__file__).parent / "golden"
RUNS = [
    "torch-workers",
    "torch-limit",
    "torch-dynamic",
    "torch-eager",
    "torch-shared-cache",
    "torch-dims-load",
]


def _credit(g: pd.DataFrame) -> list[str | None]:
    """Per request of one worker: the adapting request it waited behind last, the latest of
    its busy period whose compute overlapped its wait (arrival to start), else the latest
    before it (None: not blocked)."""
    credit: list[str | None] = []
    for _, q in g.iterrows():
        earlier = g[
            (g["period"] == q["period"])
            & g["adapting"]
            & (g["compute_start_us"] < q["compute_start_us"])
        ]
        if not q["blocked"] or earlier.empty:
            credit.append(None)
            continue
        overlapped = earlier[earlier["compute_end_us"] > q["arrival_us"]]
        held = overlapped if not overlapped.empty else earlier
        credit.append(held.sort_values("compute_start_us")["request_id"].iloc[-1])
    return credit


def server_log(case: str) -> pd.DataFrame:
    """The server's log with each request's variant and, per worker, whether it was blocked:
    busy periods from arrivals, blocked when an earlier request of its period compiled (from
    the FX graph cache or not) or ran eagerly, and the adapting request it is credited to
    (docs/metrics.md)."""
    r = pd.read_csv(GOLDEN / case / "input" / "requests.csv.gz")
    r["variant"] = "adapted"
    r.loc[r["warm_graph"], "variant"] = "static"
    r.loc[r["eager"], "variant"] = "fallback"
    r["adapting"] = r["compiled"] | r["eager"]
    parts = []
    for _, g in r.groupby("worker"):
        g = g.sort_values("compute_start_us").copy()
        before = g["compute_end_us"].cummax().shift(1)
        g["period"] = (before.isna() | (g["arrival_us"] >= before)).cumsum()
        g["blocked"] = (
            g["adapting"]
            .astype(int)
            .groupby(g["period"])
            .transform(lambda s: s.cumsum().shift(1, fill_value=0) > 0)
        )
        g["credit"] = _credit(g)
        parts.append(g)
    return pd.concat(parts)


def _report(case: str, tmp_path: Path) -> tuple[dict[str, Any], Dataset]:
    config = load_config(GOLDEN / case / "input" / "mapreport.toml")
    config = replace(config, dataset=tmp_path / "ds", out=tmp_path / "out")
    ingest(config.dataset, config.source_files(), config.on_error, hints=config.hints)
    (outcome,) = report(config.dataset, config.out, config, pdf=False, record=False)
    assert outcome.error is None
    doc = json.loads((config.out / "torch-serving" / "findings.json").read_text())
    return doc, Dataset(config.dataset)


@pytest.mark.parametrize("case", RUNS)
def test_each_request_ran_what_the_server_saw(case: str, tmp_path: Path) -> None:
    """From the profiler traces alone: every request's worker (its process), and whether it
    ran a warm-up graph, a graph compiled while serving, or eagerly, exactly as the server's
    own log says."""
    log = server_log(case)
    _, ds = _report(case, tmp_path)
    got = pd.DataFrame(
        ds.connect()
        .execute("SELECT request_id, core, plan_variant FROM request ORDER BY request_id")
        .fetchall(),
        columns=["request_id", "core", "variant"],
    )
    # the annotation styles differ (`request r0007 ...`, `request#7 ...`): the number matches
    got["n"] = got["request_id"].str.lstrip("r").astype(int)
    want = log.assign(n=log["request_id"].str.lstrip("r").astype(int)).sort_values("n")
    merged = want.merge(got, on="n", suffixes=("", "_got"))
    assert len(merged) == len(log)
    assert (merged["core"] == merged["pid"]).all()
    assert (merged["variant_got"] == merged["variant"]).all()
    # the server's native export states the same variant for every request
    native = pd.read_json(GOLDEN / case / "input" / "serving.runtime.jsonl.gz", lines=True)
    native = native[native["event"].isna()] if "event" in native else native
    both = merged.merge(native, on="request_id", suffixes=("", "_native"))
    assert len(both) == len(log)
    assert (both["plan_variant"] == both["variant_got"]).all()
    assert (both["core_native"] == both["worker"]).all()


@pytest.mark.parametrize("case", RUNS)
def test_each_blocked_request_is_credited_to_the_last_adaptation_it_waited_on(
    case: str, tmp_path: Path
) -> None:
    """From the profiler traces and TORCH_TRACE alone (no arrival recorded): per worker, the
    blocked requests and, for each adapting request (a compile, one served from the FX graph
    cache, a refused compile, an eager run), how many were credited to it, against the
    server's own log. Exact on every run but torch-eager, where two requests that started
    within a millisecond of the previous one's end read as queued (76 eager requests, 8
    blocked in the server's log)."""
    log = server_log(case)
    doc, _ = _report(case, tmp_path)
    events = doc["blocking"]["events"]
    pid_of = dict(zip(log["worker"], log["pid"], strict=False))
    want_worker = {pid_of[w]: n for w, n in log[log["blocked"]].groupby("worker").size().items()}
    got_worker: dict[int, int] = {}
    for e in events:
        got_worker[e["worker"]] = got_worker.get(e["worker"], 0) + e["blocked"]
    got_worker = {w: n for w, n in got_worker.items() if n}
    slack = 2 if case == "torch-eager" else 0
    assert want_worker.keys() == got_worker.keys()
    for w, n in want_worker.items():
        assert abs(got_worker[w] - n) <= slack, (w, got_worker[w], n)
    # each adapting request by its worker and compute start (the trace's span starts within
    # a millisecond of the server's clock)
    by_id = log.set_index("request_id")
    want = {}
    for rid, n in log["credit"].value_counts().items():
        a = by_id.loc[rid]
        want[(int(a["pid"]), float(a["compute_start_us"]))] = int(n)
    credited = 0
    for (worker, start), n in want.items():
        (event,) = [
            e for e in events if e["worker"] == worker and abs(e["start_us"] - start) < 1000
        ]
        assert abs(event["blocked"] - n) <= slack, (worker, event["shape"], event["blocked"], n)
        credited += min(n, event["blocked"])
    assert credited >= int(log["blocked"].sum()) - slack
    if "cache_hit" in log and log["cache_hit"].any():
        for _, h in log[log["cache_hit"]].iterrows():
            (event,) = [
                e
                for e in events
                if e["worker"] == h["pid"] and abs(e["start_us"] - h["compute_start_us"]) < 1000
            ]
            assert event["how"] == "compile_cache_hit"


@pytest.mark.parametrize("source", ["", "-native"], ids=["traces", "native"])
def test_two_workers_at_the_recompile_limit(source: str, tmp_path: Path) -> None:
    """Two worker processes on a loaded machine, both past the recompile limit: coverage is the
    traffic that ran warm-up graphs, blocking is counted per worker and credited to compiles
    of the right worker, and the remedy is the limit (from the traces, which log the refused
    compile), never warm-up."""
    log = server_log("torch-workers")
    doc, _ = _report("torch-workers" + source, tmp_path)
    b = doc["blocking"]
    assert doc["coverage"]["covered_traffic_share"] == pytest.approx(log["warm_graph"].mean())
    eager = log[log["eager"]].groupby(["batch", "seq"]).size()
    assert sum(eager) == 12
    blocked = int(log["blocked"].sum())  # 58: 27 on worker 0, 31 on worker 1
    assert abs(b["blocked"] - blocked) <= 0.1 * blocked
    compiled = log[log["compiled"]]
    named = {(e["shape"], e["duration_us"]) for e in b["events"] if e["how"] == "recompile"}
    for _, c in compiled.iterrows():
        stall = c["compute_end_us"] - c["compute_start_us"]
        shape = f"batch={c['batch']},seq={c['seq']}"
        assert any(s == shape and d == pytest.approx(stall, rel=0.01) for s, d in named), shape
    # per worker, within 10% of the server's count (27 and 31); one worker's compile never
    # blocks the other's requests
    per_worker: dict[int, int] = {}
    for e in b["events"]:
        per_worker[e["worker"]] = per_worker.get(e["worker"], 0) + e["blocked"]
    pid_of = dict(zip(log["worker"], log["pid"], strict=False)) if not source else {}
    want = log[log["blocked"]].groupby("worker").size()
    assert len(per_worker) == len(want) == 2
    for w, n in want.items():
        got = per_worker[pid_of.get(w, w)]
        assert abs(got - n) <= 0.1 * n, (w, got, n)
    assert doc["tail_class"] == "blocked_behind_adaptation"
    if not source:
        assert b["limit_hits"] == 2  # one refused compile per worker
        assert b["remedy"] == "raise_recompile_limit"
        # the serving-time compiles' reasons: the batch dim changed (1 -> 4, 8) five times
        batch = {"tensor": "args[0]", "dim": 0, "low": 1, "high": 8, "recompiles": 5}
        assert b["varying"][0] == batch
        (action,) = [a for a in doc["actions"] if a["class"] == "adaptation_blocking"]
        assert "bucket dim 0 of args[0] (sizes 1 to 8 seen)" in action["title"]
        assert "pre-compiling in warm-up cannot help" in action["title"]


def test_eager_fallback_per_shape_from_the_traces(tmp_path: Path) -> None:
    """One worker past its recompile limit (6): the eager requests per shape exact, the two
    serving-time compiles named, the shapes read from `request#<n> shape=(<b>, <s>)`."""
    log = server_log("torch-limit")
    doc, ds = _report("torch-limit", tmp_path)
    eager = {
        f"{b}x{s}": n for (b, s), n in log[log["eager"]].groupby(["batch", "seq"]).size().items()
    }
    got = dict(
        ds.connect()
        .execute(
            "SELECT shape, count(*) FROM request WHERE plan_variant = 'fallback' GROUP BY shape"
        )
        .fetchall()
    )
    assert got == eager
    assert sum(eager.values()) == 10
    assert doc["coverage"]["covered_traffic_share"] == pytest.approx(log["warm_graph"].mean())
    b = doc["blocking"]
    assert b["limit_hits"] == 1
    assert b["remedy"] == "raise_recompile_limit"
    recompiled = {e["shape"] for e in b["events"] if e["how"] == "recompile"}
    assert recompiled == {f"{c['batch']}x{c['seq']}" for _, c in log[log["compiled"]].iterrows()}
    # each eager shape says why: its worker's compiler had refused a compile at the limit
    # before (the server log's eager requests all follow its last compile)
    last_compile = log.loc[log["compiled"], "compute_start_us"].max()
    assert (log.loc[log["eager"], "compute_start_us"] > last_compile).all()
    causes = {s["shape"]: s["fallback_cause"] for s in doc["shapes"] if s["n_fallback"]}
    assert causes == dict.fromkeys(eager, "recompile_limit")
    assert all(
        "its worker's compiler had reached its recompile limit" in s["decision_reason"]
        for s in doc["shapes"]
        if s["n_fallback"]
    )


def test_a_dynamic_graph_compiled_while_serving(tmp_path: Path) -> None:
    """`dynamic=True`: the graph the first batch-8 request compiled keeps batch and seq
    symbolic and serves every batch 4 and 8 request after it, adapted, as the server saw."""
    log = server_log("torch-dynamic")
    doc, ds = _report("torch-dynamic", tmp_path)
    con = ds.connect()
    rows = con.execute(
        "SELECT compile_id, shape, extra->'dynamic' FROM compile_event ORDER BY compile_id"
    ).fetchall()
    assert [r[:2] for r in rows] == [("0/0", "1x32x256"), ("0/1", "8x128x256")]
    dims = json.loads(rows[1][2])
    assert [(d["dim"], d["range"]) for d in dims] == [(0, "[2, int_oo]"), (1, "[2, int_oo]")]
    adapted = log[log["variant"] == "adapted"]
    assert set(adapted["batch"]) == {4, 8}
    assert doc["coverage"]["covered_traffic_share"] == pytest.approx(log["warm_graph"].mean())
    (event,) = doc["blocking"]["events"]
    assert (event["how"], event["shape"]) == ("recompile", "8x128")


def test_eager_shapes_against_compiled_shapes_of_their_size(tmp_path: Path) -> None:
    """Warm-up reached the recompile limit: the 76 requests of the 8 shapes it missed ran
    eagerly. Where compiled shapes of comparable size bracket an eager one, the gain of
    compiling it is measured per element against them, and says so; elsewhere it is not
    measured. The figure itself is what this CPU run shows (eager and compiled within a few
    percent), recomputed here from the server's log."""
    log = server_log("torch-eager")
    doc, _ = _report("torch-eager", tmp_path)
    assert int(log["eager"].sum()) == 76
    by_shape = {s["shape"]: s for s in doc["shapes"]}
    log["compute_us"] = log["compute_end_us"] - log["compute_start_us"]
    log["elements"] = log["batch"] * log["seq"]
    for shape in ("batch=4,seq=32", "batch=4,seq=64"):
        s = by_shape[shape]
        assert s["gain_basis"] == "comparable_shapes"
        b, q = (int(x.split("=")[1]) for x in shape.split(","))
        e = b * q
        near = log[~log["eager"] & log["elements"].between(e / 2, e * 2)]
        assert sorted(s["gain_compared_shapes"]) == sorted(
            f"batch={bb},seq={qq}" for bb, qq in set(zip(near["batch"], near["seq"], strict=True))
        )
        compiled = (near["compute_us"] * e / near["elements"]).median()
        eager = log[log["eager"] & (log["batch"] == b) & (log["seq"] == q)]["compute_us"].median()
        # the server times the call around the profiler's span: a few µs apart per request
        assert s["gain_p50"] == pytest.approx(1 - compiled / eager, abs=0.005)
        assert "it ran the fallback path (eager, under torch.compile) only" in s["decision_reason"]
    # 8x128 = 1,024 elements: no compiled shape (at most 256) within 2x
    assert by_shape["batch=8,seq=128"]["gain"] == "not_measured"


def _kernel_medians(case: str) -> dict[tuple[str, str], float]:
    """(compile id, span name) -> median duration, of the profiler spans that ran inside each
    `Torch-Compiled Region` on the same thread, read from the trace JSON here."""
    import gzip
    import statistics

    trace = json.loads(
        gzip.decompress((GOLDEN / case / "input" / "profiler.w0.json.gz").read_bytes())
    )
    spans = [e for e in trace["traceEvents"] if e.get("ph") == "X" and "dur" in e]
    regions = [e for e in spans if e["name"].startswith("Torch-Compiled Region: ")]
    times: dict[tuple[str, str], list[float]] = {}
    for e in spans:
        if e["name"].startswith(("graph_", "aten::addmm")):
            (region,) = [
                r
                for r in regions
                if (r["pid"], r["tid"]) == (e["pid"], e["tid"])
                and r["ts"] <= e["ts"] <= r["ts"] + r["dur"]
            ] or [None]
            if region is not None:
                key = (region["name"].split(": ")[1], e["name"])
                times.setdefault(key, []).append(e["dur"])
    return {k: statistics.median(v) for k, v in times.items()}


def test_inductor_ops_join_the_kernels_they_launched(tmp_path: Path) -> None:
    """Inductor's scheduled ops (`op1`, `op3_op4_op5_op6`, `extern_kernels.addmm` twice) are
    named by the kernels its wrapper code launched, so each joins the profiler's spans of that
    kernel inside that graph's regions: every planned op is measured, at the median computed
    here from the trace. CPU estimates are 0 ns (no estimate): the report says so."""
    doc, ds = _report("torch-kernels", tmp_path)
    ops = doc["operators"]
    assert ops["planned_ops"] == ops["matched_ops"] == 4 * len(ops["plans"])
    want = _kernel_medians("torch-kernels")
    rows = ds.connect().execute("SELECT plan_id, op, kernel FROM compile_plan").fetchall()
    kernels = {(p, o): k for p, o, k in rows}
    assert {o for _, o in kernels} == {
        "extern_kernels.addmm#1",
        "extern_kernels.addmm#2",
        "op1",
        "op3_op4_op5_op6",
    }
    for row in ops["rows"]:
        kernel = kernels[(row["plan_id"], row["op"])]
        assert row["measured_p50_us"] == pytest.approx(want[(row["plan_id"], kernel)])
    assert doc["accuracy"]["gap"] == "no_prediction"
    assert doc["accuracy"]["prediction_gap"] == "compiler_logged_none"
    assert "Inductor logged no runtime estimate" in doc["summary"]


def test_inductor_estimates_join_the_requests_that_ran_their_graph(tmp_path: Path) -> None:
    """Where Inductor logs estimates (GPU runs; this CPU run logs 0 ns, so the test writes
    2 ms per op into a copy of its real log), a graph's prediction is the sum of its ops and is
    held against the measured compute of the static requests that ran it: APE per shape as
    for native plans, against medians computed here from the server's log."""
    import gzip
    import shutil

    case = tmp_path / "case"
    shutil.copytree(GOLDEN / "torch-kernels" / "input", case)
    for log in (case / "torch_trace").glob("*.gz"):
        text = gzip.decompress(log.read_bytes()).decode()
        log.write_bytes(
            gzip.compress(
                text.replace(
                    '"estimated_runtime_ns": 0,', '"estimated_runtime_ns": 2000000,'
                ).encode()
            )
        )
    config = load_config(case / "mapreport.toml")
    config = replace(config, dataset=tmp_path / "ds", out=tmp_path / "out")
    ingest(config.dataset, config.source_files(), config.on_error, hints=config.hints)
    (outcome,) = report(config.dataset, config.out, config, pdf=False, record=False)
    assert outcome.error is None
    doc = json.loads((config.out / "torch-serving" / "findings.json").read_text())
    log = pd.read_csv(case / "requests.csv.gz")
    log["compute_us"] = log["compute_end_us"] - log["compute_start_us"]
    static = log[log["warm_graph"] & ~log["compiled"] & ~log["eager"]]
    measured = 0
    for s in doc["shapes"]:
        b, q = (int(x.split("=")[1]) for x in s["shape"].split(","))
        mine = static[(static["batch"] == b) & (static["seq"] == q)]
        if len(mine) < doc["thresholds"]["min_samples"]:
            assert s["ape"] is None
            continue
        measured += 1
        assert s["predicted_us"] == pytest.approx(4 * 2000.0)  # two matmuls, two fused kernels
        want = mine["compute_us"].median()
        # the server times the call around the profiler's span: 5-20 µs apart
        got = s["measured_static_p50_us"]
        assert got == pytest.approx(want, abs=25)
        assert s["ape"] == pytest.approx(abs(8000.0 - got) / got)
    assert doc["accuracy"]["shapes_measured"] == measured > 0
    assert doc["accuracy"]["gap"] is None
    for row in doc["operators"]["rows"]:
        assert row["predicted_us"] == 2000.0
        err = (2000.0 - row["measured_p50_us"]) / row["measured_p50_us"]
        enough = row["runs"] >= doc["thresholds"]["min_samples"]
        assert row["signed_error"] == (pytest.approx(err) if enough else None)
