"""The top-level key scanner (`jsonkeys.TopKeys`) against a bare decode of the same bytes
(issue 49): a scan must cost at most a small multiple of decoding, whatever the document
holds. Shapes: real traces (HTA's `trace_diff/control`, TraceLens's B200 eager run) scanned
to their end, and 64 MiB hostile documents (a metadata string of escapes, what cost the
scanner 45 s before; escaped quotes; many small strings, keys and brackets; nesting 500
deep; a long number; a run of spaces).

Each figure is the median of fresh processes, each building its document in memory and
timing, interleaved, the scan (64 KiB chunks, as `file_keys` reads) and `json.loads` and
`msgspec.json.decode` of the same bytes; the ratio is the scan over json.loads, beside
LIMIT. `--scanner FILE` times another version of `jsonkeys.py` (an older commit's, from
`git show COMMIT:mapreport/ingest/jsonkeys.py`), `--shapes` a few of them:

    .venv/bin/python benchmarks/json_keys.py --runs 5
    .venv/bin/python benchmarks/json_keys.py --runs 1 --scanner /tmp/old_jsonkeys.py
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet import compile_package  # the benchmarks' shared setup

REPO = Path(__file__).resolve().parents[1]
REAL = REPO.parent / "shared" / "realdata"
LIMIT = 3.0
"""Scan time over json.loads time: a small multiple, whatever the content."""
SIZE = 64 << 20
"""Bytes of each hostile document: what `jsonkeys.SCAN_BYTES` lets a scan read."""
CHUNK = 64 << 10


def _repeat(unit: bytes, size: int) -> bytes:
    return unit * (size // len(unit))


def document(shape: str, size: int = SIZE) -> bytes:
    """The bytes of one benchmark document."""
    tail = b', "traceEvents": []}'
    if shape == "hta control":
        return gzip.decompress((REAL / "hta/trace_diff/control/control.json.gz").read_bytes())
    if shape == "tracelens b200":
        return gzip.decompress((REAL / "tracelens/b200/eager_trace.json.gz").read_bytes())
    if shape == "escaped backslashes":
        return b'{"deviceProperties": "' + _repeat(b"\\\\", size) + b'"' + tail
    if shape == "escaped quotes":
        return b'{"distributedInfo": "' + _repeat(b'\\"', size) + b'"' + tail
    if shape == "small strings":
        return b'{"metadata": [' + _repeat(b'"",', size) + b'""]' + tail
    if shape == "small keys":
        keys = b",".join(b'"k%d":0' % i for i in range(size // 12))
        return b'{"metadata": {' + keys + b"}" + tail
    if shape == "brackets":
        return b'{"metadata": [' + _repeat(b"[{}],", size) + b"[]]" + tail
    if shape == "nesting 500 deep":
        return b'{"metadata": [' + _repeat(b"[" * 500 + b"]" * 500 + b",", size) + b"[]]" + tail
    if shape == "long number":
        return b'{"metadata": 0.' + b"1" * size + tail
    if shape == "spaces":
        return b'{"metadata": [' + b" " * size + b"]" + tail
    raise SystemExit(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")


SHAPES = (
    "hta control",
    "tracelens b200",
    "escaped backslashes",
    "escaped quotes",
    "small strings",
    "small keys",
    "brackets",
    "nesting 500 deep",
    "long number",
    "spaces",
)


def child(shape: str, scanner: str | None) -> None:
    """One fresh process: print seconds of the scan, json.loads and msgspec, and the keys."""
    import msgspec

    if scanner:
        spec = importlib.util.spec_from_file_location("old_jsonkeys", scanner)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        top_keys = module.top_keys
    else:
        from mapreport.ingest.jsonkeys import top_keys
    data = document(shape)
    chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    t0 = time.perf_counter()
    keys = top_keys(chunks).keys
    t1 = time.perf_counter()
    json.loads(data)
    t2 = time.perf_counter()
    msgspec.json.decode(data)
    t3 = time.perf_counter()
    print(json.dumps([t1 - t0, t2 - t1, t3 - t2, len(data), keys[:4]]))


def main() -> None:
    """Run every shape `--runs` times in fresh processes; print medians and ratios."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--scanner", help="another jsonkeys.py to time (an older commit's)")
    p.add_argument("--shapes", nargs="*", default=list(SHAPES))
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, args.scanner)
        return
    compile_package()
    times: dict[str, list[list[float]]] = {s: [] for s in args.shapes}
    info: dict[str, tuple[int, list[str]]] = {}
    for _ in range(args.runs):  # interleaved, so the machine's drift hits every shape alike
        for shape in args.shapes:
            cmd = [sys.executable, __file__, "--child", shape]
            if args.scanner:
                cmd += ["--scanner", args.scanner]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO)
            scan, loads, decode, size, keys = json.loads(out.stdout)
            times[shape].append([scan, loads, decode])
            info[shape] = (size, keys)
    print(
        f"| document | MiB | scan | json.loads | msgspec | scan / json.loads (limit {LIMIT:g}x) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for shape in args.shapes:
        scan, loads, decode = (statistics.median(t[i] for t in times[shape]) for i in range(3))
        verdict = "" if scan / loads <= LIMIT else " **over**"
        print(
            f"| {shape} | {info[shape][0] / 2**20:.0f} | {scan:.3f} s | {loads:.3f} s | "
            f"{decode:.3f} s | {scan / loads:.2f}x{verdict} |"
        )


if __name__ == "__main__":
    main()
