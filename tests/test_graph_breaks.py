"""Graph breaks from a real TORCH_TRACE log (PyTorch 2.13, tests/corpus/torch/graph_break_2_13.py):
where dynamo broke the graph, on which line of user code, and why, to the compile section."""

from __future__ import annotations

import json
from pathlib import Path

from mapreport.analysis.serving.compiles import graph_breaks
from mapreport.dataset.store import Dataset
from mapreport.ingest import ingest_file
from mapreport.ingest.torch_trace import graph_break

LOG = Path(__file__).parent / "corpus" / "torch" / "graph_break_2_13.log.gz"


def test_each_break_names_the_line_and_the_op(tmp_path: Path) -> None:
    """The script breaks its graph twice per size: at `print` (line 10) and at `nonzero`
    (line 11, data-dependent output shape); each compile that broke says so."""
    ds = Dataset(tmp_path / "ds", create=True)
    ingest_file(ds, LOG, hints={"workload": "gb"}, policy="abort")
    con = ds.connect()
    extras = [
        json.loads(e)["graph_breaks"]
        for (e,) in con.execute(
            "SELECT extra FROM compile_event WHERE extra LIKE '%graph_breaks%'"
        ).fetchall()
    ]
    assert len(extras) == 4  # two frames (before and after the first break), two sizes
    found = graph_breaks(con, "gb", "")
    assert [(g.at.rsplit("/", 1)[1], g.code, g.kind, g.compiles) for g in found] == [
        ("graph_break_2_13.py:10", 'print("hello")', "Failed to trace builtin operator", 2),
        ("graph_break_2_13.py:11", "z = y.nonzero()", "Dynamic shape operator", 2),
    ]
    assert "aten.nonzero.default" in (found[1].explanation or "")


def test_an_older_or_damaged_reason_reads_what_it_can() -> None:
    """An older log's one-line reason, and bytes that are no reason at all."""
    old = b"Graph break in user code at m.py:3\nReason: Unsupported: call_function print\n"
    assert graph_break(old) == {
        "at": "m.py:3",
        "kind": "Unsupported: call_function print",
        "explanation": None,
        "code": None,
    }
    assert graph_break(b"\xff\x00" * 100) == dict.fromkeys(("at", "kind", "explanation", "code"))
