"""`mapreport check`: verify every file a dataset holds, and set the damaged ones aside.

A dataset is copied, synced and restored; a disk fills mid-write; a file is truncated by hand;
a bit flips on a disk. Reading such a file fails deep inside a query, or worse, reads as wrong
numbers, so this walks the dataset once and says, per file, what is wrong with it and what to
do: what no command goes through (links out, FIFOs and other non-regular files), the commit
records (readable, every field of its type, of a schema this mapreport reads), every data file
(its bytes against the SHA-256 its commit record keeps, a full read that verifies the page
checksums, the schema version in its metadata, each canonical column of the type mapreport
writes), the records against the data files (a file a record names that is gone, a file no
record names), history, the evidence pack specs (`explain`'s checks), the retirement and
retention records. `quick` reads footers only: no hash, no page.

`--repair` sets aside exactly the files it found (names taken as they are, never as
patterns): a damaged file of a committed source goes with that source's commit record and its
other data files, in one step (`Dataset.set_aside`), so ingesting the source file again reads
all of it back; a file no commit record owns goes alone; a FIFO or socket (no bytes on disk)
is removed; a link out of the dataset is left for its owner to replace.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from enum import Enum
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from mapreport.core.errors import DatasetError, UsageError
from mapreport.core.files import content_hash, unsafe_entries
from mapreport.core.schema import HISTORY_TABLES, TABLES, check_schema_version
from mapreport.dataset.integrity import DAMAGED, RETENTION, retained_away
from mapreport.dataset.log import LOG, LogEntry, record_entry, source_of
from mapreport.dataset.store import RETIRED, Dataset
from mapreport.run.evidence import PACKS, SpecError, load


class Repair(Enum):
    """What `--repair` does with a damaged file."""

    SOURCE = "source"
    """Set it aside with its source's commit record and data files (ingest the source again)."""
    FILE = "file"
    """Set it aside alone (no commit record owns it, or it is history, a spec, a record)."""
    REMOVE = "remove"
    """Remove it: a FIFO, socket or device holds no bytes on disk."""
    BY_HAND = "by_hand"
    """Leave it: a link out of the dataset points at someone's files."""


class Damage(msgspec.Struct, frozen=True):
    """One damaged file and what to do about it."""

    path: Path
    why: str
    source_id: str | None = None
    """The source whose rows it holds (its commit record and data files go aside with it)."""
    remedy: str = ""
    repair: Repair = Repair.FILE


class CheckResult(msgspec.Struct, frozen=True):
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
    if pa.types.is_dictionary(t):
        return _family(t.value_type)  # a partition column (`Dataset.as_written`)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"list<{_family(t.value_type)}>"  # the item field's name varies by writer
    return str(t)


def _parquet(f: Path, schema: pa.Schema, full: bool) -> str | None:
    """What is wrong with one Parquet file of `schema` (None: nothing); `full` reads every
    page too, verifying the page checksums where the writer kept them."""
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
    if full:
        try:
            pq.ParquetFile(f, page_checksum_verification=True).read()
        except (OSError, pa.ArrowException) as e:
            return f"a damaged page ({str(e).splitlines()[0]})"
    return None


def _files(folder: Path, refused: set[Path]) -> Iterator[Path]:
    """The Parquet files below a folder, in order, but those already refused."""
    if folder.is_dir():
        yield from (f for f in sorted(folder.rglob("*.parquet")) if f not in refused)


def check(ds: Dataset, quick: bool = False) -> CheckResult:
    """Every file of the dataset verified (reads only); `quick`: footers only."""
    root = ds.root
    damage = [_unsafe(path, why) for path, why in unsafe_entries(root, "dataset")]
    refused = {d.path for d in damage}
    records, count = _records(ds, refused, damage)
    superseded = {s for e in records.values() for s in e.supersedes}
    live = {sid: e for sid, e in records.items() if sid not in superseded}
    held: dict[str, set[str]] = {}
    for table, schema in TABLES.items():
        if table == LOG:
            continue
        for f in _files(root / table, refused):
            count += 1
            sid = source_of(f)
            held.setdefault(sid, set()).add(table)
            damage.extend(_data_file(ds, f, schema, live.get(sid), quick))
    kept_from = ds.kept_from() if (root / RETENTION).is_file() else None
    for sid, e in sorted(live.items()):
        damage.extend(_missing(ds, e, held.get(sid, set()), kept_from))
    count += _others(root, refused, damage)
    return CheckResult(count, tuple(damage))


def _unsafe(path: Path, why: str) -> Damage:
    """A link out of the dataset or a non-regular file, as damage."""
    if path.is_symlink():
        return Damage(path, why.removeprefix("is "), None, "", Repair.BY_HAND)
    return Damage(path, why.split(":", 1)[0].removeprefix("is "), None, "", Repair.REMOVE)


def _records(
    ds: Dataset, refused: set[Path], damage: list[Damage]
) -> tuple[dict[str, LogEntry], int]:
    """The commit records that read (by source id), and how many record files there are; a
    damaged one is damage of its source."""
    records: dict[str, LogEntry] = {}
    count = 0
    for f in _files(ds.root / LOG, refused):
        count += 1
        try:
            rows = pq.read_table(f).to_pylist()
            entries = [record_entry(r, f) for r in rows]
        except (OSError, pa.ArrowException, DatasetError) as e:
            why = str(e).removeprefix(f"{f}: ").removeprefix("damaged commit record: ")
            why = why.split("; run `mapreport check", 1)[0].splitlines()[0]
            remedy = (
                f"--repair sets it aside with its source {f.stem}'s data files; then ingest the "
                "inputs again (unchanged files are skipped; the one the record named is read)"
            )
            damage.append(Damage(f, f"commit record: {why}", f.stem, remedy, Repair.SOURCE))
            continue
        records.update((entry.source_id, entry) for entry in entries)
    return records, count


def _data_file(
    ds: Dataset, f: Path, schema: pa.Schema, entry: LogEntry | None, quick: bool
) -> list[Damage]:
    """What is wrong with one data file, against its commit record (none: not committed)."""
    if entry is None:
        problem = _parquet(f, schema, full=False)
        remedy = "not committed (left by an interrupted write): the next ingest removes it"
        return [] if problem is None else [Damage(f, problem, None, remedy, Repair.FILE)]
    again = _reingest(ds, entry)
    name = f.relative_to(ds.root).as_posix()
    if entry.files is not None:
        if name not in entry.files:
            why = f"not a file of its source's commit record ({entry.path!r}): copied in by hand?"
            return [Damage(f, why, entry.source_id, "--repair sets it aside alone", Repair.FILE)]
        if not quick and content_hash(f) != entry.files[name]:
            why = "its bytes are not those its commit record hashed (SHA-256 differs)"
            return [Damage(f, why, entry.source_id, again, Repair.SOURCE)]
    problem = _parquet(f, schema, full=not quick)
    return [] if problem is None else [Damage(f, problem, entry.source_id, again, Repair.SOURCE)]


def _missing(ds: Dataset, e: LogEntry, tables: set[str], kept_from: str | None) -> list[Damage]:
    """A committed source whose data files are gone (those retention removed excepted)."""
    record = ds.root / LOG / f"{e.source_id}.parquet"
    if e.files is not None:
        gone = sorted(
            name
            for name in e.files
            if not (ds.root / name).is_file() and not retained_away(name, kept_from)
        )
        if not gone:
            return []
        names = ", ".join(gone[:3]) + (f" and {len(gone) - 3} more" if len(gone) > 3 else "")
        why = f"commit record of {e.path!r} names {names}, which are gone"
        # the record is no longer whole: ingesting the file again reads it (`Dataset.find`)
        return [Damage(record, why, e.source_id, f"ingest {e.path} again", Repair.SOURCE)]
    missing = sorted(t for t, n in e.rows.items() if n and t not in tables)
    if not missing:
        return []
    why = f"commit record of {e.path!r} names rows of {', '.join(missing)}, whose files are gone"
    return [Damage(record, why, e.source_id, _reingest(ds, e), Repair.SOURCE)]


def _reingest(ds: Dataset, e: LogEntry) -> str:
    """The remedy for a committed source's damage: repair first, so that the record no longer
    says the content is in and ingesting the file reads it again."""
    return f"run `mapreport check --dataset {ds.root} --repair`, then ingest {e.path} again"


def _others(root: Path, refused: set[Path], damage: list[Damage]) -> int:
    """History, evidence specs, retirement and retention records: damage, and the count."""
    count = 0
    for table, schema in HISTORY_TABLES.items():
        for f in _files(root / "history" / table, refused):
            count += 1
            problem = _parquet(f, schema, full=True)
            if problem is not None:
                night = f.parent.name.split("=", 1)[-1]
                remedy = f"run the night again: mapreport run CONFIG --date {night}"
                damage.append(Damage(f, f"history: {problem}", None, remedy))
    for f in sorted((root / PACKS).glob("*.json")) if (root / PACKS).is_dir() else []:
        if f in refused:
            continue
        count += 1
        try:
            load(root / PACKS, f.stem)
        except (SpecError, DatasetError, UsageError) as e:  # a name that is no pack id too
            why = str(e).removeprefix(f"{f}: ").splitlines()[0]
            damage.append(Damage(f, f"evidence spec: {why}", None, "report the slice again"))
    for f in sorted((root / RETIRED).glob("*.json")) if (root / RETIRED).is_dir() else []:
        if f in refused:
            continue
        count += 1
        if not _json_with(f, "sha256"):
            damage.append(Damage(f, "retirement record: not the JSON mapreport writes"))
    if (root / RETENTION).is_file() and root / RETENTION not in refused:
        count += 1
        if not _json_with(root / RETENTION, "keep_from"):
            remedy = "--repair sets it aside; the next `retain` writes it again"
            damage.append(Damage(root / RETENTION, "retention record: not JSON", None, remedy))
    return count


def _json_with(f: Path, key: str) -> bool:
    """Whether a file is a JSON object with a text `key`."""
    try:
        record = json.loads(f.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and isinstance(record.get(key), str)


class Repaired(msgspec.Struct, frozen=True):
    """What `repair` did."""

    aside: Path | None
    """The folder the files went to (None: none went)."""
    moved: int
    removed: int
    left: tuple[Damage, ...]
    """Damage repair leaves to a person (links out of the dataset)."""


def repair(ds: Dataset, found: CheckResult) -> Repaired:
    """Set every damaged file aside under `<dataset>/damaged/<time>/`, with the commit record
    and the data files of its source where it is a committed source's, in one step."""
    moving: set[Path] = set()
    removing = []
    for d in found.damage:
        if d.repair is Repair.REMOVE:
            removing.append(d.path)
        elif d.repair is Repair.FILE:
            moving.add(d.path)
        elif d.repair is Repair.SOURCE and d.source_id is not None:
            moving.add(d.path)
            moving.add(ds.root / LOG / f"{d.source_id}.parquet")
            moving.update(ds.source_files(d.source_id))
    moving = {f for f in moving if f.exists() and not f.is_relative_to(ds.root / DAMAGED)}
    with ds.writing(checked=False):
        for f in removing:
            f.unlink(missing_ok=True)
        aside = ds.set_aside(moving)
    left = tuple(d for d in found.damage if d.repair is Repair.BY_HAND)
    return Repaired(aside, len(moving), len(removing), left)
