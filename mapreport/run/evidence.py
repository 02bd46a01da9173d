"""Evidence packs written, read and replayed: for every bottleneck class and every action of a
slice, the rows its figure rests on (`<id>.parquet`, with `source_id` and `line`), the
self-contained SQL that selects them from the dataset (`<id>.sql`), and a spec (`<id>.json`:
the figure, its n and CI as the report states them, the window, the thresholds and how the
figure follows from the rows).

Which pack a figure has, its SQL and how its figure follows from the rows are declared beside
the figure in the analysis (`analysis.base.packs`, the families' `packs` modules, chosen by
`analysis.steps.packs`): nothing is computed a second way. `mapreport explain ID --dataset DS`
reruns the SQL against the dataset and the reduction, and says whether the figure, n and CI
are the ones the report stated.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from mapreport.analysis.base.common import SLICE_WIDE
from mapreport.analysis.base.packs import PACK_ID, PACK_ROWS, Pack, reproduced, window_of
from mapreport.analysis.base.query import comment
from mapreport.analysis.serving.packs import (
    SAMPLE_REDUCTIONS,
    live_sql,
    sample_rows_sql,
    tail_rows_sql,
)
from mapreport.analysis.steps.packs import figure_sql, pack_sql, packs, recompute
from mapreport.analysis.steps.results import SliceResult
from mapreport.core.connection import Connection
from mapreport.core.errors import DatasetError, UsageError
from mapreport.core.files import atomic_write
from mapreport.core.kinds import Reduction
from mapreport.core.records import replace
from mapreport.dataset.store import Dataset
from mapreport.dataset.views import view_script
from mapreport.report.words import metric

PACKS = "evidence"
"""The folder of a slice's packs (under its report folder) and of their specs in the dataset."""


def _sql_file(p: Pack, views: str | None) -> bytes:
    """A pack's `.sql`: the statements that make the dataset's views (when the connection's are
    known: DuckDB's), the pack's rows as the view `PACK_ROWS`, then the SELECT of the figure
    from them, so plain DuckDB prints the figure the report states."""
    where = p.shape if p.shape != SLICE_WIDE else "the whole slice"
    head = comment(
        f"mapreport evidence pack {p.id}: {p.subject} of {p.workload}/{p.slice} at {where}"
    )
    if views is None:
        head += "-- its query reads the dataset's views: mapreport explain ID --dataset DS\n"
        views = ""
    else:
        head += (
            "-- self-contained: the dataset's views (its committed files, as the report read\n"
            f"-- them, by their path from this folder), the pack's rows (the view {PACK_ROWS}),\n"
            "-- then the figure from them; run it from this folder with: duckdb < FILE\n"
        )
    rows = f"CREATE OR REPLACE TEMP VIEW {PACK_ROWS} AS\n{p.sql.strip()};\n"
    figure = (
        f"-- the figure as the report states it, from the rows (SELECT * FROM {PACK_ROWS}\n"
        "-- lists them)\n"
    )
    if p.ci is not None:
        how = "the Wilson interval" if p.reduction == Reduction.BLOCKED_SHARE else "a bootstrap"
        figure += (
            f"-- its 95% CI, [{p.ci[0]!r}, {p.ci[1]!r}] in the report, is {how} with the\n"
            f"-- report's seed, which SQL does not draw: mapreport explain {p.id} --dataset DS\n"
        )
    return (head + views + rows + figure + figure_sql(p) + ";\n").encode()


def from_folder(views: str | None, dataset: Path, folder: Path) -> str | None:
    """The views' files named by their path from the pack's folder, where the script runs: a
    report folder moved or copied together with its dataset still runs its packs. A dataset
    whose path SQL must escape (a quote in it) keeps its absolute paths."""
    root = str(dataset.resolve())
    if views is None or "'" in root:
        return views
    relative = Path(os.path.relpath(root, folder.resolve())).as_posix()
    return views.replace(f"'{root}/", f"'{relative}/")


def write_packs(
    con: Connection, r: SliceResult, folder: Path, specs: Path, live: bool = False
) -> int:
    """Write each pack's rows, SQL and spec under `folder`, and its spec under `specs` (the
    dataset's copy `explain` reads); the pack folder holds tonight's packs only. `live`: `r` was
    just analysed on `con`, whose temporary objects are still this slice's (`query.load_slice`
    and `blocking.load_blocking` make them anew for every slice), so the packs' rows come from
    them rather than from the same definitions again as CTEs (`live_sql`)."""
    folder.mkdir(parents=True, exist_ok=True)
    specs.mkdir(parents=True, exist_ok=True)
    views = from_folder(view_script(con), specs.parent, folder)
    done = packs(r)
    keep = {p.id for p in done}
    for old in folder.iterdir():
        if old.stem not in keep:
            old.unlink()
    tails: pa.Table | None = None
    samples: pa.Table | None = None
    for p in done:
        if p.reduction in SAMPLE_REDUCTIONS:
            # one scan of the slice for every shape's samples, each pack its shape's rows (a
            # query per pack scanned the slice once per shape); the order is the query's
            import pyarrow.compute as pc  # here: a trace's or compile log's packs pick none (45 ms)

            if samples is None:
                shapes = sorted({q.shape for q in done if q.reduction in SAMPLE_REDUCTIONS})
                query = sample_rows_sql(r.workload, r.slice, shapes, live)
                samples = con.sql(query).to_arrow_table()
            mask = pc.equal(samples["shape"], p.shape)
            if p.reduction != Reduction.NET_GAIN:
                mask = pc.and_(mask, pc.equal(samples["kind"], "sample"))
            rows = samples.filter(mask)
        elif p.reduction == Reduction.TAIL_SHARE:
            # every tail pack's rows are those of the slice's one tail query for its shapes:
            # run it (and the blocking chain it joins) once, not once per pack
            import pyarrow.compute as pc

            if tails is None:
                query = tail_rows_sql(r.workload, r.slice, r.budgets, live)
                tails = con.sql(query).to_arrow_table()
            mask = pc.is_in(tails["shape"], pa.array(p.typed().shapes, pa.string()))
            rows = tails.filter(mask)
        else:  # live: a regression's, a blocked share's, a queue check's over the slice's objects
            rows = con.sql(live_sql(p.sql, r.workload, r.slice) if live else p.sql).to_arrow_table()
        pq.write_table(rows, folder / f"{p.id}.parquet")
        atomic_write(folder / f"{p.id}.sql", _sql_file(p, views))
        spec = json.dumps(p.spec(), indent=1, sort_keys=True).encode()
        atomic_write(folder / f"{p.id}.json", spec)
        atomic_write(specs / f"{p.id}.json", spec)
    return len(done)


class SpecError(DatasetError):
    """A pack spec in a dataset that cannot be used: unreadable, incomplete, of an unknown
    kind, or holding SQL other than the SQL its parameters give (exit 5)."""


def load(specs: Path, pid: str) -> Pack | None:
    """The pack spec of `pid` in a dataset's evidence folder (None when there is none). The id
    is checked for its form before any path is made of it; the spec is checked field by
    field, and its SQL against the SQL this code builds from its parameters."""
    if not PACK_ID.fullmatch(pid):
        raise UsageError(
            f"{pid!r} is not an evidence pack id (12 hexadecimal digits, as findings.json's "
            "actions[].id and the report's evidence links give them)"
        )
    path = specs / f"{pid}.json"
    if not path.is_file():
        return None
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SpecError(f"{path}: cannot read the pack spec: {e.strerror}") from None
    try:
        p = Pack.from_spec(data)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError) as e:
        raise SpecError(f"{path}: not a usable pack spec: {str(e).splitlines()[0]}") from None
    if p.id != pid:
        raise SpecError(f"{path}: the spec is of pack {p.id!r}, not {pid!r}")
    params = p.typed()
    if p.reduction == Reduction.DRIFT and params.baseline is None:
        raise SpecError(f"{path}: not a usable pack spec: a drift pack needs params.baseline")
    rebuilt = pack_sql(p.reduction, p.workload, p.slice, p.shape, params)
    if p.sql != rebuilt:
        raise SpecError(
            f"{path}: its SQL is not the SQL mapreport builds from the spec's parameters "
            "(tampered with, or written by another version of mapreport: report the slice "
            "again); nothing was run"
        )
    return replace(p, sql=rebuilt)  # the text this code built, not the file's


def explain(dataset_dir: Path, pid: str) -> tuple[list[str], bool]:
    """Rerun a pack's query against the dataset and its figure from the rows: the lines to
    print and whether the report's figure, n and CI are reproduced. The query run is the one
    this code builds from the spec's parameters (`pack_sql`), never text read from the
    dataset."""
    ds = Dataset(dataset_dir)
    p = load(ds.root / PACKS, pid)
    if p is None:
        raise UsageError(
            f"no evidence pack {pid!r} in {ds.root / PACKS} (the ids are findings.json's "
            "actions[].id and the report's evidence links)"
        )
    con = ds.connect(p.workload, window_of(p))
    try:
        rows = con.sql(p.sql).to_arrow_table()  # built by `load` from the spec's parameters
    except duckdb.Error as e:
        raise DatasetError(f"pack {pid}: its query no longer runs on {ds.root}: {e}") from None
    x = recompute(p, rows)
    paths = dict(
        con.execute(
            "SELECT source_id, path FROM ingest_log WHERE list_contains($ids, source_id)",
            {"ids": list(x.files)},
        ).fetchall()
    )
    name = f"{p.workload}/{p.slice}" if p.slice else p.workload
    where = "the whole slice" if p.shape == SLICE_WIDE else p.shape
    ok = reproduced(p, x)

    def ci(c: tuple[float, float] | None) -> str:
        return "-" if c is None else f"[{c[0]:.6g}, {c[1]:.6g}]"

    def fig(v: float | None) -> str:
        return "-" if v is None else f"{v:.6g}"

    lines = [
        f"{p.subject} of {name} at {where} (pack {p.id}, window {p.window['spec']})",
        f"{metric(p.metric)}: {fig(x.figure)} (report: {fig(p.figure)}), n = {x.n} "
        f"(report: {p.n}), 95% CI {ci(x.ci)} (report: {ci(p.ci)})",
        "reproduced exactly"
        if ok
        else "NOT reproduced: the dataset no longer holds what the report was computed from",
        f"{x.rows} row(s) from {len(x.files)} file(s):",
        *(f"  {paths.get(f, '(no longer in the dataset)')} ({f})" for f in x.files),
        f'SQL: {ds.root / PACKS / (p.id + ".json")} ("sql"); the report\'s copy: '
        f"evidence/{p.id}.sql",
    ]
    return lines, ok
