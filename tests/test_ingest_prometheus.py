"""The Prometheus text reader on the real scrapes of Triton's and vLLM's /metrics, with values
checked against the files' text; series of scrapes; malformed lines and the published
malformed Triton histogram."""

from __future__ import annotations

import gzip
import itertools
import json
import re
from pathlib import Path

import pytest

from mapreport.core.errors import InputError
from mapreport.dataset.store import Dataset
from mapreport.ingest import detect, ingest_file
from mapreport.ingest.base import Head
from mapreport.ingest.prometheus import PrometheusReader, scrape_time_us
from tests.conftest import REALDATA

PROM = REALDATA / "serving" / "prometheus"
pytestmark = pytest.mark.skipif(not PROM.is_dir(), reason="../shared/realdata is missing")
_SAMPLE_LINE = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*(\{.*\})?\s+\S+", re.M)


def _ingest(tmp_path: Path, path: Path, **kw: object) -> tuple[Dataset, object]:
    ds = Dataset(tmp_path / "ds", create=True)
    return ds, ingest_file(ds, path, **kw)  # type: ignore[arg-type]


def _rows(ds: Dataset, where: str = "true") -> list[tuple[object, ...]]:
    return (
        ds.connect()
        .execute(
            "SELECT workload, metric, sample, type, labels, le, quantile, value, line, scrape, "
            f"scrape_us FROM metric_sample WHERE {where} ORDER BY line"
        )
        .fetchall()
    )


@pytest.mark.parametrize(
    ("name", "samples", "families"),
    [("triton_metrics.txt", 377, 32), ("vllm_metrics.txt", 185, 50)],
)
def test_real_scrapes_are_read_whole(
    tmp_path: Path, name: str, samples: int, families: int
) -> None:
    path = PROM / name
    assert detect(path).name == "prometheus"
    text = path.read_text()
    # independently: one row per sample line of the file
    assert len(_SAMPLE_LINE.findall(text)) == samples
    ds, res = _ingest(tmp_path, path)
    assert res.rejected == 0  # type: ignore[attr-defined]
    assert res.rows == {"metric_sample": samples}  # type: ignore[attr-defined]
    rows = _rows(ds)
    assert len({r[1] for r in rows}) == families
    lines = text.split("\n")
    for r in rows:  # each row's line is its sample's line, its series named as written there
        assert lines[int(r[8]) - 1].startswith(str(r[2]))  # type: ignore[call-overload]
    assert {r[9] for r in rows} == {0}
    assert {r[10] for r in rows} == {None}  # one scrape, its time not written


def test_triton_values(tmp_path: Path) -> None:
    ds, _ = _ingest(tmp_path, PROM / "triton_metrics.txt")

    def value(metric: str, workload: str = "densenet_onnx") -> object:
        got = _rows(ds, f"metric = '{metric}' AND workload = '{workload}'")
        assert len(got) == 1, got
        return got[0][7]

    assert value("nv_inference_request_success") == 3
    assert value("nv_inference_queue_duration_us") == 145
    assert value("nv_inference_compute_infer_duration_us") == 1_326_831
    assert value("nv_inference_request_success", "simple") == 0
    gpu = _rows(ds, "metric = 'nv_gpu_utilization'")
    assert len(gpu) == 1
    assert gpu[0][0] == ""  # server-wide: no model
    assert "gpu_uuid" in json.loads(str(gpu[0][4]))
    summary = _rows(ds, "metric = 'nv_inference_queue_summary_us' AND workload = 'densenet_onnx'")
    assert {r[3] for r in summary} == {"summary"}
    assert sorted(r[6] for r in summary if r[6] is not None) == [0.5, 0.9, 0.95, 0.99, 0.999]
    assert {r[2] for r in summary if r[6] is None} == {
        "nv_inference_queue_summary_us_count",
        "nv_inference_queue_summary_us_sum",
    }


def test_vllm_histogram_buckets(tmp_path: Path) -> None:
    ds, _ = _ingest(tmp_path, PROM / "vllm_metrics.txt")
    q = _rows(ds, "metric = 'vllm:request_queue_time_seconds'")
    assert {r[0] for r in q} == {"facebook/opt-125m"}
    assert {r[3] for r in q} == {"histogram"}
    count = [r[7] for r in q if str(r[2]).endswith("_count")]
    assert count == [6]
    buckets = [(r[5], r[7]) for r in q if str(r[2]).endswith("_bucket")]
    assert buckets[-1] == (None, 6)  # +Inf: le null, every observation
    finite = [b for b, _ in buckets[:-1]]
    assert finite == sorted(finite)
    assert all(b is not None for b in finite)
    assert all(c1 <= c2 for (_, c1), (_, c2) in itertools.pairwise(buckets))  # type: ignore[operator]
    for r in q:
        assert "le" not in json.loads(str(r[4]) if r[4] else "{}")


def test_triton_docs_summary(tmp_path: Path) -> None:
    ds, res = _ingest(tmp_path, PROM / "triton_docs_summary_example.txt")
    assert res.rows == {"metric_sample": 7}  # type: ignore[attr-defined]
    rows = _rows(ds)
    by_q = {r[6]: r[7] for r in rows if r[6] is not None}
    assert by_q == {0.5: 55, 0.9: 97, 0.95: 98, 0.99: 101, 0.999: 101}
    assert [r[7] for r in rows if r[6] is None] == [161, 11110]
    assert {r[0] for r in rows} == {"my_model"}


def test_malformed_histogram_is_rejected_line_by_line(tmp_path: Path) -> None:
    path = PROM / "triton_docs_histogram_example_malformed.txt"
    assert detect(path).name == "prometheus"
    ds, res = _ingest(tmp_path, path)
    assert res.rejected == 7  # type: ignore[attr-defined]
    assert res.rows.get("metric_sample", 0) == 0  # type: ignore[attr-defined]
    q = ds.connect().execute("SELECT line, field, reason FROM quarantine ORDER BY line").fetchall()
    assert [r[0] for r in q] == [3, 4, 5, 6, 7, 8, 9]
    assert "does not belong to the histogram nv_first_response_histogram_ms" in q[0][2]
    with pytest.raises(InputError) as e:
        _ingest(tmp_path / "abort", path, policy="abort")
    assert e.value.line == 3
    assert e.value.field == "nv_inference_first_response_histogram_ms_count"


def test_series_of_scrapes(tmp_path: Path) -> None:
    one = '# HELP q Queue time.\n# TYPE q counter\nq{model="m"} {q}\n# TYPE up gauge\nup 1\n'
    marked = tmp_path / "marked.prom"
    marked.write_text(
        "# 2026-11-30T02:00:00Z\n"
        + one.replace("{q}", "10")
        + "# 2026-11-30T02:00:10Z\n"
        + one.replace("{q}", "25")
    )
    ds, res = _ingest(tmp_path / "a", marked)
    assert res.rows == {"metric_sample": 4}  # type: ignore[attr-defined]
    rows = _rows(ds)
    t0 = scrape_time_us("# 2026-11-30T02:00:00Z")
    assert [(r[1], r[7], r[9], r[10]) for r in rows] == [
        ("q", 10, 0, t0),
        ("up", 1, 0, t0),
        ("q", 25, 1, t0 + 10e6),  # type: ignore[operator]
        ("up", 1, 1, t0 + 10e6),  # type: ignore[operator]
    ]
    unmarked = tmp_path / "loop.prom"  # curl in a loop: the first family again starts a scrape
    unmarked.write_text(one.replace("{q}", "1") + one.replace("{q}", "2"))
    ds, _ = _ingest(tmp_path / "b", unmarked)
    assert [(r[7], r[9], r[10]) for r in _rows(ds, "metric = 'q'")] == [(1, 0, None), (2, 1, None)]
    stamped = tmp_path / "stamped.prom"  # federation: each sample's own time, milliseconds
    stamped.write_text('# TYPE q counter\nq{model="m"} 3 1764468000500\n')
    ds, _ = _ingest(tmp_path / "c", stamped)
    assert _rows(ds)[0][10] == pytest.approx(1_764_468_000_500_000)


def test_scrape_time_marks() -> None:
    assert scrape_time_us("# 1764468000") == 1_764_468_000e6
    assert scrape_time_us("# scrape_time=1764468000.25") == pytest.approx(1_764_468_000.25e6)
    iso = scrape_time_us("#2026-11-30T02:00:00+01:00")
    assert iso == scrape_time_us("# 2026-11-30T01:00:00Z")
    assert scrape_time_us("# HELP x y") is None
    assert scrape_time_us("# 2026-13-45T99:00:00Z") is None  # not a date: a plain comment


def test_bad_lines_are_rejected_and_the_rest_kept(tmp_path: Path) -> None:
    path = tmp_path / "bad.prom"
    path.write_text(
        "# TYPE a counter\n"
        'a{model="m"} 1\n'
        "a{model=m} 2\n"  # unquoted label value
        'a{model="n"} 3\n'
        "# TYPE h histogram\n"
        'h_bucket{le="x"} 1\n'  # a bound that is no number
        'h_bucket{le="+Inf"} 1\n'
        "h_count 1\nh_sum 0.5\n"
        "# TYPE s summary\n"
        's{quantile="0.5"} NaN\n'  # no observations yet
        "s_count 0\ns_sum 0\n"
    )
    ds, res = _ingest(tmp_path, path)
    assert res.rejected == 2  # type: ignore[attr-defined]
    assert res.rows == {"metric_sample": 8, "quarantine": 2}  # type: ignore[attr-defined]
    q = ds.connect().execute("SELECT line, field, reason FROM quarantine ORDER BY line").fetchall()
    assert [(r[0], r[1]) for r in q] == [(3, "a"), (6, "le")]
    rows = _rows(ds)
    assert [r[7] for r in rows if r[1] == "a"] == [1, 3]
    nan = [r for r in rows if r[1] == "s" and r[6] == 0.5]
    assert nan[0][7] is None  # NaN: no value
    with pytest.raises(InputError) as e:
        _ingest(tmp_path / "abort", path, policy="abort")
    assert (e.value.line, e.value.field) == (3, "a")


def test_truncated_gzip_keeps_what_came_before(tmp_path: Path) -> None:
    text = "".join(f'# TYPE m{i} gauge\nm{i}{{model="x"}} {i}\n' for i in range(5000)).encode()
    whole = gzip.compress(text)
    path = tmp_path / "cut.prom.gz"
    path.write_bytes(whole[: len(whole) // 2])
    ds, res = _ingest(tmp_path, path)
    assert res.rejected == 1  # type: ignore[attr-defined]
    kept = res.rows["metric_sample"]  # type: ignore[attr-defined]
    assert 0 < kept < 5000
    values = [r[7] for r in _rows(ds)]
    assert values == list(range(kept))


def test_sniffing() -> None:
    reader = PrometheusReader()

    def sniff(text: str) -> bool:
        return reader.sniff(Head(Path("x"), text.encode()))

    assert sniff("# HELP a b\n# TYPE a gauge\na 1\n")
    assert sniff('up{job="x"} 1\n')
    assert not sniff("hello world\n")
    assert not sniff("SUT name : PySUT\nScenario : Server\n")
    assert not sniff('{"resourceSpans": []}\n')
    assert not sniff("a,b,c\n1,2,3\n")


def test_a_huge_family_is_read_in_parts_keeping_its_type(tmp_path: Path) -> None:
    from mapreport.ingest.prometheus import BLOCK_LINES

    n = BLOCK_LINES * 2 + 7
    path = tmp_path / "big.prom"
    path.write_text(
        "# TYPE q counter\n" + "".join(f'q{{model="m",i="{i}"}} {i}\n' for i in range(n))
    )
    ds, res = _ingest(tmp_path, path)
    assert res.rows == {"metric_sample": n}  # type: ignore[attr-defined]
    got = (
        ds.connect()
        .execute("SELECT count(*), min(type), max(type), sum(value), max(line) FROM metric_sample")
        .fetchall()
    )
    assert got == [(n, "counter", "counter", n * (n - 1) / 2, n + 1)]


def test_a_family_that_parses_only_line_by_line_loses_no_sample(tmp_path: Path) -> None:
    path = tmp_path / "clash.prom"
    # each line is a sample, but a family's TYPE twice is refused by the parser
    path.write_text("# TYPE a counter\na 1\n# TYPE a counter\na 2\n")
    _, res = _ingest(tmp_path, path)
    kept = res.rows.get("metric_sample", 0)  # type: ignore[attr-defined]
    assert kept + res.rejected == 2  # type: ignore[attr-defined]
