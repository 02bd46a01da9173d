"""Decompression bombs: each reader on a small gzip file that inflates to gigabytes, in a
process capped at 3 GiB of address space, ends in a clean one-line error (exit 3) naming the
limit, never a MemoryError, a kill or a swapped-out machine (issue 13, item 10)."""

from __future__ import annotations

import gzip
import resource
import subprocess
import sys
from pathlib import Path

import pytest

CAP = 3 << 30
"""The address-space cap of the reading process."""
MIB = 1 << 20
ROW = '{"workload":"w","request_id":"r0","shape":{"b":1},"arrival_us":1,"compute_start_us":2,'
KINETO_EVENT = b'{"ph":"X","name":"aten::mm","cat":"cpu_op","ts":1,"dur":1,"pid":1,"tid":1},'
TORCH = b'V1206 15:18:16.845000 1 torch/_dynamo/utils.py:1] {"compilation_metrics": {"x": "'
TVM = b'{"i": [["[\\"k\\"]", "llvm"], [[], []]], "r": [[0.1], 0, 1.0, 1], "v": 0.2, "x": "'

# name: (head, repeated block, MiB inflated, tail, --format, the error's words)
BOMBS: dict[str, tuple[bytes, bytes, int, bytes, str, str]] = {
    "events.json.gz": (
        b'{"traceEvents":[',
        KINETO_EVENT,
        1000,  # 14M events
        b'{"ph":"i","name":"e","ts":1}]}',
        "kineto",
        "more than 10,000,000 events",
    ),
    "unstreamable.json.gz": (
        b'{"schemaVersion":1,"deviceProperties":[],"x":[',
        b"1,",
        2000,
        b'1],"traceEvents":[]}',
        "kineto",
        "at most 134217728 bytes",
    ),
    "torch.log.gz": (TORCH, b"a" * 4096, 2000, b'"}}\n', "torch-trace", "longer than"),
    "tvm.json.gz": (TVM, b"a" * 4096, 2000, b'"}\n', "tvm", "longer than"),
    "x.profile.json.gz": (
        b'[{"count": 10}',
        b',{"name":"layer","timeMs":1,"averageMs":1,"medianMs":1,"percentage":1}',
        2000,
        b"]",
        "trtexec",
        "larger than 134217728",
    ),
    "trace.json.gz": (
        b'[{"id":1,"model_name":"m","model_version":1}',
        b',{"id":1,"timestamps":[{"name":"COMPUTE_START","ns":1}]}',
        2000,
        b"]",
        "triton-trace",
        "larger than 134217728",
    ),
    "0.ckpt.gz": (
        b'{"ResultManager.results": "',
        b"a" * 4096,
        2000,
        b'"}',
        "model-analyzer",
        "larger than",
    ),
    "runtime.jsonl.gz": (
        (ROW + '"compute_end_us":3}\n{"x":"').encode(),
        b"a" * 4096,
        2000,
        b'"}\n',
        "native-runtime",
        "longer than",
    ),
    "runtime.csv.gz": (
        b'workload,request_id,shape,arrival_us,compute_start_us,compute_end_us\nw,r0,b=1,1,2,3\nw,r1,"',
        b"a" * 4096,
        2000,
        b'",1,2,3\n',
        "native-runtime",
        "longer than",
    ),
}


def bomb(path: Path, head: bytes, block: bytes, mib: int, tail: bytes) -> Path:
    """A gzip file of concatenated members (each one MiB of `block`), a few MB on disk."""
    member = gzip.compress(block * (MIB // len(block)), 1)
    with open(path, "wb") as fh:
        fh.write(gzip.compress(head, 1))
        for _ in range(mib):
            fh.write(member)
        fh.write(gzip.compress(tail, 1))
    return path


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_decompression_bomb_is_a_clean_error_under_a_memory_cap(
    tmp_path: Path, name: str
) -> None:
    head, block, mib, tail, fmt, words = BOMBS[name]
    f = bomb(tmp_path / name, head, block, mib, tail)
    assert f.stat().st_size < 30 * MIB
    cmd = [sys.executable, "-m", "mapreport.app.cli", "ingest", "-q", "--on-error", "abort"]
    res = subprocess.run(
        [*cmd, "--dataset", str(tmp_path / "ds"), "--format", fmt, str(f)],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_cap,
    )
    assert res.returncode == 3, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"mapreport: {f}")
    assert words in line
