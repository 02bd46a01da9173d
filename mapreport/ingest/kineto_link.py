"""Kineto: linking kernels to the operators that launched them (correlation ids, and a sweep
of the CPU span that holds each runtime launch), and the `extra` column of each event."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mapreport.ingest.kineto_values import ENCODE

LAUNCHED = ("kernel", "memcpy", "memset")
"""Device-side categories that inherit the shape of the operator that launched them."""


def _first_of_each(keys: np.ndarray, last: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys and, for each, the position of its first (or last) occurrence."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    edge = np.ones(len(sk), bool)
    if last:
        edge[:-1] = sk[:-1] != sk[1:]
    else:
        edge[1:] = sk[1:] != sk[:-1]
    return sk[edge], order[edge]


def _lookup(sorted_keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each wanted key sits in sorted_keys, and whether it is there at all."""
    at = np.searchsorted(sorted_keys, wanted)
    safe = np.minimum(at, max(len(sorted_keys) - 1, 0))
    found = (at < len(sorted_keys)) & (sorted_keys[safe] == wanted) if len(sorted_keys) else at < 0
    return safe, found


class Linked(NamedTuple):
    """Per row: the shape and inputs (operators: their own; kernels, copies and sets: their
    launching operator's) and the launching operator's name as JSON text (launched rows)."""

    shapes: pa.ChunkedArray
    types: pa.ChunkedArray
    concrete: pa.ChunkedArray
    ops: pa.Array
    external_ids: pa.Array
    """Operators: their own `External id`; launched rows: their operator's key, so that the
    kernels of one call share it (older traces give each launch an id of its own: a GEMM and
    its split-K reduction were two calls, the reduction's 8 us at 33 TB/s)."""


def link(rows: pa.Table) -> Linked:
    """Each row's shape, input types and concrete inputs, and its launching operator.

    A launch names its operator by `External id` when an operator carries the same id; older
    traces give launches their own ids (each its correlation), so there the operator is the
    innermost cpu_op on the same thread whose span holds the launch (`_sweep`). Operator keys
    are external ids, or -(event number) for operators without one; an operator key's first
    operator counts, a correlation's last launch. All of it is array lookups, no Python per
    event."""
    n = len(rows)
    cat = rows["category"]
    ext = rows["external_id"]
    has_ext = ext.is_valid().to_numpy(zero_copy_only=False)
    ext_n = ext.fill_null(0).to_numpy()
    key = np.where(has_ext, ext_n, -rows["line"].to_numpy())
    cpu_idx = np.flatnonzero(_is(cat, "cpu_op"))
    op_keys, first = _first_of_each(key[cpu_idx])
    op_rows = cpu_idx[first]
    has_corr = rows["correlation"].is_valid().to_numpy(zero_copy_only=False)
    corr_n = rows["correlation"].fill_null(0).to_numpy()
    li = np.flatnonzero(_is(cat, "runtime") & has_corr)
    _, named = _lookup(op_keys, ext_n[li])
    # older traces give every launch its own correlation as its External id: there an id
    # names no operator even where it equals one's (alexnet's first kernel fell to an
    # unrelated aten::clamp_min_); newer traces' ids meet their correlations only by chance
    own = has_ext[li]
    legacy = bool(own.any()) and bool((ext_n[li] == corr_n[li])[own].all())
    named &= own & (not legacy)
    corr, op = corr_n[li[named]], ext_n[li[named]]
    pending = li[~named]
    if len(pending):
        swept_corr, swept_op = _sweep(rows, pending, cpu_idx, key)
        corr, op = np.concatenate([corr, swept_corr]), np.concatenate([op, swept_op])
    map_corr, at = _first_of_each(corr, last=True)
    map_op = op[at]
    launched = np.flatnonzero(
        pc.is_in(cat, pa.array(LAUNCHED)).to_numpy(zero_copy_only=False) & has_corr
    )
    pos, hit = _lookup(map_corr, corr_n[launched])
    launched, pos = launched[hit], pos[hit]
    pos, hit = _lookup(op_keys, map_op[pos])
    launched, src = launched[hit], op_rows[pos[hit]]
    shape_src = np.full(n, -1, np.int64)
    shape_src[cpu_idx] = cpu_idx
    shape_src[launched] = src
    source = pa.array(shape_src, mask=shape_src < 0)
    shapes = pc.take(rows["shape"], source)
    op_src = np.full(n, -1, np.int64)
    op_src[launched] = src
    names = pc.take(rows["name"], pa.array(op_src, mask=op_src < 0)).combine_chunks()
    ids = np.where(has_ext, ext_n, 0)
    ids[launched] = key[src]  # an operator without an External id: -(its event number)
    has_id = has_ext.copy()
    has_id[launched] = True
    coded = names.dictionary_encode()
    texts = pa.array([ENCODE(v).decode() for v in coded.dictionary.to_pylist()], pa.string())
    return Linked(
        shapes,
        pc.take(rows["types"], source),
        pc.take(rows["concrete"], source),
        pc.take(texts, coded.indices),
        pa.array(ids, pa.int64(), mask=~has_id),
    )


def _sweep(
    rows: pa.Table, pending: np.ndarray, cpu_idx: np.ndarray, key: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(launch correlations, operator keys) for launches that name no operator: of the cpu_ops
    on the launch's thread whose span holds it (start <= t <= end), the one that started last
    (at equal starts, the shorter).

    Vectorised: operators sorted by (thread, start, longer first), launches merged into that
    order, so the last operator started by each launch is known; when that one has ended, a
    descent over a sparse table of span ends finds the nearest earlier operator still open."""
    if not len(cpu_idx) or not len(pending):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    thread = (
        pc.binary_join_element_wise(rows["pid"].fill_null(""), rows["tid"].fill_null(""), "\x1f")
        .combine_chunks()
        .dictionary_encode()
        .indices.to_numpy()
    )
    ts = rows["ts_us"].to_numpy()
    end = ts + rows["dur_us"].to_numpy()
    n_ops, n_launch = len(cpu_idx), len(pending)
    order = np.lexsort(
        (
            np.concatenate([ts[cpu_idx] - end[cpu_idx], np.zeros(n_launch)]),
            np.repeat(np.array([0, 1], np.int8), [n_ops, n_launch]),
            np.concatenate([ts[cpu_idx], ts[pending]]),
            np.concatenate([thread[cpu_idx], thread[pending]]),
        )
    )
    is_op = order < n_ops
    ops = cpu_idx[order[is_op]]  # operator rows in (thread, start, longer first) order
    last = (np.cumsum(is_op) - 1)[~is_op]  # per launch: the last operator started by then
    launches = pending[order[~is_op] - n_ops]
    t = ts[launches]
    ends = [end[ops]]  # ends[k][i] = latest end among operators i .. i + 2**k - 1
    while 2 ** len(ends) <= n_ops:
        half = 2 ** (len(ends) - 1)
        prev = ends[-1]
        ends.append(np.maximum(prev[:-half], prev[half:]))
    j = last.copy()
    for k in range(len(ends) - 1, -1, -1):  # skip back over blocks that all ended before t
        size = 2**k
        start = j - size + 1
        can = start >= 0
        block_end = ends[k][np.where(can, start, 0)]
        j = np.where(can & (block_end < t), j - size, j)
    at = np.where(j >= 0, j, 0)
    ok = (j >= 0) & (thread[ops[at]] == thread[launches]) & (end[ops[at]] >= t)
    corr = rows["correlation"].fill_null(0).to_numpy()
    return corr[launches[ok]], key[ops[at[ok]]]


def extra(rows: pa.Table, ops: pa.Array) -> pa.Array:
    """The `extra` JSON object of each row: grid, block, op, types, concrete, external_id (a
    launched row's: its operator's, `Linked.external_ids`), pid, tid where set."""

    def member(name: str, values: pa.Array) -> pa.Array:
        # `"name":value,` or "" where null: pyarrow's null_handling="skip" drops the rows
        # whose members are all null (pyarrow 26), so the separators are placed here
        return pc.fill_null(pc.binary_join_element_wise(f'"{name}":', values, ",", ""), "")

    parts = [
        member("grid", rows["grid"]),
        member("block", rows["block"]),
        member("op", ops),
        member("types", rows["types"]),
        member("concrete", rows["concrete"]),
        member("external_id", rows["external_id"].cast(pa.string())),
        member("pid", rows["pid"]),
        member("tid", rows["tid"]),
    ]
    body = pc.binary_join_element_wise(*parts, "")
    text = pc.binary_join_element_wise("{", pc.utf8_slice_codeunits(body, 0, -1), "}", "")
    empty = pc.equal(body, "")
    if not pc.any(empty).as_py():
        return text
    return pc.if_else(empty, pa.scalar(None, pa.string()), text)


REGION = "Torch-Compiled Region: "
"""The profiler op PyTorch records around a call of compiled code, followed by its compile id."""


def region_plans(rows: pa.Table) -> pa.Array:
    """Per row: the compile id of the torch.compile graph that ran it (null outside one).

    A host-side event belongs to the innermost `Torch-Compiled Region` on its thread whose
    span holds its start; a kernel, copy or set to the region of the runtime call that
    launched it (same correlation id). Compile ids are per process: the row's own pid (its
    `core`) tells two workers' `0/0` apart."""
    n = len(rows)
    names = rows["name"]
    is_region = pc.starts_with(names, REGION).to_numpy(zero_copy_only=False)
    if not is_region.any():
        return pa.nulls(n, pa.string())
    thread = (
        pc.binary_join_element_wise(rows["pid"].fill_null(""), rows["tid"].fill_null(""), "\x1f")
        .combine_chunks()
        .dictionary_encode()
        .indices.to_numpy()
    )
    ts = rows["ts_us"].to_numpy(zero_copy_only=False)
    end = ts + rows["dur_us"].fill_null(0).to_numpy(zero_copy_only=False)
    device = pc.is_in(rows["category"], pa.array(LAUNCHED)).to_numpy(zero_copy_only=False)
    # the region's own span and Inductor's `## Call CompiledFxGraph ... ##` inside it are
    # the graph, not its ops
    wrapper = is_region | pc.starts_with(names, "## ").to_numpy(zero_copy_only=False)
    owner = np.full(n, -1, np.int64)
    regions = np.flatnonzero(is_region)
    for t in np.unique(thread[regions]):
        mine = regions[thread[regions] == t]
        mine = mine[np.argsort(ts[mine], kind="stable")]
        rows_t = np.flatnonzero((thread == t) & ~device & ~wrapper & ~np.isnan(ts))
        # the latest region started at or before the event; nested regions start later, so
        # the innermost open one is found first, and a closed one holds nothing
        at = np.searchsorted(ts[mine], ts[rows_t], side="right") - 1
        ok = at >= 0
        cand = mine[np.where(ok, at, 0)]
        ok &= end[cand] >= ts[rows_t]
        owner[rows_t[ok]] = cand[ok]
    has_corr = rows["correlation"].is_valid().to_numpy(zero_copy_only=False)
    corr = rows["correlation"].fill_null(0).to_numpy()
    launch = np.flatnonzero(_is(rows["category"], "runtime") & has_corr & (owner >= 0))
    if len(launch):
        keys, at = _first_of_each(corr[launch], last=True)
        kernels = np.flatnonzero(device & has_corr)
        pos, hit = _lookup(keys, corr[kernels])
        owner[kernels[hit]] = owner[launch[at[pos[hit]]]]
    ids = pc.utf8_slice_codeunits(names, len(REGION))
    return pc.take(ids, pa.array(owner, mask=owner < 0)).combine_chunks()


def _is(category: pa.ChunkedArray | pa.Array, name: str) -> np.ndarray:
    """Where an event's category is `name`, as booleans: an event without a category (`cat`
    is optional in the trace format) is none, where arrow's comparison would give null."""
    return np.asarray(pc.fill_null(pc.equal(category, name), False), dtype=bool)
