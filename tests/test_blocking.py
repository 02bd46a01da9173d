"""Head-of-line blocking behind adaptation (analysis/blocking.py): busy periods per worker,
blocked requests attributed to the adapting request before them."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from mapreport.analysis import SliceResult, list_slices
from mapreport.analysis.base import query
from mapreport.analysis.serving.blocking import (
    PRECOMPILE_MAX,
    Blocking,
    BlockingEvent,
    blocking,
    load_blocking,
)
from mapreport.analysis.serving.compiles import VaryingDim, fallback_causes
from mapreport.core.kinds import BlockingRemedy, FallbackCause
from mapreport.core.records import replace
from mapreport.dataset.store import Dataset
from mapreport.demo import blocking as synth_blocking
from mapreport.run.ingesting import ingest
from tests.test_torch_serving import CASE


def blocking_of(ds: Path, workload: str, slice_: str = "") -> Blocking:
    con = Dataset(ds).connect(workload)
    query.load_slice(con, workload, slice_)
    load_blocking(con, workload, slice_)
    return blocking(con)


def test_the_real_case_recovers_the_independent_figures(tmp_path: Path) -> None:
    """tests/test_torch_serving.py computes, with pandas over the server's own log, 68
    blocked requests behind 4 compiles (in busy periods of 14, 36 and 18)."""
    ingest(tmp_path / "ds", [CASE / "serving.runtime.jsonl.gz"])
    b = blocking_of(tmp_path / "ds", "torch-serving")
    assert b.blocked == 68
    assert [(e.shape, e.how, e.blocked) for e in b.events] == [
        ("batch=8,seq=32", "recompile", 14),
        ("batch=8,seq=128", "recompile", 1),  # the next request compiled too
        ("batch=8,seq=64", "recompile", 35),
        ("batch=8,seq=256", "recompile", 18),
    ]
    assert all(1.9e6 < e.duration_us < 2.2e6 for e in b.events)
    assert b.wait_us == pytest.approx(103.6e6, rel=0.01)
    assert len(set().union(*(e.shapes for e in b.events))) == 10


def blocking_of_records(ds: Path, recs: list[dict[str, Any]]) -> Blocking:
    """The blocking of native records (workload `w`) ingested into a new dataset."""
    f = ds.with_suffix(".jsonl")
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    ingest(ds, [f])
    return blocking_of(ds, "w")


def request(i: int, arrival: float, start: float, end: float, **extra: Any) -> dict[str, Any]:
    return {
        "workload": "w",
        "request_id": f"r{i}",
        "shape": {"b": extra.pop("b", 1)},
        "arrival_us": arrival,
        "compute_start_us": start,
        "compute_end_us": end,
        **extra,
    }


def test_busy_periods_end_when_the_worker_idles(tmp_path: Path) -> None:
    """Worker 0: r0 recompiles (an event of its shape over its compute), r1 and r2 wait behind
    it, the worker idles, r3 starts a new period and is not blocked. Worker 1: r4 runs the
    fallback path and r5 waits behind it. An event of another shape blocks nothing."""
    recs = [
        request(0, 0, 0, 1000, core=0, b=8),
        request(1, 100, 1000, 1100, core=0),
        request(2, 200, 1100, 1200, core=0, b=2),
        request(3, 5000, 5000, 5100, core=0),
        request(4, 0, 0, 800, core=1, plan_variant="fallback"),
        request(5, 10, 800, 900, core=1),
        request(6, 9000, 9000, 9100, core=1),
        request(7, 9050, 9100, 9200, core=1),
        {"workload": "w", "event": "recompile", "ts_us": 10, "dur_us": 900, "shape": {"b": 8}},
        {"workload": "w", "event": "retune", "ts_us": 9000, "dur_us": 50, "shape": {"b": 3}},
    ]
    b = blocking_of_records(tmp_path / "ds", recs)
    assert [(e.shape, e.how, e.worker, e.blocked, e.shapes) for e in b.events] == [
        ("b=8", "recompile", 0, 2, ("b=1", "b=2")),
        ("b=1", "fallback", 1, 1, ("b=1",)),
    ]
    assert b.events[0].wait_us == (1000 - 100) + (1100 - 200)
    assert [(v.shape, v.blocked) for v in b.victims] == [("b=1", 2), ("b=2", 1)]
    assert [e.seen_before for e in b.events] == [False, False]  # r4 is b=1's first request
    assert b.triggers == ("b=8", "b=1")


def test_an_event_holds_only_its_own_worker(tmp_path: Path) -> None:
    """Issue 34: worker 1's recompile (its event names core 1) does not make worker 0's request
    of the same shape, computing at the same time, an adapting one; an event naming no core
    holds every worker."""
    recs = [
        request(0, 0, 0, 1000, core=0, b=8),
        request(1, 100, 1000, 1100, core=0),
        request(2, 0, 0, 1000, core=1, b=8),
        request(3, 100, 1000, 1100, core=1),
        {
            "workload": "w",
            "event": "recompile",
            "ts_us": 10,
            "dur_us": 900,
            "shape": {"b": 8},
            "core": 1,
        },
    ]
    b = blocking_of_records(tmp_path / "ds", recs)
    assert [(e.worker, e.blocked) for e in b.events] == [(1, 1)]
    del recs[-1]["core"]
    assert [(e.worker, e.blocked) for e in blocking_of_records(tmp_path / "ds2", recs).events] == [
        (0, 1),
        (1, 1),
    ]


def test_a_blocked_request_is_credited_to_the_last_adaptation_it_waited_on(
    tmp_path: Path,
) -> None:
    """Two compiles in one busy period: a request that arrived during the first and started
    after the second is credited to the last one its wait overlapped (the rule the server's
    own log gives on the real runs: tests/test_torch_compile_runs.py), not the longest; one
    that arrived after both ended (into their backlog) to the latest before it."""
    recs = [
        request(0, 0, 0, 2000, b=8),  # compiles for 2 ms
        request(1, 100, 2000, 2500, b=9),  # arrived during r0's compile; compiles 0.5 ms
        request(2, 200, 2500, 2600),  # waited 1.8 ms in r0's compile, 0.5 ms in r1's
        request(3, 2550, 2600, 2700),  # arrived after both: the backlog of the latest
        {"workload": "w", "event": "recompile", "ts_us": 0, "dur_us": 2000, "shape": {"b": 8}},
        {"workload": "w", "event": "recompile", "ts_us": 2000, "dur_us": 500, "shape": {"b": 9}},
    ]
    b = blocking_of_records(tmp_path / "ds", recs)
    # r1 waited on r0 alone; r2 on r0 (1.8 ms), then r1 (0.5 ms): r1; r3 in r1's backlog
    assert {e.shape: e.blocked for e in b.events} == {"b=8": 1, "b=9": 2}


def event(
    shape: str, how: str = "recompile", seen: bool = False, blocked: int = 3
) -> BlockingEvent:
    return BlockingEvent("f:1", shape, None, how, seen, -1, 0.0, 2e6, blocked, 1e6, 5e5, ("x",))


def test_the_material_events_are_found_once_and_by_their_share() -> None:
    """The events behind at least MINOR_SHARE of the blocked wait, by wait where every event
    measures one, else by requests blocked; found once per slice (the report reads them dozens
    of times), and the slice's blocking still compares and pickles as its fields."""
    big, small = event("a", blocked=200), event("b", blocked=1)
    unmeasured = replace(small, wait_us=None)
    by_wait = Blocking((big, replace(small, wait_us=1e3)))
    assert by_wait.material == (big,)
    assert by_wait.material is by_wait.material
    assert Blocking((big, unmeasured)).material == (big,)  # by requests: 1 of 201 is minor
    idle = replace(big, blocked=0, wait_us=0.0)
    assert Blocking((idle, replace(small, blocked=0, wait_us=0.0))).material == ()
    assert pickle.loads(pickle.dumps(by_wait)) == by_wait


def test_the_remedy_follows_what_the_adapting_requests_were() -> None:
    """New shapes, few: warm them up; too many: compile off the serving path; a shape served
    before adapting again: make the dimension dynamic; fallback runs only: cover the shapes."""
    few = Blocking(tuple(event(f"s{i}") for i in range(PRECOMPILE_MAX)))
    many = Blocking(tuple(event(f"s{i}") for i in range(PRECOMPILE_MAX + 1)))
    again = Blocking((event("a"), event("b", seen=True)))
    fallback = Blocking((event("a", "fallback"), event("b", "fallback_enter")))
    assert few.remedy() == BlockingRemedy.PRECOMPILE_IN_WARMUP
    assert many.remedy() == BlockingRemedy.COMPILE_ASYNC
    assert again.remedy() == BlockingRemedy.MARK_DYNAMIC
    assert fallback.remedy() == BlockingRemedy.COVER_IN_PLAN
    assert Blocking(()).remedy() is None
    # a fallback run among compiles does not make the compiles' remedy a plan change
    assert Blocking((event("a"), event("b", "fallback"))).remedy() == few.remedy()
    # every serving-time recompile changed one and the same dim: make that dim dynamic
    batch = VaryingDim("args[0]", 0, 1, 8, 3)
    assert Blocking(few.events, varying=(batch,)).remedy() == BlockingRemedy.MARK_DYNAMIC
    two = (batch, VaryingDim("args[0]", 1, 64, 128, 1))
    assert Blocking(few.events, varying=two).remedy() == BlockingRemedy.PRECOMPILE_IN_WARMUP
    # the compiler refused a compile at its limit: warm-up compiles count against it too
    limited = Blocking(few.events, limit_hits=1, varying=(batch,))
    assert limited.remedy() == BlockingRemedy.RAISE_RECOMPILE_LIMIT
    assert Blocking(fallback.events, limit_hits=1).remedy() == BlockingRemedy.RAISE_RECOMPILE_LIMIT


@pytest.mark.slow
def test_the_demo_blocks_only_where_it_is_planted(demo_dataset: Path) -> None:
    """The demo's arrivals are sparse against its compute: outside the planted blocking
    (synth_blocking: bert-base's batch=1,seq=1024 recompiles on three workers, batch=2,seq=64
    queues behind it) at most one request a slice waits behind an adapting one, for well under
    a millisecond, and no such event is material."""
    for w, s in list_slices(Dataset(demo_dataset).connect()):
        b = blocking_of(demo_dataset, w, s)
        planted = [e for e in b.events if e.shape == "batch=1,seq=1024"]
        others = [e for e in b.events if e not in planted]
        assert sum(e.blocked for e in others) <= 1, (w, s)
        assert sum(e.wait_us for e in others) < 1000, (w, s)
        if w == "bert-base":
            assert [e.source for e in b.material] == [e.source for e in planted]
            assert [(e.how, e.seen_before, e.shapes) for e in planted] == [
                ("recompile", False, ("batch=2,seq=64",))
            ] * synth_blocking.STALLS
            assert all(
                synth_blocking.STALL_US[0] <= e.duration_us <= synth_blocking.STALL_US[1]
                for e in planted
            )
            victims = {v.shape: v.blocked for v in b.victims}
            assert victims["batch=2,seq=64"] == sum(e.blocked for e in planted) >= 15


@pytest.mark.slow
def test_the_blocking_table_stays_bounded_at_fleet_size(
    demo_results: dict[str, SliceResult], tmp_path: Path
) -> None:
    """At fleet size a slice held 36,281 adapting requests and its PDF 2,618 pages: the table
    lists the named ones and the BLOCKING_ROWS minor ones that held the most wait, and says
    how many it leaves out; findings.json keeps every one."""

    from mapreport.report import write_slice_report
    from mapreport.report.export import SvgExporter
    from mapreport.report.sections import assemble
    from mapreport.report.sections.blocking import BLOCKING_ROWS

    r = demo_results["bert-base"]
    named = {e.source for e in r.blocking.material}
    assert named
    model = r.blocking.events[0]
    extra = tuple(
        replace(model, source=f"x:{i}", blocked=1, wait_us=float(i + 1), shapes=(model.shape,))
        for i in range(BLOCKING_ROWS + 30)
    )
    events = r.blocking.events + extra
    big = replace(r, blocking=replace(r.blocking, events=events))
    v = assemble(big).view("blocking").table
    listed = {line.e.source for line in v.lines}
    assert named <= listed
    assert len(listed) == len(named) + BLOCKING_ROWS
    assert v.rest is not None
    assert v.rest.count == len(big.blocking.events) - len(listed)
    # the minor ones listed are those behind which the most wait was held
    wait = {e.source: e.wait_us or 0.0 for e in events}
    shown = [wait[x] for x in listed - named]
    assert min(shown) >= max(w for x, w in wait.items() if x not in listed)
    written = write_slice_report(big, tmp_path / "out", SvgExporter(), pdf=False)
    html = written.html.read_text()
    assert f"Not listed: {v.rest.count} more adapting requests, each minor" in html
    doc = json.loads(written.findings.read_text())
    assert len(doc["blocking"]["events"]) == len(big.blocking.events)


def _glog(pid: int, env: dict[str, Any]) -> str:
    return f"V1203 02:06:13.495000 {pid} torch/_dynamo/utils.py:1] {json.dumps(env)}\n"


def test_why_each_shape_ran_eagerly(tmp_path: Path) -> None:
    """Per shape with fallback requests, from the compile log of the same worker (process):
    most of them after the recompile limit was hit; a compile that failed inside one of them;
    neither (another worker's limit does not count)."""
    t0 = 1.7e9
    recs = [
        request(0, t0 * 1e6, t0 * 1e6, t0 * 1e6 + 500, core=7, b=4, plan_variant="fallback"),
        request(
            1, t0 * 1e6 + 10, t0 * 1e6 + 2e6, t0 * 1e6 + 3e6, core=7, b=2, plan_variant="fallback"
        ),
        request(
            2, t0 * 1e6 + 20, t0 * 1e6 + 4e6, t0 * 1e6 + 5e6, core=8, b=3, plan_variant="fallback"
        ),
        request(3, t0 * 1e6 + 30, t0 * 1e6 + 6e6, t0 * 1e6 + 7e6, core=8, b=1),
    ]
    native = tmp_path / "run.jsonl"
    native.write_text("".join(json.dumps(r) + "\n" for r in recs))
    metrics = {"co_name": "forward", "entire_frame_compile_time_s": 0.001}
    log = tmp_path / "trace.log"
    log.write_text(
        _glog(
            7,
            {
                "compilation_metrics": {
                    **metrics,
                    "compile_id": "0/3",
                    "start_time": t0 + 1,
                    "fail_type": "Unsupported",
                    "fail_reason": "recompile_limit reached",
                }
            },
        )
        + _glog(
            7,
            {
                "compilation_metrics": {
                    **metrics,
                    "compile_id": "0/4",
                    "start_time": t0 + 0.0001,
                    "fail_type": "BackendCompilerFailed",
                    "fail_reason": "boom",
                }
            },
        )
        + _glog(
            9,
            {
                "compilation_metrics": {
                    **metrics,
                    "compile_id": "0/1",
                    "start_time": t0,
                    "fail_type": "Unsupported",
                    "fail_reason": "recompile_limit reached",
                }
            },
        )
    )
    ingest(tmp_path / "ds", [native, log], hints={"workload": "w"})
    con = Dataset(tmp_path / "ds").connect("w")
    query.load_slice(con, "w", "")
    assert fallback_causes(con, "w", "") == {
        "b=4": FallbackCause.COMPILE_FAILED,  # the failed compile ran inside it
        "b=2": FallbackCause.RECOMPILE_LIMIT,  # after worker 7's limit
        "b=3": FallbackCause.UNSTATED,  # worker 9's limit is not worker 8's
    }
