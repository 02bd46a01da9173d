"""What every reader is: a name, what it reads, a sniffing test and a read into a Sink."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import msgspec

from mapreport.core.errors import ErrorPolicy

if TYPE_CHECKING:
    from mapreport.ingest.sink import Sink


class Head(msgspec.Struct, frozen=True):
    """What sniffing may look at: the path and the first decompressed bytes of the file."""

    path: Path
    data: bytes


class Reader(Protocol):
    """One input format."""

    @property
    def name(self) -> str:
        """The registry key, as `--format` takes it."""
        ...

    @property
    def summary(self) -> str:
        """One line: which tool writes it and what it holds."""
        ...

    @property
    def tables(self) -> tuple[str, ...]:
        """The canonical tables it writes."""
        ...

    @property
    def deprecated(self) -> str | None:
        """Why the tool that writes this format should no longer be used, and what replaces
        it; None while it is current."""
        ...

    @property
    def default_policy(self) -> ErrorPolicy:
        """What a bad record does when the user names no policy: `abort` for formats whose
        writer validates, `quarantine` for logs where a damaged record is routine."""
        ...

    def sniff(self, head: Head) -> bool:
        """True when the file is in this format (from its first bytes, not its name alone)."""
        ...

    def read(self, path: Path, sink: Sink) -> None:
        """Stream the file's records into the sink; bad records go to `sink.reject`."""
        ...


@runtime_checkable
class FileSniffer(Protocol):
    """A reader whose marker may sit anywhere in the file: asked when no reader's `sniff`
    accepted the head."""

    def sniff_file(self, path: Path) -> bool:
        """True when the file is in this format, from its content read as far as needed."""
        ...
