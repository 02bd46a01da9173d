"""`mapreport check`: verify every file a dataset holds, and set the damaged ones aside.

A dataset is copied, synced and restored; a disk fills mid-write; a file is truncated by hand.
Reading such a file fails deep inside a query, so this walks the dataset once and says, per
file, what is wrong with it and what to do: the commit records (readable, of a schema this
mapreport reads), every data and history file (a Parquet footer that reads, the schema version
in its metadata, each canonical column of the type mapreport writes), the log against the
data files (a committed source whose rows are missing), the evidence pack specs (`explain`'s
checks) and the retirement records.

`--repair` moves each damaged file, with the commit record and the other data files of its
source, to `<dataset>/damaged/<time>/` (same relative paths; nothing is deleted), so the
dataset reads again and ingesting the source file again reads it in afresh.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mapreport.core.errors import DatasetError, UsageError
from mapreport.core.schema import HISTORY_TABLES, TABLES, check_schema_version
from mapreport.dataset.store import LOG, RETIRED, Dataset
from mapreport.run.evidence import PACKS, SpecError, load

DAMAGED = "damaged"
"""Where `--repair` sets damaged files aside, one folder per repair."""


@dataclass(frozen=True)
class Damage:
    """One damaged file and what to do about it."""

    path: Path
    why: str
    source_id: str | None = None
    """The source whose rows it holds (its commit record and data files go aside with it)."""
    remedy: str = ""


@dataclass(frozen=True)
class CheckResult:
    """What `check` found."""

    files: int
    damage: tuple[Damage, ...]


def _family(t: pa.DataType) -> str:
    """The kind of a column's type: numbers of any width are one kind (older files may hold
    narrower integers), text, booleans; anything else by its name."""
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return "number"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"list<{_family(t.value_type)}>"  # the item field's name varies by writer
    return str(t)


def _parquet(f: Path, schema: pa.Schema) -> str | None:
    """What is wrong with one Parquet file of `schema` (None: nothing)."""
    try:
        meta = pq.read_metadata(f)
        found = pq.read_schema(f)
    except (OSError, pa.ArrowException) as e:
        return f"unreadable Parquet ({str(e).splitlines()[0]})"
    version = (meta.metadata or {}).get(b"mapreport.schema_version")
    if version is not None:
        try:
            check_schema_version(version.decode(errors="replace"), f)
        except DatasetError as e:
            return str(e).removeprefix(f"{f}: ")
    for field in schema:
        i = found.get_field_index(field.name)
        if i >= 0 and _family(found.field(i).type) != _family(field.type):
            return (
                f"column {field.name!r} is {found.field(i).type}, mapreport reads "
                f"{field.type} (written by another program or a newer mapreport)"
            )
    return None


def _files(folder: Path) -> Iterator[Path]:
    """The Parquet files below a folder, in order."""
    if folder.is_dir():
        yield from sorted(folder.rglob("*.parquet"))


def check(ds: Dataset) -> CheckResult:
    """Every file of the dataset verified (reads only)."""
    root, damage, count = ds.root, [], 0
    live: dict[str, dict[str, object]] = {}
    superseded: set[str] = set()
    for f in _files(root / LOG):
        count += 1
        sid = f.stem
        try:
            rows = pq.read_table(f).to_pylist()
            for r in rows:
                check_schema_version(r.get("schema_version"), f)
        except (OSError, pa.ArrowException, DatasetError) as e:
            why = str(e).removeprefix(f"{f}: ").splitlines()[0]
            remedy = (
                f"its source {sid}'s data files go aside with it; ingest the inputs again (the "
                "record alone named the file: unchanged files are skipped, that one is read)"
            )
            damage.append(Damage(f, f"commit record: {why}", sid, remedy))
            continue
        for r in rows:
            live[sid] = r
            superseded.update(s for s in (r.get("supersedes") or "").split(",") if s)
    for sid in superseded:
        live.pop(sid, None)
    held: dict[str, set[str]] = {}
    for table, schema in TABLES.items():
        if table == LOG:
            continue
        for f in _files(root / table):
            count += 1
            sid = f.name.split("-", 1)[0]
            held.setdefault(sid, set()).add(table)
            problem = _parquet(f, schema)
            if problem is not None:
                damage.append(Damage(f, problem, sid, _reingest(live.get(sid))))
    for sid, r in sorted(live.items()):
        counts = json.loads(str(r.get("rows") or "{}"))
        missing = sorted(t for t, n in counts.items() if n and t not in held.get(sid, set()))
        if missing:
            why = f"commit record of {r.get('path')!r} names rows of {', '.join(missing)}"
            damage.append(
                Damage(
                    root / LOG / f"{sid}.parquet", why + ", whose files are gone", sid, _reingest(r)
                )
            )
    for table, schema in HISTORY_TABLES.items():
        for f in _files(root / "history" / table):
            count += 1
            problem = _parquet(f, schema)
            if problem is not None:
                night = f.parent.name.split("=", 1)[-1]
                remedy = f"run the night again: mapreport run CONFIG --date {night}"
                damage.append(Damage(f, f"history: {problem}", None, remedy))
    for f in sorted((root / PACKS).glob("*.json")) if (root / PACKS).is_dir() else []:
        count += 1
        try:
            load(root / PACKS, f.stem)
        except (SpecError, DatasetError, UsageError) as e:  # a name that is no pack id too
            why = str(e).removeprefix(f"{f}: ").splitlines()[0]
            damage.append(Damage(f, f"evidence spec: {why}", None, "report the slice again"))
    for f in sorted((root / RETIRED).glob("*.json")) if (root / RETIRED).is_dir() else []:
        count += 1
        try:
            record = json.loads(f.read_bytes())
            ok = isinstance(record, dict) and isinstance(record.get("sha256"), str)
        except (OSError, ValueError):
            ok = False
        if not ok:
            damage.append(Damage(f, "retirement record: not the JSON mapreport writes"))
    return CheckResult(count, tuple(damage))


def _reingest(record: dict[str, object] | None) -> str:
    if record is None:
        return "not committed (left by an interrupted write): the next ingest removes it"
    return f"ingest {record.get('path')} again"


def repair(ds: Dataset, found: CheckResult) -> Path | None:
    """Set every damaged file aside under `<dataset>/damaged/<time>/`, with the commit record
    and the data files of its source, under the writer lock; the folder (None: nothing to do)."""
    if not found.damage:
        return None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    aside = ds.root / DAMAGED / stamp
    sources = {d.source_id for d in found.damage if d.source_id}
    moving = {d.path for d in found.damage}
    for sid in sources:
        moving.add(ds.root / LOG / f"{sid}.parquet")
        for table in TABLES:
            if table != LOG:
                moving.update(_files_of(ds.root / table, sid))
    with ds.writing():
        for f in sorted(moving):
            if f.exists():
                target = aside / f.relative_to(ds.root)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(f, target)
    return aside


def _files_of(folder: Path, source_id: str) -> list[Path]:
    return sorted(folder.rglob(f"{source_id}-*.parquet")) if folder.is_dir() else []
