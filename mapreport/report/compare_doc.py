"""compare.json (schema: docs/compare.md): a comparison's figures as the document's Structs
(`compare_file`, which the Python API reads it back into)."""

from __future__ import annotations

from mapreport import __version__
from mapreport.analysis.comparing.compare import (
    Comparison,
    OpOnly,
    ShapeComparison,
    ShipCheck,
)
from mapreport.analysis.comparing.compare_mapping import Figure as MappingFigure
from mapreport.analysis.comparing.compare_mapping import MappingComparison
from mapreport.analysis.comparing.compare_stats import BlockChoice
from mapreport.analysis.comparing.compare_tuning import TuningComparison
from mapreport.analysis.comparing.compare_whole import TotalComparison
from mapreport.analysis.comparing.runlevel import RunsCompared
from mapreport.report.compare import Evidence, Parts, Side, headline, ship_sentence
from mapreport.report.compare_file import (
    Blocks,
    CategoryCompared,
    CompareJson,
    CompareSide,
    Figure,
    MappingCompared,
    MappingShape,
    MeanLatency,
    OpCompared,
    OpOneSide,
    Pair,
    PartQuantiles,
    QuantileTest,
    Renamed,
    RunOp,
    RunQuantile,
    Runs,
    RunShift,
    ShapeCompared,
    Ship,
    SideBlocks,
    TailQuantile,
    Whole,
    carried,
)
from mapreport.report.compare_tests import blocks_sentence
from mapreport.report.compare_tuning import tuning_doc, tuning_sentence

COMPARE_SCHEMA_VERSION = "1.6"


def _pair(ci: tuple[float, float] | None) -> Pair | None:
    return None if ci is None else (ci[0], ci[1])


def _mapping_doc(mc: MappingComparison | None) -> MappingCompared | None:
    if mc is None:
        return None

    def fig(f: MappingFigure) -> Figure:
        return Figure(a=f.a, b=f.b, change=f.change)

    return MappingCompared(
        coverage=fig(mc.coverage),
        mape_weighted=fig(mc.mape),
        within_tolerance_share=fig(mc.within_tolerance),
        kendall_tau=fig(mc.kendall_tau),
        adaptation_events=fig(mc.adaptation_events),
        fallback_requests=fig(mc.fallback_requests),
        shapes=tuple(carried(MappingShape, m, change_ci=_pair(m.change_ci)) for m in mc.shapes),
    )


def _ship_doc(ship: ShipCheck | None) -> Ship | None:
    if ship is None:
        return None
    return Ship(
        safe=ship.safe,
        reason=ship.reason,
        quantile=ship.quantile.quantile if ship.quantile else None,
        target_us=ship.target_us,
        text=ship_sentence(ship),
    )


def _runs_doc(runs: RunsCompared | None) -> Runs | None:
    if runs is None:
        return None
    return Runs(
        runs_a=runs.runs_a,
        runs_b=runs.runs_b,
        quantiles=tuple(carried(RunQuantile, q, ci=_pair(q.ci)) for q in runs.quantiles),
        traces_a=runs.traces_a,
        traces_b=runs.traces_b,
        ops=tuple(carried(RunOp, o) for o in runs.ops),
    )


def _block_doc(b: BlockChoice) -> Blocks:
    return Blocks(n=b.n, acf=tuple(b.acf[:10]), band=b.band, length=b.length)


def _tail_doc(c: Comparison, packs: Evidence) -> tuple[TailQuantile, ...]:
    return tuple(
        TailQuantile(
            quantile=t.quantile,
            n_a=t.n_a,
            n_b=t.n_b,
            a_us=t.a_us,
            b_us=t.b_us,
            ratio=t.ratio,
            ci=t.ci,
            moved=t.moved,
            blocks=t.blocks,
            evidence=packs.get(("slice", t.quantile)),
        )
        for t in c.tail
    )


def _tests_doc(s: ShapeComparison, packs: Evidence) -> tuple[QuantileTest, ...]:
    return tuple(
        QuantileTest(
            quantile=t.quantile,
            a_us=t.a_us,
            b_us=t.b_us,
            ratio=t.ratio,
            ci=t.ci,
            p_value=t.p_value,
            verdict=t.verdict,
            blocks=t.blocks,
            queue_us=t.queue_us,
            compute_us=t.compute_us,
            queue_share=t.queue_share,
            vs_shift=t.vs_shift,
            ci_vs_shift=_pair(t.vs_shift_ci),
            evidence=packs.get(("shape", s.shape, t.quantile)),
        )
        for t in s.tests
    )


def _split(shape: str, parts: tuple[Parts, Parts]) -> dict[str, PartQuantiles | None]:
    """Each side's latency, queue and compute quantiles of a shape, by compare.json's key."""
    out: dict[str, PartQuantiles | None] = {}
    for side, held in zip("ab", parts, strict=True):
        for part, q in held.get(shape, {}).items():
            out[f"{part}_{side}"] = (
                None if q is None else PartQuantiles(p50_us=q[0], p95_us=q[1], p99_us=q[2])
            )
    return out


def _shapes_doc(
    c: Comparison, parts: tuple[Parts, Parts], packs: Evidence
) -> tuple[ShapeCompared, ...]:
    return tuple(
        carried(
            ShapeCompared,
            s,
            ci_p95=_pair(s.ci_p95),
            evidence=packs.get(("shape", s.shape)),
            quantiles=_tests_doc(s, packs),
            **_split(s.shape, parts),
        )
        for s in c.shapes
    )


def _ops_doc(c: Comparison, packs: Evidence) -> tuple[OpCompared, ...]:
    return tuple(
        carried(
            OpCompared,
            o,
            ci=_pair(o.ci),
            shape_recorded=o.recorded,
            evidence=packs.get(("op", o.op, o.shape, o.types)),
        )
        for o in c.ops
    )


def _only_doc(rows: tuple[OpOnly, ...]) -> tuple[OpOneSide, ...]:
    return tuple(carried(OpOneSide, o, shape_recorded=o.recorded) for o in rows)


def _whole_doc(t: TotalComparison | None) -> Whole | None:
    if t is None:
        return None
    return Whole(
        basis_a=t.basis_a,
        basis_b=t.basis_b,
        devices_a=tuple(t.devices_a),
        devices_b=tuple(t.devices_b),
        a_us=t.a_us,
        b_us=t.b_us,
        calls_a=t.calls_a,
        calls_b=t.calls_b,
        ratio=t.ratio,
        ci=t.ci,
        moved=t.moved,
        categories=tuple(carried(CategoryCompared, x) for x in t.categories),
    )


def _side(s: Side) -> CompareSide:
    return carried(CompareSide, s)


def document(
    c: Comparison,
    a: Side,
    b: Side,
    generated_at: str,
    mapping: MappingComparison | None = None,
    ship: ShipCheck | None = None,
    parts: tuple[Parts, Parts] | None = None,
    runs: RunsCompared | None = None,
    evidence: Evidence | None = None,
    total: TotalComparison | None = None,
    tuning: TuningComparison | None = None,
) -> CompareJson:
    """compare.json, the whole first (`parts`: each side's latency, queue and compute quantiles
    per shape; `evidence`: each figure's pack id; `total`: the traces' whole); `as_json` gives
    what the file holds."""
    packs = evidence or {}
    return CompareJson(
        schema_version=COMPARE_SCHEMA_VERSION,
        generator=f"mapreport {__version__}",
        generated_at=generated_at,
        a=_side(a),
        b=_side(b),
        verdict=" ".join(x for x in (headline(c, total), tuning_sentence(tuning)) if x),
        whole=_whole_doc(total),
        ship=_ship_doc(ship),
        runs=_runs_doc(runs),
        mapping=_mapping_doc(mapping),
        tuning=tuning_doc(tuning) if tuning is not None else None,
        basis=c.basis,
        blocks=SideBlocks(a=_block_doc(c.blocks[0]), b=_block_doc(c.blocks[1])),
        blocks_text=blocks_sentence(c),
        run_shift=tuple(
            RunShift(quantile=r.quantile, ratio=r.ratio, ci=r.ci, shapes=r.shapes, moved=r.moved)
            for r in c.shifts
        ),
        fdr=c.fdr,
        tested=c.tested,
        tests=c.tests,
        tail=_tail_doc(c, packs),
        mean_latency=MeanLatency(
            a_us=c.mean_a_us,
            b_us=c.mean_b_us,
            change_us=c.mean_b_us - c.mean_a_us,
            one_side_us=c.one_side_us,
        ),
        renamed_b=tuple(Renamed(b=b_name, a=a_name) for b_name, a_name in c.renamed),
        shapes=_shapes_doc(c, parts or ({}, {}), packs),
        only_a=tuple(c.only_a),
        only_b=tuple(c.only_b),
        ops=_ops_doc(c, packs),
        ops_only_a=_only_doc(c.ops_only_a),
        ops_only_b=_only_doc(c.ops_only_b),
    )
