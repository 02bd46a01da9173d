"""CUDA and HIP graph buckets: the captured sizes a server's steps replay, padded up to them,
and what the padding costs (a profiler trace of a server that captures graphs)."""

from __future__ import annotations

import msgspec

from mapreport.analysis.device.graphs import GraphBucket, Graphs
from mapreport.core.kinds import JudgementFamily
from mapreport.report.sections.unit import Facts, Section, present, same


class Fragment(msgspec.Struct):
    """findings.json `graph_buckets` (empty without graph replays)."""

    graph_buckets: tuple[GraphBucket, ...]


def read(f: Facts) -> Graphs | None:
    """The slice's graph captures and replays."""
    return f.r.device.graphs


def fragment(g: Graphs | None) -> Fragment:
    """Every bucket, captured or eager."""
    return Fragment(g.buckets if g else ())


SECTION = Section(
    "graphs",
    "CUDA and HIP graph buckets",
    read,
    same,
    fragment,
    has=present,
    missing="no graph capture or replay in the traces; a profiler trace of a server that "
    'captures CUDA or HIP graphs (vLLM, SGLang, torch.compile mode="reduce-overhead") '
    "adds it, with its capture trace for the captured sizes",
    family=JudgementFamily.CUDA_GRAPHS,
)
