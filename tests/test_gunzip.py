"""The gzip stream decompressed ahead (`ingest.gunzip`: on a thread, or by a process into a
spool file) reads as `gzip.GzipFile` does in CHUNK-sized reads, whatever sizes its reader
asks for: the same bytes, and at a break (a truncated or corrupt stream) the same bytes
before it, then the same kind of error."""

from __future__ import annotations

import gzip
import io
import threading
import time
import zlib
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mapreport.ingest import gunzip
from mapreport.ingest.gunzip import CHUNK, Gunzip, Spooled


def _reads(fh: object, sizes: list[int]) -> tuple[bytes, str | None]:
    """Everything read in blocks of `sizes` (cycled), and the error's type name if any."""
    out = bytearray()
    i = 0
    try:
        while True:
            data = fh.read(sizes[i % len(sizes)])  # type: ignore[attr-defined]
            i += 1
            if not data:
                return bytes(out), None
            out += data
    except (EOFError, OSError, zlib.error) as e:
        return bytes(out), type(e).__name__


STREAMS = {
    "payload": st.binary(min_size=0, max_size=300_000),
    "cut": st.floats(min_value=0.0, max_value=1.0),
    "sizes": st.lists(st.integers(min_value=1, max_value=3 << 20), min_size=1, max_size=4),
    "broken": st.booleans(),
}
"""A payload, where its gzip stream is cut (when `broken`), and the reader's read sizes."""


@settings(max_examples=60, deadline=None)
@given(**STREAMS)
@example(payload=b"\x00\x00", cut=0.5, sizes=[1], broken=True)  # GzipFile(1) != GzipFile(CHUNK)
def test_reads_as_gzipfile_does(payload: bytes, cut: float, sizes: list[int], broken: bool) -> None:
    """The bytes and error GzipFile gives in CHUNK reads, for any payload, read sizes of the
    reader and truncation point."""
    raw = gzip.compress(payload * 20, compresslevel=1)
    if broken:
        raw = raw[: max(2, int(len(raw) * cut))]
    # GzipFile itself gives more or fewer of a broken stream's last bytes by its read size
    # (read(1) may return a byte that read(1 MiB) drops): the thread reads CHUNK at a time
    want = _reads(gzip.GzipFile(fileobj=io.BytesIO(raw)), [CHUNK])
    with Gunzip(io.BytesIO(raw)) as fh:
        got = _reads(fh, sizes)
    assert got == want


@settings(max_examples=25, deadline=None)
@given(**STREAMS)
@example(payload=b"\x00\x00", cut=0.5, sizes=[1], broken=True)
def test_a_spooled_stream_reads_as_gzipfile_does(
    tmp_path_factory: pytest.TempPathFactory,
    payload: bytes,
    cut: float,
    sizes: list[int],
    broken: bool,
) -> None:
    """The same through the spooling process: bytes, the break's error, and the spool whole
    (`complete`) only when the stream ended without a break; the spool goes at close."""
    raw = gzip.compress(payload * 20, compresslevel=1)
    if broken:
        raw = raw[: max(2, int(len(raw) * cut))]
    want = _reads(gzip.GzipFile(fileobj=io.BytesIO(raw)), [CHUNK])
    spool = tmp_path_factory.mktemp("spool") / "s.json"
    with Spooled(io.BytesIO(raw), spool) as fh:
        got = _reads(fh, sizes)
        assert fh.complete() == (len(want[0]) if want[1] is None else None)
        if want[1] is None:
            assert spool.read_bytes() == want[0]
    assert got == want
    assert not spool.exists()


@pytest.mark.slow
def test_the_spool_runs_ahead_of_its_reader_within_a_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spooling process writes ahead of a reader that stops reading, up to RUN_AHEAD
    beyond it (a decompression bomb cannot fill the disk), and goes on when it reads."""
    monkeypatch.setattr(gunzip, "RUN_AHEAD", 3 * CHUNK)
    payload = bytes(range(256)) * (64 * CHUNK // 256)
    spool = tmp_path / "s.json"
    with Spooled(io.BytesIO(gzip.compress(payload, compresslevel=1)), spool) as fh:
        assert fh.read(10) == payload[:10]
        deadline = time.monotonic() + 10
        while spool.stat().st_size < 4 * CHUNK and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)
        assert 4 * CHUNK <= spool.stat().st_size <= 5 * CHUNK
        assert fh.complete() is None
        assert _reads(fh, [CHUNK])[0] == payload[10:]
        assert fh.complete() == len(payload)


def test_closing_early_stops_the_thread(tmp_path: Path) -> None:
    """A reader that stops after the first block (an aborted file) leaves no thread behind."""
    f = tmp_path / "big.gz"
    f.write_bytes(gzip.compress(b"x" * (64 << 20), compresslevel=1))
    before = threading.active_count()
    with Gunzip(open(f, "rb")) as fh:
        assert fh.read(10) == b"x" * 10
    assert threading.active_count() == before
