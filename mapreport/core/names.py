"""Names from input files (workloads, slices) as path components: bounded, safe, and unique by
construction, whatever Unicode they hold.

Two schemes, one rule. A name that can stand for itself stands as it is; any other becomes a
readable prefix, `~` and 16 hex digits of the SHA-256 of the whole name. `~` never appears in
a name that stands for itself, so a plain folder and a hashed one cannot meet, and two hashed
ones meet only if SHA-256's first 64 bits collide.
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import quote

MAX_PLAIN = 100
"""Characters a name may have and still stand for itself."""
PREFIX_BYTES = 60
"""UTF-8 bytes of the readable prefix of a hashed name (a folder name stays under 100 bytes,
far below the 255 of common filesystems)."""
RESERVED = frozenset({"index.html", "report.html", "report.pdf", "findings.json"})
"""Files mapreport writes beside slice folders: no name may take their place (compared
case-insensitively, for case-insensitive filesystems)."""
_PLAIN = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
_NOT_WORD = re.compile(r"[^\w.-]+")


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _prefix(text: str) -> str:
    """`text` cut to PREFIX_BYTES of UTF-8, never inside a character."""
    return text.encode("utf-8", "surrogatepass")[:PREFIX_BYTES].decode("utf-8", "ignore")


def folder_name(name: str) -> str:
    """The report folder of a workload or slice: the name itself when it is plain ASCII
    (letters, digits, `._-`, not starting with a dot), at most MAX_PLAIN characters and no
    file mapreport writes; else `<word characters of the name>~<hash>`."""
    if _PLAIN.fullmatch(name) and len(name) <= MAX_PLAIN and name.lower() not in RESERVED:
        return name
    readable = _NOT_WORD.sub("_", name).strip("._")
    return f"{_prefix(readable)}~{_digest(name)}"


def partition_name(workload: str) -> str:
    """The dataset partition folder of a workload: `workload=<percent-encoded name>` when the
    encoding is short and has no `~`, else whole escapes up to 80 characters, `~` and the
    hash (an escape is never cut, so the folder always decodes)."""
    enc = quote(workload, safe="-_.")
    if len(enc) <= 120 and "~" not in enc and enc not in {".", ".."}:
        return f"workload={enc}"
    cut = ""
    for ch in workload:
        piece = quote(ch, safe="-_.").replace("~", "%7E")
        if len(cut) + len(piece) > 80:
            break
        cut += piece
    return f"workload={cut}~{_digest(workload)}"
